/* test_tr_dedup.c - unit tests of trainer/tr_dedup: the key set that maps a
 * key to its first position, emptied in O(1), against a plain search. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ss_cluster.h"
#include "ss_hash.h"
#include "tr_dedup.h"

/* Insert keys [n] into a fresh set and check every answer against the first
 * index of the same key in keys. */
static void s_check_set(struct tr_dedup *d, const uint64_t *keys, uint32_t n)
{
    tr_dedup_begin(d, n);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t want = i;
        for (uint32_t j = 0; j < i; j++)
            if (keys[j] == keys[i]) {
                want = j;
                break;
            }
        assert_int_equal(tr_dedup_insert(d, keys[i], i), want);
    }
}

/* Duplicates answer the first position; a new set forgets the old keys. */
static void test_first_position(void **state)
{
    (void)state;
    struct tr_dedup d;
    tr_dedup_init(&d);
    const uint64_t keys[] = {5, 9, 5, 0, 9, 9, UINT64_MAX, 0, 5};
    s_check_set(&d, keys, 9);
    tr_dedup_begin(&d, 4);
    assert_int_equal(tr_dedup_insert(&d, 9, 7), 7);   /* new again */
    assert_int_equal(tr_dedup_insert(&d, 5, 8), 8);
    assert_int_equal(tr_dedup_insert(&d, 9, 9), 7);
    tr_dedup_fini(&d);
}

/* Keys that share their low bits or their high bits (the hash uses the top
 * bits of key * phi) still work: probing over full sets, sets of every size
 * and the table growing while old stamps remain in its slots. */
static void test_colliding_and_growing(void **state)
{
    (void)state;
    struct tr_dedup d;
    uint64_t keys[600], st = 3;
    tr_dedup_init(&d);
    for (uint32_t n = 1; n <= 600; n = n * 3 / 2 + 1) {
        for (uint32_t i = 0; i < n; i++) {
            switch (i % 3) {
            case 0: keys[i] = (uint64_t)(i % 37) << 40; break;      /* low bits equal */
            case 1: keys[i] = (ss_rand_next(&st) % 50) | 0xff00000000000000ull; break;
            default: keys[i] = ss_rand_next(&st); break;
            }
        }
        s_check_set(&d, keys, n);
        s_check_set(&d, keys, n / 2);  /* smaller set on the larger table */
    }
    tr_dedup_fini(&d);
}

/* The stamp wrapping around empties every slot for real. */
static void test_stamp_wrap(void **state)
{
    (void)state;
    struct tr_dedup d;
    tr_dedup_init(&d);
    tr_dedup_begin(&d, 8);
    assert_int_equal(tr_dedup_insert(&d, 42, 0), 0);
    d.stamp = UINT32_MAX;  /* the next begin wraps */
    tr_dedup_begin(&d, 8);
    assert_int_equal(d.stamp, 1u);
    assert_int_equal(tr_dedup_insert(&d, 42, 3), 3);
    assert_int_equal(tr_dedup_insert(&d, 42, 4), 3);
    tr_dedup_begin(&d, 8);
    assert_int_equal(tr_dedup_insert(&d, 42, 5), 5);
    tr_dedup_fini(&d);
}

/* tr_dedup_add puts keys known to be new (no compare) and tr_dedup_find
 * answers as tr_dedup_insert would without changing the set: colliding keys
 * (equal low bits, equal high bits) over sets of every size, absent keys
 * answered `none` (and still absent after), keys of an earlier set
 * forgotten, keys added by tr_dedup_insert found too. */
static void test_add_and_find(void **state)
{
    (void)state;
    struct tr_dedup d;
    uint64_t keys[800], st = 5;
    tr_dedup_init(&d);
    for (uint32_t n = 1; n <= 400; n = n * 3 / 2 + 1) {
        for (uint32_t i = 0; i < 2 * n; i++) {  /* 2n distinct keys: n in, n out */
            switch (i % 3) {
            case 0: keys[i] = (uint64_t)i << 40; break;            /* low bits equal */
            case 1: keys[i] = (uint64_t)i | 0xff00000000000000ull; break;
            default: keys[i] = (ss_rand_next(&st) << 12) | i; break;
            }
        }
        tr_dedup_begin(&d, n);
        for (uint32_t i = 0; i < n; i++)
            if (i % 4 == 3)  /* some by insert, the rest by add */
                assert_int_equal(tr_dedup_insert(&d, keys[i], 10 * i), 10 * i);
            else
                tr_dedup_add(&d, keys[i], 10 * i);
        for (int pass = 0; pass < 2; pass++)
            for (uint32_t i = 0; i < 2 * n; i++)
                assert_int_equal(tr_dedup_find(&d, keys[i], UINT32_MAX),
                                 i < n ? 10 * i : UINT32_MAX);
        for (uint32_t i = 0; i < n; i++)  /* insert agrees: all there */
            assert_int_equal(tr_dedup_insert(&d, keys[i], 7), 10 * i);
        tr_dedup_begin(&d, n);  /* a new set forgets them */
        for (uint32_t i = 0; i < 2 * n; i++)
            assert_int_equal(tr_dedup_find(&d, keys[i], 3), 3);
    }
    tr_dedup_fini(&d);
}

/* The expected grouping of a batch, built the plainest way: walk the
 * values field-major, search the field's earlier values for the key, append
 * a new key to its shard's list (a new group when the field changes). */
struct s_group {
    uint64_t keys[512];
    uint32_t tables[8], counts[8];
    size_t n_keys, n_groups;
};

static void s_expect(const uint64_t *keys, const uint32_t *offs, uint32_t B, uint32_t F,
                     uint32_t S, struct s_group *g, uint32_t *shard, uint32_t *index)
{
    memset(g, 0, S * sizeof *g);
    for (uint32_t f = 0; f < F; f++)
        for (uint32_t b = 0; b < B; b++)
            for (uint32_t i = offs[b * F + f]; i < offs[b * F + f + 1]; i++) {
                uint32_t first = i;
                for (uint32_t bb = 0; bb <= b && first == i; bb++)
                    for (uint32_t j = offs[bb * F + f]; j < offs[bb * F + f + 1] && j < i; j++)
                        if (keys[j] == keys[i]) {
                            first = j;
                            break;
                        }
                if (first != i) {
                    shard[i] = shard[first];
                    index[i] = index[first];
                    continue;
                }
                uint32_t s = ss_key_shard(keys[i], S);
                struct s_group *p = &g[s];
                if (p->n_groups == 0 || p->tables[p->n_groups - 1] != f) {
                    p->tables[p->n_groups] = f;
                    p->counts[p->n_groups++] = 0;
                }
                p->counts[p->n_groups - 1]++;
                shard[i] = s;
                index[i] = (uint32_t)p->n_keys;
                p->keys[p->n_keys++] = keys[i];
            }
}

/* tr_dedup_batch groups a batch exactly as the plain walk does: the same
 * keys in the same order per shard, the same (table, count) groups, the
 * same place for every value. Batches of one value per position (the fast
 * path) and of 0-3 values per position (empty fields included), over 1-3
 * shards, keys repeated within a field and across fields. */
static void test_batch_grouping(void **state)
{
    (void)state;
    enum { B = 24, F = 5, MAXV = B * F * 3 };
    uint64_t keys[MAXV], st = 11;
    uint32_t offs[B * F + 1], shard[MAXV], index[MAXV], want_shard[MAXV], want_index[MAXV];
    static struct s_group want[3];
    struct tr_dedup_part parts[3];
    uint64_t pk[3][MAXV];
    uint32_t pt[3][F], pc[3][F];
    struct tr_dedup d;
    tr_dedup_init(&d);
    for (uint32_t S = 1; S <= 3; S++)
        for (int shape = 0; shape < 4; shape++) {
            /* shape 0: one value per position; 1-3: 0..shape values */
            offs[0] = 0;
            for (uint32_t p = 0; p < B * F; p++)
                offs[p + 1] = offs[p] + (shape ? (uint32_t)(ss_rand_next(&st) % (shape + 1)) : 1);
            uint32_t n = offs[B * F];
            for (uint32_t i = 0; i < n; i++)  /* few distinct keys: many repeats */
                keys[i] = ss_rand_next(&st) % (shape == 2 ? 3 : 9);
            for (uint32_t s = 0; s < S; s++)
                parts[s] = (struct tr_dedup_part){pk[s], pt[s], pc[s], 99, 99};
            memset(shard, 0xff, sizeof shard);
            memset(index, 0xff, sizeof index);
            tr_dedup_batch(&d, keys, offs, B, F, parts, S, shard, index);
            s_expect(keys, offs, B, F, S, want, want_shard, want_index);
            for (uint32_t s = 0; s < S; s++) {
                assert_int_equal(parts[s].n_keys, want[s].n_keys);
                assert_int_equal(parts[s].n_groups, want[s].n_groups);
                assert_memory_equal(parts[s].keys, want[s].keys, want[s].n_keys * 8);
                assert_memory_equal(parts[s].tables, want[s].tables, want[s].n_groups * 4);
                assert_memory_equal(parts[s].counts, want[s].counts, want[s].n_groups * 4);
            }
            assert_memory_equal(shard, want_shard, n * 4);
            assert_memory_equal(index, want_index, n * 4);
        }
    tr_dedup_fini(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_position),
        cmocka_unit_test(test_colliding_and_growing),
        cmocka_unit_test(test_stamp_wrap),
        cmocka_unit_test(test_add_and_find),
        cmocka_unit_test(test_batch_grouping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
