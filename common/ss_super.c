/* ss_super.c - the supervisor of a launched job (see ss_super.h).
 *
 * One thread, no threads of its own: it forks and execs every process,
 * reaps them with waitpid(WNOHANG) on a short period, and reads signal
 * numbers from the caller's self-pipe in between. Processes see a default
 * signal mask and dispositions, but SIGINT and SIGQUIT ignored (as a shell's
 * background jobs: the supervisor alone decides how an interrupt ends
 * them), and no descriptor of ours beyond 0-2 and keep_fd. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ss_backend.h"
#include "ss_err.h"
#include "ss_json.h"
#include "ss_launch_proc.h"
#include "ss_mem.h"
#include "ss_super.h"

#define S_READY_WORD "ready:"       /* a PS's log line once it serves */
#define S_TAIL_LINES 15             /* a failed PS's log lines shown */
#define S_ERROR_LINES 3             /* a failed trainer's ERROR lines shown */
#define S_SHUTDOWN_WAIT_MS 10000    /* a PS's orderly exit after SHUTDOWN */
#define S_CAPTURE_MAX 256           /* the checkpoint age's output */
#define S_FD_SCAN_MAX 4096          /* descriptors a child closes */

struct ss_super {
    const struct ss_super_job *job;
    const struct ss_backend *be;    /* job->backend, or the local row */
    struct ss_super_proc *procs;
    size_t n;
    int sig_fd;
    double t0;                      /* the job's start (monotonic s) */
    int ckpt_req, ckpt_sent;        /* SIGTERM came; passed on to the trainers */
    double ckpt_deadline;
    double work_seen;               /* when the trainers' logs were last read for "working:" */
    long *work_off;                 /* per process: bytes of its log read for it */
    int stopping;                   /* a signal ended the job: its message is set */
    const struct ss_super_proc *echo; /* trainer 0, whose progress is echoed */
    long echo_off;                  /* its log: bytes echoed so far */
    struct ss_super_outcome *out;
};

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void s_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void s_fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void s_fmt(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

static const char *s_host(const ss_super_t *self, int h)
{
    return h >= 0 && (size_t)h < self->job->n_hosts ? self->job->hosts[h] : "?";
}

/* ------------------------------------------------------------ rules */

enum ss_super_end ss_super_trainer_end(int rc, int ckpt_asked, int predict_stdout)
{
    if (rc == 0)
        return SS_SUPER_END_OK;
    if (rc == 75 && ckpt_asked)
        return SS_SUPER_END_CKPT;
    if (rc == 76 && ckpt_asked)
        return SS_SUPER_END_KEPT;
    if (rc == 141 && predict_stdout)
        return SS_SUPER_END_PIPE;
    if (rc == 74)
        return SS_SUPER_END_SAVE;
    if (rc == 66)
        return SS_SUPER_END_NODATA;
    return SS_SUPER_END_FAIL;
}

int ss_super_may_lose(int allow_loss, int left, int n_ok, int n_trainers, int n_lost,
                      int ring_formed, char *why, size_t why_len)
{
    int ring = n_trainers - n_lost;
    why[0] = '\0';
    if (!allow_loss || (left <= 0 && n_ok <= 0))
        return 0;
    /* the ring re-forms only around a majority of its members (a trainer
     * cut off alone must not carry on as the job): 2 trainers cannot lose one */
    if (2 * (ring - 1) <= ring) {
        s_fmt(why, why_len, "; the job cannot go on without it: %d of the %d trainers in the ring"
              " are left, not a majority (job.allow_trainer_loss needs 3 or more trainers to"
              " lose one)", ring - 1, ring);
        return 0;
    }
    /* the trainers leave out only a trainer they have seen in the ring: one
     * lost before it formed would leave them waiting */
    if (!ring_formed) {
        s_fmt(why, why_len, " before the trainers' ring had formed (job.allow_trainer_loss"
              " applies once it has)");
        return 0;
    }
    return 1;
}

enum ss_super_from ss_super_restart_from(const char *role, int has_recovery, int resumed)
{
    /* a sync PS restarts empty, whatever it saved: the trainers re-seed it
     * from their live replicas (INIT) at their next round; a stale center
     * would pull every replica back toward where it was (issue 22) */
    if (strcmp(role, "sync") == 0)
        return SS_SUPER_FROM_EMPTY;
    if (has_recovery)
        return SS_SUPER_FROM_RECOVERY;
    return resumed ? SS_SUPER_FROM_RESUME : SS_SUPER_FROM_EMPTY;
}

int ss_super_allow_loss(const char *cfg, int lose_trainer)
{
    if (!strcmp(cfg, "true"))
        return 1;
    if (!strcmp(cfg, "false"))
        return 0;
    return !strcmp(cfg, "auto") ? !!lose_trainer : -1;
}

int ss_super_may_restart(int n_restarts, int max)
{
    return n_restarts < max;
}

/* ------------------------------------------------------------ files */

/* The whole of path (NUL-terminated; NULL when unreadable). Caller frees. */
static char *s_slurp(const char *path, long from, long *len_p)
{
    FILE *fp = fopen(path, "rb");
    char *buf = NULL;
    long len;
    if (!fp)
        return NULL;
    if (fseek(fp, 0, SEEK_END) != 0 || (len = ftell(fp)) < 0 || len < from ||
        fseek(fp, from, SEEK_SET) != 0) {
        fclose(fp);
        return NULL;
    }
    len -= from;
    buf = ss_malloc((size_t)len + 1);
    len = (long)fread(buf, 1, (size_t)len, fp);
    buf[len] = '\0';
    fclose(fp);
    if (len_p)
        *len_p = len;
    return buf;
}

/* For each of the n_words words, the lines of path that hold it (grep -c)
 * into counts: one read of the file (none: all 0). */
static void s_count_words(const char *path, const char *const *words, int *counts, int n_words)
{
    char *buf = s_slurp(path, 0, NULL), *line, *save = NULL;
    memset(counts, 0, sizeof *counts * (size_t)n_words);
    if (!buf)
        return;
    for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        for (int i = 0; i < n_words; i++)
            counts[i] += strstr(line, words[i]) != NULL;
    ss_free(buf);
}

/* Lines of path that hold word (grep -c). */
static int s_count_lines(const char *path, const char *word)
{
    int n;
    s_count_words(path, &word, &n, 1);
    return n;
}

/* Print the last n lines of path that hold word (every line: word NULL),
 * each after prefix. */
static void s_print_last(FILE *fp, const char *path, const char *word, int n, const char *prefix)
{
    char *buf = s_slurp(path, 0, NULL), *line, *save = NULL;
    char **keep;
    int k = 0, i;
    if (!buf)
        return;
    keep = ss_calloc((size_t)n, sizeof *keep);
    for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (!word || strstr(line, word))
            keep[k++ % n] = line;
    for (i = k > n ? k - n : 0; i < k; i++)
        fprintf(fp, "%s%s\n", prefix, keep[i % n]);
    fflush(fp);
    ss_free(keep);
    ss_free(buf);
}

static void s_log_tail(const char *path)
{
    fprintf(stderr, "---- last lines of %s:\n", path);
    s_print_last(stderr, path, NULL, S_TAIL_LINES, "    ");
}

void ss_super_manifest(const char *dir, const char *key, char *val, size_t len)
{
    char path[4096], *buf, *line, *save = NULL;
    size_t kl = strlen(key);
    val[0] = '\0';
    s_fmt(path, sizeof path, "%s/MANIFEST", dir);
    if (!(buf = s_slurp(path, 0, NULL)))
        return;
    for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
            s_fmt(val, len, "%s", line + kl + 1);
            break;
        }
    ss_free(buf);
}

static void s_manifest(const ss_super_t *self, const char *key, char *val, size_t len)
{
    ss_super_manifest(self->job->jobckpt, key, val, len);
}

/* Append one line to RUN_DIR/name. */
static void s_append(const ss_super_t *self, const char *name, const char *line)
{
    char path[4096];
    FILE *fp;
    s_fmt(path, sizeof path, "%s/%s", self->job->run_dir, name);
    if (!(fp = fopen(path, "a")))
        return;
    fprintf(fp, "%s\n", line);
    fclose(fp);
}

/* ------------------------------------------------------------ processes */

/* In a child: the process's signals, descriptors and standard streams,
 * then argv. Never returns. */
static void s_child(const ss_super_t *self, const char *in, int out_fd, int log_fd,
                    char *const argv[], pid_t parent)
{
    static const int def[] = {SIGTERM, SIGHUP, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM};
    sigset_t none;
    int fd, i;
    /* dies with the supervisor (which dies with the launcher), however it ends */
    if (self->job->die_with_super &&
        (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent))
        _exit(127);
    for (i = 0; i < (int)(sizeof def / sizeof def[0]); i++)
        signal(def[i], SIG_DFL);
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    fd = open(in ? in : "/dev/null", O_RDONLY);
    if (fd < 0 || dup2(fd, 0) < 0 || dup2(out_fd >= 0 ? out_fd : log_fd, 1) < 0 ||
        dup2(log_fd, 2) < 0) {
        dprintf(log_fd, "shadow-super: cannot set up the standard streams of %s: %s\n",
                argv[0], strerror(errno));
        _exit(127);
    }
    for (fd = 3; fd < S_FD_SCAN_MAX; fd++)
        if (fd != self->job->keep_fd)
            close(fd);
    execvp(argv[0], argv);
    dprintf(2, "shadow-super: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* Start argv with stdin in, stdout out_fd (or log) and stderr appended to
 * log. Returns its pid, or -1. */
static pid_t s_spawn(const ss_super_t *self, const char *in, int out_fd, const char *log,
                     char *const argv[])
{
    int log_fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    pid_t pid, parent = getpid();
    if (log_fd < 0) {
        ss_launch_err("cannot open %s: %s\n", log, strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid = fork();
    if (pid == 0)
        s_child(self, in, out_fd, log_fd, argv, parent);
    close(log_fd);
    if (pid < 0)
        ss_launch_err("cannot start %s: %s\n", argv[0], strerror(errno));
    return pid;
}

/* Run argv to its end, its stdout into cap (NUL-terminated, cut at len)
 * or, cap NULL, appended to log; stderr to log. Returns its exit status as
 * ss_backend_exit_status() gives it, or -1. */
static int s_run(const ss_super_t *self, const char *in, const char *log, char *const argv[],
                 char *cap, size_t len)
{
    int pfd[2] = {-1, -1}, st;
    size_t got = 0;
    ssize_t r;
    pid_t pid;
    if (cap && pipe2(pfd, O_CLOEXEC) != 0)
        return -1;
    pid = s_spawn(self, in, cap ? pfd[1] : -1, log, argv);
    if (cap) {
        close(pfd[1]);
        while (pid > 0 && got + 1 < len && (r = read(pfd[0], cap + got, len - 1 - got)) != 0)
            if (r > 0)
                got += (size_t)r;
            else if (errno != EINTR)
                break;
        cap[got] = '\0';
        close(pfd[0]);
    }
    if (pid < 0)
        return -1;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return ss_backend_exit_status(st);
}

/* Reap p when it has ended: returns 1 with its status in *rc, else 0. */
static int s_ended(struct ss_super_proc *p, int *rc)
{
    int st;
    pid_t r;
    if (p->pid <= 0)
        return 0;
    r = waitpid(p->pid, &st, WNOHANG);
    if (r == 0 || (r < 0 && errno != ECHILD))
        return 0;
    *rc = r < 0 ? 1 : ss_backend_exit_status(st);
    p->pid = 0;
    return 1;
}

static int s_live(const struct ss_super_proc *p)
{
    return p->pid > 0 && !(!p->is_ps && p->done);
}

/* Stop every process still running: SIGTERM, a moment (srun passes it on
 * to its step and waits for it), then SIGKILL, and reap them. */
static void s_teardown(ss_super_t *self)
{
    int wait_ms = self->be->stop_wait_ms, rc;
    size_t i, left;
    for (i = 0; i < self->n; i++)
        if (s_live(&self->procs[i]))
            kill(self->procs[i].pid, SIGTERM);
    for (; wait_ms > 0; wait_ms -= 100) {
        s_sleep_ms(100);
        for (i = 0, left = 0; i < self->n; i++)
            left += s_live(&self->procs[i]) && !s_ended(&self->procs[i], &rc);
        if (!left)
            break;
    }
    for (i = 0; i < self->n; i++)
        if (s_live(&self->procs[i])) {
            kill(self->procs[i].pid, SIGKILL);
            while (waitpid(self->procs[i].pid, &rc, 0) < 0 && errno == EINTR)
                ;
            self->procs[i].pid = 0;
        }
}

/* ------------------------------------------------------------ signals, progress */

/* End the job with msg (a signal's way out: a fresh line after trainer 0's
 * progress first). */
static void s_stop_now(ss_super_t *self, const char *msg)
{
    if (self->stopping)
        return;
    self->stopping = 1;
    fputc('\n', stdout);
    fflush(stdout);
    s_fmt(self->out->failed, sizeof self->out->failed, "%s", msg);
}

/* Wait up to ms for a signal number on sig_fd and act on every one there:
 * SIGINT stops the job; SIGTERM asks for a job checkpoint, or (a second
 * one, or when scoring) stops the job. Returns 1 when the job must stop. */
static int s_signals(ss_super_t *self, int ms)
{
    struct pollfd pfd = {self->sig_fd, POLLIN, 0};
    unsigned char sig[16];
    ssize_t r, i;
    if (self->sig_fd < 0) {
        s_sleep_ms(ms);
        return self->stopping;
    }
    if (poll(&pfd, 1, ms) <= 0)
        return self->stopping;
    r = read(self->sig_fd, sig, sizeof sig);
    for (i = 0; i < r; i++) {
        if (sig[i] == SIGINT)
            s_stop_now(self, "interrupted: stopping the job");
        else if (sig[i] == SIGTERM && self->job->eval_only)
            s_stop_now(self, "interrupted: stopping the job");
        else if (sig[i] == SIGTERM && self->ckpt_req)
            s_stop_now(self, "second SIGTERM: stopping the job at once");
        else if (sig[i] == SIGTERM)
            self->ckpt_req = 1;
    }
    return self->stopping;
}

/* Echo trainer 0's new complete log lines that show progress or trouble. */
static void s_echo(ss_super_t *self)
{
    const struct ss_super_proc *t0 = self->echo;
    static const char *const words[] = {"trainer 0 |", "ERROR", "WARN", "eval:", "INFO eval after"};
    char *buf, *line, *nl;
    long len = 0;
    size_t w;
    if (self->job->quiet || !t0 || !(buf = s_slurp(t0->log, self->echo_off, &len)))
        return;
    for (line = buf; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
        *nl = '\0';
        for (w = 0; w < sizeof words / sizeof words[0]; w++)
            if (strstr(line, words[w])) {
                printf("%s\n", line);
                break;
            }
    }
    self->echo_off += (long)(line - buf);
    fflush(stdout);
    ss_free(buf);
}

/* ------------------------------------------------------------ start-up */

/* Wait until PS p's log has more than before "ready:" lines, the time
 * starting again at each new "restoring:" line (a PS that reads a large
 * saved shard says so each second). Returns 0; 1 when it ended (its status
 * in *rc); 2 when the time ran out without a word; 3 on a signal that
 * stops the job. */
static int s_wait_ready(ss_super_t *self, struct ss_super_proc *p, int before, int *rc)
{
    static const char *const words[2] = {S_READY_WORD, SS_SUPER_RESTORING_WORD};
    int n[2], restoring = -1;
    for (int ms = self->job->ready_timeout_ms;; ms -= 100) {
        s_count_words(p->log, words, n, 2);  /* the log read once per poll */
        if (n[0] > before)
            return 0;
        if (restoring >= 0 && n[1] > restoring)
            ms = self->job->ready_timeout_ms;  /* reading a large saved shard: at it, wait on */
        restoring = n[1];
        if (ms <= 0)
            return 2;
        if (s_ended(p, rc))
            return 1;
        if (s_signals(self, 100))
            return 3;
    }
}

static int s_start_pss(ss_super_t *self)
{
    size_t i;
    int rc = 0, w;
    for (i = 0; i < self->n; i++)
        if (self->procs[i].is_ps) {
            struct ss_super_proc *p = &self->procs[i];
            p->pid = s_spawn(self, p->in, -1, p->log, p->argv[SS_SUPER_START]);
            if (p->pid < 0)
                return SS_E_IO;
        }
    for (i = 0; i < self->n; i++) {
        struct ss_super_proc *p = &self->procs[i];
        if (!p->is_ps)
            continue;
        w = s_wait_ready(self, p, 0, &rc);
        if (w == 3)
            return 1;
        if (w == 0)
            continue;
        s_log_tail(p->log);
        if (w == 1)
            s_fmt(self->out->failed, sizeof self->out->failed, "PS %s:%d exited during start-up"
                  " on host %s (exit %d)", p->role, p->index, s_host(self, p->host), rc);
        else
            s_fmt(self->out->failed, sizeof self->out->failed, "PS %s:%d on host %s not ready"
                  " after %d s", p->role, p->index, s_host(self, p->host),
                  self->job->ready_timeout_ms / 1000);
        return 1;
    }
    for (i = 0; i < self->job->n_ready_msg; i++)
        printf("%s\n", self->job->ready_msg[i]);
    fflush(stdout);
    return 0;
}

static int s_start_trainers(ss_super_t *self)
{
    size_t i;
    for (i = 0; i < self->n; i++) {
        struct ss_super_proc *p = &self->procs[i];
        if (p->is_ps)
            continue;
        p->pid = s_spawn(self, p->in, p->out_fd, p->log, p->argv[SS_SUPER_START]);
        if (p->out_fd >= 0) {   /* the reader sees the end when this trainer ends */
            close(p->out_fd);
            p->out_fd = -1;
        }
        if (p->pid < 0)
            return SS_E_IO;
        if (s_signals(self, 0))
            return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ the watch loop */

/* Pass SIGTERM to every trainer still running: each stops at a batch
 * boundary, they write the job checkpoint together and exit 75. */
static void s_send_checkpoint(ss_super_t *self)
{
    size_t i;
    self->ckpt_sent = 1;
    s_manifest(self, "save_id", self->out->ckpt_old_id, sizeof self->out->ckpt_old_id);
    self->ckpt_deadline = s_now() + self->job->ckpt_timeout_s;
    self->work_seen = s_now();
    for (i = 0; i < self->n; i++) {   /* "working:" lines count from now on */
        struct stat st;
        self->work_off[i] = stat(self->procs[i].log, &st) == 0 ? (long)st.st_size : 0;
    }
    ss_launch_err("SIGTERM: stopping the job with a job checkpoint in %s\n", self->job->jobckpt);
    for (i = 0; i < self->n; i++) {
        struct ss_super_proc *p = &self->procs[i];
        int fd;
        if (p->is_ps || p->done || p->pid <= 0)
            continue;
        if (!self->be->remote || !p->ctl) {
            kill(p->pid, SIGTERM);
            continue;
        }
        /* the wrapper on the trainer's host passes it on */
        fd = open(p->ctl, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            if (write(fd, "TERM\n", 5) != 5)
                ss_launch_err("could not pass SIGTERM to trainer %d\n", p->index);
            close(fd);
        }
    }
}

static int s_ring_formed(const ss_super_t *self)
{
    char word[64];
    size_t i;
    s_fmt(word, sizeof word, "all %d trainers joined the ring", self->job->n_trainers);
    for (i = 0; i < self->n; i++)
        if (!self->procs[i].is_ps && s_count_lines(self->procs[i].log, word) > 0)
            return 1;
    return 0;
}

static void s_mark_lost(ss_super_t *self, int h)
{
    if (h >= 0 && h < (int)sizeof self->out->host_lost)
        self->out->host_lost[h] = 1;
}

/* Record trainer p as lost (rc its status, what the failure): the job goes on. */
static void s_record_loss(ss_super_t *self, const struct ss_super_proc *p, int rc, const char *what)
{
    char line[256], clock[16];
    size_t used = strlen(self->out->lost_text);
    time_t now = time(NULL);
    double at = s_now() - self->t0;
    struct tm tm;
    strftime(clock, sizeof clock, "%H:%M:%S", localtime_r(&now, &tm));
    s_fmt(line, sizeof line, "{\"rank\":%d,\"exit\":%d,\"at_s\":%.1f}", p->index, rc, at);
    s_append(self, "trainers-lost.jsonl", line);
    self->out->n_lost++;
    s_fmt(self->out->lost_text + used, sizeof self->out->lost_text - used,
          "%strainer %d was lost at %.1f s (%s, exit %d)", used ? ", " : "", p->index, at, clock, rc);
    ss_launch_err("%s at %.1f s; the job goes on without it (job.allow_trainer_loss; see %s)\n",
                  what, at, p->log);
}

/* The failure message for trainer p's exit rc into failed; marks a lost host. */
static void s_trainer_failure(ss_super_t *self, const struct ss_super_proc *p, int rc,
                              char *failed, size_t len)
{
    if (rc == self->be->lost_rc) {
        s_mark_lost(self, p->host);
        s_fmt(failed, len, "lost the ssh connection to host %s (trainer %d ran there): the host or"
              " its network is down, or its sshd ended", s_host(self, p->host), p->index);
    } else if (self->job->named_hosts) {
        s_fmt(failed, len, "trainer %d exited with status %d on host %s", p->index, rc,
              s_host(self, p->host));
    } else {
        s_fmt(failed, len, "trainer %d exited with status %d", p->index, rc);
    }
}

/* The reader of --out - closed it: how far trainer 0 had written (the last
 * "after N prediction line(s)" of its log). */
static void s_pipe_failure(ss_super_t *self, const struct ss_super_proc *p)
{
    static const char tail[] = " prediction line(s)";
    char *buf = s_slurp(p->log, 0, NULL), *at, lines[64] = "";
    size_t nd;
    for (at = buf; at && (at = strstr(at, "after ")) != NULL; at += 6) {
        nd = strspn(at + 6, "0123456789");
        if (strncmp(at + 6 + nd, tail, sizeof tail - 1) == 0)
            s_fmt(lines, sizeof lines, "after writing %.*s%s", (int)nd, at + 6, tail);
    }
    ss_free(buf);
    self->out->rc = 141;
    s_fmt(self->out->failed, sizeof self->out->failed, "the reader of standard output closed it"
          " early; prediction stopped (%s)", lines);
}

/* Why trainer p failed, into why: its result file's "error", else its log's
 * last ERROR line, else its last "shadow-trainer: " line, else where its log is. */
static void s_trainer_error(ss_super_t *self, const struct ss_super_proc *p, char *why,
                            size_t len)
{
    char path[PATH_MAX], err[64], *buf, *line, *save = NULL, *at;
    const char *e = NULL, *last_error = NULL, *last_said = NULL;
    json_t *res = NULL;
    s_fmt(path, sizeof path, "%s/result-trainer-%d.json", self->job->run_dir, p->index);
    if (ss_json_load(path, &res, NULL, err, sizeof err) == 0 &&
        ss_json_str(res, "error", &e, path, err, sizeof err) == 0 && e && *e) {
        s_fmt(why, len, "%s", e);
        json_decref(res);
        return;
    }
    if (res)
        json_decref(res);
    buf = s_slurp(p->log, 0, NULL);
    for (line = buf ? strtok_r(buf, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
        if ((at = strstr(line, " ERROR ")) != NULL)
            last_error = at + 7;
        else if (strncmp(line, "shadow-trainer: ", 16) == 0)
            last_said = line + 16;
    }
    if (last_error || last_said)
        s_fmt(why, len, "%s", last_error ? last_error : last_said);
    else
        s_fmt(why, len, "see %s", p->log);
    ss_free(buf);
}

/* Trainer p ended with rc. Returns 0 (the job goes on) or 1 (it ends). */
static int s_trainer_ended(ss_super_t *self, struct ss_super_proc *p, int rc, int left)
{
    char what[SS_SUPER_MSG_MAX], why[SS_SUPER_MSG_MAX];
    p->done = 1;
    switch (ss_super_trainer_end(rc, self->ckpt_sent, self->job->predict_stdout)) {
    case SS_SUPER_END_OK: self->out->n_ok++; return 0;
    case SS_SUPER_END_CKPT: self->out->n_ckpt++; return 0;
    case SS_SUPER_END_KEPT: self->out->n_kept++; return 0;
    case SS_SUPER_END_PIPE: s_pipe_failure(self, p); return 1;
    case SS_SUPER_END_SAVE:
    case SS_SUPER_END_NODATA:
        s_trainer_error(self, p, why, sizeof why);
        s_fmt(self->out->failed, sizeof self->out->failed, "trainer %d %s (exit %d): %s",
              p->index, rc == 74 ? "could not save the output model" : "cannot read its data",
              rc, why);
        return 1;
    case SS_SUPER_END_FAIL: break;
    }
    s_trainer_failure(self, p, rc, what, sizeof what);
    if (ss_super_may_lose(self->job->allow_loss, left, self->out->n_ok, self->job->n_trainers,
                          self->out->n_lost, s_ring_formed(self), why, sizeof why)) {
        s_record_loss(self, p, rc, what);
        return 0;
    }
    s_fmt(self->out->failed, sizeof self->out->failed, "%s%s", what, why);
    return 1;
}

/* Start dead PS p (its status rc) again, in its old slot. Returns 0, or 1
 * with the reason in out->failed when it cannot or may not be. */
static int s_restart_ps(ss_super_t *self, struct ss_super_proc *p, int rc)
{
    static const char *const from_text[SS_SUPER_N_ARGV] = {
        [SS_SUPER_EMPTY] = "empty rows (no checkpoint yet)",
        [SS_SUPER_RECOVERY] = "its recovery checkpoint",
        [SS_SUPER_RESUME] = "the job checkpoint it was resumed from (updates since the resume are lost)",
    };
    char *failed = self->out->failed, age[S_CAPTURE_MAX] = "", from[256], line[256];
    size_t flen = sizeof self->out->failed;
    int ready = s_count_lines(p->log, S_READY_WORD), w, st;
    enum ss_super_from f;
    if (rc == self->be->lost_rc) {
        s_mark_lost(self, p->host);
        s_fmt(failed, flen, "lost the ssh connection to host %s (PS %s:%d ran there): the host or"
              " its network is down, or its sshd ended", s_host(self, p->host), p->role, p->index);
        return 1;
    }
    if (!ss_super_may_restart(self->out->n_restarts, self->job->max_ps_restarts)) {
        s_fmt(failed, flen, "PS %s:%d on host %s died (exit %d) and job.max_ps_restarts (%d)"
              " restarts are used up", p->role, p->index, s_host(self, p->host), rc,
              self->job->max_ps_restarts);
        return 1;
    }
    if (p->argv[SS_SUPER_AGE] &&
        s_run(self, p->in, p->log, p->argv[SS_SUPER_AGE], age, sizeof age) == 0)
        age[strspn(age, "0123456789")] = '\0';
    else
        age[0] = '\0';
    f = ss_super_restart_from(p->role, age[0] != '\0', self->job->resumed);
    if (strcmp(p->role, "sync") == 0)
        s_fmt(from, sizeof from, "nothing: the trainers re-seed it from their live replicas");
    else if (f == SS_SUPER_FROM_RECOVERY)
        s_fmt(from, sizeof from, "%s (%s s old: updates since are lost)", from_text[f], age);
    else
        s_fmt(from, sizeof from, "%s", from_text[f]);
    if (!p->argv[f]) {
        s_fmt(failed, flen, "PS %s:%d has no command line to restart it from %s", p->role,
              p->index, from);
        return 1;
    }
    ss_launch_err("PS %s:%d died (exit %d); restarting it from %s\n", p->role, p->index, rc, from);
    p->pid = s_spawn(self, p->in, -1, p->log, p->argv[f]);
    self->out->n_restarts++;
    s_fmt(line, sizeof line, "{\"ps\":\"%s:%d\",\"exit\":%d,\"at_s\":%.1f,\"checkpoint_age_s\":%s}",
          p->role, p->index, rc, s_now() - self->t0, age[0] ? age : "null");
    s_append(self, "ps-restarts.jsonl", line);
    w = p->pid > 0 ? s_wait_ready(self, p, ready, &st) : 1;
    if (w == 0 || w == 3)
        return w == 3;
    s_fmt(failed, flen, "PS %s:%d could not be restarted on host %s (see %s)", p->role, p->index,
          s_host(self, p->host), p->log);
    return 1;
}

/* A trainer that logged a PS's "still working" reply since the last look
 * (at most once a second, unless force: before giving up) is waiting for a
 * PS that writes a large file of the job checkpoint: the checkpoint's time
 * starts again. */
static void s_working(ss_super_t *self, int force)
{
    double now = s_now();
    if (!force && now - self->work_seen < 1.0)
        return;
    self->work_seen = now;
    for (size_t i = 0; i < self->n; i++) {
        const struct ss_super_proc *p = &self->procs[i];
        long len = 0;
        struct stat st;
        if (!p->is_ps && !p->done && stat(p->log, &st) == 0 && st.st_size < self->work_off[i])
            self->work_off[i] = 0;   /* truncated (rotated by copy and truncate): from its start */
        char *buf = p->is_ps || p->done ? NULL : s_slurp(p->log, self->work_off[i], &len);
        char *end = buf ? strrchr(buf, '\n') : NULL;
        if (!end) {   /* no whole line yet */
            ss_free(buf);
            continue;
        }
        end[1] = '\0';
        self->work_off[i] += (long)(end + 1 - buf);
        if (strstr(buf, SS_SUPER_WORKING_WORD))
            self->ckpt_deadline = now + self->job->ckpt_timeout_s;
        ss_free(buf);
    }
}

/* Watch until every trainer has ended, or the job must end. Returns 0 or 1. */
static int s_watch(ss_super_t *self)
{
    int left = 0, rc;
    size_t i;
    for (i = 0; i < self->n; i++)
        left += !self->procs[i].is_ps;
    while (left > 0) {
        if (s_signals(self, self->job->poll_ms))
            return 1;
        s_echo(self);
        if (self->ckpt_req && !self->ckpt_sent)
            s_send_checkpoint(self);
        if (self->ckpt_sent)
            s_working(self, 0);
        if (self->ckpt_sent && s_now() > self->ckpt_deadline)
            s_working(self, 1);   /* a last look at the logs */
        if (self->ckpt_sent && s_now() > self->ckpt_deadline) {
            s_fmt(self->out->failed, sizeof self->out->failed, "the trainers did not finish the"
                  " job checkpoint within %d s of SIGTERM (or of a PS's last word that it was"
                  " at it)", self->job->ckpt_timeout_s);
            return 1;
        }
        for (i = 0; i < self->n; i++) {
            struct ss_super_proc *p = &self->procs[i];
            if (p->is_ps || p->done || !s_ended(p, &rc))
                continue;
            left--;
            if (s_trainer_ended(self, p, rc, left))
                return 1;
        }
        for (i = 0; i < self->n; i++) {
            struct ss_super_proc *p = &self->procs[i];
            if (p->is_ps && s_ended(p, &rc) && s_restart_ps(self, p, rc))
                return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ the end */

void ss_super_ckpt_read(const char *dir, struct ss_super_ckpt *ck)
{
    static const char *const kinds[][2] = {
        {"trainers", "trainer-%d.state"},
        {"embedding_shards", "embedding-%d.ckpt"},
        {"sync_shards", "sync-%d.ckpt"},
    };
    char val[32], name[64], path[4096];
    size_t k, used = 0;
    struct stat st;
    int i, n;
    memset(ck, 0, sizeof *ck);
    s_fmt(path, sizeof path, "%s/MANIFEST", dir);
    if (stat(path, &st) != 0) {
        s_fmt(ck->missing, sizeof ck->missing, " MANIFEST");
        return;
    }
    ss_super_manifest(dir, "save_id", ck->id, sizeof ck->id);
    ss_super_manifest(dir, "examples", ck->examples, sizeof ck->examples);
    for (k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        ss_super_manifest(dir, kinds[k][0], val, sizeof val);
        n = atoi(val);
        for (i = 0; i < n && used + 1 < sizeof ck->missing; i++) {
            s_fmt(name, sizeof name, kinds[k][1], i);
            s_fmt(path, sizeof path, "%s/%s", dir, name);
            if (stat(path, &st) == 0 && st.st_size > 0)
                continue;
            s_fmt(ck->missing + used, sizeof ck->missing - used, " %s", name);
            used += strlen(ck->missing + used);
        }
    }
    ck->complete = ck->missing[0] == '\0';
}

int ss_super_resumable(const struct ss_super_ckpt *ck, const char *start_id, int resumed)
{
    return ck->id[0] && ck->complete && (resumed || strcmp(ck->id, start_id ? start_id : "") != 0);
}

int ss_super_resume_check(const char *jobckpt, int n_trainers, const char *logs, char *msg,
                          size_t len)
{
    char path[PATH_MAX], n[64];
    struct ss_super_ckpt ck;
    struct stat st;
    s_fmt(path, sizeof path, "%s/MANIFEST", jobckpt);
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        s_fmt(msg, len, "no complete job checkpoint in %s (no MANIFEST): the job was not "
              "stopped with SIGTERM and took no periodic one (job.checkpoint_interval_s), or "
              "its checkpoint failed (see %s)", jobckpt, logs);
        return -1;
    }
    ss_super_manifest(jobckpt, "trainers", n, sizeof n);
    if (atoi(n) != n_trainers || !n[0]) {
        s_fmt(msg, len, "the job checkpoint holds %s trainers' states, the job has %d trainers "
              "(cluster.trainers): a resumed job needs the same count", n, n_trainers);
        return -1;
    }
    ss_super_ckpt_read(jobckpt, &ck);
    if (!ck.complete) {
        s_fmt(msg, len, "the job checkpoint lacks%s", ck.missing);
        return -1;
    }
    return 0;
}

enum ss_super_verdict ss_super_verdict(const struct ss_super_outcome *o, int n_run,
                                       const struct ss_super_ckpt *ck, const char *start_id,
                                       int resumed)
{
    /* trainers that stopped without a job checkpoint because trainers had
     * been lost: one now would lack the lost ones' states */
    if (o->n_kept > 0)
        return ss_super_resumable(ck, start_id, resumed) ? SS_SUPER_KEPT : SS_SUPER_KEPT_NONE;
    if (o->n_ckpt > 0)
        return o->n_ckpt + o->n_lost == n_run && ck->id[0] && ck->complete &&
                       strcmp(ck->id, o->ckpt_old_id) != 0
                   ? SS_SUPER_SAVED
                   : SS_SUPER_UNSAVED;
    return SS_SUPER_REPORT;
}

/* Trainers' ERROR lines (trainer 0's were shown live unless quiet). */
static void s_error_tails(const ss_super_t *self)
{
    char prefix[256];
    const char *base;
    size_t i;
    for (i = 0; i < self->n; i++) {
        const struct ss_super_proc *p = &self->procs[i];
        if (p->is_ps || (!self->job->quiet && p->index == 0))
            continue;
        base = strrchr(p->log, '/');
        s_fmt(prefix, sizeof prefix, "%s: ", base ? base + 1 : p->log);
        s_print_last(stderr, p->log, "ERROR", S_ERROR_LINES, prefix);
    }
}

/* Orderly PS shutdown: in-flight requests finish, then each exits 0. */
static int s_shutdown(ss_super_t *self)
{
    char log[4096];
    size_t i;
    int ms, rc;
    s_fmt(log, sizeof log, "%s/shutdown.out", self->job->logs);
    if (self->job->shutdown_all)
        s_run(self, NULL, log, self->job->shutdown_all, NULL, 0);
    for (i = 0; !self->job->shutdown_all && i < self->n; i++)
        if (self->procs[i].is_ps && self->procs[i].argv[SS_SUPER_SHUTDOWN])
            s_run(self, self->procs[i].in, log, self->procs[i].argv[SS_SUPER_SHUTDOWN], NULL, 0);
    for (i = 0; i < self->n; i++) {
        struct ss_super_proc *p = &self->procs[i];
        if (!p->is_ps)
            continue;
        for (ms = S_SHUTDOWN_WAIT_MS; ms > 0 && !s_ended(p, &rc); ms -= 100)
            if (s_signals(self, 100))
                return 1;
        if (p->pid > 0) {
            kill(p->pid, SIGKILL);
            while (waitpid(p->pid, &rc, 0) < 0 && errno == EINTR)
                ;
            p->pid = 0;
        }
    }
    return 0;
}

ss_super_t *ss_super_new(const struct ss_super_job *job, struct ss_super_proc *procs, size_t n,
                         int sig_fd, char *err, size_t err_len)
{
    ss_super_t *self;
    size_t i;
    int trainers = 0;
    for (i = 0; i < n; i++) {
        if (!procs[i].argv[SS_SUPER_START] || !procs[i].argv[SS_SUPER_START][0] || !procs[i].log) {
            s_fmt(err, err_len, "process %zu (%s %d) has no command line or log", i,
                  procs[i].role ? procs[i].role : "?", procs[i].index);
            return NULL;
        }
        if (procs[i].is_ps && trainers) {
            s_fmt(err, err_len, "process %zu: the PSs come before the trainers", i);
            return NULL;
        }
        trainers += !procs[i].is_ps;
    }
    if (!trainers || !job->run_dir || !job->logs || !job->jobckpt) {
        s_fmt(err, err_len, "%s", trainers ? "no run directory" : "no trainer to run");
        return NULL;
    }
    self = ss_calloc(1, sizeof *self);
    self->job = job;
    self->be = job->backend ? job->backend : ss_backend_find("local");
    self->procs = procs;
    self->n = n;
    self->sig_fd = sig_fd;
    self->work_off = ss_calloc(n, sizeof *self->work_off);
    return self;
}

void ss_super_destroy(ss_super_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ss_free((*self_p)->work_off);
    ss_free(*self_p);
    *self_p = NULL;
}

int ss_super_run(ss_super_t *self, struct ss_super_outcome *out)
{
    size_t i;
    int rc;
    memset(out, 0, sizeof *out);
    self->out = out;
    self->t0 = s_now();
    self->echo = NULL;
    for (i = 0; i < self->n && !self->echo; i++)
        if (!self->procs[i].is_ps)
            self->echo = &self->procs[i];
    self->echo_off = 0;
    rc = s_start_pss(self);
    if (rc == 0)
        rc = s_start_trainers(self);
    if (rc == 0) {
        rc = s_watch(self);
        out->trainers_failed = rc == 1 && !self->stopping;
        s_sleep_ms(300);    /* trainer 0's last lines */
        s_echo(self);
    }
    if (rc == 0)
        rc = s_shutdown(self);
    if (rc < 0)
        ss_launch_err("the supervisor failed: %s\n", ss_strerror(rc));
    if (rc != 0) {
        if (out->trainers_failed)
            s_error_tails(self);
        if (rc > 0)
            ss_launch_err("%s\n", out->failed);
        s_teardown(self);
        if (!out->rc)
            out->rc = 1;
    }
    return rc < 0 ? rc : 0;
}
