/* ss_launch_proc.h - how the launchers (common/ss_launch.h, shadow-ctl
 * slurm) run the programs they need: fork and exec with the standard
 * descriptors they say, wait like a shell (the exit status, 128 + N for
 * signal N), or read what a program prints.
 *
 * Every descriptor the launcher opens is close-on-exec unless it names it
 * in keep; the child gets the signal mask and SIGINT/SIGTERM/SIGPIPE
 * dispositions a program expects (the launcher blocks the two signals
 * while it runs a job). Not thread-safe (the launcher has one thread). */
#ifndef SS_LAUNCH_PROC_H
#define SS_LAUNCH_PROC_H

#include <stddef.h>
#include <sys/types.h>

/* Where a child's standard descriptors go, what else it keeps, and whose
 * child it is. */
struct ss_launch_io {
    const char *in_path;  /* its standard input from this path (NULL: in_fd) */
    int in_fd;            /* > 0: its standard input (0, the zero default, or -1: ours) */
    int out_fd;           /* >= 0: its standard output (else ours) */
    int err_fd;           /* >= 0: its standard error (else ours) */
    const int *keep;      /* descriptors it inherits although close-on-exec */
    size_t n_keep;
    const char *who;      /* the caller's name, first in the child's messages
                           * ("WHO: cannot run X"); NULL: the program's name */
};

/* The launcher's name, first in its messages and its children's. */
#define SS_LAUNCH_WHO "shadow-launch"

/* The launcher's own messages: "shadow-launch: " then fmt's text, on
 * standard error (ss_launch_err) or standard output (ss_launch_say); the
 * caller writes the newline. */
void ss_launch_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ss_launch_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Start argv (NULL-terminated; argv[0] found on PATH when it has no '/')
 * with io (NULL: all ours). Returns its pid, or -1 with errno set when fork
 * fails; a child that cannot set its descriptors or exec ends with status
 * 127, after "WHO: cannot run X: why" on its standard error, or "WHO:
 * cannot open IN_PATH: why" on ours. */
pid_t ss_launch_spawn(char *const *argv, const struct ss_launch_io *io);

/* Wait for pid and return its exit status as a shell gives it (waitpid
 * retried on EINTR); 1 when it cannot be waited for. */
int ss_launch_wait(pid_t pid);

/* Run argv and wait: ss_launch_spawn() then ss_launch_wait(). Returns the
 * exit status, 127 when it could not start. */
int ss_launch_run(char *const *argv, const struct ss_launch_io *io);

/* Run argv with its standard output (and, with merge_err, its standard
 * error) into a new NUL-terminated buffer *out (caller frees), its other
 * descriptors as io says (io->out_fd is ignored). Returns the exit status. */
int ss_launch_capture(char *const *argv, const struct ss_launch_io *io, int merge_err,
                      char **out);

/* A growable NULL-terminated argv of owned strings (the launcher builds
 * its command lines in these). */
struct ss_launch_argv {
    char **v;       /* v[0..n), then NULL */
    size_t n, cap;
};

/* Append a copy of w (ss_launch_argv_add) or of a printf result
 * (ss_launch_argv_addf). */
void ss_launch_argv_add(struct ss_launch_argv *a, const char *w);
void ss_launch_argv_addf(struct ss_launch_argv *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Free every word and the array; a is empty after. */
void ss_launch_argv_free(struct ss_launch_argv *a);

#endif
