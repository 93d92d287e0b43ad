/* test_ss_super.c - unit tests of the job supervisor (ss_super): its rules
 * alone (a trainer's exit status, the trainer-loss rule, where a PS
 * restarts from), then whole runs over tiny sh programs standing in for
 * PSs and trainers: a job that ends well, a PS that dies and comes back
 * from its recovery checkpoint, restarts used up, a PS dead at start-up, a
 * trainer lost under job.allow_trainer_loss and one the rule refuses,
 * SIGTERM's job checkpoint (exit 75) and a second SIGTERM, a host lost over
 * ssh (exit 255) and the reader of --out - gone (exit 141).
 *
 * The programs read the scratch folder from $D; a PS writes its pid to
 * $D/ps.pid and stops on SIGTERM (its shutdown command sends it). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ss_super.h"
#include "t.h"

/* ------------------------------------------------------------ the rules */

static void test_trainer_end(void **state)
{
    (void)state;
    assert_int_equal(ss_super_trainer_end(0, 0, 0), SS_SUPER_END_OK);
    assert_int_equal(ss_super_trainer_end(75, 1, 0), SS_SUPER_END_CKPT);
    assert_int_equal(ss_super_trainer_end(75, 0, 0), SS_SUPER_END_FAIL);  /* nobody asked */
    assert_int_equal(ss_super_trainer_end(76, 1, 0), SS_SUPER_END_KEPT);
    assert_int_equal(ss_super_trainer_end(76, 0, 0), SS_SUPER_END_FAIL);
    assert_int_equal(ss_super_trainer_end(141, 0, 1), SS_SUPER_END_PIPE);
    assert_int_equal(ss_super_trainer_end(141, 0, 0), SS_SUPER_END_FAIL);
    assert_int_equal(ss_super_trainer_end(137, 1, 1), SS_SUPER_END_FAIL);
    /* a failed save or unreadable data names its cause: never the loss rule */
    assert_int_equal(ss_super_trainer_end(74, 0, 0), SS_SUPER_END_SAVE);
    assert_int_equal(ss_super_trainer_end(74, 1, 1), SS_SUPER_END_SAVE);
    assert_int_equal(ss_super_trainer_end(66, 0, 0), SS_SUPER_END_NODATA);
}

static void test_may_lose(void **state)
{
    char why[512];
    (void)state;
    /* not allowed; or nobody left to go on */
    assert_int_equal(ss_super_may_lose(0, 2, 0, 3, 0, 1, why, sizeof why), 0);
    assert_string_equal(why, "");
    assert_int_equal(ss_super_may_lose(1, 0, 0, 3, 0, 1, why, sizeof why), 0);
    /* a majority of the ring as it is now must be left: 2 trainers cannot
     * lose one; 3 can, once; 4 twice (4 -> 3 -> 2), not a third time */
    assert_int_equal(ss_super_may_lose(1, 1, 0, 2, 0, 1, why, sizeof why), 0);
    assert_non_null(strstr(why, "1 of the 2 trainers in the ring are left, not a majority"));
    assert_int_equal(ss_super_may_lose(1, 2, 0, 3, 0, 1, why, sizeof why), 1);
    assert_int_equal(ss_super_may_lose(1, 1, 0, 3, 1, 1, why, sizeof why), 0);
    assert_int_equal(ss_super_may_lose(1, 3, 0, 4, 0, 1, why, sizeof why), 1);
    assert_int_equal(ss_super_may_lose(1, 2, 0, 4, 1, 1, why, sizeof why), 1);
    assert_int_equal(ss_super_may_lose(1, 1, 0, 4, 2, 1, why, sizeof why), 0);
    /* one finished well counts as someone to go on */
    assert_int_equal(ss_super_may_lose(1, 0, 2, 3, 0, 1, why, sizeof why), 1);
    /* before the ring formed */
    assert_int_equal(ss_super_may_lose(1, 2, 0, 3, 0, 0, why, sizeof why), 0);
    assert_non_null(strstr(why, "before the trainers' ring had formed"));
}

static void test_restart_from(void **state)
{
    (void)state;
    assert_int_equal(ss_super_restart_from("sync", 1, 1), SS_SUPER_FROM_EMPTY);
    assert_int_equal(ss_super_restart_from("embedding", 1, 1), SS_SUPER_FROM_RECOVERY);
    assert_int_equal(ss_super_restart_from("embedding", 0, 1), SS_SUPER_FROM_RESUME);
    assert_int_equal(ss_super_restart_from("embedding", 0, 0), SS_SUPER_FROM_EMPTY);
    assert_int_equal(ss_super_allow_loss("true", 0), 1);
    assert_int_equal(ss_super_allow_loss("false", 1), 0);
    assert_int_equal(ss_super_allow_loss("auto", 1), 1);
    assert_int_equal(ss_super_allow_loss("auto", 0), 0);
    assert_int_equal(ss_super_allow_loss("yes", 1), -1);
    assert_int_equal(ss_super_may_restart(0, 1), 1);
    assert_int_equal(ss_super_may_restart(1, 1), 0);
    assert_int_equal(ss_super_may_restart(0, 0), 0);
}

/* ------------------------------------------------------------ whole runs */

#define PS_LOOP "echo $$ >\"$D/ps.pid\"; trap 'exit 0' TERM; while :; do sleep 0.02; done"

/* A job under construction in a scratch folder. */
struct fx {
    char dir[256], logs[300], jobckpt[300];
    char logp[8][320];
    char *argv[8][SS_SUPER_N_ARGV][4];
    struct ss_super_proc procs[8];
    size_t n;
    struct ss_super_job job;
    const char *hosts[2];
    int sig[2];
    struct ss_super_outcome out;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    if (!f || t_tmpdir(f->dir, sizeof f->dir, "super") != 0)
        return -1;
    snprintf(f->logs, sizeof f->logs, "%s/logs", f->dir);
    snprintf(f->jobckpt, sizeof f->jobckpt, "%s/jobckpt", f->dir);
    if (mkdir(f->logs, 0755) != 0 || pipe(f->sig) != 0)
        return -1;
    setenv("D", f->dir, 1);
    f->hosts[0] = "h0";
    f->hosts[1] = "h1";
    f->job = (struct ss_super_job){
        .n_trainers = 0, .max_ps_restarts = 3, .quiet = 1, .run_dir = f->dir, .logs = f->logs,
        .jobckpt = f->jobckpt, .hosts = f->hosts, .n_hosts = 2, .keep_fd = -1,
        .ready_timeout_ms = 5000, .ckpt_timeout_s = 20, .poll_ms = 20,
    };
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    close(f->sig[0]);
    close(f->sig[1]);
    t_rmtree(f->dir);
    free(f);
    return 0;
}

/* Give the last process command line v: sh -c script. */
static void s_argv(struct fx *f, enum ss_super_argv v, const char *script)
{
    char **a = f->argv[f->n - 1][v];
    a[0] = "sh";
    a[1] = "-c";
    a[2] = (char *)script;
    a[3] = NULL;
    f->procs[f->n - 1].argv[v] = a;
}

/* Add a process running script (a PS: role, with the shutdown command). */
static void s_add(struct fx *f, const char *role, int index, const char *script)
{
    struct ss_super_proc *p = &f->procs[f->n];
    int is_ps = strcmp(role, "trainer") != 0;
    snprintf(f->logp[f->n], sizeof f->logp[f->n], "%s/%s-%d.log", f->logs, role, index);
    p->is_ps = is_ps;
    p->role = role;
    p->index = index;
    p->log = f->logp[f->n];
    p->out_fd = -1;
    f->n++;
    f->job.n_trainers += !is_ps;
    s_argv(f, SS_SUPER_START, script);
    if (is_ps)
        s_argv(f, SS_SUPER_SHUTDOWN, "kill -TERM $(cat \"$D/ps.pid\")");
}

/* Run the job; returns ss_super_run's code. */
static int s_run(struct fx *f)
{
    char err[256] = "";
    ss_super_t *s = ss_super_new(&f->job, f->procs, f->n, f->sig[0], err, sizeof err);
    int rc;
    if (!s)
        fail_msg("ss_super_new: %s", err);
    rc = ss_super_run(s, &f->out);
    ss_super_destroy(&s);
    assert_null(s);
    return rc;
}

/* The contents of $D/name (static buffer; "" when none). */
static const char *s_file(const struct fx *f, const char *name)
{
    static char buf[4096];
    char path[512];
    FILE *fp;
    size_t n = 0;
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    if ((fp = fopen(path, "r")) != NULL) {
        n = fread(buf, 1, sizeof buf - 1, fp);
        fclose(fp);
    }
    buf[n] = '\0';
    return buf;
}

/* Whether $D/name exists. */
static int s_exists(const struct fx *f, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    return access(path, F_OK) == 0;
}

static void s_assert_all_reaped(const struct fx *f)
{
    size_t i;
    for (i = 0; i < f->n; i++)
        if (f->procs[i].is_ps || !f->procs[i].done)
            assert_int_equal(f->procs[i].pid, 0);
}

static void test_run_ok(void **state)
{
    struct fx *f = *state;
    s_add(f, "embedding", 0, "echo serving; echo ready: on x; " PS_LOOP);
    s_add(f, "trainer", 0, "sleep 0.2; echo 'trainer 0 | done'");
    s_add(f, "trainer", 1, "sleep 0.1");
    assert_int_equal(s_run(f), 0);
    assert_int_equal(f->out.rc, 0);
    assert_int_equal(f->out.n_ok, 2);
    assert_int_equal(f->out.n_restarts + f->out.n_lost + f->out.n_ckpt, 0);
    s_assert_all_reaped(f);
    /* the PS was stopped by its shutdown command (exit 0 of the trap), not killed */
    assert_string_equal(s_file(f, "ps-restarts.jsonl"), "");
}

/* A local job: one command shuts every PS down (not one per PS), and every
 * process dies with the supervisor (PR_SET_PDEATHSIG, as setpriv shows it). */
static void test_shutdown_all(void **state)
{
    struct fx *f = *state;
    char *all[] = {"sh", "-c", "echo all >>\"$D/shut\"; kill -TERM $(cat \"$D\"/pid-*)", NULL};
    const char *loop = "echo ready:; echo $$ >\"$D/pid-e%d\"; trap 'exit 0' TERM; "
                       "while :; do sleep 0.02; done";
    char ps0[256], ps1[256];
    snprintf(ps0, sizeof ps0, loop, 0);
    snprintf(ps1, sizeof ps1, loop, 1);
    s_add(f, "embedding", 0, ps0);
    s_argv(f, SS_SUPER_SHUTDOWN, "echo one >>\"$D/shut\"");
    s_add(f, "embedding", 1, ps1);
    s_argv(f, SS_SUPER_SHUTDOWN, "echo one >>\"$D/shut\"");
    s_add(f, "trainer", 0, "exec setpriv --dump >\"$D/pdeath\"");  /* exec keeps it */
    f->job.shutdown_all = all;
    f->job.die_with_super = 1;
    assert_int_equal(s_run(f), 0);
    assert_int_equal(f->out.rc, 0);
    assert_int_equal(f->out.n_ok, 1);
    assert_int_equal(f->out.n_restarts, 0);
    assert_string_equal(s_file(f, "shut"), "all\n");
    assert_string_equal(s_file(f, "ps-restarts.jsonl"), "");
    if (system("setpriv --dump >/dev/null 2>&1") == 0)
        assert_non_null(strstr(s_file(f, "pdeath"), "Parent death signal: KILL\n"));
    s_assert_all_reaped(f);
}

static void test_ps_restart_from_recovery(void **state)
{
    struct fx *f = *state;
    s_add(f, "embedding", 0, "echo ready:; sleep 0.2; exit 9");
    s_argv(f, SS_SUPER_AGE, "echo 42");
    s_argv(f, SS_SUPER_RECOVERY, "echo 'ready: recovered'; " PS_LOOP);
    s_argv(f, SS_SUPER_EMPTY, "echo 'ready: empty'; " PS_LOOP);
    s_add(f, "trainer", 0, "sleep 2");   /* well after the PS died */
    assert_int_equal(s_run(f), 0);
    assert_int_equal(f->out.rc, 0);
    assert_int_equal(f->out.n_restarts, 1);
    assert_non_null(strstr(s_file(f, "ps-restarts.jsonl"),
                           "{\"ps\":\"embedding:0\",\"exit\":9,\"at_s\":"));
    assert_non_null(strstr(s_file(f, "ps-restarts.jsonl"), "\"checkpoint_age_s\":42}"));
    assert_non_null(strstr(s_file(f, "logs/embedding-0.log"), "ready: recovered"));
    assert_null(strstr(s_file(f, "logs/embedding-0.log"), "ready: empty"));
    s_assert_all_reaped(f);
}

static void test_sync_ps_restarts_empty(void **state)
{
    struct fx *f = *state;
    s_add(f, "sync", 0, "echo ready:; sleep 0.2; exit 9");
    s_argv(f, SS_SUPER_AGE, "echo 42");   /* a checkpoint there: not used */
    s_argv(f, SS_SUPER_RECOVERY, "echo 'ready: recovered'; " PS_LOOP);
    s_argv(f, SS_SUPER_EMPTY, "echo 'ready: empty'; " PS_LOOP);
    s_add(f, "trainer", 0, "sleep 2");   /* well after the PS died */
    assert_int_equal(s_run(f), 0);
    assert_int_equal(f->out.n_restarts, 1);
    assert_non_null(strstr(s_file(f, "logs/sync-0.log"), "ready: empty"));
    assert_null(strstr(s_file(f, "logs/sync-0.log"), "ready: recovered"));
}

static void test_ps_restarts_used_up(void **state)
{
    struct fx *f = *state;
    f->job.max_ps_restarts = 0;
    s_add(f, "embedding", 0, "echo ready:; sleep 0.2; exit 9");
    s_argv(f, SS_SUPER_EMPTY, "echo ready:; " PS_LOOP);
    s_add(f, "trainer", 0, "exec sleep 30");
    assert_int_equal(s_run(f), 0);
    assert_int_equal(f->out.rc, 1);
    assert_int_equal(f->out.trainers_failed, 1);
    assert_string_equal(f->out.failed, "PS embedding:0 on host h0 died (exit 9) and"
                        " job.max_ps_restarts (0) restarts are used up");
    s_assert_all_reaped(f);   /* the trainer was stopped */
}

static void test_ps_dead_at_start(void **state)
{
    struct fx *f = *state;
    s_add(f, "embedding", 0, "echo bad config; exit 3");
    s_add(f, "trainer", 0, "touch \"$D/trainer-ran\"");
    assert_int_equal(s_run(f), 0);
    assert_int_equal(f->out.rc, 1);
    assert_int_equal(f->out.trainers_failed, 0);
    assert_string_equal(f->out.failed, "PS embedding:0 exited during start-up on host h0 (exit 3)");
    assert_string_equal(s_file(f, "trainer-ran"), "");
}

/* A PS that reads a large saved shard at start says "restoring:" each
 * second; each such line starts the start-up timeout (ready_timeout_ms,
 * 2 s here) again: a PS restoring for 5 s is waited for. One that says
 * nothing for longer than the timeout is given up on, as before. */
static void test_ps_restoring_at_start(void **state)
{
    struct fx *f = *state;
    f->job.ready_timeout_ms = 2000;
    s_add(f, "embedding", 0, "for i in 1 2 3 4 5 6 7 8 9 10; do echo \"restoring: $i of 10 MiB\"; "
                             "sleep 0.5; done; echo ready: on x; " PS_LOOP);
    s_add(f, "trainer", 0, "touch \"$D/trainer-ran\"");
    assert_int_equal(s_run(f), 0);
    assert_int_equal(f->out.rc, 0);
    assert_int_equal(s_exists(f, "trainer-ran"), 1);
    s_assert_all_reaped(f);
}

static void test_ps_silent_at_start(void **state)
{
    struct fx *f = *state;
    f->job.ready_timeout_ms = 2000;
    s_add(f, "embedding", 0, "echo 'restoring: 1 of 5 MiB'; sleep 5; echo ready: on x; "
                             PS_LOOP);
    s_add(f, "trainer", 0, "touch \"$D/trainer-ran\"");
    assert_int_equal(s_run(f), 0);
    assert_int_equal(f->out.rc, 1);
    assert_string_equal(f->out.failed, "PS embedding:0 on host h0 not ready after 2 s");
    assert_int_equal(s_exists(f, "trainer-ran"), 0);
}

#define RING "echo 'all 3 trainers joined the ring'; "

static void test_trainer_lost(void **state)
{
    struct fx *f = *state;
    f->job.allow_loss = 1;
    s_add(f, "embedding", 0, "echo ready:; " PS_LOOP);
    s_add(f, "trainer", 0, RING "sleep 0.8");
    s_add(f, "trainer", 1, RING "sleep 0.8");
    s_add(f, "trainer", 2, RING "sleep 0.2; exit 3");
    assert_int_equal(s_run(f), 0);
    assert_int_equal(f->out.rc, 0);
    assert_int_equal(f->out.n_ok, 2);
    assert_int_equal(f->out.n_lost, 1);
    assert_non_null(strstr(s_file(f, "trainers-lost.jsonl"), "{\"rank\":2,\"exit\":3,\"at_s\":"));
    assert_non_null(strstr(f->out.lost_text, "trainer 2 was lost at "));
}

static void test_trainer_loss_refused(void **state)
{
    struct fx *f = *state;
    f->job.allow_loss = 1;
    s_add(f, "embedding", 0, "echo ready:; " PS_LOOP);
    s_add(f, "trainer", 0, "echo 'all 2 trainers joined the ring'; exec sleep 30");
    s_add(f, "trainer", 1, "echo 'all 2 trainers joined the ring'; sleep 0.2; exit 3");
    assert_int_equal(s_run(f), 0);
    assert_int_equal(f->out.rc, 1);
    assert_int_equal(f->out.n_lost, 0);
    assert_non_null(strstr(f->out.failed, "trainer 1 exited with status 3; the job cannot go on"
                           " without it: 1 of the 2 trainers in the ring are left"));
    assert_string_equal(s_file(f, "trainers-lost.jsonl"), "");
    s_assert_all_reaped(f);
}

/* A trainer that writes its part of a job checkpoint on SIGTERM (exit 75);
 * $D/armed-R says its trap is in. */
#define CKPT_TRAINER(r) "trap 'exit 75' TERM; : >\"$D/armed-" #r "\"; while :; do sleep 0.02; done"

/* Write SIGTERM to the signal pipe (from a child process) once n trainers
 * are armed (CKPT_TRAINER), or after 20 s. */
static pid_t s_term_when_armed(struct fx *f, int n)
{
    unsigned char term = SIGTERM;
    char path[512];
    pid_t pid = fork();
    int r, ms;
    if (pid == 0) {
        for (r = 0, ms = 0; r < n && ms < 20000; ms += 10) {
            snprintf(path, sizeof path, "%s/armed-%d", f->dir, r);
            if (access(path, F_OK) == 0)
                r++;
            else
                usleep(10000);
        }
        _exit(write(f->sig[1], &term, 1) == 1 ? 0 : 1);
    }
    assert_true(pid > 0);
    return pid;
}

static void test_sigterm_checkpoint(void **state)
{
    struct fx *f = *state;
    pid_t w;
    int st;
    s_add(f, "embedding", 0, "echo ready:; " PS_LOOP);
    s_add(f, "trainer", 0, CKPT_TRAINER(0));
    s_add(f, "trainer", 1, CKPT_TRAINER(1));
    w = s_term_when_armed(f, 2);
    assert_int_equal(s_run(f), 0);
    assert_int_equal(waitpid(w, &st, 0), w);
    assert_int_equal(f->out.rc, 0);
    assert_int_equal(f->out.n_ckpt, 2);
    assert_int_equal(f->out.n_ok, 0);
}

/* A trainer whose job checkpoint waits for a PS that writes a large file
 * logs the PS's "working:" replies; each starts the checkpoint's time
 * (ckpt_timeout_s, 2 s here) again: 4 s of such lines are waited for. A
 * trainer as slow that logs nothing is given up on after 2 s, as before. */
#define SLOW_CKPT_TRAINER(words)                                                             \
    "trap 'for i in 1 2 3 4 5 6 7 8 9 10; do " words " sleep 0.4; done; exit 75' TERM; "  \
    ": >\"$D/armed-0\"; while :; do sleep 0.02; done"

static void test_sigterm_checkpoint_working(void **state)
{
    struct fx *f = *state;
    pid_t w;
    int st;
    f->job.ckpt_timeout_s = 2;
    s_add(f, "embedding", 0, "echo ready:; " PS_LOOP);
    s_add(f, "trainer", 0, SLOW_CKPT_TRAINER("echo \"e0: working: $i of 10 MiB written\";"));
    w = s_term_when_armed(f, 1);
    assert_int_equal(s_run(f), 0);
    assert_int_equal(waitpid(w, &st, 0), w);
    assert_int_equal(f->out.rc, 0);
    assert_int_equal(f->out.n_ckpt, 1);
}

/* The same when the trainer's log is truncated after SIGTERM (a log rotated
 * by copy and truncate): its "working:" lines are read from the start of
 * the shorter file, not looked for beyond its end. */
static void test_sigterm_checkpoint_working_truncated(void **state)
{
    struct fx *f = *state;
    pid_t w;
    int st;
    f->job.ckpt_timeout_s = 2;
    s_add(f, "embedding", 0, "echo ready:; " PS_LOOP);
    s_add(f, "trainer", 0,
          "printf '%0400d\\n' 0; "
          SLOW_CKPT_TRAINER("[ $i = 1 ] && : >/dev/stdout; "
                            "echo \"e0: working: $i of 10 MiB written\";"));
    w = s_term_when_armed(f, 1);
    assert_int_equal(s_run(f), 0);
    assert_int_equal(waitpid(w, &st, 0), w);
    assert_int_equal(f->out.rc, 0);
    assert_int_equal(f->out.n_ckpt, 1);
}

static void test_sigterm_checkpoint_silent(void **state)
{
    struct fx *f = *state;
    pid_t w;
    int st;
    f->job.ckpt_timeout_s = 2;
    s_add(f, "embedding", 0, "echo ready:; " PS_LOOP);
    s_add(f, "trainer", 0, SLOW_CKPT_TRAINER(""));
    w = s_term_when_armed(f, 1);
    assert_int_equal(s_run(f), 0);
    assert_int_equal(waitpid(w, &st, 0), w);
    assert_int_equal(f->out.rc, 1);
    assert_non_null(strstr(f->out.failed, "did not finish the job checkpoint within 2 s"));
}

static void test_second_sigterm(void **state)
{
    struct fx *f = *state;
    unsigned char term[2] = {SIGTERM, SIGTERM};
    s_add(f, "embedding", 0, "echo ready:; " PS_LOOP);
    s_add(f, "trainer", 0, "trap '' TERM; exec sleep 30");   /* never checkpoints */
    assert_int_equal(write(f->sig[1], term, 2), 2);
    assert_int_equal(s_run(f), 0);
    assert_int_equal(f->out.rc, 1);
    assert_string_equal(f->out.failed, "second SIGTERM: stopping the job at once");
    assert_int_equal(f->out.trainers_failed, 0);
    s_assert_all_reaped(f);
}

static void test_sigint_while_scoring(void **state)
{
    struct fx *f = *state;
    unsigned char term = SIGTERM;
    f->job.eval_only = 1;   /* SIGTERM stops a scoring job at once */
    s_add(f, "embedding", 0, "echo ready:; " PS_LOOP);
    s_add(f, "trainer", 0, CKPT_TRAINER(0));
    assert_int_equal(write(f->sig[1], &term, 1), 1);
    assert_int_equal(s_run(f), 0);
    assert_int_equal(f->out.rc, 1);
    assert_string_equal(f->out.failed, "interrupted: stopping the job");
    assert_int_equal(f->out.n_ckpt, 0);
}

static void test_ssh_host_lost(void **state)
{
    struct fx *f = *state;
    f->job.backend = ss_backend_find("ssh");
    s_add(f, "embedding", 0, "echo ready:; " PS_LOOP);
    s_add(f, "trainer", 0, "exec sleep 30");
    s_add(f, "trainer", 1, "sleep 0.1; exit 255");
    f->procs[2].host = 1;
    assert_int_equal(s_run(f), 0);
    assert_int_equal(f->out.rc, 1);
    assert_string_equal(f->out.failed, "lost the ssh connection to host h1 (trainer 1 ran there):"
                        " the host or its network is down, or its sshd ended");
    assert_int_equal(f->out.host_lost[1], 1);
    assert_int_equal(f->out.host_lost[0], 0);
}

static void test_predict_reader_gone(void **state)
{
    struct fx *f = *state;
    f->job.predict_stdout = 1;
    s_add(f, "embedding", 0, "echo ready:; " PS_LOOP);
    s_add(f, "trainer", 0, "echo 'predict: stopped after 12 prediction line(s)'; exit 141");
    assert_int_equal(s_run(f), 0);
    assert_int_equal(f->out.rc, 141);
    assert_string_equal(f->out.failed, "the reader of standard output closed it early;"
                        " prediction stopped (after writing 12 prediction line(s))");
}

static void test_new_refuses(void **state)
{
    struct fx *f = *state;
    char err[256];
    s_add(f, "trainer", 0, "true");
    s_add(f, "embedding", 0, "true");   /* a PS after a trainer */
    assert_null(ss_super_new(&f->job, f->procs, f->n, -1, err, sizeof err));
    assert_non_null(strstr(err, "the PSs come before the trainers"));
    assert_null(ss_super_new(&f->job, f->procs, 0, -1, err, sizeof err));
    assert_non_null(strstr(err, "no trainer"));
}

/* ------------------------------------------------------------ the end */

static void s_write(const char *dir, const char *name, const char *text)
{
    char path[512];
    FILE *fp;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_non_null(fp = fopen(path, "w"));
    fputs(text, fp);
    fclose(fp);
}

static void test_ckpt_read(void **state)
{
    struct fx *f = *state;
    struct ss_super_ckpt ck;
    ss_super_ckpt_read(f->jobckpt, &ck);   /* no folder */
    assert_int_equal(ck.complete, 0);
    assert_string_equal(ck.missing, " MANIFEST");
    assert_string_equal(ck.id, "");
    assert_int_equal(mkdir(f->jobckpt, 0755), 0);
    s_write(f->jobckpt, "MANIFEST", "save_id 77\ntrainers 2\nembedding_shards 2\n"
            "sync_shards 1\nexamples 1234\n");
    s_write(f->jobckpt, "trainer-0.state", "x");
    s_write(f->jobckpt, "trainer-1.state", "");   /* empty: missing */
    s_write(f->jobckpt, "embedding-0.ckpt", "x");
    s_write(f->jobckpt, "sync-0.ckpt", "x");
    ss_super_ckpt_read(f->jobckpt, &ck);
    assert_string_equal(ck.id, "77");
    assert_string_equal(ck.examples, "1234");
    assert_int_equal(ck.complete, 0);
    assert_string_equal(ck.missing, " trainer-1.state embedding-1.ckpt");
    s_write(f->jobckpt, "trainer-1.state", "x");
    s_write(f->jobckpt, "embedding-1.ckpt", "x");
    ss_super_ckpt_read(f->jobckpt, &ck);
    assert_int_equal(ck.complete, 1);
    assert_string_equal(ck.missing, "");
}

/* --resume's refusals: no MANIFEST, another trainer count, a missing file */
static void test_resume_check(void **state)
{
    struct fx *f = *state;
    char msg[1024];
    assert_int_equal(ss_super_resume_check(f->jobckpt, 2, "/L", msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "(no MANIFEST)"));
    assert_non_null(strstr(msg, "(see /L)"));
    assert_int_equal(mkdir(f->jobckpt, 0755), 0);
    s_write(f->jobckpt, "MANIFEST", "save_id 7\ntrainers 2\nembedding_shards 1\n"
            "sync_shards 0\nexamples 10\n");
    s_write(f->jobckpt, "trainer-0.state", "x");
    s_write(f->jobckpt, "embedding-0.ckpt", "x");
    assert_int_equal(ss_super_resume_check(f->jobckpt, 3, "/L", msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "holds 2 trainers' states, the job has 3 trainers"));
    assert_int_equal(ss_super_resume_check(f->jobckpt, 2, "/L", msg, sizeof msg), -1);
    assert_string_equal(msg, "the job checkpoint lacks trainer-1.state");
    s_write(f->jobckpt, "trainer-1.state", "x");
    assert_int_equal(ss_super_resume_check(f->jobckpt, 2, "/L", msg, sizeof msg), 0);
}

static void test_verdict(void **state)
{
    struct ss_super_outcome o;
    struct ss_super_ckpt ck = {.id = "9", .complete = 1};
    (void)state;
    memset(&o, 0, sizeof o);
    o.n_ok = 2;
    assert_int_equal(ss_super_verdict(&o, 2, &ck, "", 0), SS_SUPER_REPORT);
    /* SIGTERM: every trainer wrote its part, a new complete checkpoint */
    memset(&o, 0, sizeof o);
    o.n_ckpt = 2;
    snprintf(o.ckpt_old_id, sizeof o.ckpt_old_id, "8");
    assert_int_equal(ss_super_verdict(&o, 2, &ck, "8", 0), SS_SUPER_SAVED);
    o.n_ckpt = 1;   /* one did not */
    assert_int_equal(ss_super_verdict(&o, 2, &ck, "8", 0), SS_SUPER_UNSAVED);
    o.n_lost = 1;   /* ... because it was lost before */
    assert_int_equal(ss_super_verdict(&o, 2, &ck, "8", 0), SS_SUPER_SAVED);
    snprintf(o.ckpt_old_id, sizeof o.ckpt_old_id, "9");   /* nothing new was written */
    assert_int_equal(ss_super_verdict(&o, 2, &ck, "8", 0), SS_SUPER_UNSAVED);
    snprintf(o.ckpt_old_id, sizeof o.ckpt_old_id, "8");
    ck.complete = 0;
    assert_int_equal(ss_super_verdict(&o, 2, &ck, "8", 0), SS_SUPER_UNSAVED);
    ck.complete = 1;
    /* SIGTERM after a loss: the checkpoint there is this job's when this
     * launch wrote it (not the one it started with) or resumed from it */
    memset(&o, 0, sizeof o);
    o.n_kept = 2;
    o.n_lost = 1;
    assert_int_equal(ss_super_verdict(&o, 3, &ck, "8", 0), SS_SUPER_KEPT);
    assert_int_equal(ss_super_verdict(&o, 3, &ck, "9", 0), SS_SUPER_KEPT_NONE);
    assert_int_equal(ss_super_verdict(&o, 3, &ck, "9", 1), SS_SUPER_KEPT);
    ck.id[0] = '\0';
    assert_int_equal(ss_super_verdict(&o, 3, &ck, "", 1), SS_SUPER_KEPT_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trainer_end),
        cmocka_unit_test(test_may_lose),
        cmocka_unit_test(test_restart_from),
        cmocka_unit_test_setup_teardown(test_run_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ps_restart_from_recovery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_ps_restarts_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ps_restarts_used_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ps_dead_at_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ps_restoring_at_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_checkpoint_working, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_checkpoint_working_truncated, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_checkpoint_silent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ps_silent_at_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trainer_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trainer_loss_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_checkpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_sigterm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigint_while_scoring, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ssh_host_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_predict_reader_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ckpt_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_check, setup, teardown),
        cmocka_unit_test(test_verdict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
