/* fuzz_ckpt.c - libFuzzer harness: the checkpoint reader (ps_ckpt.c) behind
 * ps_embed_restore() and ps_sync_restore().
 *
 * Input: a flags byte, then the checkpoint file's bytes. The file is restored
 * into a small embedding shard and into a sync shard (each refuses the
 * other's kind). A fuzzer cannot forge 64-bit checksums, so flags can make
 * the harness repair fields after mutating, to reach the code behind them:
 *   bits 0-1: the embedding optimizer (sgd, adagrad, rowwise_adagrad)
 *   bit 2:    model.first_order
 *   bit 3:    the sync shard already holds a range (an INIT came first)
 *   bit 4:    set the payload byte count (bytes 56..63) to the file's
 *   bit 5:    set the payload checksum (64..71) to the payload's
 *   bit 6:    set the header checksum (72..79) to bytes 0..71's and, in a
 *             version-2 header, 120..127 to bytes 0..119's
 * Checks: restore returns 0 or a documented error, leaves the shard as it
 * was on error, and what it accepts holds the header's row count and
 * survives a checkpoint and restore round trip. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_util.h"
#include "ps_ckpt.h"
#include "ps_embed.h"
#include "ps_sync.h"
#include "ss_cfg.h"
#include "ss_err.h"
#include "ss_hash.h"

/* A checkpoint writer that records only its shard number. */
#define WHO(k) (&(struct ps_ckpt_who){.shard = (k)})

#define S_N_TABLES 3        /* tables of the small shard */
#define S_DIM 4             /* floats per row, before first_order */
#define S_CAPACITY 64       /* capacity_rows */
#define S_SYNC_MAX 4096     /* most center floats the sync shard takes */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char s_path[600];    /* the file under test */
static char s_path2[600];   /* round-trip copy */

static struct ps_embed_conf s_embed_conf(unsigned flags)
{
    struct ps_embed_conf c = {
        .n_tables = S_N_TABLES,
        .dim = S_DIM + ((flags >> 2) & 1),
        .first_order = (flags >> 2) & 1,
        .optimizer = (flags & 3) == 3 ? SS_OPT_ROWWISE_ADAGRAD : (int)(flags & 3),
        .lr = 0.1f,
        .eps = 1e-8f,
        .init_acc = 1e-3f,
        .init_scale = 0.01f,
        .seed = 42,
        .capacity_rows = S_CAPACITY,
        .n_stripes = 4,
    };
    return c;
}

static void s_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t s_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Apply the repairs the flags ask for to the file image f (n bytes); the
 * header is 80 bytes in a version-1 image, 128 otherwise. */
static void s_repair(uint8_t *f, size_t n, unsigned flags)
{
    size_t hb = n > 8 && f[8] == 1 ? PS_CKPT_HDR_V1_BYTES : PS_CKPT_HDR_BYTES;
    if (n < hb)
        return;
    if (flags & 16)
        s_put_u64(f + 56, n - hb);
    if (flags & 32)
        s_put_u64(f + 64, ps_ckpt_checksum(f + hb, n - hb));
    if (flags & 64) {
        s_put_u64(f + 72, ss_hash_bytes(f, 72, 0));
        if (hb == PS_CKPT_HDR_BYTES)
            s_put_u64(f + 120, ss_hash_bytes(f, 120, 0));
    }
}

static int s_documented(int rc)
{
    return rc == 0 || rc == SS_E_CORRUPT || rc == SS_E_IO || rc == SS_E_FULL ||
           rc == SS_E_TOOBIG;
}

static void s_embed(unsigned flags, const uint8_t *f, size_t n)
{
    struct ps_embed_conf c = s_embed_conf(flags);
    ps_embed_t *e = ps_embed_new(&c);
    float row[2 * (S_DIM + 1)];
    FUZZ_CHECK(e, "ps_embed_new");
    uint64_t key = 12345;
    ps_embed_lookup(e, 0, &key, 1, row, NULL);     /* one row before: kept on error */
    int rc = ps_embed_restore(e, s_path, 0);
    FUZZ_CHECK(s_documented(rc), "ps_embed_restore returned %s", ss_errname(rc));
    if (rc != 0) {
        FUZZ_CHECK(ps_embed_rows(e) == 1 && ps_embed_read_row(e, 0, key, row) == 0,
                   "a failed restore changed the shard");
        ps_embed_destroy(&e);
        return;
    }
    uint64_t rows = s_get_u64(f + 48);
    FUZZ_CHECK(ps_embed_rows(e) == rows, "restored %zu rows, the header says %llu",
               ps_embed_rows(e), (unsigned long long)rows);
    FUZZ_CHECK(ps_embed_checkpoint(e, s_path2, WHO(0)) == 0, "cannot checkpoint a restored shard");
    ps_embed_t *e2 = ps_embed_new(&c);
    rc = ps_embed_restore(e2, s_path2, 0);
    FUZZ_CHECK(rc == 0 && ps_embed_rows(e2) == rows, "round trip: %s, %zu rows",
               ss_errname(rc), ps_embed_rows(e2));
    ps_embed_destroy(&e2);
    ps_embed_destroy(&e);
    (void)n;
}

static void s_sync(unsigned flags)
{
    ps_sync_t *s = ps_sync_new(S_SYNC_MAX);
    float x[4] = {1, 2, 3, 4}, y[4];
    uint64_t off0 = 0, off;
    size_t len0 = 0, len;
    int applied;
    FUZZ_CHECK(s, "ps_sync_new");
    if (flags & 8) {
        FUZZ_CHECK(ps_sync_init(s, 8, x, 4, &applied) == 0, "ps_sync_init");
        ps_sync_range(s, &off0, &len0);
    }
    int rc = ps_sync_restore(s, s_path, 0);
    FUZZ_CHECK(s_documented(rc), "ps_sync_restore returned %s", ss_errname(rc));
    ps_sync_range(s, &off, &len);
    if (rc != 0) {
        FUZZ_CHECK(off == off0 && len == len0, "a failed restore changed the range");
        ps_sync_destroy(&s);
        return;
    }
    FUZZ_CHECK(len > 0 && len <= S_SYNC_MAX, "restored range of %zu floats", len);
    FUZZ_CHECK(ps_sync_pull(s, off, y, len < 4 ? len : 4) == 0, "pull of a restored range");
    FUZZ_CHECK(ps_sync_checkpoint(s, s_path2, WHO(0)) == 0, "cannot checkpoint a restored range");
    ps_sync_t *s2 = ps_sync_new(S_SYNC_MAX);
    rc = ps_sync_restore(s2, s_path2, 0);
    FUZZ_CHECK(rc == 0, "round trip: %s", ss_errname(rc));
    ps_sync_destroy(&s2);
    ps_sync_destroy(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned flags = data[0];
    size_t n = size - 1;
    uint8_t *f = malloc(n ? n : 1);
    FUZZ_CHECK(f, "out of memory");
    memcpy(f, data + 1, n);
    s_repair(f, n, flags);
    fuzz_write_file(s_path, f, n);
    s_embed(flags, f, n);
    s_sync(flags);
    free(f);
    return 0;
}

/* ------------------------------------------------------------------ seeds */

/* Write the file at s_path2 as a seed, behind flags. */
static void s_seed_ckpt(const char *dir, const char *name, unsigned flags)
{
    static uint8_t buf[1 << 16];
    FILE *fp = fopen(s_path2, "rb");
    FUZZ_CHECK(fp, "cannot open %s", s_path2);
    buf[0] = (uint8_t)flags;
    size_t n = fread(buf + 1, 1, sizeof buf - 1, fp);
    fclose(fp);
    fuzz_seed(dir, name, buf, n + 1);
}

static void s_seed_embed(const char *dir, const char *name, unsigned flags, size_t rows)
{
    struct ps_embed_conf c = s_embed_conf(flags);
    ps_embed_t *e = ps_embed_new(&c);
    float g[S_DIM + 1] = {0.5f, -1, 0.25f, 2, 1};
    for (uint64_t k = 1; k <= rows; k++)
        ps_embed_push(e, (uint32_t)(k % S_N_TABLES), &k, 1, g, NULL);
    FUZZ_CHECK(ps_embed_checkpoint(e, s_path2, WHO(0)) == 0, "seed checkpoint");
    ps_embed_destroy(&e);
    s_seed_ckpt(dir, name, flags);
}

static void s_write_seeds(const char *dir)
{
    s_seed_embed(dir, "embed-sgd", 0, 3);
    s_seed_embed(dir, "embed-adagrad-repair", 1 | 16 | 32 | 64, 2);
    s_seed_embed(dir, "embed-rowwise-fo-repair", 2 | 4 | 32 | 64, 4);
    s_seed_embed(dir, "embed-empty", 2, 0);
    ps_sync_t *s = ps_sync_new(S_SYNC_MAX);
    float x[6] = {1, -2, 0.5f, 4, 0, 8}, d[6];
    int applied;
    ps_sync_init(s, 100, x, 6, &applied);
    ps_sync_elastic(s, 101, x, 3, 0.5f, d);
    FUZZ_CHECK(ps_sync_checkpoint(s, s_path2, WHO(0)) == 0, "seed checkpoint");
    ps_sync_destroy(&s);
    s_seed_ckpt(dir, "sync", 0);
    s_seed_ckpt(dir, "sync-held-repair", 8 | 16 | 32 | 64);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    const char *tmp = fuzz_tmpdir("ckpt");
    snprintf(s_path, sizeof s_path, "%s/in.ckpt", tmp);
    snprintf(s_path2, sizeof s_path2, "%s/out.ckpt", tmp);
    fuzz_seed_mode(s_write_seeds);
    return 0;
}
