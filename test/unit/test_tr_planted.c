/* test_tr_planted.c - unit tests of trainer/tr_planted (shadow-datagen's model).
 *
 * Checks the written data against the model: base rate and Bayes NE in sane
 * ranges and consistent with tr_eval, byte-identical output per seed, every
 * written line parsed back by tr_reader into the sampled row, the text format
 * against printf, and the Zipf and missing-value frequencies against their
 * probabilities. Temp files live under a mkdtemp directory. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ss_err.h"
#include "ss_hash.h"
#include "tr_eval.h"
#include "tr_planted.h"
#include "tr_reader.h"

static char g_dir[256];
static char g_files[4][512];

static int s_setup(void **state)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof(g_dir), "%s/tr_planted_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(g_dir));
    for (int i = 0; i < 4; i++)
        snprintf(g_files[i], sizeof(g_files[i]), "%s/f%d.tsv", g_dir, i);
    *state = tr_planted_new(1);
    return 0;
}

static int s_teardown(void **state)
{
    tr_planted_t *m = *state;
    tr_planted_destroy(&m);
    for (int i = 0; i < 4; i++)
        unlink(g_files[i]);
    rmdir(g_dir);
    return 0;
}

/* Write n rows of stream from m into path; return the stats. */
static struct tr_planted_stats s_write(const tr_planted_t *m, uint32_t stream, uint64_t n,
                                       const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    struct tr_planted_stats st = {0};
    assert_int_equal(tr_planted_write(m, stream, n, fd, &st), 0);
    assert_int_equal(close(fd), 0);
    return st;
}

/* Read a whole file into a malloc'd buffer. */
static char *s_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Base rate near the target, Bayes NE well below 1, and equal to the NE
 * tr_eval computes from the true probabilities. */
static void test_base_rate_and_bayes_ne(void **state)
{
    const tr_planted_t *m = *state;
    uint64_t n = 20000;
    struct tr_planted_stats st = s_write(m, TR_PLANTED_STREAM_TRAIN, n, g_files[0]);
    assert_int_equal(st.rows, n);
    double p = tr_planted_base_rate(&st);
    double ne = tr_planted_bayes_ne(&st);
    if (!(p > 0.2 && p < 0.3))
        fail_msg("base rate %.4f outside [0.2, 0.3]", p);
    if (!(ne > 0.3 && ne < 0.95))
        fail_msg("Bayes NE %.4f outside (0.3, 0.95)", ne);

    tr_eval_t *ev = tr_eval_new(n);
    uint64_t rng = tr_planted_stream(m, TR_PLANTED_STREAM_TRAIN);
    struct tr_planted_row row;
    for (uint64_t i = 0; i < n; i++) {
        tr_planted_sample(m, &rng, &row);
        tr_eval_add(ev, (float)row.prob, row.label);
    }
    struct tr_eval_result r;
    tr_eval_result(ev, &r);
    assert_int_equal(r.positives, st.positives);
    assert_float_equal(r.ne, ne, 1e-5);
    assert_float_equal(r.calibration, 1.0, 0.05);   /* true probabilities are calibrated */
    assert_true(r.auc > 0.7);
    tr_eval_destroy(&ev);

    /* Held-out stream: same model, similar numbers. */
    struct tr_planted_stats ev_st = s_write(m, TR_PLANTED_STREAM_EVAL, n, g_files[1]);
    assert_float_equal(tr_planted_base_rate(&ev_st), p, 0.02);
    assert_float_equal(tr_planted_bayes_ne(&ev_st), ne, 0.03);

    struct tr_planted_stats none = {0};
    assert_true(isnan(tr_planted_base_rate(&none)));
    assert_true(isnan(tr_planted_bayes_ne(&none)));
}

/* Same seed -> same bytes; another seed or stream -> different bytes. */
static void test_same_seed_identical(void **state)
{
    const tr_planted_t *m = *state;
    tr_planted_t *again = tr_planted_new(1);
    tr_planted_t *other = tr_planted_new(2);
    assert_float_equal(tr_planted_bias(again), tr_planted_bias(m), 0.0);
    /* 40000 rows are about 10 MB: several hand-overs between the two buffers. */
    uint64_t n = 40000;
    struct tr_planted_stats a = s_write(m, TR_PLANTED_STREAM_TRAIN, n, g_files[0]);
    struct tr_planted_stats b = s_write(again, TR_PLANTED_STREAM_TRAIN, n, g_files[1]);
    s_write(other, TR_PLANTED_STREAM_TRAIN, 3000, g_files[2]);
    s_write(m, TR_PLANTED_STREAM_EVAL, 3000, g_files[3]);
    size_t la, lb, lc, ld;
    char *da = s_slurp(g_files[0], &la);
    char *db = s_slurp(g_files[1], &lb);
    char *dc = s_slurp(g_files[2], &lc);
    char *dd = s_slurp(g_files[3], &ld);
    assert_int_equal(la, lb);
    assert_int_equal(la, a.bytes);
    assert_int_equal(a.positives, b.positives);
    assert_memory_equal(da, db, la);
    assert_true(la > 2 * (4u << 20));
    /* The file is the formatted rows of the stream, in order. */
    uint64_t rng = tr_planted_stream(m, TR_PLANTED_STREAM_TRAIN);
    struct tr_planted_row row;
    char line[TR_PLANTED_LINE_MAX];
    size_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        tr_planted_sample(m, &rng, &row);
        size_t len = tr_planted_format(m, &row, line);
        assert_true(off + len <= la);
        if (memcmp(da + off, line, len) != 0)
            fail_msg("row %llu differs from the stream", (unsigned long long)i);
        off += len;
    }
    assert_int_equal(off, la);
    assert_true(lc != la || memcmp(da, dc, la) != 0);
    assert_true(ld != la || memcmp(da, dd, la) != 0);
    free(da);
    free(db);
    free(dc);
    free(dd);
    tr_planted_destroy(&again);
    tr_planted_destroy(&other);
    assert_null(other);
}

/* tr_reader parses every written line into exactly the sampled row. */
static void test_written_rows_parse_back(void **state)
{
    const tr_planted_t *m = *state;
    uint64_t n = 5000;
    struct tr_planted_stats st = s_write(m, TR_PLANTED_STREAM_EVAL, n, g_files[0]);
    const char *pats[] = {g_files[0]};
    char err[256];
    tr_reader_t *rd = tr_reader_new(NULL, pats, 1, 0, 1, 0, 1, err, sizeof(err));
    assert_non_null(rd);
    uint64_t rng = tr_planted_stream(m, TR_PLANTED_STREAM_EVAL);
    struct tr_planted_row row;
    struct tr_example ex;
    uint64_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        assert_int_equal(tr_reader_next(rd, &ex), 1);
        tr_planted_sample(m, &rng, &row);
        assert_true(ex.label == row.label);
        pos += row.label == 1.0f;
        for (int j = 0; j < TR_N_DENSE; j++) {
            float want = row.dense[j] < 0 ? 0.0f : (float)log1p((double)row.dense[j]);
            assert_float_equal(ex.dense[j], want, 1e-6);
        }
        for (uint32_t f = 0; f < TR_N_SPARSE; f++) {
            uint64_t raw = row.ids[f] < tr_planted_vocab(m, f)
                               ? tr_planted_hex(m, f, row.ids[f])
                               : TR_PARSE_MISSING_RAW;
            assert_true(ex.keys[f] == ss_key_make(f, raw));
        }
    }
    assert_int_equal(tr_reader_next(rd, &ex), 0);
    struct tr_reader_stats rs;
    tr_reader_stats(rd, &rs);
    assert_int_equal(rs.bad_lines, 0);
    assert_int_equal(rs.bytes_read, st.bytes);
    assert_int_equal(pos, st.positives);
    tr_reader_destroy(&rd);
}

/* The hand-written formatter agrees with printf. */
static void test_format_matches_printf(void **state)
{
    const tr_planted_t *m = *state;
    uint64_t rng = 12345;
    struct tr_planted_row row;
    char got[TR_PLANTED_LINE_MAX];
    char want[1024];
    for (int i = 0; i < 2000; i++) {
        tr_planted_sample(m, &rng, &row);
        if (i == 0) {                   /* extremes of the formats */
            row.dense[0] = 0;
            row.dense[1] = 4294967295;
            row.ids[0] = 0;
        }
        size_t n = tr_planted_format(m, &row, got);
        assert_true(n <= TR_PLANTED_LINE_MAX);
        int w = snprintf(want, sizeof(want), "%d", row.label == 1.0f);
        for (int j = 0; j < TR_N_DENSE; j++) {
            if (row.dense[j] >= 0)
                w += snprintf(want + w, sizeof(want) - (size_t)w, "\t%lld",
                              (long long)row.dense[j]);
            else
                w += snprintf(want + w, sizeof(want) - (size_t)w, "\t");
        }
        for (uint32_t f = 0; f < TR_N_SPARSE; f++) {
            if (row.ids[f] < tr_planted_vocab(m, f))
                w += snprintf(want + w, sizeof(want) - (size_t)w, "\t%08x",
                              tr_planted_hex(m, f, row.ids[f]));
            else
                w += snprintf(want + w, sizeof(want) - (size_t)w, "\t");
        }
        w += snprintf(want + w, sizeof(want) - (size_t)w, "\n");
        assert_int_equal(n, (size_t)w);
        assert_memory_equal(got, want, n);
    }
}

static int s_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a;
    uint32_t y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Zipf probabilities: hand values, normalization, empirical frequencies;
 * missing rates; distinct hex per id. */
static void test_zipf_and_missing(void **state)
{
    const tr_planted_t *m = *state;
    /* Field C9 has 3 ids: p(k) = (k+1)^-1.1 / (1 + 2^-1.1 + 3^-1.1). */
    assert_int_equal(tr_planted_vocab(m, 8), 3);
    assert_float_equal(tr_planted_zipf_prob(m, 8, 0), 0.566517892, 1e-9);
    assert_float_equal(tr_planted_zipf_prob(m, 8, 1), 0.264289942, 1e-9);
    assert_float_equal(tr_planted_zipf_prob(m, 8, 3), 0.0, 0.0);
    /* C3 has 1e6 ids with a tail past the table: probabilities sum to 1. */
    uint32_t big = tr_planted_vocab(m, 2);
    assert_int_equal(big, 1000000);
    double sum = 0.0;
    double tail = 0.0;
    for (uint32_t k = 0; k < big; k++) {
        double p = tr_planted_zipf_prob(m, 2, k);
        sum += p;
        tail += k >= 4096 ? p : 0.0;
    }
    assert_float_equal(sum, 1.0, 1e-9);
    assert_true(tr_planted_zipf_prob(m, 2, 4095) > tr_planted_zipf_prob(m, 2, 4096));

    uint64_t n = 60000;
    uint64_t rng = tr_planted_stream(m, 77);
    struct tr_planted_row row;
    uint64_t c9_zero = 0, c9_seen = 0, c3_tail = 0, c3_seen = 0, c22_miss = 0, i12_miss = 0;
    for (uint64_t i = 0; i < n; i++) {
        tr_planted_sample(m, &rng, &row);
        if (row.ids[8] < 3) {
            c9_seen++;
            c9_zero += row.ids[8] == 0;
        }
        if (row.ids[2] < big) {
            c3_seen++;
            c3_tail += row.ids[2] >= 4096;
        }
        c22_miss += row.ids[21] == tr_planted_vocab(m, 21);
        i12_miss += row.dense[11] < 0;
        for (int j = 0; j < TR_N_DENSE; j++)
            assert_true(row.dense[j] >= -1);
    }
    /* Within 5 standard deviations. */
    struct {
        const char *what;
        double got, p;
        uint64_t n;
    } checks[] = {
        {"C9 id 0", (double)c9_zero / (double)c9_seen, 0.566517892, c9_seen},
        {"C3 tail", (double)c3_tail / (double)c3_seen, tail, c3_seen},
        {"C22 missing", (double)c22_miss / (double)n, 195.0 / 256.0, n},
        {"I12 missing", (double)i12_miss / (double)n, 197.0 / 256.0, n},
        {"C9 present", (double)c9_seen / (double)n, 1.0, n},
    };
    for (size_t c = 0; c < sizeof(checks) / sizeof(checks[0]); c++) {
        double sd = sqrt(checks[c].p * (1 - checks[c].p) / (double)checks[c].n);
        if (fabs(checks[c].got - checks[c].p) > 5 * sd + 1e-12)
            fail_msg("%s: frequency %.5f, probability %.5f", checks[c].what, checks[c].got,
                     checks[c].p);
    }
    assert_true(tail > 0.15 && tail < 0.35);

    /* The id -> hex map is a bijection: all ids of a field stay distinct. */
    uint32_t v = tr_planted_vocab(m, 9);
    uint32_t *hex = malloc(v * sizeof(*hex));
    assert_non_null(hex);
    for (uint32_t k = 0; k < v; k++)
        hex[k] = tr_planted_hex(m, 9, k);
    qsort(hex, v, sizeof(*hex), s_cmp_u32);
    for (uint32_t k = 1; k < v; k++)
        assert_true(hex[k] != hex[k - 1]);
    free(hex);
}

/* Writing to a bad descriptor reports SS_E_IO with errno. */
static void test_write_error(void **state)
{
    const tr_planted_t *m = *state;
    int fd = open("/dev/null", O_RDONLY);
    assert_true(fd >= 0);
    struct tr_planted_stats st = {0};
    errno = 0;
    assert_int_equal(tr_planted_write(m, 0, 10, fd, &st), SS_E_IO);
    assert_int_equal(errno, EBADF);
    assert_int_equal(st.bytes, 0);
    close(fd);
    int full = open("/dev/full", O_WRONLY);
    if (full >= 0) {
        memset(&st, 0, sizeof(st));
        assert_int_equal(tr_planted_write(m, 0, 10, full, &st), SS_E_IO);
        assert_int_equal(errno, ENOSPC);
        close(full);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base_rate_and_bayes_ne),
        cmocka_unit_test(test_same_seed_identical),
        cmocka_unit_test(test_written_rows_parse_back),
        cmocka_unit_test(test_format_matches_printf),
        cmocka_unit_test(test_zipf_and_missing),
        cmocka_unit_test(test_write_error),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
