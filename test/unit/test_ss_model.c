/* test_ss_model.c - unit tests of libshadowscore (score/ss_model.h).
 *
 * A model file is written here (tr_mfile) with the rows of half of a line's
 * fields; the probability ss_model_score_line() gives that line must be the
 * bits of the trainer's forward on the rows a PS would answer: the file's
 * rows, and for the other fields the row a PS's own initializer
 * (ps_embed_init_row) gives, in a 16-row product padded with zeros (the eval
 * worker's). Zeroing the initial rows changes the answer (the check can
 * fail). Batches give the bits of single lines, NaN for bad lines and the
 * good count; threads scoring at once give the same bits; data.labels=false
 * scores the line without its label alike; a missing file is refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_embed.h"
#include "ss_cfg.h"
#include "ss_err.h"
#include "ss_mem.h"
#include "ss_model.h"
#include "t.h"
#include "tr_mfile.h"
#include "tr_model.h"
#include "tr_parse.h"

#define N_LINES 40
#define DIM 9   /* embedding_dim 8 + the first-order weight */

static const char *const g_sets[] = {"model.embedding_dim=8", "model.bottom_mlp=[16, 8]",
                                     "model.top_mlp=[8, 1]", "job.seed=42",
                                     "tables.init_scale=0.05"};
static char g_lines[N_LINES][1024];
static size_t g_lens[N_LINES];

/* Criteo line i: label, 13 dense values, 26 hex values; every 5th line bad. */
static void s_make_lines(void)
{
    for (int i = 0; i < N_LINES; i++) {
        int n = snprintf(g_lines[i], sizeof g_lines[i], "%d", i % 3 == 0);
        for (int j = 0; j < 13; j++)
            n += snprintf(g_lines[i] + n, sizeof g_lines[i] - n, "\t%d", (i * 7 + j * 3) % 50);
        for (int j = 0; j < 26; j++)
            n += snprintf(g_lines[i] + n, sizeof g_lines[i] - n, "\t%08x",
                          (unsigned)(i % 4 * 1000 + j * 17));
        if (i % 5 == 4)
            n = snprintf(g_lines[i], sizeof g_lines[i], "bad line %d", i);
        g_lens[i] = (size_t)n;
    }
}

/* The job's config. */
static struct ss_cfg *s_cfg(void)
{
    struct ss_cfg *cfg = ss_calloc(1, sizeof *cfg);
    char err[1024];
    assert_int_equal(ss_cfg_load(cfg, NULL, g_sets, 5, err, sizeof err), 0);
    return cfg;
}

/* Row of (field f, key): what the file holds for f < 13. */
static void s_row(uint32_t f, uint64_t key, float *row)
{
    for (uint32_t j = 0; j < DIM; j++)
        row[j] = (float)((key >> (j * 3)) & 63) / 64.0f - 0.5f + (float)f * 0.01f;
}

/* Write the model file: dense from tr_model_init_params(seed 3), the rows of
 * fields 0..12 of line 0's keys. Returns the dense copy (caller frees). */
static float *s_write(const char *path)
{
    struct ss_cfg *cfg = s_cfg();
    char err[1024], text[TR_MFILE_MAX_TEXT];
    struct tr_model_conf mc;
    struct tr_rows rows;
    assert_int_equal(tr_mfile_model_conf(cfg, &mc), 0);
    tr_model_t *m = tr_model_new(&mc, err, sizeof err);
    size_t n = tr_model_n_params(m);
    float *w = ss_aligned_alloc(64, (n + 16) * sizeof(float));
    tr_model_init_params(m, w, 3);
    int tn = tr_mfile_cfg_text(cfg, text, sizeof text);
    struct tr_mfile_info info = {n, 13, DIM, 26, 1, tr_mfile_shape_hash(&mc), (uint64_t)tn};
    tr_mfile_writer_t *wr = tr_mfile_writer_new(path, &info, text, (size_t)tn, err, sizeof err);
    assert_non_null(wr);
    assert_int_equal(tr_mfile_write_dense(wr, w, n, err, sizeof err), 0);
    tr_rows_init(&rows, 1, 13, 26);
    assert_int_equal(tr_parse_line(&cfg->data, g_lines[0], g_lens[0], &rows), 0);
    for (uint32_t f = 0; f < 13; f++) {
        float row[DIM];
        s_row(f, rows.keys[f], row);
        assert_int_equal(tr_mfile_write_row(wr, f, rows.keys[f], row, err, sizeof err), 0);
    }
    assert_int_equal(tr_mfile_writer_commit(&wr, err, sizeof err), 0);
    tr_rows_fini(&rows);
    tr_model_destroy(&m);
    ss_free(cfg);
    return w;
}

/* What the trainer computes for line 0 (init_rows 0: the initial rows zeroed,
 * a wrong answer the test must tell apart). */
static float s_expected(const float *w, int init_rows)
{
    struct ss_cfg *cfg = s_cfg();
    char err[256];
    struct tr_model_conf mc;
    struct tr_rows rows;
    tr_mfile_model_conf(cfg, &mc);
    tr_model_t *m = tr_model_new(&mc, err, sizeof err);
    tr_model_ws_t *ws = tr_model_ws_new(m, 16);
    struct ps_embed_conf pc = {.n_tables = 26, .dim = DIM, .first_order = 1,
                               .optimizer = SS_OPT_ROWWISE_ADAGRAD, .lr = 0.1f, .eps = 1e-8f,
                               .init_scale = 0.05f, .seed = 42, .capacity_rows = 64,
                               .n_stripes = 1};
    ps_embed_t *ps = ps_embed_new(&pc);
    assert_non_null(ps);
    float *dense = calloc(16 * 13, sizeof(float)), *emb = calloc(16 * 26 * DIM, sizeof(float));
    float probs[16];
    tr_rows_init(&rows, 1, 13, 26);
    assert_int_equal(tr_parse_line(&cfg->data, g_lines[0], g_lens[0], &rows), 0);
    memcpy(dense, rows.dense, 13 * sizeof(float));
    for (uint32_t f = 0; f < 26; f++) {
        if (f < 13)
            s_row(f, rows.keys[f], emb + f * DIM);
        else if (init_rows)
            ps_embed_init_row(ps, f, rows.keys[f], emb + f * DIM);
    }
    tr_model_forward(m, ws, w, 16, dense, emb, NULL, probs);
    free(dense);
    free(emb);
    tr_rows_fini(&rows);
    ps_embed_destroy(&ps);
    tr_model_ws_destroy(&ws);
    tr_model_destroy(&m);
    ss_free(cfg);
    return probs[0];
}

static void test_score_line_is_the_trainers(void **state)
{
    struct t_fix *fx = *state;
    char err[1024];
    float *w = s_write(fx->path);
    ss_model_t *m = ss_model_load(fx->path, err, sizeof err);
    if (!m)
        fail_msg("%s", err);
    assert_int_equal(ss_model_rows(m), 13);
    assert_int_equal(ss_model_fields(m), 26);
    assert_int_equal(ss_model_dense_features(m), 13);
    float p, want = s_expected(w, 1), wrong = s_expected(w, 0);
    assert_int_equal(ss_model_score_line(m, g_lines[0], g_lens[0], &p), 0);
    if (memcmp(&p, &want, sizeof p) != 0)
        fail_msg("scored %.9g, the trainer's forward %.9g", (double)p, (double)want);
    assert_true(want != wrong);  /* the initial rows matter: a wrong one would show */
    assert_true(p > 0 && p < 1);
    assert_int_equal(ss_model_score_line(m, "x\ty", 3, &p), SS_MODEL_BAD_LINE);
    assert_true(isnan(p));
    ss_model_free(m);
    /* the line without its label, data.labels=false: the same bits */
    const char *nl[] = {"data.labels=false"};
    m = ss_model_load_opts(fx->path, nl, 1, err, sizeof err);
    assert_non_null(m);
    const char *tab = strchr(g_lines[0], '\t') + 1;
    assert_int_equal(ss_model_score_line(m, tab, g_lens[0] - (size_t)(tab - g_lines[0]), &p), 0);
    assert_memory_equal(&p, &want, sizeof p);
    ss_model_free(m);
    ss_free(w);
    assert_null(ss_model_load("/nonexistent/m.ssm", err, sizeof err));
    assert_non_null(strstr(err, "cannot open /nonexistent/m.ssm"));
    ss_model_free(NULL);
}

static void test_batch_equals_lines(void **state)
{
    struct t_fix *fx = *state;
    char err[1024];
    ss_free(s_write(fx->path));
    ss_model_t *m = ss_model_load(fx->path, err, sizeof err);
    assert_non_null(m);
    const char *lines[N_LINES];
    float probs[N_LINES], one;
    for (int i = 0; i < N_LINES; i++)
        lines[i] = g_lines[i];
    assert_int_equal(ss_model_score_batch(m, lines, g_lens, N_LINES, probs), N_LINES - 8);
    int distinct = 0;
    for (int i = 0; i < N_LINES; i++) {
        int rc = ss_model_score_line(m, lines[i], g_lens[i], &one);
        if (i % 5 == 4) {
            assert_int_equal(rc, SS_MODEL_BAD_LINE);
            assert_true(isnan(probs[i]));
            continue;
        }
        assert_int_equal(rc, 0);
        if (memcmp(&one, &probs[i], sizeof one) != 0)
            fail_msg("line %d: %.9g alone, %.9g in a batch", i, (double)one, (double)probs[i]);
        distinct += i > 0 && probs[i] != probs[0];
    }
    assert_true(distinct > 10);
    ss_model_free(m);
}

struct s_job {
    const ss_model_t *m;
    const float *want;
    int bad;
};

static void *s_thread(void *arg)
{
    struct s_job *j = arg;
    const char *lines[N_LINES];
    float probs[N_LINES];
    for (int i = 0; i < N_LINES; i++)
        lines[i] = g_lines[i];
    for (int r = 0; r < 50; r++) {
        ss_model_score_batch(j->m, lines + r % 3, g_lens + r % 3, N_LINES - r % 3, probs);
        for (int i = 0; i < N_LINES - r % 3; i++)
            j->bad += memcmp(&probs[i], &j->want[i + r % 3], sizeof(float)) != 0;
    }
    return NULL;
}

static void test_threads(void **state)
{
    struct t_fix *fx = *state;
    char err[1024];
    ss_free(s_write(fx->path));
    ss_model_t *m = ss_model_load(fx->path, err, sizeof err);
    assert_non_null(m);
    const char *lines[N_LINES];
    float want[N_LINES];
    for (int i = 0; i < N_LINES; i++)
        lines[i] = g_lines[i];
    ss_model_score_batch(m, lines, g_lens, N_LINES, want);
    pthread_t tid[4];
    struct s_job jobs[4];
    for (int t = 0; t < 4; t++) {
        jobs[t] = (struct s_job){m, want, 0};
        assert_int_equal(pthread_create(&tid[t], NULL, s_thread, &jobs[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(tid[t], NULL);
        assert_int_equal(jobs[t].bad, 0);
    }
    ss_model_free(m);
}

static int s_setup(void **state)
{
    s_make_lines();
    return t_fix_setup(state, "ssmodel", "m.ssm");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_score_line_is_the_trainers, s_setup, t_fix_teardown),
        cmocka_unit_test_setup_teardown(test_batch_equals_lines, s_setup, t_fix_teardown),
        cmocka_unit_test_setup_teardown(test_threads, s_setup, t_fix_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
