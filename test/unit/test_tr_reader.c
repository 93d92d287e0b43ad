/* test_tr_reader.c - unit tests of trainer/tr_reader: parsing, splits, globs.
 *
 * Split tests write files under a mkdtemp directory; each good line carries
 * a unique id in C1, so the multiset of C1 keys read by all parts must equal
 * the ids written, each exactly once. Real-data checks read the Criteo
 * sample through t_data_file() ($SS_DATA_DIR, default ../shared/data, else
 * test/data) and fail when it is in neither. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ss_cfg.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "tr_reader.h"
#include "t_data.h"

#define MISSING(f) ss_key_make((f), TR_PARSE_MISSING_RAW)

/* Key of a value that is not 8 lowercase hex digits (tr_reader.h). */
static uint64_t s_hashed(uint32_t f, const char *value, size_t len)
{
    return ss_key_make(f, TR_PARSE_HASHED_RAW | (ss_hash_bytes(value, len, 0) >> 2));
}

#define HASHED(f, str) s_hashed((f), (str), strlen(str))

/* ---- helpers ---- */

static char g_dir[256];

static int s_setup(void **state)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof(g_dir), "%s/tr_reader_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(g_dir));
    return 0;
}

static int s_teardown(void **state)
{
    DIR *d = opendir(g_dir);
    if (d) {
        struct dirent *e;
        char path[512];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", g_dir, e->d_name);
            if (rmdir(path) != 0)
                unlink(path);
        }
        closedir(d);
    }
    rmdir(g_dir);
    return 0;
}

/* Path of name inside the temp dir (static buffer rotation: 8 slots). */
static const char *s_path(const char *name)
{
    static char buf[8][512];
    static int slot;
    char *p = buf[slot++ & 7];
    snprintf(p, 512, "%s/%s", g_dir, name);
    return p;
}

static void s_write(const char *name, const char *data, size_t len)
{
    FILE *f = fopen(s_path(name), "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* Growable text buffer. */
struct s_text {
    char *p;
    size_t len;
    size_t cap;
};

static void s_append(struct s_text *t, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        if (t->p && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        t->cap = (t->cap + (size_t)n + 1) * 2;
        t->p = realloc(t->p, t->cap);
        assert_non_null(t->p);
    }
}

/* Append one good line with C1 = id; the rest of the line varies with rng:
 * dense digits of random length, some empties, a random number of trailing
 * categorical fields (stripped trailing tabs), sometimes CRLF. */
static void s_good_line(struct s_text *t, uint64_t id, uint64_t *rng, int newline)
{
    s_append(t, "%d", (int)(id & 1));
    for (int j = 0; j < TR_N_DENSE; j++) {
        uint64_t r = ss_rand_next(rng);
        if (r % 4 == 0)
            s_append(t, "\t");
        else
            s_append(t, "\t%llu", (unsigned long long)(r >> (r % 60 + 4)));
    }
    s_append(t, "\t%08llx", (unsigned long long)id);
    int more = (int)(ss_rand_next(rng) % TR_N_SPARSE);
    for (int f = 1; f < more; f++)
        s_append(t, (ss_rand_next(rng) & 1) ? "\t%08x" : "\t", (unsigned)ss_rand_next(rng));
    if (newline)
        s_append(t, (ss_rand_next(rng) % 8 == 0) ? "\r\n" : "\n");
}

/* Write "label, 13 empty dense fields, c1" and a newline into buf; return
 * its length. */
static size_t s_c1_line(char *buf, int label, const char *c1)
{
    size_t n = (size_t)sprintf(buf, "%d", label);
    for (int j = 0; j <= TR_N_DENSE; j++)
        buf[n++] = '\t';
    n += (size_t)sprintf(buf + n, "%s\n", c1);
    return n;
}

static int s_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Read all parts of n_ranks x n_workers; check that the C1 keys are exactly
 * the ids 1..n_ids once each, and that the lines and bad lines add up. */
static void s_check_split(const char *const *pats, size_t n_pats, uint32_t n_ranks,
                          uint32_t n_workers, uint64_t n_ids, uint64_t n_bad)
{
    uint64_t *keys = malloc((n_ids + 1) * sizeof(*keys));
    assert_non_null(keys);
    uint64_t n_keys = 0;
    uint64_t lines = 0;
    uint64_t bad = 0;
    uint64_t part_bytes = 0;
    char err[256];
    for (uint32_t r = 0; r < n_ranks; r++) {
        for (uint32_t w = 0; w < n_workers; w++) {
            tr_reader_t *rd = tr_reader_new(NULL, pats, n_pats, r, n_ranks, w, n_workers, err,
                                            sizeof(err));
            if (!rd)
                fail_msg("tr_reader_new: %s", err);
            struct tr_example ex;
            int rc;
            while ((rc = tr_reader_next(rd, &ex)) == 1) {
                if (n_keys > n_ids)
                    fail_msg("more examples than ids (%u x %u)", n_ranks, n_workers);
                keys[n_keys++] = ex.keys[0];
            }
            assert_int_equal(rc, 0);
            struct tr_reader_stats st;
            tr_reader_stats(rd, &st);
            lines += st.lines;
            bad += st.bad_lines;
            part_bytes += st.part_bytes;
            tr_reader_destroy(&rd);
            assert_null(rd);
        }
    }
    if (n_keys != n_ids)
        fail_msg("split %u x %u: read %llu good lines, wrote %llu", n_ranks, n_workers,
                 (unsigned long long)n_keys, (unsigned long long)n_ids);
    assert_int_equal(bad, n_bad);
    assert_int_equal(lines, n_ids + n_bad);
    assert_int_equal((int64_t)part_bytes, tr_reader_total_bytes(pats, n_pats, NULL, 0));
    uint64_t *want = malloc((n_ids + 1) * sizeof(*want));
    assert_non_null(want);
    for (uint64_t i = 0; i < n_ids; i++)
        want[i] = ss_key_make(0, i + 1);
    qsort(keys, n_keys, sizeof(*keys), s_cmp_u64);
    qsort(want, n_ids, sizeof(*want), s_cmp_u64);
    for (uint64_t i = 0; i < n_ids; i++) {
        if (keys[i] != want[i])
            fail_msg("split %u x %u: key multiset differs at %llu", n_ranks, n_workers,
                     (unsigned long long)i);
    }
    free(want);
    free(keys);
}

/* ---- parse_line ---- */

static void test_parse_full_line(void **state)
{
    const char *line = "1\t0\t7\t-2\t\t100\t1\t2\t3\t4\t5\t6\t7\t8\t"
                       "68fd1e64\tABCDEF01\t\t0\t123456789abcdef0\t123456789abcdef01\t"
                       "xyz\t1\t2\t3\t4\t5\t6\t7\t8\t9\ta\tb\tc\td\te\tf\t10\t11\t12\t13";
    struct tr_example ex;
    assert_int_equal(tr_parse_criteo(line, strlen(line), &ex), 0);
    assert_true(ex.label == 1.0f);
    assert_true(ex.dense[0] == 0.0f);                   /* 0 */
    assert_float_equal(ex.dense[1], 2.0794415f, 1e-6);  /* log(8) */
    assert_true(ex.dense[2] == 0.0f);                   /* -2 clamps to 0 */
    assert_true(ex.dense[3] == 0.0f);                   /* missing */
    assert_float_equal(ex.dense[4], 4.6151205f, 1e-6);  /* log(101) */
    assert_float_equal(ex.dense[12], 2.1972246f, 1e-6); /* log(9) */
    assert_true(ex.keys[0] == ss_key_make(0, 0x68fd1e64));
    assert_true(ex.keys[1] == HASHED(1, "ABCDEF01"));  /* upper case: another string */
    assert_true(ex.keys[1] != ss_key_make(1, 0xabcdef01));
    assert_true(ex.keys[2] == MISSING(2));
    assert_true(ex.keys[3] == HASHED(3, "0"));
    assert_true(ex.keys[4] == HASHED(4, "123456789abcdef0"));  /* 16 digits */
    assert_true(ex.keys[5] == HASHED(5, "123456789abcdef01"));
    assert_true(ex.keys[6] == HASHED(6, "xyz"));
    assert_true(ex.keys[7] == HASHED(7, "1"));
    assert_true(ex.keys[25] == HASHED(25, "13"));
    /* The same value in two fields gives two keys. */
    assert_true(ss_key_make(7, 1) != ss_key_make(8, 1));
}

static void test_parse_hex_fast_path(void **state)
{
    /* 8-character fields go through the SWAR path: check digits, lower case
     * letters, and upper case and the characters just outside the hex ranges
     * (they must be hashed). */
    static const char *vals[] = {"00000000", "99999999", "aaaaaaaa", "ffffffff", "FFFFFFFF",
                                 "0a1B2c3D", "deadbeef", "7fffffff", "0000000g", "/0000000",
                                 "0000:000", "@0000000", "`0000000", "G0000000", "abcdeF0G",
                                 "12345\x80""78"};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        char line[128];
        int n = snprintf(line, sizeof(line), "0\t\t\t\t\t\t\t\t\t\t\t\t\t\t%s", vals[i]);
        struct tr_example ex;
        assert_int_equal(tr_parse_criteo(line, (size_t)n, &ex), 0);
        unsigned long long v = strtoull(vals[i], NULL, 16);
        int lower = strspn(vals[i], "0123456789abcdef") == 8;
        uint64_t want = lower ? ss_key_make(0, v) : s_hashed(0, vals[i], 8);
        if (ex.keys[0] != want)
            fail_msg("field '%s': wrong key", vals[i]);
        assert_true(ex.keys[1] == MISSING(1));
    }
}

/* Key of value in field f, parsed from a line; next: whether another field
 * follows it (the value is then not the last thing on the line). */
static uint64_t s_key_of(uint32_t f, const char *value, int next)
{
    char line[256];
    int n = snprintf(line, sizeof line, "1");
    for (uint32_t j = 0; j < TR_N_DENSE + f; j++)
        line[n++] = '\t';
    n += snprintf(line + n, sizeof line - (size_t)n, "\t%s%s", value,
                  next && f + 1 < TR_N_SPARSE ? "\tbeef" : "");
    struct tr_example ex;
    assert_int_equal(tr_parse_criteo(line, (size_t)n, &ex), 0);
    return ex.keys[f];
}

/* Regression: "0a" and "a" gave one key (leading zeros and the length were
 * dropped), "A" and "a" too, and "ffffffffffffffff" gave the empty field's
 * key. Every distinct string must have its own key, and the empty field a
 * key that no string can give; Criteo's 8 lowercase hex digits keep theirs. */
static void test_issue_distinct_raw_values(void **state)
{
    static const char *const vals[] = {
        "a", "0a", "00a", "0000000a", "00000000a", "000000000000000a", "A", "0A", "0",
        "00", "00000000", "0000000000000000", "00000000000000000", "ffffffffffffffff",
        "FFFFFFFFFFFFFFFF", "fffffffffffffffff", "ffffffff", "FFFFFFFF", "fffffffF",
        "7fffffff", "abcdef01", "ABCDEF01", "68fd1e64", "068fd1e64", "68fd1e6", "xyz", "-1",
        "1", "01", "10", "123456789abcdef0", "0123456789abcdef0", " a", "a ",
    };
    enum { N = sizeof vals / sizeof vals[0] };
    static const uint32_t fields[] = {0, 7, TR_N_SPARSE - 1};
    for (size_t fi = 0; fi < sizeof fields / sizeof fields[0]; fi++) {
        uint32_t f = fields[fi];
        uint64_t keys[N];
        uint64_t empty = s_key_of(f, "", 1);
        assert_true(empty == MISSING(f));
        assert_true(s_key_of(f, "", 0) == MISSING(f));
        for (size_t i = 0; i < N; i++) {
            keys[i] = s_key_of(f, vals[i], 1);
            if (s_key_of(f, vals[i], 0) != keys[i])
                fail_msg("field %u '%s': key depends on what follows", f, vals[i]);
            if (keys[i] == empty)
                fail_msg("field %u: '%s' has the empty field's key %#llx", f, vals[i],
                         (unsigned long long)empty);
            for (size_t j = 0; j < i; j++)
                if (keys[j] == keys[i])
                    fail_msg("field %u: '%s' and '%s' share key %#llx", f, vals[j], vals[i],
                             (unsigned long long)keys[i]);
        }
        /* unchanged keys: 8 lowercase hex digits, and the empty field */
        assert_true(s_key_of(f, "68fd1e64", 1) == ss_key_make(f, 0x68fd1e64));
        assert_true(s_key_of(f, "ffffffff", 1) == ss_key_make(f, 0xffffffff));
        assert_true(s_key_of(f, "00000000", 1) == ss_key_make(f, 0));
        assert_true(MISSING(f) == ss_key_make(f, 0xFFFFFFFFFFFFFFFFull));
    }
    /* ss_key_make folds key 0 into 1: the empty key must not be that 1 */
    for (uint32_t f = 0; f < TR_N_SPARSE; f++)
        assert_true(MISSING(f) != 1);
}

static void test_parse_short_and_bad(void **state)
{
    struct tr_example ex;
    /* 2 fields: everything else missing. */
    assert_int_equal(tr_parse_criteo("0\t5", 3, &ex), 0);
    assert_true(ex.label == 0.0f);
    assert_float_equal(ex.dense[0], logf(6.0f), 1e-6);
    for (int j = 1; j < TR_N_DENSE; j++)
        assert_true(ex.dense[j] == 0.0f);
    for (uint32_t f = 0; f < TR_N_SPARSE; f++)
        assert_true(ex.keys[f] == MISSING(f));
    /* "1<TAB>" is 2 fields, one empty. */
    assert_int_equal(tr_parse_criteo("1\t", 2, &ex), 0);
    assert_true(ex.label == 1.0f);
    /* CRLF is stripped. */
    assert_int_equal(tr_parse_criteo("1\t3\r", 4, &ex), 0);
    assert_float_equal(ex.dense[0], logf(4.0f), 1e-6);

    /* 40 fields ok (39 tabs), 41 fields bad even if the extra one is empty. */
    char line[64];
    memset(line, '\t', sizeof(line));
    line[0] = '1';
    assert_int_equal(tr_parse_criteo(line, 39, &ex), 0);  /* 38 tabs: 39 fields */
    assert_int_equal(tr_parse_criteo(line, 40, &ex), 0);  /* 39 tabs: 40 fields */
    assert_int_equal(tr_parse_criteo(line, 41, &ex), SS_E_PROTO);  /* 41 fields */
    line[40] = '5';                                             /* C26 = 5: 40 fields */
    assert_int_equal(tr_parse_criteo(line, 41, &ex), 0);
    assert_true(ex.keys[25] == HASHED(25, "5"));
    line[41] = '\t';
    line[42] = '5';                                             /* 41st field not empty */
    assert_int_equal(tr_parse_criteo(line, 43, &ex), SS_E_PROTO);
    line[41] = '\r';                                            /* 40 fields + CR */
    assert_int_equal(tr_parse_criteo(line, 42, &ex), 0);
    assert_true(ex.keys[25] == HASHED(25, "5"));

    static const char *bad[] = {
        "", "1", "0", "2\t1", "10\t1", "-1\t1", " 1\t1", "1.0\t1", "x\t1", "\t1\t2",
        "1\t1.5", "1\tabc", "1\t-", "1\t+5", "1\t 5", "1\t5 ", "1\t1e5",
        "1\t\t\t\t\t\t\t\t\t\t\t\t\tx",          /* I13 = x */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (tr_parse_criteo(bad[i], strlen(bad[i]), &ex) != SS_E_PROTO)
            fail_msg("line '%s' accepted", bad[i]);
    }
    /* Huge integers saturate instead of failing. */
    const char *huge = "0\t99999999999999999999999999";
    assert_int_equal(tr_parse_criteo(huge, strlen(huge), &ex), 0);
    assert_true(ex.dense[0] > 39.0f && ex.dense[0] < 42.0f);
}

static void test_parse_real_line(void **state)
{
    char path[512];
    if (!t_data_file("criteo/criteo_train_head10k.tsv", path, sizeof(path)))
        return;
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    assert_non_null(fgets(line, sizeof(line), f));
    fclose(f);
    size_t len = strlen(line);
    assert_true(len > 0 && line[len - 1] == '\n');
    struct tr_example ex;
    assert_int_equal(tr_parse_criteo(line, len - 1, &ex), 0);
    assert_true(ex.label == 0.0f);
    static const int64_t dense[TR_N_DENSE] = {1, 1, 5, 0, 1382, 4, 15, 2, 181, 1, 2, -1, 2};
    for (int j = 0; j < TR_N_DENSE; j++) {
        float want = dense[j] < 0 ? 0.0f : (float)log1p((double)dense[j]);
        assert_float_equal(ex.dense[j], want, 1e-6);
    }
    static const uint64_t cats[TR_N_SPARSE] = {
        0x68fd1e64, 0x80e26c9b, 0xfb936136, 0x7b4723c4, 0x25c83c98, 0x7e0ccccf, 0xde7995b8,
        0x1f89b562, 0xa73ee510, 0xa8cd5504, 0xb2cb9c98, 0x37c9c164, 0x2824a5f6, 0x1adce6ef,
        0x8ba8b39a, 0x891b62e7, 0xe5ba7672, 0xf54016b9, 0x21ddcdc9, 0xb1252a9d, 0x07b5194c,
        TR_PARSE_MISSING_RAW, 0x3a171ecb, 0xc5c50484, 0xe8b83407, 0x9727dd16,
    };
    for (uint32_t c = 0; c < TR_N_SPARSE; c++)
        assert_true(ex.keys[c] == ss_key_make(c, cats[c]));
}

/* The whole 10k-row sample through the reader: counts from the data README. */
static void test_read_real_file(void **state)
{
    char path[512];
    if (!t_data_file("criteo/criteo_train_head10k.tsv", path, sizeof(path)))
        return;
    const char *pats[] = {path};
    char err[256];
    tr_reader_t *rd = tr_reader_new(NULL, pats, 1, 0, 1, 0, 1, err, sizeof(err));
    assert_non_null(rd);
    uint64_t *keys = malloc(10000 * TR_N_SPARSE * sizeof(*keys));
    assert_non_null(keys);
    size_t n_keys = 0;
    uint64_t rows = 0, pos = 0, missing = 0;
    double dense_sum = 0.0;
    struct tr_rows rb;
    tr_rows_init(&rb, 100, TR_N_DENSE, TR_N_SPARSE);
    int n;
    while ((n = tr_reader_read(rd, &rb, 100)) > 0) {
        assert_int_equal(tr_rows_values(&rb), (size_t)n * TR_N_SPARSE);  /* one value each */
        for (int i = 0; i < n; i++, rows++) {
            pos += rb.labels[i] == 1.0f;
            for (int j = 0; j < TR_N_DENSE; j++)
                dense_sum += rb.dense[i * TR_N_DENSE + j];
            for (uint32_t f = 0; f < TR_N_SPARSE; f++) {
                uint64_t key = rb.keys[rb.offs[i * TR_N_SPARSE + f]];
                assert_true(rb.weights[rb.offs[i * TR_N_SPARSE + f]] == 1.0f);
                if (key == MISSING(f))
                    missing++;
                else if (rows < 10000)
                    keys[n_keys++] = key;
            }
        }
    }
    assert_int_equal(n, 0);
    struct tr_reader_stats st;
    tr_reader_stats(rd, &st);
    assert_int_equal(rows, 10000);
    assert_int_equal(pos, 2182);
    assert_int_equal(st.lines, 10000);
    assert_int_equal(st.bad_lines, 0);
    assert_int_equal(st.bytes_read, 2422799);
    assert_int_equal(missing, 29640);
    assert_float_equal(dense_sum, 248471.0108, 0.05);
    qsort(keys, n_keys, sizeof(*keys), s_cmp_u64);
    size_t distinct = n_keys ? 1 : 0;
    for (size_t i = 1; i < n_keys; i++)
        distinct += keys[i] != keys[i - 1];
    assert_int_equal(distinct, 43579);      /* distinct (column, value) pairs */
    free(keys);

    /* Second epoch gives the same count. */
    assert_int_equal(tr_reader_rewind(rd), 0);
    rows = 0;
    while ((n = tr_reader_read(rd, &rb, 64)) > 0)
        rows += (uint64_t)n;
    assert_int_equal(rows, 10000);
    tr_reader_stats(rd, &st);
    assert_int_equal(st.lines, 20000);
    assert_int_equal(st.rewinds, 1);
    tr_rows_fini(&rb);
    tr_reader_destroy(&rd);
}

/* ---- splits ---- */

/* Files of many shapes: empty, one line, no trailing newline, bad lines,
 * blank lines, CRLF; every (N, W) in {1,2,3} x {1,2,4}. */
static void test_split_exactly_once(void **state)
{
    uint64_t rng = 42;
    uint64_t id = 0;
    uint64_t n_bad = 0;
    struct s_text t = {0};

    s_write("a0_empty.tsv", "", 0);
    t.len = 0;
    s_good_line(&t, ++id, &rng, 1);
    s_write("a1_one.tsv", t.p, t.len);
    t.len = 0;
    s_good_line(&t, ++id, &rng, 0);
    s_write("a2_one_nonl.tsv", t.p, t.len);
    t.len = 0;
    for (int i = 0; i < 300; i++) {
        if (i % 37 == 5) {
            s_append(&t, i % 2 ? "2\t1\t2\n" : "\n");
            n_bad++;
        } else {
            s_good_line(&t, ++id, &rng, 1);
        }
    }
    s_write("a3_many.tsv", t.p, t.len);
    s_write("a4_empty.tsv", "", 0);
    t.len = 0;
    for (int i = 0; i < 40; i++)
        s_good_line(&t, ++id, &rng, i < 39);
    s_write("a5_nonl.tsv", t.p, t.len);
    s_write("a6_blank.tsv", "\n\n", 2);
    n_bad += 2;
    t.len = 0;
    s_good_line(&t, ++id, &rng, 1);
    s_append(&t, "1\tbad\n");
    n_bad++;
    s_write("a7_tail_bad.tsv", t.p, t.len);
    free(t.p);

    const char *pats[] = {s_path("a*.tsv")};
    for (uint32_t n = 1; n <= 3; n++) {
        for (uint32_t w = 1; w <= 4; w *= 2)
            s_check_split(pats, 1, n, w, id, n_bad);
    }
    /* Many more parts than some files have lines, and big N. */
    s_check_split(pats, 1, 7, 5, id, n_bad);
    s_check_split(pats, 1, 64, 1, id, n_bad);
}

/* Sweep every part count on a small input so that part edges land on every
 * kind of byte (line starts, newlines, middles, file edges). */
static void test_split_sweep(void **state)
{
    uint64_t rng = 7;
    uint64_t id = 0;
    struct s_text t = {0};
    for (int file = 0; file < 3; file++) {
        t.len = 0;
        for (int i = 0; i < 4; i++)
            s_good_line(&t, ++id, &rng, !(file == 1 && i == 3));
        char name[32];
        snprintf(name, sizeof(name), "s%d.tsv", file);
        s_write(name, t.p, t.len);
    }
    free(t.p);
    const char *pats[] = {s_path("s0.tsv"), s_path("s1.tsv"), s_path("s2.tsv")};
    int64_t total = tr_reader_total_bytes(pats, 3, NULL, 0);
    assert_true(total > 100);
    for (uint32_t p = 1; p <= 48; p++) {
        s_check_split(pats, 3, p, 1, id, 0);
        s_check_split(pats, 3, 1, p, id, 0);
    }
    /* One byte per part and beyond. */
    s_check_split(pats, 3, (uint32_t)total, 1, id, 0);
    s_check_split(pats, 3, 2, (uint32_t)total, id, 0);
}

/* Keys (C1) of part (r, w) read from its start into keys; returns the count. */
static size_t s_part_keys(const char *const *pats, size_t n_pats, uint32_t r, uint32_t n_ranks,
                          uint32_t w, uint32_t n_workers, uint64_t *keys, size_t max)
{
    char err[256];
    struct tr_example ex;
    size_t n = 0;
    tr_reader_t *rd = tr_reader_new(NULL, pats, n_pats, r, n_ranks, w, n_workers, err,
                                    sizeof err);
    if (!rd)
        fail_msg("tr_reader_new: %s", err);
    while (tr_reader_next(rd, &ex) == 1 && n < max)
        keys[n++] = ex.keys[0];
    tr_reader_destroy(&rd);
    return n;
}

/* tr_reader_tell / tr_reader_seek (a resumed job): for every part of several
 * splits of three files (one without a final newline, bad lines between), a
 * reader stopped after k lines, for every k, tells its place; a new reader
 * of the same part that seeks there reads exactly the lines the first one
 * had left, in order. At the end of the part the place is
 * TR_READER_POS_END, and a place outside the part is refused. */
static void test_tell_seek_resume(void **state)
{
    uint64_t rng = 11, id = 0;
    struct s_text t = {0};
    for (int file = 0; file < 3; file++) {
        t.len = 0;
        for (int i = 0; i < 9; i++) {
            if (i == 4)
                s_append(&t, "1\tbad\n");
            s_good_line(&t, ++id, &rng, !(file == 1 && i == 8));
        }
        char name[32];
        snprintf(name, sizeof name, "r%d.tsv", file);
        s_write(name, t.p, t.len);
    }
    free(t.p);
    const char *pats[] = {s_path("r0.tsv"), s_path("r1.tsv"), s_path("r2.tsv")};
    uint64_t all[64], rest[64];
    char err[256];
    for (uint32_t parts = 1; parts <= 7; parts++) {
        for (uint32_t w = 0; w < parts; w++) {
            size_t n = s_part_keys(pats, 3, 0, 1, w, parts, all, 64);
            for (size_t k = 0; k <= n; k++) {
                tr_reader_t *a = tr_reader_new(NULL, pats, 3, 0, 1, w, parts, err, sizeof err);
                tr_reader_t *b = tr_reader_new(NULL, pats, 3, 0, 1, w, parts, err, sizeof err);
                assert_non_null(a);
                assert_non_null(b);
                struct tr_example ex;
                for (size_t i = 0; i < k; i++)
                    assert_int_equal(tr_reader_next(a, &ex), 1);
                if (k == n)  /* the part is used up once a read says so */
                    assert_int_equal(tr_reader_next(a, &ex), 0);
                uint64_t pos = tr_reader_tell(a);
                if (k == n)
                    assert_true(pos == TR_READER_POS_END);
                assert_int_equal(tr_reader_seek(b, pos), 0);
                size_t m = 0;
                while (tr_reader_next(b, &ex) == 1 && m < 64)
                    rest[m++] = ex.keys[0];
                if (m != n - k)
                    fail_msg("%u parts, part %u, stopped after %zu of %zu: resumed reader "
                             "read %zu lines, want %zu", parts, w, k, n, m, n - k);
                for (size_t i = 0; i < m; i++)
                    assert_int_equal(rest[i], all[k + i]);
                tr_reader_destroy(&a);
                tr_reader_destroy(&b);
            }
        }
    }
    /* a place outside the part: refused */
    tr_reader_t *rd = tr_reader_new(NULL, pats, 3, 0, 1, 1, 2, err, sizeof err);
    assert_non_null(rd);
    assert_int_equal(tr_reader_seek(rd, 0), SS_E_RANGE);
    tr_reader_destroy(&rd);
}

/* Two short lines, twelve parts: most parts are empty. */
static void test_split_more_parts_than_lines(void **state)
{
    char data[128];
    size_t n = s_c1_line(data, 1, "00000001");
    n += s_c1_line(data + n, 0, "00000002");
    s_write("two.tsv", data, n);
    const char *pats[] = {s_path("two.tsv")};
    for (uint32_t n = 1; n <= 3; n++) {
        for (uint32_t w = 1; w <= 4; w *= 2)
            s_check_split(pats, 1, n, w, 2, 0);
    }
    s_check_split(pats, 1, 3, 4, 2, 0);
    s_check_split(pats, 1, 100, 3, 2, 0);
}

/* ---- files, globs, errors ---- */

/* Open the unreadable file path with tr_reader_new() as a user that may not
 * read it: this process when it is not root, else a child that drops to
 * nobody (root reads every file, so checking as root would check nothing).
 * The error must name the file and say "Permission denied". */
static void s_unreadable_check(const char *path)
{
    char err[256] = "";
    const char *pats[] = {path};
    if (geteuid() != 0) {
        assert_null(tr_reader_new(NULL, pats, 1, 0, 1, 0, 1, err, sizeof(err)));
        assert_non_null(strstr(err, "secret.tsv"));
        assert_non_null(strstr(err, "Permission denied"));
        return;
    }
    assert_int_equal(chmod(g_dir, 0755), 0);  /* nobody may look up the file */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {  /* no cmocka here: the exit status says what went wrong */
        if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
            _exit(10);
        if (access(path, F_OK) != 0)
            _exit(14);  /* a folder above it (TMPDIR) is closed to others */
        if (access(path, R_OK) == 0)
            _exit(11);  /* the file must exist and be unreadable to us */
        if (tr_reader_new(NULL, pats, 1, 0, 1, 0, 1, err, sizeof(err)))
            _exit(12);
        _exit(strstr(err, "secret.tsv") && strstr(err, "Permission denied") ? 0 : 13);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 14) {
        print_message("as nobody the file cannot be looked up: a folder above %s is closed "
                      "to others (TMPDIR?); the check is skipped\n", g_dir);
        skip();
    }
    if (WEXITSTATUS(status) != 0)
        fail_msg("as nobody: exit %d (10 cannot drop privileges, 11 the file is readable, "
                 "12 the reader opened it, 13 the error lacks the file or the reason)",
                 WEXITSTATUS(status));
}

/* Glob matches are sorted by name; patterns keep their order. */
static void test_glob_order(void **state)
{
    static const char *const names[] = {"part-1.tsv", "part-10.tsv", "part-2.tsv", "extra.tsv"};
    static const char *const c1[] = {"1", "10", "2", "99"};
    int64_t total = 0;
    for (int i = 0; i < 4; i++) {
        char line[64];
        size_t n = s_c1_line(line, i & 1, c1[i]);
        s_write(names[i], line, n);
        total += (int64_t)n;
    }
    const char *pats[] = {s_path("extra.tsv"), s_path("part-*.tsv")};
    char err[256];
    tr_reader_t *rd = tr_reader_new(NULL, pats, 2, 0, 1, 0, 1, err, sizeof(err));
    assert_non_null(rd);
    static const char *const order[] = {"99", "1", "10", "2"};
    struct tr_example ex;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(tr_reader_next(rd, &ex), 1);
        assert_true(ex.keys[0] == HASHED(0, order[i]));
    }
    assert_int_equal(tr_reader_next(rd, &ex), 0);
    assert_int_equal(tr_reader_next(rd, &ex), 0);      /* stays at end */
    tr_reader_destroy(&rd);
    tr_reader_destroy(&rd);                             /* NULL is fine */
    assert_int_equal(tr_reader_total_bytes(pats, 2, err, sizeof(err)), total);
    /* Brace expansion: part-2 and part-1 only ("1" and "2": same length). */
    const char *brace[] = {s_path("part-{2,1}.tsv")};
    assert_int_equal(tr_reader_total_bytes(brace, 1, err, sizeof(err)), 2 * (2 + 14 + 1));
}

static void test_errors_name_the_file(void **state)
{
    char err[512];
    const char *missing[] = {s_path("nope.tsv")};
    assert_null(tr_reader_new(NULL, missing, 1, 0, 1, 0, 1, err, sizeof(err)));
    assert_non_null(strstr(err, "cannot open"));
    assert_non_null(strstr(err, "nope.tsv"));
    assert_non_null(strstr(err, "No such file"));
    assert_int_equal(tr_reader_total_bytes(missing, 1, err, sizeof(err)), SS_E_NOTFOUND);

    const char *nomatch[] = {s_path("zzz*.tsv")};
    assert_null(tr_reader_new(NULL, nomatch, 1, 0, 1, 0, 1, err, sizeof(err)));
    assert_non_null(strstr(err, "no file matches"));
    assert_non_null(strstr(err, "zzz*.tsv"));
    assert_int_equal(tr_reader_total_bytes(nomatch, 1, err, sizeof(err)), SS_E_NOTFOUND);

    /* A good file then a missing one: the whole list fails. */
    s_write("ok.tsv", "1\t2\n", 4);
    const char *mixed[] = {s_path("ok.tsv"), s_path("gone.tsv")};
    assert_null(tr_reader_new(NULL, mixed, 2, 0, 1, 0, 1, err, sizeof(err)));
    assert_non_null(strstr(err, "gone.tsv"));

    assert_int_equal(mkdir(s_path("adir"), 0755), 0);
    const char *dir[] = {s_path("adir")};
    assert_null(tr_reader_new(NULL, dir, 1, 0, 1, 0, 1, err, sizeof(err)));
    assert_non_null(strstr(err, "adir"));
    assert_int_equal(tr_reader_total_bytes(dir, 1, err, sizeof(err)), SS_E_IO);

    const char *ok[] = {s_path("ok.tsv")};
    assert_null(tr_reader_new(NULL, ok, 1, 2, 2, 0, 1, err, sizeof(err)));    /* rank >= n_ranks */
    assert_non_null(strstr(err, "rank"));
    assert_null(tr_reader_new(NULL, ok, 1, 0, 1, 0, 0, err, sizeof(err)));    /* no workers */
    assert_null(tr_reader_new(NULL, ok, 0, 0, 1, 0, 1, err, sizeof(err)));    /* no files */
    assert_non_null(strstr(err, "no input"));
    assert_null(tr_reader_new(NULL, ok, 1, 0, 1, 0, 0, NULL, 0));             /* err optional */

    s_write("secret.tsv", "1\t2\n", 4);
    assert_int_equal(chmod(s_path("secret.tsv"), 0), 0);
    s_unreadable_check(s_path("secret.tsv"));
}

/* tr_reader_check_inputs (shadow-ctl check-data, run by the launcher
 * before anything starts) says yes exactly where tr_reader_new does, with
 * the reader's message: globs and braces expanded, a missing file or a
 * folder named, standard input only alone and only where scoring takes it. */
static void test_check_inputs(void **state)
{
    char err[512], err_rd[512];
    s_write("c-1.tsv", "1\t2\n", 4);
    s_write("c-2.tsv", "0\t3\n", 4);
    assert_int_equal(mkdir(s_path("cdir"), 0755), 0);
    const char *globs[] = {s_path("c-1.tsv"), s_path("c-*.tsv"), s_path("c-{2,1}.tsv")};
    assert_int_equal(tr_reader_check_inputs(globs, 3, 0, err, sizeof err), 0);
    tr_reader_t *rd = tr_reader_new(NULL, globs, 3, 0, 1, 0, 1, err_rd, sizeof err_rd);
    assert_non_null(rd);
    tr_reader_destroy(&rd);
    const char *bad[][2] = {{s_path("c-1.tsv"), s_path("gone.tsv")},
                            {s_path("c-{7,8}.tsv"), s_path("c-1.tsv")},
                            {s_path("cdir"), s_path("c-2.tsv")}};
    const int want[] = {SS_E_NOTFOUND, SS_E_NOTFOUND, SS_E_IO};
    const char *names[] = {"gone.tsv", "c-{7,8}.tsv", "cdir"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tr_reader_check_inputs(bad[i], 2, 1, err, sizeof err), want[i]);
        assert_non_null(strstr(err, names[i]));
        assert_null(tr_reader_new(NULL, bad[i], 2, 0, 1, 0, 1, err_rd, sizeof err_rd));
        assert_string_equal(err, err_rd);
    }
    const char *in[] = {"-", s_path("c-1.tsv")};
    assert_int_equal(tr_reader_check_inputs(in, 1, 1, err, sizeof err), 0);
    assert_int_equal(tr_reader_check_inputs(in, 1, 0, err, sizeof err), SS_E_INVAL);
    assert_non_null(strstr(err, "not trained on"));
    assert_int_equal(tr_reader_check_inputs(in, 2, 1, err, sizeof err), SS_E_INVAL);
    assert_non_null(strstr(err, "must be the only"));
    assert_int_equal(tr_reader_check_inputs(in, 0, 1, err, sizeof err), SS_E_INVAL);
}

/* A file removed after the reader was made: SS_E_IO naming it, sticky. */
static void test_file_vanishes(void **state)
{
    s_write("vanish.tsv", "1\t2\n0\t3\n", 8);
    const char *pats[] = {s_path("vanish.tsv")};
    char err[256];
    tr_reader_t *rd = tr_reader_new(NULL, pats, 1, 0, 1, 0, 1, err, sizeof(err));
    assert_non_null(rd);
    assert_int_equal(unlink(s_path("vanish.tsv")), 0);
    struct tr_example ex;
    assert_int_equal(tr_reader_next(rd, &ex), SS_E_IO);
    assert_non_null(strstr(tr_reader_error(rd), "vanish.tsv"));
    struct tr_rows rb;
    tr_rows_init(&rb, 1, TR_N_DENSE, TR_N_SPARSE);
    assert_int_equal(tr_reader_read(rd, &rb, 1), SS_E_IO);
    tr_rows_fini(&rb);
    assert_int_equal(tr_reader_rewind(rd), 0);
    assert_string_equal(tr_reader_error(rd), "");
    tr_reader_destroy(&rd);
}

/* A line longer than the buffer is one bad line; its neighbours survive,
 * in every part it may fall into. */
static void test_overlong_line(void **state)
{
    size_t big = TR_READER_MAX_LINE + 1000;
    char *data = malloc(big + 64);
    assert_non_null(data);
    size_t n = 0;
    n += s_c1_line(data + n, 1, "00000001");
    n += (size_t)sprintf(data + n, "0\t");
    memset(data + n, '7', big);
    n += big;
    data[n++] = '\n';
    n += s_c1_line(data + n, 1, "00000002");
    s_write("long.tsv", data, n);
    free(data);
    const char *pats[] = {s_path("long.tsv")};
    s_check_split(pats, 1, 1, 1, 2, 1);
    s_check_split(pats, 1, 1, 3, 2, 1);
    s_check_split(pats, 1, 2, 4, 2, 1);
}

static void test_batch_and_stats(void **state)
{
    uint64_t rng = 3;
    struct s_text t = {0};
    for (uint64_t i = 1; i <= 1000; i++)
        s_good_line(&t, i, &rng, 1);
    s_write("batch.tsv", t.p, t.len);
    size_t bytes = t.len;
    free(t.p);
    const char *pats[] = {s_path("batch.tsv")};
    tr_reader_t *rd = tr_reader_new(NULL, pats, 1, 0, 1, 0, 1, NULL, 0);
    assert_non_null(rd);
    struct tr_rows rb;
    tr_rows_init(&rb, 300, TR_N_DENSE, TR_N_SPARSE);
    assert_int_equal(tr_reader_read(rd, &rb, 300), 300);
    assert_true(rb.keys[rb.offs[0]] == ss_key_make(0, 1));
    assert_true(rb.keys[rb.offs[299 * TR_N_SPARSE]] == ss_key_make(0, 300));
    assert_int_equal(tr_reader_read(rd, &rb, 300), 300);
    assert_int_equal(tr_reader_read(rd, &rb, 1000), 300);  /* at most rows.max */
    assert_int_equal(tr_reader_read(rd, &rb, 300), 100);
    assert_true(rb.keys[rb.offs[99 * TR_N_SPARSE]] == ss_key_make(0, 1000));
    assert_true(rb.labels[99] == 0.0f);                 /* id 1000 is even */
    assert_int_equal(tr_reader_read(rd, &rb, 300), 0);
    assert_int_equal(tr_reader_read(rd, &rb, 0), 0);
    struct tr_reader_stats st;
    tr_reader_stats(rd, &st);
    assert_int_equal(st.lines, 1000);
    assert_int_equal(st.bad_lines, 0);
    assert_int_equal(st.bytes_read, bytes);
    assert_int_equal(st.part_bytes, bytes);
    assert_int_equal(tr_reader_rewind(rd), 0);
    assert_int_equal(tr_reader_read(rd, &rb, 5), 5);
    assert_true(rb.keys[rb.offs[0]] == ss_key_make(0, 1));
    tr_rows_fini(&rb);
    tr_reader_destroy(&rd);
}

/* One reader per thread over a shared input: no shared state (run under
 * ThreadSanitizer in CI), and the parts still cover every line once. */
struct s_thread_arg {
    const char *const *pats;    /* input */
    uint32_t rank;              /* this thread's part */
    uint32_t worker;
    uint64_t *keys;             /* C1 keys read, owned by the thread's slot */
    uint64_t n;                 /* keys read */
    int rc;                     /* last tr_reader_next result */
};

static void *s_thread_read(void *p)
{
    struct s_thread_arg *a = p;
    tr_reader_t *rd = tr_reader_new(NULL, a->pats, 1, a->rank, 2, a->worker, 3, NULL, 0);
    if (!rd) {
        a->rc = -100;
        return NULL;
    }
    struct tr_rows rb;
    tr_rows_init(&rb, 17, TR_N_DENSE, TR_N_SPARSE);
    int n;
    while ((n = tr_reader_read(rd, &rb, 17)) > 0) {
        for (int i = 0; i < n; i++)
            a->keys[a->n++] = rb.keys[rb.offs[i * TR_N_SPARSE]];
    }
    a->rc = n;
    tr_rows_fini(&rb);
    tr_reader_destroy(&rd);
    return NULL;
}

static void test_threads(void **state)
{
    uint64_t rng = 11;
    struct s_text t = {0};
    uint64_t n_ids = 3000;
    for (uint64_t i = 1; i <= n_ids; i++)
        s_good_line(&t, i, &rng, 1);
    s_write("thr.tsv", t.p, t.len);
    free(t.p);
    const char *pats[] = {s_path("thr.tsv")};
    struct s_thread_arg args[6];
    pthread_t th[6];
    for (int k = 0; k < 6; k++) {
        args[k] = (struct s_thread_arg){pats, (uint32_t)k / 3, (uint32_t)k % 3,
                                        malloc(n_ids * sizeof(uint64_t)), 0, 0};
        assert_non_null(args[k].keys);
        assert_int_equal(pthread_create(&th[k], NULL, s_thread_read, &args[k]), 0);
    }
    uint64_t *all = malloc(n_ids * sizeof(*all));
    assert_non_null(all);
    uint64_t n = 0;
    for (int k = 0; k < 6; k++) {
        assert_int_equal(pthread_join(th[k], NULL), 0);
        assert_int_equal(args[k].rc, 0);
        assert_true(args[k].n > n_ids / 12);    /* every part got a fair share */
        assert_true(n + args[k].n <= n_ids);
        memcpy(all + n, args[k].keys, args[k].n * sizeof(*all));
        n += args[k].n;
        free(args[k].keys);
    }
    assert_int_equal(n, n_ids);
    qsort(all, n, sizeof(*all), s_cmp_u64);
    for (uint64_t i = 1; i < n; i++)
        assert_true(all[i] != all[i - 1]);
    free(all);
}

/* ---- layouts, headers, bad lines ---- */

/* A csv layout from --set style overrides. */
static struct ss_cfg *s_csv_cfg(const char *columns)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char err[256], cols[128];
    assert_non_null(cfg);
    snprintf(cols, sizeof cols, "data.columns=%s", columns);
    const char *sets[] = {"data.format=csv", cols};
    if (ss_cfg_load(cfg, NULL, sets, 2, err, sizeof err) != 0)
        fail_msg("ss_cfg_load: %s", err);
    return cfg;
}

/* Read every part of n_parts of pats; sum examples and the counters. */
static void s_read_all(const struct ss_data_cfg *d, const char *const *pats, size_t n_pats,
                       uint32_t n_parts, uint64_t *examples, struct tr_reader_stats *sum)
{
    struct tr_rows rb;
    memset(sum, 0, sizeof *sum);
    *examples = 0;
    tr_rows_init(&rb, 7, d->n_dense, d->n_fields);
    for (uint32_t w = 0; w < n_parts; w++) {
        struct tr_reader_stats st;
        tr_reader_t *rd = tr_reader_new(d, pats, n_pats, 0, 1, w, n_parts, NULL, 0);
        int n;
        assert_non_null(rd);
        while ((n = tr_reader_read(rd, &rb, 7)) > 0)
            *examples += (uint64_t)n;
        assert_int_equal(n, 0);
        tr_reader_stats(rd, &st);
        sum->lines += st.lines;
        sum->bad_lines += st.bad_lines;
        sum->headers += st.headers;
        tr_reader_destroy(&rd);
    }
    tr_rows_fini(&rb);
}

/* A header is skipped only as the first line of each file, whatever the
 * split; the same text later in a file is a bad line. */
static void test_csv_headers(void **state)
{
    struct ss_cfg *cfg = s_csv_cfg("label,categorical,categorical");
    struct s_text t = {0};
    s_append(&t, "click,a,b\n");
    for (int i = 0; i < 50; i++)
        s_append(&t, "%d,x%d,y%d\n", i & 1, i, i);
    s_append(&t, "click,a,b\n");
    s_write("h1.csv", t.p, t.len);
    s_write("h2.csv", t.p, t.len);
    free(t.p);
    const char *pats[] = {s_path("h1.csv"), s_path("h2.csv")};
    for (uint32_t parts = 1; parts <= 9; parts += 4) {
        uint64_t ex;
        struct tr_reader_stats st;
        s_read_all(&cfg->data, pats, 2, parts, &ex, &st);
        assert_int_equal(ex, 100);
        assert_int_equal(st.headers, 2);
        assert_int_equal(st.bad_lines, 2);
        assert_int_equal(st.lines, 104);
    }
    cfg->data.header = SS_HEADER_FALSE;
    uint64_t ex;
    struct tr_reader_stats st;
    s_read_all(&cfg->data, pats, 2, 3, &ex, &st);
    assert_int_equal(st.headers, 0);
    assert_int_equal(st.bad_lines, 4);
    free(cfg);
}

/* tr_reader_keep_gaps: rebuilding the input's pattern of good and bad lines
 * from each part's rows and gaps (plus the bad lines after a part's last
 * row), parts in order, gives the file's pattern back for every split; the
 * header is in no gap. */
static void test_gaps(void **state)
{
    struct ss_cfg *cfg = s_csv_cfg("label,categorical");
    struct s_text t = {0};
    char want[400], got[400];
    size_t nw = 0;
    s_append(&t, "click,a\n");
    for (int i = 0; i < 300; i++) {
        int bad = i % 7 == 3 || i % 11 == 0 || i >= 296;  /* runs of 2, and at the end */
        s_append(&t, bad ? "x,%d\n" : "1,%d\n", i);
        want[nw++] = bad ? 'B' : 'G';
    }
    s_write("gaps.csv", t.p, t.len);
    free(t.p);
    const char *pats[] = {s_path("gaps.csv")};
    struct tr_rows rb;
    tr_rows_init(&rb, 7, cfg->data.n_dense, cfg->data.n_fields);
    for (uint32_t parts = 1; parts <= 5; parts++) {
        size_t ng = 0;
        for (uint32_t w = 0; w < parts; w++) {
            tr_reader_t *rd = tr_reader_new(&cfg->data, pats, 1, 0, 1, w, parts, NULL, 0);
            struct tr_reader_stats st;
            uint64_t in_gaps = 0;
            int n;
            assert_non_null(rd);
            tr_reader_keep_gaps(rd);
            while ((n = tr_reader_read(rd, &rb, 7)) > 0) {
                const uint32_t *g = tr_reader_gaps(rd);
                for (int i = 0; i < n; i++) {
                    for (uint32_t k = 0; k < g[i]; k++)
                        got[ng++] = 'B';
                    got[ng++] = 'G';
                    in_gaps += g[i];
                }
            }
            tr_reader_stats(rd, &st);
            for (uint64_t k = in_gaps; k < st.bad_lines; k++)
                got[ng++] = 'B';
            tr_reader_destroy(&rd);
        }
        assert_int_equal(ng, nw);
        assert_memory_equal(got, want, nw);
    }
    tr_rows_fini(&rb);
    free(cfg);
}

/* Bad lines first: the counters are exact as soon as the first example is
 * read (not only after a batch); the first bad line is kept with its place
 * and why, and its line number found. */
static void test_bad_lines_first(void **state)
{
    struct s_text t = {0};
    s_append(&t, "id,click,hour\n");              /* not Criteo TSV */
    s_append(&t, "x\t1\n");                       /* bad label */
    s_append(&t, "1\t2\t3.5\n");                  /* bad dense */
    uint64_t rng = 5;
    for (uint64_t i = 1; i <= 20; i++)
        s_good_line(&t, i, &rng, 1);
    s_write("badfirst.tsv", t.p, t.len);
    free(t.p);
    const char *pats[] = {s_path("badfirst.tsv")};
    tr_reader_t *rd = tr_reader_new(NULL, pats, 1, 0, 1, 0, 1, NULL, 0);
    struct tr_reader_bad bad;
    struct tr_reader_stats st;
    struct tr_rows rb;
    assert_non_null(rd);
    assert_int_equal(tr_reader_first_bad(rd, &bad), 0);
    tr_rows_init(&rb, 1, TR_N_DENSE, TR_N_SPARSE);
    assert_int_equal(tr_reader_read(rd, &rb, 1), 1);
    tr_reader_stats(rd, &st);
    assert_int_equal(st.lines, 4);
    assert_int_equal(st.bad_lines, 3);
    assert_int_equal(tr_reader_first_bad(rd, &bad), 1);
    assert_string_equal(bad.path, s_path("badfirst.tsv"));
    assert_int_equal(bad.offset, 0);
    assert_int_equal(bad.global, 0);
    assert_string_equal(bad.why, "expected 40 tab-separated fields (label, 13 dense, 26 "
                        "categorical), found 3 comma-separated; set data.format: csv with "
                        "data.delimiter and data.columns, one role per column (conf/avazu.yaml "
                        "is an example)");
    uint64_t line = 0;
    assert_int_equal(tr_reader_line_number(bad.path, bad.offset, &line), 0);
    assert_int_equal(line, 1);
    assert_int_equal(tr_reader_line_number(bad.path, 20, &line), 0);   /* "1\t2\t3.5" */
    assert_int_equal(line, 3);
    assert_int_equal(tr_reader_line_number(bad.path, 1u << 30, &line), SS_E_IO);
    while (tr_reader_read(rd, &rb, 1) > 0)
        ;
    tr_reader_stats(rd, &st);
    assert_int_equal(st.lines, 23);
    assert_int_equal(st.bad_lines, 3);
    tr_rows_fini(&rb);
    tr_reader_destroy(&rd);

    /* a part that starts after the bad lines keeps its own first bad line:
     * none; the part with them orders by the offset in the whole input */
    rd = tr_reader_new(NULL, pats, 1, 0, 1, 1, 2, NULL, 0);
    struct tr_example ex;
    while (tr_reader_next(rd, &ex) == 1)
        ;
    assert_int_equal(tr_reader_first_bad(rd, &bad), 0);
    tr_reader_destroy(&rd);
}

/* An over-long line is the first bad line, with why it is bad. */
static void test_overlong_first_bad(void **state)
{
    size_t big = TR_READER_MAX_LINE + 10;
    char *data = malloc(big + 64);
    assert_non_null(data);
    size_t n = s_c1_line(data, 1, "00000001");
    memset(data + n, '7', big);
    n += big;
    data[n++] = '\n';
    s_write("long1.tsv", data, n);
    free(data);
    const char *pats[] = {s_path("long1.tsv")};
    tr_reader_t *rd = tr_reader_new(NULL, pats, 1, 0, 1, 0, 1, NULL, 0);
    struct tr_example ex;
    struct tr_reader_bad bad;
    assert_int_equal(tr_reader_next(rd, &ex), 1);
    assert_int_equal(tr_reader_next(rd, &ex), 0);
    assert_int_equal(tr_reader_first_bad(rd, &bad), 1);
    assert_int_equal(bad.offset, 24);
    assert_non_null(strstr(bad.why, "line longer than"));
    tr_reader_destroy(&rd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_full_line),
        cmocka_unit_test(test_parse_hex_fast_path),
        cmocka_unit_test(test_issue_distinct_raw_values),
        cmocka_unit_test(test_parse_short_and_bad),
        cmocka_unit_test(test_parse_real_line),
        cmocka_unit_test(test_read_real_file),
        cmocka_unit_test_setup_teardown(test_split_exactly_once, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_split_sweep, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_tell_seek_resume, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_split_more_parts_than_lines, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_glob_order, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_errors_name_the_file, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_check_inputs, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_file_vanishes, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_overlong_line, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_batch_and_stats, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_threads, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_csv_headers, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_gaps, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_bad_lines_first, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_overlong_first_bad, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
