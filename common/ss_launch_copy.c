/* ss_launch_copy.c - the --resume push and the gather of a launch (see
 * ss_launch_copy.h). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ss_backend.h"
#include "ss_launch_copy.h"
#include "ss_launch_proc.h"
#include "ss_mem.h"
#include "ss_rundir.h"

#define S_FILES_LEN (1u << 20)   /* the names a push copies, one a line */

/* What runs on a host (the remote side of a copy). */
static const char s_push_sh[] =
    "d=$1/jobckpt.resume; rm -rf \"$d\" \"$d.tmp\" && mkdir -p \"$d.tmp\" && "
    "tar -C \"$d.tmp\" -xf - && mv \"$d.tmp\" \"$d\"";
static const char s_gather_sh[] =
    "rm -rf \"$1/jobckpt.resume\"; exec tar -C \"$1\" --exclude=./logs "
    "--exclude=./.launch-token -cf - .";

/* left | right: left reads in (-1: ours), right's output is ours; their
 * messages go to left_err and right_err (-1: ours). st[0], st[1]: their
 * exit statuses (ss_launch_wait()), 127 for one not started. */
static void s_pipeline(char *const *left, char *const *right, int in, int left_err,
                       int right_err, int st[2])
{
    int p[2];
    pid_t pid[2];
    st[0] = st[1] = 127;
    if (pipe2(p, O_CLOEXEC) != 0)
        return;
    const struct ss_launch_io io[2] = {
        {.in_fd = in, .out_fd = p[1], .err_fd = left_err, .who = SS_LAUNCH_WHO},
        {.in_fd = p[0], .out_fd = -1, .err_fd = right_err, .who = SS_LAUNCH_WHO}};
    pid[0] = ss_launch_spawn(left, &io[0]);
    pid[1] = ss_launch_spawn(right, &io[1]);
    close(p[0]);
    close(p[1]);
    for (int i = 0; i < 2; i++)
        if (pid[i] > 0)
            st[i] = ss_launch_wait(pid[i]);
}

/* The --exec mode's command line that runs argv on host h (mode: RUN,
 * PIPE); freed with ss_backend_argv_free(). */
static char **s_on_host(const struct ss_launch_data *d, size_t h, const char *cwd,
                        enum ss_backend_mode mode, char *const *argv)
{
    const struct ss_backend *b = ss_backend_find(ss_launch_data_get(d, "exec"));
    struct ss_backend_where w = {
        .target = d->hosts[h].target, .cpus = atoi(d->hosts[h].cpus),
        .step_name = ss_launch_data_get(d, "step_name"), .cwd = cwd,
        .ssh_opts = d->ssh_opts, .n_ssh_opts = d->n_ssh_opts};
    return ss_backend_argv(b ? b : ss_backend_find("local"), &w, mode, argv);
}

/* LOGS/gather.log, opened to append (-1 when it cannot be). */
static int s_log_open(const struct ss_launch_data *d)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/gather.log", ss_launch_data_get(d, "logs"));
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

/* A line to gather.log: "== HH:MM:SS " and text. */
static void s_log_line(int fd, const char *text)
{
    char line[8192], when[16];
    time_t now = time(NULL);
    struct tm tm;
    if (fd < 0 || !localtime_r(&now, &tm) || !strftime(when, sizeof when, "%T", &tm))
        return;
    int n = snprintf(line, sizeof line, "== %s %s\n", when, text);
    if (n > 0 && write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0) {
        /* a trace line lost */
    }
}

static double s_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The files host h's processes restore (see ss_rundir_resume_files()), one a
 * line into out. Returns how many (1: MANIFEST alone). */
static size_t s_push_files(const struct ss_launch_data *d, size_t h, char *out, size_t len)
{
    static const char *const roles[] = {"embedding", "sync"};
    const char *counts[] = {ss_launch_data_get(d, "n_emb"), ss_launch_data_get(d, "n_sync")};
    struct ss_rundir_proc *procs = ss_calloc(3 * SS_LAUNCH_MAX_PROCS, sizeof *procs);
    size_t n = 0, got;
    for (int r = 0; r < SS_LAUNCH_MAX_PROCS; r++)
        if (d->place[2][r] == (int)h)
            procs[n++] = (struct ss_rundir_proc){"trainer", r, 0};
    for (int i = 0; i < 2; i++) {
        /* the sync PSs run, and restore, only when the sync rule has them */
        if (i == 1 && !ss_launch_data_trait(d, "sync_ps"))
            continue;
        for (int k = 0; k < SS_LAUNCH_MAX_PROCS; k++)
            if (d->place[i][k] == (int)h)
                procs[n++] = (struct ss_rundir_proc){roles[i], k, atoi(counts[i])};
    }
    got = ss_rundir_resume_files(ss_launch_data_get(d, "jobckpt"), procs, n, out, len);
    ss_free(procs);
    return got;
}

/* Push host h's part; returns 0, or 1 after the message. */
static int s_push_one(const struct ss_launch_data *d, size_t h, const char *cwd, int log_fd)
{
    char *files = ss_malloc(S_FILES_LEN), **tar, **there, line[4096];
    size_t n_files = s_push_files(d, h, files, S_FILES_LEN), n = 0;
    int st[2] = {0, 0}, rc = 0, in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    double t0 = s_now_s();
    if (n_files > 1) {
        tar = ss_calloc(n_files + 6, sizeof *tar);   /* tar -C DIR -cf - NAME... NULL */
        tar[n++] = "tar";
        tar[n++] = "-C";
        tar[n++] = (char *)ss_launch_data_get(d, "jobckpt");
        tar[n++] = "-cf";
        tar[n++] = "-";
        for (char *p = files, *e; *p && n < n_files + 5; p = e + 1) {
            if (!(e = strchr(p, '\n')))
                break;
            *e = '\0';
            tar[n++] = p;
        }
        char *sh[] = {"sh", "-c", (char *)s_push_sh, "push", (char *)d->hosts[h].pdir, NULL};
        there = s_on_host(d, h, cwd, SS_BACKEND_PIPE, sh);
        s_pipeline(tar, there, in, -1, log_fd, st);
        ss_backend_argv_free(&there);
        if (st[0] != 0 || st[1] != 0) {
            ss_launch_err("--resume: could not copy the job checkpoint (");
            for (size_t i = 5; i < n; i++)
                fprintf(stderr, "%s%s", i > 5 ? " " : "", tar[i]);
            fprintf(stderr, ") to host %s (exit %d here, %d there; see %s/gather.log)\n",
                    d->hosts[h].name, st[0], st[1], ss_launch_data_get(d, "logs"));
            rc = 1;
        }
        ss_free(tar);
    }
    if (rc == 0) {
        snprintf(line, sizeof line, "%s: job checkpoint pushed in %.2f s", d->hosts[h].name,
                 s_now_s() - t0);
        s_log_line(log_fd, line);
    }
    if (in >= 0)
        close(in);
    ss_free(files);
    return rc;
}

int ss_launch_push(const struct ss_launch_data *d, const char *cwd)
{
    pid_t *pids = ss_calloc(d->n_hosts + 1, sizeof *pids);
    int log_fd = -1, ok = 1, st;
    for (size_t h = 0; h < d->n_hosts && log_fd < 0; h++)
        if (!d->hosts[h].shared)
            log_fd = s_log_open(d);
    fflush(NULL);
    for (size_t h = 0; h < d->n_hosts; h++) {   /* all hosts at once */
        if (d->hosts[h].shared)
            continue;
        pids[h] = fork();
        if (pids[h] == 0)
            _exit(s_push_one(d, h, cwd, log_fd));
        if (pids[h] < 0 && s_push_one(d, h, cwd, log_fd) != 0)
            ok = 0;
    }
    for (size_t h = 0; h < d->n_hosts; h++)
        if (pids[h] > 0 && (waitpid(pids[h], &st, 0) != pids[h] || ss_backend_exit_status(st) != 0))
            ok = 0;
    if (log_fd >= 0)
        close(log_fd);
    ss_free(pids);
    return ok ? 0 : -1;
}

/* One try at gathering host h; returns 0, or -1 with why in gather.log. */
static int s_gather_one(const struct ss_launch_data *d, size_t h, const char *cwd, int log_fd)
{
    char line[8192], **there;
    char *sh[] = {"sh", "-c", (char *)s_gather_sh, "gather", (char *)d->hosts[h].pdir, NULL};
    char *here[] = {"tar", "-C", (char *)ss_launch_data_get(d, "run_dir"),
                    "--transform=s,^\\./jobckpt\\(/\\|$\\),./jobckpt.gathered\\1,", "-xf", "-",
                    NULL};
    int st[2], in = open(ss_launch_data_get(d, "host_stdin"), O_RDONLY | O_CLOEXEC);
    snprintf(line, sizeof line, "%s: %s", d->hosts[h].name, d->hosts[h].pdir);
    s_log_line(log_fd, line);
    there = s_on_host(d, h, cwd, SS_BACKEND_RUN, sh);
    s_pipeline(there, here, in, log_fd, log_fd, st);
    ss_backend_argv_free(&there);
    if (in >= 0)
        close(in);
    /* tar exits 1 when a file changed while it was read: the copy is still whole */
    if (st[0] <= 1 && st[1] == 0)
        return 0;
    int n = snprintf(line, sizeof line, "   failed: exit %d there, %d here\n", st[0], st[1]);
    if (log_fd >= 0 && write(log_fd, line, (size_t)n) < 0) {
        /* a trace line lost */
    }
    return -1;
}

/* The hosts outcome_path names lost, into lost[0..n). */
static void s_lost(const char *outcome_path, char *lost, size_t n)
{
    FILE *fp = outcome_path ? fopen(outcome_path, "r") : NULL;
    char line[2048];
    long h;
    if (!fp)
        return;
    while (fgets(line, sizeof line, fp))
        if (sscanf(line, "host_lost %ld", &h) == 1 && h >= 0 && (size_t)h < n)
            lost[h] = 1;
    fclose(fp);
}

void ss_launch_gather(const struct ss_launch_data *d, const char *cwd, const char *outcome_path)
{
    const char *run_dir = ss_launch_data_get(d, "run_dir");
    char *lost = ss_calloc(d->n_hosts + 1, 1), msg[1024];
    int log_fd = -1, apart = 0;
    s_lost(outcome_path, lost, d->n_hosts);
    fflush(NULL);
    for (size_t h = 0; h < d->n_hosts; h++) {
        apart |= !d->hosts[h].shared;
        if (d->hosts[h].shared || lost[h])
            continue;
        if (log_fd < 0)
            log_fd = s_log_open(d);
        if (s_gather_one(d, h, cwd, log_fd) == 0)
            continue;
        sleep(1);
        if (s_gather_one(d, h, cwd, log_fd) != 0)
            ss_launch_err("could not gather the run directory of host %s "
                          "(see %s/gather.log)\n",
                          d->hosts[h].name, ss_launch_data_get(d, "logs"));
    }
    ss_rundir_merge_model(run_dir);
    if (apart && ss_rundir_merge_jobckpt(run_dir, msg, sizeof msg) != 0)
        ss_launch_err("the job checkpoint %s gathered from the hosts; the "
                      "previous one in %s/jobckpt (if any) is kept (see %s/logs/gather.log)\n",
                      msg, run_dir, run_dir);
    if (log_fd >= 0)
        close(log_fd);
    ss_free(lost);
}
