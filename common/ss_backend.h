/* ss_backend.h - how a launcher reaches a host: one row per --exec mode
 * (local, ssh, srun), the one place that knows each mode's command lines.
 *
 * A row says how to start a program on a host (SS_BACKEND_RUN: in the
 * foreground, its output on ours, its exit status passed back), how to copy
 * to or from a host (SS_BACKEND_PIPE: the program there reads our standard
 * input and writes our standard output: a tar stream of a run directory),
 * and how a process started so is stopped and how its end reads:
 *
 * - local: the program itself; stopped by a signal to its pid;
 * - ssh: "ssh OPTS -T -o BatchMode=yes ... TARGET SCRIPT"; srun: one job
 *   step on the node, "srun --overlap ... --nodelist=NODE -- bash -c
 *   SCRIPT" (the job's CPUs there, --overlap: shared with the other steps).
 *   SCRIPT, under RUN, is the remote TERM wrapper: it runs the program with
 *   its standard input at /dev/null, passes a line "TERM" read from its own
 *   standard input on as SIGTERM (ssh forwards no signal; srun's would reach
 *   the wrapper), and stops the program (SIGTERM, then SIGKILL 2 s later)
 *   when that input ends, so that a launcher that ends, however it ends,
 *   leaves nothing running there. ssh's exit status 255 means the host was
 *   lost; a SIGTERM through srun takes up to 3 s to arrive.
 *
 * The SLURM_JOB_CPUS_PER_NODE format ("8(x2),4") is read here too.
 *
 * Pure functions over caller-owned strings; thread-safe. */
#ifndef SS_BACKEND_H
#define SS_BACKEND_H

#include <stddef.h>

/* What a command line does on the host. */
enum ss_backend_mode {
    SS_BACKEND_RUN,   /* run the program, watched (the TERM wrapper) */
    SS_BACKEND_PIPE   /* run it reading our standard input (a copy) */
};

/* Where one command runs. Strings borrowed. */
struct ss_backend_where {
    const char *target;            /* ssh: [user@]host; srun: the node's name */
    int cpus;                      /* srun: the job's CPUs on that node (>= 1) */
    const char *step_name;         /* srun: --job-name of this launch's steps */
    const char *cwd;               /* RUN: the folder the program starts in there
                                    * (else /, as when it does not exist there) */
    const char *const *ssh_opts;   /* ssh: the user's options, before (so over) ours */
    size_t n_ssh_opts;
};

/* One --exec mode. */
struct ss_backend {
    const char *name;      /* "local", "ssh", "srun" */
    int remote;            /* 1: a process there stops when the standard input of its
                            * command line ends, and takes SIGTERM as a "TERM" line on it;
                            * 0: signals go to the pid */
    int lost_rc;           /* the exit status that means the host was lost, or -1 */
    int stop_wait_ms;      /* how long a process has after SIGTERM (to reach it, and
                            * for the process to log and remove its temporary files)
                            * before SIGKILL; a loaded machine needs the margin */
    const char *lost_hint; /* what to check when a command ended with lost_rc: a
                            * printf format taking the target (%s), or NULL */
};

/* The row of name, or NULL for an unknown mode. */
const struct ss_backend *ss_backend_find(const char *name);

/* The command line that does mode with argv (NULL-terminated) at w: a new
 * NULL-terminated array of new strings, freed with ss_backend_argv_free().
 * Never fails (allocation failure aborts). */
char **ss_backend_argv(const struct ss_backend *b, const struct ss_backend_where *w,
                       enum ss_backend_mode mode, char *const *argv);

/* Free an array of ss_backend_argv(); sets *argv_p to NULL, accepts NULL. */
void ss_backend_argv_free(char ***argv_p);

/* A process's exit status as a shell's wait gives it, from waitpid()'s
 * wstatus: its exit code, 128 + N when signal N ended it, otherwise 1. The
 * one rule every launcher module reports statuses by (lost_rc is one). */
int ss_backend_exit_status(int wstatus);

/* Read SLURM_JOB_CPUS_PER_NODE (cpn: "N" or "N(xM)" entries, comma-separated,
 * in the order of the job's nodes) into cpus[0..*n) (at most max). Returns 0,
 * or -1 with why in err (an entry that is neither, a count of 0). */
int ss_backend_slurm_cpus(const char *cpn, int *cpus, size_t max, size_t *n, char *err,
                          size_t err_len);

#endif
