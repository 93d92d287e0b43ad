/* test_tr_sync_toy.c - adding a sync rule is one new file plus one table row.
 *
 * The toy rule tr_sync_copy0.c ("every replica becomes rank 0's") gets its
 * row below and runs end to end through what runs the real rules: the
 * config's names, the traits (job.allow_trainer_loss auto, the
 * job traits shadow-ctl prints for the launcher), tr_sync's dispatch, the
 * shadow thread over a real ring among threads, the job checkpoint's state.
 *
 * DESIGN: the sync table is an X-macro compiled into the product
 * (common/ss_sync.h), so a test cannot add a row at run time. Its hook
 * SS_SYNC_TABLE_TEST, empty in the product, takes the row here, and this
 * file compiles the table's two source files (common/ss_sync.c and
 * trainer/tr_sync.c, unchanged) into itself. Their definitions then stand
 * in for the libraries' copies at link time (an archive member is pulled
 * only for a symbol still undefined, and these define all of them), so
 * ss_cfg, tr_shadow and the rest, as built, go through this table. */
#define SS_SYNC_TABLE_TEST(X) X(S_COPY0, "s-copy0", copy0, 0, 1, 0, 0)

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

#include "ss_sync.c"        /* the table as data, with the row above */
#include "tr_sync.c"        /* the trainer's dispatch, with the row above */
#include "tr_sync_copy0.c"  /* the toy rule: the one new file */

#define N_MAX 3

/* The row reaches the config (name, value, output), the traits and
 * the dispatch; the real rows are still there. */
static void test_toy_row_everywhere(void **state)
{
    (void)state;
    struct ss_cfg *cfg = t_shadow_cfg(2, "s-copy0", NULL);
    struct ss_sync_traits t;
    char line[128], val[64], err[512] = "";
    assert_int_equal(cfg->sync_algorithm, SS_SYNC_S_COPY0);
    assert_int_equal(SS_SYNC_S_COPY0, SS_SYNC_FR_BMUF + 1);   /* appended */
    assert_string_equal(ss_sync_algo_name(cfg->sync_algorithm), "s-copy0");
    assert_int_equal(ss_cfg_get(cfg, "sync.algorithm", val, sizeof val), 0);
    assert_string_equal(val, "s-copy0");
    assert_int_equal(ss_sync_find("s-copy0"), SS_SYNC_S_COPY0);
    assert_ptr_equal(tr_sync_algo_of(SS_SYNC_S_COPY0), &tr_sync_copy0);
    assert_ptr_equal(tr_sync_algo_of(SS_SYNC_S_MA), &tr_sync_ma);
    assert_ptr_equal(tr_sync_algo_of(SS_SYNC_FR_EASGD), &tr_sync_easgd);
    assert_int_equal(tr_sync_is_foreground(SS_SYNC_S_COPY0), 0);
    /* its traits: the ring, no sync PSs, no trainer loss (auto says false
     * for it, true for s-ma) */
    ss_sync_job_traits(cfg, &t);
    ss_sync_traits_format(&t, line, sizeof line);
    assert_string_equal(line, "ring=1 sync_ps=0 foreground=0 lose_trainer=0");
    assert_int_equal(ss_cfg_trainer_loss_allowed(cfg), 0);
    ss_free(cfg);
    cfg = t_shadow_cfg(2, "s-ma", NULL);
    assert_int_equal(ss_cfg_trainer_loss_allowed(cfg), 1);
    ss_free(cfg);
    /* a name outside the table is refused, the message lists the new one */
    cfg = ss_calloc(1, sizeof *cfg);
    assert_int_not_equal(t_shadow_cfg_load(cfg, 2, "copy1", NULL, err, sizeof err), 0);
    if (!strstr(err, "copy1") || !strstr(err, "s-copy0"))
        fail_msg("message '%s' should name copy1 and list s-copy0", err);
    ss_free(cfg);
}

/* One trainer: its replica, its shadow thread, what it saw. */
struct trainer {
    struct tr_shared sh;
    ss_cluster_t *cl;             /* membership as this rank (sh.cluster) */
    tr_shadow_t *shadow;
    int start_rc, final_rc;
    struct tr_shadow_stats st;
    float rounds;                 /* the rule's state after the run */
    size_t n_state;               /* floats of it */
};

static float t_init_value(size_t i, int r)
{
    return (float)((i * 7 + (size_t)r * 5) % 13) * 0.25f + (float)r;
}

/* Start the shadow thread, let it run rounds, end training as tr_train does. */
static void *t_trainer_main(void *p)
{
    struct trainer *t = p;
    struct timespec ms50 = {0, 50 * 1000000};
    char err[512] = "";
    t->start_rc = tr_shadow_start(t->shadow, err, sizeof err);
    if (t->start_rc) {
        print_error("start: %s\n", err);
        return NULL;
    }
    nanosleep(&ms50, NULL);
    atomic_store(&t->sh.stop, 1);
    t->final_rc = tr_shadow_finish(t->shadow, err, sizeof err);
    if (t->final_rc)
        print_error("finish: %s\n", err);
    tr_shadow_get_stats(t->shadow, &t->st);
    t->n_state = tr_shadow_state(t->shadow, NULL);
    if (t->n_state == 1)
        tr_shadow_state(t->shadow, &t->rounds);
    return NULL;
}

/* N trainers with different replicas, each with its shadow thread running
 * the toy rule (a job checkpoint's state of 1000 rounds restored first): at
 * the end every replica is rank 0's, and the rule counted every round the
 * shadow thread recorded. */
static void test_toy_rule_end_to_end(void **state)
{
    (void)state;
    struct trainer t[N_MAX];
    const float restored = 1000;
    struct ss_cfg *cfg = t_shadow_cfg(N_MAX, "s-copy0", NULL);
    tr_model_t *model = t_shadow_model();
    size_t np = tr_model_n_params(model);
    void *zctx = zmq_ctx_new();
    pthread_t tid[N_MAX];
    for (int r = 0; r < N_MAX; r++) {
        memset(&t[r], 0, sizeof t[r]);
        t_shadow_trainer_init(&t[r].sh, &t[r].cl, &t[r].shadow, cfg, model, zctx, r, N_MAX,
                              t_init_value);
        assert_string_equal(tr_shadow_name(t[r].shadow), "s-copy0");
        assert_int_equal(tr_shadow_uses_ring(t[r].shadow), 1);
        assert_int_equal(tr_shadow_uses_sync_ps(t[r].shadow), 0);
        tr_shadow_set_state(t[r].shadow, &restored, 1);
    }
    for (int r = 0; r < N_MAX; r++)
        assert_int_equal(pthread_create(&tid[r], NULL, t_trainer_main, &t[r]), 0);
    for (int r = 0; r < N_MAX; r++)
        pthread_join(tid[r], NULL);
    for (int r = 0; r < N_MAX; r++) {
        assert_int_equal(t[r].start_rc, 0);
        assert_int_equal(t[r].final_rc, 0);
        assert_int_equal(t[r].st.final_ok, 1);
        assert_true(t[r].st.rounds >= 1);
        assert_int_equal(t[r].n_state, 1);
        if (t[r].rounds != restored + (float)t[r].st.rounds)
            fail_msg("rank %d: the rule counted %.0f rounds, want %.0f + %llu", r,
                     t[r].rounds, restored, (unsigned long long)t[r].st.rounds);
        for (size_t i = 0; i < np; i++)
            if (t[r].sh.w[i] != t_init_value(i, 0))
                fail_msg("rank %d [%zu]: %.9g, want rank 0's %.9g", r, i, t[r].sh.w[i],
                         t_init_value(i, 0));
    }
    for (int r = 0; r < N_MAX; r++)
        t_shadow_trainer_fini(&t[r].sh, &t[r].cl, &t[r].shadow);
    zmq_ctx_term(zctx);
    tr_model_destroy(&model);
    ss_free(cfg);
}

int main(void)
{
    ss_log_init("test", SS_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_toy_row_everywhere),
        cmocka_unit_test(test_toy_rule_end_to_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
