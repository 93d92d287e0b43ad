/* test_tr_jobckpt.c - a trainer's job-checkpoint state file: exact round
 * trip (with and without Adagrad accumulators, with latency histograms, with
 * every field of the keep-best state), states of format 2 (before the
 * keep-best state was carried whole) and format 1 (before the histograms)
 * still read, and refusal of a missing, truncated, flipped or foreign file,
 * or of a keep-best state of another format, without touching the state. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "t.h"

#include <math.h>
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
    /* the keep-best state: every field not zero, own and carried apart */
    st->kb.own = (struct tr_keepbest){.have_eval = 1, .saved = 1, .kept_current = 1,
                                      .save_id = 0x8badf00d12345671ull, .best_epoch = 3,
                                      .n_evals = 5, .evals_since_best = 2,
                                      .best = {4000, 123, 0.41, 0.6875, 0.75, 1.02, 0.031,
                                               -0.0}};
    st->kb.carried = (struct tr_keepbest){.have_eval = 1, .saved = 1, .kept_current = 1,
                                          .save_id = 0xc0ffee0000000001ull, .best_epoch = 2,
                                          .n_evals = 4, .evals_since_best = 1,
                                          .best = {3999, 122, 0.42, NAN, 0.74, 1.03, 0.032,
                                                   1e-300}};
    st->kb.have_carried = 1;
    st->kb.led = 1;
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

/* a and b hold the same keep-best state, bit for bit (doubles included) */
static void s_kb_equal(const struct tr_keepbest *a, const struct tr_keepbest *b)
{
    assert_int_equal(a->have_eval, b->have_eval);
    assert_int_equal(a->saved, b->saved);
    assert_int_equal(a->kept_current, b->kept_current);
    assert_true(a->save_id == b->save_id);
    assert_true(a->best_epoch == b->best_epoch);
    assert_int_equal(a->n_evals, b->n_evals);
    assert_int_equal(a->evals_since_best, b->evals_since_best);
    assert_memory_equal(&a->best, &b->best, sizeof a->best);
}

/* Write st as a build of format ver (1 or 2) did: magic SSJOBTR<ver>, the
 * keep-best state in the fixed part's old_ fields (kb.own; no save id,
 * nothing carried), a checksum chain of six (1) or eight (2) pieces. */
static void s_write_old(const char *path, struct tr_jobckpt *st, int ver)
{
    struct {
        char magic[8];
        uint32_t fixed_bytes, pos_bytes;
    } h = {"SSJOBTR0", sizeof st->f, sizeof(struct tr_worker_pos)};
    struct {
        uint32_t n_hists, values;
    } hh = {st->n_hists, SS_HIST_VALUES};
    h.magic[7] = (char)('0' + ver);
    const struct tr_keepbest *k = &st->kb.own;
    struct tr_jobckpt_fixed f = st->f;
    f.old_have_eval = (uint32_t)k->have_eval;
    f.old_saved = (uint32_t)k->saved;
    f.old_kept_current = (uint32_t)k->kept_current;
    f.old_best_epoch = k->best_epoch;
    f.old_n_evals = k->n_evals;
    f.old_evals_since_best = k->evals_since_best;
    f.old_best = k->best;
    size_t wb = f.n_params * sizeof(float);
    const void *data[8] = {&h, &f, st->workers, st->w, st->acc, st->sync, &hh, st->hists};
    size_t len[8] = {sizeof h, sizeof f, f.n_workers * sizeof *st->workers, wb,
                     f.has_acc ? wb : 0, f.n_sync * sizeof(float), sizeof hh,
                     st->n_hists * SS_HIST_VALUES * sizeof *st->hists};
    uint64_t sum = 0;
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    for (int i = 0; i < (ver == 1 ? 6 : 8); i++) {
        sum = ss_hash_bytes(data[i], len[i], sum);
        assert_int_equal(fwrite(data[i], 1, len[i], fp), len[i]);
    }
    assert_int_equal(fwrite(&sum, 1, sizeof sum, fp), sizeof sum);
    fclose(fp);
}

/* What an older format reads as: kb.own from the old_ fields, no save id,
 * nothing carried, not led. */
static void s_check_old_kb(const struct tr_jobckpt *in, const struct tr_jobckpt *out)
{
    struct tr_keepbest want = in->kb.own;
    want.save_id = 0;
    s_kb_equal(&out->kb.own, &want);
    assert_int_equal(out->kb.have_carried, 0);
    assert_int_equal(out->kb.led, 0);
    assert_true(out->kb.carried.save_id == 0 && out->kb.carried.have_eval == 0);
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
    s_kb_equal(&out.kb.own, &in.kb.own);
    s_kb_equal(&out.kb.carried, &in.kb.carried);
    assert_int_equal(out.kb.have_carried, 1);
    assert_int_equal(out.kb.led, 1);
    tr_jobckpt_free(&out);
    assert_null(out.w);
    /* flags off, and a state with nothing in it, go through as well */
    in.kb.have_carried = in.kb.led = 0;
    in.kb.own.saved = in.kb.own.kept_current = 0;
    memset(&in.kb.carried, 0, sizeof in.kb.carried);
    assert_int_equal(tr_jobckpt_write(f->path, &in, err, sizeof err), 0);
    assert_int_equal(tr_jobckpt_read(f->path, &out, err, sizeof err), 0);
    s_kb_equal(&out.kb.own, &in.kb.own);
    s_kb_equal(&out.kb.carried, &in.kb.carried);
    assert_int_equal(out.kb.have_carried, 0);
    assert_int_equal(out.kb.led, 0);
    tr_jobckpt_free(&out);
    s_free_filled(&in);
}

/* The writer holds the keep-best state in one place: the fixed part's old_
 * fields are written as zero whatever the caller left in them. */
static void test_old_fields_zero(void **state)
{
    struct t_fix *f = *state;
    struct tr_jobckpt in, out;
    char err[512] = "";
    s_fill(&in, 1, 8, 0);
    in.f.old_n_evals = 9;
    in.f.old_kept_current = 1;
    in.f.old_best.ne = 2.5;
    assert_int_equal(tr_jobckpt_write(f->path, &in, err, sizeof err), 0);
    assert_int_equal(tr_jobckpt_read(f->path, &out, err, sizeof err), 0);
    assert_int_equal(out.f.old_n_evals, 0);
    assert_int_equal(out.f.old_kept_current, 0);
    assert_true(out.f.old_best.ne == 0.0);
    s_kb_equal(&out.kb.own, &in.kb.own);
    tr_jobckpt_free(&out);
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
 * it, is read whole, with n_hists 0 and the keep-best state of its fixed
 * part; with one byte flipped it is refused. */
static void test_format1(void **state)
{
    struct t_fix *f = *state;
    struct tr_jobckpt in, out;
    char err[512] = "";
    s_fill(&in, 3, 50, 1);
    s_write_old(f->path, &in, 1);
    int rc = tr_jobckpt_read(f->path, &out, err, sizeof err);
    if (rc)
        fail_msg("format 1: %s", err);
    assert_memory_equal(out.workers, in.workers, 3 * sizeof *in.workers);
    assert_memory_equal(out.w, in.w, 50 * sizeof(float));
    assert_memory_equal(out.acc, in.acc, 50 * sizeof(float));
    assert_memory_equal(out.sync, in.sync, in.f.n_sync * sizeof(float));
    assert_int_equal(out.n_hists, 0);
    assert_null(out.hists);
    s_check_old_kb(&in, &out);
    tr_jobckpt_free(&out);
    assert_int_equal(t_flip_byte(f->path, 30, 0x10), 0);
    assert_int_equal(tr_jobckpt_read(f->path, &out, err, sizeof err), SS_E_CORRUPT);
    assert_null(out.w);
    s_free_filled(&in);
}

/* A state of format 2 (magic SSJOBTR2: the histograms, and the keep-best
 * state in the fixed part, without its save id or what was carried), as the
 * builds before format 3 wrote it, is read whole: kb.own from the old_
 * fields, kept_current (which took a padding field's place in format 2) 0
 * or 1 as written. Its layout is format 1's fixed part: kept_current sits
 * where the padding after n_ckpts was. */
static void test_format2(void **state)
{
    struct t_fix *f = *state;
    struct tr_jobckpt in, out;
    char err[512] = "";
    assert_int_equal(offsetof(struct tr_jobckpt_fixed, old_kept_current),
                     offsetof(struct tr_jobckpt_fixed, n_ckpts) + sizeof(uint32_t));
    assert_int_equal(offsetof(struct tr_jobckpt_fixed, train_ns),
                     offsetof(struct tr_jobckpt_fixed, old_kept_current) + sizeof(uint32_t));
    for (int kept = 0; kept < 2; kept++) {
        s_fill(&in, 2, 40, 1);
        in.kb.own.kept_current = kept;  /* 0: as a state of a build before it was kept */
        s_write_old(f->path, &in, 2);
        int rc = tr_jobckpt_read(f->path, &out, err, sizeof err);
        if (rc)
            fail_msg("format 2, kept_current %d: %s", kept, err);
        assert_int_equal(out.f.old_kept_current, kept);
        assert_int_equal(out.kb.own.kept_current, kept);
        s_check_old_kb(&in, &out);
        assert_memory_equal(out.w, in.w, 40 * sizeof(float));
        assert_memory_equal(out.acc, in.acc, 40 * sizeof(float));
        assert_int_equal(out.n_hists, 3);
        assert_memory_equal(out.hists, in.hists, 3 * SS_HIST_VALUES * sizeof *in.hists);
        tr_jobckpt_free(&out);
        s_free_filled(&in);
    }
}

/* Replace the checksum of the format 3 file at path (the state st wrote)
 * with the chain over its pieces as they are now, so that a change made
 * inside a piece is read, not refused as a bad checksum. */
static void s_rechain(const char *path, const struct tr_jobckpt *st)
{
    size_t wb = st->f.n_params * sizeof(float), kbw = TR_KB_WORDS * sizeof(uint64_t);
    size_t cuts[11] = {16, sizeof st->f, st->f.n_workers * sizeof *st->workers, wb,
                       st->f.has_acc ? wb : 0, st->f.n_sync * sizeof(float), 8,
                       st->n_hists * SS_HIST_VALUES * sizeof(uint64_t), 8, kbw, kbw};
    size_t n = 0;
    for (int i = 0; i < 11; i++)
        n += cuts[i];
    unsigned char *b = malloc(n);
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    assert_int_equal(fread(b, 1, n, fp), n);
    uint64_t sum = 0;
    for (size_t i = 0, off = 0; i < 11; off += cuts[i], i++)
        sum = ss_hash_bytes(b + off, cuts[i], sum);
    assert_int_equal(fwrite(&sum, 1, sizeof sum, fp), sizeof sum);
    fclose(fp);
    free(b);
}

/* Write the len bytes of v at offset at of path. */
static void s_poke(const char *path, long at, const void *v, size_t len)
{
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, at, SEEK_SET), 0);
    assert_int_equal(fwrite(v, 1, len, fp), len);
    fclose(fp);
}

/* A format 3 state whose keep-best piece is damaged in ways a checksum
 * does not catch (written so, the chain over it) is refused naming what:
 * a state of another word count ("not a trainer state ... of this build"),
 * unknown flags, a state word 0 of another format (own or carried). */
static void test_kb_refusals(void **state)
{
    struct t_fix *f = *state;
    struct tr_jobckpt in, out;
    char err[512] = "";
    s_fill(&in, 2, 20, 0);
    long kbw = TR_KB_WORDS * 8, size;
    struct {
        long at;                   /* bytes before the checksum's start */
        uint64_t v;                /* the value written there */
        size_t len;
        const char *says;
    } cases[] = {{8 + 2 * kbw, 13, 4, "keep-best states of 13 words"},
                 {4 + 2 * kbw, 4, 4, "keep-best flags 0x4"},
                 {2 * kbw, 2, 8, "the own keep-best state: format word 0x2"},
                 {kbw, 0x801, 8, "the carried keep-best state: format word 0x801"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(tr_jobckpt_write(f->path, &in, err, sizeof err), 0);
        FILE *fp = fopen(f->path, "rb");
        assert_non_null(fp);
        fseek(fp, 0, SEEK_END);
        size = ftell(fp);
        fclose(fp);
        s_poke(f->path, size - 8 - cases[i].at, &cases[i].v, cases[i].len);
        s_rechain(f->path, &in);
        err[0] = 0;
        int rc = tr_jobckpt_read(f->path, &out, err, sizeof err);
        if (rc != SS_E_CORRUPT || !strstr(err, cases[i].says) || !strstr(err, f->path))
            fail_msg("case %zu: rc %d (%s), want SS_E_CORRUPT saying '%s'", i, rc, err,
                     cases[i].says);
        assert_null(out.w);
        assert_int_equal(out.kb.led, 0);
    }
    /* untouched but for the chain: read */
    assert_int_equal(tr_jobckpt_write(f->path, &in, err, sizeof err), 0);
    s_rechain(f->path, &in);
    assert_int_equal(tr_jobckpt_read(f->path, &out, err, sizeof err), 0);
    tr_jobckpt_free(&out);
    s_free_filled(&in);
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
    /* a flipped byte in the weights, in the fixed part, in the keep-best
     * state, in the checksum */
    long at[] = {size - 300, 40, size - 8 - 50, size - 3};
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

/* Every length short of a whole file, of each format (3 as written, 2 and 1
 * as older builds wrote them), is refused with SS_E_CORRUPT and the state
 * left empty: the reader checks each head it reads against the bytes there
 * before reading it (under ASan: no read past the file's buffer). */
static void test_truncation_sweep(void **state)
{
    struct t_fix *f = *state;
    struct tr_jobckpt in, out;
    char err[512] = "";
    s_fill(&in, 2, 20, 1);
    for (int ver = 3; ver >= 1; ver--) {
        if (ver == 3)
            assert_int_equal(tr_jobckpt_write(f->path, &in, err, sizeof err), 0);
        else
            s_write_old(f->path, &in, ver);
        FILE *fp = fopen(f->path, "rb");
        assert_non_null(fp);
        fseek(fp, 0, SEEK_END);
        long size = ftell(fp);
        fseek(fp, 0, SEEK_SET);
        unsigned char *whole = malloc((size_t)size);
        assert_non_null(whole);
        assert_int_equal(fread(whole, 1, (size_t)size, fp), (size_t)size);
        fclose(fp);
        assert_int_equal(tr_jobckpt_read(f->path, &out, err, sizeof err), 0);
        tr_jobckpt_free(&out);
        for (long n = 0; n < size; n++) {
            fp = fopen(f->path, "wb");
            assert_non_null(fp);
            assert_int_equal(fwrite(whole, 1, (size_t)n, fp), (size_t)n);
            fclose(fp);
            err[0] = 0;
            int rc = tr_jobckpt_read(f->path, &out, err, sizeof err);
            if (rc != SS_E_CORRUPT || !strstr(err, f->path))
                fail_msg("format %d cut to %ld of %ld bytes: rc %d (%s), want SS_E_CORRUPT",
                         ver, n, size, rc, err);
            assert_null(out.w);
            assert_null(out.hists);
        }
        free(whole);
    }
    s_free_filled(&in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hist_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_format1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_format2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_old_fields_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kb_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncation_sweep, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
