/* test_tr_shadow.c - the shadow thread's end of training: the final sync is
 * never skipped, whatever the order in which the stop flags are seen. Real
 * ring among threads of this process (one tr_shadow per "trainer"). Every
 * completed round is also in the trainer's round histogram
 * (tr_shared.sync_round_hist). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "t.h"
#include "t_shadow.h"
#include "tr_model.h"
#include "tr_shadow.h"

#define N_MAX 3

/* One trainer: its replica, its shadow, what it saw. */
struct trainer {
    struct tr_shared sh;
    ss_cluster_t *cl;             /* membership as this rank (sh.cluster) */
    tr_shadow_t *shadow;
    int start_rc, final_rc;
    struct tr_shadow_stats st;
    int abort;                    /* abort instead of finishing */
};

static void s_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* The end of training as tr_train sees it, with the window forced open: the
 * workers' stop flag is set, the shadow thread gets 50 ms to see it (and
 * before the fix, to leave without its final round), and only then does the
 * main thread announce that the workers are done. */
static void *s_trainer_main(void *p)
{
    struct trainer *t = p;
    char err[512] = "";
    t->start_rc = tr_shadow_start(t->shadow, err, sizeof err);
    if (t->start_rc)
        return NULL;
    s_sleep_ms(100);  /* rounds run */
    atomic_store(&t->sh.stop, 1);
    s_sleep_ms(50);
    if (t->abort) {
        tr_shadow_abort(t->shadow);
        t->final_rc = -1;
    } else {
        t->final_rc = tr_shadow_finish(t->shadow, err, sizeof err);
    }
    tr_shadow_get_stats(t->shadow, &t->st);
    return NULL;
}

/* Run n trainers whose replicas start at different values. */
static float s_init_value(size_t i, int r)
{
    return (float)((i * 7 + (size_t)r * 5) % 13) * 0.25f;
}

/* Every replica equals the mean of the initial ones. */
static void s_check_mean(const struct trainer *t, int n, size_t np)
{
    for (size_t i = 0; i < np; i++) {
        float sum = 0;
        for (int r = 0; r < n; r++)
            sum += s_init_value(i, r);
        for (int r = 0; r < n; r++)
            if (t[r].sh.w[i] != sum / (float)n)
                fail_msg("rank %d [%zu]: %.9g, want the mean %.9g", r, i, t[r].sh.w[i],
                         sum / (float)n);
    }
}

static void s_run(int n, const char *algo, struct trainer *t, int abort_all, const char *extra,
                  void (*check)(const struct trainer *, int, size_t))
{
    struct ss_cfg *cfg = t_shadow_cfg(n, algo, extra);
    tr_model_t *model = t_shadow_model();
    size_t np = tr_model_n_params(model);
    void *zctx = zmq_ctx_new();
    pthread_t tid[N_MAX];
    for (int r = 0; r < n; r++) {
        memset(&t[r], 0, sizeof t[r]);
        t_shadow_trainer_init(&t[r].sh, &t[r].cl, &t[r].shadow, cfg, model, zctx, r, n,
                              s_init_value);
        t[r].abort = abort_all;
    }
    for (int r = 0; r < n; r++)
        assert_int_equal(pthread_create(&tid[r], NULL, s_trainer_main, &t[r]), 0);
    for (int r = 0; r < n; r++)
        pthread_join(tid[r], NULL);
    for (int r = 0; r < n; r++)
        assert_int_equal(t[r].start_rc, 0);
    /* all replicas hold the same average: compare each with rank 0 */
    for (int r = 1; r < n && !abort_all; r++)
        for (size_t i = 0; i < np; i++)
            if (t[r].sh.w[i] != t[0].sh.w[i])
                fail_msg("rank %d [%zu]: %.9g, rank 0 has %.9g", r, i, t[r].sh.w[i],
                         t[0].sh.w[i]);
    if (check)
        check(t, n, np);
    for (int r = 0; r < n; r++)
        t_shadow_trainer_fini(&t[r].sh, &t[r].cl, &t[r].shadow);
    zmq_ctx_term(zctx);
    tr_model_destroy(&model);
    ss_free(cfg);
}

/* The final round is run, and completes, although the shadow thread saw the
 * workers' stop flag long before the main thread said they were done. */
static void test_final_sync_after_stop_flag(void **state)
{
    (void)state;
    struct trainer t[N_MAX];
    for (int n = 1; n <= 3; n += 2) {
        s_run(n, "s-ma", t, 0, NULL, NULL);
        for (int r = 0; r < n; r++) {
            assert_int_equal(t[r].final_rc, 0);
            assert_int_equal(t[r].st.final_ok, 1);
            assert_true(t[r].st.rounds >= 2);  /* background rounds + the final one */
            /* every completed round is in the trainer's round histogram too */
            assert_int_equal(ss_hist_count(&t[r].sh.sync_round_hist), t[r].st.rounds);
            assert_true(atomic_load(&t[r].sh.sync_round_hist.sum_ns) > 0);
        }
    }
}

/* The output is the exact mean of the replicas (overwrite write-back; the
 * initial values are multiples of 1/4, so every sum is exact in float). */
static void test_final_average_value(void **state)
{
    (void)state;
    struct trainer t[2];
    s_run(2, "s-ma", t, 0, "sync.writeback=overwrite", s_check_mean);
    for (int r = 0; r < 2; r++)
        assert_int_equal(t[r].st.final_ok, 1);
}

/* An aborted run stops at once and reports no final sync. */
static void test_abort_skips_final(void **state)
{
    (void)state;
    struct trainer t[2];
    s_run(2, "s-ma", t, 1, NULL, NULL);
    for (int r = 0; r < 2; r++)
        assert_int_equal(t[r].st.final_ok, 0);
}

/* The rest after a round: the cpu_share rest (a round of 2 ms wall and 1 ms
 * CPU at share 0.02: a 50 ms cycle, 48 ms of rest), sync.min_interval_ms
 * when that is longer, and none with cpu_share 0 and no interval. */
static void test_rest(void **state)
{
    (void)state;
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char err[512];
    const char *sets[] = {"sync.cpu_share=0.02"};
    assert_int_equal(ss_cfg_load(cfg, NULL, sets, 1, err, sizeof err), 0);
    assert_int_equal(tr_shadow_rest_ms(cfg, 2000000, 1000000), 48);
    const char *sets_min[] = {"sync.cpu_share=0.02", "sync.min_interval_ms=100"};
    assert_int_equal(ss_cfg_load(cfg, NULL, sets_min, 2, err, sizeof err), 0);
    assert_int_equal(tr_shadow_rest_ms(cfg, 2000000, 1000000), 98);
    const char *sets_off[] = {"sync.cpu_share=0", "sync.min_interval_ms=0"};
    assert_int_equal(ss_cfg_load(cfg, NULL, sets_off, 2, err, sizeof err), 0);
    assert_int_equal(tr_shadow_rest_ms(cfg, 2000000, 1000000), -2);
    free(cfg);
}

int main(void)
{
    ss_log_init("test", SS_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_final_sync_after_stop_flag),
        cmocka_unit_test(test_final_average_value),
        cmocka_unit_test(test_abort_skips_final),
        cmocka_unit_test(test_rest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
