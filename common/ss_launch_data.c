/* ss_launch_data.c - reading a launch's plain data (ss_launch_data.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ss_launch_data.h"
#include "ss_mem.h"

static const char *const s_keys[] = {
    "trainers", "allow_loss", "max_ps_restarts", "quiet", "run_dir", "logs", "jobckpt",
    "keep_fd", "exec", "step_name", "traits", "eval_only", "predict", "predict_out",
    "pred_where", "pred_fd", "pred_in", "skip_bad", "resume", "hosts_file", "algo",
    "data_eval", "job", "bin", "rbin", "host_stdin", "n_emb", "n_sync"};
#define N_KEYS (sizeof s_keys / sizeof s_keys[0])

const char *ss_launch_data_get(const struct ss_launch_data *d, const char *key)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(s_keys[i], key) == 0)
            return d->val[i] ? d->val[i] : "";
    return "";
}

int ss_launch_data_has(const struct ss_launch_data *d, const char *key)
{
    return ss_launch_data_get(d, key)[0] != '\0';
}

int ss_launch_data_trait(const struct ss_launch_data *d, const char *name)
{
    char want[64];
    const char *t = ss_launch_data_get(d, "traits");
    size_t n;
    snprintf(want, sizeof want, "%s=1", name);
    n = strlen(want);
    for (const char *p = t; (p = strstr(p, want)) != NULL; p += n)
        if ((p == t || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' '))
            return 1;
    return 0;
}

int ss_launch_data_role(const char *r)
{
    return !strcmp(r, "embedding") ? 0 : !strcmp(r, "sync") ? 1 : !strcmp(r, "trainer") ? 2 : -1;
}

const char *ss_launch_data_rdir(const struct ss_launch_data *d, size_t h, char *buf,
                                size_t len)
{
    snprintf(buf, len, "%s/%s", d->hosts[h].pdir,
             d->hosts[h].shared ? "jobckpt" : "jobckpt.resume");
    return buf;
}

/* The file's words (NUL-terminated) into d->text; *n_words set. Returns the
 * word array (caller frees), or NULL with err. */
static const char **s_words(struct ss_launch_data *d, const char *path, size_t *n_words,
                            char *err, size_t err_len)
{
    FILE *f = fopen(path, "rb");
    size_t cap = 4096, len = 0, n, k = 0;
    const char **w;
    if (!f) {
        snprintf(err, err_len, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    d->text = ss_malloc(cap);
    while ((n = fread(d->text + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap)
            d->text = ss_realloc(d->text, cap *= 2);
    }
    fclose(f);
    d->text[len] = '\0';
    *n_words = 0;
    for (size_t i = 0; i < len; i++)
        *n_words += d->text[i] == '\0';
    w = ss_calloc(*n_words + 1, sizeof *w);
    for (size_t i = 0; i < len; i += strlen(d->text + i) + 1)
        w[k++] = d->text + i;
    *n_words = k;
    return w;
}

/* One record at w[*i] into d; *i past it. Returns 0, or -1 with err. */
static int s_record(struct ss_launch_data *d, const char **w, size_t k, size_t *i,
                    const char *path, char *err, size_t err_len)
{
    static const struct { const char *key; size_t n; } sizes[] = {
        {"ssh_opt", 1}, {"set", 1}, {"host", 6}, {"place", 3}, {"ctl", 2}};
    const char *key = w[*i];
    size_t need = 1, j;
    for (j = 0; j < sizeof sizes / sizeof sizes[0]; j++)
        if (!strcmp(key, sizes[j].key))
            need = sizes[j].n;
    for (j = 0; j < N_KEYS && strcmp(s_keys[j], key) != 0; j++)
        ;
    if (need == 1 && j == N_KEYS && strcmp(key, "ssh_opt") && strcmp(key, "set")) {
        snprintf(err, err_len, "%s: unknown record '%s'", path, key);
        return -1;
    }
    if (*i + need >= k) {
        snprintf(err, err_len, "%s: record %s lacks its values", path, key);
        return -1;
    }
    const char **v = w + *i + 1;
    *i += need + 1;
    if (!strcmp(key, "ssh_opt")) {
        d->ssh_opts[d->n_ssh_opts++] = v[0];
    } else if (!strcmp(key, "set")) {
        d->sets[d->n_sets++] = v[0];
    } else if (!strcmp(key, "host")) {
        if (strcmp(v[5], "0") && strcmp(v[5], "1")) {
            snprintf(err, err_len, "%s: host %s: SHARED is %s, not 0 or 1", path, v[0], v[5]);
            return -1;
        }
        d->hosts[d->n_hosts++] =
            (struct ss_launch_host){v[0], v[1], v[2], v[3], v[4], v[5][0] == '1'};
    } else if (!strcmp(key, "place")) {
        int r = ss_launch_data_role(v[0]);
        long p = atol(v[1]), h = atol(v[2]);
        if (r < 0 || p < 0 || p >= SS_LAUNCH_MAX_PROCS || h < 0) {
            snprintf(err, err_len, "%s: bad place record %s %s %s", path, v[0], v[1], v[2]);
            return -1;
        }
        d->place[r][p] = (int)h;
    } else if (!strcmp(key, "ctl")) {
        long r = atol(v[0]);
        if (r < 0 || r >= SS_LAUNCH_MAX_PROCS) {
            snprintf(err, err_len, "%s: bad ctl rank %s", path, v[0]);
            return -1;
        }
        d->ctl[r] = v[1];
    } else {
        d->val[j] = v[0];
    }
    return 0;
}

struct ss_launch_data *ss_launch_data_read(const char *path, char *err, size_t err_len)
{
    struct ss_launch_data *d = ss_calloc(1, sizeof *d);
    size_t k = 0;
    const char **w = s_words(d, path, &k, err, err_len);
    int rc = w ? 0 : -1;
    d->val = ss_calloc(N_KEYS, sizeof *d->val);
    d->ssh_opts = ss_calloc(k + 1, sizeof *d->ssh_opts);
    d->sets = ss_calloc(k + 1, sizeof *d->sets);
    d->hosts = ss_calloc(k / 7 + 1, sizeof *d->hosts);
    memset(d->place, -1, sizeof d->place);
    for (size_t i = 0; rc == 0 && i < k;)
        rc = s_record(d, w, k, &i, path, err, err_len);
    ss_free(w);
    if (rc != 0)
        ss_launch_data_destroy(&d);
    return d;
}

void ss_launch_data_destroy(struct ss_launch_data **d_p)
{
    struct ss_launch_data *d = d_p ? *d_p : NULL;
    if (!d)
        return;
    ss_free(d->text);
    ss_free(d->val);
    ss_free(d->ssh_opts);
    ss_free(d->sets);
    ss_free(d->hosts);
    ss_free(d);
    *d_p = NULL;
}
