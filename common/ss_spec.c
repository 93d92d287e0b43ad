/* ss_spec.c - the supervisor's spec built from a launch's data (ss_spec.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ss_backend.h"
#include "ss_launch_data.h"
#include "ss_launch_proc.h"
#include "ss_mem.h"
#include "ss_spec.h"

#define MAX_PROCS SS_LAUNCH_MAX_PROCS

/* The spec as it is built: NUL-terminated words. */
struct out {
    char *buf;
    size_t len, cap;
};

static void s_put(struct out *o, const char *w)
{
    size_t n = strlen(w) + 1;
    if (o->len + n > o->cap) {
        o->cap = (o->len + n) * 2 + 256;
        o->buf = ss_realloc(o->buf, o->cap);
    }
    memcpy(o->buf + o->len, w, n);
    o->len += n;
}

static void s_putf(struct out *o, const char *fmt, ...)
{
    char w[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w, sizeof w, fmt, ap);
    va_end(ap);
    s_put(o, w);
}

/* Truncate (create) a log file, as the shell's `: >log`. */
static void s_log_empty(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
}

/* "argv VARIANT N" and the words of a command line: the head (words), the
 * job's --set words, then the tail (words). */
static void s_argv(struct out *o, const char *variant, const char *const *head, size_t n_head,
                   const struct ss_launch_data *d, const char *const *tail, size_t n_tail)
{
    s_put(o, "argv");
    s_put(o, variant);
    s_putf(o, "%zu", n_head + d->n_sets + n_tail);
    for (size_t i = 0; i < n_head; i++)
        s_put(o, head[i]);
    for (size_t i = 0; i < d->n_sets; i++)
        s_put(o, d->sets[i]);
    for (size_t i = 0; i < n_tail; i++)
        s_put(o, tail[i]);
}

static const char s_age_sh[] =
    "f=$1; [ -f \"$f\" ] && echo $(( $(date +%s) - $(stat -c %Y \"$f\") ))";

/* One PS (see ss_spec.h). Returns 0, or -1 when it is on no host. */
static int s_ps(struct out *o, const struct ss_launch_data *d, const struct ss_backend *be,
                const char *role, int k, char *err, size_t err_len)
{
    int h = d->place[ss_launch_data_role(role)][k];
    if (h < 0 || (size_t)h >= d->n_hosts) {
        snprintf(err, err_len, "%s %d is on no host of the data", role, k);
        return -1;
    }
    const struct ss_launch_host *hp = &d->hosts[h];
    char log[4096], shard[16], run_dir[4096], restore[4096], rec[4096], age[4096], ps[4096],
        target[64], rdir[4096];
    snprintf(log, sizeof log, "%s/ps-%s-%d.log", ss_launch_data_get(d, "logs"), role, k);
    snprintf(shard, sizeof shard, "%d", k);
    snprintf(run_dir, sizeof run_dir, "job.run_dir=%s", hp->pdir);
    snprintf(ps, sizeof ps, "%s/shadow-ps", ss_launch_data_get(d, "rbin"));
    /* the model folder holds the embeddings of its save (run directories of
     * older versions kept them in ckpt/) */
    const char *from = NULL;
    if (ss_launch_data_has(d, "eval_only")) {
        struct stat st;
        snprintf(restore, sizeof restore, "%s/model/MANIFEST", ss_launch_data_get(d, "eval_only"));
        int has = stat(restore, &st) == 0 && S_ISREG(st.st_mode);
        snprintf(restore, sizeof restore, "%s/%s", ss_launch_data_get(d, "eval_only"), has ? "model" : "ckpt");
        from = restore;
    }
    s_log_empty(log);
    if (ss_launch_data_has(d, "resume"))
        from = ss_launch_data_rdir(d, (size_t)h, rdir, sizeof rdir);
    const char *head[] = {ps, "-c", ss_launch_data_get(d, "job"), "--role", role, "--shard", shard};
    const char *tail[] = {"--set", run_dir, "--restore", NULL};
    s_put(o, "ps");
    s_put(o, role);
    s_put(o, shard);
    s_putf(o, "%d", h);
    s_put(o, log);
    s_put(o, ss_launch_data_get(d, "host_stdin"));
    tail[3] = from;
    s_argv(o, "start", head, 7, d, tail, from ? 4 : 2);
    s_argv(o, "empty", head, 7, d, tail, 2);
    snprintf(rec, sizeof rec, "%s/recovery", hp->ckdir);
    tail[3] = rec;
    s_argv(o, "recovery", head, 7, d, tail, 4);
    if (ss_launch_data_has(d, "resume")) {
        tail[3] = ss_launch_data_rdir(d, (size_t)h, rdir, sizeof rdir);
        s_argv(o, "resume", head, 7, d, tail, 4);
    }
    snprintf(age, sizeof age, "%s/recovery/%s-%d.ckpt", hp->ckdir, role, k);
    const char *age_argv[] = {"sh", "-c", s_age_sh, "age", age};
    struct ss_launch_data none = {0};
    s_argv(o, "age", age_argv, 5, &none, NULL, 0);
    /* (sent from the PS's own host: only ssh needs to reach it; a local job
     * asks them all at once: shutdown_all) */
    if (be->remote) {
        char ctl[4096];
        snprintf(ctl, sizeof ctl, "%s/shadow-ctl", ss_launch_data_get(d, "rbin"));
        snprintf(target, sizeof target, "%s:%d", role, k);
        const char *sh_head[] = {ctl, "-c", ss_launch_data_get(d, "job")};
        const char *sh_tail[] = {"--timeout-ms", "3000", "--target", target, "shutdown"};
        s_argv(o, "shutdown", sh_head, 3, d, sh_tail, 5);
    }
    return 0;
}

/* One trainer (see ss_spec.h). Returns 0, or -1 when it is on no host. */
static int s_trainer(struct out *o, const struct ss_launch_data *d, int r, char *err, size_t err_len)
{
    int h = d->place[2][r];
    if (h < 0 || (size_t)h >= d->n_hosts) {
        snprintf(err, err_len, "trainer %d is on no host of the data", r);
        return -1;
    }
    const struct ss_launch_host *hp = &d->hosts[h];
    char log[4096], rank[16], run_dir[4096], tr[4096], model[4096], in[64], rdir[4096];
    snprintf(log, sizeof log, "%s/trainer-%d.log", ss_launch_data_get(d, "logs"), r);
    s_log_empty(log);
    snprintf(rank, sizeof rank, "%d", r);
    snprintf(run_dir, sizeof run_dir, "job.run_dir=%s", hp->pdir);
    snprintf(tr, sizeof tr, "%s/shadow-trainer", ss_launch_data_get(d, "rbin"));
    const char *spawn_in = ss_launch_data_get(d, "host_stdin"), *ctl = "-", *out = "-";
    if (d->ctl[r]) {
        spawn_in = d->ctl[r];
        ctl = d->ctl[r];
    }
    if (r == 0 && ss_launch_data_has(d, "pred_fd"))
        out = ss_launch_data_get(d, "pred_fd");  /* --out -: only trainer 0 runs */
    if (r == 0 && ss_launch_data_has(d, "pred_in")) {  /* data.eval -: so it reads ours */
        snprintf(in, sizeof in, "/dev/fd/%s", ss_launch_data_get(d, "pred_in"));
        spawn_in = in;
    }
    s_put(o, "trainer");
    s_put(o, rank);
    s_putf(o, "%d", h);
    s_put(o, log);
    s_put(o, spawn_in);
    s_put(o, out);
    s_put(o, ctl);
    const char *tail[8] = {"--set", run_dir};
    size_t n = 2;
    if (ss_launch_data_has(d, "resume")) {
        tail[n++] = "--resume";
        tail[n++] = ss_launch_data_rdir(d, (size_t)h, rdir, sizeof rdir);
    } else {
        if (ss_launch_data_has(d, "eval_only")) {
            snprintf(model, sizeof model, "%s/model", ss_launch_data_get(d, "eval_only"));
            tail[n++] = "--eval-only";
            tail[n++] = "--model";
            tail[n++] = model;
        }
        if (!strcmp(ss_launch_data_get(d, "predict"), "1")) {
            tail[n++] = "--predict";
            tail[n++] = ss_launch_data_get(d, "predict_out");
            if (!strcmp(ss_launch_data_get(d, "skip_bad"), "1"))
                tail[n++] = "--skip-bad";
        }
    }
    const char *head[] = {tr, "-c", ss_launch_data_get(d, "job"), "--rank", rank};
    s_argv(o, "start", head, 5, d, tail, n);
    return 0;
}

int ss_spec_n_run(const struct ss_launch_data *d)
{
    return ss_launch_data_has(d, "eval_only") ? 1 : atoi(ss_launch_data_get(d, "trainers"));
}

static void s_job(struct out *o, const char *key, const char *value)
{
    s_put(o, "job");
    s_put(o, key);
    s_put(o, value);
}

static int s_build(struct out *o, const struct ss_launch_data *d, int *n_trainers, char *err,
                   size_t err_len)
{
    static const char *const plain[] = {"trainers", "allow_loss", "max_ps_restarts", "quiet",
                                        "run_dir",  "logs",       "jobckpt",         "keep_fd",
                                        "exec",     "step_name"};
    const struct ss_backend *be = ss_backend_find(ss_launch_data_get(d, "exec"));
    if (!be) {
        snprintf(err, err_len, "no --exec mode '%s'", ss_launch_data_get(d, "exec"));
        return -1;
    }
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        s_job(o, plain[i], ss_launch_data_get(d, plain[i]));
    for (size_t i = 0; i < d->n_ssh_opts; i++) {
        s_put(o, "ssh_opt");
        s_put(o, d->ssh_opts[i]);
    }
    s_job(o, "lose_trainer", ss_launch_data_trait(d, "lose_trainer") ? "1" : "0");
    s_job(o, "eval_only", ss_launch_data_has(d, "eval_only") ? "1" : "0");
    s_job(o, "predict_stdout", !strcmp(ss_launch_data_get(d, "predict_out"), "-") ? "1" : "0");
    s_job(o, "resumed", ss_launch_data_has(d, "resume") ? "1" : "0");
    s_job(o, "named_hosts", ss_launch_data_has(d, "hosts_file") ? "1" : "0");
    for (size_t h = 0; h < d->n_hosts; h++) {
        s_put(o, "host");
        s_put(o, d->hosts[h].name);
        s_put(o, d->hosts[h].target);
        s_put(o, d->hosts[h].cpus);
    }
    if (!be->remote) {
        /* every PS the job runs (--target all: the sync PSs when its sync uses them) */
        char ctl[4096];
        snprintf(ctl, sizeof ctl, "%s/shadow-ctl", ss_launch_data_get(d, "bin"));
        s_job(o, "die_with_super", "1");
        s_put(o, "shutdown_all");
        s_putf(o, "%zu", 3 + d->n_sets + 5);
        s_put(o, ctl);
        s_put(o, "-c");
        s_put(o, ss_launch_data_get(d, "job"));
        for (size_t i = 0; i < d->n_sets; i++)
            s_put(o, d->sets[i]);
        const char *t[] = {"--timeout-ms", "3000", "--target", "all", "shutdown"};
        for (size_t i = 0; i < 5; i++)
            s_put(o, t[i]);
    }
    int n_emb = atoi(ss_launch_data_get(d, "n_emb")), n_sync = atoi(ss_launch_data_get(d, "n_sync"));
    int n_tr = atoi(ss_launch_data_get(d, "trainers")), n_ps = 0;
    if (n_emb > MAX_PROCS || n_sync > MAX_PROCS || n_tr > MAX_PROCS) {
        snprintf(err, err_len, "more than %d processes of a role", MAX_PROCS);
        return -1;
    }
    for (int k = 0; k < n_emb; k++, n_ps++)
        if (s_ps(o, d, be, "embedding", k, err, err_len) != 0)
            return -1;
    for (int k = 0; ss_launch_data_trait(d, "sync_ps") && k < n_sync; k++, n_ps++)
        if (s_ps(o, d, be, "sync", k, err, err_len) != 0)
            return -1;
    char where[256] = "";
    if (ss_launch_data_has(d, "hosts_file"))
        snprintf(where, sizeof where, " on %zu host(s) [%s]", d->n_hosts, ss_launch_data_get(d, "exec"));
    s_put(o, "ready");
    if (ss_launch_data_has(d, "eval_only")) {
        char into[4096] = "";
        if (ss_launch_data_has(d, "predict_out"))
            snprintf(into, sizeof into, " into %s", ss_launch_data_get(d, "pred_where"));
        s_putf(o, SS_LAUNCH_WHO ": %d PS(s) ready%s with the embeddings of %s/model; trainer 0 "
               "scores %s%s; run dir %s", n_ps, where, ss_launch_data_get(d, "eval_only"),
               ss_launch_data_get(d, "data_eval"), into, ss_launch_data_get(d, "run_dir"));
    } else {
        s_putf(o, SS_LAUNCH_WHO ": %d PS(s) ready%s; starting %d trainer(s) [sync: %s]; run dir %s",
               n_ps, where, n_tr, ss_launch_data_get(d, "algo"), ss_launch_data_get(d, "run_dir"));
    }
    s_put(o, "ready");
    s_putf(o, SS_LAUNCH_WHO ": to query the job: %s/shadow-ctl --run %s stats",
           ss_launch_data_get(d, "bin"), ss_launch_data_get(d, "run_dir"));
    int n_run = ss_spec_n_run(d);
    *n_trainers = n_run;
    for (int r = 0; r < n_run; r++)
        if (s_trainer(o, d, r, err, err_len) != 0)
            return -1;
    return 0;
}

int ss_spec_build(const char *in_path, const char *out_path, int *n_trainers, char *err,
                  size_t err_len)
{
    struct ss_launch_data *d = ss_launch_data_read(in_path, err, err_len);
    struct out o = {0};
    int rc = d ? 0 : -1;
    if (rc == 0)
        rc = s_build(&o, d, n_trainers, err, err_len);
    if (rc == 0) {
        FILE *f = fopen(out_path, "wb");
        int bad = !f || fwrite(o.buf, 1, o.len, f) != o.len;
        if ((f && fclose(f) != 0) || bad) {
            snprintf(err, err_len, "cannot write %s: %s", out_path, strerror(errno));
            rc = -1;
        }
    }
    ss_free(o.buf);
    ss_launch_data_destroy(&d);
    return rc;
}
