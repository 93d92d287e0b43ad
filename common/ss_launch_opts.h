/* ss_launch_opts.h - the launcher's command line (scripts/shadow-launch):
 * its --help text, and every rule about its arguments.
 *
 * - --resume RUN_DIR comes first and alone (besides --quiet, --no-plots and
 *   --bin): the arguments are then RUN_DIR/launch.args' (its first line the
 *   working directory they are relative to, then one argument a line),
 *   followed by this command line's;
 * - one job file, a regular file; --set takes KEY=VALUE in one word; an
 *   option's value is the next word; --ssh-opts is word-split;
 * - --predict RUN_DIR needs --out FILE (made absolute: the trainer writes
 *   it; "-" for standard output), --out and --skip-bad go with --predict,
 *   --eval-only and --predict need RUN_DIR/model/dense.bin;
 * - the --exec mode (ssh with --hosts, else local), which needs --hosts
 *   unless it is local; the hosts file exists;
 * - the binaries: ss_path_find_bin()'s folder for shadow-ps (--bin DIR,
 *   ../bin next to the script, its own folder, PATH); shadow-ps,
 *   shadow-ctl, shadow-trainer and shadow-super must be there; the remote
 *   ones (--remote-bin, default the same absolute path).
 *
 * Folders are named as "cd DIR && pwd" names them and paths tested as
 * "test" does, from the logical working directory (common/ss_path.h): a
 * ".." after a component that is not a folder fails, as cd fails (before
 * ss_path.h it was taken out as text: "nofile/../job.yaml" ran job.yaml),
 * and a path with ".." after a symbolic link is tested as the kernel
 * resolves it (the shell script's "[ -f ]"). Messages are
 * the launcher's words without the "shadow-launch: " prefix. Not
 * thread-safe (reads the environment and the working directory). */
#ifndef SS_LAUNCH_OPTS_H
#define SS_LAUNCH_OPTS_H

#include <stddef.h>
#include <stdio.h>

typedef struct ss_launch_opts ss_launch_opts_t;

/* What ss_launch_opts_parse() found. */
enum ss_launch_parsed {
    SS_LAUNCH_RUN = 0,      /* a job to run: the object is filled */
    SS_LAUNCH_HELP = 1,     /* -h or --help: print ss_launch_usage() to stdout, exit 0 */
    SS_LAUNCH_VERSION = 2   /* --version: print the version line, exit 0 */
};

/* Parse the launcher's arguments argv[0..argc) (without the program name).
 * script is the path scripts/shadow-launch was run by ($0; its folder's
 * ../bin holds the binaries in a checkout; NULL: none). Returns a
 * ss_launch_parsed value (SS_LAUNCH_RUN with *out_p set to a new object
 * that the caller frees with ss_launch_opts_destroy()), or SS_E_INVAL on a
 * usage error, the message in err (empty: no job file given, print the
 * usage to stderr); the exit status is then 2. */
int ss_launch_opts_parse(int argc, char *const *argv, const char *script,
                         ss_launch_opts_t **out_p, char *err, size_t err_len);

/* Free self, set *self_p to NULL; NULL is fine. */
void ss_launch_opts_destroy(ss_launch_opts_t **self_p);

/* The value of key, "" when it has none; borrowed for the object's life.
 * Keys: cwd (the working directory, logical, absolute), job (absolute),
 * resume (RUN_DIR, absolute), eval_only (as given; --predict's RUN_DIR
 * too), predict, skip_bad, quiet, no_plots, fixed_ports ("1" or "0"),
 * predict_out (absolute, or "-"), hosts_file, exec, base_port, remote_bin,
 * remote_run_dir (as given), bin (absolute), rbin (the binaries where the
 * processes run), script (as given), here (its folder, absolute; "" without
 * a script). NULL for a key not in this list. */
const char *ss_launch_opts_get(const ss_launch_opts_t *self, const char *key);

/* The --set values (KEY=VALUE) in order, and their count in *n. */
char *const *ss_launch_opts_sets(const ss_launch_opts_t *self, size_t *n);

/* The --ssh-opts words in order, and their count in *n. */
char *const *ss_launch_opts_ssh_opts(const ss_launch_opts_t *self, size_t *n);

/* Write every value as NUL-terminated KEY VALUE words to fd: each key of
 * ss_launch_opts_get(), then "set W" per --set value and "ssh_opt O" per
 * ssh option. Returns 0, or SS_E_IO. */
int ss_launch_opts_write(const ss_launch_opts_t *self, int fd);

/* Print the launcher's --help text to out. */
void ss_launch_usage(FILE *out);

#endif
