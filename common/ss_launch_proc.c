/* ss_launch_proc.c - fork, exec and wait for the launcher's programs (see
 * ss_launch_proc.h). */
#include "ss_launch_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ss_assert.h"
#include "ss_backend.h"
#include "ss_mem.h"

/* In the child: the descriptors io says, a clean signal state; then exec. */
static void s_child(char *const *argv, const struct ss_launch_io *io)
{
    const char *who = io && io->who ? io->who : program_invocation_short_name;
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    if (io) {
        if (io->in_path) {
            int fd = open(io->in_path, O_RDONLY);
            if (fd < 0 || dup2(fd, 0) < 0) {
                fprintf(stderr, "%s: cannot open %s: %s\n", who, io->in_path, strerror(errno));
                _exit(127);
            }
            if (fd != 0)
                close(fd);
        } else if (io->in_fd > 0 && dup2(io->in_fd, 0) < 0) {
            _exit(127);
        }
        if (io->out_fd >= 0 && io->out_fd != 1 && dup2(io->out_fd, 1) < 0)
            _exit(127);
        if (io->err_fd >= 0 && io->err_fd != 2 && dup2(io->err_fd, 2) < 0)
            _exit(127);
        for (size_t i = 0; i < io->n_keep; i++) {
            int fl = fcntl(io->keep[i], F_GETFD);
            if (fl >= 0)
                fcntl(io->keep[i], F_SETFD, fl & ~FD_CLOEXEC);
        }
    }
    execvp(argv[0], argv);
    fprintf(stderr, "%s: cannot run %s: %s\n", who, argv[0], strerror(errno));
    _exit(127);
}

static void s_message(FILE *to, const char *fmt, va_list ap)
{
    fputs(SS_LAUNCH_WHO ": ", to);
    vfprintf(to, fmt, ap);
}

void ss_launch_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    s_message(stderr, fmt, ap);
    va_end(ap);
}

void ss_launch_say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    s_message(stdout, fmt, ap);
    va_end(ap);
}

pid_t ss_launch_spawn(char *const *argv, const struct ss_launch_io *io)
{
    ss_assert(argv && argv[0]);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0)
        s_child(argv, io);
    return pid;
}

int ss_launch_wait(pid_t pid)
{
    int st;
    for (;;) {
        if (waitpid(pid, &st, 0) == pid)
            return ss_backend_exit_status(st);
        if (errno != EINTR)
            return 1;
    }
}

int ss_launch_run(char *const *argv, const struct ss_launch_io *io)
{
    pid_t pid = ss_launch_spawn(argv, io);
    return pid < 0 ? 127 : ss_launch_wait(pid);
}

int ss_launch_capture(char *const *argv, const struct ss_launch_io *io, int merge_err,
                      char **out)
{
    struct ss_launch_io c = io ? *io : (struct ss_launch_io){.out_fd = -1, .err_fd = -1};
    size_t len = 0, cap = 4096;
    int p[2];
    *out = ss_calloc(1, cap);
    if (pipe2(p, O_CLOEXEC) != 0)
        return 127;
    c.out_fd = p[1];
    if (merge_err)
        c.err_fd = p[1];
    pid_t pid = ss_launch_spawn(argv, &c);
    close(p[1]);
    for (;;) {
        if (len + 1 >= cap)
            *out = ss_realloc(*out, cap *= 2);
        ssize_t n = read(p[0], *out + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    (*out)[len] = '\0';
    close(p[0]);
    return pid < 0 ? 127 : ss_launch_wait(pid);
}

void ss_launch_argv_add(struct ss_launch_argv *a, const char *w)
{
    if (a->n + 2 > a->cap) {
        a->cap = a->cap ? 2 * a->cap : 16;
        a->v = ss_realloc(a->v, a->cap * sizeof *a->v);
    }
    a->v[a->n++] = ss_strdup(w);
    a->v[a->n] = NULL;
}

void ss_launch_argv_addf(struct ss_launch_argv *a, const char *fmt, ...)
{
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ss_launch_argv_add(a, buf);
}

void ss_launch_argv_free(struct ss_launch_argv *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->v[i]);
    free(a->v);
    memset(a, 0, sizeof *a);
}
