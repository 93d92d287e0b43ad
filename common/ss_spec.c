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
#include "ss_mem.h"
#include "ss_spec.h"

#define MAX_PROCS 4096

static const char *const s_keys[] = {
    "trainers", "allow_loss", "max_ps_restarts", "quiet", "run_dir", "logs", "jobckpt",
    "keep_fd", "exec", "step_name", "traits", "eval_only", "predict", "predict_out",
    "pred_where", "pred_fd", "pred_in", "skip_bad", "resume", "hosts_file", "algo",
    "data_eval", "job", "bin", "rbin", "host_stdin", "n_emb", "n_sync"};
#define N_KEYS (sizeof s_keys / sizeof s_keys[0])

struct host {
    const char *name, *target, *cpus, *pdir, *ckdir, *rdir;
};

/* The launch data; every string points into text. */
struct data {
    char *text;
    const char *val[N_KEYS];
    const char **ssh_opts, **sets;
    size_t n_ssh_opts, n_sets;
    struct host *hosts;
    size_t n_hosts;
    int place[3][MAX_PROCS];   /* embedding, sync, trainer: host index, -1 none */
    const char *ctl[MAX_PROCS];
};

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

static const char *s_get(const struct data *d, const char *key)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(s_keys[i], key) == 0)
            return d->val[i] ? d->val[i] : "";
    return "";
}

static int s_set(const struct data *d, const char *key) { return s_get(d, key)[0] != '\0'; }

/* The traits string ("ring=0 sync_ps=1 ..."): whether it holds name=1. */
static int s_trait(const struct data *d, const char *name)
{
    char want[64];
    snprintf(want, sizeof want, "%s=1", name);
    const char *t = s_get(d, "traits");
    size_t n = strlen(want);
    for (const char *p = t; (p = strstr(p, want)) != NULL; p += n)
        if ((p == t || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' '))
            return 1;
    return 0;
}

static int s_role(const char *r)
{
    return !strcmp(r, "embedding") ? 0 : !strcmp(r, "sync") ? 1 : !strcmp(r, "trainer") ? 2 : -1;
}

/* Read in_path's words into d. Returns 0, or -1 with err. */
static int s_read(struct data *d, const char *in_path, char *err, size_t err_len)
{
    FILE *f = fopen(in_path, "rb");
    if (!f) {
        snprintf(err, err_len, "cannot read %s: %s", in_path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, len = 0, n;
    d->text = ss_malloc(cap);
    while ((n = fread(d->text + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap)
            d->text = ss_realloc(d->text, cap *= 2);
    }
    fclose(f);
    d->text[len] = '\0';
    size_t n_words = 0;
    for (size_t i = 0; i < len; i++)
        n_words += d->text[i] == '\0';
    const char **w = ss_calloc(n_words + 1, sizeof *w);
    size_t k = 0;
    for (size_t i = 0; i < len; i += strlen(d->text + i) + 1)
        w[k++] = d->text + i;
    d->ssh_opts = ss_calloc(n_words + 1, sizeof *d->ssh_opts);
    d->sets = ss_calloc(n_words + 1, sizeof *d->sets);
    d->hosts = ss_calloc(n_words / 7 + 1, sizeof *d->hosts);
    memset(d->place, -1, sizeof d->place);
    int rc = 0;
#define NEED(m)                                                                       \
    do {                                                                              \
        if (i + (m) >= k) {                                                           \
            snprintf(err, err_len, "%s: record %s lacks its values", in_path, w[i]); \
            rc = -1;                                                                  \
            goto done;                                                                \
        }                                                                             \
    } while (0)
    for (size_t i = 0; i < k;) {
        const char *key = w[i];
        if (!strcmp(key, "ssh_opt") || !strcmp(key, "set")) {
            NEED(1);
            if (key[1] == 's')
                d->ssh_opts[d->n_ssh_opts++] = w[i + 1];
            else
                d->sets[d->n_sets++] = w[i + 1];
            i += 2;
        } else if (!strcmp(key, "host")) {
            NEED(6);
            d->hosts[d->n_hosts++] = (struct host){w[i + 1], w[i + 2], w[i + 3],
                                                   w[i + 4], w[i + 5], w[i + 6]};
            i += 7;
        } else if (!strcmp(key, "place")) {
            NEED(3);
            int r = s_role(w[i + 1]);
            long p = atol(w[i + 2]), h = atol(w[i + 3]);
            if (r < 0 || p < 0 || p >= MAX_PROCS || h < 0) {
                snprintf(err, err_len, "%s: bad place record %s %s %s", in_path, w[i + 1],
                         w[i + 2], w[i + 3]);
                rc = -1;
                goto done;
            }
            d->place[r][p] = (int)h;
            i += 4;
        } else if (!strcmp(key, "ctl")) {
            NEED(2);
            long r = atol(w[i + 1]);
            if (r < 0 || r >= MAX_PROCS) {
                snprintf(err, err_len, "%s: bad ctl rank %s", in_path, w[i + 1]);
                rc = -1;
                goto done;
            }
            d->ctl[r] = w[i + 2];
            i += 3;
        } else {
            size_t j = 0;
            while (j < N_KEYS && strcmp(s_keys[j], key) != 0)
                j++;
            if (j == N_KEYS) {
                snprintf(err, err_len, "%s: unknown record '%s'", in_path, key);
                rc = -1;
                goto done;
            }
            NEED(1);
            d->val[j] = w[i + 1];
            i += 2;
        }
    }
#undef NEED
done:
    ss_free(w);
    return rc;
}

static void s_data_free(struct data *d)
{
    ss_free(d->text);
    ss_free(d->ssh_opts);
    ss_free(d->sets);
    ss_free(d->hosts);
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
                   const struct data *d, const char *const *tail, size_t n_tail)
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
static int s_ps(struct out *o, const struct data *d, const struct ss_backend *be,
                const char *role, int k, char *err, size_t err_len)
{
    int h = d->place[s_role(role)][k];
    if (h < 0 || (size_t)h >= d->n_hosts) {
        snprintf(err, err_len, "%s %d is on no host of the data", role, k);
        return -1;
    }
    const struct host *hp = &d->hosts[h];
    char log[4096], shard[16], run_dir[4096], restore[4096], rec[4096], age[4096], ps[4096],
        target[64];
    snprintf(log, sizeof log, "%s/ps-%s-%d.log", s_get(d, "logs"), role, k);
    snprintf(shard, sizeof shard, "%d", k);
    snprintf(run_dir, sizeof run_dir, "job.run_dir=%s", hp->pdir);
    snprintf(ps, sizeof ps, "%s/shadow-ps", s_get(d, "rbin"));
    /* the model folder holds the embeddings of its save (run directories of
     * older versions kept them in ckpt/) */
    const char *from = NULL;
    if (s_set(d, "eval_only")) {
        struct stat st;
        snprintf(restore, sizeof restore, "%s/model/MANIFEST", s_get(d, "eval_only"));
        int has = stat(restore, &st) == 0 && S_ISREG(st.st_mode);
        snprintf(restore, sizeof restore, "%s/%s", s_get(d, "eval_only"), has ? "model" : "ckpt");
        from = restore;
    }
    s_log_empty(log);
    if (s_set(d, "resume"))
        from = hp->rdir;
    const char *head[] = {ps, "-c", s_get(d, "job"), "--role", role, "--shard", shard};
    const char *tail[] = {"--set", run_dir, "--restore", NULL};
    s_put(o, "ps");
    s_put(o, role);
    s_put(o, shard);
    s_putf(o, "%d", h);
    s_put(o, log);
    s_put(o, s_get(d, "host_stdin"));
    tail[3] = from;
    s_argv(o, "start", head, 7, d, tail, from ? 4 : 2);
    s_argv(o, "empty", head, 7, d, tail, 2);
    snprintf(rec, sizeof rec, "%s/recovery", hp->ckdir);
    tail[3] = rec;
    s_argv(o, "recovery", head, 7, d, tail, 4);
    if (s_set(d, "resume")) {
        tail[3] = hp->rdir;
        s_argv(o, "resume", head, 7, d, tail, 4);
    }
    snprintf(age, sizeof age, "%s/recovery/%s-%d.ckpt", hp->ckdir, role, k);
    const char *age_argv[] = {"sh", "-c", s_age_sh, "age", age};
    struct data none = {0};
    s_argv(o, "age", age_argv, 5, &none, NULL, 0);
    /* (sent from the PS's own host: only ssh needs to reach it; a local job
     * asks them all at once: shutdown_all) */
    if (be->remote) {
        char ctl[4096];
        snprintf(ctl, sizeof ctl, "%s/shadow-ctl", s_get(d, "rbin"));
        snprintf(target, sizeof target, "%s:%d", role, k);
        const char *sh_head[] = {ctl, "-c", s_get(d, "job")};
        const char *sh_tail[] = {"--timeout-ms", "3000", "--target", target, "shutdown"};
        s_argv(o, "shutdown", sh_head, 3, d, sh_tail, 5);
    }
    return 0;
}

/* One trainer (see ss_spec.h). Returns 0, or -1 when it is on no host. */
static int s_trainer(struct out *o, const struct data *d, int r, char *err, size_t err_len)
{
    int h = d->place[2][r];
    if (h < 0 || (size_t)h >= d->n_hosts) {
        snprintf(err, err_len, "trainer %d is on no host of the data", r);
        return -1;
    }
    const struct host *hp = &d->hosts[h];
    char log[4096], rank[16], run_dir[4096], tr[4096], model[4096], in[64];
    snprintf(log, sizeof log, "%s/trainer-%d.log", s_get(d, "logs"), r);
    s_log_empty(log);
    snprintf(rank, sizeof rank, "%d", r);
    snprintf(run_dir, sizeof run_dir, "job.run_dir=%s", hp->pdir);
    snprintf(tr, sizeof tr, "%s/shadow-trainer", s_get(d, "rbin"));
    const char *spawn_in = s_get(d, "host_stdin"), *ctl = "-", *out = "-";
    if (d->ctl[r]) {
        spawn_in = d->ctl[r];
        ctl = d->ctl[r];
    }
    if (r == 0 && s_set(d, "pred_fd"))
        out = s_get(d, "pred_fd");  /* --out -: only trainer 0 runs */
    if (r == 0 && s_set(d, "pred_in")) {  /* data.eval -: so it reads ours */
        snprintf(in, sizeof in, "/dev/fd/%s", s_get(d, "pred_in"));
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
    if (s_set(d, "resume")) {
        tail[n++] = "--resume";
        tail[n++] = hp->rdir;
    } else {
        if (s_set(d, "eval_only")) {
            snprintf(model, sizeof model, "%s/model", s_get(d, "eval_only"));
            tail[n++] = "--eval-only";
            tail[n++] = "--model";
            tail[n++] = model;
        }
        if (!strcmp(s_get(d, "predict"), "1")) {
            tail[n++] = "--predict";
            tail[n++] = s_get(d, "predict_out");
            if (!strcmp(s_get(d, "skip_bad"), "1"))
                tail[n++] = "--skip-bad";
        }
    }
    const char *head[] = {tr, "-c", s_get(d, "job"), "--rank", rank};
    s_argv(o, "start", head, 5, d, tail, n);
    return 0;
}

static void s_job(struct out *o, const char *key, const char *value)
{
    s_put(o, "job");
    s_put(o, key);
    s_put(o, value);
}

static int s_build(struct out *o, const struct data *d, int *n_trainers, char *err,
                   size_t err_len)
{
    static const char *const plain[] = {"trainers", "allow_loss", "max_ps_restarts", "quiet",
                                        "run_dir",  "logs",       "jobckpt",         "keep_fd",
                                        "exec",     "step_name"};
    const struct ss_backend *be = ss_backend_find(s_get(d, "exec"));
    if (!be) {
        snprintf(err, err_len, "no --exec mode '%s'", s_get(d, "exec"));
        return -1;
    }
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        s_job(o, plain[i], s_get(d, plain[i]));
    for (size_t i = 0; i < d->n_ssh_opts; i++) {
        s_put(o, "ssh_opt");
        s_put(o, d->ssh_opts[i]);
    }
    s_job(o, "lose_trainer", s_trait(d, "lose_trainer") ? "1" : "0");
    s_job(o, "eval_only", s_set(d, "eval_only") ? "1" : "0");
    s_job(o, "predict_stdout", !strcmp(s_get(d, "predict_out"), "-") ? "1" : "0");
    s_job(o, "resumed", s_set(d, "resume") ? "1" : "0");
    s_job(o, "named_hosts", s_set(d, "hosts_file") ? "1" : "0");
    for (size_t h = 0; h < d->n_hosts; h++) {
        s_put(o, "host");
        s_put(o, d->hosts[h].name);
        s_put(o, d->hosts[h].target);
        s_put(o, d->hosts[h].cpus);
    }
    if (!be->remote) {
        /* every PS the job runs (--target all: the sync PSs when its sync uses them) */
        char ctl[4096];
        snprintf(ctl, sizeof ctl, "%s/shadow-ctl", s_get(d, "bin"));
        s_job(o, "die_with_super", "1");
        s_put(o, "shutdown_all");
        s_putf(o, "%zu", 3 + d->n_sets + 5);
        s_put(o, ctl);
        s_put(o, "-c");
        s_put(o, s_get(d, "job"));
        for (size_t i = 0; i < d->n_sets; i++)
            s_put(o, d->sets[i]);
        const char *t[] = {"--timeout-ms", "3000", "--target", "all", "shutdown"};
        for (size_t i = 0; i < 5; i++)
            s_put(o, t[i]);
    }
    int n_emb = atoi(s_get(d, "n_emb")), n_sync = atoi(s_get(d, "n_sync"));
    int n_tr = atoi(s_get(d, "trainers")), n_ps = 0;
    if (n_emb > MAX_PROCS || n_sync > MAX_PROCS || n_tr > MAX_PROCS) {
        snprintf(err, err_len, "more than %d processes of a role", MAX_PROCS);
        return -1;
    }
    for (int k = 0; k < n_emb; k++, n_ps++)
        if (s_ps(o, d, be, "embedding", k, err, err_len) != 0)
            return -1;
    for (int k = 0; s_trait(d, "sync_ps") && k < n_sync; k++, n_ps++)
        if (s_ps(o, d, be, "sync", k, err, err_len) != 0)
            return -1;
    char where[256] = "";
    if (s_set(d, "hosts_file"))
        snprintf(where, sizeof where, " on %zu host(s) [%s]", d->n_hosts, s_get(d, "exec"));
    s_put(o, "ready");
    if (s_set(d, "eval_only")) {
        char into[4096] = "";
        if (s_set(d, "predict_out"))
            snprintf(into, sizeof into, " into %s", s_get(d, "pred_where"));
        s_putf(o, "shadow-launch: %d PS(s) ready%s with the embeddings of %s/model; trainer 0 "
               "scores %s%s; run dir %s", n_ps, where, s_get(d, "eval_only"),
               s_get(d, "data_eval"), into, s_get(d, "run_dir"));
    } else {
        s_putf(o, "shadow-launch: %d PS(s) ready%s; starting %d trainer(s) [sync: %s]; run dir %s",
               n_ps, where, n_tr, s_get(d, "algo"), s_get(d, "run_dir"));
    }
    s_put(o, "ready");
    s_putf(o, "shadow-launch: to query the job: %s/shadow-ctl --run %s stats", s_get(d, "bin"),
           s_get(d, "run_dir"));
    int n_run = s_set(d, "eval_only") ? 1 : n_tr;  /* --eval-only: trainer 0 scores */
    *n_trainers = n_run;
    for (int r = 0; r < n_run; r++)
        if (s_trainer(o, d, r, err, err_len) != 0)
            return -1;
    return 0;
}

int ss_spec_build(const char *in_path, const char *out_path, int *n_trainers, char *err,
                  size_t err_len)
{
    struct data *d = ss_calloc(1, sizeof *d);
    struct out o = {0};
    int rc = s_read(d, in_path, err, err_len);
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
    s_data_free(d);
    ss_free(d);
    return rc;
}
