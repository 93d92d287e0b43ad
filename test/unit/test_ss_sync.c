/* test_ss_sync.c - the sync algorithm table: each row's traits as the
 * launcher and the trainer relied on them before the table, the names the
 * config reads, and a job's traits over its sync groups. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ss_cfg.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_sync.h"

/* The traits line of algorithm a, or "" for none. */
static const char *s_line(int a, char *buf, size_t len)
{
    const struct ss_sync_traits *t = ss_sync_traits_of(a);
    buf[0] = '\0';
    if (t)
        ss_sync_traits_format(t, buf, len);
    return buf;
}

static void test_rows(void **state)
{
    (void)state;
    char b[128];
    static const struct {
        const char *name, *rule, *line;
    } want[] = {
        {"s-easgd", "easgd", "ring=0 sync_ps=1 foreground=0 lose_trainer=1"},
        {"s-ma", "ma", "ring=1 sync_ps=0 foreground=0 lose_trainer=1"},
        {"s-bmuf", "bmuf", "ring=1 sync_ps=0 foreground=0 lose_trainer=1"},
        {"fr-easgd", "easgd", "ring=0 sync_ps=1 foreground=1 lose_trainer=0"},
        {"fr-ma", "ma", "ring=1 sync_ps=0 foreground=1 lose_trainer=0"},
        {"fr-bmuf", "bmuf", "ring=1 sync_ps=0 foreground=1 lose_trainer=0"},
    };
    assert_true(SS_SYNC_N >= 7);   /* rows may be added after these */
    assert_string_equal(ss_sync_names[0], "none");
    assert_null(ss_sync_names[SS_SYNC_N]);
    for (int a = 1; a <= (int)(sizeof want / sizeof want[0]); a++) {
        const struct ss_sync_traits *t = ss_sync_traits_of(a);
        assert_non_null(t);
        assert_int_equal(t->algorithm, a);
        assert_string_equal(t->name, want[a - 1].name);
        assert_string_equal(ss_sync_names[a], want[a - 1].name);
        assert_string_equal(t->rule, want[a - 1].rule);
        assert_string_equal(s_line(a, b, sizeof b), want[a - 1].line);
        assert_int_equal(ss_sync_find(want[a - 1].name), a);
    }
    assert_int_equal(SS_SYNC_FR_MA, 5);   /* values are places: rows only appended */
    assert_null(ss_sync_traits_of(SS_SYNC_NONE));
    assert_null(ss_sync_traits_of(SS_SYNC_N));
    assert_null(ss_sync_traits_of(-1));
    assert_int_equal(ss_sync_find("none"), SS_SYNC_NONE);
    assert_int_equal(ss_sync_find("easgd"), -1);
    assert_int_equal(ss_sync_find(""), -1);
    assert_string_equal(ss_sync_name(SS_SYNC_S_BMUF), "s-bmuf");
    assert_string_equal(ss_sync_name(SS_SYNC_NONE), "none");
    assert_string_equal(ss_sync_name(SS_SYNC_N), "?");
}

/* A job's traits from --set overrides (sync PS endpoint given). */
static void s_job(const char *algo_set, struct ss_sync_traits *t, char *line, size_t len)
{
    struct ss_cfg *cfg = ss_calloc(1, sizeof *cfg);
    char err[512] = "";
    const char *sets[] = {"cluster.sync=tcp://127.0.0.1:5999", algo_set};
    if (ss_cfg_load(cfg, NULL, sets, 2, err, sizeof err) != 0)
        fail_msg("config: %s", err);
    ss_sync_job_traits(cfg, t);
    ss_sync_traits_format(t, line, len);
    ss_free(cfg);
}

static void test_job_traits(void **state)
{
    (void)state;
    struct ss_sync_traits t;
    char b[128];
    s_job("sync.algorithm=s-easgd", &t, b, sizeof b);
    assert_string_equal(b, "ring=0 sync_ps=1 foreground=0 lose_trainer=1");
    assert_int_equal(t.algorithm, SS_SYNC_S_EASGD);
    assert_string_equal(t.name, "s-easgd");
    s_job("sync.algorithm=none", &t, b, sizeof b);
    assert_string_equal(b, "ring=0 sync_ps=0 foreground=0 lose_trainer=0");
    assert_string_equal(t.name, "none");
    /* groups: the sync.algorithm left at its default counts for nothing; a
     * "none" group neither; lose_trainer only when every rule may */
    s_job("sync.groups=[{component: bottom, algorithm: s-ma}, {component: top, "
          "algorithm: none}]", &t, b, sizeof b);
    assert_string_equal(b, "ring=1 sync_ps=0 foreground=0 lose_trainer=1");
    assert_int_equal(t.algorithm, SS_SYNC_NONE);
    assert_null(t.name);
    s_job("sync.groups=[{component: bottom, algorithm: s-easgd}, {component: top, "
          "algorithm: s-bmuf}]", &t, b, sizeof b);
    assert_string_equal(b, "ring=1 sync_ps=1 foreground=0 lose_trainer=1");
    s_job("sync.groups=[{component: bottom, algorithm: s-ma}, {component: top, "
          "algorithm: fr-ma}]", &t, b, sizeof b);
    assert_string_equal(b, "ring=1 sync_ps=0 foreground=1 lose_trainer=0");
    s_job("sync.groups=[{component: bottom, algorithm: none}]", &t, b, sizeof b);
    assert_string_equal(b, "ring=0 sync_ps=0 foreground=0 lose_trainer=0");
}

/* The config's checks read the traits: a sync_ps algorithm needs a sync
 * endpoint (in a group too), others do not; auto trainer loss follows
 * lose_trainer. */
static void test_config_reads_traits(void **state)
{
    (void)state;
    struct ss_cfg *cfg = ss_calloc(1, sizeof *cfg);
    char err[512] = "";
    const char *easgd[] = {"cluster.sync=[]", "sync.algorithm=fr-easgd"};
    const char *group[] = {"cluster.sync=[]", "sync.groups=[{component: top, algorithm: "
                           "s-easgd}]"};
    const char *ma[] = {"cluster.sync=[]", "sync.algorithm=fr-ma"};
    assert_int_not_equal(ss_cfg_load(cfg, NULL, easgd, 2, err, sizeof err), 0);
    assert_non_null(strstr(err, "EASGD needs at least one sync endpoint"));
    assert_int_not_equal(ss_cfg_load(cfg, NULL, group, 2, err, sizeof err), 0);
    assert_non_null(strstr(err, "EASGD needs at least one sync endpoint"));
    assert_int_equal(ss_cfg_load(cfg, NULL, ma, 2, err, sizeof err), 0);
    assert_int_equal(ss_cfg_trainer_loss_allowed(cfg), 0);
    const char *loss[] = {"cluster.sync=[]", "sync.algorithm=fr-ma", "job.allow_trainer_loss=true"};
    assert_int_equal(ss_cfg_load(cfg, NULL, loss, 3, err, sizeof err), 0);
    assert_int_equal(ss_cfg_trainer_loss_allowed(cfg), 1);
    const char *sma[] = {"cluster.sync=[]", "sync.algorithm=s-bmuf"};
    assert_int_equal(ss_cfg_load(cfg, NULL, sma, 2, err, sizeof err), 0);
    assert_int_equal(ss_cfg_trainer_loss_allowed(cfg), 1);
    ss_free(cfg);
}

int main(void)
{
    ss_log_init("test", SS_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_job_traits),
        cmocka_unit_test(test_config_reads_traits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
