/* test_ps_ckpt_set.c - restoring a saved checkpoint set into another shard
 * count: embedding rows re-sharded (every saved row on exactly the shard the
 * key map names, with identical weights and optimizer state), the sync center
 * re-sliced, incomplete or mixed sets refused, files of an earlier save
 * ignored, and version-1 files (no recorded shard count) restored into the
 * count of the files present only. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "t.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ps_ckpt.h"
#include "ps_ckpt_set.h"
#include "ps_embed.h"
#include "ps_sync.h"
#include "ss_cfg.h"
#include "ss_err.h"
#include "ss_cluster.h"
#include "ss_hash.h"
#include "ss_log.h"

enum {
    N_KEYS = 3000,   /* keys per table pushed into the saved job */
    N_TABLES = 3,
    DIM = 5,         /* 4 embedding floats and a first-order weight */
    MAX_T = 4,       /* most shards a test restores into */
    CENTER = 1001,   /* floats of the sync center */
};

#define JOB_ID 0x1234abcdull
#define SAVE_ID 0x5eed5eedull

static int setup(void **state)
{
    return t_fix_setup(state, "ckptset", "unused");
}

static int teardown(void **state)
{
    return t_fix_teardown(state);
}

static struct ps_embed_conf s_conf(int optimizer)
{
    struct ps_embed_conf c = {
        .n_tables = N_TABLES,
        .dim = DIM,
        .first_order = 1,
        .optimizer = optimizer,
        .lr = 0.05f,
        .eps = 1e-6f,
        .init_acc = 0.1f,
        .init_scale = 0.1f,
        .seed = 42,
        .capacity_rows = 1u << 16,
        .n_stripes = 8,
    };
    return c;
}

static uint64_t s_key(uint32_t table, size_t i)
{
    return ss_key_make(table, i);
}

/* The saved job: n shards, each holding the keys ss_key_shard() gives it,
 * trained by three rounds of pushes with varied gradients; keys i with
 * i % 7 == 3 are never pushed (not stored anywhere). */
static void s_train(ps_embed_t **shards, uint32_t n)
{
    uint64_t rng = 11;
    float g[DIM];
    for (int round = 0; round < 3; round++)
        for (uint32_t t = 0; t < N_TABLES; t++)
            for (size_t i = 0; i < N_KEYS; i++) {
                if (i % 7 == 3)
                    continue;
                uint64_t key = s_key(t, i);
                for (int d = 0; d < DIM; d++)
                    g[d] = ss_rand_unit(&rng) - 0.5f;
                ps_embed_t *e = shards[ss_key_shard(key, n)];
                assert_int_equal(ps_embed_push(e, t, &key, 1, g, NULL), 0);
            }
}

/* Save every shard of a job with n shards into dir as one save. */
static void s_save(ps_embed_t **shards, uint32_t n, const char *dir, uint64_t save_id)
{
    char path[512];
    for (uint32_t k = 0; k < n; k++) {
        struct ps_ckpt_who who = {k, n, JOB_ID, save_id};
        ps_ckpt_path(path, sizeof path, dir, PS_CKPT_NAME_EMBED, k);
        assert_int_equal(ps_embed_checkpoint(shards[k], path, &who), 0);
    }
}

/* New shards 0..t-1 of a job with t shards, each restored from dir; returns
 * the first restore error (the shards are made either way). */
static int s_restore(ps_embed_t **out, uint32_t t, int optimizer, const char *dir)
{
    struct ps_embed_conf c = s_conf(optimizer);
    int first = 0;
    for (uint32_t k = 0; k < t; k++) {
        c.n_stripes = 4u << k;   /* other stripe counts than the writer's: fine */
        out[k] = ps_embed_new(&c);
        assert_non_null(out[k]);
        int rc = ps_embed_restore_dir(out[k], dir, k, t);
        if (rc && !first)
            first = rc;
    }
    return first;
}

static void s_destroy(ps_embed_t **shards, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        ps_embed_destroy(&shards[k]);
}

/* The restored shards (t of them) hold exactly the saved rows (s shards):
 * every saved row on shard ss_key_shard(key, t) only, weights and optimizer
 * state bit for bit, and no other row. */
static void s_assert_resharded(ps_embed_t **saved, uint32_t s, ps_embed_t **got, uint32_t t)
{
    size_t rf = ps_embed_row_floats(saved[0]);
    float want[2 * DIM + 2], have[2 * DIM + 2];
    size_t saved_rows = 0, got_rows = 0, seen = 0;

    for (uint32_t k = 0; k < s; k++)
        saved_rows += ps_embed_rows(saved[k]);
    for (uint32_t k = 0; k < t; k++)
        got_rows += ps_embed_rows(got[k]);
    assert_int_equal(got_rows, saved_rows);
    for (uint32_t tb = 0; tb < N_TABLES; tb++)
        for (size_t i = 0; i < N_KEYS; i++) {
            uint64_t key = s_key(tb, i);
            int rc = ps_embed_read_row(saved[ss_key_shard(key, s)], tb, key, want);
            assert_int_equal(rc, i % 7 == 3 ? SS_E_NOTFOUND : 0);
            for (uint32_t k = 0; k < t; k++) {
                int rk = ps_embed_read_row(got[k], tb, key, have);
                if (rc == 0 && k == ss_key_shard(key, t)) {
                    assert_int_equal(rk, 0);
                    assert_memory_equal(have, want, rf * sizeof(float));
                    seen++;
                } else {
                    assert_int_equal(rk, SS_E_NOTFOUND);
                }
            }
        }
    assert_int_equal(seen, saved_rows);
    for (uint32_t k = 0; k < t; k++)
        assert_int_equal(ps_embed_verify(got[k]), 0);
}

/* Save with 2 shards, restore into 1, 2, 3 and 4: the union is the saved rows,
 * for each optimizer (rowwise and full Adagrad carry state per row). */
static void test_embed_reshard(void **state)
{
    struct t_fix *f = *state;
    int opts[3] = {SS_OPT_SGD, SS_OPT_ADAGRAD, SS_OPT_ROWWISE_ADAGRAD};

    for (int o = 0; o < 3; o++) {
        struct ps_embed_conf c = s_conf(opts[o]);
        ps_embed_t *saved[2] = {ps_embed_new(&c), ps_embed_new(&c)};
        s_train(saved, 2);
        assert_true(ps_embed_rows(saved[0]) > 1000 && ps_embed_rows(saved[1]) > 1000);
        s_save(saved, 2, f->dir, SAVE_ID);
        for (uint32_t t = 1; t <= MAX_T; t++) {
            ps_embed_t *got[MAX_T] = {0};
            assert_int_equal(s_restore(got, t, opts[o], f->dir), 0);
            s_assert_resharded(saved, 2, got, t);
            s_destroy(got, t);
        }
        s_destroy(saved, 2);
    }
}

/* A restored shard keeps training like the saved one: the same push on the
 * saved and the re-sharded row gives the same row. */
static void test_embed_reshard_keeps_training(void **state)
{
    struct t_fix *f = *state;
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD);
    ps_embed_t *saved[2] = {ps_embed_new(&c), ps_embed_new(&c)};
    ps_embed_t *got[3] = {0};
    float g[DIM] = {0.5f, -0.25f, 1, 2, -1}, a[DIM + 2], b[DIM + 2];

    s_train(saved, 2);
    s_save(saved, 2, f->dir, SAVE_ID);
    assert_int_equal(s_restore(got, 3, SS_OPT_ROWWISE_ADAGRAD, f->dir), 0);
    for (size_t i = 0; i < 50; i++) {
        uint64_t key = s_key(2, i);
        if (i % 7 == 3)
            continue;
        ps_embed_t *x = saved[ss_key_shard(key, 2)], *y = got[ss_key_shard(key, 3)];
        assert_int_equal(ps_embed_push(x, 2, &key, 1, g, NULL), 0);
        assert_int_equal(ps_embed_push(y, 2, &key, 1, g, NULL), 0);
        assert_int_equal(ps_embed_read_row(x, 2, key, a), 0);
        assert_int_equal(ps_embed_read_row(y, 2, key, b), 0);
        assert_memory_equal(a, b, ps_embed_row_floats(x) * sizeof(float));
    }
    s_destroy(got, 3);
    s_destroy(saved, 2);
}

/* Run restore_dir of shard k of t into a shard holding one marker row with
 * stderr captured; returns the rc, the log in text (caller frees), and checks
 * that a failed restore left the marker row alone. */
static int s_try(struct t_fix *f, uint32_t k, uint32_t t, char **text)
{
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD);
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t marker = 777;
    float row[2 * DIM + 2];   /* read_row: weights and state */
    char log_path[400];

    assert_int_equal(ps_embed_lookup(e, 0, &marker, 1, row, NULL), 0);
    snprintf(log_path, sizeof log_path, "%s/stderr.log", f->dir);
    int saved = dup(STDERR_FILENO);
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, STDERR_FILENO);
    close(fd);
    int level = ss_log_level_now;
    ss_log_level_now = SS_LOG_INFO;
    int rc = ps_embed_restore_dir(e, f->dir, k, t);
    ss_log_level_now = level;
    dup2(saved, STDERR_FILENO);
    close(saved);
    *text = calloc(1, 16384);
    FILE *fp = fopen(log_path, "rb");
    assert_non_null(fp);
    (*text)[fread(*text, 1, 16383, fp)] = '\0';
    fclose(fp);
    unlink(log_path);
    if (rc != 0) {
        assert_int_equal(ps_embed_rows(e), 1);
        assert_int_equal(ps_embed_read_row(e, 0, marker, row), 0);
    }
    ps_embed_destroy(&e);
    return rc;
}

static void s_path(char *out, size_t len, struct t_fix *f, const char *role, uint32_t k)
{
    ps_ckpt_path(out, len, f->dir, role, k);
}

/* What happened is logged: "restored N rows from M files (saved with S
 * shards, this job has T; re-sharded)". */
static void test_embed_reshard_logged(void **state)
{
    struct t_fix *f = *state;
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD);
    ps_embed_t *saved[2] = {ps_embed_new(&c), ps_embed_new(&c)};
    char *text, want[200];

    s_train(saved, 2);
    s_save(saved, 2, f->dir, SAVE_ID);
    size_t all = ps_embed_rows(saved[0]) + ps_embed_rows(saved[1]);
    assert_int_equal(s_try(f, 0, 1, &text), 0);
    snprintf(want, sizeof want, "restored %zu rows from 2 files (saved with 2 shards, this job "
             "has 1; re-sharded)", all);
    if (!strstr(text, want))
        fail_msg("log lacks '%s':\n%s", want, text);
    free(text);
    /* the same count reads the own file only, as before */
    assert_int_equal(s_try(f, 1, 2, &text), 0);
    snprintf(want, sizeof want, "restored %zu rows", ps_embed_rows(saved[1]));
    assert_non_null(strstr(text, want));
    assert_null(strstr(text, "re-sharded"));
    free(text);
    s_destroy(saved, 2);
}

/* Incomplete or mixed sets are refused, naming the file; the shard is left
 * unchanged. */
static void test_embed_set_refused(void **state)
{
    struct t_fix *f = *state;
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD);
    ps_embed_t *saved[3] = {ps_embed_new(&c), ps_embed_new(&c), ps_embed_new(&c)};
    char p1[512], keep[560], *text;

    s_train(saved, 2);
    s_save(saved, 2, f->dir, SAVE_ID);
    s_path(p1, sizeof p1, f, PS_CKPT_NAME_EMBED, 1);
    snprintf(keep, sizeof keep, "%s.keep", p1);
    assert_int_equal(rename(p1, keep), 0);

    /* embedding-1 missing: no other count can be restored */
    for (uint32_t t = 1; t <= 3; t += 2) {
        assert_int_equal(s_try(f, 0, t, &text), SS_E_NOTFOUND);
        assert_non_null(strstr(text, p1));
        assert_non_null(strstr(text, "is missing"));
        free(text);
    }
    /* shard 0 of the same count needs only its own file */
    assert_int_equal(s_try(f, 0, 2, &text), 0);
    free(text);

    /* embedding-1 from another save (same job, same count) */
    struct ps_ckpt_who other = {1, 2, JOB_ID, SAVE_ID + 1};
    assert_int_equal(ps_embed_checkpoint(saved[1], p1, &other), 0);
    assert_int_equal(s_try(f, 0, 3, &text), SS_E_CORRUPT);
    assert_non_null(strstr(text, p1));
    assert_non_null(strstr(text, "different saves"));
    free(text);
    /* another job */
    other.save_id = SAVE_ID;
    other.job_id = JOB_ID + 1;
    assert_int_equal(ps_embed_checkpoint(saved[1], p1, &other), 0);
    assert_int_equal(s_try(f, 0, 1, &text), SS_E_CORRUPT);
    free(text);
    /* a file that says another shard count */
    struct ps_ckpt_who three = {1, 3, JOB_ID, SAVE_ID};
    assert_int_equal(ps_embed_checkpoint(saved[1], p1, &three), 0);
    assert_int_equal(s_try(f, 0, 1, &text), SS_E_CORRUPT);
    free(text);
    /* the right file back: fine again */
    assert_int_equal(rename(keep, p1), 0);
    assert_int_equal(s_try(f, 0, 3, &text), 0);
    free(text);

    /* a payload flipped in a file another shard owns rows of: refused */
    assert_int_equal(t_flip_byte(p1, PS_CKPT_HDR_BYTES + 40, 0x20), 0);
    assert_int_equal(s_try(f, 0, 3, &text), SS_E_CORRUPT);
    assert_non_null(strstr(text, p1));
    free(text);
    assert_int_equal(t_flip_byte(p1, PS_CKPT_HDR_BYTES + 40, 0x20), 0);

    /* another shape (dim) is refused */
    struct ps_embed_conf c2 = s_conf(SS_OPT_ROWWISE_ADAGRAD);
    c2.dim = DIM + 1;
    ps_embed_t *wide = ps_embed_new(&c2);
    assert_int_equal(ps_embed_restore_dir(wide, f->dir, 0, 3), SS_E_CORRUPT);
    assert_int_equal(ps_embed_rows(wide), 0);
    ps_embed_destroy(&wide);

    /* more kept rows than capacity_rows: SS_E_FULL, nothing half-loaded */
    c2 = s_conf(SS_OPT_ROWWISE_ADAGRAD);
    c2.capacity_rows = 100;
    ps_embed_t *small = ps_embed_new(&c2);
    assert_int_equal(ps_embed_restore_dir(small, f->dir, 0, 3), SS_E_FULL);
    assert_int_equal(ps_embed_rows(small), 0);
    ps_embed_destroy(&small);

    /* an empty folder */
    char empty[400];
    snprintf(empty, sizeof empty, "%s/empty", f->dir);
    assert_int_equal(mkdir(empty, 0755), 0);
    assert_int_equal(ps_embed_restore_dir(saved[2], empty, 0, 2), SS_E_NOTFOUND);
    s_destroy(saved, 3);
}

/* A folder that an earlier 3-shard save wrote into, then a 2-shard save:
 * embedding-2.ckpt is not part of the set; restores ignore it (warned). */
static void test_embed_stale_file_ignored(void **state)
{
    struct t_fix *f = *state;
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD);
    ps_embed_t *old[3] = {ps_embed_new(&c), ps_embed_new(&c), ps_embed_new(&c)};
    ps_embed_t *saved[2] = {ps_embed_new(&c), ps_embed_new(&c)};
    uint64_t k0 = 99;
    float g[DIM] = {1, 1, 1, 1, 1};
    char *text;

    for (uint32_t k = 0; k < 3; k++)
        assert_int_equal(ps_embed_push(old[k], 1, &k0, 1, g, NULL), 0);
    s_save(old, 3, f->dir, SAVE_ID - 1);
    s_train(saved, 2);
    s_save(saved, 2, f->dir, SAVE_ID);
    assert_int_equal(s_try(f, 1, 3, &text), 0);
    assert_non_null(strstr(text, "embedding-2.ckpt is not part of the set"));
    free(text);
    ps_embed_t *got[3] = {0};
    assert_int_equal(s_restore(got, 3, SS_OPT_ROWWISE_ADAGRAD, f->dir), 0);
    s_assert_resharded(saved, 2, got, 3);
    s_destroy(got, 3);
    s_destroy(old, 3);
    s_destroy(saved, 2);
}

/* A reused folder: an earlier 3-shard job left embedding-0..2; shard 1 of a new
 * 2-shard job wrote its own file since (a recovery checkpoint before shard 0
 * wrote one). Restarting shard 1 restores its own, newer file alone. */
static void test_embed_own_file_newer_than_leftovers(void **state)
{
    struct t_fix *f = *state;
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD);
    ps_embed_t *old[3] = {ps_embed_new(&c), ps_embed_new(&c), ps_embed_new(&c)};
    ps_embed_t *now[2] = {ps_embed_new(&c), ps_embed_new(&c)};
    char p1[512], *text;

    s_train(old, 3);
    s_save(old, 3, f->dir, 0);
    s_train(now, 2);
    struct ps_ckpt_who who = {1, 2, JOB_ID, 0};
    s_path(p1, sizeof p1, f, PS_CKPT_NAME_EMBED, 1);
    usleep(20000);   /* a later modification time than embedding-0's */
    assert_int_equal(ps_embed_checkpoint(now[1], p1, &who), 0);
    assert_int_equal(s_try(f, 1, 2, &text), 0);
    assert_non_null(strstr(text, "is older and from another save"));
    free(text);
    ps_embed_t *got = ps_embed_new(&c);
    assert_int_equal(ps_embed_restore_dir(got, f->dir, 1, 2), 0);
    assert_int_equal(ps_embed_rows(got), ps_embed_rows(now[1]));
    ps_embed_destroy(&got);
    /* shard 0 has no file of this job: it re-shards the old set (3 into 2) */
    ps_embed_t *zero[1] = {ps_embed_new(&c)};
    assert_int_equal(ps_embed_restore_dir(zero[0], f->dir, 0, 2), SS_E_CORRUPT);
    ps_embed_destroy(&zero[0]);
    s_destroy(old, 3);
    s_destroy(now, 2);
}

/* The same shard count written by two saves (racing 'shadow-ctl checkpoint'
 * calls, or per-PS recovery checkpoints): each PS restores its own file, even
 * when ROLE-0.ckpt is newer and from the other save. */
static void test_embed_same_shape_other_save(void **state)
{
    struct t_fix *f = *state;
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD);
    ps_embed_t *a[2] = {ps_embed_new(&c), ps_embed_new(&c)};
    ps_embed_t *b[2] = {ps_embed_new(&c), ps_embed_new(&c)};
    char p0[512];

    s_train(a, 2);
    s_save(a, 2, f->dir, 11);          /* save 11: both files */
    s_train(b, 2);
    float g[DIM] = {0.5f};
    uint64_t extra = s_key(0, N_KEYS);  /* a row only save 22's shard 0 holds */
    for (size_t j = 1; ss_key_shard(extra, 2) != 0; j++)
        extra = s_key(0, N_KEYS + j);
    assert_int_equal(ps_embed_push(b[0], 0, &extra, 1, g, NULL), 0);
    assert_int_equal(ps_embed_rows(b[0]), ps_embed_rows(a[0]) + 1);
    struct ps_ckpt_who who = {0, 2, JOB_ID, 22};
    s_path(p0, sizeof p0, f, PS_CKPT_NAME_EMBED, 0);
    usleep(20000);   /* embedding-0 of save 22 is the newer file */
    assert_int_equal(ps_embed_checkpoint(b[0], p0, &who), 0);
    for (uint32_t k = 0; k < 2; k++) {
        ps_embed_t *got = ps_embed_new(&c);
        assert_int_equal(ps_embed_restore_dir(got, f->dir, k, 2), 0);
        assert_int_equal(ps_embed_rows(got), ps_embed_rows(k == 0 ? b[0] : a[1]));
        ps_embed_destroy(&got);
    }
    s_destroy(a, 2);
    s_destroy(b, 2);
}

/* Rewrite the version-2 file at path as the version-1 file an older build
 * wrote: the first 72 header bytes with version 1, their checksum, payload. */
static void s_to_v1(const char *path)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    long n = ftell(fp);
    unsigned char *b = malloc((size_t)n);
    rewind(fp);
    assert_int_equal(fread(b, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    assert_int_equal(b[8], 2);
    b[8] = 1;
    uint64_t h = ss_hash_bytes(b, 72, 0);
    for (int i = 0; i < 8; i++)
        b[72 + i] = (unsigned char)(h >> (8 * i));
    fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(b, 1, PS_CKPT_HDR_V1_BYTES, fp), PS_CKPT_HDR_V1_BYTES);
    size_t rest = (size_t)n - PS_CKPT_HDR_BYTES;
    assert_int_equal(fwrite(b + PS_CKPT_HDR_BYTES, 1, rest, fp), rest);
    fclose(fp);
    free(b);
}

/* Version-1 sets record no shard count: restored into the count of the files
 * present as before (logged as inferred), refused for any other count with
 * the fix named. */
static void test_embed_version1(void **state)
{
    struct t_fix *f = *state;
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD);
    ps_embed_t *saved[2] = {ps_embed_new(&c), ps_embed_new(&c)};
    char p0[512], p1[512], *text;

    s_train(saved, 2);
    s_save(saved, 2, f->dir, SAVE_ID);
    s_path(p0, sizeof p0, f, PS_CKPT_NAME_EMBED, 0);
    s_path(p1, sizeof p1, f, PS_CKPT_NAME_EMBED, 1);
    s_to_v1(p0);
    s_to_v1(p1);
    struct ps_ckpt_hdr h;
    ps_ckpt_reader_t *r;
    assert_int_equal(ps_ckpt_open(p1, PS_CKPT_EMBED, &h, &r), 0);
    assert_int_equal(h.version, 1);
    assert_int_equal(h.n_shards, 0);
    assert_int_equal(h.save_id, 0);
    ps_ckpt_close(&r);

    /* same count: each PS its own file, with a line saying the count was inferred */
    assert_int_equal(s_try(f, 1, 2, &text), 0);
    assert_non_null(strstr(text, "record no shard count; taking 2"));
    free(text);
    ps_embed_t *got[2] = {0};
    assert_int_equal(s_restore(got, 2, SS_OPT_ROWWISE_ADAGRAD, f->dir), 0);
    s_assert_resharded(saved, 2, got, 2);
    s_destroy(got, 2);
    /* another count: refused, saying how to get a file that records it */
    for (uint32_t t = 1; t <= 3; t += 2) {
        assert_int_equal(s_try(f, 0, t, &text), SS_E_CONFIG);
        assert_non_null(strstr(text, "format version 1"));
        assert_non_null(strstr(text, "shadow-ctl checkpoint"));
        free(text);
    }
    /* which is what works: restore into 2, checkpoint (version 2), re-shard */
    ps_embed_t *two[2] = {0};
    assert_int_equal(s_restore(two, 2, SS_OPT_ROWWISE_ADAGRAD, f->dir), 0);
    s_save(two, 2, f->dir, SAVE_ID + 2);
    ps_embed_t *three[3] = {0};
    assert_int_equal(s_restore(three, 3, SS_OPT_ROWWISE_ADAGRAD, f->dir), 0);
    s_assert_resharded(saved, 2, three, 3);
    s_destroy(three, 3);
    s_destroy(two, 2);
    s_destroy(saved, 2);
}

/* A version-1 set with a gap names the missing file; a version-1 file among
 * version-2 files of a set is refused as a mix. */
static void test_embed_version1_gaps_and_mixes(void **state)
{
    struct t_fix *f = *state;
    struct ps_embed_conf c = s_conf(SS_OPT_SGD);
    ps_embed_t *saved[3] = {ps_embed_new(&c), ps_embed_new(&c), ps_embed_new(&c)};
    char p[512], *text;

    s_train(saved, 3);
    s_save(saved, 3, f->dir, SAVE_ID);
    for (uint32_t k = 0; k < 3; k++) {
        s_path(p, sizeof p, f, PS_CKPT_NAME_EMBED, k);
        s_to_v1(p);
    }
    s_path(p, sizeof p, f, PS_CKPT_NAME_EMBED, 1);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(s_try(f, 0, 2, &text), SS_E_NOTFOUND);
    assert_non_null(strstr(text, p));
    assert_non_null(strstr(text, "is missing"));
    free(text);

    /* version 2 files 0 and 2 of 3, a version-1 file 1 */
    s_save(saved, 3, f->dir, SAVE_ID);
    s_to_v1(p);
    assert_int_equal(s_try(f, 0, 2, &text), SS_E_CORRUPT);
    assert_non_null(strstr(text, p));
    free(text);
    s_destroy(saved, 3);
}

/* ---- sync shards ---- */

static float s_center(size_t i)
{
    return (float)i * 0.25f - 100.0f;
}

/* Save a center of CENTER floats split over s sync shards (each after some
 * rounds: shard k after k + 1). */
static void s_save_sync(struct t_fix *f, uint32_t s, uint64_t save_id, int v1)
{
    float *x = malloc(CENTER * sizeof *x);
    char path[512];
    for (size_t i = 0; i < CENTER; i++)
        x[i] = s_center(i);
    for (uint32_t k = 0; k < s; k++) {
        uint64_t off, len;
        int applied;
        ss_range_split(CENTER, s, k, &off, &len);
        ps_sync_t *p = ps_sync_new(CENTER);
        assert_int_equal(ps_sync_init(p, off, x + off, (size_t)len, &applied), 0);
        for (uint32_t r = 0; r <= k; r++) {   /* x - c = 0: the center stays */
            float d[CENTER];
            assert_int_equal(ps_sync_elastic(p, off, x + off, (size_t)len, 0.5f, d), 0);
        }
        struct ps_ckpt_who who = {k, s, JOB_ID, save_id};
        s_path(path, sizeof path, f, PS_CKPT_NAME_SYNC, k);
        assert_int_equal(ps_sync_checkpoint(p, path, &who), 0);
        if (v1)
            s_to_v1(path);
        ps_sync_destroy(&p);
    }
    free(x);
}

/* Restore t sync shards from the folder and check each holds its slice of
 * the same center. */
static void s_check_sync(struct t_fix *f, uint32_t t, uint64_t rounds)
{
    float *got = malloc(CENTER * sizeof *got);
    for (uint32_t k = 0; k < t; k++) {
        uint64_t off, len, hoff;
        size_t hlen;
        ss_range_split(CENTER, t, k, &off, &len);
        ps_sync_t *p = ps_sync_new(CENTER);
        assert_int_equal(ps_sync_restore_dir(p, f->dir, k, t), 0);
        ps_sync_range(p, &hoff, &hlen);
        assert_int_equal(hoff, off);
        assert_int_equal(hlen, len);
        assert_int_equal(ps_sync_pull(p, off, got, (size_t)len), 0);
        for (size_t i = 0; i < len; i++)
            if (got[i] != s_center(off + i))
                fail_msg("shard %u of %u: center[%zu] = %g, saved %g", k, t,
                         (size_t)(off + i), (double)got[i], (double)s_center(off + i));
        assert_int_equal(ps_sync_rounds(p), t == 2 ? k + 1 : rounds);
        ps_sync_destroy(&p);
    }
    free(got);
}

static void test_sync_reslice(void **state)
{
    struct t_fix *f = *state;
    s_save_sync(f, 2, SAVE_ID, 0);
    for (uint32_t t = 1; t <= MAX_T; t++)
        s_check_sync(f, t, 2);   /* re-sliced: the largest count of the slices */

    /* a missing slice is refused; so is a slice of another save */
    char p1[512], keep[560];
    s_path(p1, sizeof p1, f, PS_CKPT_NAME_SYNC, 1);
    snprintf(keep, sizeof keep, "%s.keep", p1);
    assert_int_equal(rename(p1, keep), 0);
    ps_sync_t *p = ps_sync_new(CENTER);
    assert_int_equal(ps_sync_restore_dir(p, f->dir, 0, 3), SS_E_NOTFOUND);
    assert_int_equal(ps_sync_is_empty(p), 1);
    assert_int_equal(rename(keep, p1), 0);
    ps_sync_t *q = ps_sync_new(CENTER);
    float x[10] = {0};
    int applied;
    assert_int_equal(ps_sync_init(q, 0, x, 10, &applied), 0);
    struct ps_ckpt_who who = {1, 2, JOB_ID, SAVE_ID + 7};
    assert_int_equal(ps_sync_checkpoint(q, p1, &who), 0);
    assert_int_equal(ps_sync_restore_dir(p, f->dir, 0, 3), SS_E_CORRUPT);
    /* the same save id but slices that do not tile the center */
    who.save_id = SAVE_ID;
    assert_int_equal(ps_sync_checkpoint(q, p1, &who), 0);
    assert_int_equal(ps_sync_restore_dir(p, f->dir, 0, 3), SS_E_CORRUPT);
    assert_int_equal(ps_sync_is_empty(p), 1);
    ps_sync_destroy(&q);
    ps_sync_destroy(&p);

    /* more shards than center values */
    s_save_sync(f, 2, SAVE_ID, 0);
    p = ps_sync_new(CENTER);
    assert_int_equal(ps_sync_restore_dir(p, f->dir, CENTER, CENTER + 1), SS_E_CORRUPT);
    ps_sync_destroy(&p);

    /* version 1: restored into the count of the files present, else refused */
    s_save_sync(f, 2, SAVE_ID, 1);
    s_check_sync(f, 2, 0);
    p = ps_sync_new(CENTER);
    assert_int_equal(ps_sync_restore_dir(p, f->dir, 0, 3), SS_E_CONFIG);
    assert_int_equal(ps_sync_is_empty(p), 1);
    ps_sync_destroy(&p);
}

int main(void)
{
    /* SS_TEST_LOG=1 shows the error lines the failure tests provoke */
    ss_log_init("test", getenv("SS_TEST_LOG") ? SS_LOG_DEBUG : SS_LOG_ERROR + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_embed_reshard, setup, teardown),
        cmocka_unit_test_setup_teardown(test_embed_reshard_keeps_training, setup, teardown),
        cmocka_unit_test_setup_teardown(test_embed_reshard_logged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_embed_set_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_embed_stale_file_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_embed_own_file_newer_than_leftovers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_embed_same_shape_other_save, setup, teardown),
        cmocka_unit_test_setup_teardown(test_embed_version1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_embed_version1_gaps_and_mixes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_reslice, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
