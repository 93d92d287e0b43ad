/* test_tr_stats.c - the trainer's figure table and its published figures
 * (trainer/tr_stats.h): the field order the scripts read, a snapshot that
 * carries the counters and what was published (sync only with a shadow,
 * the last evaluation and validation, the job checkpoint counts), the
 * shared sync figures, and a publisher and a reader at once (exact at the
 * end; run under TSan by make test). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "ss_mem.h"
#include "tr_stats.h"

/* Index of key in the table, or -1. */
static long s_at(const struct ss_snap *sn, const char *key)
{
    return ss_snap_find(sn, key);
}

/* The orders scripts/shadow-plot and test_train_output.sh rely on. */
static void test_table_order(void **state)
{
    (void)state;
    struct ss_val v[TR_N_STATS];
    struct ss_snap sn;
    struct tr_worker_counts now;
    tr_stats_t *st = tr_stats_new(0, 1);
    tr_worker_counts_init(&now);
    tr_stats_snap(st, &now, &sn, v);
    assert_int_equal(sn.n, TR_N_STATS);
    assert_true(s_at(&sn, "t") < s_at(&sn, "eps"));
    assert_true(s_at(&sn, "eps") < s_at(&sn, "train_ne"));
    assert_int_equal(s_at(&sn, "sync_rounds_per_min") + 1, s_at(&sn, "sync_gap"));
    assert_true(s_at(&sn, "examples") < s_at(&sn, "eval_ne"));
    assert_int_equal(s_at(&sn, "rank"), TR_S_rank);
    assert_int_equal(s_at(&sn, "eval_ne"), TR_S_eval_ne);
    tr_stats_destroy(&st);
    assert_null(st);
    tr_stats_destroy(&st);  /* NULL is fine */
}

/* A snapshot holds the counters of now and the figures published last. */
static void test_snap_published(void **state)
{
    (void)state;
    struct ss_val v[TR_N_STATS];
    struct ss_snap sn;
    struct tr_worker_counts now;
    struct tr_shadow_stats sync = {.rounds = 12, .failed_rounds = 1, .rounds_per_min = 30,
                                   .gap_mean = 4.5, .drift = 0.25};
    struct tr_eval_result ev = {.rows = 100, .ne = 0.8, .auc = 0.7, .logloss = 0.5};
    struct tr_eval_result va = {.rows = 40, .ne = 0.9, .auc = 0.6, .logloss = 0.55};
    tr_stats_t *st = tr_stats_new(3, 1234);
    tr_worker_counts_init(&now);
    now.c[TR_C_examples] = 5000;
    now.c[TR_C_bad_lines] = 7;

    tr_stats_snap(st, &now, &sn, v);
    assert_int_equal(ss_snap_get(&sn, TR_S_rank), 3);
    assert_int_equal(ss_snap_get(&sn, TR_S_dense_params), 1234);
    assert_int_equal(ss_snap_get(&sn, TR_S_examples), 5000);
    assert_int_equal(ss_snap_get(&sn, TR_S_bad_lines), 7);
    assert_string_equal(sn.v[TR_S_sync_algorithm].s, "none");
    assert_false(ss_snap_has(&sn, TR_S_sync_rounds));   /* no shadow yet */
    assert_false(ss_snap_has(&sn, TR_S_eval_ne));
    assert_false(ss_snap_has(&sn, TR_S_valid_ne));

    tr_stats_set_sync_name(st, "s-easgd");
    tr_stats_set_progress(st, 250.0, 2, &sync);
    tr_stats_set_eval(st, TR_WORKER_EVAL, &ev, 1);
    tr_stats_set_eval(st, TR_WORKER_VALID, &va, 2);
    tr_stats_set_ckpts(st, 4, 1);
    tr_stats_set_ckpt_pause(st, 0.5, 1.75);
    tr_stats_snap(st, &now, &sn, v);
    assert_string_equal(tr_stats_sync_name(st), "s-easgd");
    assert_string_equal(sn.v[TR_S_sync_algorithm].s, "s-easgd");
    assert_true(ss_snap_get(&sn, TR_S_eps) == 250.0);
    assert_int_equal(ss_snap_get(&sn, TR_S_epochs_done), 2);
    assert_int_equal(ss_snap_get(&sn, TR_S_sync_rounds), 12);
    assert_int_equal(ss_snap_get(&sn, TR_S_sync_failed_rounds), 1);
    assert_true(ss_snap_get(&sn, TR_S_sync_gap) == 4.5);
    assert_true(ss_snap_get(&sn, TR_S_sync_drift) == 0.25);
    assert_int_equal(ss_snap_get(&sn, TR_S_eval_rows), 100);
    assert_true(ss_snap_get(&sn, TR_S_eval_ne) == 0.8);
    assert_int_equal(ss_snap_get(&sn, TR_S_valid_rows), 40);
    assert_true(ss_snap_get(&sn, TR_S_valid_auc) == 0.6);
    assert_int_equal(ss_snap_get(&sn, TR_S_evals), 2);
    assert_int_equal(ss_snap_get(&sn, TR_S_job_checkpoints), 4);
    assert_int_equal(ss_snap_get(&sn, TR_S_job_checkpoint_failures), 1);
    assert_true(ss_snap_get(&sn, TR_S_job_checkpoint_pause_total_s) == 1.75);

    /* a progress step without a shadow drops the sync figures; an eval of
     * NULL clears the published one in a snapshot */
    tr_stats_set_progress(st, 10.0, 3, NULL);
    tr_stats_snap(st, &now, &sn, v);
    assert_false(ss_snap_has(&sn, TR_S_sync_rounds));
    tr_stats_snap_eval(&sn, NULL);
    assert_false(ss_snap_has(&sn, TR_S_eval_ne));
    assert_true(ss_snap_has(&sn, TR_S_valid_ne));
    tr_stats_snap_sync(&sn, &sync);
    assert_int_equal(ss_snap_get(&sn, TR_S_sync_rounds), 12);
    tr_stats_destroy(&st);
}

#define N_STEPS 20000

/* Publish steps 1..N_STEPS (eps = epochs = examples of the evaluation = step). */
static void *s_publisher(void *arg)
{
    tr_stats_t *st = arg;
    for (uint32_t i = 1; i <= N_STEPS; i++) {
        struct tr_eval_result ev = {.rows = i};
        tr_stats_set_progress(st, (double)i, i, NULL);
        tr_stats_set_eval(st, TR_WORKER_EVAL, &ev, i);
    }
    return NULL;
}

/* A reader snapshots while the main thread's stand-in publishes: each
 * snapshot is of one step or a later one than the last (never torn back),
 * and the last one is the final step's. */
static void test_publish_while_reading(void **state)
{
    (void)state;
    struct ss_val v[TR_N_STATS];
    struct ss_snap sn;
    struct tr_worker_counts now;
    pthread_t th;
    double last = 0;
    tr_stats_t *st = tr_stats_new(0, 1);
    tr_worker_counts_init(&now);
    assert_int_equal(pthread_create(&th, NULL, s_publisher, st), 0);
    for (int k = 0; k < 2000; k++) {
        tr_stats_snap(st, &now, &sn, v);
        double e = ss_snap_get(&sn, TR_S_epochs_done);
        assert_true(e >= last);
        assert_true(ss_snap_get(&sn, TR_S_eps) == e);
        last = e;
    }
    assert_int_equal(pthread_join(th, NULL), 0);
    tr_stats_snap(st, &now, &sn, v);
    assert_int_equal(ss_snap_get(&sn, TR_S_epochs_done), N_STEPS);
    assert_int_equal(ss_snap_get(&sn, TR_S_eval_rows), N_STEPS);
    assert_int_equal(ss_snap_get(&sn, TR_S_evals), N_STEPS);
    tr_stats_destroy(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_order),
        cmocka_unit_test(test_snap_published),
        cmocka_unit_test(test_publish_while_reading),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
