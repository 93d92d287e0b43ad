/* test_tr_mfile.c - unit tests of the model file (trainer/tr_mfile): a file
 * written and read back holds the exact rows, dense floats and config; every
 * truncation and every single flipped byte of it is refused with an error,
 * never a crash; duplicate rows, non-finite floats, a writer given fewer rows
 * than announced and non-data settings are refused; the checksum does not
 * depend on how the bytes are split; a config text that sets a key a model
 * file does not record is refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ss_cfg.h"
#include "ss_err.h"
#include "ss_mem.h"
#include "t.h"
#include "tr_mfile.h"

#define N_ROWS 5

/* A small job: 8-float embeddings with first-order terms, two 2-layer MLPs. */
static const char *const g_sets[] = {"model.embedding_dim=8", "model.bottom_mlp=[16, 8]",
                                     "model.top_mlp=[8, 1]", "job.seed=42",
                                     "tables.init_scale=0.05"};

/* Write a file of the job above at path: dense floats i * 0.001, row r of
 * table r (key 1000 + r) floats r + j / 8. Returns the info written. */
static struct tr_mfile_info s_write(const char *path, uint64_t n_rows_written)
{
    struct ss_cfg *cfg = ss_calloc(1, sizeof *cfg);
    char err[1024], text[TR_MFILE_MAX_TEXT];
    assert_int_equal(ss_cfg_load(cfg, NULL, g_sets, 5, err, sizeof err), 0);
    int tn = tr_mfile_cfg_text(cfg, text, sizeof text);
    assert_true(tn > 0);
    struct tr_model_conf mc;
    assert_int_equal(tr_mfile_model_conf(cfg, &mc), 0);
    tr_model_t *m = tr_model_new(&mc, err, sizeof err);
    assert_non_null(m);
    struct tr_mfile_info info = {tr_model_n_params(m), N_ROWS, ss_cfg_row_dim(cfg),
                                 (uint32_t)cfg->n_tables, 77, tr_mfile_shape_hash(&mc),
                                 (uint64_t)tn};
    tr_mfile_writer_t *w = tr_mfile_writer_new(path, &info, text, (size_t)tn, err, sizeof err);
    assert_non_null(w);
    float *d = ss_malloc(info.n_params * sizeof(float));
    for (size_t i = 0; i < info.n_params; i++)
        d[i] = (float)i * 0.001f;
    assert_int_equal(tr_mfile_write_dense(w, d, 10, err, sizeof err), 0);  /* in two parts */
    assert_int_equal(tr_mfile_write_dense(w, d + 10, info.n_params - 10, err, sizeof err), 0);
    for (uint32_t r = 0; r < n_rows_written; r++) {
        float row[9];
        for (uint32_t j = 0; j < 9; j++)
            row[j] = (float)r + (float)j / 8;
        assert_int_equal(tr_mfile_write_row(w, r, 1000 + r, row, err, sizeof err), 0);
    }
    int rc = tr_mfile_writer_commit(&w, err, sizeof err);
    if (n_rows_written == N_ROWS)
        assert_int_equal(rc, 0);
    else
        assert_int_equal(rc, SS_E_INVAL);
    assert_null(w);
    ss_free(d);
    tr_model_destroy(&m);
    ss_free(cfg);
    return info;
}

/* The whole file at path (caller frees); *n its size. */
static unsigned char *s_slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void test_round_trip(void **state)
{
    struct t_fix *fx = *state;
    char err[1024];
    struct tr_mfile_info info = s_write(fx->path, N_ROWS);
    tr_mfile_t *m = tr_mfile_load(fx->path, NULL, 0, err, sizeof err);
    if (!m)
        fail_msg("%s", err);
    const struct tr_mfile_info *in = tr_mfile_info(m);
    assert_int_equal(in->n_params, info.n_params);
    assert_int_equal(in->n_rows, N_ROWS);
    assert_int_equal(in->row_dim, 9);
    assert_int_equal(in->n_tables, 26);
    assert_int_equal(in->save_id, 77);
    const struct ss_cfg *cfg = tr_mfile_cfg(m);
    assert_int_equal(cfg->embedding_dim, 8);
    assert_int_equal(cfg->job_seed, 42);
    assert_true(cfg->table_init_scale == 0.05);
    assert_int_equal(cfg->bottom_mlp.n, 2);
    assert_int_equal(cfg->bottom_mlp.v[0], 16);
    for (size_t i = 0; i < info.n_params; i++)
        assert_true(tr_mfile_dense(m)[i] == (float)i * 0.001f);
    for (uint32_t r = 0; r < N_ROWS; r++) {
        const float *row = tr_mfile_row(m, r, 1000 + r);
        assert_non_null(row);
        for (uint32_t j = 0; j < 9; j++)
            assert_true(row[j] == (float)r + (float)j / 8);
        assert_null(tr_mfile_row(m, r + 1, 1000 + r));  /* another table's key */
    }
    assert_null(tr_mfile_row(m, 0, 999));
    tr_mfile_destroy(&m);
    assert_null(m);
    /* a data.* setting applies; another key is refused */
    const char *nl[] = {"data.labels=false"}, *bad[] = {"model.embedding_dim=4"};
    m = tr_mfile_load(fx->path, nl, 1, err, sizeof err);
    assert_non_null(m);
    assert_int_equal(tr_mfile_cfg(m)->data.labels, 0);
    tr_mfile_destroy(&m);
    assert_null(tr_mfile_load(fx->path, bad, 1, err, sizeof err));
    assert_non_null(strstr(err, "only data.* keys may be set"));
}

/* Every shorter prefix, every longer file and every single flipped byte is
 * refused (the checksums cover every byte). */
static void test_every_corruption_refused(void **state)
{
    struct t_fix *fx = *state;
    char err[1024];
    size_t n;
    s_write(fx->path, N_ROWS);
    unsigned char *b = s_slurp(fx->path, &n);
    unsigned char *c = malloc(n + 1);
    for (size_t k = 0; k < n; k++) {
        memcpy(c, b, k);
        tr_mfile_t *m = tr_mfile_load_mem(c, k, "t.ssm", NULL, 0, err, sizeof err);
        if (m)
            fail_msg("a %zu-byte prefix of %zu loaded", k, n);
    }
    memcpy(c, b, n);
    c[n] = 0;
    assert_null(tr_mfile_load_mem(c, n + 1, "t.ssm", NULL, 0, err, sizeof err));
    assert_non_null(strstr(err, "wrong size"));
    for (size_t k = 0; k < n; k++) {
        memcpy(c, b, n);
        c[k] ^= 0x10;
        tr_mfile_t *m = tr_mfile_load_mem(c, n, "t.ssm", NULL, 0, err, sizeof err);
        if (m)
            fail_msg("byte %zu of %zu flipped: loaded", k, n);
    }
    memcpy(c, b, n);
    tr_mfile_t *m = tr_mfile_load_mem(c, n, "t.ssm", NULL, 0, err, sizeof err);
    assert_non_null(m);  /* the copy itself is fine */
    tr_mfile_destroy(&m);
    assert_null(tr_mfile_load_mem(c, n - 100, "t.ssm", NULL, 0, err, sizeof err));
    assert_non_null(strstr(err, "truncated"));
    free(c);
    free(b);
}

/* A writer given fewer rows than announced removes its temporary file and
 * writes nothing. */
static void test_short_writer(void **state)
{
    struct t_fix *fx = *state;
    s_write(fx->path, N_ROWS - 1);
    assert_int_equal(access(fx->path, F_OK), -1);
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", fx->path, (long)getpid());
    assert_int_equal(access(tmp, F_OK), -1);
}

/* The config text sets only the keys a model file records: a file that
 * names another (a key file, an endpoint) is refused. */
static void test_unknown_key_refused(void **state)
{
    struct t_fix *fx = *state;
    char err[1024];
    const char text[] = "job.seed=1\nsecurity.client_key=/etc/shadow\n";
    struct tr_mfile_info info = {0, 0, 9, 26, 0, 0, sizeof text - 1};
    tr_mfile_writer_t *w = tr_mfile_writer_new(fx->path, &info, text, sizeof text - 1, err,
                                               sizeof err);
    assert_non_null(w);
    assert_int_equal(tr_mfile_writer_commit(&w, err, sizeof err), 0);
    assert_null(tr_mfile_load(fx->path, NULL, 0, err, sizeof err));
    assert_non_null(strstr(err, "not one of the keys a model file records"));
}

static void test_sum_split(void **state)
{
    unsigned char b[1000];
    for (size_t i = 0; i < sizeof b; i++)
        b[i] = (unsigned char)(i * 7 + 3);
    struct tr_mfile_sum one, parts;
    tr_mfile_sum_init(&one);
    tr_mfile_sum_add(&one, b, sizeof b);
    uint64_t want = tr_mfile_sum_final(&one);
    for (size_t step = 1; step < 70; step += 3) {
        tr_mfile_sum_init(&parts);
        for (size_t at = 0; at < sizeof b; at += step)
            tr_mfile_sum_add(&parts, b + at, at + step < sizeof b ? step : sizeof b - at);
        assert_true(tr_mfile_sum_final(&parts) == want);
    }
    b[999] ^= 1;
    tr_mfile_sum_init(&one);
    tr_mfile_sum_add(&one, b, sizeof b);
    assert_true(tr_mfile_sum_final(&one) != want);
}

static int s_setup(void **state)
{
    return t_fix_setup(state, "mfile", "m.ssm");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, s_setup, t_fix_teardown),
        cmocka_unit_test_setup_teardown(test_every_corruption_refused, s_setup, t_fix_teardown),
        cmocka_unit_test_setup_teardown(test_short_writer, s_setup, t_fix_teardown),
        cmocka_unit_test_setup_teardown(test_unknown_key_refused, s_setup, t_fix_teardown),
        cmocka_unit_test(test_sum_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
