/* ss_slurm.h - the rules of shadow-slurm (shadow-ctl slurm, tools/ctl_slurm.c)
 * as pure functions: its command line, the nodes' roles (--ps-nodes), the
 * hosts file it writes from the allocation, the sbatch script of --sbatch,
 * the shadow-launch command it runs, and the bash quoting that script and
 * the --dry-run output use (what bash's printf %q writes).
 *
 * Nothing here runs a program or reads a file: tools/ctl_slurm.c asks
 * scontrol and the file system, then calls these. Thread-safe; every string
 * argument is borrowed; results the caller owns are said so. */
#ifndef SS_SLURM_H
#define SS_SLURM_H

#include <stddef.h>

/* Default of --signal-before, seconds. */
#define SS_SLURM_SIGNAL_BEFORE 120

/* What shadow-slurm's command line asks. Strings point into the argv given
 * to ss_slurm_parse(); the arrays are heap (free with ss_slurm_args_fini()). */
struct ss_slurm_args {
    int help;                    /* -h, --help: print the usage, exit 0 */
    int version;                 /* --version */
    int usage_error;             /* no job file: the usage on stderr, exit 2 */
    int sbatch;                  /* --sbatch: write the batch script, submit it */
    int signal_before;           /* --signal-before S (default 120; 0: none) */
    int dry_run;                 /* --dry-run */
    int note_stderr;             /* --out -: the note line goes to stderr */
    const char *job;             /* JOB.yaml; "-" with --resume */
    const char *resume;          /* --resume RUN_DIR as given, or NULL */
    const char *resume_err;      /* a later --resume rule broken, said after the
                                  * run directory is checked, or NULL */
    const char *bin;             /* --bin DIR, or NULL */
    const char *ps_nodes;        /* --ps-nodes K as given, or NULL (with --resume:
                                  * set by the caller from the hosts file) */
    const char **sets;           /* --set values, KEY=VALUE */
    size_t n_sets;
    const char **pass;           /* what goes to shadow-launch as is */
    size_t n_pass;
    const char **again;          /* --sbatch: the arguments the script runs again
                                  * (less --sbatch, --signal-before S, --dry-run
                                  * and what follows --) */
    size_t n_again;
    const char **sbatch_args;    /* --sbatch: what follows -- (for sbatch) */
    size_t n_sbatch_args;
};

/* Read shadow-slurm's arguments (argv[0..argc-1], without the program's
 * name) into *a, by the rules of its usage: --sbatch and --signal-before S
 * first; with --sbatch what follows -- goes to sbatch; --resume RUN_DIR
 * takes only --quiet and --bin DIR (and --dry-run with --sbatch); --hosts,
 * --exec and --ssh-opts are refused; any other option goes to shadow-launch.
 * Parsing stops at -h/--help and --version (a->help, a->version). Returns 0,
 * or -1 with the message (without "shadow-slurm: ") in err; a->usage_error
 * with 0 when no job file is named. a must be zeroed; free with
 * ss_slurm_args_fini() either way. */
int ss_slurm_parse(struct ss_slurm_args *a, int argc, char **argv, char *err, size_t err_len);

/* Free the arrays of *a (not the strings: argv's). Accepts a zeroed *a. */
void ss_slurm_args_fini(struct ss_slurm_args *a);

/* Check --ps-nodes text against an allocation of n_nodes nodes: whole
 * number from 1 to n_nodes - 1. Returns 0 with *k, or -1 with the message
 * ("--ps-nodes X: want 1..N-1 (...)") in err. */
int ss_slurm_ps_nodes(const char *text, size_t n_nodes, size_t *k, char *err, size_t err_len);

/* The roles of node i of n_nodes: "all" without --ps-nodes (ps_nodes 0),
 * else "ps" for the last ps_nodes nodes and "trainer" for the others.
 * Static string. */
const char *ss_slurm_roles(size_t i, size_t n_nodes, size_t ps_nodes);

/* The --ps-nodes a hosts file this writes records ("# ps-nodes K" lines,
 * K as written; several joined by newlines, as sed prints them), or ""
 * when it has none. Caller frees the result with ss_free(). */
char *ss_slurm_hosts_ps_nodes(const char *hosts_text);

/* The NodeAddr= value of a line of `scontrol -o show node NAME`, or "" when
 * it has none. Caller frees the result with ss_free(). */
char *ss_slurm_node_addr(const char *scontrol_line);

/* The hosts file RUN_DIR/slurm-hosts for Slurm job job_id: a comment line,
 * "# ps-nodes TEXT" when ps_nodes_text is not NULL, then "NODE ROLES
 * addr=ADDR" per node (ps_nodes: the count checked by ss_slurm_ps_nodes(),
 * 0 without). Caller frees the result with ss_free(). */
char *ss_slurm_hosts_text(const char *job_id, const char *ps_nodes_text, size_t ps_nodes,
                          const char *const *nodes, const char *const *addrs, size_t n_nodes);

/* What --sbatch writes in RUN_DIR/shadow-slurm.sbatch: #SBATCH lines (job
 * name shadowsync-NAME, output RUN_DIR/slurm-%j.out, the early SIGTERM to
 * the batch shell signal_before seconds before the time limit unless 0),
 * then "cd CWD" and "exec SELF ARGS...", each word quoted by
 * ss_slurm_quote() (words equal to --dry-run left out). Caller frees the
 * result with ss_free(). The job name and output are written in double
 * quotes when they hold a blank, a quote, a backslash or '#' (sbatch's
 * reader of #SBATCH lines takes those as syntax), else as they are.
 * Returns NULL, the message in err, when name or run_dir holds a newline
 * or another control character (below 0x20, or 0x7f): the #SBATCH line
 * would end there, and the rest be read as script. */
char *ss_slurm_sbatch_text(const char *name, const char *run_dir, int signal_before,
                           const char *cwd, const char *self, const char *const *args,
                           size_t n_args, char *err, size_t err_len);

/* The shadow-launch command: "LAUNCHER JOB [--set KV]... --bin BIN --hosts
 * HOSTS --exec srun PASS...", or with resume_dir "LAUNCHER --resume RUN_DIR
 * PASS...". Returns a NULL-terminated argv whose array the caller frees with
 * ss_free() (the strings are borrowed from the arguments). */
char **ss_slurm_launch_argv(const char *launcher, const struct ss_slurm_args *a,
                            const char *bin, const char *hosts_file, const char *resume_dir);

/* Quote word for bash as its printf %q does: as is when nothing in it is
 * special; with backslashes before the special characters (a space, quotes,
 * '$', '*', a leading '#' or '~', ...); as $'...' with escapes (\n, \t,
 * \001) when it holds a control character; '' when empty. Bytes from 0x80
 * on pass as they are. Caller frees the result with ss_free(). */
char *ss_slurm_quote(const char *word);

#endif
