/* test_ss_launch_proc.c - unit tests of how the launcher runs programs
 * (ss_launch_proc): a capture of the output (with stderr merged or not),
 * exit statuses as a shell gives them (a code, 128 + N for signal N, 127
 * for a program that cannot run), standard input from a path or a
 * descriptor, a close-on-exec descriptor kept for a child only when asked,
 * the caller's name in a child's messages, the signal mask a child starts
 * with, and argv building. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ss_launch_proc.h"

static void test_capture_and_status(void **state)
{
    (void)state;
    char *out = NULL;
    char *const echo[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    assert_int_equal(ss_launch_capture(echo, NULL, 1, &out), 3);
    assert_string_equal(out, "out\nerr\n");
    free(out);
    int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    struct ss_launch_io io = {.out_fd = -1, .err_fd = null_fd};
    assert_int_equal(ss_launch_capture(echo, &io, 0, &out), 3);
    assert_string_equal(out, "out\n");
    free(out);
    char *const killed[] = {"sh", "-c", "kill -9 $$", NULL};
    assert_int_equal(ss_launch_run(killed, NULL), 128 + 9);
    char *const missing[] = {"/nonexistent/program", NULL};
    assert_int_equal(ss_launch_run(missing, &io), 127);
    close(null_fd);
}

static void test_stdin_and_keep(void **state)
{
    (void)state;
    char *out = NULL;
    char *const cat[] = {"cat", NULL};
    struct ss_launch_io io = {.in_path = "/dev/null", .out_fd = -1, .err_fd = -1};
    assert_int_equal(ss_launch_capture(cat, &io, 0, &out), 0);
    assert_string_equal(out, "");
    free(out);
    /* a close-on-exec descriptor: closed in the child unless kept */
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(fd > 2);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "[ -e /proc/self/fd/%d ] && echo open || echo closed", fd);
    char *const sh[] = {"sh", "-c", cmd, NULL};
    assert_int_equal(ss_launch_capture(sh, NULL, 0, &out), 0);
    assert_string_equal(out, "closed\n");
    free(out);
    io.keep = &fd;
    io.n_keep = 1;
    assert_int_equal(ss_launch_capture(sh, &io, 0, &out), 0);
    assert_string_equal(out, "open\n");
    free(out);
    close(fd);
}

static void test_in_fd_and_who(void **state)
{
    (void)state;
    char *out = NULL;
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(write(p[1], "fed\n", 4), 4);
    close(p[1]);
    /* standard input from a descriptor (a close-on-exec one: dup'ed all the same) */
    char *const cat[] = {"cat", NULL};
    struct ss_launch_io io = {.in_fd = p[0], .out_fd = -1, .err_fd = -1};
    assert_int_equal(ss_launch_capture(cat, &io, 0, &out), 0);
    assert_string_equal(out, "fed\n");
    free(out);
    close(p[0]);
    /* the caller names itself in what the child says; else the program's name */
    char *const missing[] = {"/nonexistent/program", NULL};
    io = (struct ss_launch_io){.out_fd = -1, .err_fd = -1, .who = "shadow-slurm"};
    assert_int_equal(ss_launch_capture(missing, &io, 1, &out), 127);
    assert_string_equal(out, "shadow-slurm: cannot run /nonexistent/program: No such file or "
                        "directory\n");
    free(out);
    io.who = NULL;
    assert_int_equal(ss_launch_capture(missing, &io, 1, &out), 127);
    assert_string_equal(out, "test_ss_launch_proc: cannot run /nonexistent/program: No such "
                        "file or directory\n");
    free(out);
    io = (struct ss_launch_io){.in_path = "/nonexistent/in", .in_fd = -1, .out_fd = -1,
                               .err_fd = -1, .who = "shadow-launch"};
    /* (that message goes to our standard error: the child's is not set yet) */
    assert_int_equal(ss_launch_capture(cat, &io, 1, &out), 127);
    assert_string_equal(out, "");
    free(out);
}

static void test_signals_reset(void **state)
{
    (void)state;
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, &old);
    /* the launcher blocks SIGTERM; its child must not */
    char *const sh[] = {"sh", "-c", "kill -TERM $$; sleep 5", NULL};
    assert_int_equal(ss_launch_run(sh, NULL), 128 + SIGTERM);
    sigprocmask(SIG_SETMASK, &old, NULL);
}

static void test_argv(void **state)
{
    (void)state;
    struct ss_launch_argv a = {0};
    for (int i = 0; i < 40; i++)
        ss_launch_argv_addf(&a, "w%d", i);
    ss_launch_argv_add(&a, "last");
    assert_int_equal(a.n, 41);
    assert_string_equal(a.v[39], "w39");
    assert_string_equal(a.v[40], "last");
    assert_null(a.v[41]);
    ss_launch_argv_free(&a);
    assert_int_equal(a.n, 0);
    assert_null(a.v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_and_status),
        cmocka_unit_test(test_stdin_and_keep),
        cmocka_unit_test(test_in_fd_and_who),
        cmocka_unit_test(test_signals_reset),
        cmocka_unit_test(test_argv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
