/* test_ps_ckpt.c - the checkpoint file format: round trips over any split of the
 * payload, rejection of truncated, flipped and mislabeled files, and atomic
 * replacement (a failed write never leaves a temp file or harms the old file). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "t.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ps_ckpt.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"

static int setup(void **state)
{
    return t_fix_setup(state, "ckpt", "ckpt");
}

static int teardown(void **state)
{
    return t_fix_teardown(state);
}

static int s_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static long s_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

/* n bytes of deterministic pseudo-random data. */
static unsigned char *s_data(size_t n, uint64_t seed)
{
    unsigned char *d = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++)
        d[i] = (unsigned char)(ss_rand_next(&seed) >> 56);
    return d;
}

/* Write data as one checkpoint, in pieces of the given sizes (0-terminated list,
 * the last piece takes the rest). */
static void s_write(const char *path, const unsigned char *data, size_t n, const size_t *pieces)
{
    ps_ckpt_writer_t *w;
    struct ps_ckpt_hdr hdr = {.kind = PS_CKPT_EMBED, .shard = 7, .shape = {1, 2, 3, 4}};
    size_t off = 0;

    assert_int_equal(ps_ckpt_begin(path, &w), 0);
    for (; pieces && *pieces && off + *pieces <= n; pieces++) {
        assert_int_equal(ps_ckpt_write(w, data + off, *pieces), 0);
        off += *pieces;
    }
    assert_int_equal(ps_ckpt_write(w, data + off, n - off), 0);
    assert_int_equal(ps_ckpt_commit(&w, &hdr), 0);
    assert_null(w);
}

/* Read path back in pieces of `chunk` bytes; returns the verify result. */
static int s_read_back(const char *path, unsigned char *out, size_t n, size_t chunk)
{
    struct ps_ckpt_hdr hdr;
    ps_ckpt_reader_t *r;
    int rc = ps_ckpt_open(path, PS_CKPT_EMBED, &hdr, &r);
    if (rc != 0)
        return rc;
    assert_int_equal(hdr.payload_bytes, n);
    for (size_t off = 0; off < n; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        assert_int_equal(ps_ckpt_read(r, out + off, k), 0);
    }
    assert_int_equal(ps_ckpt_remaining(r), 0);
    rc = ps_ckpt_verify(r);
    ps_ckpt_close(&r);
    assert_null(r);
    return rc;
}

static void test_round_trip(void **state)
{
    struct t_fix *f = *state;
    size_t n = (1u << 20) * 2 + 13;   /* crosses the 1 MiB buffer twice */
    unsigned char *data = s_data(n, 1);
    unsigned char *back = calloc(1, n);
    size_t pieces[] = {3, 1, 1000, 5, (1u << 20) + 7, 0};
    struct ps_ckpt_hdr hdr;
    ps_ckpt_reader_t *r;

    s_write(f->path, data, n, pieces);
    assert_false(s_exists(f->tmp));
    assert_int_equal(s_size(f->path), PS_CKPT_HDR_BYTES + n);

    assert_int_equal(ps_ckpt_open(f->path, PS_CKPT_EMBED, &hdr, &r), 0);
    assert_int_equal(hdr.kind, PS_CKPT_EMBED);
    assert_int_equal(hdr.shard, 7);
    assert_int_equal(hdr.shape[0], 1);
    assert_int_equal(hdr.shape[1], 2);
    assert_int_equal(hdr.shape[2], 3);
    assert_int_equal(hdr.shape[3], 4);
    assert_int_equal(hdr.payload_bytes, n);
    ps_ckpt_close(&r);

    /* the payload on disk is the data verbatim, after the 80-byte header */
    FILE *fp = fopen(f->path, "rb");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, PS_CKPT_HDR_BYTES, SEEK_SET), 0);
    assert_int_equal(fread(back, 1, n, fp), n);
    fclose(fp);
    assert_memory_equal(back, data, n);

    size_t chunks[] = {4099, n};
    for (size_t i = 0; i < 2; i++) {
        memset(back, 0, n);
        assert_int_equal(s_read_back(f->path, back, n, chunks[i]), 0);
        assert_memory_equal(back, data, n);
    }
    /* tiny odd reads across word and buffer boundaries, on a smaller file */
    size_t small = 70001;
    s_write(f->path, data, small, pieces);
    memset(back, 0, small);
    assert_int_equal(s_read_back(f->path, back, small, 7), 0);
    assert_memory_equal(back, data, small);
    free(data);
    free(back);
}

static void test_empty_and_small_payloads(void **state)
{
    struct t_fix *f = *state;
    unsigned char back[16];

    for (size_t n = 0; n <= 16; n++) {
        unsigned char *data = s_data(n, 100 + n);
        s_write(f->path, data, n, NULL);
        assert_int_equal(s_size(f->path), PS_CKPT_HDR_BYTES + n);
        assert_int_equal(s_read_back(f->path, back, n, 1), 0);
        if (n)
            assert_memory_equal(back, data, n);
        free(data);
    }
}

/* The streaming checksum equals the one-shot checksum for every split, and one
 * flipped bit anywhere (word body or tail) changes it. */
static void test_checksum(void **state)
{
    struct t_fix *f = *state;
    unsigned char *data = s_data(37, 9);
    uint64_t whole = ps_ckpt_checksum(data, 37);

    for (size_t cut = 0; cut <= 37; cut++) {
        size_t pieces[] = {cut, 0};
        unsigned char back[37];
        s_write(f->path, data, 37, cut ? pieces : NULL);
        assert_int_equal(s_read_back(f->path, back, 37, 37 - cut ? 37 - cut : 1), 0);
    }
    for (size_t i = 0; i < 37; i++) {
        for (int bit = 0; bit < 8; bit++) {
            data[i] ^= (unsigned char)(1u << bit);
            assert_true(ps_ckpt_checksum(data, 37) != whole);
            data[i] ^= (unsigned char)(1u << bit);
        }
    }
    assert_true(ps_ckpt_checksum(data, 36) != whole);   /* length counts */
    assert_int_equal(ps_ckpt_checksum(data, 37), whole);
    free(data);
}

static void test_truncated(void **state)
{
    struct t_fix *f = *state;
    size_t n = 5000;
    unsigned char *data = s_data(n, 2);
    unsigned char *back = malloc(n);
    long cuts[] = {0, 1, 40, PS_CKPT_HDR_BYTES - 1, PS_CKPT_HDR_BYTES,
                   PS_CKPT_HDR_BYTES + 1, PS_CKPT_HDR_BYTES + 4096,
                   PS_CKPT_HDR_BYTES + 4999};

    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        struct ps_ckpt_hdr hdr;
        ps_ckpt_reader_t *r = (ps_ckpt_reader_t *)1;
        s_write(f->path, data, n, NULL);
        assert_int_equal(truncate(f->path, cuts[i]), 0);
        assert_int_equal(ps_ckpt_open(f->path, PS_CKPT_EMBED, &hdr, &r), SS_E_CORRUPT);
        assert_null(r);
    }
    /* trailing garbage is rejected too */
    s_write(f->path, data, n, NULL);
    FILE *fp = fopen(f->path, "ab");
    assert_non_null(fp);
    fputc('x', fp);
    fclose(fp);
    assert_int_equal(s_read_back(f->path, back, n, n), SS_E_CORRUPT);
    free(data);
    free(back);
}

/* Corrupt one byte of path in place. */
static void s_flip(const char *path, long at)
{
    assert_int_equal(t_flip_byte(path, at, 0x10), 0);
}

static void test_flipped_bytes(void **state)
{
    struct t_fix *f = *state;
    size_t n = 3000;
    unsigned char *data = s_data(n, 3);
    unsigned char *back = malloc(n);
    long payload_at[] = {0, 1, 8, 1500, 2999};

    for (size_t i = 0; i < 5; i++) {
        s_write(f->path, data, n, NULL);
        s_flip(f->path, PS_CKPT_HDR_BYTES + payload_at[i]);
        assert_int_equal(s_read_back(f->path, back, n, 1024), SS_E_CORRUPT);
    }
    /* any header byte: magic, version, kind, shard, shape, counts, checksums */
    for (long at = 0; at < PS_CKPT_HDR_BYTES; at += 3) {
        struct ps_ckpt_hdr hdr;
        ps_ckpt_reader_t *r;
        s_write(f->path, data, n, NULL);
        s_flip(f->path, at);
        int rc = ps_ckpt_open(f->path, PS_CKPT_EMBED, &hdr, &r);
        if (rc == 0) {   /* only the payload checksum field may pass open */
            assert_true(at >= 64 && at < 72);
            assert_int_equal(ps_ckpt_read(r, back, n), 0);
            rc = ps_ckpt_verify(r);
            ps_ckpt_close(&r);
        }
        assert_int_equal(rc, SS_E_CORRUPT);
    }
    free(data);
    free(back);
}

static void test_wrong_kind_and_misuse(void **state)
{
    struct t_fix *f = *state;
    unsigned char data[100] = {1, 2, 3};
    unsigned char back[200];
    struct ps_ckpt_hdr hdr;
    ps_ckpt_reader_t *r;

    s_write(f->path, data, sizeof data, NULL);
    assert_int_equal(ps_ckpt_open(f->path, PS_CKPT_SYNC, &hdr, &r), SS_E_CORRUPT);
    assert_null(r);

    assert_int_equal(ps_ckpt_open(f->path, PS_CKPT_EMBED, &hdr, &r), 0);
    assert_int_equal(ps_ckpt_read(r, back, 101), SS_E_CORRUPT);   /* past the end */
    assert_int_equal(ps_ckpt_read(r, back, 60), 0);
    assert_int_equal(ps_ckpt_remaining(r), 40);
    assert_int_equal(ps_ckpt_verify(r), SS_E_CORRUPT);             /* not all read */
    assert_int_equal(ps_ckpt_read(r, back, 41), SS_E_CORRUPT);
    assert_int_equal(ps_ckpt_read(r, back + 60, 40), 0);
    assert_int_equal(ps_ckpt_verify(r), 0);
    assert_memory_equal(back, data, sizeof data);
    ps_ckpt_close(&r);
    ps_ckpt_close(&r);   /* NULL is fine */

    /* not a checkpoint at all */
    FILE *fp = fopen(f->path, "wb");
    assert_non_null(fp);
    for (int i = 0; i < 200; i++)
        fputc('A', fp);
    fclose(fp);
    assert_int_equal(ps_ckpt_open(f->path, PS_CKPT_EMBED, &hdr, &r), SS_E_CORRUPT);
}

static void test_missing_file(void **state)
{
    struct t_fix *f = *state;
    struct ps_ckpt_hdr hdr;
    ps_ckpt_reader_t *r = (ps_ckpt_reader_t *)1;

    assert_int_equal(ps_ckpt_open(f->path, PS_CKPT_EMBED, &hdr, &r), SS_E_IO);
    assert_null(r);
    assert_int_equal(ps_ckpt_open(f->dir, PS_CKPT_EMBED, &hdr, &r), SS_E_IO); /* a dir */
}

static void test_missing_or_bad_dir(void **state)
{
    struct t_fix *f = *state;
    char p[400], tmp[410];
    ps_ckpt_writer_t *w = (ps_ckpt_writer_t *)1;

    snprintf(p, sizeof p, "%s/no/such/dir/ckpt", f->dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    assert_int_equal(ps_ckpt_begin(p, &w), SS_E_IO);
    assert_null(w);
    assert_false(s_exists(tmp));

    /* a regular file where a directory should be */
    unsigned char d[4] = {0};
    s_write(f->path, d, 4, NULL);
    snprintf(p, sizeof p, "%s/ckpt/inner", f->dir);
    assert_int_equal(ps_ckpt_begin(p, &w), SS_E_IO);
    assert_null(w);
    assert_int_equal(s_size(f->path), PS_CKPT_HDR_BYTES + 4);
}

static void test_readonly_dir(void **state)
{
    struct t_fix *f = *state;
    ps_ckpt_writer_t *w = (ps_ckpt_writer_t *)1;

    if (geteuid() == 0) {
        /* root writes through file modes: use a directory no one can create in */
        assert_int_equal(ps_ckpt_begin("/proc/ss_test_ckpt", &w), SS_E_IO);
        assert_null(w);
        assert_false(s_exists("/proc/ss_test_ckpt.tmp"));
        return;
    }
    assert_int_equal(chmod(f->dir, 0555), 0);
    assert_int_equal(ps_ckpt_begin(f->path, &w), SS_E_IO);
    assert_null(w);
    assert_false(s_exists(f->tmp));
    assert_int_equal(chmod(f->dir, 0755), 0);
}

/* A full disk, simulated with RLIMIT_FSIZE: the write fails with EFBIG, the temp
 * file is removed and the previous checkpoint is intact. */
static void test_full_disk_keeps_old(void **state)
{
    struct t_fix *f = *state;
    size_t n_old = 1000, n_new = 3u << 20;
    unsigned char *old = s_data(n_old, 4);
    unsigned char *big = s_data(n_new, 5);
    unsigned char *back = malloc(n_old);
    struct ps_ckpt_hdr hdr = {.kind = PS_CKPT_EMBED, .shard = 7};
    struct rlimit saved, lim;
    ps_ckpt_writer_t *w;
    int rc_write = 0, rc_commit = 0, rc_begin;

    s_write(f->path, old, n_old, NULL);
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = saved;
    lim.rlim_cur = 64 * 1024;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    rc_begin = ps_ckpt_begin(f->path, &w);
    if (rc_begin == 0) {
        rc_write = ps_ckpt_write(w, big, n_new);
        rc_commit = ps_ckpt_commit(&w, &hdr);   /* the error is sticky */
    }
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, old_handler);

    assert_int_equal(rc_begin, 0);
    assert_int_equal(rc_write, SS_E_IO);   /* the 1 MiB buffer flush hits the limit */
    assert_int_equal(rc_commit, SS_E_IO);
    assert_null(w);
    assert_false(s_exists(f->tmp));
    assert_int_equal(s_read_back(f->path, back, n_old, n_old), 0);
    assert_memory_equal(back, old, n_old);
    free(old);
    free(big);
    free(back);
}

static void test_abort_and_replace(void **state)
{
    struct t_fix *f = *state;
    unsigned char a[64], b[32], back[64];
    ps_ckpt_writer_t *w;

    memset(a, 0xaa, sizeof a);
    memset(b, 0xbb, sizeof b);
    s_write(f->path, a, sizeof a, NULL);

    assert_int_equal(ps_ckpt_begin(f->path, &w), 0);
    assert_true(s_exists(f->tmp));
    assert_int_equal(ps_ckpt_write(w, b, sizeof b), 0);
    ps_ckpt_abort(&w);
    assert_null(w);
    ps_ckpt_abort(&w);
    ps_ckpt_abort(NULL);
    assert_false(s_exists(f->tmp));
    assert_int_equal(s_read_back(f->path, back, sizeof a, 64), 0);
    assert_memory_equal(back, a, sizeof a);

    s_write(f->path, b, sizeof b, NULL);   /* replaces */
    assert_int_equal(s_read_back(f->path, back, sizeof b, 5), 0);
    assert_memory_equal(back, b, sizeof b);

    /* a stale temp file from a crash is simply overwritten */
    FILE *fp = fopen(f->tmp, "wb");
    assert_non_null(fp);
    fputs("stale", fp);
    fclose(fp);
    s_write(f->path, a, sizeof a, NULL);
    assert_false(s_exists(f->tmp));
    assert_int_equal(s_read_back(f->path, back, sizeof a, 64), 0);
    assert_memory_equal(back, a, sizeof a);
}

/* Run fn with stderr sent to a file; return what it wrote (caller frees). */
static char *s_capture(struct t_fix *f, int (*fn)(struct t_fix *), int *rc)
{
    char log_path[340];
    snprintf(log_path, sizeof log_path, "%s/stderr.log", f->dir);
    int saved = dup(STDERR_FILENO);
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, STDERR_FILENO);
    close(fd);
    int level = ss_log_level_now;
    ss_log_level_now = SS_LOG_ERROR;
    *rc = fn(f);
    ss_log_level_now = level;
    dup2(saved, STDERR_FILENO);
    close(saved);
    char *text = calloc(1, 4096);
    FILE *fp = fopen(log_path, "rb");
    assert_non_null(fp);
    size_t got = fread(text, 1, 4095, fp);
    text[got] = '\0';
    fclose(fp);
    return text;
}

static int s_verify_file(struct t_fix *f)
{
    unsigned char back[256];
    return s_read_back(f->path, back, sizeof back, 256);
}

static int s_begin_missing(struct t_fix *f)
{
    char p[400];
    ps_ckpt_writer_t *w;
    snprintf(p, sizeof p, "%s/missing/ckpt", f->dir);
    return ps_ckpt_begin(p, &w);
}

/* Failures say what went wrong and name the file. */
static void test_errors_are_logged(void **state)
{
    struct t_fix *f = *state;
    unsigned char data[256];
    int rc;

    memset(data, 7, sizeof data);
    s_write(f->path, data, sizeof data, NULL);
    s_flip(f->path, PS_CKPT_HDR_BYTES + 100);
    char *text = s_capture(f, s_verify_file, &rc);
    assert_int_equal(rc, SS_E_CORRUPT);
    assert_non_null(strstr(text, f->path));
    assert_non_null(strstr(text, "checksum mismatch"));
    free(text);

    assert_int_equal(truncate(f->path, 200), 0);
    text = s_capture(f, s_verify_file, &rc);
    assert_int_equal(rc, SS_E_CORRUPT);
    assert_non_null(strstr(text, f->path));
    assert_non_null(strstr(text, "truncated"));
    free(text);

    text = s_capture(f, s_begin_missing, &rc);
    assert_int_equal(rc, SS_E_IO);
    assert_non_null(strstr(text, "missing/ckpt"));
    assert_non_null(strstr(text, "No such file"));
    free(text);
}

/* Version 2 records who wrote the file; a version-1 file (an 80-byte header,
 * as older builds wrote) still reads, with those fields 0; other versions and
 * a broken second checksum are refused. */
static void test_versions_and_identity(void **state)
{
    struct t_fix *f = *state;
    unsigned char data[300], back[300], b[PS_CKPT_HDR_BYTES];
    struct ps_ckpt_hdr hdr = {.kind = PS_CKPT_SYNC, .shard = 2, .shape = {5, 6, 7, 0},
                              .n_shards = 3, .map_id = 1, .job_id = 0xabcdef0123ull,
                              .save_id = 0x77ull, .version = 9 /* ignored */};
    ps_ckpt_writer_t *w;
    ps_ckpt_reader_t *r;

    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (unsigned char)(i * 7);
    assert_int_equal(ps_ckpt_begin(f->path, &w), 0);
    assert_int_equal(ps_ckpt_write(w, data, sizeof data), 0);
    assert_int_equal(ps_ckpt_commit(&w, &hdr), 0);
    assert_int_equal(s_size(f->path), PS_CKPT_HDR_BYTES + sizeof data);
    memset(&hdr, 0xff, sizeof hdr);
    assert_int_equal(ps_ckpt_open(f->path, PS_CKPT_SYNC, &hdr, &r), 0);
    assert_int_equal(hdr.version, 2);
    assert_int_equal(hdr.shard, 2);
    assert_int_equal(hdr.shape[2], 7);
    assert_int_equal(hdr.n_shards, 3);
    assert_int_equal(hdr.map_id, 1);
    assert_int_equal(hdr.job_id, 0xabcdef0123ull);
    assert_int_equal(hdr.save_id, 0x77ull);
    assert_int_equal(ps_ckpt_read(r, back, sizeof back), 0);
    assert_int_equal(ps_ckpt_verify(r), 0);
    ps_ckpt_close(&r);

    /* the same file as version 1: first 72 bytes, version 1, their checksum */
    FILE *fp = fopen(f->path, "rb");
    assert_non_null(fp);
    assert_int_equal(fread(b, 1, sizeof b, fp), sizeof b);
    fclose(fp);
    b[8] = 1;
    uint64_t h = ss_hash_bytes(b, 72, 0);
    for (int i = 0; i < 8; i++)
        b[72 + i] = (unsigned char)(h >> (8 * i));
    fp = fopen(f->path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(b, 1, PS_CKPT_HDR_V1_BYTES, fp), PS_CKPT_HDR_V1_BYTES);
    assert_int_equal(fwrite(data, 1, sizeof data, fp), sizeof data);
    fclose(fp);
    assert_int_equal(ps_ckpt_open(f->path, PS_CKPT_SYNC, &hdr, &r), 0);
    assert_int_equal(hdr.version, 1);
    assert_int_equal(hdr.shard, 2);
    assert_int_equal(hdr.shape[1], 6);
    assert_int_equal(hdr.payload_bytes, sizeof data);
    assert_int_equal(hdr.n_shards, 0);
    assert_int_equal(hdr.map_id, 0);
    assert_int_equal(hdr.job_id, 0);
    assert_int_equal(hdr.save_id, 0);
    memset(back, 0, sizeof back);
    assert_int_equal(ps_ckpt_read(r, back, sizeof back), 0);
    assert_int_equal(ps_ckpt_verify(r), 0);
    assert_memory_equal(back, data, sizeof data);
    ps_ckpt_close(&r);

    /* version 3 (with a valid first checksum) is refused */
    b[8] = 3;
    h = ss_hash_bytes(b, 72, 0);
    for (int i = 0; i < 8; i++)
        b[72 + i] = (unsigned char)(h >> (8 * i));
    fp = fopen(f->path, "r+b");
    assert_non_null(fp);
    assert_int_equal(fwrite(b, 1, PS_CKPT_HDR_V1_BYTES, fp), PS_CKPT_HDR_V1_BYTES);
    fclose(fp);
    assert_int_equal(ps_ckpt_open(f->path, PS_CKPT_SYNC, &hdr, &r), SS_E_CORRUPT);

    /* version 2 with a changed identity byte: the second checksum catches it */
    hdr.version = 0;
    assert_int_equal(ps_ckpt_begin(f->path, &w), 0);
    assert_int_equal(ps_ckpt_write(w, data, sizeof data), 0);
    assert_int_equal(ps_ckpt_commit(&w, &hdr), 0);
    for (long at = 80; at < 120; at += 8) {
        s_flip(f->path, at);
        assert_int_equal(ps_ckpt_open(f->path, PS_CKPT_SYNC, &hdr, &r), SS_E_CORRUPT);
        assert_null(r);
        s_flip(f->path, at);
    }
    assert_int_equal(ps_ckpt_open(f->path, PS_CKPT_SYNC, &hdr, &r), 0);
    ps_ckpt_close(&r);
    /* a version-2 file cut inside its second header part */
    assert_int_equal(truncate(f->path, 100), 0);
    assert_int_equal(ps_ckpt_open(f->path, PS_CKPT_SYNC, &hdr, &r), SS_E_CORRUPT);
}

int main(void)
{
    /* SS_TEST_LOG=1 shows the error lines the failure tests provoke */
    ss_log_init("test", getenv("SS_TEST_LOG") ? SS_LOG_DEBUG : SS_LOG_ERROR + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_and_small_payloads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checksum, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flipped_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_kind_and_misuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_or_bad_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_readonly_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_disk_keeps_old, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort_and_replace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors_are_logged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_versions_and_identity, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
