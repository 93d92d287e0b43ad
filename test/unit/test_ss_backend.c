/* test_ss_backend.c - unit tests of the --exec modes' table (ss_backend):
 * the rows' rules, the local mode passing argv through, ssh and srun's
 * words, and the remote TERM wrapper run here with sh as a host would run
 * it: the words arrive as given (spaces, quotes, '$'), the program starts in
 * the launcher's folder, its exit status comes back, a "TERM" line becomes
 * SIGTERM, the end of its input stops it; then SLURM_JOB_CPUS_PER_NODE. */
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

#include "ss_backend.h"
#include "t.h"

static size_t s_len(char *const *v)
{
    size_t n = 0;
    while (v[n])
        n++;
    return n;
}

static void test_rows(void **state)
{
    (void)state;
    const struct ss_backend *l = ss_backend_find("local"), *s = ss_backend_find("ssh"),
                            *r = ss_backend_find("srun");
    assert_non_null(l);
    assert_non_null(s);
    assert_non_null(r);
    assert_null(ss_backend_find("rsh"));
    assert_null(ss_backend_find(NULL));
    assert_int_equal(l->remote, 0);
    assert_int_equal(s->remote, 1);
    assert_int_equal(r->remote, 1);
    assert_int_equal(s->lost_rc, 255);   /* ssh's own failure: the host is lost */
    assert_int_equal(l->lost_rc, -1);
    assert_int_equal(r->lost_rc, -1);
    assert_non_null(s->lost_hint);
    assert_non_null(strstr(s->lost_hint, "ssh -o BatchMode=yes %s")); /* preflight --why's */
    assert_null(l->lost_hint);
    assert_int_equal(r->stop_wait_ms, 3000);
    assert_int_equal(l->stop_wait_ms, 2000);
}

static void test_local_passes_argv(void **state)
{
    (void)state;
    char *argv[] = {"shadow-ps", "--set", "a b", NULL};
    struct ss_backend_where w = {0};
    char **c = ss_backend_argv(ss_backend_find("local"), &w, SS_BACKEND_RUN, argv);
    assert_int_equal(s_len(c), 3);
    for (int i = 0; i < 3; i++)
        assert_string_equal(c[i], argv[i]);
    ss_backend_argv_free(&c);
    assert_null(c);
    ss_backend_argv_free(&c);  /* NULL is fine */
}

static void test_ssh_words(void **state)
{
    (void)state;
    char *argv[] = {"tar", "-C", "it's here", NULL};
    const char *opts[] = {"-F", "my config"};
    struct ss_backend_where w = {.target = "me@h1", .ssh_opts = opts, .n_ssh_opts = 2,
                                 .cwd = "/x"};
    char **c = ss_backend_argv(ss_backend_find("ssh"), &w, SS_BACKEND_PIPE, argv);
    size_t n = s_len(c);
    assert_string_equal(c[0], "ssh");
    assert_string_equal(c[1], "-F");           /* the user's options first: they win */
    assert_string_equal(c[2], "my config");
    assert_string_equal(c[3], "-T");
    assert_non_null(strstr(c[5], "BatchMode=yes"));
    assert_string_equal(c[n - 2], "me@h1");
    assert_string_equal(c[n - 1], "'tar' '-C' 'it'\\''s here'");  /* PIPE: the words alone */
    ss_backend_argv_free(&c);
    c = ss_backend_argv(ss_backend_find("ssh"), &w, SS_BACKEND_RUN, argv);
    n = s_len(c);
    assert_non_null(strstr(c[n - 1], "cd '/x' 2>/dev/null || cd /;"));
    assert_non_null(strstr(c[n - 1], "'tar' '-C' 'it'\\''s here' </dev/null &"));
    ss_backend_argv_free(&c);
}

static void test_srun_words(void **state)
{
    (void)state;
    char *argv[] = {"shadow-trainer", NULL};
    struct ss_backend_where w = {.target = "node-2", .cpus = 8, .step_name = "sl-1", .cwd = "/"};
    const char *want[] = {"srun", "--overlap", "--nodes=1", "--ntasks=1", "--nodelist=node-2",
                          "--cpus-per-task=8", "--kill-on-bad-exit=1", "--quiet",
                          "--job-name=sl-1", "--", "bash", "-c"};
    char **c = ss_backend_argv(ss_backend_find("srun"), &w, SS_BACKEND_RUN, argv);
    assert_int_equal(s_len(c), 13);
    for (size_t i = 0; i < 12; i++)
        assert_string_equal(c[i], want[i]);
    assert_non_null(strstr(c[12], "'shadow-trainer' </dev/null &"));
    ss_backend_argv_free(&c);
    /* a copy is no watched step: no --kill-on-bad-exit */
    c = ss_backend_argv(ss_backend_find("srun"), &w, SS_BACKEND_PIPE, argv);
    assert_int_equal(s_len(c), 12);
    assert_string_equal(c[6], "--quiet");
    assert_string_equal(c[11], "'shadow-trainer'");
    ss_backend_argv_free(&c);
}

/* Run the wrapper of argv (ssh's last word) with sh, as the host would, its
 * standard input a pipe whose write end is returned in *in_w; *pid set. */
static void s_start_wrapped(char *const *argv, const char *cwd, pid_t *pid, int *in_w)
{
    struct ss_backend_where w = {.target = "h", .cwd = cwd};
    char **c = ss_backend_argv(ss_backend_find("ssh"), &w, SS_BACKEND_RUN, argv);
    int p[2];
    assert_int_equal(pipe(p), 0);
    *pid = fork();
    assert_true(*pid >= 0);
    if (*pid == 0) {
        setpgid(0, 0);  /* its own group: s_wait() can stop all of it */
        dup2(p[0], 0);
        close(p[0]);
        close(p[1]);
        execl("/bin/sh", "sh", "-c", c[s_len(c) - 1], (char *)NULL);
        _exit(127);
    }
    close(p[0]);
    *in_w = p[1];
    ss_backend_argv_free(&c);
}

/* The exit status of pid within 10 s (-1: still running: its whole
 * process group killed, the program the wrapper started too). */
static int s_wait(pid_t pid)
{
    int st;
    for (int i = 0; i < 1000; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid) {
            kill(-pid, SIGKILL);  /* a program it left behind */
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(10000);
    }
    kill(-pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static void test_wrapper_runs_the_words(void **state)
{
    (void)state;
    char dir[256], out[512], cmd[640], got[256] = {0};
    pid_t pid;
    int in_w;
    FILE *fp;
    assert_int_equal(t_tmpdir(dir, sizeof dir, "backend"), 0);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(cmd, sizeof cmd, "printf '%%s|' \"$(pwd)\" \"$@\" >'%s'; exit 7", out);
    char *argv[] = {"sh", "-c", cmd, "x", "a b", "it's", "$HOME", "", NULL};
    s_start_wrapped(argv, dir, &pid, &in_w);
    assert_int_equal(s_wait(pid), 7);   /* its status comes back */
    close(in_w);
    fp = fopen(out, "r");
    assert_non_null(fp);
    assert_non_null(fgets(got, sizeof got, fp));
    fclose(fp);
    snprintf(cmd, sizeof cmd, "%s|a b|it's|$HOME||", dir);  /* in dir, the words as given */
    assert_string_equal(got, cmd);
    t_rmtree(dir);
}

/* Wait (10 s at most) until path exists. */
static void s_wait_file(const char *path)
{
    for (int i = 0; i < 1000 && access(path, F_OK) != 0; i++)
        usleep(10000);
    assert_int_equal(access(path, F_OK), 0);
}

static void test_wrapper_term_and_eof(void **state)
{
    (void)state;
    char dir[256], ready[512], cmd[768];
    pid_t pid;
    int in_w, st;
    assert_int_equal(t_tmpdir(dir, sizeof dir, "backend"), 0);
    snprintf(ready, sizeof ready, "%s/ready", dir);
    /* ready once its trap is in (a SIGTERM before that would kill it: 143) */
    snprintf(cmd, sizeof cmd, "trap 'exit 42' TERM; : >'%s'; while :; do sleep 0.02; done", ready);
    char *argv[] = {"sh", "-c", cmd, NULL};
    /* a "TERM" line: SIGTERM to the program, whose status comes back */
    s_start_wrapped(argv, "/", &pid, &in_w);
    s_wait_file(ready);
    assert_int_equal(waitpid(pid, &st, WNOHANG), 0);   /* runs while its input is open */
    assert_int_equal(write(in_w, "TERM\n", 5), 5);
    assert_int_equal(s_wait(pid), 42);
    close(in_w);
    /* the end of its input (the launcher gone): stopped the same way */
    unlink(ready);
    s_start_wrapped(argv, "/", &pid, &in_w);
    s_wait_file(ready);
    close(in_w);
    assert_int_equal(s_wait(pid), 42);
    t_rmtree(dir);
}

static void test_slurm_cpus(void **state)
{
    (void)state;
    int c[8];
    size_t n;
    char err[256];
    assert_int_equal(ss_backend_slurm_cpus("8(x2),4", c, 8, &n, err, sizeof err), 0);
    assert_int_equal(n, 3);
    assert_int_equal(c[0], 8);
    assert_int_equal(c[1], 8);
    assert_int_equal(c[2], 4);
    assert_int_equal(ss_backend_slurm_cpus("1", c, 8, &n, err, sizeof err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(c[0], 1);
    assert_int_equal(ss_backend_slurm_cpus("2,36(x3)", c, 8, &n, err, sizeof err), 0);
    assert_int_equal(n, 4);
    assert_int_equal(c[3], 36);
    assert_int_equal(ss_backend_slurm_cpus("", c, 8, &n, err, sizeof err), 0);
    assert_int_equal(n, 0);
    const char *bad[] = {"8(x2", "a", "0", "4,,4", "8(x0)", "8(y2)", "4 4", "2(x9)"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(ss_backend_slurm_cpus(bad[i], c, 8, &n, err, sizeof err), -1);
        assert_non_null(strstr(err, "SLURM_JOB_CPUS_PER_NODE"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_local_passes_argv),
        cmocka_unit_test(test_ssh_words),
        cmocka_unit_test(test_srun_words),
        cmocka_unit_test(test_wrapper_runs_the_words),
        cmocka_unit_test(test_wrapper_term_and_eof),
        cmocka_unit_test(test_slurm_cpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
