/* ss_launch.c - the launcher's run of a job, step by step (ss_launch.h has
 * the order and the signal rules).
 *
 * DESIGN: every rule about the job lives elsewhere and is called here: the
 * plan in shadow-ctl plan (tools/ctl_plan.h; run as a child and its lines
 * read, the one printed interface left: it links the trainer's data
 * checks), a host's command lines in ss_backend.h, the processes' command
 * lines in ss_spec.h, their supervision in shadow-super --spec
 * (ss_super.h), the copies and the end in shadow-super --gather, --finish
 * and --failed (ss_launch_copy.h, ss_launch_end.h). This file holds the
 * steps in between, as scripts/shadow-launch did them: the same files, the
 * same messages. SIGINT, SIGTERM and SIGCHLD are blocked once the launch
 * data is written and taken with sigtimedwait() between steps (a step
 * finishes first, as a shell runs a trap after its command) and while the
 * supervisor runs (passed on to it at once). */
#include "ss_launch.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ss_assert.h"
#include "ss_backend.h"
#include "ss_fs.h"
#include "ss_launch_proc.h"
#include "ss_mem.h"
#include "ss_path.h"
#include "ss_spec.h"
#include "ss_super.h"

#define S_PATH 4096

/* One host of the plan. */
struct s_host {
    char *target;        /* how the --exec mode reaches it */
    char *addr;          /* the address its endpoints use */
    int nports;          /* free ports its processes need */
    char pdir[S_PATH];   /* the run directory of its processes */
    char ckdir[S_PATH];  /* where its PSs checkpoint */
    char name[1024];     /* its name in messages */
    int cpus;            /* srun: the job's CPUs there */
    int shared;          /* its run directory is RUN_DIR itself */
    char *ports;         /* the preflight's free ports, comma-separated, or NULL */
};

/* A "config KEY VALUE" line of the plan. */
struct s_kv {
    char *k, *v;
};

/* The launch: its options, its plan, what it opened. */
struct launch {
    const ss_launch_opts_t *o;
    const char *script;              /* $0 */
    char here[S_PATH];               /* the script's folder, absolute */
    const char *job, *bin, *rbin, *exec, *hosts_file, *eval_only, *resume;
    int predict;                     /* --predict */
    const struct ss_backend *backend;
    struct ss_launch_argv sets;      /* the user's --set words ("--set", "K=V", ...) */
    struct s_kv *cf;                 /* the plan's config lines */
    size_t n_cf;
    struct ss_launch_argv metrics;   /* its metrics lines (after "metrics ") */
    struct ss_launch_argv plan_sets; /* its set lines as words ("--set", "K=V", ...) */
    int use_ipc;                     /* the job talks over ipc:// */
    struct s_host *hosts;
    size_t n_hosts;
    int *place[3];                   /* embedding, sync, trainer: host index, -1 none */
    size_t n_place[3];
    int n_tr;                        /* cluster.trainers.count */
    char run_dir[S_PATH], logs[S_PATH], jobckpt[S_PATH];
    char data[S_PATH], spec[S_PATH], outcome[S_PATH];
    int lock_fd, keep_w, pred_fd, pred_in;
    int *ctl_fd;                     /* trainer r's control pipe, -1 none */
    char keep_dir[S_PATH];           /* ssh, srun: the keep fifo's folder */
    char host_stdin[S_PATH];         /* what a command on a host reads */
    char token[128], start_id[128], resumed_from[64], step_name[96];
    pid_t sup;                       /* shadow-super --spec while it runs */
    int ckpt_req;                    /* a SIGTERM asked for a job checkpoint */
    int gathered, trainers_failed, die_rc;
};

static const char *const s_roles[3] = {"embedding", "sync", "trainer"};
/* A child with our descriptors; its messages name the launcher. */
static const struct ss_launch_io s_io_ours = {.out_fd = -1, .err_fd = -1, .who = SS_LAUNCH_WHO};

/* The plan's value of config key ("" when none). */
static const char *s_cf(const struct launch *L, const char *key)
{
    for (size_t i = 0; i < L->n_cf; i++)
        if (!strcmp(L->cf[i].k, key))
            return L->cf[i].v;
    return "";
}

static void s_cf_set(struct launch *L, const char *key, const char *v)
{
    for (size_t i = 0; i < L->n_cf; i++)
        if (!strcmp(L->cf[i].k, key)) {
            free(L->cf[i].v);
            L->cf[i].v = ss_strdup(v);
            return;
        }
    L->cf = ss_realloc(L->cf, (L->n_cf + 1) * sizeof *L->cf);
    L->cf[L->n_cf].k = ss_strdup(key);
    L->cf[L->n_cf++].v = ss_strdup(v);
}

/* The end of the launcher: the keep fifo's folder goes, then exit rc. */
static void s_exit(struct launch *L, int rc)
{
    if (L->keep_dir[0])
        (void)ss_fs_remove_tree(L->keep_dir);
    fflush(stdout);
    fflush(stderr);
    exit(rc);
}

/* rm -rf of each path that exists. */
static void s_rm(const char *path)
{
    struct stat st;
    if (lstat(path, &st) == 0)
        (void)ss_fs_remove_tree(path);
}

/* rm -rf of what pattern matches. */
static void s_rm_glob(const char *pattern)
{
    glob_t g;
    if (glob(pattern, GLOB_NOSORT, NULL, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; i++)
            s_rm(g.gl_pathv[i]);
    globfree(&g);
}

/* Write text to path (truncated). Returns 0, or -1. */
static int s_write_file(const char *path, const char *text, size_t len, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    int rc = ss_fs_write_all(fd, text, len);
    return (close(fd) == 0 && rc == 0) ? 0 : -1;
}

/* Append NUL-terminated words to a buffer (the launch data). */
static void s_words(char **buf, size_t *len, const char *w)
{
    size_t n = strlen(w) + 1;
    *buf = ss_realloc(*buf, *len + n);
    memcpy(*buf + *len, w, n);
    *len += n;
}

/* ------------------------------------------------------------ the plan */

/* Slot i of the hosts, made to exist. */
static struct s_host *s_host_at(struct launch *L, size_t i)
{
    if (i >= L->n_hosts) {
        L->hosts = ss_realloc(L->hosts, (i + 1) * sizeof *L->hosts);
        memset(L->hosts + L->n_hosts, 0, (i + 1 - L->n_hosts) * sizeof *L->hosts);
        L->n_hosts = i + 1;
    }
    return &L->hosts[i];
}

static void s_place(struct launch *L, int role, size_t k, int h)
{
    if (k >= L->n_place[role]) {
        L->place[role] = ss_realloc(L->place[role], (k + 1) * sizeof(int));
        for (size_t i = L->n_place[role]; i <= k; i++)
            L->place[role][i] = -1;
        L->n_place[role] = k + 1;
    }
    L->place[role][k] = h;
}

/* Split line into up to 5 words as "read -r kind k h a n" does (the last
 * takes the rest); the words point into copy. */
static void s_split5(char *copy, char *w[5])
{
    char *p = copy;
    for (int i = 0; i < 5; i++) {
        p += strspn(p, " \t");
        w[i] = p;
        if (i == 4) {
            size_t n = strlen(p);
            while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
                p[--n] = '\0';
            break;
        }
        p += strcspn(p, " \t");
        if (*p)
            *p++ = '\0';
    }
}

/* One line of the plan's output (its messages among them). */
static void s_plan_line(struct launch *L, const char *line)
{
    char *copy = ss_strdup(line), *w[5];
    s_split5(copy, w);
    if (!strcmp(w[0], "config")) {
        const char *v = line + strlen("config ") + strlen(w[1]);
        s_cf_set(L, w[1], *v == ' ' ? v + 1 : v);
    } else if (!strcmp(w[0], "metrics")) {
        ss_launch_argv_add(&L->metrics, line + strlen("metrics "));
    } else if (!strcmp(w[0], "set")) {
        ss_launch_argv_add(&L->plan_sets, "--set");
        ss_launch_argv_add(&L->plan_sets, line + strlen("set "));
    } else if (!strcmp(w[0], "transport")) {
        L->use_ipc = !strcmp(w[1], "ipc");
    } else if (!strcmp(w[0], "host")) {
        struct s_host *h = s_host_at(L, (size_t)atol(w[1]));
        free(h->target);
        free(h->addr);
        h->target = ss_strdup(w[2]);
        h->addr = ss_strdup(w[3]);
        h->nports = atoi(w[4]);
    } else if (!strcmp(w[0], "embedding") || !strcmp(w[0], "sync") ||
               !strcmp(w[0], "trainer")) {
        int role = w[0][0] == 'e' ? 0 : w[0][0] == 's' ? 1 : 2;
        s_place(L, role, (size_t)atol(w[1]), atoi(w[2]));
    } else if (!strcmp(w[0], "admin")) {
        /* the trainers' admin endpoints: in the plan's set lines */
    } else if (!strcmp(w[0], "shadow-ctl:")) {
        if (!strcmp(w[1], "plan:") && !strncmp(line, "shadow-ctl: plan: ", 18))
            ss_launch_err("%s\n", line + 18);
        else
            fprintf(stderr, "%s\n", line);
    } else {
        ss_launch_err("%s\n", line);
    }
    free(copy);
}

/* Run shadow-ctl plan --launch with extra arguments and read its lines;
 * its messages are ours. Exits 2 when it fails. */
static void s_plan(struct launch *L, const struct ss_launch_argv *extra)
{
    struct ss_launch_argv a = {0};
    char *out = NULL;
    ss_launch_argv_addf(&a, "%s/shadow-ctl", L->bin);
    ss_launch_argv_add(&a, "plan");
    ss_launch_argv_add(&a, "-c");
    ss_launch_argv_add(&a, L->job);
    for (size_t i = 0; i < L->sets.n; i++)
        ss_launch_argv_add(&a, L->sets.v[i]);
    ss_launch_argv_add(&a, "--exec");
    ss_launch_argv_add(&a, L->exec);
    ss_launch_argv_add(&a, "--launch");
    if (L->eval_only[0])
        ss_launch_argv_add(&a, "--eval-only");
    if (L->hosts_file[0]) {
        ss_launch_argv_add(&a, "--hosts");
        ss_launch_argv_add(&a, L->hosts_file);
    }
    if (!strcmp(ss_launch_opts_get(L->o, "fixed_ports"), "1"))
        ss_launch_argv_add(&a, "--fixed-ports");
    if (ss_launch_opts_get(L->o, "base_port")[0]) {
        ss_launch_argv_add(&a, "--base-port");
        ss_launch_argv_add(&a, ss_launch_opts_get(L->o, "base_port"));
    }
    for (size_t i = 0; i < extra->n; i++)
        ss_launch_argv_add(&a, extra->v[i]);
    int rc = ss_launch_capture(a.v, &s_io_ours, 1, &out);
    ss_launch_argv_free(&a);
    ss_launch_argv_free(&L->metrics);
    ss_launch_argv_free(&L->plan_sets);
    s_cf_set(L, "metrics_note", "");
    for (char *line = out, *end; *line; line = end + (*end == '\n')) {
        end = line + strcspn(line, "\n");
        char save = *end;
        *end = '\0';
        if (*line)
            s_plan_line(L, line);
        *end = save;
        if (!save)
            break;
    }
    free(out);
    if (rc == 3) {
        ss_launch_err(
            "a data file is missing or unreadable (above); nothing "
            "was started (paths in the job file are relative to its folder, with --set to "
            "the current one)\n");
        s_exit(L, 2);
    }
    if (rc != 0)
        s_exit(L, 2);
}

/* Each host's run directory (%h in --remote-run-dir: its name), checkpoint
 * folder and name in messages. */
static void s_host_dirs(struct launch *L)
{
    const char *rrd = ss_launch_opts_get(L->o, "remote_run_dir");
    const char *ck = s_cf(L, "checkpoint.dir");
    if (!rrd[0])
        rrd = L->run_dir;
    for (size_t i = 0; i < L->n_hosts; i++) {
        struct s_host *h = &L->hosts[i];
        const char *t = h->target ? h->target : "", *at = strrchr(t, '@');
        if (!strcmp(L->exec, "local")) {
            snprintf(h->pdir, sizeof h->pdir, "%s", L->run_dir);
        } else {
            size_t n = 0;
            for (const char *p = rrd; *p && n + 1 < sizeof h->pdir; p++) {
                if (p[0] == '%' && p[1] == 'h') {
                    for (const char *q = t; *q && n + 1 < sizeof h->pdir; q++)
                        h->pdir[n++] = (*q == '@' || *q == '/') ? '_' : *q;
                    p++;
                } else {
                    h->pdir[n++] = *p;
                }
            }
            h->pdir[n] = '\0';
        }
        if (ck[0])
            snprintf(h->ckdir, sizeof h->ckdir, "%s", ck);
        else
            snprintf(h->ckdir, sizeof h->ckdir, "%s/ckpt", h->pdir);
        if (!strcmp(at ? at + 1 : t, h->addr ? h->addr : ""))
            snprintf(h->name, sizeof h->name, "%s", t);
        else
            snprintf(h->name, sizeof h->name, "%s (%s)", t, h->addr ? h->addr : "");
        if (h->cpus < 1)
            h->cpus = 1;
    }
}

/* ------------------------------------------------------------ the run directory */

/* What the plan says that only scoring may do: lines without labels, and
 * data.eval '-' (trainer 0 reads our standard input: PRED_IN). */
static void s_scoring_rules(struct launch *L)
{
    if (!strcmp(s_cf(L, "data.labels"), "false") && !L->predict) {
        ss_launch_err("data.labels is false (the lines hold no label): that "
                      "goes with --predict RUN_DIR only; training and --eval-only need labelled "
                      "lines (data.labels: true)\n");
        s_exit(L, 2);
    }
    if (!strcmp(s_cf(L, "eval_stdin"), "1")) {
        if (!L->eval_only[0] || strcmp(L->exec, "local")) {
            ss_launch_err("data.eval '-' (standard input) is scored with "
                          "--predict RUN_DIR or --eval-only RUN_DIR on this host (--exec local) "
                          "only\n");
            s_exit(L, 2);
        }
        L->pred_in = fcntl(0, F_DUPFD_CLOEXEC, 3);
    }
}

/* One launch per run directory at a time: the lock, held by this process
 * and every process it starts (the descriptor is inherited). Waits up to
 * 3 s (a launch killed a moment ago may leave a short command holding it). */
static void s_lock(struct launch *L)
{
    char path[S_PATH + 32];
    snprintf(path, sizeof path, "%s/.launch.lock", L->run_dir);
    L->lock_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (L->lock_fd < 0) {
        ss_launch_err("cannot open %s: %s\n", path, strerror(errno));
        s_exit(L, 2);
    }
    for (int i = 0; flock(L->lock_fd, LOCK_EX | LOCK_NB) != 0; i++) {
        if (i >= 30) {
            ss_launch_err("%s is in use by another launch; give this job its "
                          "own run directory (--set job.run_dir=...)\n",
                          L->run_dir);
            s_exit(L, 2);
        }
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    }
}

/* --resume RUN_DIR: the run directory the job file names, a job checkpoint
 * there that this job can go on from (ss_super_resume_check()); then the
 * logs before go aside (RUN_DIR/logs.K) and it says so. Returns 0, or -1
 * after the message. */
static int s_resume_check(struct launch *L)
{
    char old[S_PATH + 32], msg[1024];
    struct stat st;
    int k = 1;
    if (strcmp(L->run_dir, L->resume)) {
        ss_launch_err("--resume %s: its job's run directory is %s\n", L->resume, L->run_dir);
        return -1;
    }
    if (ss_super_resume_check(L->jobckpt, L->n_tr, L->logs, msg, sizeof msg) != 0) {
        ss_launch_err("--resume: %s\n", msg);
        return -1;
    }
    do
        snprintf(old, sizeof old, "%s/logs.%d", L->run_dir, k++);
    while (lstat(old, &st) == 0);
    if (rename(L->logs, old) != 0 || mkdir(L->logs, 0755) != 0) {
        ss_launch_err("cannot move %s aside to %s: %s\n", L->logs, old, strerror(errno));
        return -1;
    }
    ss_launch_say("resuming the job in %s from its job checkpoint (%s examples trained; "
                  "the logs before are in logs.%d)\n",
                  L->run_dir, L->resumed_from, k - 1);
    fflush(stdout);
    return 0;
}

/* The run directory's state before this launch: interrupted saves, the
 * job checkpoint there (START_CKPT_ID), --resume's check or launch.args,
 * an earlier launch's files, this launch's token. */
static void s_run_dir(struct launch *L, char *const *args, int n_args)
{
    char path[S_PATH + 64], examples[64];
    snprintf(path, sizeof path, "%s/jobckpt.new-*", L->run_dir);
    s_rm_glob(path);
    snprintf(path, sizeof path, "%s/model.new-*", L->run_dir);
    s_rm_glob(path);
    snprintf(path, sizeof path, "%s/MANIFEST", L->jobckpt);
    if (access(path, F_OK) == 0)
        ss_super_manifest(L->jobckpt, "save_id", L->start_id, sizeof L->start_id);
    if (L->resume[0]) {
        ss_super_manifest(L->jobckpt, "examples", L->resumed_from, sizeof L->resumed_from);
        if (s_resume_check(L) != 0)
            s_exit(L, 2);
    } else if (!L->eval_only[0]) {
        char *text = NULL;
        size_t len = 0;
        const char *cwd = ss_launch_opts_get(L->o, "cwd");
        FILE *fp = open_memstream(&text, &len);
        fprintf(fp, "%s\n", cwd);
        for (int i = 0; i < n_args; i++)
            fprintf(fp, "%s\n", args[i]);
        fclose(fp);
        snprintf(path, sizeof path, "%s/launch.args", L->run_dir);
        (void)s_write_file(path, text, len, 0644);
        free(text);
        if (L->start_id[0]) {
            ss_super_manifest(L->jobckpt, "examples", examples, sizeof examples);
            ss_launch_err(
                "note: %s holds the job checkpoint of an earlier "
                "launch (%s examples); this launch starts the job over and replaces it (to "
                "go on from it instead: --resume %s)\n",
                L->jobckpt, examples, L->run_dir);
        }
    }
    static const char *const stale[] = {"result.json", "ps-restarts.jsonl",
                                        "trainers-lost.jsonl", "metrics.ports",
                                        ".super.outcome", ".super.data"};
    snprintf(path, sizeof path, "%s/result-trainer-*.json", L->run_dir);
    s_rm_glob(path);
    for (size_t i = 0; i < sizeof stale / sizeof stale[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", L->run_dir, stale[i]);
        s_rm(path);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(L->token, sizeof L->token, "%d-%lld%06ld-%d", (int)getpid(), (long long)ts.tv_sec,
             ts.tv_nsec / 1000, rand() % 32768);
    snprintf(path, sizeof path, "%s/.launch-token", L->run_dir);
    char line[160];
    int n = snprintf(line, sizeof line, "%s\n", L->token);
    (void)s_write_file(path, line, (size_t)n, 0644);
}

/* ------------------------------------------------------------ srun */

/* --exec srun: inside an allocation whose nodes are the hosts; each host's
 * CPUs (SLURM_JOB_CPUS_PER_NODE); the name of this launch's steps. */
static void s_srun(struct launch *L)
{
    const char *id = getenv("SLURM_JOB_ID"), *list = getenv("SLURM_JOB_NODELIST");
    const char *cpn = getenv("SLURM_JOB_CPUS_PER_NODE");
    if (strcmp(L->exec, "srun"))
        return;
    if (!id || !id[0] || !list || !list[0]) {
        ss_launch_err(
            "--exec srun: not inside a Slurm allocation (SLURM_JOB_ID "
            "is not set): run it inside salloc or sbatch (scripts/shadow-slurm does both the "
            "hosts file and this)\n");
        s_exit(L, 2);
    }
    if (ss_path_search(".", "srun", NULL, 0) != 0
        || ss_path_search(".", "scontrol", NULL, 0) != 0) {
        ss_launch_err("--exec srun: srun or scontrol is not on PATH\n");
        s_exit(L, 2);
    }
    char *const argv[] = {"scontrol", "show", "hostnames", (char *)list, NULL};
    char *out = NULL, err[512];
    (void)ss_launch_capture(argv, &s_io_ours, 0, &out);
    int cpus[4096];
    size_t n_cpus = 0;
    if (ss_backend_slurm_cpus(cpn && cpn[0] ? cpn : "1", cpus, 4096, &n_cpus, err,
                              sizeof err) != 0) {
        ss_launch_err("--exec srun: %s\n", err);
        free(out);
        s_exit(L, 2);
    }
    for (size_t h = 0; h < L->n_hosts; h++) {
        size_t i = 0;
        int found = 0;
        for (char *line = out, *end; *line && !found; line = end + 1, i++) {
            end = line + strcspn(line, "\n");
            if ((size_t)(end - line) == strlen(L->hosts[h].target) &&
                !strncmp(line, L->hosts[h].target, (size_t)(end - line))) {
                found = 1;
                L->hosts[h].cpus = i < n_cpus ? cpus[i] : 1;
            }
            if (!*end)
                break;
        }
        if (!found) {
            ss_launch_err("%s: %s is not a node of Slurm job %s (its nodes: "
                          "%s)\n",
                          L->hosts_file, L->hosts[h].target, id, list);
            free(out);
            s_exit(L, 2);
        }
    }
    free(out);
    snprintf(L->step_name, sizeof L->step_name, "shadow-launch-%d-%d", (int)getpid(),
             rand() % 32768);
}

/* SIGKILL this launch's job steps that Slurm still runs (an srun client
 * killed before its step ended leaves the step). Bounded: 10 s. */
static void s_srun_cancel_steps(struct launch *L)
{
    char ids[4096] = "";
    if (strcmp(L->exec, "srun"))
        return;
    for (int tries = 0; tries < 50; tries++) {
        char *out = NULL, *const q[] = {"squeue", "-h", "-s", "-j", getenv("SLURM_JOB_ID"),
                                        "-o", "%i %j", NULL};
        struct ss_launch_argv kill_argv = {0};
        int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        struct ss_launch_io io = {.out_fd = -1, .err_fd = null_fd, .who = SS_LAUNCH_WHO};
        (void)ss_launch_capture(q, &io, 0, &out);
        ids[0] = '\0';
        ss_launch_argv_add(&kill_argv, "scancel");
        ss_launch_argv_add(&kill_argv, "--signal=KILL");
        for (char *save = NULL, *line = strtok_r(out, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
            char *w[5];
            s_split5(line, w);
            if (!strcmp(w[1], L->step_name)) {
                ss_launch_argv_add(&kill_argv, w[0]);
                size_t n = strlen(ids);
                snprintf(ids + n, sizeof ids - n, "%s%s", n ? "\n" : "", w[0]);
            }
        }
        free(out);
        if (ids[0])
            (void)ss_launch_run(kill_argv.v, &io);
        ss_launch_argv_free(&kill_argv);
        if (null_fd >= 0)
            close(null_fd);
        if (!ids[0])
            return;
        nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
    }
    ss_launch_err("job steps still running after scancel --signal=KILL: %s\n", ids);
}

/* ssh, srun: the keep fifo, held open here until this process ends: a
 * command on a host reads it, and stops when it ends (common/ss_backend.h). */
static void s_keep(struct launch *L)
{
    snprintf(L->host_stdin, sizeof L->host_stdin, "/dev/null");
    if (!L->backend || !L->backend->remote)
        return;
    const char *tmp = getenv("TMPDIR");
    char path[S_PATH + 16];
    snprintf(L->keep_dir, sizeof L->keep_dir, "%s/shadow-launch.XXXXXX",
             tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(L->keep_dir)) {
        ss_launch_err("cannot make a folder in %s: %s\n", tmp ? tmp : "/tmp", strerror(errno));
        L->keep_dir[0] = '\0';
        s_exit(L, 2);
    }
    snprintf(path, sizeof path, "%s/keep", L->keep_dir);
    if (mkfifo(path, 0600) != 0 || (L->keep_w = open(path, O_RDWR | O_CLOEXEC)) < 0) {
        ss_launch_err("cannot make %s: %s\n", path, strerror(errno));
        s_exit(L, 2);
    }
    snprintf(L->host_stdin, sizeof L->host_stdin, "%s", path);
}

/* ------------------------------------------------------------ preflight */

/* The command line that runs argv on host h the way --exec reaches it
 * (ss_backend.h); free with ss_backend_argv_free(). */
static char **s_on_host(const struct launch *L, size_t h, char *const *argv)
{
    size_t n_opts;
    char *const *opts = ss_launch_opts_ssh_opts(L->o, &n_opts);
    struct ss_backend_where w = {
        .target = L->hosts[h].target, .cpus = L->hosts[h].cpus, .step_name = L->step_name,
        .cwd = ss_launch_opts_get(L->o, "cwd"), .ssh_opts = (const char *const *)opts,
        .n_ssh_opts = n_opts,
    };
    return ss_backend_argv(L->backend, &w, SS_BACKEND_RUN, argv);
}

/* The preflight's arguments for host h (after "preflight"). */
static void s_pf_args(const struct launch *L, size_t h, struct ss_launch_argv *a)
{
    const struct s_host *H = &L->hosts[h];
    int n = H->nports;
    if (!strcmp(ss_launch_opts_get(L->o, "fixed_ports"), "1") ||
        ss_launch_opts_get(L->o, "base_port")[0])
        n = 0;
    ss_launch_argv_add(a, H->pdir);
    ss_launch_argv_add(a, L->job);
    ss_launch_argv_add(a, L->token);
    ss_launch_argv_add(a, "--bin");
    ss_launch_argv_add(a, L->rbin);
    ss_launch_argv_add(a, "--host");
    ss_launch_argv_add(a, H->addr ? H->addr : "");
    if (!L->eval_only[0]) {
        ss_launch_argv_add(a, "--ckpt-dir");
        ss_launch_argv_add(a, H->ckdir);
    }
    if (n != 0) {
        ss_launch_argv_add(a, "--ports");
        ss_launch_argv_addf(a, "%d", n);
        ss_launch_argv_add(a, "--span");
        ss_launch_argv_add(a, s_cf(L, "port_span"));
    }
}

/* Read a whole file into a new string ("" when it cannot). */
static char *s_slurp(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    FILE *fp = fopen(path, "r");
    FILE *mem = open_memstream(&text, &len);
    if (fp) {
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, fp)) > 0)
            fwrite(buf, 1, n, mem);
        fclose(fp);
    }
    fclose(mem);
    return text;
}

/* A failed preflight on host h (exit rc): what it needs fixed (shadow-ctl
 * preflight --why, run here) and the last lines it printed; exits 1. */
static void s_pf_failed(struct launch *L, size_t h, int rc, const char *err_path)
{
    struct ss_launch_argv a = {0};
    char *why = NULL;
    ss_launch_argv_addf(&a, "%s/shadow-ctl", L->bin);
    ss_launch_argv_add(&a, "preflight");
    ss_launch_argv_add(&a, "--why");
    ss_launch_argv_addf(&a, "%d", rc);
    ss_launch_argv_add(&a, "--exec");
    ss_launch_argv_add(&a, L->exec);
    ss_launch_argv_add(&a, "--target");
    ss_launch_argv_add(&a, L->hosts[h].target);
    s_pf_args(L, h, &a);
    if (ss_launch_capture(a.v, &s_io_ours, 0, &why) != 0) {
        free(why);
        why = NULL;
    }
    ss_launch_argv_free(&a);
    if (why) {
        size_t n = strlen(why);
        while (n > 0 && why[n - 1] == '\n')
            why[--n] = '\0';
        ss_launch_err("host %s: %s\n", L->hosts[h].name, why);
    } else {
        ss_launch_err("host %s: exit %d\n", L->hosts[h].name, rc);
    }
    free(why);
    char *err = s_slurp(err_path);
    size_t len = strlen(err), lines = 0;
    const char *from = err;
    for (size_t i = len; i > 0; i--) {
        if (err[i - 1] == '\n' && i != len && ++lines == 5) {
            from = err + i;
            break;
        }
    }
    for (const char *p = from; *p;) {
        size_t n = strcspn(p, "\n");
        fprintf(stderr, "    %.*s\n", (int)n, p);
        p += n + (p[n] == '\n');
    }
    free(err);
}

/* One host's preflight output: the shared run directory, the version, the
 * free ports. Returns 0, or -1 after the message of a version mismatch. */
static int s_pf_read(struct launch *L, size_t h, const char *out_path)
{
    char *out = s_slurp(out_path), *line[2] = {"", ""};
    struct ss_launch_argv ports = {0};
    size_t i = 0;
    for (char *save = NULL, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        if (i < 2)
            line[i++] = l;
        else
            ss_launch_argv_add(&ports, l);
    L->hosts[h].shared = !strcmp(line[0], L->token) || !strcmp(L->exec, "local");
    if (strcmp(line[1], s_cf(L, "version"))) {
        ss_launch_err("host %s runs '%s', this one '%s': install the same "
                      "version on every host\n",
                      L->hosts[h].name, line[1][0] ? line[1] : "?", s_cf(L, "version"));
        free(out);
        ss_launch_argv_free(&ports);
        return -1;
    }
    if (ports.n > 0) {
        size_t len = 1;
        for (size_t k = 0; k < ports.n; k++)
            len += strlen(ports.v[k]) + 1;
        L->hosts[h].ports = ss_calloc(1, len);
        for (size_t k = 0; k < ports.n; k++) {
            if (k)
                strcat(L->hosts[h].ports, ",");
            strcat(L->hosts[h].ports, ports.v[k]);
        }
    }
    free(out);
    ss_launch_argv_free(&ports);
    return 0;
}

/* Every host's preflight at once (shadow-ctl preflight there: the run
 * directory, the job file and binaries, the version, free ports). */
static void s_preflight(struct launch *L)
{
    const char *tmp = getenv("TMPDIR");
    char dir[S_PATH], out_path[S_PATH + 32], err_path[S_PATH + 32];
    pid_t *pids = ss_calloc(L->n_hosts + 1, sizeof *pids);
    snprintf(dir, sizeof dir, "%s/shadow-launch-pf.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        ss_launch_err("cannot make a folder in %s: %s\n", tmp ? tmp : "/tmp", strerror(errno));
        s_exit(L, 2);
    }
    for (size_t h = 0; h < L->n_hosts; h++) {
        struct ss_launch_argv a = {0};
        ss_launch_argv_addf(&a, "%s/shadow-ctl", L->rbin);
        ss_launch_argv_add(&a, "preflight");
        s_pf_args(L, h, &a);
        char **cmd = s_on_host(L, h, a.v);
        snprintf(out_path, sizeof out_path, "%s/%zu.out", dir, h);
        snprintf(err_path, sizeof err_path, "%s/%zu.err", dir, h);
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        struct ss_launch_io io = {
            .in_path = L->host_stdin, .out_fd = o, .err_fd = e, .who = SS_LAUNCH_WHO};
        pids[h] = (o >= 0 && e >= 0) ? ss_launch_spawn(cmd, &io) : -1;
        if (o >= 0)
            close(o);
        if (e >= 0)
            close(e);
        ss_backend_argv_free(&cmd);
        ss_launch_argv_free(&a);
    }
    for (size_t h = 0; h < L->n_hosts; h++) {
        int rc = pids[h] > 0 ? ss_launch_wait(pids[h]) : 127;
        snprintf(out_path, sizeof out_path, "%s/%zu.out", dir, h);
        snprintf(err_path, sizeof err_path, "%s/%zu.err", dir, h);
        if (rc != 0)
            s_pf_failed(L, h, rc, err_path);
        if (rc != 0 || s_pf_read(L, h, out_path) != 0) {
            (void)ss_fs_remove_tree(dir);
            free(pids);
            s_exit(L, 1);
        }
    }
    (void)ss_fs_remove_tree(dir);
    free(pids);
}

/* ------------------------------------------------------------ the files of the job */

/* The plan again with each host's free ports (unless they are fixed). */
static void s_plan_ports(struct launch *L)
{
    struct ss_launch_argv a = {0};
    char ipc[S_PATH + 8];
    if (!strcmp(ss_launch_opts_get(L->o, "fixed_ports"), "1"))
        return;
    snprintf(ipc, sizeof ipc, "%s/ipc", L->run_dir);
    if (L->use_ipc && ss_mkdirs(ipc) != 0) {
        ss_launch_err("cannot create %s: %s\n", ipc, strerror(errno));
        s_exit(L, 2);
    }
    ss_launch_argv_add(&a, "--complete");
    for (size_t h = 0; h < L->n_hosts; h++)
        if (L->hosts[h].ports && L->hosts[h].ports[0]) {
            ss_launch_argv_add(&a, "--ports");
            ss_launch_argv_addf(&a, "%zu=%s", h, L->hosts[h].ports);
        }
    s_plan(L, &a);
    ss_launch_argv_free(&a);
}

/* RUN_DIR/admin.token (a local job's admin secret, mode 0600: 24 bytes of
 * the kernel's random source in hex), RUN_DIR/metrics.ports (the plan's
 * metrics lines) and RUN_DIR/cluster.args (what shadow-ctl --run reads: -c
 * JOB, every --set, job.run_dir; one argument a line). */
static void s_job_files(struct launch *L)
{
    char path[S_PATH + 32];
    if (!strcmp(s_cf(L, "admin_token"), "1")) {
        unsigned char r[24];
        char hex[49];
        snprintf(path, sizeof path, "%s/admin.token", L->run_dir);
        s_rm(path);
        ssize_t got = getrandom(r, sizeof r, 0);
        for (size_t i = 0; got == (ssize_t)sizeof r && i < sizeof r; i++)
            snprintf(hex + 2 * i, 3, "%02x", r[i]);
        if (got != (ssize_t)sizeof r || s_write_file(path, hex, 48, 0600) != 0) {
            ss_launch_err("cannot write %s\n", path);
            s_exit(L, 2);
        }
    }
    if (L->metrics.n > 0) {
        char *text = NULL;
        size_t len = 0;
        FILE *fp = open_memstream(&text, &len);
        for (size_t i = 0; i < L->metrics.n; i++)
            fprintf(fp, "%s\n", L->metrics.v[i]);
        fclose(fp);
        snprintf(path, sizeof path, "%s/metrics.ports", L->run_dir);
        int rc = s_write_file(path, text, len, 0644);
        free(text);
        if (rc != 0) {
            ss_launch_err("cannot write %s\n", path);
            s_exit(L, 2);
        }
        ss_launch_say("%s; list in %s\n", s_cf(L, "metrics_note"), path);
        fflush(stdout);
    }
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    fprintf(fp, "-c\n%s\n", L->job);
    for (size_t i = 0; i < L->sets.n; i++)
        fprintf(fp, "%s\n", L->sets.v[i]);
    for (size_t i = 0; i < L->plan_sets.n; i++)
        fprintf(fp, "%s\n", L->plan_sets.v[i]);
    fprintf(fp, "--set\njob.run_dir=%s\n", L->run_dir);
    fclose(fp);
    snprintf(path, sizeof path, "%s/cluster.args", L->run_dir);
    (void)s_write_file(path, text, len, 0644);
    free(text);
}

/* The launch's data (common/ss_launch_data.h) into RUN_DIR/.super.data.
 * Returns 0, or -1 when it cannot be written. */
static int s_write_data(struct launch *L)
{
    char *buf = NULL, num[64];
    size_t len = 0, n;
    const char *po = ss_launch_opts_get(L->o, "predict_out");
    const char *kv[][2] = {
        {"trainers", s_cf(L, "cluster.trainers.count")},
        {"allow_loss", s_cf(L, "job.allow_trainer_loss")},
        {"max_ps_restarts", s_cf(L, "job.max_ps_restarts")},
        {"quiet", ss_launch_opts_get(L->o, "quiet")},
        {"run_dir", L->run_dir}, {"logs", L->logs}, {"jobckpt", L->jobckpt},
        {"keep_fd", NULL}, {"exec", L->exec}, {"step_name", L->step_name},
        {"traits", s_cf(L, "traits")}, {"eval_only", L->eval_only},
        {"predict", ss_launch_opts_get(L->o, "predict")}, {"predict_out", po},
        {"pred_where", strcmp(po, "-") ? po : "standard output"}, {"pred_fd", NULL},
        {"pred_in", NULL}, {"skip_bad", ss_launch_opts_get(L->o, "skip_bad")},
        {"resume", L->resume}, {"hosts_file", L->hosts_file}, {"algo", s_cf(L, "algo")},
        {"data_eval", s_cf(L, "data.eval")}, {"job", L->job}, {"bin", L->bin},
        {"rbin", L->rbin}, {"host_stdin", L->host_stdin},
        {"n_emb", s_cf(L, "cluster.embedding.count")},
        {"n_sync", s_cf(L, "cluster.sync.count")},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        const char *v = kv[i][1];
        int fd = !strcmp(kv[i][0], "keep_fd")   ? L->lock_fd
                 : !strcmp(kv[i][0], "pred_fd") ? L->pred_fd
                 : !strcmp(kv[i][0], "pred_in") ? L->pred_in
                                                : -2;
        if (fd != -2) {
            snprintf(num, sizeof num, "%d", fd);
            v = fd >= 0 ? num : "";
        }
        s_words(&buf, &len, kv[i][0]);
        s_words(&buf, &len, v);
    }
    char *const *opts = ss_launch_opts_ssh_opts(L->o, &n);
    for (size_t i = 0; i < n; i++) {
        s_words(&buf, &len, "ssh_opt");
        s_words(&buf, &len, opts[i]);
    }
    for (int pass = 0; pass < 2; pass++) {
        const struct ss_launch_argv *w = pass ? &L->plan_sets : &L->sets;
        for (size_t i = 0; i < w->n; i++) {
            s_words(&buf, &len, "set");
            s_words(&buf, &len, w->v[i]);
        }
    }
    for (size_t h = 0; h < L->n_hosts; h++) {
        const struct s_host *H = &L->hosts[h];
        s_words(&buf, &len, "host");
        s_words(&buf, &len, H->name);
        s_words(&buf, &len, H->target ? H->target : "");
        snprintf(num, sizeof num, "%d", H->cpus);
        s_words(&buf, &len, num);
        s_words(&buf, &len, H->pdir);
        s_words(&buf, &len, H->ckdir);
        s_words(&buf, &len, H->shared ? "1" : "0");
    }
    for (int r = 0; r < 3; r++)
        for (size_t k = 0; k < L->n_place[r]; k++) {
            if (L->place[r][k] < 0)
                continue;
            s_words(&buf, &len, "place");
            s_words(&buf, &len, s_roles[r]);
            snprintf(num, sizeof num, "%zu", k);
            s_words(&buf, &len, num);
            snprintf(num, sizeof num, "%d", L->place[r][k]);
            s_words(&buf, &len, num);
        }
    int rc = s_write_file(L->data, buf, len, 0644);
    free(buf);
    return rc;
}

/* ------------------------------------------------------------ the way out */

/* Run BIN/shadow-super MODE RUN_DIR [more...] (NULL-terminated), its
 * descriptors ours; returns its exit status. */
static int s_super_helper(const struct launch *L, const char *mode,
                          const struct ss_launch_argv *more)
{
    struct ss_launch_argv a = {0};
    ss_launch_argv_addf(&a, "%s/shadow-super", L->bin);
    ss_launch_argv_add(&a, mode);
    ss_launch_argv_add(&a, L->run_dir);
    for (size_t i = 0; more && i < more->n; i++)
        ss_launch_argv_add(&a, more->v[i]);
    int rc = ss_launch_run(a.v, &s_io_ours);
    ss_launch_argv_free(&a);
    return rc;
}

/* Copy each host's run directory into RUN_DIR and join the parts
 * (shadow-super --gather: common/ss_launch_copy.h), once. */
static void s_gather(struct launch *L)
{
    if (L->gathered)
        return;
    L->gathered = 1;
    (void)s_super_helper(L, "--gather", NULL);
}

/* The command that resumes this job, into buf. */
static const char *s_resume_cmd(const struct launch *L, char *buf, size_t len)
{
    char sh[S_PATH + 32];
    struct stat a, b;
    snprintf(sh, sizeof sh, "%s/slurm-hosts", L->run_dir);
    if (!strcmp(L->exec, "srun") && L->hosts_file[0] && stat(L->hosts_file, &a) == 0 &&
        stat(sh, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        snprintf(buf, len, "%s/shadow-slurm --resume %s (inside salloc or sbatch; to submit it: "
                 "%s/shadow-slurm --sbatch --resume %s -- SBATCH_OPTIONS)", L->here, L->run_dir,
                 L->here, L->run_dir);
    else
        snprintf(buf, len, "%s --resume %s", L->script, L->run_dir);
    return buf;
}

/* Stop the supervisor when it still runs (it stops what it started), then
 * srun's steps. */
static void s_teardown(struct launch *L)
{
    if (L->sup > 0) {
        kill(L->sup, SIGINT);
        (void)ss_launch_wait(L->sup);
        L->sup = 0;
    }
    s_srun_cancel_steps(L);
}

/* The way out of a failed job once its message is said: its processes
 * stopped, the hosts gathered, then shadow-super --failed (a result.json
 * for an output model that could not be saved, the job checkpoint to go on
 * from, the logs); exits with die_rc (1 by default). */
static void s_die_after(struct launch *L)
{
    char cmd[3 * S_PATH];
    struct ss_launch_argv a = {0};
    s_teardown(L);
    s_gather(L);
    ss_launch_argv_add(&a, "--job-name");
    ss_launch_argv_add(&a, s_cf(L, "job.name"));
    ss_launch_argv_add(&a, "--start-id");
    ss_launch_argv_add(&a, L->start_id);
    ss_launch_argv_add(&a, "--resume-cmd");
    ss_launch_argv_add(&a, s_resume_cmd(L, cmd, sizeof cmd));
    if (L->trainers_failed)
        ss_launch_argv_add(&a, "--trainers-failed");
    (void)s_super_helper(L, "--failed", &a);
    ss_launch_argv_free(&a);
    s_exit(L, L->die_rc ? L->die_rc : 1);
}

static void s_die(struct launch *L, const char *msg)
{
    ss_launch_err("%s\n", msg);
    s_die_after(L);
}

/* A signal's way out: a fresh line after trainer 0's progress. */
static void s_stop_now(struct launch *L, const char *msg)
{
    printf("\n");
    fflush(stdout);
    s_die(L, msg);
}

/* The signals that came since the last look (blocked: nothing is lost),
 * by the rules of ss_launch.h: SIGINT stops the job; SIGTERM asks for a job
 * checkpoint, a second one stops it (with --eval-only the first). */
static void s_take_signals(struct launch *L)
{
    sigset_t set;
    const struct timespec zero = {0, 0};
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    for (int sig; (sig = sigtimedwait(&set, NULL, &zero)) > 0;) {
        if (sig == SIGINT || L->eval_only[0])
            s_stop_now(L, "interrupted: stopping the job");
        if (L->ckpt_req)
            s_stop_now(L, "second SIGTERM: stopping the job at once");
        L->ckpt_req = 1;
    }
}

/* From here on the signals are the launch's: blocked, taken between steps. */
static void s_own_signals(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL);
}

/* Each trainer's control pipe (ssh, srun; none for --eval-only's scorer):
 * a fifo in the keep folder held open here, named in the launch data. */
static void s_ctl_pipes(struct launch *L)
{
    char path[S_PATH + 32], msg[S_PATH + 96];
    L->ctl_fd = ss_calloc((size_t)L->n_tr + 1, sizeof *L->ctl_fd);
    for (int r = 0; r <= L->n_tr; r++)
        L->ctl_fd[r] = -1;
    if (L->eval_only[0] || !L->backend || !L->backend->remote)
        return;
    for (int r = 0; r < L->n_tr; r++) {
        snprintf(path, sizeof path, "%s/ctl-%d", L->keep_dir, r);
        if (mkfifo(path, 0600) != 0 || (L->ctl_fd[r] = open(path, O_RDWR | O_CLOEXEC)) < 0) {
            snprintf(msg, sizeof msg, "cannot make trainer %d's control pipe in %s", r,
                     L->keep_dir);
            s_die(L, msg);
        }
        char *buf = NULL, num[16];
        size_t len = 0;
        int fd = open(L->data, O_WRONLY | O_APPEND | O_CLOEXEC);
        snprintf(num, sizeof num, "%d", r);
        s_words(&buf, &len, "ctl");
        s_words(&buf, &len, num);
        s_words(&buf, &len, path);
        int rc = fd >= 0 ? ss_fs_write_all(fd, buf, len) : -1;
        free(buf);
        if (fd < 0 || close(fd) != 0 || rc != 0) {
            snprintf(msg, sizeof msg, "cannot write %s", L->data);
            s_die(L, msg);
        }
    }
}

/* ------------------------------------------------------------ supervision */

static long long s_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* shadow-super --spec: started in a process group of its own (it does
 * that itself), SIGTERM and SIGINT passed on while it runs; the
 * descriptors for trainer 0 (--out -, data.eval -) are its alone. Returns
 * its exit status. */
static int s_supervise(struct launch *L)
{
    struct ss_launch_argv a = {0};
    int keep[4100];
    size_t n_keep = 0;
    if (L->pred_fd >= 0)
        keep[n_keep++] = L->pred_fd;
    if (L->pred_in >= 0)
        keep[n_keep++] = L->pred_in;
    for (int r = 0; r < L->n_tr && n_keep < 4096; r++)
        if (L->ctl_fd[r] >= 0)
            keep[n_keep++] = L->ctl_fd[r];
    struct ss_launch_io io = {.in_path = "/dev/null",
                              .out_fd = -1,
                              .err_fd = -1,
                              .keep = keep,
                              .n_keep = n_keep,
                              .who = SS_LAUNCH_WHO};
    ss_launch_argv_addf(&a, "%s/shadow-super", L->bin);
    ss_launch_argv_add(&a, "--spec");
    ss_launch_argv_add(&a, L->spec);
    ss_launch_argv_add(&a, "--outcome");
    ss_launch_argv_add(&a, L->outcome);
    L->sup = ss_launch_spawn(a.v, &io);
    ss_launch_argv_free(&a);
    if (L->sup < 0) {
        L->sup = 0;
        return 127;
    }
    if (L->ckpt_req)
        kill(L->sup, SIGTERM);   /* (one came before it ran) */
    if (L->pred_fd >= 0)
        close(L->pred_fd);
    if (L->pred_in >= 0)
        close(L->pred_in);
    L->pred_fd = L->pred_in = -1;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGCHLD);
    for (;;) {
        int st;
        if (waitpid(L->sup, &st, WNOHANG) == L->sup) {
            L->sup = 0;
            return ss_backend_exit_status(st);
        }
        const struct timespec tick = {0, 200 * 1000 * 1000};
        int sig = sigtimedwait(&set, NULL, &tick);
        if (sig == SIGINT || sig == SIGTERM)
            kill(L->sup, sig);
    }
}

/* The supervisor's outcome (KEY VALUE lines): a failure's way out, else 0. */
static void s_outcome(struct launch *L, int sup_rc)
{
    char msg[128];
    struct stat st;
    if (stat(L->outcome, &st) != 0 || st.st_size == 0) {
        snprintf(msg, sizeof msg, "shadow-super ended without an outcome (exit %d)", sup_rc);
        s_die(L, msg);
    }
    FILE *fp = fopen(L->outcome, "r");
    char line[4096], rc[64] = "1";
    int tf = 0;
    while (fp && fgets(line, sizeof line, fp)) {
        line[strcspn(line, "\n")] = '\0';
        if (!strncmp(line, "rc ", 3))
            snprintf(rc, sizeof rc, "%s", line + 3);
        else if (!strcmp(line, "trainers_failed 1"))
            tf = 1;
    }
    if (fp)
        fclose(fp);
    if (strcmp(rc, "0")) {
        /* shadow-super said why and stopped every process */
        L->die_rc = atoi(rc) ? atoi(rc) : 1;
        L->trainers_failed = tf;
        s_die_after(L);
    }
}

/* How the job ends (shadow-super --finish: the verdict's message, and when
 * it finished result.json, the summary, the plots); returns its status. */
static int s_finish(struct launch *L, long long t0_us)
{
    struct ss_launch_argv a = {0};
    char cmd[3 * S_PATH];
    long long us = s_now_us() - t0_us + 500;
    ss_launch_argv_add(&a, "--job-name");
    ss_launch_argv_add(&a, s_cf(L, "job.name"));
    ss_launch_argv_add(&a, "--wall-s");
    ss_launch_argv_addf(&a, "%lld.%03lld", us / 1000000, us / 1000 % 1000);
    ss_launch_argv_add(&a, "--start-id");
    ss_launch_argv_add(&a, L->start_id);
    ss_launch_argv_add(&a, "--resume-cmd");
    ss_launch_argv_add(&a, s_resume_cmd(L, cmd, sizeof cmd));
    if (L->resume[0]) {
        ss_launch_argv_add(&a, "--resumed-from");
        ss_launch_argv_add(&a, L->resumed_from);
    }
    if (strcmp(ss_launch_opts_get(L->o, "no_plots"), "1")) {
        ss_launch_argv_add(&a, "--plot");
        ss_launch_argv_addf(&a, "%s/shadow-plot", L->here);
    }
    int rc = s_super_helper(L, "--finish", &a);
    ss_launch_argv_free(&a);
    return rc;
}

/* ------------------------------------------------------------ the run */

/* What the options and the plan give, before anything is written. */
static void s_setup(struct launch *L, const ss_launch_opts_t *o)
{
    size_t n;
    char *const *sets = ss_launch_opts_sets(o, &n);
    memset(L, 0, sizeof *L);
    L->o = o;
    L->script = ss_launch_opts_get(o, "script");
    L->lock_fd = L->keep_w = L->pred_fd = L->pred_in = -1;
    L->job = ss_launch_opts_get(o, "job");
    L->bin = ss_launch_opts_get(o, "bin");
    L->rbin = ss_launch_opts_get(o, "rbin");
    L->exec = ss_launch_opts_get(o, "exec");
    L->hosts_file = ss_launch_opts_get(o, "hosts_file");
    L->eval_only = ss_launch_opts_get(o, "eval_only");
    L->resume = ss_launch_opts_get(o, "resume");
    L->predict = !strcmp(ss_launch_opts_get(o, "predict"), "1");
    L->backend = ss_backend_find(L->exec);
    for (size_t i = 0; i < n; i++) {
        ss_launch_argv_add(&L->sets, "--set");
        ss_launch_argv_add(&L->sets, sets[i]);
    }
    snprintf(L->here, sizeof L->here, "%s", ss_launch_opts_get(o, "here"));
}

/* --out -: the predictions alone on standard output: PRED_FD keeps it for
 * trainer 0, and everything else the launcher prints goes to stderr. */
static void s_predict_stdout(struct launch *L)
{
    if (strcmp(ss_launch_opts_get(L->o, "predict_out"), "-"))
        return;
    fflush(stdout);
    L->pred_fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
    dup2(2, 1);
}

int ss_launch_run_job(const ss_launch_opts_t *opts, char *const *args, int n_args)
{
    struct launch launch, *L = &launch;
    struct ss_launch_argv first = {0};
    char err[1024];
    ss_assert(opts);
    s_setup(L, opts);
    srand((unsigned)(getpid() ^ s_now_us()));
    const char *cwd = ss_launch_opts_get(opts, "cwd");
    if (chdir(cwd) != 0) {
        ss_launch_err("cannot go to %s: %s\n", cwd, strerror(errno));
        return 2;
    }
    setenv("PWD", cwd, 1);
    s_predict_stdout(L);
    ss_launch_argv_add(&first, "--check-data");
    ss_launch_argv_add(&first, L->eval_only[0] ? "eval" : "all");
    s_plan(L, &first);
    ss_launch_argv_free(&first);
    snprintf(L->run_dir, sizeof L->run_dir, "%s", s_cf(L, "run_dir"));
    snprintf(L->logs, sizeof L->logs, "%s/logs", L->run_dir);
    snprintf(L->jobckpt, sizeof L->jobckpt, "%s/jobckpt", L->run_dir);
    snprintf(L->data, sizeof L->data, "%s/.super.data", L->run_dir);
    snprintf(L->spec, sizeof L->spec, "%s/.super.spec", L->run_dir);
    snprintf(L->outcome, sizeof L->outcome, "%s/.super.outcome", L->run_dir);
    L->n_tr = atoi(s_cf(L, "cluster.trainers.count"));
    s_host_dirs(L);
    s_scoring_rules(L);
    if (ss_mkdirs(L->logs) != 0) {
        ss_launch_err("cannot create %s: %s\n", L->logs, strerror(errno));
        s_exit(L, 2);
    }
    s_lock(L);
    s_run_dir(L, args, n_args);
    s_srun(L);
    s_keep(L);
    s_preflight(L);
    s_plan_ports(L);
    s_job_files(L);
    if (s_write_data(L) != 0) {
        snprintf(err, sizeof err, "cannot write %s", L->data);
        s_die(L, err);
    }
    s_own_signals();
    /* --resume on hosts that share no file system with RUN_DIR: each gets
     * its processes' part of RUN_DIR/jobckpt (ss_launch_copy.h) */
    if (L->resume[0] && s_super_helper(L, "--push-resume", NULL) != 0)
        s_exit(L, 1);
    s_take_signals(L);
    s_ctl_pipes(L);
    int n_run = 0;
    if (ss_spec_build(L->data, L->spec, &n_run, err, sizeof err) != 0) {
        ss_launch_err("%s\n", err);
        snprintf(err, sizeof err, "cannot build %s", L->spec);
        s_die(L, err);
    }
    s_take_signals(L);
    long long t0 = s_now_us();
    int sup_rc = s_supervise(L);
    s_outcome(L, sup_rc);
    s_srun_cancel_steps(L);   /* a PS killed by shadow-super (srun: its client only) */
    s_gather(L);
    s_take_signals(L);
    int rc = s_finish(L, t0);
    s_take_signals(L);
    s_exit(L, rc);
    return rc;
}
