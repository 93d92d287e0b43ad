/* embed_ab.c - the PS's row work, two builds of ps_embed side by side in one
 * process, on requests shaped like make run's job. JSON on stdout.
 *
 * bench/embed-ab.sh builds this file against the tree's ps_embed (symbols
 * ps_embed_*) and a base revision's ps_embed.c and ps_admit.c compiled with
 * every global symbol renamed base_* (objcopy). Both shards get the same
 * requests, alternating step by step, so a busy machine slows them alike; the
 * ratio base / tree is the result. Every lookup's rows are compared byte for
 * byte, and at the end every key of the last requests is read back with its
 * optimizer state from both shards; with --ckpt-dir DIR both shards then
 * write a checkpoint there (DIR/base.ckpt, DIR/tree.ckpt: every stored row
 * with its state, in each stripe's CLOCK order), and the two files must be
 * byte for byte the same (removed after). Any difference fails the run
 * (exit 1).
 *
 * The workload (make run's job at its defaults, one embedding shard of two):
 * 26 tables, rows of dim 17 (16 + a first-order weight) under rowwise
 * Adagrad, 64 stripes, capacity_rows 10M (so 2 MB slabs), admit_after 3 with
 * an 8 MiB sketch. Each step is what a PUSH_LOOKUP gives the PS: a push of the
 * keys looked up two steps before, then a lookup of --keys keys (default
 * 1200, as the job's ~1,160-1,220 per request), --keys / 26 per table, drawn
 * from a heavy tail (rank = V^u, u uniform: about Zipf(1) over V ranks per
 * table, V = --vocab, default 400000) and de-duplicated within the table.
 * With --pollute-kib N each step first writes N KiB of another buffer
 * (outside the timing): the job's PS shares 2 cores with trainers whose data
 * push its rows out of the caches between requests.
 *
 * --capacity N sets capacity_rows (default 10M, the job's; it sizes slabs):
 * with a small --vocab it is a small job's shard under the job's settings.
 *
 * With --fused the tree serves each step's push and lookup in one call,
 * ps_embed_push_lookup_groups() (as the PS serves a PUSH_LOOKUP), the base as
 * two; then only access_ns_per_key (lookup and push together, per looked-up
 * key) and access_ratio compare the two.
 *
 * Reports thread CPU ns per key of lookup and push for each build, the
 * ratios base / tree (> 1: the tree is faster), and each build's system time
 * (creating its shard and serving its requests: first touches of memory, the
 * kernel zeroing pages, land there). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "ps_ckpt.h"
#include "ps_embed.h"
#include "ss_cfg.h"
#include "ss_hash.h"
#include "ss_mem.h"
#include "ss_time.h"

#define S_TABLES 26u
#define S_LAG 2u          /* a step pushes the keys looked up this many steps before */

/* The base build's API: the same signatures, renamed by bench/embed-ab.sh. */
ps_embed_t *base_ps_embed_new(const struct ps_embed_conf *conf);
void base_ps_embed_destroy(ps_embed_t **self_p);
int base_ps_embed_lookup_groups(ps_embed_t *self, size_t n_groups, const uint32_t *tables,
                                const uint32_t *counts, const uint64_t *keys, float *rows_out,
                                size_t *n_full);
int base_ps_embed_push_groups(ps_embed_t *self, size_t n_groups, const uint32_t *tables,
                              const uint32_t *counts, const uint64_t *keys, const float *grads,
                              size_t *n_full);
int base_ps_embed_read_row(ps_embed_t *self, uint32_t table, uint64_t key, float *out);
size_t base_ps_embed_rows(ps_embed_t *self);
size_t base_ps_embed_bytes(ps_embed_t *self);
void base_ps_embed_stats(ps_embed_t *self, struct ps_embed_stats *out);
int base_ps_embed_checkpoint(ps_embed_t *self, const char *path, const struct ps_ckpt_who *who);

/* One build's entry points. */
struct s_build {
    const char *name;
    ps_embed_t *(*new_)(const struct ps_embed_conf *);
    void (*destroy)(ps_embed_t **);
    int (*lookup)(ps_embed_t *, size_t, const uint32_t *, const uint32_t *, const uint64_t *,
                  float *, size_t *);
    int (*push)(ps_embed_t *, size_t, const uint32_t *, const uint32_t *, const uint64_t *,
                const float *, size_t *);
    int (*read_row)(ps_embed_t *, uint32_t, uint64_t, float *);
    size_t (*rows)(ps_embed_t *);
    size_t (*bytes)(ps_embed_t *);
    void (*stats)(ps_embed_t *, struct ps_embed_stats *);
    int (*checkpoint)(ps_embed_t *, const char *, const struct ps_ckpt_who *);
    int (*push_lookup)(ps_embed_t *, const struct ps_embed_groups *, const float *,
                       const struct ps_embed_groups *, float *, size_t *, size_t *);
                             /* push then lookup in one call (--fused), or NULL */
    ps_embed_t *e;           /* its shard */
    uint64_t lookup_ns;      /* thread CPU time in lookups */
    uint64_t push_ns;        /* thread CPU time in pushes */
    uint64_t both_ns;        /* thread CPU time in push_lookup calls */
    uint64_t sys_ns;         /* system time of this thread in its new, lookups and pushes */
};

/* One request: keys grouped by table (counts[t] of table t), gradients. */
struct s_req {
    uint32_t counts[S_TABLES];
    uint64_t *keys;
    float *grads;
    size_t n;
};

struct s_opts {
    uint32_t keys;           /* keys drawn per request */
    uint64_t vocab;          /* ranks per table */
    uint32_t steps;          /* requests */
    size_t pollute_kib;      /* buffer written between steps */
    uint64_t seed;
    const char *ckpt_dir;    /* compare the two shards' checkpoints written here, or NULL */
    size_t capacity;         /* capacity_rows */
    int fused;               /* the tree serves a step by ps_embed_push_lookup_groups() */
};

/* System time of the calling thread so far, ns. */
static uint64_t s_sys_ns(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_stime.tv_sec * 1000000000ull + (uint64_t)ru.ru_stime.tv_usec * 1000ull;
}

static int s_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Draw request q: per table, keys/26 heavy-tailed ranks, unique. */
static void s_draw(const struct s_opts *o, uint64_t q, struct s_req *r, uint32_t dim)
{
    uint64_t rng = ss_mix64(o->seed * 0x632be59bd9b4e019ull + q);
    uint32_t per = o->keys / S_TABLES;
    double lv = log((double)o->vocab);
    r->n = 0;
    for (uint32_t t = 0; t < S_TABLES; t++) {
        uint64_t *k = r->keys + r->n;
        size_t u = 0;
        for (uint32_t i = 0; i < per; i++) {
            uint64_t rank = (uint64_t)exp(ss_rand_unit_d(&rng) * lv);
            k[i] = ss_mix64((rank + 1) * 0x9e3779b97f4a7c15ull + t);
        }
        qsort(k, per, sizeof *k, s_u64_cmp);
        for (uint32_t i = 0; i < per; i++)
            if (u == 0 || k[i] != k[u - 1])
                k[u++] = k[i];
        r->counts[t] = (uint32_t)u;
        r->n += u;
    }
    for (size_t i = 0; i < r->n * dim; i++)
        r->grads[i] = 0.02f * (ss_rand_unit(&rng) - 0.5f);
}

static struct ps_embed_conf s_conf(void)
{
    struct ps_embed_conf c = {
        .n_tables = S_TABLES, .dim = 17, .first_order = 1,
        .optimizer = SS_OPT_ROWWISE_ADAGRAD, .lr = 0.1f, .eps = 1e-8f, .init_acc = 1e-3f,
        .init_scale = 0.01f, .seed = 42, .capacity_rows = 10000000, .n_stripes = 64,
        .admit_after = 3, .admit_sketch_bytes = 8u << 20,
    };
    return c;
}

/* Write the pollution buffer (the other processes' data on the PS's cores). */
static void s_pollute(unsigned char *buf, size_t bytes, uint64_t q)
{
    if (bytes)
        memset(buf, (int)(q & 0xff), bytes);
}

/* One step of one build: push request q - S_LAG, look up request q. */
static int s_step(struct s_build *b, const uint32_t *tables, const struct s_req *push,
                  const struct s_req *look, float *out)
{
    int rc = 0;
    uint64_t s0 = s_sys_ns();
    if (push && b->push_lookup) {
        struct ps_embed_groups pg = {S_TABLES, tables, push->counts, push->keys};
        struct ps_embed_groups lg = {S_TABLES, tables, look->counts, look->keys};
        uint64_t t0 = ss_thread_cpu_ns();
        rc = b->push_lookup(b->e, &pg, push->grads, &lg, out, NULL, NULL);
        b->both_ns += ss_thread_cpu_ns() - t0;
        b->sys_ns += s_sys_ns() - s0;
        return rc;
    }
    if (push) {
        uint64_t t0 = ss_thread_cpu_ns();
        rc |= b->push(b->e, S_TABLES, tables, push->counts, push->keys, push->grads, NULL);
        b->push_ns += ss_thread_cpu_ns() - t0;
    }
    uint64_t t1 = ss_thread_cpu_ns();
    rc |= b->lookup(b->e, S_TABLES, tables, look->counts, look->keys, out, NULL);
    b->lookup_ns += ss_thread_cpu_ns() - t1;
    b->sys_ns += s_sys_ns() - s0;
    return rc;
}

/* Read back every key of the last requests from both shards: rows and state
 * must be equal (or both absent). Returns the number of differences. */
static size_t s_compare_rows(struct s_build *b, const struct s_req *reqs, size_t n_reqs,
                             size_t row_floats)
{
    float *x = ss_malloc(row_floats * sizeof *x), *y = ss_malloc(row_floats * sizeof *y);
    size_t bad = 0;
    for (size_t q = 0; q < n_reqs; q++) {
        const struct s_req *r = &reqs[q];
        for (uint32_t t = 0, i = 0; t < S_TABLES; t++)
            for (uint32_t e = i + r->counts[t]; i < e; i++) {
                int rx = b[0].read_row(b[0].e, t, r->keys[i], x);
                int ry = b[1].read_row(b[1].e, t, r->keys[i], y);
                bad += rx != ry || (rx == 0 && memcmp(x, y, row_floats * sizeof *x) != 0);
            }
    }
    ss_free(x);
    ss_free(y);
    return bad;
}

/* Read the whole file at path into *buf (caller frees). Returns its bytes, or
 * (size_t)-1 if unreadable. */
static size_t s_slurp(const char *path, unsigned char **buf)
{
    FILE *f = fopen(path, "rb");
    size_t n = 0, cap = 1 << 20, got;
    *buf = NULL;
    if (!f)
        return (size_t)-1;
    *buf = ss_malloc(cap);
    while ((got = fread(*buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            *buf = ss_realloc(*buf, cap *= 2);
    }
    fclose(f);
    return n;
}

/* Both shards write a checkpoint into dir; 1 if the files are the same byte
 * for byte, 0 if not, -1 if either could not be written or read. Removes the
 * files. */
static int s_same_ckpt(struct s_build *b, const char *dir)
{
    const struct ps_ckpt_who who = {0, 1, 1, 1};
    char path[2][4096];
    unsigned char *buf[2] = {NULL, NULL};
    size_t n[2];
    int rc = -1;

    for (int i = 0; i < 2; i++) {
        snprintf(path[i], sizeof path[i], "%s/%s.ckpt", dir, b[i].name);
        if (b[i].checkpoint(b[i].e, path[i], &who) != 0)
            goto out;
    }
    for (int i = 0; i < 2; i++)
        if ((n[i] = s_slurp(path[i], &buf[i])) == (size_t)-1)
            goto out;
    rc = n[0] == n[1] && memcmp(buf[0], buf[1], n[0]) == 0;
out:
    for (int i = 0; i < 2; i++) {
        ss_free(buf[i]);
        remove(path[i]);
    }
    return rc;
}

static void s_usage(FILE *out)
{
    fprintf(out, "usage: embed_ab [--keys N] [--vocab V] [--steps S] [--pollute-kib K] "
                 "[--seed S] [--ckpt-dir DIR] [--capacity N] [--fused]\n"
                 "  (built by bench/embed-ab.sh BASE_REV; see its header)\n");
}

int main(int argc, char **argv)
{
    struct s_opts o = {1200, 400000, 6000, 0, 1, NULL, 10000000, 0};
    static const struct option lopts[] = {
        {"keys", required_argument, 0, 'k'}, {"vocab", required_argument, 0, 'v'},
        {"steps", required_argument, 0, 'n'}, {"pollute-kib", required_argument, 0, 'p'},
        {"seed", required_argument, 0, 's'}, {"ckpt-dir", required_argument, 0, 'c'},
        {"capacity", required_argument, 0, 'C'}, {"fused", no_argument, 0, 'f'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
        switch (c) {
        case 'k': o.keys = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'v': o.vocab = strtoull(optarg, NULL, 10); break;
        case 'n': o.steps = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'p': o.pollute_kib = strtoull(optarg, NULL, 10); break;
        case 's': o.seed = strtoull(optarg, NULL, 10); break;
        case 'c': o.ckpt_dir = optarg; break;
        case 'C': o.capacity = strtoull(optarg, NULL, 10); break;
        case 'f': o.fused = 1; break;
        case 'h': s_usage(stdout); return 0;
        default: s_usage(stderr); return 2;
        }
    }
    if (o.keys < S_TABLES || o.vocab < 2 || o.steps <= S_LAG || o.capacity == 0) {
        s_usage(stderr);
        return 2;
    }
    struct ps_embed_conf conf = s_conf();
    conf.capacity_rows = o.capacity;
    struct s_build b[2] = {
        {"base", base_ps_embed_new, base_ps_embed_destroy, base_ps_embed_lookup_groups,
         base_ps_embed_push_groups, base_ps_embed_read_row, base_ps_embed_rows,
         base_ps_embed_bytes, base_ps_embed_stats, base_ps_embed_checkpoint, NULL, NULL, 0, 0,
         0, 0},
        {"tree", ps_embed_new, ps_embed_destroy, ps_embed_lookup_groups, ps_embed_push_groups,
         ps_embed_read_row, ps_embed_rows, ps_embed_bytes, ps_embed_stats, ps_embed_checkpoint,
         o.fused ? ps_embed_push_lookup_groups : NULL, NULL, 0, 0, 0, 0},
    };
    uint32_t tables[S_TABLES];
    struct s_req reqs[S_LAG + 1];
    size_t pbytes = o.pollute_kib * 1024, n_keys = 0, mismatches = 0;
    unsigned char *pbuf = pbytes ? ss_malloc(pbytes) : NULL;
    float *out[2];

    for (uint32_t t = 0; t < S_TABLES; t++)
        tables[t] = t;
    for (int i = 0; i < 2; i++) {
        uint64_t s0 = s_sys_ns();
        b[i].e = b[i].new_(&conf);
        b[i].sys_ns += s_sys_ns() - s0;
        out[i] = ss_malloc((size_t)o.keys * conf.dim * sizeof(float));
        if (!b[i].e)
            return 1;
    }
    for (uint32_t i = 0; i <= S_LAG; i++) {
        reqs[i].keys = ss_malloc((size_t)o.keys * sizeof(uint64_t));
        reqs[i].grads = ss_malloc((size_t)o.keys * conf.dim * sizeof(float));
    }
    for (uint64_t q = 0; q < o.steps; q++) {
        struct s_req *look = &reqs[q % (S_LAG + 1)];
        const struct s_req *push = q >= S_LAG ? &reqs[(q - S_LAG) % (S_LAG + 1)] : NULL;
        s_draw(&o, q, look, conf.dim);
        n_keys += look->n;
        /* alternate which build goes first: each sees the other's leftovers */
        for (int k = 0; k < 2; k++) {
            struct s_build *x = &b[(k + q) & 1];
            s_pollute(pbuf, pbytes, q);
            if (s_step(x, tables, push, look, out[(k + q) & 1]) != 0) {
                fprintf(stderr, "embed_ab: %s: lookup or push failed\n", x->name);
                return 1;
            }
        }
        mismatches += memcmp(out[0], out[1], look->n * conf.dim * sizeof(float)) != 0;
    }
    size_t row_floats = conf.dim + 2;
    size_t row_diffs = s_compare_rows(b, reqs, S_LAG + 1, row_floats);
    int same_ckpt = o.ckpt_dir ? s_same_ckpt(b, o.ckpt_dir) : 1;
    struct ps_embed_stats st[2];
    printf("{\"bench\":\"embed_ab\",\"steps\":%u,\"keys_per_request\":%.0f,\"vocab\":%llu,"
           "\"pollute_kib\":%zu,\"fused\":%s", o.steps, (double)n_keys / o.steps,
           (unsigned long long)o.vocab, o.pollute_kib, o.fused ? "true" : "false");
    for (int i = 0; i < 2; i++) {
        b[i].stats(b[i].e, &st[i]);
        printf(",\"%s\":{\"lookup_ns_per_key\":%.1f,\"push_ns_per_key\":%.1f,"
               "\"access_ns_per_key\":%.1f,\"rows\":%zu,"
               "\"bytes\":%zu,\"keys_not_admitted\":%llu,\"sys_ms\":%.1f}", b[i].name,
               (double)b[i].lookup_ns / n_keys, (double)b[i].push_ns / n_keys,
               (double)(b[i].lookup_ns + b[i].push_ns + b[i].both_ns) / n_keys, b[i].rows(b[i].e),
               b[i].bytes(b[i].e), (unsigned long long)st[i].keys_not_admitted,
               (double)b[i].sys_ns / 1e6);
    }
    printf(",\"lookup_ratio\":%.3f,\"push_ratio\":%.3f,\"access_ratio\":%.3f,"
           "\"lookup_mismatches\":%zu,\"row_mismatches\":%zu,\"checkpoints_equal\":%s}\n",
           (double)b[0].lookup_ns / b[1].lookup_ns, (double)b[0].push_ns / b[1].push_ns,
           (double)(b[0].lookup_ns + b[0].push_ns + b[0].both_ns) /
               (b[1].lookup_ns + b[1].push_ns + b[1].both_ns), mismatches,
           row_diffs, !o.ckpt_dir ? "null" : same_ckpt == 1 ? "true" : "false");
    for (int i = 0; i < 2; i++) {
        b[i].destroy(&b[i].e);
        ss_free(out[i]);
    }
    for (uint32_t i = 0; i <= S_LAG; i++) {
        ss_free(reqs[i].keys);
        ss_free(reqs[i].grads);
    }
    ss_free(pbuf);
    if (same_ckpt == -1)
        fprintf(stderr, "embed_ab: could not write or read the checkpoints in %s\n", o.ckpt_dir);
    return mismatches || row_diffs || same_ckpt != 1 ? 1 : 0;
}
