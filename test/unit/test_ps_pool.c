/* test_ps_pool.c - the shard's block pool: alignment, no overlap, reuse of
 * freed blocks and alignment gaps, a new chunk only when one is used up,
 * and threads at once. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "t.h"

#include <pthread.h>
#include <string.h>

#include "ps_pool.h"
#include "ss_hash.h"
#include "ss_log.h"

/* Blocks of every size are aligned to their size, lie inside the pool's
 * chunks, and do not overlap: each is filled with its own byte and all are
 * checked after every one was written. */
static void test_aligned_disjoint(void **state)
{
    (void)state;
    enum { N = 600 };
    ps_pool_t *p = ps_pool_new();
    unsigned char *b[N];
    size_t sz[N];
    uint64_t rng = 7;

    for (int i = 0; i < N; i++) {
        sz[i] = (size_t)PS_POOL_MIN << (ss_mix64(++rng) % 13);   /* 64 B .. 256 KiB */
        b[i] = ps_pool_get(p, sz[i]);
        assert_int_equal((uintptr_t)b[i] % sz[i], 0);
        memset(b[i], i & 0xff, sz[i]);
    }
    for (int i = 0; i < N; i++)
        for (size_t k = 0; k < sz[i]; k += 61)
            assert_int_equal(b[i][k], i & 0xff);
    for (int i = 0; i < N; i++)
        ps_pool_put(p, b[i], sz[i]);
    ps_pool_destroy(&p);
    assert_null(p);
    ps_pool_destroy(&p);   /* NULL is fine */
    ps_pool_destroy(NULL);
}

/* The pool grows one chunk at a time, only when the last is used up: 32
 * blocks of 64 KiB fill one 2 MiB chunk, the 33rd takes a second. */
static void test_grows_by_chunks(void **state)
{
    (void)state;
    ps_pool_t *p = ps_pool_new();
    void *b[33];

    assert_int_equal(ps_pool_chunk_bytes(p), 0);
    assert_int_equal(ps_pool_idle_bytes(p), 0);
    for (int i = 0; i < 32; i++)
        b[i] = ps_pool_get(p, 64u << 10);
    assert_int_equal(ps_pool_chunk_bytes(p), PS_POOL_CHUNK);
    b[32] = ps_pool_get(p, 64u << 10);
    assert_int_equal(ps_pool_chunk_bytes(p), 2u * PS_POOL_CHUNK);
    assert_int_equal(ps_pool_idle_bytes(p), PS_POOL_CHUNK - (64u << 10));
    for (int i = 0; i < 33; i++)
        ps_pool_put(p, b[i], 64u << 10);
    /* freed blocks come back before any new chunk is taken */
    for (int i = 0; i < 33; i++)
        b[i] = ps_pool_get(p, 64u << 10);
    assert_int_equal(ps_pool_chunk_bytes(p), 2u * PS_POOL_CHUNK);
    ps_pool_destroy(&p);
}

/* ps_pool_trim() gives back exactly the chunks of which no block is out, and
 * the pool serves on: with 33 blocks of 64 KiB over 2 chunks, nothing while
 * all are out; the second chunk once its one block is back (the first
 * stays, its blocks out); both when all are back; new chunks after. */
static void test_trim(void **state)
{
    (void)state;
    ps_pool_t *p = ps_pool_new();
    void *b[33];

    assert_int_equal(ps_pool_trim(p), 0);   /* empty */
    for (int i = 0; i < 33; i++)
        b[i] = ps_pool_get(p, 64u << 10);
    assert_int_equal(ps_pool_trim(p), 0);
    assert_int_equal(ps_pool_chunk_bytes(p), 2u * PS_POOL_CHUNK);
    ps_pool_put(p, b[32], 64u << 10);
    assert_int_equal(ps_pool_trim(p), PS_POOL_CHUNK);
    assert_int_equal(ps_pool_chunk_bytes(p), PS_POOL_CHUNK);
    assert_int_equal(ps_pool_idle_bytes(p), 0);
    for (int i = 0; i < 31; i++)
        ps_pool_put(p, b[i], 64u << 10);
    assert_int_equal(ps_pool_trim(p), 0);   /* b[31] is still out */
    ps_pool_put(p, b[31], 64u << 10);
    assert_int_equal(ps_pool_trim(p), PS_POOL_CHUNK);
    assert_int_equal(ps_pool_chunk_bytes(p), 0);
    assert_int_equal(ps_pool_idle_bytes(p), 0);
    for (int i = 0; i < 33; i++) {   /* serves on, from new chunks, blocks disjoint */
        b[i] = ps_pool_get(p, 64u << 10);
        memset(b[i], i, 64u << 10);
    }
    for (int i = 0; i < 33; i++)
        assert_int_equal(((unsigned char *)b[i])[(64u << 10) - 1], i);
    assert_int_equal(ps_pool_chunk_bytes(p), 2u * PS_POOL_CHUNK);
    /* a chunk partly carved (its tail never given out) is whole once its
     * blocks are back */
    void *small = ps_pool_get(p, 64);
    ps_pool_put(p, small, 64);
    for (int i = 0; i < 33; i++)
        ps_pool_put(p, b[i], 64u << 10);
    assert_int_equal(ps_pool_trim(p), 2u * PS_POOL_CHUNK);
    assert_int_equal(ps_pool_chunk_bytes(p), 0);
    ps_pool_destroy(&p);
}

/* ps_pool_trim() amid random gets and puts of every size: the blocks still
 * out keep their bytes (a trim that freed a chunk one of them is in would
 * show here, and under ASan as a use after free), the chunks held never
 * fall below the bytes out, and once all are back one trim gives every
 * chunk back. */
static void test_trim_random(void **state)
{
    (void)state;
    enum { N = 600 };
    ps_pool_t *p = ps_pool_new();
    unsigned char *b[N] = {0};
    size_t sz[N] = {0};
    uint64_t rng = 7;
    size_t released = 0;
    for (int it = 0; it < 20000; it++) {
        int i = (int)(ss_mix64(++rng) % N);
        if (b[i]) {
            for (size_t k = 0; k < sz[i]; k += 61)
                if (b[i][k] != (unsigned char)(i + sz[i]))
                    fail_msg("iteration %d: block %d (%zu bytes) changed at %zu", it, i, sz[i],
                             k);
            ps_pool_put(p, b[i], sz[i]);
            b[i] = NULL;
        } else {
            sz[i] = (size_t)PS_POOL_MIN << (ss_mix64(++rng) % 15);   /* 64 B .. 1 MiB */
            b[i] = ps_pool_get(p, sz[i]);
            memset(b[i], (unsigned char)(i + sz[i]), sz[i]);
        }
        if (it % 97 == 0) {
            released += ps_pool_trim(p);
            size_t out = 0;
            for (int j = 0; j < N; j++)
                out += b[j] ? sz[j] : 0;
            assert_true(ps_pool_chunk_bytes(p) >= out);
        }
    }
    print_message("trim_random: %zu chunks given back by the trims amid\n",
                  released / PS_POOL_CHUNK);
    assert_true(released > 0);   /* the trims amid had chunks to give back */
    for (int i = 0; i < N; i++)
        if (b[i]) {
            for (size_t k = 0; k < sz[i]; k += 61)
                assert_int_equal(b[i][k], (unsigned char)(i + sz[i]));
            ps_pool_put(p, b[i], sz[i]);
        }
    (void)ps_pool_trim(p);
    assert_int_equal(ps_pool_chunk_bytes(p), 0);
    ps_pool_destroy(&p);
}

/* A freed block is the next one given of its size (last in, first out), and
 * the gap that aligning a large block leaves serves smaller ones: after a
 * 64-byte block and a 1 MiB one (at 1 MiB), 1 MiB - 64 bytes of gap hold
 * blocks of 64 B .. 512 KiB without a second chunk. A larger free block is
 * split for a smaller request. */
static void test_reuse_and_gaps(void **state)
{
    (void)state;
    ps_pool_t *p = ps_pool_new();
    unsigned char *small = ps_pool_get(p, 64);
    unsigned char *big = ps_pool_get(p, PS_POOL_MAX);

    assert_ptr_equal(big, small + PS_POOL_MAX);
    for (size_t s = PS_POOL_MIN; s < PS_POOL_MAX; s *= 2) {
        unsigned char *g = ps_pool_get(p, s);
        assert_true(g > small && g < big);
    }
    assert_int_equal(ps_pool_chunk_bytes(p), PS_POOL_CHUNK);
    assert_int_equal(ps_pool_idle_bytes(p), 0);   /* the chunk is all given out */
    ps_pool_put(p, small, 64);
    assert_int_equal(ps_pool_idle_bytes(p), 64);
    assert_ptr_equal(ps_pool_get(p, 64), small);
    assert_int_equal(ps_pool_idle_bytes(p), 0);
    /* with no free block of its size, a request splits the smallest larger
     * one: its first part is given, the rest serves the next requests */
    ps_pool_put(p, big, PS_POOL_MAX);
    assert_ptr_equal(ps_pool_get(p, 4096), big);
    assert_ptr_equal(ps_pool_get(p, 4096), big + 4096);
    assert_ptr_equal(ps_pool_get(p, 8192), big + 8192);
    assert_int_equal(ps_pool_chunk_bytes(p), PS_POOL_CHUNK);
    assert_int_equal(ps_pool_idle_bytes(p), PS_POOL_MAX - 16384);
    ps_pool_destroy(&p);
}

/* Several threads take and give back blocks at once: no block is given to
 * two of them (each checks its own pattern). Meant for TSan and ASan. */
struct s_worker {
    ps_pool_t *p;
    unsigned id;
    int bad;
};

static void *s_worker_run(void *arg)
{
    struct s_worker *w = arg;
    enum { K = 64 };
    unsigned char *b[K];
    size_t sz[K];
    uint64_t rng = w->id * 1000003u;

    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < K; i++) {
            sz[i] = (size_t)PS_POOL_MIN << (ss_mix64(++rng) % 11);
            b[i] = ps_pool_get(w->p, sz[i]);
            memset(b[i], (int)(w->id + (unsigned)i), sz[i]);
        }
        for (int i = 0; i < K; i++) {
            for (size_t k = 0; k < sz[i]; k += 97)
                w->bad += b[i][k] != (unsigned char)(w->id + (unsigned)i);
            ps_pool_put(w->p, b[i], sz[i]);
        }
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    enum { T = 4 };
    ps_pool_t *p = ps_pool_new();
    pthread_t th[T];
    struct s_worker w[T];

    for (unsigned i = 0; i < T; i++) {
        w[i] = (struct s_worker){p, i + 1, 0};
        assert_int_equal(pthread_create(&th[i], NULL, s_worker_run, &w[i]), 0);
    }
    for (unsigned i = 0; i < T; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(w[i].bad, 0);
    }
    ps_pool_destroy(&p);
}

int main(void)
{
    ss_log_init("test", SS_LOG_ERROR + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aligned_disjoint),
        cmocka_unit_test(test_grows_by_chunks),
        cmocka_unit_test(test_reuse_and_gaps),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_trim),
        cmocka_unit_test(test_trim_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
