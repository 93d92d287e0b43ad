/* super_main.c - shadow-super: the supervisor of a job that the launcher
 * (shadow-ctl launch, common/ss_launch.h) has planned (common/ss_super.h
 * has the rules).
 *
 * The launcher writes a spec file of NUL-terminated words (printf '%s\0'),
 * records one after another:
 *
 *   job KEY VALUE          a setting of struct ss_super_job (s_job_key); "job
 *                          exec MODE" (local, ssh, srun: common/ss_backend.h)
 *                          sets how each command line reaches its host
 *   host NAME TARGET CPUS  the next host (index order): its name for messages,
 *                          how the mode reaches it, the job's CPUs there (srun)
 *   ssh_opt WORD           one of the user's ssh options (--ssh-opts)
 *   ready LINE             a line printed once the PSs are ready
 *   ps ROLE INDEX HOST LOG IN
 *   trainer RANK HOST LOG IN OUT_FD CTL    (OUT_FD, CTL: "-" for none)
 *   argv VARIANT N WORD... a command line of the last ps or trainer, as it runs
 *                          on its host (shadow-super puts the mode's ssh or
 *                          srun and the remote TERM wrapper around it);
 *                          VARIANT: start empty recovery resume age shutdown
 *   shutdown_all N WORD... one command that shuts every PS down (instead of
 *                          each one's shutdown argv)
 *
 * and reads back the outcome file, one "KEY VALUE" a line (s_write_outcome).
 * Signals: SIGTERM and SIGINT reach the loop through a self-pipe. The
 * supervisor runs in a process group of its own, so that a signal reaches
 * it once (from the launcher), and dies with the launcher (PDEATHSIG). The
 * two signals are held from its first instant (ss_sigstart.h): one the
 * launcher passes on right after starting it waits for the handler. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ss_backend.h"
#include "ss_err.h"
#include "ss_launch_copy.h"
#include "ss_launch_data.h"
#include "ss_launch_end.h"
#include "ss_mem.h"
#include "ss_path.h"
#include "ss_rundir.h"
#include "ss_spec.h"
#include "ss_sigstart.h"
#include "ss_super.h"
#include "ss_version.h"

#define S_MAX_PROCS 4096
#define S_MAX_HOSTS 4096
#define S_MAX_READY 16

SS_SIGSTART_HOLD_AT_LOAD;   /* a SIGTERM the launcher passes on at once waits */

static int s_sig_w = -1;   /* the self-pipe's write end (the signal handler's) */

/* Everything a spec holds; the words point into text. */
struct spec {
    char *text;
    size_t len;
    struct ss_super_job job;
    struct ss_super_proc *procs;
    size_t n;
    const char *hosts[S_MAX_HOSTS];
    const char *targets[S_MAX_HOSTS]; /* how the mode reaches each host */
    int cpus[S_MAX_HOSTS];            /* the job's CPUs on each (srun) */
    const char *ssh_opts[256];        /* the user's ssh options */
    size_t n_ssh_opts;
    const struct ss_backend *backend; /* job exec (local by default) */
    const char *step_name;            /* job step_name (srun) */
    char **wrapped[S_MAX_PROCS * SS_SUPER_N_ARGV]; /* command lines as they start */
    size_t n_wrapped;
    const char *ready[S_MAX_READY];
    const char *allow_loss; /* job.allow_trainer_loss: true, false or auto */
    int lose_trainer;       /* the sync rules may lose a trainer (auto's answer) */
    char **argv_store;   /* every argv array, freed at the end */
    size_t n_argv;
};

static void s_usage(FILE *fp)
{
    fprintf(fp, "usage: shadow-super --spec FILE --outcome FILE\n"
            "       shadow-super --verdict --outcome FILE --jobckpt DIR --trainers N\n"
            "                    [--start-id ID] [--resumed] [--say --resume-cmd CMD --logs DIR]\n"
            "       shadow-super --resumable --jobckpt DIR [--start-id ID] [--resumed]\n"
            "                    [--say --resume-cmd CMD]\n"
            "       shadow-super --missing DIR\n"
            "       shadow-super --manifest DIR KEY\n"
            "       shadow-super --push-resume RUN_DIR\n"
            "       shadow-super --gather RUN_DIR\n"
            "       shadow-super --finish RUN_DIR [--job-name NAME] [--wall-s S] [--start-id ID]\n"
            "                    [--resume-cmd CMD] [--resumed-from N] [--plot SCRIPT]\n"
            "       shadow-super --failed RUN_DIR [--job-name NAME] [--start-id ID]\n"
            "                    [--resume-cmd CMD] [--trainers-failed]\n"
            "       shadow-super --on-host local|ssh|srun [--target T] [--cpus N] [--step NAME]\n"
            "                    [--ssh-opt WORD]... [--pipe] -- ARGV...\n"
            "       shadow-super --slurm-cpus CPUS_PER_NODE NODE...\n"
            "\n"
            "Run the PSs and trainers of a job as FILE describes them (the launcher,\n"
            "shadow-ctl launch, writes it: NUL-terminated words, records job, host, ready,\n"
            "ps, trainer, argv; see tools/super_main.c), apply the job's restart,\n"
            "trainer-loss and signal rules (common/ss_super.h) and write what happened to\n"
            "the outcome file as KEY VALUE lines. Exit status: 0 when the outcome is\n"
            "written, 2 on a bad spec.\n"
            "\n"
            "--verdict: once the run directories are gathered, how the job ends, from\n"
            "the outcome and the job checkpoint in DIR: prints report (exit 0 after the\n"
            "report), saved (75), unsaved (1), kept (75) or kept-none (1), then the\n"
            "checkpoint's examples. --resumable: exit 0 when DIR holds a complete job\n"
            "checkpoint of this job (newer than ID, the one there at the launch's start,\n"
            "or the one --resumed from), printing its examples. --missing: the files\n"
            "DIR's MANIFEST names that are missing or empty (\" NAME\" each; nothing when\n"
            "complete). --say: instead of the words, the launcher's message for the\n"
            "verdict (nothing for report) or the resumable checkpoint, naming CMD as the\n"
            "command that resumes the job and DIR as its logs.\n"
            "\n"
            "--manifest: the value of KEY in DIR/MANIFEST (nothing when none).\n"
            "--push-resume: copy to each host that shares no file system with RUN_DIR the\n"
            "part of RUN_DIR/jobckpt its processes resume from; --gather: copy each such\n"
            "host's run directory into RUN_DIR and join the parts of the model and the job\n"
            "checkpoint (common/ss_launch_copy.h; the launch's data: RUN_DIR/.super.data,\n"
            "its outcome: RUN_DIR/.super.outcome). --finish: once gathered, --verdict --say\n"
            "for that launch, and when it finished, its report (shadow-ctl report), plots\n"
            "(SCRIPT: shadow-plot; none without) and the job checkpoint's removal\n"
            "(common/ss_launch_end.h); the exit status is the launcher's. --failed: once a\n"
            "failed job is gathered, the result.json of a model that could not be saved\n"
            "(--trainers-failed), the job checkpoint to resume from, the logs.\n"
            "--on-host: run ARGV on a host the way --exec MODE reaches it\n"
            "(common/ss_backend.h; --pipe: reading this standard input, for a copy).\n"
            "--slurm-cpus: NODE CPUS lines from SLURM_JOB_CPUS_PER_NODE (\"8(x2),4\") and\n"
            "the job's nodes.\n"
            "\n"
            "  --spec FILE      the processes and the job's rules\n"
            "  --outcome FILE   where the outcome goes (--verdict: where it is)\n"
            "  --jobckpt DIR    the job checkpoint folder (RUN_DIR/jobckpt)\n"
            "  --trainers N     the trainers the job ran\n"
            "  --start-id ID    the job checkpoint's save_id when the launch began\n"
            "  --resumed        the launch resumed from that job checkpoint\n"
            "  -h, --help       this text\n"
            "  --version        print the version and git revision\n");
}

static void s_on_signal(int sig)
{
    unsigned char b = (unsigned char)sig;
    int saved = errno;
    if (write(s_sig_w, &b, 1) < 0) {
        /* a full pipe holds signals enough */
    }
    errno = saved;
}

/* The next word of the spec, or NULL at its end. */
static const char *s_word(struct spec *sp, size_t *at)
{
    const char *w;
    if (*at >= sp->len)
        return NULL;
    w = sp->text + *at;
    *at += strlen(w) + 1;
    return w;
}

static int s_int(const char *w, int *v)
{
    char *end;
    long x;
    if (!w || !*w)
        return -1;
    errno = 0;
    x = strtol(w, &end, 10);
    if (*end || errno || x < -1 || x > 1000000000L)
        return -1;
    *v = (int)x;
    return 0;
}

/* job KEY VALUE */
static int s_job_key(struct spec *sp, const char *k, const char *v)
{
    struct ss_super_job *j = &sp->job;
    static const struct { const char *key; size_t off; } ints[] = {
        {"trainers", offsetof(struct ss_super_job, n_trainers)},
        {"max_ps_restarts", offsetof(struct ss_super_job, max_ps_restarts)},
        {"eval_only", offsetof(struct ss_super_job, eval_only)},
        {"predict_stdout", offsetof(struct ss_super_job, predict_stdout)},
        {"resumed", offsetof(struct ss_super_job, resumed)},
        {"named_hosts", offsetof(struct ss_super_job, named_hosts)},
        {"quiet", offsetof(struct ss_super_job, quiet)},
        {"keep_fd", offsetof(struct ss_super_job, keep_fd)},
        {"die_with_super", offsetof(struct ss_super_job, die_with_super)},
        {"ready_timeout_ms", offsetof(struct ss_super_job, ready_timeout_ms)},
        {"ckpt_timeout_s", offsetof(struct ss_super_job, ckpt_timeout_s)},
        {"poll_ms", offsetof(struct ss_super_job, poll_ms)},
    };
    size_t i;
    if (!k || !v)
        return -1;
    if (strcmp(k, "allow_loss") == 0)   /* job.allow_trainer_loss as configured */
        sp->allow_loss = v;
    else if (strcmp(k, "lose_trainer") == 0)   /* the sync rules' trait */
        return s_int(v, &sp->lose_trainer);
    else if (strcmp(k, "exec") == 0)
        return (sp->backend = ss_backend_find(v)) ? 0 : -1;
    else if (strcmp(k, "step_name") == 0)
        sp->step_name = v;
    else if (strcmp(k, "run_dir") == 0)
        j->run_dir = v;
    else if (strcmp(k, "logs") == 0)
        j->logs = v;
    else if (strcmp(k, "jobckpt") == 0)
        j->jobckpt = v;
    else {
        for (i = 0; i < sizeof ints / sizeof ints[0]; i++)
            if (strcmp(k, ints[i].key) == 0)
                return s_int(v, (int *)((char *)j + ints[i].off));
        return -1;
    }
    return 0;
}

static int s_variant(const char *w)
{
    static const char *const names[SS_SUPER_N_ARGV] = {"start", "empty", "recovery", "resume",
                                                       "age", "shutdown"};
    int i;
    for (i = 0; w && i < SS_SUPER_N_ARGV; i++)
        if (strcmp(w, names[i]) == 0)
            return i;
    return -1;
}

/* N WORD...: a command line, kept in argv_store; NULL on a bad record */
static char **s_words(struct spec *sp, size_t *at)
{
    int n, i;
    char **argv;
    if (s_int(s_word(sp, at), &n) != 0 || n < 1)
        return NULL;
    argv = ss_calloc((size_t)n + 1, sizeof *argv);
    sp->argv_store[sp->n_argv++] = (char *)argv;
    for (i = 0; i < n; i++)
        if (!(argv[i] = (char *)s_word(sp, at)))
            return NULL;
    return argv;
}

/* argv VARIANT N WORD... for the last process */
static int s_argv(struct spec *sp, size_t *at)
{
    int v = s_variant(s_word(sp, at));
    char **argv;
    if (v < 0 || !sp->n || !(argv = s_words(sp, at)))
        return -1;
    sp->procs[sp->n - 1].argv[v] = argv;
    return 0;
}

/* ps ROLE INDEX HOST LOG IN / trainer RANK HOST LOG IN OUT_FD CTL */
static int s_proc(struct spec *sp, size_t *at, int is_ps)
{
    struct ss_super_proc *p;
    const char *out_fd = NULL, *ctl = NULL;
    if (sp->n >= S_MAX_PROCS)
        return -1;
    p = &sp->procs[sp->n++];
    p->is_ps = is_ps;
    p->out_fd = -1;
    p->role = is_ps ? s_word(sp, at) : "trainer";
    if (!p->role || s_int(s_word(sp, at), &p->index) != 0 || s_int(s_word(sp, at), &p->host) != 0)
        return -1;
    p->log = s_word(sp, at);
    p->in = s_word(sp, at);
    if (!is_ps) {
        out_fd = s_word(sp, at);
        ctl = s_word(sp, at);
        if (!out_fd || !ctl || (strcmp(out_fd, "-") != 0 && s_int(out_fd, &p->out_fd) != 0))
            return -1;
        p->ctl = strcmp(ctl, "-") == 0 ? NULL : ctl;
    }
    return p->log && p->in ? 0 : -1;
}

/* The folder this process runs in, as the launcher's shell names it ($PWD,
 * when that is this folder), into buf; the remote modes start there. */
static const char *s_cwd(char *buf, size_t len)
{
    (void)ss_path_cwd(buf, len);   /* "/" when it has no name */
    return buf;
}

/* The job's mode (ss_backend.h) into its rules, and every process's command
 * lines made the ones that run them on their hosts. Returns 0, or -1 when a
 * process names a host past n_hosts. */
static int s_wrap(struct spec *sp, size_t n_hosts)
{
    const struct ss_backend *b = sp->backend ? sp->backend : ss_backend_find("local");
    char cwd[4096];
    struct ss_backend_where w = {.step_name = sp->step_name, .cwd = s_cwd(cwd, sizeof cwd),
                                 .ssh_opts = sp->ssh_opts, .n_ssh_opts = sp->n_ssh_opts};
    sp->job.backend = b;
    for (size_t i = 0; i < sp->n; i++) {
        struct ss_super_proc *p = &sp->procs[i];
        if (p->host < 0 || (size_t)p->host >= n_hosts)
            return -1;
        w.target = sp->targets[p->host];
        w.cpus = sp->cpus[p->host];
        for (int v = 0; v < SS_SUPER_N_ARGV; v++) {
            if (!p->argv[v])
                continue;
            sp->wrapped[sp->n_wrapped] = ss_backend_argv(b, &w, SS_BACKEND_RUN, p->argv[v]);
            p->argv[v] = sp->wrapped[sp->n_wrapped++];
        }
    }
    return 0;
}

/* Read and parse path into sp. Returns 0, or -1 with a message printed. */
static int s_load(struct spec *sp, const char *path)
{
    FILE *fp = fopen(path, "rb");
    size_t at = 0, cap = 1 << 16, n_words = 0, n_hosts = 0, n_ready = 0;
    const char *w, *where = "";
    int rc = 0;
    if (!fp) {
        fprintf(stderr, "shadow-super: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    sp->text = ss_malloc(cap);
    while ((at = fread(sp->text + sp->len, 1, cap - sp->len, fp)) > 0)
        if ((sp->len += at) == cap)
            sp->text = ss_realloc(sp->text, cap *= 2);
    fclose(fp);
    if (sp->len && sp->text[sp->len - 1] != '\0') {
        fprintf(stderr, "shadow-super: %s: the last word has no NUL\n", path);
        return -1;
    }
    for (at = 0; at < sp->len; at++)
        n_words += sp->text[at] == '\0';
    sp->procs = ss_calloc(S_MAX_PROCS, sizeof *sp->procs);
    sp->argv_store = ss_calloc(n_words + 1, sizeof *sp->argv_store);
    sp->job.keep_fd = -1;
    sp->job.ready_timeout_ms = 30000;
    sp->job.ckpt_timeout_s = 120;
    sp->job.poll_ms = 200;
    for (at = 0; rc == 0 && (w = s_word(sp, &at)) != NULL;) {
        where = w;
        if (strcmp(w, "job") == 0) {
            const char *k = s_word(sp, &at);
            rc = s_job_key(sp, k, s_word(sp, &at));
        } else if (strcmp(w, "host") == 0) {
            rc = n_hosts < S_MAX_HOSTS && (sp->hosts[n_hosts] = s_word(sp, &at)) &&
                 (sp->targets[n_hosts] = s_word(sp, &at)) &&
                 s_int(s_word(sp, &at), &sp->cpus[n_hosts]) == 0 ? 0 : -1;
            n_hosts++;
        } else if (strcmp(w, "ssh_opt") == 0) {
            rc = sp->n_ssh_opts < sizeof sp->ssh_opts / sizeof sp->ssh_opts[0] &&
                 (sp->ssh_opts[sp->n_ssh_opts++] = s_word(sp, &at)) ? 0 : -1;
        } else if (strcmp(w, "ready") == 0) {
            rc = n_ready < S_MAX_READY && (sp->ready[n_ready] = s_word(sp, &at)) ? 0 : -1;
            n_ready++;
        } else if (strcmp(w, "ps") == 0 || strcmp(w, "trainer") == 0) {
            rc = s_proc(sp, &at, w[0] == 'p');
        } else if (strcmp(w, "argv") == 0) {
            rc = s_argv(sp, &at);
        } else if (strcmp(w, "shutdown_all") == 0) {
            rc = (sp->job.shutdown_all = s_words(sp, &at)) ? 0 : -1;
        } else {
            rc = -1;
        }
    }
    if (rc != 0) {
        fprintf(stderr, "shadow-super: %s: a bad '%s' record (word %zu)\n", path, where, at);
        return -1;
    }
    sp->job.allow_loss = ss_super_allow_loss(sp->allow_loss ? sp->allow_loss : "false",
                                             sp->lose_trainer);
    if (sp->job.allow_loss < 0) {
        fprintf(stderr, "shadow-super: %s: job.allow_trainer_loss %s: want true, false or auto\n",
                path, sp->allow_loss);
        return -1;
    }
    sp->job.hosts = sp->hosts;
    sp->job.n_hosts = n_hosts;
    if (s_wrap(sp, n_hosts) != 0) {
        fprintf(stderr, "shadow-super: %s: a process on a host the spec does not name\n", path);
        return -1;
    }
    sp->job.ready_msg = sp->ready;
    sp->job.n_ready_msg = n_ready;
    return 0;
}

static void s_free(struct spec *sp)
{
    size_t i;
    for (i = 0; sp->argv_store && i < sp->n_argv; i++)
        ss_free(sp->argv_store[i]);
    for (i = 0; i < sp->n_wrapped; i++)
        ss_backend_argv_free(&sp->wrapped[i]);
    ss_free(sp->argv_store);
    ss_free(sp->procs);
    ss_free(sp->text);
}

static int s_write_outcome(const char *path, const struct ss_super_outcome *o)
{
    FILE *fp = fopen(path, "w");
    size_t h;
    if (!fp) {
        fprintf(stderr, "shadow-super: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(fp, "rc %d\ntrainers_failed %d\nn_ok %d\nn_ckpt %d\nn_kept %d\nn_lost %d\n"
            "n_restarts %d\n", o->rc, o->trainers_failed, o->n_ok, o->n_ckpt, o->n_kept,
            o->n_lost, o->n_restarts);
    fprintf(fp, "ckpt_old_id %s\nlost_text %s\n", o->ckpt_old_id, o->lost_text);
    for (h = 0; h < sizeof o->host_lost; h++)
        if (o->host_lost[h])
            fprintf(fp, "host_lost %zu\n", h);
    return fclose(fp) == 0 ? 0 : -1;
}

/* Read an outcome file back (the counts and the SIGTERM's save_id). */
static int s_read_outcome(const char *path, struct ss_super_outcome *o)
{
    FILE *fp = fopen(path, "r");
    char line[2048], key[64], val[1024];
    memset(o, 0, sizeof *o);
    if (!fp) {
        fprintf(stderr, "shadow-super: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof line, fp)) {
        val[0] = '\0';
        if (sscanf(line, "%63s %1023[^\n]", key, val) < 1)
            continue;
        if (!strcmp(key, "rc"))
            o->rc = atoi(val);
        else if (!strcmp(key, "n_ok"))
            o->n_ok = atoi(val);
        else if (!strcmp(key, "n_ckpt"))
            o->n_ckpt = atoi(val);
        else if (!strcmp(key, "n_kept"))
            o->n_kept = atoi(val);
        else if (!strcmp(key, "n_lost"))
            o->n_lost = atoi(val);
        else if (!strcmp(key, "ckpt_old_id"))
            snprintf(o->ckpt_old_id, sizeof o->ckpt_old_id, "%s", val);
        else if (!strcmp(key, "lost_text"))
            snprintf(o->lost_text, sizeof o->lost_text, "%s", val);
    }
    fclose(fp);
    return 0;
}

/* What --say adds to --verdict and --resumable: the launcher's message. */
struct say {
    int on;                  /* --say */
    const char *resume_cmd;  /* --resume-cmd: the command that resumes the job */
    const char *logs;        /* --logs: the job's logs folder */
};

/* --say: the job checkpoint's time (its MANIFEST's, local) into buf. */
static const char *s_ckpt_time(const char *jobckpt, char *buf, size_t len)
{
    char path[4096];
    struct stat st;
    struct tm tm;
    snprintf(path, sizeof path, "%s/MANIFEST", jobckpt);
    if (stat(path, &st) != 0 || !localtime_r(&st.st_mtime, &tm) ||
        strftime(buf, len, "%T", &tm) == 0)
        snprintf(buf, len, "?");
    return buf;
}

/* --verdict --say: how the job ended, in the launcher's words (the exit
 * statuses of shadow-launch --help). Nothing for report: the summary says. */
static void s_say_verdict(enum ss_super_verdict v, const struct ss_super_outcome *o,
                          const struct ss_super_ckpt *ck, int n_run, const char *jobckpt,
                          const struct say *say)
{
    char when[32];
    switch (v) {
    case SS_SUPER_REPORT:
        return;
    case SS_SUPER_SAVED:
        printf("shadow-launch: job checkpoint saved in %s (%s examples trained); resume with: "
               "%s\n", jobckpt, ck->examples[0] ? ck->examples : "0", say->resume_cmd);
        return;
    case SS_SUPER_UNSAVED:
        fprintf(stderr, "shadow-launch: the job checkpoint was not completed (%d of %d trainers "
                "saved their state; see %s)\n", o->n_ckpt, n_run, say->logs);
        return;
    case SS_SUPER_KEPT:
    case SS_SUPER_KEPT_NONE:
        break;
    }
    /* the trainers stopped on SIGTERM without a job checkpoint because
     * trainers had been lost: one taken now would lack their states */
    fprintf(stderr, "shadow-launch: SIGTERM after a trainer loss: %s; a job checkpoint now would "
            "lack its state (--resume needs every trainer's), so none was written\n",
            o->lost_text[0] ? o->lost_text : "a trainer was lost");
    if (v == SS_SUPER_KEPT)
        fprintf(stderr, "shadow-launch: the job checkpoint of %s (before the loss; %s examples "
                "trained) is kept as it was in %s; %s goes on from it with every trainer, "
                "re-training the work since\n", s_ckpt_time(jobckpt, when, sizeof when),
                ck->examples, jobckpt, say->resume_cmd);
    else
        fprintf(stderr, "shadow-launch: there is no job checkpoint of this job from before the "
                "loss (job.checkpoint_interval_s takes periodic ones); it cannot be resumed: "
                "start it again (see %s)\n", say->logs);
}

/* --verdict, --resumable, --missing (see the usage). */
static int s_end_mode(const char *mode, const char *outcome, const char *jobckpt, int n_run,
                      const char *start_id, int resumed, const struct say *say)
{
    static const char *const words[] = {"report", "saved", "unsaved", "kept", "kept-none"};
    static const int codes[] = {0, 75, 1, 75, 1};
    struct ss_super_outcome o;
    struct ss_super_ckpt ck;
    enum ss_super_verdict v;
    if (!jobckpt) {
        fprintf(stderr, "shadow-super: %s needs --jobckpt DIR (see --help)\n", mode);
        return 2;
    }
    ss_super_ckpt_read(jobckpt, &ck);
    if (!strcmp(mode, "--missing")) {
        if (!ck.complete)
            printf("%s\n", ck.missing);
        return 0;
    }
    if (!strcmp(mode, "--resumable")) {
        if (!ss_super_resumable(&ck, start_id, resumed))
            return 1;
        if (say->on)
            fprintf(stderr, "shadow-launch: a job checkpoint of this job is in %s (%s examples "
                    "trained); to go on from it: %s\n", jobckpt, ck.examples, say->resume_cmd);
        else
            printf("%s\n", ck.examples);
        return 0;
    }
    if (!outcome || n_run < 1) {
        fprintf(stderr, "shadow-super: --verdict needs --outcome FILE and --trainers N\n");
        return 2;
    }
    if (s_read_outcome(outcome, &o) != 0)
        return 2;
    v = ss_super_verdict(&o, n_run, &ck, start_id, resumed);
    if (say->on)
        s_say_verdict(v, &o, &ck, n_run, jobckpt, say);
    else
        printf("%s %s\n", words[v], ck.examples[0] ? ck.examples : "0");
    return codes[v];
}

/* --on-host MODE [--target T] [--cpus N] [--step NAME] [--ssh-opt W]...
 * [--pipe] -- ARGV...: exec the command line that runs ARGV on that host
 * (ss_backend.h). Returns only on failure: 2 on usage, 127 when it cannot
 * exec. */
static int s_on_host(int argc, char **argv)
{
    const struct ss_backend *b = argc > 0 ? ss_backend_find(argv[0]) : NULL;
    const char *opts[256];
    char cwd[4096], **cmd;
    struct ss_backend_where w = {.ssh_opts = opts, .cwd = s_cwd(cwd, sizeof cwd)};
    enum ss_backend_mode mode = SS_BACKEND_RUN;
    int i;
    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (!strcmp(argv[i], "--pipe"))
            mode = SS_BACKEND_PIPE;
        else if (i + 1 >= argc)
            break;
        else if (!strcmp(argv[i], "--target"))
            w.target = argv[++i];
        else if (!strcmp(argv[i], "--cpus"))
            w.cpus = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--step"))
            w.step_name = argv[++i];
        else if (!strcmp(argv[i], "--ssh-opt") && w.n_ssh_opts < 256)
            opts[w.n_ssh_opts++] = argv[++i];
        else
            break;
    }
    if (!b || i + 1 >= argc || strcmp(argv[i], "--") != 0) {
        fprintf(stderr, "shadow-super: usage: --on-host local|ssh|srun [--target T] [--cpus N] "
                "[--step NAME] [--ssh-opt WORD]... [--pipe] -- ARGV...\n");
        return 2;
    }
    cmd = ss_backend_argv(b, &w, mode, argv + i + 1);
    execvp(cmd[0], cmd);
    fprintf(stderr, "shadow-super: cannot run %s: %s\n", cmd[0], strerror(errno));
    ss_backend_argv_free(&cmd);
    return 127;
}

/* --slurm-cpus CPN NODE...: "NODE CPUS" a line, the job's CPUs on each node
 * (CPN: SLURM_JOB_CPUS_PER_NODE, in the nodes' order; a node past its
 * counts gets 1). Returns 0, or 2 after a message. */
static int s_slurm_cpus(int argc, char **argv)
{
    int cpus[4096];
    size_t n;
    char err[512];
    if (argc < 1) {
        fprintf(stderr, "shadow-super: usage: --slurm-cpus CPUS_PER_NODE NODE...\n");
        return 2;
    }
    if (ss_backend_slurm_cpus(argv[0], cpus, sizeof cpus / sizeof cpus[0], &n, err,
                              sizeof err) != 0) {
        fprintf(stderr, "shadow-launch: --exec srun: %s\n", err);
        return 2;
    }
    for (int i = 1; i < argc; i++)
        printf("%s %d\n", argv[i], (size_t)(i - 1) < n ? cpus[i - 1] : 1);
    return fflush(stdout) == 0 ? 0 : 2;
}

/* --push-resume RUN_DIR, --gather RUN_DIR: the copies to and from the
 * hosts (ss_launch_copy.h) of the launch whose data is RUN_DIR/.super.data
 * (and outcome RUN_DIR/.super.outcome). Without the data (a launch that
 * failed before it wrote them) the gather joins the model's parts alone.
 * Returns the exit status: 0, 1 when a push failed, 2 on bad data. */
static int s_copy(const char *mode, const char *run_dir)
{
    char data_path[4096], outcome[4096], cwd[4096], err[512];
    struct ss_launch_data *d;
    int rc = 0;
    snprintf(data_path, sizeof data_path, "%s/.super.data", run_dir);
    snprintf(outcome, sizeof outcome, "%s/.super.outcome", run_dir);
    d = ss_launch_data_read(data_path, err, sizeof err);
    if (!d && !strcmp(mode, "--gather") && access(data_path, F_OK) != 0) {
        ss_rundir_merge_model(run_dir);
        return 0;
    }
    if (!d) {
        fprintf(stderr, "shadow-super: %s: %s\n", mode, err);
        return 2;
    }
    if (!strcmp(mode, "--gather"))
        ss_launch_gather(d, s_cwd(cwd, sizeof cwd), outcome);
    else
        rc = ss_launch_push(d, s_cwd(cwd, sizeof cwd)) == 0 ? 0 : 1;
    ss_launch_data_destroy(&d);
    return rc;
}

/* --finish RUN_DIR [options]: how the job of RUN_DIR/.super.data ended
 * (--verdict --say, from RUN_DIR/.super.outcome), and when it finished its
 * report, plots and the job checkpoint's removal (ss_launch_end.h). Returns
 * the launcher's exit status (shadow-launch --help). */
static int s_finish(int argc, char **argv)
{
    struct ss_launch_end e = {.job_name = "", .wall_s = "0"};
    struct say say = {.on = 1, .resume_cmd = ""};
    const char *start_id = "";
    char data_path[4096], outcome[4096], err[512];
    struct ss_launch_data *d;
    int rc;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--job-name"))
            e.job_name = v;
        else if (!strcmp(k, "--wall-s"))
            e.wall_s = v;
        else if (!strcmp(k, "--resumed-from"))
            e.resumed_from = v;
        else if (!strcmp(k, "--plot"))
            e.plot = v;
        else if (!strcmp(k, "--start-id"))
            start_id = v;
        else if (!strcmp(k, "--resume-cmd"))
            say.resume_cmd = v;
        else
            argc = -1;
    }
    if (argc < 1 || argc % 2 != 1) {
        fprintf(stderr, "shadow-super: usage: --finish RUN_DIR [--job-name NAME] [--wall-s S] "
                "[--resumed-from N] [--plot SCRIPT] [--start-id ID] [--resume-cmd CMD]\n");
        return 2;
    }
    snprintf(data_path, sizeof data_path, "%s/.super.data", argv[0]);
    snprintf(outcome, sizeof outcome, "%s/.super.outcome", argv[0]);
    if (!(d = ss_launch_data_read(data_path, err, sizeof err))) {
        fprintf(stderr, "shadow-super: --finish: %s\n", err);
        return 1;
    }
    e.n_run = ss_spec_n_run(d);
    say.logs = ss_launch_data_get(d, "logs");
    rc = s_end_mode("--verdict", outcome, ss_launch_data_get(d, "jobckpt"), e.n_run, start_id,
                    ss_launch_data_has(d, "resume"), &say);
    fflush(stdout);
    if (rc == 0)
        rc = ss_launch_end_report(d, &e);
    else if (rc != 1 && rc != 75) {
        fprintf(stderr, "shadow-launch: shadow-super --verdict failed (see above)\n");
        rc = 1;
    }
    ss_launch_data_destroy(&d);
    return rc;
}

/* --failed RUN_DIR [options]: what the launcher says once a failed job is
 * stopped and gathered: a result.json written for an output model that
 * could not be saved (ss_launch_end_unsaved()), the job checkpoint to go on
 * from (--resumable --say; not after --eval-only) and where the logs are.
 * Returns 0. */
static int s_failed(int argc, char **argv)
{
    struct say say = {.on = 1, .resume_cmd = ""};
    const char *start_id = "", *job_name = "";
    char data_path[4096], err[512];
    struct ss_launch_data *d;
    int trainers_failed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--trainers-failed"))
            trainers_failed = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "--job-name"))
            job_name = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--start-id"))
            start_id = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--resume-cmd"))
            say.resume_cmd = argv[++i];
    }
    snprintf(data_path, sizeof data_path, "%s/.super.data", argv[0]);
    d = ss_launch_data_read(data_path, err, sizeof err);
    if (d) {
        ss_launch_end_unsaved(d, job_name, trainers_failed);
        fflush(stdout);
        if (!ss_launch_data_has(d, "eval_only"))
            s_end_mode("--resumable", NULL, ss_launch_data_get(d, "jobckpt"), 0, start_id,
                       ss_launch_data_has(d, "resume"), &say);
        fprintf(stderr, "shadow-launch: logs are in %s\n", ss_launch_data_get(d, "logs"));
    } else {
        /* (a launch that failed before it wrote its data) */
        fprintf(stderr, "shadow-launch: logs are in %s/logs\n", argv[0]);
    }
    ss_launch_data_destroy(&d);
    return 0;
}

/* SIGTERM and SIGINT into the self-pipe (an ignored SIGINT, as a shell
 * leaves it for a background job, caught all the same); returns its read end. */
static int s_signals(void)
{
    struct sigaction sa;
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    s_sig_w = pfd[1];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    ss_sigstart_release();
    return pfd[0];
}

int main(int argc, char **argv)
{
    const char *spec_path = NULL, *out_path = NULL, *mode = NULL, *jobckpt = NULL, *start_id = "";
    int n_run = 0, resumed = 0;
    struct say say = {.resume_cmd = "", .logs = ""};
    struct spec sp;
    struct ss_super_outcome out;
    ss_super_t *sup;
    char err[256];
    int i, sig_fd, rc;
    /* the launcher's helpers: their own arguments */
    if (argc > 1 && !strcmp(argv[1], "--on-host"))
        return s_on_host(argc - 2, argv + 2);
    if (argc > 1 && !strcmp(argv[1], "--slurm-cpus"))
        return s_slurm_cpus(argc - 2, argv + 2);
    if (argc > 2 && !strcmp(argv[1], "--failed"))
        return s_failed(argc - 2, argv + 2);
    if (argc > 2 && !strcmp(argv[1], "--finish"))
        return s_finish(argc - 2, argv + 2);
    if (argc == 3 && (!strcmp(argv[1], "--push-resume") || !strcmp(argv[1], "--gather")))
        return s_copy(argv[1], argv[2]);
    if (argc == 4 && !strcmp(argv[1], "--manifest")) {
        char val[1024];
        ss_super_manifest(argv[2], argv[3], val, sizeof val);
        if (val[0])
            printf("%s\n", val);
        return 0;
    }
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            s_usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            ss_version_print(stdout, "shadow-super");
            return 0;
        } else if (strcmp(argv[i], "--spec") == 0 && i + 1 < argc) {
            spec_path = argv[++i];
        } else if (strcmp(argv[i], "--outcome") == 0 && i + 1 < argc) {
            out_path = argv[++i];
        } else if (!strcmp(argv[i], "--verdict") || !strcmp(argv[i], "--resumable")) {
            mode = argv[i];
        } else if (strcmp(argv[i], "--missing") == 0 && i + 1 < argc) {
            mode = argv[i];
            jobckpt = argv[++i];
        } else if (strcmp(argv[i], "--jobckpt") == 0 && i + 1 < argc) {
            jobckpt = argv[++i];
        } else if (strcmp(argv[i], "--start-id") == 0 && i + 1 < argc) {
            start_id = argv[++i];
        } else if (strcmp(argv[i], "--trainers") == 0 && i + 1 < argc) {
            n_run = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--resumed") == 0) {
            resumed = 1;
        } else if (strcmp(argv[i], "--say") == 0) {
            say.on = 1;
        } else if (strcmp(argv[i], "--resume-cmd") == 0 && i + 1 < argc) {
            say.resume_cmd = argv[++i];
        } else if (strcmp(argv[i], "--logs") == 0 && i + 1 < argc) {
            say.logs = argv[++i];
        } else {
            fprintf(stderr, "shadow-super: unknown argument %s (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (mode)
        return s_end_mode(mode, out_path, jobckpt, n_run, start_id, resumed, &say);
    if (!spec_path || !out_path) {
        s_usage(stderr);
        return 2;
    }
    /* dies with the launcher; signals only through it */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
        return 2;
    setpgid(0, 0);
    memset(&sp, 0, sizeof sp);
    if (s_load(&sp, spec_path) != 0) {
        s_free(&sp);
        return 2;
    }
    sig_fd = s_signals();
    sup = ss_super_new(&sp.job, sp.procs, sp.n, sig_fd, err, sizeof err);
    if (!sup) {
        fprintf(stderr, "shadow-super: %s: %s\n", spec_path, err);
        s_free(&sp);
        return 2;
    }
    rc = ss_super_run(sup, &out);
    ss_super_destroy(&sup);
    if (rc != 0 && out.rc == 0)
        out.rc = 1;
    rc = s_write_outcome(out_path, &out);
    s_free(&sp);
    return rc == 0 ? 0 : 1;
}
