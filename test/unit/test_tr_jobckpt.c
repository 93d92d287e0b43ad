/* test_tr_jobckpt.c - a trainer's job-checkpoint state file: exact round
 * trip (with and without Adagrad accumulators, with latency histograms),
 * a state of format 1 (before the histograms) still read, and refusal of a
 * missing, truncated, flipped or foreign file without touching the state. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "t.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "ss_err.h"
#include "ss_hash.h"
#include "ss_metrics.h"
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
    /* a histogram per worker and one more, as tr_train_ckpt.c keeps them */
    st->n_hists = n_workers + 1;
    st->hists = malloc(st->n_hists * SS_HIST_VALUES * sizeof *st->hists);
    for (size_t i = 0; i < st->n_hists * SS_HIST_VALUES; i++)
        st->hists[i] = 1000003ull * (i + 1);
}

static void s_free_filled(struct tr_jobckpt *st)
{
    free(st->workers);
    free(st->w);
    free(st->acc);
    free(st->sync);
    free(st->hists);
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
    assert_int_equal(out.n_hists, 5);
    assert_memory_equal(out.hists, in.hists, 5 * SS_HIST_VALUES * sizeof *in.hists);
    tr_jobckpt_free(&out);
    assert_null(out.w);
    s_free_filled(&in);
}

static void test_round_trip(void **state)
{
    s_round_trip(*state, 1);
    s_round_trip(*state, 0);
}

/* A histogram's buckets, sum and count go through the state file and come
 * back into a fresh histogram equal (what a resumed trainer's metrics start
 * from), and observations then add to them. */
static void test_hist_round_trip(void **state)
{
    struct t_fix *f = *state;
    struct tr_jobckpt in, out;
    char err[512] = "";
    struct ss_hist a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    uint64_t ns[] = {1000, 250000, 250000, 3000000, 40000000, 999000000000ull};
    uint64_t sum = 0;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        ss_hist_add(&a, ns[i]);
        sum += ns[i];
    }
    s_fill(&in, 1, 10, 0);
    ss_hist_get(&a, in.hists);          /* worker 0's */
    memset(in.hists + SS_HIST_VALUES, 0, SS_HIST_VALUES * sizeof *in.hists);  /* rounds: none */
    assert_int_equal(tr_jobckpt_write(f->path, &in, err, sizeof err), 0);
    assert_int_equal(tr_jobckpt_read(f->path, &out, err, sizeof err), 0);
    assert_int_equal(out.n_hists, 2);
    ss_hist_set(&b, out.hists);
    assert_int_equal(ss_hist_count(&b), 6);
    assert_int_equal(atomic_load(&b.sum_ns), sum);
    for (int i = 0; i <= SS_HIST_BUCKETS; i++)
        assert_int_equal(atomic_load(&b.bucket[i]), atomic_load(&a.bucket[i]));
    assert_int_equal(atomic_load(&b.bucket[SS_HIST_BUCKETS]), 1);  /* 999 s: +Inf */
    ss_hist_add(&b, 1000);
    assert_int_equal(ss_hist_count(&b), 7);
    struct ss_hist c;
    ss_hist_set(&c, out.hists + SS_HIST_VALUES);
    assert_int_equal(ss_hist_count(&c), 0);
    tr_jobckpt_free(&out);
    s_free_filled(&in);
}

/* A state of format 1 (magic SSJOBTR1: no histograms after the sync state,
 * a checksum chain of six pieces), as builds before the histograms wrote
 * it, is read whole, with n_hists 0; with one byte flipped it is refused. */
static void test_format1(void **state)
{
    struct t_fix *f = *state;
    struct tr_jobckpt in, out;
    char err[512] = "";
    s_fill(&in, 3, 50, 1);
    struct {
        char magic[8];
        uint32_t fixed_bytes, pos_bytes;
    } h = {"SSJOBTR1", sizeof in.f, sizeof(struct tr_worker_pos)};
    const void *data[6] = {&h, &in.f, in.workers, in.w, in.acc, in.sync};
    size_t len[6] = {sizeof h, sizeof in.f, 3 * sizeof *in.workers, 50 * sizeof(float),
                     50 * sizeof(float), in.f.n_sync * sizeof(float)};
    uint64_t sum = 0;
    FILE *fp = fopen(f->path, "wb");
    assert_non_null(fp);
    for (int i = 0; i < 6; i++) {
        sum = ss_hash_bytes(data[i], len[i], sum);
        assert_int_equal(fwrite(data[i], 1, len[i], fp), len[i]);
    }
    assert_int_equal(fwrite(&sum, 1, sizeof sum, fp), sizeof sum);
    fclose(fp);
    int rc = tr_jobckpt_read(f->path, &out, err, sizeof err);
    if (rc)
        fail_msg("format 1: %s", err);
    assert_memory_equal(&out.f, &in.f, sizeof in.f);
    assert_memory_equal(out.workers, in.workers, 3 * sizeof *in.workers);
    assert_memory_equal(out.w, in.w, 50 * sizeof(float));
    assert_memory_equal(out.acc, in.acc, 50 * sizeof(float));
    assert_memory_equal(out.sync, in.sync, len[5]);
    assert_int_equal(out.n_hists, 0);
    assert_null(out.hists);
    tr_jobckpt_free(&out);
    assert_int_equal(t_flip_byte(f->path, 30, 0x10), 0);
    assert_int_equal(tr_jobckpt_read(f->path, &out, err, sizeof err), SS_E_CORRUPT);
    assert_null(out.w);
    s_free_filled(&in);
}

/* kept_current took the place of a padding field that every build wrote
 * as zero: the layout (and so the magic and the size check) is the older
 * builds', a state they wrote reads kept_current 0 (the resumed job then
 * restores the kept set: their behaviour), and 1 goes through a round trip. */
static void test_kept_current(void **state)
{
    struct t_fix *f = *state;
    struct tr_jobckpt in, out;
    char err[512] = "";
    assert_int_equal(offsetof(struct tr_jobckpt_fixed, kept_current),
                     offsetof(struct tr_jobckpt_fixed, n_ckpts) + sizeof(uint32_t));
    assert_int_equal(offsetof(struct tr_jobckpt_fixed, train_ns),
                     offsetof(struct tr_jobckpt_fixed, kept_current) + sizeof(uint32_t));
    for (uint32_t kept = 0; kept < 2; kept++) {
        s_fill(&in, 2, 40, 1);
        in.f.kept_current = kept;  /* 0: as a state of a build before it was kept */
        assert_int_equal(tr_jobckpt_write(f->path, &in, err, sizeof err), 0);
        int rc = tr_jobckpt_read(f->path, &out, err, sizeof err);
        if (rc)
            fail_msg("kept_current %u: %s", kept, err);
        assert_int_equal(out.f.kept_current, kept);
        assert_memory_equal(&out.f, &in.f, sizeof in.f);
        tr_jobckpt_free(&out);
        s_free_filled(&in);
    }
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
        cmocka_unit_test_setup_teardown(test_hist_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_format1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kept_current, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
