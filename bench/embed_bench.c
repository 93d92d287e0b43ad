/* embed_bench.c - bounded embedding memory on one ps_embed shard, JSON on stdout.
 *
 * The stream: --stream draws of ranks 1..--keys from Zipf(--zipf, default 1.1)
 * (rejection-inversion sampling, Hormann and Derflinger 1996), each rank
 * scrambled to a 64-bit key, in batches of --batch draws de-duplicated like a
 * trainer's request; each batch is looked up, then pushed with small random
 * gradients (the same for every shard). Rows: the default job's (dim 16 plus
 * the first-order weight, rowwise Adagrad, 64 stripes).
 *
 *   embed_bench rss [options]
 *       One shard with tables.max_memory_bytes = --cap-mib over the whole
 *       stream: VmRSS and VmHWM (/proc/self/status) against the resident
 *       baseline before the shard plus the cap, the largest ps_embed_bytes()
 *       seen (checked after every batch) and the shard's speed alone.
 *       --cap-mib 0 runs the unbounded shard alone.
 *   embed_bench speed [options]
 *       An unbounded shard and the bounded one (plus one with
 *       tables.admit_after = --admit if it is >= 2, its sketch 1/32 of the
 *       cap) fed the same batches in
 *       turn, so a busy machine slows them alike: lookup+push keys per second
 *       of thread CPU time (and of wall time) of each and the ratios bounded /
 *       unbounded (the two shards also evict each other's data from the
 *       caches, which costs the smaller bounded shard more than it would
 *       alone: the rss part gives its speed alone); then retention: for ranks
 *       in decades 1-1e3, 1e3-1e4, ..., the share of keys whose bounded row
 *       (optimizer state included) is bit-identical to the unbounded one,
 *       i.e. never evicted. retention_ok: every key of ranks 1..1000 kept.
 *
 *   embed_bench rows [--rows R] [--requests Q] [--seed S]
 *       The PS's row work as a job's requests give it: a shard holding R rows
 *       (default 481000, the default job's shard) spread over 26 tables is
 *       fed Q requests (default 2000) of 26 tables x 28 keys, each key drawn
 *       uniformly from the stored rows (distinct within a table), through
 *       ps_embed_lookup_groups() then ps_embed_push_groups(). Reports thread
 *       CPU ns per key of each, and the us of row work per example at the
 *       default job's 11.4 keys per example (each looked up and pushed).
 *       The workload uses the public API only, so the same file built
 *       against an older ps_embed compares layouts side by side.
 *
 * Options: --keys N (default 2000000), --stream N (2 * keys), --cap-mib M
 * (16), --batch B (4096), --zipf S (1.1), --admit A (0), --seed S (1).
 * bench/run-bench.sh runs both parts (BENCH=embed; KEYS=, STREAM=,
 * CAP_MIB= set the size). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_embed.h"
#include "ss_cfg.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_time.h"

#define S_MAX_SHARDS 3

struct s_opts {
    uint64_t n_keys;     /* ranks 1..n_keys */
    uint64_t n_stream;   /* draws */
    size_t cap_bytes;    /* max_memory_bytes of the bounded shard */
    size_t batch;        /* draws per batch */
    double zipf_s;       /* exponent, > 1 */
    uint32_t admit;      /* admit_after of a third shard, 0 = none */
    uint64_t seed;       /* stream seed */
};

/* Zipf(s) on 1..n by rejection-inversion: invert the integral H of the hat
 * x^-s, round, accept when the draw falls under the bar of the rounded
 * value (about one try per draw). */
struct s_zipf {
    double s;            /* exponent, != 1 */
    double n;            /* ranks */
    double h_lo;         /* H(1.5) - 1: the left end of the draw range */
    double h_hi;         /* H(n + 0.5): the right end */
    double squeeze;      /* accept at once when |k - x| is within this */
};

static double s_zipf_H(const struct s_zipf *z, double x)
{
    return (pow(x, 1.0 - z->s) - 1.0) / (1.0 - z->s);
}

static double s_zipf_H_inv(const struct s_zipf *z, double y)
{
    return pow(1.0 + (1.0 - z->s) * y, 1.0 / (1.0 - z->s));
}

static void s_zipf_init(struct s_zipf *z, double s, uint64_t n)
{
    z->s = s;
    z->n = (double)n;
    z->h_lo = s_zipf_H(z, 1.5) - 1.0;
    z->h_hi = s_zipf_H(z, z->n + 0.5);
    z->squeeze = 2.0 - s_zipf_H_inv(z, s_zipf_H(z, 2.5) - pow(2.0, -s));
}

static uint64_t s_zipf_next(const struct s_zipf *z, uint64_t *rng)
{
    for (;;) {
        double u = z->h_hi + ss_rand_unit_d(rng) * (z->h_lo - z->h_hi);
        double x = s_zipf_H_inv(z, u);
        double k = floor(x + 0.5);
        if (k < 1)
            k = 1;
        else if (k > z->n)
            k = z->n;
        if (k - x <= z->squeeze || u >= s_zipf_H(z, k + 0.5) - pow(k, -z->s))
            return (uint64_t)k;
    }
}

/* The key of a rank: a bijection, so distinct ranks are distinct keys. */
static uint64_t s_key(uint64_t rank)
{
    return ss_mix64(rank * 0x9e3779b97f4a7c15ull);
}

static int s_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Batch number b of the stream: unique keys into keys, gradients into g.
 * Returns the key count. Deterministic in (seed, b). */
static size_t s_batch(const struct s_opts *o, const struct s_zipf *z, uint64_t b,
                      uint64_t *keys, float *g, uint32_t dim)
{
    uint64_t rng = ss_mix64(o->seed * 0x632be59bd9b4e019ull + b);
    size_t n = o->batch, u = 0;
    if ((b + 1) * o->batch > o->n_stream)
        n = (size_t)(o->n_stream - b * o->batch);
    for (size_t i = 0; i < n; i++)
        keys[i] = s_key(s_zipf_next(z, &rng));
    qsort(keys, n, sizeof *keys, s_u64_cmp);
    for (size_t i = 0; i < n; i++)
        if (u == 0 || keys[i] != keys[u - 1])
            keys[u++] = keys[i];
    for (size_t i = 0; i < u * dim; i++)
        g[i] = 0.02f * (ss_rand_unit(&rng) - 0.5f);
    return u;
}

/* The default job's shard: rows of 17 floats under rowwise Adagrad, room
 * for every key of the space (capacity_rows also sizes the slabs). */
static struct ps_embed_conf s_conf(const struct s_opts *o, size_t cap_bytes, uint32_t admit)
{
    struct ps_embed_conf c = {
        .n_tables = 1, .dim = 17, .first_order = 1, .optimizer = SS_OPT_ROWWISE_ADAGRAD,
        .lr = 0.1f, .eps = 1e-8f, .init_acc = 1e-3f, .init_scale = 0.01f, .seed = 42,
        .capacity_rows = (size_t)o->n_keys, .n_stripes = 64, .admit_after = admit,
        .admit_sketch_bytes = cap_bytes / 32, .max_memory_bytes = cap_bytes,
    };
    return c;
}

/* A kB field of /proc/self/status in bytes, or 0. */
static size_t s_status_bytes(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0, len = strlen(field);
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, len) == 0 && line[len] == ':')
            kb = (size_t)strtoull(line + len + 1, NULL, 10);
    fclose(f);
    return kb * 1024;
}

/* Look up then push one batch; adds the thread CPU nanoseconds it took to
 * *cpu_ns (page faults included; time the thread waited for a core on a busy
 * machine not) and the wall nanoseconds to *wall_ns. */
static void s_feed(ps_embed_t *e, const uint64_t *keys, size_t n, const float *g, float *out,
                   uint64_t *cpu_ns, uint64_t *wall_ns)
{
    uint64_t c0 = ss_thread_cpu_ns(), w0 = ss_now_ns();
    if (ps_embed_lookup(e, 0, keys, n, out, NULL) != 0 ||
        ps_embed_push(e, 0, keys, n, g, NULL) != 0) {
        fprintf(stderr, "embed_bench: lookup or push failed\n");
        exit(1);
    }
    *cpu_ns += ss_thread_cpu_ns() - c0;
    *wall_ns += ss_now_ns() - w0;
}

/* Buffers for one batch. */
struct s_buf {
    uint64_t *keys;
    float *g;
    float *out;
};

static void s_buf_init(struct s_buf *b, size_t batch, uint32_t dim)
{
    b->keys = ss_malloc(batch * sizeof *b->keys);
    b->g = ss_malloc(batch * dim * sizeof *b->g);
    b->out = ss_malloc(batch * dim * sizeof *b->out);
    memset(b->g, 0, batch * dim * sizeof *b->g);   /* resident before the baseline */
    memset(b->out, 0, batch * dim * sizeof *b->out);
}

static void s_buf_fini(struct s_buf *b)
{
    ss_free(b->keys);
    ss_free(b->g);
    ss_free(b->out);
}

static int s_rss(const struct s_opts *o)
{
    struct s_zipf z;
    struct s_buf b;
    struct ps_embed_conf c = s_conf(o, o->cap_bytes, 0);
    uint64_t n_batches = (o->n_stream + o->batch - 1) / o->batch, keys = 0;
    size_t max_bytes = 0;
    uint64_t cpu_ns = 0, wall_ns = 0;

    s_zipf_init(&z, o->zipf_s, o->n_keys);
    s_buf_init(&b, o->batch, c.dim);
    size_t base = s_status_bytes("VmRSS");
    ps_embed_t *e = ps_embed_new(&c);
    if (!e)
        return 1;
    uint64_t t0 = ss_now_ns();
    for (uint64_t i = 0; i < n_batches; i++) {
        size_t n = s_batch(o, &z, i, b.keys, b.g, c.dim);
        s_feed(e, b.keys, n, b.g, b.out, &cpu_ns, &wall_ns);
        keys += n;
        if (ps_embed_bytes(e) > max_bytes)
            max_bytes = ps_embed_bytes(e);
    }
    double secs = (double)(ss_now_ns() - t0) / 1e9;
    size_t rss = s_status_bytes("VmRSS"), hwm = s_status_bytes("VmHWM");
    struct ps_embed_stats st;
    ps_embed_stats(e, &st);
    printf("{\"bench\":\"embed_rss\",\"keys\":%llu,\"stream\":%llu,\"batch\":%zu,\"zipf\":%g,"
           "\"cap_bytes\":%zu,\"storage_bytes_max\":%zu,\"rows\":%zu,\"rows_evicted_memory\":%llu,"
           "\"rss_base_bytes\":%zu,\"vm_rss_bytes\":%zu,\"vm_hwm_bytes\":%zu,"
           "\"hwm_over_base_bytes\":%zu,\"hwm_over_base_per_cap\":%.4f,"
           "\"overhead_over_cap_bytes\":%lld,\"lookup_push_keys\":%llu,\"seconds\":%.1f,"
           "\"keys_per_cpu_s\":%.0f,\"keys_per_s\":%.0f}\n",
           (unsigned long long)o->n_keys, (unsigned long long)o->n_stream, o->batch, o->zipf_s,
           o->cap_bytes, max_bytes, ps_embed_rows(e), (unsigned long long)st.rows_evicted_memory,
           base, rss, hwm, hwm - base, (double)(hwm - base) / (double)o->cap_bytes,
           (long long)(hwm - base) - (long long)o->cap_bytes, (unsigned long long)keys, secs,
           (double)keys / ((double)cpu_ns / 1e9), (double)keys / ((double)wall_ns / 1e9));
    ps_embed_destroy(&e);
    s_buf_fini(&b);
    return !o->cap_bytes || max_bytes <= o->cap_bytes ? 0 : 1;
}

/* One shard of the speed comparison. */
struct s_run {
    const char *name;    /* for the JSON */
    ps_embed_t *e;       /* the shard */
    uint64_t cpu_ns;     /* thread CPU time inside lookup + push */
    uint64_t wall_ns;    /* wall time inside lookup + push */
};

/* Retention of ranks [lo, hi): of up to 1000 drawn ranks spread over it, how
 * many have a row in e (*stored) and a row bit-identical to the unbounded
 * one (*kept: never evicted; with admission rows differ by design). */
static void s_retention(const struct s_opts *o, ps_embed_t *ref, ps_embed_t *e, uint64_t lo,
                        uint64_t hi, size_t *kept, size_t *stored, size_t *of)
{
    size_t rf = ps_embed_row_floats(ref);
    float a[64], b[64];
    uint64_t step = (hi - lo) / 1000 ? (hi - lo) / 1000 : 1;
    *kept = *stored = *of = 0;
    for (uint64_t r = lo; r < hi && r <= o->n_keys; r += step) {
        uint64_t k = s_key(r);
        if (ps_embed_read_row(ref, 0, k, a) != 0)
            continue;   /* never drawn */
        (*of)++;
        if (ps_embed_read_row(e, 0, k, b) != 0)
            continue;
        (*stored)++;
        *kept += memcmp(a, b, rf * sizeof(float)) == 0;
    }
}

/* Print the retention of run e against the unbounded run ref for ranks
 * 1-1000, 1001-10^4, ... (as far as the key space goes). Returns 1 when
 * every key of ranks 1-1000 was kept. */
static int s_print_retention(const struct s_opts *o, const struct s_zipf *z, ps_embed_t *ref,
                             ps_embed_t *e)
{
    /* sum of k^-s over 1..n: the first term plus the integral of the rest */
    double norm = 1.0 + s_zipf_H(z, z->n + 0.5) - s_zipf_H(z, 1.5);
    int ok = 1;
    printf("[");
    for (uint64_t lo = 1, hi = 1000; lo <= o->n_keys; lo = hi + 1, hi *= 10) {
        size_t kept, stored, of;
        if (hi > o->n_keys)
            hi = o->n_keys;
        s_retention(o, ref, e, lo, hi + 1, &kept, &stored, &of);
        double uses = (double)o->n_stream * pow((double)hi, -o->zipf_s) / norm;
        printf("%s{\"ranks\":\"%llu-%llu\",\"expected_uses_at_last_rank\":%.1f,\"kept\":%zu,"
               "\"stored\":%zu,\"of\":%zu}", lo > 1 ? "," : "", (unsigned long long)lo,
               (unsigned long long)hi, uses, kept, stored, of);
        if (lo == 1)
            ok = kept == of;
    }
    printf("]");
    return ok;
}

static int s_speed(const struct s_opts *o)
{
    struct s_zipf z;
    struct s_buf b;
    struct ps_embed_conf cu = s_conf(o, 0, 0), cb = s_conf(o, o->cap_bytes, 0);
    struct ps_embed_conf ca = s_conf(o, o->cap_bytes, o->admit);
    struct s_run runs[S_MAX_SHARDS] = {
        {"unbounded", ps_embed_new(&cu), 0, 0},
        {"bounded", ps_embed_new(&cb), 0, 0},
        {"bounded_admit", o->admit >= 2 ? ps_embed_new(&ca) : NULL, 0, 0}};
    int n_runs = o->admit >= 2 ? 3 : 2, ok;
    uint64_t n_batches = (o->n_stream + o->batch - 1) / o->batch, keys = 0;

    s_zipf_init(&z, o->zipf_s, o->n_keys);
    s_buf_init(&b, o->batch, cu.dim);
    for (int r = 0; r < n_runs; r++)
        if (!runs[r].e)
            return 1;
    for (uint64_t i = 0; i < n_batches; i++) {
        size_t n = s_batch(o, &z, i, b.keys, b.g, cu.dim);
        for (int j = 0; j < n_runs; j++) {   /* rotate who goes first */
            struct s_run *r = &runs[(i + (uint64_t)j) % (uint64_t)n_runs];
            s_feed(r->e, b.keys, n, b.g, b.out, &r->cpu_ns, &r->wall_ns);
        }
        keys += n;
    }
    printf("{\"bench\":\"embed_speed\",\"keys\":%llu,\"stream\":%llu,\"batch\":%zu,\"zipf\":%g,"
           "\"distinct_keys_seen\":%zu,\"cap_bytes\":%zu,\"lookup_push_keys\":%llu",
           (unsigned long long)o->n_keys, (unsigned long long)o->n_stream, o->batch, o->zipf_s,
           ps_embed_rows(runs[0].e), o->cap_bytes, (unsigned long long)keys);
    for (int r = 0; r < n_runs; r++) {
        struct ps_embed_stats st;
        ps_embed_stats(runs[r].e, &st);
        printf(",\"%s\":{\"keys_per_cpu_s\":%.0f,\"keys_per_s\":%.0f,\"rows\":%zu,"
               "\"storage_bytes\":%zu,\"rows_evicted_memory\":%llu,\"keys_not_admitted\":%llu}",
               runs[r].name, (double)keys / ((double)runs[r].cpu_ns / 1e9),
               (double)keys / ((double)runs[r].wall_ns / 1e9), ps_embed_rows(runs[r].e),
               ps_embed_bytes(runs[r].e), (unsigned long long)st.rows_evicted_memory,
               (unsigned long long)st.keys_not_admitted);
    }
    printf(",\"ratio_bounded_vs_unbounded\":%.3f,\"ratio_bounded_vs_unbounded_wall\":%.3f",
           (double)runs[0].cpu_ns / (double)runs[1].cpu_ns,
           (double)runs[0].wall_ns / (double)runs[1].wall_ns);
    if (n_runs == 3)
        printf(",\"ratio_bounded_admit_vs_unbounded\":%.3f",
               (double)runs[0].cpu_ns / (double)runs[2].cpu_ns);
    printf(",\"retention\":");
    ok = s_print_retention(o, &z, runs[0].e, runs[1].e);
    if (n_runs == 3) {   /* admission drops early pushes: rows are stored, not equal */
        printf(",\"retention_admit\":");
        s_print_retention(o, &z, runs[0].e, runs[2].e);
    }
    printf(",\"retention_ok\":%s}\n", ok ? "true" : "false");
    for (int r = 0; r < n_runs; r++)
        ps_embed_destroy(&runs[r].e);
    s_buf_fini(&b);
    return ok ? 0 : 1;
}

#define S_ROWS_TABLES 26u         /* tables of a request */
#define S_ROWS_PER_TABLE 28u      /* keys per table in a request */
#define S_ROWS_KEYS_PER_EX 11.4   /* keys per example of the default job, after de-dup */

/* Key r of the rows workload: table r % 26, a scrambled key. */
static void s_rows_key(uint64_t r, uint32_t *table, uint64_t *key)
{
    *table = (uint32_t)(r % S_ROWS_TABLES);
    *key = s_key(r + 1);
}

/* One request: 28 distinct stored keys per table (ranks r with r % 26 == t). */
static void s_rows_request(uint64_t n_rows, uint64_t *rng, uint64_t *keys)
{
    uint64_t per = n_rows / S_ROWS_TABLES;
    for (uint32_t t = 0; t < S_ROWS_TABLES; t++) {
        uint64_t *k = keys + (size_t)t * S_ROWS_PER_TABLE;
        for (uint32_t i = 0; i < S_ROWS_PER_TABLE; i++) {
            uint64_t r, dup;
            uint32_t table;
            do {
                r = (ss_rand_next(rng) % per) * S_ROWS_TABLES + t;
                s_rows_key(r, &table, &k[i]);
                dup = 0;
                for (uint32_t j = 0; j < i; j++)
                    dup |= k[j] == k[i];
            } while (dup);
        }
    }
}

static int s_rows(uint64_t n_rows, uint64_t n_req, uint64_t seed)
{
    const uint32_t nk = S_ROWS_TABLES * S_ROWS_PER_TABLE;
    struct s_opts o = {n_rows, 0, 0, 0, 1.1, 0, seed};
    struct ps_embed_conf c = s_conf(&o, 0, 0);
    c.n_tables = S_ROWS_TABLES;
    ps_embed_t *e = ps_embed_new(&c);
    uint32_t tables[S_ROWS_TABLES], counts[S_ROWS_TABLES];
    uint64_t *keys = ss_malloc(nk * sizeof *keys), rng = ss_mix64(seed);
    float *g = ss_malloc((size_t)nk * c.dim * sizeof *g);
    float *out = ss_malloc((size_t)nk * c.dim * sizeof *out);
    uint64_t lookup_ns = 0, push_ns = 0;
    if (!e)
        return 1;
    for (uint32_t t = 0; t < S_ROWS_TABLES; t++) {
        tables[t] = t;
        counts[t] = S_ROWS_PER_TABLE;
    }
    for (uint64_t r = 0; r < n_rows; r++) {   /* store every row once */
        uint32_t table;
        uint64_t key;
        s_rows_key(r, &table, &key);
        ps_embed_lookup(e, table, &key, 1, out, NULL);
    }
    for (size_t i = 0; i < (size_t)nk * c.dim; i++)
        g[i] = 0.02f * (ss_rand_unit(&rng) - 0.5f);
    for (uint64_t q = 0; q < n_req; q++) {
        s_rows_request(n_rows, &rng, keys);
        uint64_t t0 = ss_thread_cpu_ns();
        int rc = ps_embed_lookup_groups(e, S_ROWS_TABLES, tables, counts, keys, out, NULL);
        uint64_t t1 = ss_thread_cpu_ns();
        rc |= ps_embed_push_groups(e, S_ROWS_TABLES, tables, counts, keys, g, NULL);
        uint64_t t2 = ss_thread_cpu_ns();
        if (rc != 0) {
            fprintf(stderr, "embed_bench: lookup or push failed\n");
            return 1;
        }
        lookup_ns += t1 - t0;
        push_ns += t2 - t1;
    }
    double keys_done = (double)n_req * nk;
    double lk = (double)lookup_ns / keys_done, pu = (double)push_ns / keys_done;
    printf("{\"bench\":\"embed_rows\",\"rows\":%zu,\"bytes\":%zu,\"requests\":%llu,"
           "\"keys_per_request\":%u,\"lookup_ns_per_key\":%.1f,\"push_ns_per_key\":%.1f,"
           "\"ns_per_key_access\":%.1f,\"keys_per_example\":%.1f,\"us_per_example\":%.3f}\n",
           ps_embed_rows(e), ps_embed_bytes(e), (unsigned long long)n_req, nk, lk, pu,
           (lk + pu) / 2, S_ROWS_KEYS_PER_EX, S_ROWS_KEYS_PER_EX * (lk + pu) / 1000.0);
    ps_embed_destroy(&e);
    ss_free(keys);
    ss_free(g);
    ss_free(out);
    return 0;
}

/* The command line, for --help and for a bad one. */
static void s_usage(FILE *out)
{
    fprintf(out, "usage: embed_bench rss|speed [--keys N] [--stream N] [--cap-mib M] "
                 "[--batch B] [--zipf S>1] [--admit A] [--seed S]\n"
                 "       embed_bench rows [--rows R] [--requests Q] [--seed S]\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"keys", required_argument, 0, 'k'}, {"stream", required_argument, 0, 'n'},
        {"cap-mib", required_argument, 0, 'm'}, {"batch", required_argument, 0, 'b'},
        {"zipf", required_argument, 0, 'z'}, {"admit", required_argument, 0, 'a'},
        {"seed", required_argument, 0, 's'}, {"rows", required_argument, 0, 'r'},
        {"requests", required_argument, 0, 'q'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    struct s_opts o = {2000000, 0, (size_t)16 << 20, 4096, 1.1, 0, 1};
    uint64_t rows = 481000, requests = 2000;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'k': o.n_keys = strtoull(optarg, NULL, 10); break;
        case 'n': o.n_stream = strtoull(optarg, NULL, 10); break;
        case 'm': o.cap_bytes = (size_t)strtoull(optarg, NULL, 10) << 20; break;
        case 'b': o.batch = (size_t)strtoull(optarg, NULL, 10); break;
        case 'z': o.zipf_s = atof(optarg); break;
        case 'a': o.admit = (uint32_t)atoi(optarg); break;
        case 's': o.seed = strtoull(optarg, NULL, 10); break;
        case 'r': rows = strtoull(optarg, NULL, 10); break;
        case 'q': requests = strtoull(optarg, NULL, 10); break;
        case 'h': s_usage(stdout); return 0;
        default: return 2;
        }
    }
    if (!o.n_stream)
        o.n_stream = 2 * o.n_keys;
    if (optind < argc && strcmp(argv[optind], "rows") == 0) {
        ss_log_init("bench", SS_LOG_WARN);
        if (rows < 100 * S_ROWS_TABLES || requests < 1) {
            fprintf(stderr, "embed_bench rows: --rows must be >= 2600, --requests >= 1\n");
            return 2;
        }
        return s_rows(rows, requests, o.seed);
    }
    if (optind >= argc || o.n_keys < 1000 || o.batch < 1 || o.batch > (1u << 20) ||
        !(o.zipf_s > 1.0) || (strcmp(argv[optind], "rss") && strcmp(argv[optind], "speed"))) {
        s_usage(stderr);
        return 2;
    }
    ss_log_init("bench", SS_LOG_WARN);
    return strcmp(argv[optind], "rss") == 0 ? s_rss(&o) : s_speed(&o);
}
