/* ps_bench.c - embedding PS throughput over TCP loopback, JSON on stdout.
 *
 *   ps_bench -c JOB kv [--keys N] [--reps R]
 *       ps-lite kv_app_benchmark shape: push then pull of N uint64 keys with
 *       one float each (the PS must run with rows of one float: model.embedding_dim=1
 *       and model.first_order=false), split
 *       into requests of limits.max_keys_per_request keys, all in flight.
 *       Reports the median push and pull time over R repetitions.
 *   ps_bench -c JOB rows [--clients C] [--seconds S] [--key-space K]
 *                        [--op both|push|lookup] [--keys-per-request R]
 *       LOOKUP and PUSH throughput in rows/s: C client threads, R random
 *       keys (of K; R defaults to 4096) per request, dim from the job, one
 *       request in flight per client, S seconds per operation. --op push
 *       (first materializing the key space, as both does) or lookup runs one
 *       of them, so that a caller reading the PS's cpu_s from shadow-ctl
 *       stats between runs gets each one's CPU (bench/scaling-bench.sh).
 *       Also prints this process's CPU seconds and its ZeroMQ I/O thread's:
 *       the client side's cost.
 *   ps_bench -c JOB req [--clients C] [--seconds S] [--keys-per-request R]
 *       What one request costs: C clients (one request in flight each; C = 1
 *       leaves the PS idle between requests: light; several keep a queue:
 *       busy) LOOKUP R keys (default 16) of a materialized key space for S
 *       seconds. The PS's CPU comes from its STATS (cpu_s) before and after,
 *       the client's from this process: CPU microseconds per request on each
 *       side (and the client's ZeroMQ I/O thread apart), and context switches
 *       per request of every thread of each side (/proc/PID/task/N/status,
 *       voluntary and not; the PS's PID from its STATS: null where /proc is
 *       not readable, e.g. a PS on another host).
 * Each client connection picks a PS service thread (ss_cluster_ps_endpoint).
 * The PS is started by bench/run-bench.sh (with or without --bench-noop). */
#include <dirent.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ss_auth.h"
#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_cpu.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_json.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_net.h"
#include "ss_time.h"

#define ROWS_PER_REQ_MAX 65536

static struct ss_cfg *s_cfg;
static ss_cluster_t *s_cl;               /* the job's membership, set once in main */
static void *s_zctx;
static struct ss_curve s_curve;          /* CURVE keys or the job token, when the job has them */
static uint32_t s_rows_per_req = 4096;   /* --keys-per-request (main; s_req's warm-up) */

static ss_conn_t *s_connect(void)
{
    char err[512];
    struct ss_conn_opts o = {.max_message_bytes = s_cfg->max_message_bytes, .timeout_ms = 60000,
                             .curve = &s_curve};
    char ep[SS_CLUSTER_EP_MAX];
    ss_cluster_ps_endpoint(s_cl, SS_CLUSTER_EMBEDDING, 0, ss_cluster_next_slot(s_cl), ep,
                           sizeof ep);
    ss_conn_t *c = ss_conn_new(s_zctx, ep, &o);
    if (!c || ss_conn_hello(c, ss_cluster_hello_hash(s_cl, SS_CLUSTER_EMBEDDING, 0), err,
                            sizeof err) != 0) {
        fprintf(stderr, "ps_bench: cannot reach %s: %s\n", ep, err);
        exit(1);
    }
    return c;
}

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double s_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, s_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Send all chunks of one kind, then wait for every reply; returns ms. */
static double s_kv_round(ss_conn_t *c, int type, const uint64_t *keys, const float *vals,
                         size_t n, size_t chunk)
{
    size_t n_req = (n + chunk - 1) / chunk;
    uint64_t *ids = ss_malloc(n_req * sizeof *ids);
    uint32_t table = 0, count;
    char err[512];
    uint64_t t0 = ss_now_ns();
    for (size_t r = 0; r < n_req; r++) {
        Header h = HEADER__INIT;
        size_t off = r * chunk;
        count = (uint32_t)(off + chunk <= n ? chunk : n - off);
        h.type = (MsgType)type;
        h.n_tables = h.n_counts = 1;
        h.tables = &table;
        h.counts = &count;
        struct ss_frame f[2] = {{keys + off, count * 8}, {vals + off, count * 4}};
        if (type == MSG_TYPE__MSG_PUSH) {
            h.has_dim = 1;
            h.dim = 1;
        }
        ss_conn_send(c, &h, f, type == MSG_TYPE__MSG_PUSH ? 2 : 1, &ids[r]);
    }
    for (size_t r = 0; r < n_req; r++) {
        struct ss_msg reply;
        int rc = ss_conn_wait(c, ids[r], -1, &reply, err, sizeof err);
        if (rc == 0 || rc == SS_E_PEER)
            ss_msg_close(&reply);
        if (rc) {
            fprintf(stderr, "ps_bench: %s\n", err);
            exit(1);
        }
    }
    ss_free(ids);
    return (double)(ss_now_ns() - t0) / 1e6;
}

static void s_kv(size_t n, int reps)
{
    ss_conn_t *c = s_connect();
    uint64_t *keys = ss_malloc(n * sizeof *keys);
    float *vals = ss_malloc(n * sizeof *vals);
    double push[64], pull[64];
    size_t chunk = (size_t)s_cfg->max_keys_per_request;
    for (size_t i = 0; i < n; i++) {
        keys[i] = ss_key_make(0, i);
        vals[i] = 1.0f;
    }
    if (reps > 64)
        reps = 64;
    for (int r = 0; r < reps; r++) {
        push[r] = s_kv_round(c, MSG_TYPE__MSG_PUSH, keys, vals, n, chunk);
        pull[r] = s_kv_round(c, MSG_TYPE__MSG_LOOKUP, keys, vals, n, chunk);
    }
    printf("{\"bench\":\"kv\",\"keys\":%zu,\"request_keys\":%zu,\"reps\":%d,"
           "\"push_ms_median\":%.1f,\"pull_ms_median\":%.1f,\"push_ms_first\":%.1f}\n",
           n, chunk, reps, s_median(push, reps), s_median(pull, reps), push[0]);
    ss_conn_destroy(&c);
    ss_free(keys);
    ss_free(vals);
}

struct rows_arg {
    int type;               /* LOOKUP or PUSH */
    double seconds;         /* how long */
    uint64_t key_space;     /* keys drawn from [0, key_space) */
    uint64_t seed;          /* rng */
    uint64_t rows;          /* out: rows done */
    double elapsed;         /* out: seconds */
};

static void *s_rows_thread(void *p)
{
    struct rows_arg *a = p;
    ss_conn_t *c = s_connect();
    uint32_t dim = ss_cfg_row_dim(s_cfg), table = 0, count = s_rows_per_req;
    uint64_t *keys = ss_malloc(count * sizeof *keys), state = a->seed;
    float *grads = ss_calloc((size_t)count * dim, sizeof(float));
    char err[512];
    uint64_t t0 = ss_now_ns(), stop = t0 + (uint64_t)(a->seconds * 1e9);
    while (ss_now_ns() < stop) {
        Header h = HEADER__INIT;
        struct ss_msg reply;
        for (uint32_t i = 0; i < count; i++)
            keys[i] = ss_key_make(0, ss_rand_next(&state) % a->key_space);
        h.type = (MsgType)a->type;
        h.n_tables = h.n_counts = 1;
        h.tables = &table;
        h.counts = &count;
        if (a->type == MSG_TYPE__MSG_PUSH) {
            h.has_dim = 1;
            h.dim = dim;
        }
        struct ss_frame f[2] = {{keys, (size_t)count * 8}, {grads, (size_t)count * dim * 4}};
        int rc = ss_conn_call(c, &h, f, a->type == MSG_TYPE__MSG_PUSH ? 2 : 1, -1, &reply, err,
                              sizeof err);
        if (rc == 0 || rc == SS_E_PEER)
            ss_msg_close(&reply);
        if (rc) {
            fprintf(stderr, "ps_bench: %s\n", err);
            exit(1);
        }
        a->rows += count;
    }
    a->elapsed = (double)(ss_now_ns() - t0) / 1e9;
    ss_free(keys);
    ss_free(grads);
    ss_conn_destroy(&c);
    return NULL;
}

/* Run clients threads of type for seconds; *requests gets the requests they
 * made. Returns rows per second, summed. */
static double s_rows_count(int type, int clients, double seconds, uint64_t key_space,
                           uint64_t *requests)
{
    pthread_t t[16];
    struct rows_arg a[16];
    double rate = 0;
    *requests = 0;
    for (int i = 0; i < clients; i++) {
        a[i] = (struct rows_arg){type, seconds, key_space, 1000u + (uint64_t)i, 0, 0};
        pthread_create(&t[i], NULL, s_rows_thread, &a[i]);
    }
    for (int i = 0; i < clients; i++) {
        pthread_join(t[i], NULL);
        rate += (double)a[i].rows / a[i].elapsed;
        *requests += a[i].rows / s_rows_per_req;
    }
    return rate;
}

/* s_rows_count() without the request count. */
static double s_rows_run(int type, int clients, double seconds, uint64_t key_space)
{
    uint64_t requests;
    return s_rows_count(type, clients, seconds, key_space, &requests);
}

/* op: 0 both, 1 push only, 2 lookup only; a figure not measured prints 0. */
static void s_rows(int clients, double seconds, uint64_t key_space, int op)
{
    double push = 0, lookup = 0;
    /* materialize the key space once so lookups measure reads, not inserts */
    if (op != 2)
        s_rows_run(MSG_TYPE__MSG_PUSH, 1, seconds / 2, key_space);
    if (op != 2)
        push = s_rows_run(MSG_TYPE__MSG_PUSH, clients, seconds, key_space);
    if (op != 1)
        lookup = s_rows_run(MSG_TYPE__MSG_LOOKUP, clients, seconds, key_space);
    static const char *const io_threads[] = {"ZMQbg/IO"};
    double io_s;
    ss_cpu_split(io_threads, 1, &io_s);  /* the context is still up: its thread lives */
    printf("{\"bench\":\"rows\",\"clients\":%d,\"dim\":%lld,\"keys_per_request\":%u,"
           "\"key_space\":%llu,\"lookup_rows_per_s\":%.0f,\"push_rows_per_s\":%.0f,"
           "\"cpu_s\":%.3f,\"cpu_zmq_io_s\":%.2f}\n",
           clients, (long long)ss_cfg_row_dim(s_cfg), s_rows_per_req,
           (unsigned long long)key_space, lookup, push, ss_cpu_process_s(), io_s);
}

/* Context switches (voluntary and not) of every thread of process pid so
 * far, or -1 when /proc does not show them. */
static double s_ctx_switches(long pid)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/%ld/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    double n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char sp[320];
        snprintf(sp, sizeof sp, "%s/%s/status", path, e->d_name);
        FILE *f = fopen(sp, "r");
        unsigned long long v;
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1 ||
                sscanf(line, "nonvoluntary_ctxt_switches: %llu", &v) == 1)
                n += (double)v;
        if (f)
            fclose(f);
    }
    closedir(d);
    return n;
}

/* The PS's process CPU seconds, from its STATS reply (cpu_s); its pid in
 * *pid when asked. */
static double s_ps_cpu_s(ss_conn_t *c, long *pid)
{
    Header h = HEADER__INIT;
    struct ss_msg reply;
    char err[512];
    h.type = MSG_TYPE__MSG_STATS;
    if (ss_conn_call(c, &h, NULL, 0, -1, &reply, err, sizeof err) != 0) {
        fprintf(stderr, "ps_bench: STATS: %s\n", err);
        exit(1);
    }
    json_t *o = NULL;
    double v = -1;
    int rc = ss_json_parse(reply.hdr->text ? reply.hdr->text : "", "the PS's STATS reply", &o, err,
                           sizeof err);
    if (rc == 0)
        rc = ss_json_num(o, "cpu_s", &v, "the PS's STATS reply", err, sizeof err);
    double p = -1;
    if (rc == 0 && pid && ss_json_num(o, "pid", &p, "the PS's STATS reply", err, sizeof err) == 0)
        *pid = (long)p;
    json_decref(o);
    ss_msg_close(&reply);
    if (rc != 0) {
        fprintf(stderr, "ps_bench: %s\n", err);
        exit(1);
    }
    return v;
}

/* CPU per request on the PS and on the client (see the top). */
static void s_req(int clients, double seconds, uint64_t key_space)
{
    static const char *const io_threads[] = {"ZMQbg/IO"};
    ss_conn_t *c = s_connect();
    uint64_t requests;
    double io0, io1;
    uint32_t per_req = s_rows_per_req;
    s_rows_per_req = 4096;  /* every key a row, in few requests (perf counts them too) */
    s_rows_run(MSG_TYPE__MSG_PUSH, 1, 0.5, key_space);
    s_rows_per_req = per_req;
    long pid = -1;
    double ps0 = s_ps_cpu_s(c, &pid), cl0 = ss_cpu_process_s();
    double psx0 = s_ctx_switches(pid), clx0 = s_ctx_switches((long)getpid());
    ss_cpu_split(io_threads, 1, &io0);
    double rows = s_rows_count(MSG_TYPE__MSG_LOOKUP, clients, seconds, key_space, &requests);
    double psx1 = s_ctx_switches(pid), clx1 = s_ctx_switches((long)getpid());
    double cl1 = ss_cpu_process_s(), ps1 = s_ps_cpu_s(c, NULL);
    ss_cpu_split(io_threads, 1, &io1);
    double n = requests ? (double)requests : 1;
    char psx[32] = "null", clx[32] = "null";
    if (psx0 >= 0 && psx1 >= 0)
        snprintf(psx, sizeof psx, "%.2f", (psx1 - psx0) / n);
    if (clx0 >= 0 && clx1 >= 0)
        snprintf(clx, sizeof clx, "%.2f", (clx1 - clx0) / n);
    printf("{\"bench\":\"req\",\"clients\":%d,\"load\":\"%s\",\"keys_per_request\":%u,"
           "\"requests\":%llu,\"requests_per_s\":%.0f,\"ps_cpu_us_per_request\":%.2f,"
           "\"client_cpu_us_per_request\":%.2f,\"client_io_us_per_request\":%.2f,"
           "\"ps_ctx_switches_per_request\":%s,\"client_ctx_switches_per_request\":%s}\n",
           clients, clients == 1 ? "light" : "busy", s_rows_per_req,
           (unsigned long long)requests, rows / s_rows_per_req,
           (ps1 - ps0) * 1e6 / n, (cl1 - cl0) * 1e6 / n, (io1 - io0) * 1e6 / n, psx, clx);
    ss_conn_destroy(&c);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"keys", required_argument, 0, 'k'},
        {"reps", required_argument, 0, 'r'},   {"clients", required_argument, 0, 'n'},
        {"seconds", required_argument, 0, 'S'}, {"key-space", required_argument, 0, 'K'},
        {"set", required_argument, 0, 's'},    {"op", required_argument, 0, 'o'},
        {"keys-per-request", required_argument, 0, 'R'}, {0, 0, 0, 0}};
    const char *config = NULL, *sets[16];
    size_t n_sets = 0, keys = 10000000;
    int reps = 5, clients = 1, c, op = 0, r_set = 0;
    double seconds = 2;
    uint64_t key_space = 1000000;
    char err[1024];
    while ((c = getopt_long(argc, argv, "c:s:", opts, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 'k': keys = (size_t)atol(optarg); break;
        case 'r': reps = atoi(optarg); break;
        case 'n': clients = atoi(optarg); break;
        case 'S': seconds = atof(optarg); break;
        case 'K': key_space = (uint64_t)atoll(optarg); break;
        case 's': if (n_sets < 16) sets[n_sets++] = optarg; break;
        case 'o':
            op = !strcmp(optarg, "push") ? 1 : !strcmp(optarg, "lookup") ? 2
                 : !strcmp(optarg, "both") ? 0 : -1;
            break;
        case 'R': s_rows_per_req = (uint32_t)atol(optarg); r_set = 1; break;
        default: return 2;
        }
    }
    if (op < 0 || s_rows_per_req < 1 || s_rows_per_req > ROWS_PER_REQ_MAX) {
        fprintf(stderr, "ps_bench: --op is both, push or lookup; --keys-per-request 1..%d\n",
                ROWS_PER_REQ_MAX);
        return 2;
    }
    if (!config || optind >= argc) {
        fprintf(stderr, "usage: ps_bench -c JOB kv|rows|req [options]\n");
        return 2;
    }
    ss_log_init("bench", SS_LOG_WARN);
    s_cfg = ss_calloc(1, sizeof *s_cfg);
    if (ss_cfg_load(s_cfg, config, sets, n_sets, err, sizeof err) != 0 ||
        ss_curve_load(&s_curve, &s_cfg->security, SS_CURVE_CLIENT, err, sizeof err) != 0 ||
        !(s_cl = ss_cluster_new(s_cfg, NULL, NULL, err, sizeof err))) {
        fprintf(stderr, "ps_bench: %s\n", err);
        return 2;
    }
    if (!strcmp(argv[optind], "kv") && ss_cfg_row_dim(s_cfg) != 1) {
        fprintf(stderr, "ps_bench: kv needs rows of one float (model.embedding_dim=1, "
                        "model.first_order=false), the job has %u\n", ss_cfg_row_dim(s_cfg));
        ss_free(s_cfg);
        return 2;
    }
    s_zctx = zmq_ctx_new();
    if (!strcmp(argv[optind], "kv"))
        s_kv(keys, reps);
    else if (!strcmp(argv[optind], "req")) {
        if (!r_set)
            s_rows_per_req = 16;  /* small requests: what they cost apart from keys */
        s_req(clients > 16 ? 16 : clients, seconds, key_space);
    }
    else
        s_rows(clients > 16 ? 16 : clients, seconds, key_space, op);
    zmq_ctx_term(s_zctx);
    ss_curve_wipe(&s_curve);
    ss_cluster_destroy(&s_cl);
    ss_free(s_cfg);
    return 0;
}
