/* test_tr_jobckpt.c - a trainer's job-checkpoint state file: exact round
 * trip (with and without Adagrad accumulators), and refusal of a missing,
 * truncated, flipped or foreign file without touching the state. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "t.h"

#include <stdio.h>
#include <string.h>

#include "ss_err.h"
#include "tr_jobckpt.h"

static int setup(void **state)
{
    return t_fix_setup(state, "jobckpt", "trainer-1.state");
}

static int teardown(void **state)
{
    return t_fix_teardown(state);
}

/* A state with every field set to something recognizable. */
static void s_fill(struct tr_jobckpt *st, uint32_t n_workers, uint64_t n_params, int acc)
{
    memset(st, 0, sizeof *st);
    st->f.rank = 1;
    st->f.n_ranks = 3;
    st->f.n_workers = n_workers;
    st->f.has_acc = (uint32_t)acc;
    st->f.n_params = n_params;
    st->f.shape_hash = 0x1234567890abcdefull;
    st->f.input_bytes = 987654321;
    st->f.save_id = 77;
    st->f.examples_done = 123456;
    st->f.iterations = 999;
    st->f.examples_left = -1;
    st->f.seg_end = 2;
    st->f.segment_left = 4321;
    st->f.n_ckpts = 5;
    st->f.train_ns = 5000000000ull;
    st->f.epochs_done = 1;
    st->f.n_evals = 2;
    st->f.evals_since_best = 1;
    st->f.best_epoch = 1;
    st->f.have_eval = 1;
    st->f.saved = 1;
    st->f.best.ne = 0.6875;
    st->f.best.rows = 4000;
    st->workers = calloc(n_workers, sizeof *st->workers);
    for (uint32_t i = 0; i < n_workers; i++) {
        st->workers[i].reader_pos = 1000 * (i + 1) + 7;
        st->workers[i].epochs_done = i;
        st->workers[i].iteration = 10 + i;
        st->workers[i].counts.c[TR_C_examples] = 500 + i;
        st->workers[i].counts.c[TR_C_bytes_read] = 70000 + i;
        st->workers[i].counts.prog.loss_sum = 0.25 * (i + 1);
    }
    st->f.n_sync = 3 * n_params / 2;  /* e.g. BMUF's g, D, t of a component */
    st->sync = malloc(st->f.n_sync * sizeof(float));
    for (uint64_t i = 0; i < st->f.n_sync; i++)
        st->sync[i] = 1.0f / (float)(i + 1);
    st->w = malloc(n_params * sizeof(float));
    st->acc = acc ? malloc(n_params * sizeof(float)) : NULL;
    for (uint64_t i = 0; i < n_params; i++) {
        st->w[i] = (float)i * 0.5f - 3.0f;
        if (acc)
            st->acc[i] = (float)i * 0.125f;
    }
}

static void s_free_filled(struct tr_jobckpt *st)
{
    free(st->workers);
    free(st->w);
    free(st->acc);
    free(st->sync);
}

static void s_round_trip(struct t_fix *f, int acc)
{
    struct tr_jobckpt in, out;
    char err[512] = "";
    s_fill(&in, 4, 1001, acc);
    assert_int_equal(tr_jobckpt_write(f->path, &in, err, sizeof err), 0);
    assert_int_equal(access(f->tmp, F_OK), -1);  /* no temp file left */
    int rc = tr_jobckpt_read(f->path, &out, err, sizeof err);
    if (rc)
        fail_msg("read: %s", err);
    assert_memory_equal(&out.f, &in.f, sizeof in.f);
    assert_memory_equal(out.workers, in.workers, 4 * sizeof *in.workers);
    assert_memory_equal(out.w, in.w, 1001 * sizeof(float));
    if (acc)
        assert_memory_equal(out.acc, in.acc, 1001 * sizeof(float));
    else
        assert_null(out.acc);
    assert_int_equal(out.f.n_sync, 1501);
    assert_memory_equal(out.sync, in.sync, 1501 * sizeof(float));
    tr_jobckpt_free(&out);
    assert_null(out.w);
    s_free_filled(&in);
}

static void test_round_trip(void **state)
{
    s_round_trip(*state, 1);
    s_round_trip(*state, 0);
}

/* Each damage is refused with SS_E_CORRUPT (or SS_E_IO for a missing file)
 * and an error that names the file; the output state stays empty. */
static void test_refusals(void **state)
{
    struct t_fix *f = *state;
    struct tr_jobckpt in, out;
    char err[512] = "", cmd[1024];
    assert_int_equal(tr_jobckpt_read(f->path, &out, err, sizeof err), SS_E_IO);
    assert_non_null(strstr(err, f->path));
    s_fill(&in, 2, 300, 1);
    assert_int_equal(tr_jobckpt_write(f->path, &in, err, sizeof err), 0);
    FILE *fp = fopen(f->path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fclose(fp);
    /* a flipped byte in the weights, in the fixed part, in the checksum */
    long at[] = {size - 100, 40, size - 3};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        assert_int_equal(tr_jobckpt_write(f->path, &in, err, sizeof err), 0);
        assert_int_equal(t_flip_byte(f->path, at[i], 0x10), 0);
        err[0] = 0;
        int rc = tr_jobckpt_read(f->path, &out, err, sizeof err);
        if (rc != SS_E_CORRUPT)
            fail_msg("byte %ld flipped: rc %d (%s), want SS_E_CORRUPT", at[i], rc, err);
        assert_non_null(strstr(err, f->path));
        assert_null(out.w);
    }
    /* truncated by one byte */
    assert_int_equal(tr_jobckpt_write(f->path, &in, err, sizeof err), 0);
    assert_int_equal(truncate(f->path, size - 1), 0);
    assert_int_equal(tr_jobckpt_read(f->path, &out, err, sizeof err), SS_E_CORRUPT);
    assert_non_null(strstr(err, "truncated"));
    /* another file altogether (a dense model's magic), as long as a state */
    memset(cmd, 'x', sizeof cmd);
    memcpy(cmd, "SSDENSE1", 8);
    fp = fopen(f->path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(cmd, 1, sizeof cmd, fp), sizeof cmd);
    fclose(fp);
    assert_int_equal(tr_jobckpt_read(f->path, &out, err, sizeof err), SS_E_CORRUPT);
    assert_non_null(strstr(err, "not a trainer state"));
    s_free_filled(&in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
