/* ss_launch_opts.c - the launcher's command line: its --help text, the
 * arguments of --resume (RUN_DIR/launch.args), and the checks on each
 * option (common/ss_launch_opts.h lists the rules).
 *
 * DESIGN: the values are kept as the words a shell script reads back
 * (ss_launch_opts_write()), so that scripts/shadow-launch restates none of
 * these rules; folders are named and paths tested by common/ss_path.h's
 * rules, from the logical working directory ($PWD). */
#include "ss_launch_opts.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ss_assert.h"
#include "ss_backend.h"
#include "ss_err.h"
#include "ss_mem.h"
#include "ss_path.h"

#define S_PATH 4096

/* The keys of ss_launch_opts_get(), in ss_launch_opts_write()'s order. */
enum s_key {
    K_CWD, K_JOB, K_RESUME, K_EVAL_ONLY, K_PREDICT, K_SKIP_BAD, K_QUIET, K_NO_PLOTS,
    K_FIXED_PORTS, K_PREDICT_OUT, K_HOSTS_FILE, K_EXEC, K_BASE_PORT, K_REMOTE_BIN,
    K_REMOTE_RUN_DIR, K_BIN, K_RBIN, K_SCRIPT, K_HERE, S_N_KEYS
};
static const char *const s_key_names[S_N_KEYS] = {
    "cwd", "job", "resume", "eval_only", "predict", "skip_bad", "quiet", "no_plots",
    "fixed_ports", "predict_out", "hosts_file", "exec", "base_port", "remote_bin",
    "remote_run_dir", "bin", "rbin", "script", "here",
};

struct ss_launch_opts {
    char *val[S_N_KEYS];   /* each key's value (owned), NULL: "" */
    char **sets;           /* --set values, owned */
    size_t n_sets;
    char **ssh_opts;       /* --ssh-opts words, owned */
    size_t n_ssh_opts;
};

/* A list of owned words (the arguments after --resume's). */
struct s_words {
    char **w;
    size_t n, cap;
};

static const char s_usage_text[] =
    "usage: shadow-launch JOB.yaml [--set KEY=VALUE]... [options]\n"
    "       shadow-launch --resume RUN_DIR [--quiet] [--no-plots] [--bin DIR]\n"
    "\n"
    "Run a ShadowSync job: its PSs, its trainers, then a summary. Without --hosts\n"
    "everything runs on this machine on free ports of 127.0.0.1; with --hosts the\n"
    "processes are spread over the listed hosts and started over ssh.\n"
    "\n"
    "  --set KEY=VALUE     override a job-file key for every process (repeatable)\n"
    "  --bin DIR           where the shadow-* binaries are (default: ../bin next to\n"
    "                      this script, its own folder, then PATH)\n"
    "  --eval-only RUN_DIR score data.eval with the model saved in RUN_DIR/model: the\n"
    "                      PSs restore its embeddings, trainer 0 its dense model\n"
    "  --predict RUN_DIR --out FILE\n"
    "                      batch prediction: --eval-only that also writes one\n"
    "                      predicted click probability per line of data.eval to\n"
    "                      FILE (--set data.eval=INPUT), in input order, \"%.9g\"\n"
    "                      (reads back as the same float); a bad line gets \"nan\"\n"
    "                      (line i of FILE belongs to data line i, headers apart),\n"
    "                      or no line with --skip-bad. FILE appears complete or not\n"
    "                      at all. Input without labels: --set data.labels=false\n"
    "                      (criteo_tsv with 39 columns, csv data.columns without a\n"
    "                      label, libsvm/libffm lines that start with an item).\n"
    "                      Prints rows, predictions/s and, with labels, the\n"
    "                      eval's metrics. --set data.eval=- scores this script's\n"
    "                      standard input (a pipe), streaming, in order (--exec\n"
    "                      local). No PS at all: shadow-ctl export and\n"
    "                      shadow-score (docs/model-file.md)\n"
    "  --out -             stream the predictions to standard output instead, as\n"
    "                      they are scored (the same bytes as FILE's), e.g.\n"
    "                      \"| gzip > p.gz\"; everything else this script prints\n"
    "                      goes to standard error. A failure leaves a prefix of\n"
    "                      the output: check the exit status (set -o pipefail). A\n"
    "                      reader that closes the pipe early (| head) stops the\n"
    "                      job at once: exit status 141, nothing left running\n"
    "  --resume RUN_DIR    go on with the job stopped in RUN_DIR (by SIGTERM, or a\n"
    "                      crash after a periodic job checkpoint): the same\n"
    "                      job file, --set list and options (RUN_DIR/launch.args),\n"
    "                      the PSs and every trainer restored from RUN_DIR/jobckpt\n"
    "                      (with --hosts: each host's part copied there first)\n"
    "  --quiet             do not echo trainer 0's progress\n"
    "  --no-plots          draw no plots at the end (shadow-plot and gnuplot cost\n"
    "                      about 0.4 s of CPU; benchmarks and tests pass this)\n"
    "  -h, --help          this text\n"
    "  --version           print the version and git revision\n"
    "\n"
    "Where processes run (docs/cluster.md):\n"
    "  --hosts FILE        one host a line: HOST [ROLE...] [addr=IP]; ROLE is\n"
    "                      embedding, sync, trainer, ps (embedding and sync) or all\n"
    "                      (the default). Each role's shards (ranks for trainers)\n"
    "                      go round-robin over the hosts that take the role, in\n"
    "                      file order. addr= is the address the endpoints use\n"
    "                      (default: HOST itself, resolved here when not an IP).\n"
    "  --exec MODE         how commands reach a host: local (default without\n"
    "                      --hosts), ssh (default with --hosts) or srun\n"
    "  --fixed-ports       use the job file's cluster endpoints as written (with\n"
    "                      --hosts each process runs on the host its endpoint names)\n"
    "  --base-port P       endpoints on ports P, P+1, ... of each host (firewalls;\n"
    "                      a PS takes ps.threads ports in a row)\n"
    "                      instead of free ports chosen on each host\n"
    "  --remote-bin DIR    the shadow-* binaries on the hosts (default: --bin's\n"
    "                      absolute path: the same install path everywhere)\n"
    "  --remote-run-dir D  run directory on the hosts (default: RUN_DIR's absolute\n"
    "                      path; %h in it stands for the host's name); gathered into\n"
    "                      RUN_DIR at the end\n"
    "  --ssh-opts \"OPTS\"   extra ssh options, word-split (e.g. \"-F my_ssh_config\");\n"
    "                      they come before (so override) the launcher's own:\n"
    "                      -o BatchMode=yes -o ServerAliveInterval=5\n"
    "                      -o ServerAliveCountMax=3 -o ConnectTimeout=10\n"
    "\n"
    "The endpoints a job used are in RUN_DIR/cluster.args: talk to a running job\n"
    "with \"shadow-ctl --run RUN_DIR stats\" (ping, checkpoint, ...); the PSs and\n"
    "the trainers (each gets an admin endpoint, cluster.trainer_admin) answer.\n"
    "With metrics.port set, every process that runs serves Prometheus metrics on\n"
    "a free port of its host (with --fixed-ports or --base-port: metrics.port +\n"
    "index); the launcher prints them and lists them in RUN_DIR/metrics.ports\n"
    "(docs/metrics.md).\n"
    "\n"
    "Relative paths: data files written in the job file are relative to the job\n"
    "file's folder; paths given with --set are relative to the current directory\n"
    "(over ssh: give absolute paths, valid on every host).\n"
    "\n"
    "A parameter server that dies is restarted from its latest recovery checkpoint\n"
    "(RUN_DIR/ckpt/recovery, written every checkpoint.interval_s) up to\n"
    "job.max_ps_restarts times; the updates since that checkpoint are lost, and\n"
    "result.json lists every restart. A sync PS restarts empty instead: the\n"
    "trainers re-seed it from their live replicas (a stale center would pull them\n"
    "back). A host whose ssh connection is lost ends the job, naming the host and\n"
    "its processes.\n"
    "\n"
    "A trainer that dies (or whose host is lost) ends the job, unless\n"
    "job.allow_trainer_loss allows the job to go on without it (auto, the default:\n"
    "yes for s-easgd, s-ma and s-bmuf, no for sync none and the fr-* baselines) and the\n"
    "others are a majority of the trainers (so 2 trainers cannot lose one): they\n"
    "then finish (the ring re-forms without it after sync.timeout_ms) and\n"
    "result.json lists it in trainers_lost (rank, exit status, seconds after start).\n"
    "A trainer that could not save the output model (exit 74: a full disk, a\n"
    "folder it cannot write) or cannot read its data on its host (exit 66) is not\n"
    "a lost trainer: the job ends naming the failure.\n"
    "\n"
    "SIGTERM to this script (kill PID) stops the job with a job checkpoint:\n"
    "every trainer stops at a batch boundary, the final sync runs, and\n"
    "RUN_DIR/jobckpt receives the PSs' embeddings (and EASGD's center) and each\n"
    "trainer's state (dense model, optimizer state, reader places, counters);\n"
    "then the PSs shut down and the script exits with status 75. With --hosts\n"
    "(ssh, srun) the wrapper on each trainer's host passes the SIGTERM on, and\n"
    "the parts written on every host are gathered into RUN_DIR/jobckpt. --resume\n"
    "RUN_DIR goes on from there to the configured end (with --hosts: on the hosts\n"
    "of the same hosts file, which get their processes' part of RUN_DIR/jobckpt\n"
    "copied over first); result.json then says \"resumed\": true and from how many\n"
    "examples. It refuses a run directory without a complete job checkpoint,\n"
    "another trainer count, or one that a live launch holds. A second SIGTERM, or\n"
    "Ctrl-C (SIGINT), stops everything at once.\n"
    "\n"
    "With job.checkpoint_interval_s set, the trainers take the same job\n"
    "checkpoint every that many seconds and go on training (each pause is in the\n"
    "trainers' logs and in result.json's job_checkpoint_pause_s). When the job\n"
    "then fails (a trainer or a host lost, this script killed: the processes it\n"
    "started here die with it), the failure message says that RUN_DIR/jobckpt\n"
    "holds one and from how many examples --resume RUN_DIR goes on; the work\n"
    "since it is trained again.\n"
    "\n"
    "A trainer lost under job.allow_trainer_loss ends the periodic job\n"
    "checkpoints (one without its state could not be resumed), and a SIGTERM\n"
    "after the loss writes none either: RUN_DIR/jobckpt keeps the last complete\n"
    "job checkpoint from before the loss, untouched, and the script says so (the\n"
    "lost trainer, that checkpoint's time and examples); --resume RUN_DIR goes on\n"
    "from it with every trainer, training the work since it again.\n"
    "\n"
    "Exit status: 0 when every trainer finished and wrote its result (with\n"
    "job.allow_trainer_loss: every trainer not lost), 75 when the job stopped on\n"
    "SIGTERM with a job checkpoint to resume from (the one it wrote, or after a\n"
    "trainer loss the last complete one from before it, kept), 141 when the\n"
    "reader of --out - closed it early, 1 otherwise (a periodic job checkpoint\n"
    "may then be there to resume from: the message says; when saving the output\n"
    "model failed, result.json is written with the error), 2 on usage errors and\n"
    "when a data file is missing or unreadable (shadow-ctl check-data; nothing\n"
    "is started).\n";

void ss_launch_usage(FILE *out)
{
    fputs(s_usage_text, out);
}

/* Put a message in err; returns SS_E_INVAL (the caller's usage error). */
static int s_err(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return SS_E_INVAL;
}

/* Set key to a copy of v. */
static void s_set(ss_launch_opts_t *o, enum s_key k, const char *v)
{
    free(o->val[k]);
    o->val[k] = ss_strdup(v);
}

static const char *s_get(const ss_launch_opts_t *o, enum s_key k)
{
    return o->val[k] ? o->val[k] : "";
}

static void s_push(char ***list, size_t *n, const char *w)
{
    *list = ss_realloc(*list, (*n + 1) * sizeof **list);
    (*list)[(*n)++] = ss_strdup(w);
}

static void s_words_add(struct s_words *l, const char *w)
{
    s_push(&l->w, &l->n, w);
}

static void s_words_free(struct s_words *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->w[i]);
    free(l->w);
    l->w = NULL;
    l->n = 0;
}

/* The lines of path (without their newlines) appended to l. Returns 0, or
 * -1 when it cannot be read. */
static int s_read_lines(const char *path, struct s_words *l)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, fp)) >= 0) {
        if (n > 0 && line[n - 1] == '\n')
            line[n - 1] = '\0';
        s_words_add(l, line);
    }
    free(line);
    int bad = ferror(fp);
    fclose(fp);
    return bad ? -1 : 0;
}

/* --resume RUN_DIR [--quiet|--no-plots|--bin DIR]...: the arguments become
 * RUN_DIR/launch.args' (after its first line, the working directory) then
 * the rest; into args. Sets resume and cwd. */
static int s_resume(ss_launch_opts_t *o, int argc, char *const *argv, struct s_words *args,
                    char *err, size_t len)
{
    char dir[S_PATH], path[S_PATH + 16];
    struct s_words saved = {0};
    if (argc < 2)
        return s_err(err, len, "--resume needs a run directory");
    if (ss_path_dir(s_get(o, K_CWD), argv[1], dir, sizeof dir) != 0)
        return s_err(err, len, "--resume %s: no such run directory", argv[1]);
    snprintf(path, sizeof path, "%s/launch.args", dir);
    if (!ss_path_test(dir, path, 'f') || s_read_lines(path, &saved) != 0) {
        s_words_free(&saved);
        return s_err(err, len, "--resume %s: no launch.args there (not a run directory of a job "
                     "started by shadow-launch)", argv[1]);
    }
    s_set(o, K_RESUME, dir);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--quiet") && strcmp(a, "--no-plots") && strcmp(a, "--bin")
            && strncmp(a, "--bin=", 6) && strcmp(argv[i - 1], "--bin")) {
            s_words_free(&saved);
            return s_err(err, len, "--resume takes only --quiet, --no-plots and --bin besides the "
                         "run directory (the job's own options come from %s/launch.args)", dir);
        }
    }
    if (saved.n > 0 && saved.w[0][0]) {
        if (ss_path_dir(s_get(o, K_CWD), saved.w[0], path, sizeof path) != 0) {
            int rc = s_err(err, len, "--resume: the job's working directory %s is gone",
                           saved.w[0]);
            s_words_free(&saved);
            return rc;
        }
        s_set(o, K_CWD, path);
    }
    for (size_t i = 1; i < saved.n; i++)
        s_words_add(args, saved.w[i]);
    for (int i = 2; i < argc; i++)
        s_words_add(args, argv[i]);
    s_words_free(&saved);
    return 0;
}

/* --ssh-opts' value, word-split as a shell's "read -r -a" does (its first
 * line, on blanks). */
static void s_ssh_opts(ss_launch_opts_t *o, const char *v)
{
    size_t n = strcspn(v, "\n");
    char *line = ss_malloc(n + 1);
    memcpy(line, v, n);
    line[n] = '\0';
    for (char *save = NULL, *w = strtok_r(line, " \t", &save); w;
         w = strtok_r(NULL, " \t", &save))
        s_push(&o->ssh_opts, &o->n_ssh_opts, w);
    free(line);
}

/* The options that take a value, and where it goes (K_PREDICT: --predict's
 * RUN_DIR, in eval_only; S_N_KEYS: --set and --ssh-opts, by hand). */
static const struct {
    const char *name;
    enum s_key key;
} s_valued[] = {
    {"--set", S_N_KEYS},           {"--bin", K_BIN},         {"--eval-only", K_EVAL_ONLY},
    {"--predict", K_PREDICT},      {"--out", K_PREDICT_OUT}, {"--hosts", K_HOSTS_FILE},
    {"--exec", K_EXEC},            {"--base-port", K_BASE_PORT},
    {"--remote-bin", K_REMOTE_BIN}, {"--remote-run-dir", K_REMOTE_RUN_DIR},
    {"--ssh-opts", S_N_KEYS},
};
/* The flags, and the key each sets to "1". */
static const struct {
    const char *name;
    enum s_key key;
} s_flags[] = {
    {"--skip-bad", K_SKIP_BAD}, {"--quiet", K_QUIET}, {"--no-plots", K_NO_PLOTS},
    {"--fixed-ports", K_FIXED_PORTS},
};
#define S_N_VALUED (sizeof s_valued / sizeof s_valued[0])
#define S_N_FLAGS (sizeof s_flags / sizeof s_flags[0])

/* Option a (a valued one, index k of s_valued) with its value v; next: the
 * word after v, or NULL. */
static int s_valued_opt(ss_launch_opts_t *o, size_t k, const char *v, const char *next,
                        char *err, size_t len)
{
    const char *a = s_valued[k].name;
    if (!strcmp(a, "--set")) {
        if (!strchr(v, '='))
            return s_err(err, len, "--set %s: give KEY=VALUE in one word (--set %s=%s)", v, v,
                         next && next[0] ? next : "VALUE");
        s_push(&o->sets, &o->n_sets, v);
    } else if (!strcmp(a, "--ssh-opts")) {
        s_ssh_opts(o, v);
    } else if (s_valued[k].key == K_PREDICT) {
        s_set(o, K_EVAL_ONLY, v);
        s_set(o, K_PREDICT, "1");
    } else {
        s_set(o, s_valued[k].key, v);
    }
    return 0;
}

/* Word a of the argument list (with n words left, a included); *used: the
 * words it took. Returns 0, SS_LAUNCH_HELP, SS_LAUNCH_VERSION or an error. */
static int s_word(ss_launch_opts_t *o, char *const *w, size_t n, size_t *used, char *err,
                  size_t len)
{
    const char *a = w[0];
    *used = 1;
    for (size_t k = 0; k < S_N_VALUED; k++) {
        if (strcmp(a, s_valued[k].name))
            continue;
        if (n < 2)
            return s_err(err, len, "%s needs a value (see --help)", a);
        *used = 2;
        return s_valued_opt(o, k, w[1], n > 2 ? w[2] : NULL, err, len);
    }
    for (size_t k = 0; k < S_N_FLAGS; k++)
        if (!strcmp(a, s_flags[k].name)) {
            s_set(o, s_flags[k].key, "1");
            return 0;
        }
    if (!strncmp(a, "--set=", 6)) {
        s_push(&o->sets, &o->n_sets, a + 6);
        return 0;
    }
    if (!strcmp(a, "--resume"))
        return s_err(err, len, "--resume RUN_DIR comes first and alone (see --help)");
    if (!strcmp(a, "-h") || !strcmp(a, "--help"))
        return SS_LAUNCH_HELP;
    if (!strcmp(a, "--version"))
        return SS_LAUNCH_VERSION;
    if (a[0] == '-')
        return s_err(err, len, "unknown option %s (see --help)", a);
    if (o->val[K_JOB] && o->val[K_JOB][0])
        return s_err(err, len, "one job file only (%s, then %s)", o->val[K_JOB], a);
    s_set(o, K_JOB, a);
    return 0;
}

/* --predict's --out (made absolute: the trainer writes it), --out and
 * --skip-bad without --predict, and the saved model of --eval-only and
 * --predict. */
static int s_check_predict(ss_launch_opts_t *o, char *err, size_t len)
{
    const char *out = s_get(o, K_PREDICT_OUT), *cwd = s_get(o, K_CWD);
    if (o->val[K_PREDICT]) {
        if (!out[0])
            return s_err(err, len, "--predict RUN_DIR needs --out FILE (where the predictions "
                         "go; --out - for standard output)");
        if (strcmp(out, "-")) {
            char d[S_PATH], b[S_PATH], dir[S_PATH], path[S_PATH * 2];
            snprintf(d, sizeof d, "%s", out);
            snprintf(b, sizeof b, "%s", out);
            const char *dn = dirname(d), *bn = basename(b);
            if (ss_path_dir(cwd, dn, dir, sizeof dir) != 0)
                return s_err(err, len, "--out %s: no such folder %s", out, dn);
            snprintf(path, sizeof path, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", bn);
            s_set(o, K_PREDICT_OUT, path);
            if (ss_path_test(cwd, path, 'd'))
                return s_err(err, len, "--out %s is a folder; give a file name", path);
        }
    } else if (out[0] || o->val[K_SKIP_BAD]) {
        return s_err(err, len, "--out and --skip-bad go with --predict RUN_DIR");
    }
    const char *ev = s_get(o, K_EVAL_ONLY);
    char model[S_PATH];
    snprintf(model, sizeof model, "%s/model/dense.bin", ev);
    if (ev[0] && !ss_path_test(cwd, model, 'f'))
        return s_err(err, len, "%s has no saved model (%s/model/dense.bin missing): give the run "
                     "directory of a job that finished training (it saves RUN_DIR/model)", ev,
                     ev);
    return 0;
}

/* The job file, made absolute (the same path on every host). */
static void s_job_abs(ss_launch_opts_t *o)
{
    const char *job = s_get(o, K_JOB), *slash = strrchr(job, '/');
    char dir[S_PATH], abs[S_PATH], path[S_PATH * 2];
    if (!slash) {
        snprintf(dir, sizeof dir, ".");
    } else {
        snprintf(dir, sizeof dir, "%.*s/", (int)(slash - job), job);
    }
    if (ss_path_dir(s_get(o, K_CWD), dir, abs, sizeof abs) != 0)
        return;   /* too long for a path: kept as given, the plan names it */
    snprintf(path, sizeof path, "%s%s%s", abs, strcmp(abs, "/") ? "/" : "",
             slash ? slash + 1 : job);
    s_set(o, K_JOB, path);
}

/* The binaries (ss_path_find_bin()): each one the launcher runs must be
 * there; bin, rbin and remote_bin set. */
static int s_find_bin(ss_launch_opts_t *o, char *err, size_t len)
{
    static const char *const need[] = {"shadow-ps", "shadow-ctl", "shadow-trainer",
                                       "shadow-super"};
    const char *cwd = s_get(o, K_CWD);
    char bin[S_PATH], path[S_PATH * 2];
    ss_path_find_bin(cwd, s_get(o, K_BIN), o->val[K_HERE], "shadow-ps", bin, sizeof bin);
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", bin, need[i]);
        if (!ss_path_test(cwd, path, 'x'))
            return s_err(err, len, "%s/%s not found: run 'make' first or pass --bin", bin,
                         need[i]);
    }
    if (ss_path_dir(cwd, bin, path, sizeof path) != 0)
        return s_err(err, len, "--bin %s: path too long", bin);
    s_set(o, K_BIN, path);
    if (!o->val[K_REMOTE_BIN] || !o->val[K_REMOTE_BIN][0])
        s_set(o, K_REMOTE_BIN, path);
    s_set(o, K_RBIN, strcmp(s_get(o, K_EXEC), "local") ? s_get(o, K_REMOTE_BIN) : path);
    return 0;
}

/* Everything after the words: the job file, --predict, the --exec mode,
 * the binaries, the hosts file. */
static int s_check(ss_launch_opts_t *o, char *err, size_t len)
{
    const char *job = s_get(o, K_JOB), *hosts = s_get(o, K_HOSTS_FILE);
    int rc;
    if (!job[0]) {
        err[0] = '\0';   /* the usage says it */
        return SS_E_INVAL;
    }
    if (!ss_path_test(s_get(o, K_CWD), job, 'f'))
        return s_err(err, len, "no such job file: %s", job);
    if ((rc = s_check_predict(o, err, len)) != 0)
        return rc;
    s_job_abs(o);
    if (!o->val[K_EXEC] || !o->val[K_EXEC][0])
        s_set(o, K_EXEC, hosts[0] ? "ssh" : "local");
    if ((rc = s_find_bin(o, err, len)) != 0)
        return rc;
    if (hosts[0] && !ss_path_test(s_get(o, K_CWD), hosts, 'f'))
        return s_err(err, len, "no such hosts file: %s", hosts);
    /* (an --exec mode without a row in common/ss_backend.c: the plan says so) */
    const char *ex = s_get(o, K_EXEC);
    if (strcmp(ex, "local") && !hosts[0] && ss_backend_find(ex))
        return s_err(err, len, "--exec %s needs --hosts FILE", ex);
    return 0;
}

/* The script's path and its folder, absolute (from the first working
 * directory, as the script's own "cd DIR && pwd" did). */
static void s_script(ss_launch_opts_t *o, const char *script)
{
    char dir[S_PATH], abs[S_PATH];
    const char *slash = strrchr(script, '/');
    s_set(o, K_SCRIPT, script);
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == script)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - script), script);
    if (ss_path_dir(s_get(o, K_CWD), dir, abs, sizeof abs) == 0)
        s_set(o, K_HERE, abs);
}

int ss_launch_opts_parse(int argc, char *const *argv, const char *script,
                         ss_launch_opts_t **out_p, char *err, size_t err_len)
{
    ss_assert(argc >= 0 && out_p && err && err_len > 0);
    ss_launch_opts_t *o = ss_calloc(1, sizeof *o);
    struct s_words args = {0};
    char cwd[S_PATH];
    int rc = 0;
    *out_p = NULL;
    err[0] = '\0';
    (void)ss_path_cwd(cwd, sizeof cwd);   /* "/" when it has no name */
    s_set(o, K_CWD, cwd);
    if (script)
        s_script(o, script);
    if (argc > 0 && !strcmp(argv[0], "--resume")) {
        rc = s_resume(o, argc, argv, &args, err, err_len);
    } else {
        for (int i = 0; i < argc; i++)
            s_words_add(&args, argv[i]);
    }
    for (size_t i = 0, used; rc == 0 && i < args.n; i += used)
        rc = s_word(o, args.w + i, args.n - i, &used, err, err_len);
    if (rc == 0)
        rc = s_check(o, err, err_len);
    s_words_free(&args);
    for (int k = K_PREDICT; rc == 0 && k <= K_FIXED_PORTS; k++)
        if (!o->val[k])
            s_set(o, k, "0");
    if (rc == 0)
        *out_p = o;
    else
        ss_launch_opts_destroy(&o);
    return rc;
}

void ss_launch_opts_destroy(ss_launch_opts_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ss_launch_opts_t *o = *self_p;
    for (int k = 0; k < S_N_KEYS; k++)
        free(o->val[k]);
    for (size_t i = 0; i < o->n_sets; i++)
        free(o->sets[i]);
    for (size_t i = 0; i < o->n_ssh_opts; i++)
        free(o->ssh_opts[i]);
    free(o->sets);
    free(o->ssh_opts);
    free(o);
    *self_p = NULL;
}

const char *ss_launch_opts_get(const ss_launch_opts_t *self, const char *key)
{
    ss_assert(self && key);
    for (int k = 0; k < S_N_KEYS; k++)
        if (!strcmp(key, s_key_names[k]))
            return s_get(self, (enum s_key)k);
    return NULL;
}

char *const *ss_launch_opts_sets(const ss_launch_opts_t *self, size_t *n)
{
    ss_assert(self && n);
    *n = self->n_sets;
    return self->sets;
}

char *const *ss_launch_opts_ssh_opts(const ss_launch_opts_t *self, size_t *n)
{
    ss_assert(self && n);
    *n = self->n_ssh_opts;
    return self->ssh_opts;
}

/* Write the NUL-terminated words a and b to fd. */
static int s_write2(int fd, const char *a, const char *b)
{
    const char *w[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(w[i]) + 1;
        for (const char *p = w[i]; n > 0;) {
            ssize_t k = write(fd, p, n);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                return SS_E_IO;
            p += k;
            n -= (size_t)k;
        }
    }
    return 0;
}

int ss_launch_opts_write(const ss_launch_opts_t *self, int fd)
{
    ss_assert(self);
    int rc = 0;
    for (int k = 0; rc == 0 && k < S_N_KEYS; k++)
        rc = s_write2(fd, s_key_names[k], s_get(self, (enum s_key)k));
    for (size_t i = 0; rc == 0 && i < self->n_sets; i++)
        rc = s_write2(fd, "set", self->sets[i]);
    for (size_t i = 0; rc == 0 && i < self->n_ssh_opts; i++)
        rc = s_write2(fd, "ssh_opt", self->ssh_opts[i]);
    return rc;
}
