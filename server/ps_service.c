/* ps_service.c - shadow-ps sockets, service threads and request handlers.
 *
 * DESIGN: no hand-off. Each of the ps.threads service threads owns a ROUTER
 * socket of its own, bound at an endpoint of its own (ss_cluster: thread t
 * at the PS's tcp port + t, or its ipc path + ".t"), and serves every
 * request it reads on that thread: decode, check, shard, reply. Thread 0 is
 * the main thread, which also runs the recovery checkpoints and the shard's
 * clock between requests; threads 1.. are started by ps_service_run().
 * Clients pick a thread per connection (ss_cluster_ps_endpoint(): trainers
 * spread theirs); shadow-ctl and other plain clients use the advertised
 * endpoint, thread 0's. (An earlier design read one ROUTER on the main
 * thread and handed each request to a service thread over inproc: two
 * wake-ups and a serial thread per request; docs/scaling.md measures both.)
 * A busy thread reads the requests waiting on its socket one after another
 * without sleeping in between (ZMQ_EVENTS says whether another waits, then
 * a ZMQ_DONTWAIT read; up to PS_BURST in a row), so it never sleeps while
 * work waits. Service threads share the shard objects,
 * which are thread-safe on their own (lock striping in ps_embed, one mutex
 * in ps_sync); counters are per thread and summed by STATS.
 *
 * Stopping: a SHUTDOWN or a signal stops every thread after the request it
 * is handling; requests are handled whole, so no acknowledged request is
 * dropped. ps_service_run() joins the threads before it returns.
 *
 * Who may ask what: with security.curve on, every ROUTER is a CURVE server
 * and the ZAP handler (ss_auth) admits only listed keys. Every request then
 * goes through s_gate(): a connection that has not said HELLO gets
 * SS_E_NOHELLO (HELLO is the only request served before), and SHUTDOWN,
 * CHECKPOINT(_DONE) and INIT need an admin key (SS_E_DENIED). The rights come
 * from the ZAP metadata of the request's header frame (not the identity
 * frame: ZeroMQ leaves it off that one after a poll). Each thread keeps the
 * connections that said HELLO on its own socket (routing ids are per
 * socket: two sockets may give two connections the same one).
 *
 * Bounded queues (security.max_in_flight = Q): each ROUTER holds at most Q
 * requests and 2Q replies per connection (RCVHWM, SNDHWM). The replies get
 * twice the room because ZeroMQ learns that a pipe was read only a few
 * messages later (its low-water mark): with room for Q alone, a client with
 * Q requests in flight, reading every reply, now and then had one dropped
 * (test_ps_threads: test_burst_replies_not_dropped). Replies are sent
 * with ROUTER_MANDATORY and without blocking: one to a connection whose
 * queue is full (a client that does not read) or gone is dropped and
 * counted. */
#include "ps_service.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "ps_ckpt.h"
#include "ps_embed.h"
#include "ss_peers.h"
#include "ps_sync.h"
#include "ss_assert.h"
#include "ss_auth.h"
#include "ss_cluster.h"
#include "ss_cpu.h"
#include "ss_err.h"
#include "ss_fs.h"
#include "ss_listen.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_metrics.h"
#include "ss_msg.h"
#include "ss_stats.h"
#include "ss_time.h"

#define PS_BURST 64                  /* requests read in a row before polling again */
#define PS_PEERS_MAX (1u << 18)      /* most connections remembered as having said HELLO */
#define PS_REPLY_SLACK 4096          /* bytes of a reply besides its rows (header, frames) */
#define PS_STATS_MAX (64u << 10)     /* most bytes of a STATS reply's JSON */

/* Per-thread counters, listed once (memcached thread_stats): JSON key and
 * Prometheus name shadowsync_ps_<key>_total. */
#define PS_COUNTERS(X)                                                                     \
    X(req_hello, "HELLO requests") X(req_ping, "PING requests")                            \
    X(req_stats, "STATS requests") X(req_checkpoint, "CHECKPOINT requests")                \
    X(req_shutdown, "SHUTDOWN requests")                                                   \
    X(req_lookup, "LOOKUP requests (a PUSH_LOOKUP counts as a push and a lookup)")         \
    X(req_push, "PUSH requests (a PUSH_LOOKUP counts as a push and a lookup)")             \
    X(req_init, "INIT requests") X(req_elastic, "ELASTIC requests")                       \
    X(req_pull, "PULL requests") X(bad_requests, "requests answered with an error")        \
    X(nonfinite_refused, "pushes, INITs or ELASTICs refused for a NaN, an infinity or a "   \
      "value beyond security.max_abs_value")                                               \
    X(keys_looked_up, "keys looked up")                                                    \
    X(keys_pushed, "keys whose gradients were applied or refused")                         \
    X(keys_over_capacity, "keys refused because the shard was full (tables.capacity_rows)") \
    X(refused_no_hello, "requests refused: no HELLO on the connection")                    \
    X(refused_not_admin, "requests refused: not an admin key, or no valid admin token")    \
    X(replies_dropped, "replies dropped: the client is gone or does not read")             \
    X(hellos_forgotten, "connections forgotten to make room for a new HELLO")              \
    X(bytes_in, "request bytes") X(bytes_out, "reply bytes")                               \
    X(ckpt_cpu_us, "CPU microseconds spent writing checkpoints")

/* Everything else a STATS reply and the metrics endpoint show (JSON key,
 * Prometheus name or NULL, labels, kind, help): PS_HEAD before the counters,
 * PS_FIGURES after them (the order of the STATS reply; scripts read the
 * counters from the PS's one-line "stats at exit" log, cut at 1 KiB). */
#define PS_HEAD(X)                                                                             \
    X(role, NULL, NULL, INFO, "embedding or sync")                                           \
    X(shard, NULL, NULL, INFO, "shard index")                                                \
    X(endpoint, NULL, NULL, INFO, "advertised endpoint")                                     \
    X(pid, NULL, NULL, INFO, "process id")                                                   \
    X(threads, NULL, NULL, INFO, "service threads")                                          \
    X(uptime_s, "shadowsync_ps_uptime_seconds", NULL, GAUGE, "seconds since the PS started") \
    X(cpu_s, "shadowsync_ps_cpu_seconds", NULL, GAUGE, "CPU time of the PS process")         \
    X(cpu_zmq_io_s, NULL, NULL, INFO, "CPU seconds of the ZeroMQ I/O thread")                \
    X(rss_bytes, "shadowsync_ps_rss_bytes", NULL, GAUGE, "resident memory of the process")
#define PS_FIGURES(X)                                                                          \
    X(curve, NULL, NULL, INFO, "security.curve")                                             \
    X(auth_allowed, NULL, NULL, INFO, "CURVE handshakes of listed keys")                     \
    X(auth_refused, "shadowsync_ps_auth_refused_total", NULL, COUNTER,                       \
      "CURVE handshakes refused (key not listed)")                                           \
    X(connections_open, "shadowsync_ps_connections_open", NULL, GAUGE, "connections open")  \
    X(connections_accepted, NULL, NULL, INFO, "connections accepted")                        \
    X(connections_refused, "shadowsync_ps_connections_refused_total", NULL, COUNTER,         \
      "connections refused (open-file limit)")                                              \
    X(handshakes_failed, NULL, NULL, INFO, "handshakes that failed")                         \
    X(connections_capacity, NULL, NULL, INFO, "connections the open-file limit allows")      \
    X(hello_peers, NULL, NULL, INFO, "connections remembered as having said HELLO")          \
    X(rows, "shadowsync_ps_rows", NULL, GAUGE, "embedding rows stored in this shard")        \
    X(storage_bytes, "shadowsync_ps_memory_bytes", NULL, GAUGE,                              \
      "bytes of rows, optimizer state and maps in this shard")                              \
    X(max_memory_bytes, NULL, NULL, INFO, "tables.max_memory_bytes")                         \
    X(rows_admitted, "shadowsync_ps_rows_admitted_total", NULL, COUNTER, "rows created")    \
    X(keys_not_admitted, "shadowsync_ps_keys_not_admitted_total", NULL, COUNTER,             \
      "pushed keys dropped: not yet seen tables.admit_after times")                          \
    X(rows_evicted_ttl, "shadowsync_ps_rows_evicted_total", "cause=\"ttl\"", COUNTER,        \
      "rows deleted, by cause")                                                              \
    X(rows_evicted_memory, "shadowsync_ps_rows_evicted_total", "cause=\"memory\"", COUNTER,  \
      "rows deleted, by cause")                                                              \
    X(empty, NULL, NULL, INFO, "sync shard not yet seeded")                                  \
    X(range_offset, NULL, NULL, INFO, "first center element of this sync shard")             \
    X(range_length, NULL, NULL, INFO, "center elements of this sync shard")                  \
    X(elastic_rounds, "shadowsync_ps_elastic_rounds_total", NULL, COUNTER,                   \
      "EASGD rounds served by this sync shard")

/* Counter slots (PS_C_*) and figures (PS_F_*); in the table of all stats
 * the counters sit at PS_S_COUNTER0 + PS_C_*, between PS_HEAD and PS_FIGURES. */
enum {
#define PS_ID(name, help) PS_C_##name,
    PS_COUNTERS(PS_ID)
#undef PS_ID
    PS_N_COUNTERS
};
enum {
#define PS_ID(name, prom, labels, kind, help) PS_F_##name,
    PS_HEAD(PS_ID)
    PS_S_COUNTER0,
    PS_S_BEFORE_FIGURES = PS_S_COUNTER0 + PS_N_COUNTERS - 1,
    PS_FIGURES(PS_ID)
#undef PS_ID
    PS_N_STATS
};

static const struct ss_stat_def s_stat_defs[PS_N_STATS] = {
#define PS_DEF(name, prom, labels, kind, help) {#name, prom, labels, 0, SS_STAT_##kind, help, 0},
    PS_HEAD(PS_DEF)
#define PS_DEF_C(name, help) \
    {#name, "shadowsync_ps_" #name "_total", NULL, 0, SS_STAT_COUNTER, help, 0},
    PS_COUNTERS(PS_DEF_C)
#undef PS_DEF_C
    PS_FIGURES(PS_DEF)
#undef PS_DEF
};

/* Request types timed for the latency histograms. */
enum { PS_LAT_LOOKUP, PS_LAT_PUSH, PS_LAT_PUSH_LOOKUP, PS_LAT_SYNC, PS_LAT_OTHER, PS_LAT_N };

struct ps_thread {
    ps_service_t *svc;               /* owner */
    struct ss_hist lat[PS_LAT_N];    /* handling time by request type, this thread's */
    pthread_t tid;                   /* the thread */
    int index;                       /* 0..threads-1 */
    _Atomic uint64_t *ctr;           /* its counter slot in svc->ctrs (PS_C_*) */
    int started;                     /* tid is a running thread */
    void *sock;                      /* its ROUTER, owned; used by this thread only */
    ss_listen_t *listen;             /* sock's connections (this thread; stats: any) */
    ss_peers_t *peers;               /* sock's connections that said HELLO */
    char bound[SS_CLUSTER_EP_MAX];   /* the endpoint sock is bound at */
} __attribute__((aligned(64)));

struct ps_service {
    const struct ss_cfg *cfg;        /* borrowed */
    int role;                        /* enum ps_role */
    uint32_t shard;                  /* shard index */
    int noop;                        /* benchmark mode */
    const ss_cluster_t *cluster;     /* membership, borrowed */
    uint32_t n_shards;               /* embedding shards of the job */
    char endpoint[SS_CFG_MAX_STR];   /* advertised endpoint (what clients connect to) */
    uint64_t config_hash;            /* ss_cluster_hello_hash of this PS */
    uint64_t start_ms;               /* for uptime */
    void *zctx;                      /* ZeroMQ context, owned */
    struct ss_curve curve;           /* this PS's CURVE keys (curve.on: security.curve) */
    char admin_token[SS_ADMIN_TOKEN_MAX]; /* admin requests carry it; "" = none (ss_auth.h) */
    ss_auth_t *auth;                 /* ZAP handler when CURVE is on, owned */
    ps_embed_t *embed;               /* role embedding: the shard */
    ps_sync_t *sync;                 /* role sync: the center range */
    int n_threads;                   /* service threads */
    struct ps_thread *threads;       /* n_threads entries */
    ss_ctrs_t *ctrs;                 /* one counter slot per service thread */
    atomic_int shutdown_requested;   /* set by a SHUTDOWN request */
    atomic_int threads_stop;         /* tells service threads to exit */
    atomic_int threads_ready;        /* count of threads that started */
    pthread_mutex_t ckpt_lock;       /* one checkpoint at a time (requests, timer) */
    uint64_t next_ckpt_ms;           /* next recovery checkpoint, 0 = none; main thread */
};

/* What a handler needs to answer one request. */
struct ps_req {
    struct ps_thread *th;            /* calling thread */
    void *sock;                      /* its ROUTER */
    uint8_t id[SS_MSG_MAX_ID];       /* client identity */
    size_t id_len;                   /* bytes of id */
    int admin;                       /* the client may SHUTDOWN, CHECKPOINT, INIT */
    char key[SS_Z85_KEY_LEN + 1];    /* its CURVE public key, "" without CURVE */
    struct ss_msg msg;               /* the request */
};

typedef int (*ps_handler_fn)(ps_service_t *self, struct ps_req *req, char *err, size_t len);

const char *ps_role_name(int role)
{
    return role == PS_ROLE_SYNC ? "sync" : "embedding";
}

#define COUNT(th, field, n) ss_ctr_add((th)->ctr, PS_C_##field, (uint64_t)(n))

/* ---------------------------------------------------------------- replies */

static void s_reply_init(Header *h, const struct ps_req *req)
{
    header__init(h);
    h->version = SS_PROTO_VERSION;
    h->type = req->msg.hdr->type;
    h->req_id = req->msg.hdr->req_id;
    h->has_status = 1;
    h->status = 0;
}

static int s_reply_empty(struct ps_req *req, const char *text)
{
    Header h;
    s_reply_init(&h, req);
    h.text = (char *)text;
    return ss_msg_send(req->sock, req->id, req->id_len, &h, NULL, 0);
}

/* Reply with one float frame handed over as a zmq message. */
static int s_reply_floats(struct ps_req *req, zmq_msg_t *frame, uint64_t length, uint32_t dim)
{
    Header h;
    s_reply_init(&h, req);
    h.has_length = 1;
    h.length = length;
    if (dim) {
        h.has_dim = 1;
        h.dim = dim;
    }
    COUNT(req->th, bytes_out, zmq_msg_size(frame));
    return ss_msg_send_zmsgs(req->sock, req->id, req->id_len, &h, frame, 1);
}

/* --------------------------------------------------------------- handlers */

static int s_on_hello(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    const Header *h = req->msg.hdr;
    COUNT(req->th, req_hello, 1);
    if (!h->has_config_hash || h->config_hash != self->config_hash) {
        /* the hashes stay out of the reply: a refusal tells an unknown
         * client nothing about the job (issue 22) */
        snprintf(err, len,
                 "cluster config hash mismatch: this %s PS %u has another cluster "
                 "configuration than the client; start every process with the same job file "
                 "and --set overrides (the same number of PSs and trainers, tables, model "
                 "shape), listing the PSs in the same order (the client may take this PS for "
                 "another shard)", ps_role_name(self->role), self->shard);
        return SS_E_HASH;
    }
    int forgot = ss_peers_add(req->th->peers, req->id, req->id_len);
    if (forgot < 0) {
        snprintf(err, len, "routing id of %zu bytes: at most %d (ZMQ_ROUTING_ID)", req->id_len,
                 SS_PEER_ID_MAX);
        return SS_E_INVAL;
    }
    if (forgot) {
        uint64_t n = COUNT(req->th, hellos_forgotten, 1) + 1;
        if (n <= 10 || n % 1000 == 0)
            SS_LOG(SS_LOG_WARN, "more than %zu connections said HELLO: forgot the oldest (it "
                   "says HELLO again when it next asks) [%llu forgotten on this thread]",
                   ss_peers_count(req->th->peers), (unsigned long long)n);
    }
    return s_reply_empty(req, "hello");
}

static int s_on_ping(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    COUNT(req->th, req_ping, 1);
    return s_reply_empty(req, "pong");
}

/* The value this PS runs with for the key in text (shadow-ctl config get
 * --live): the job file plus every --set it was started with. */
static int s_on_config(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    const char *key = req->msg.hdr->text;
    char value[SS_CFG_MAX_LIST * SS_CFG_MAX_STR];
    if (!key || ss_cfg_get(self->cfg, key, value, sizeof value) != 0) {
        snprintf(err, len, "no config key '%.100s' (see conf/local.yaml)", key ? key : "");
        return SS_E_NOTFOUND;
    }
    return s_reply_empty(req, value);
}

/* The connections' and the ZAP handler's figures, summed over the threads'
 * sockets (the open-file capacity is the process's: the largest). */
static void s_security_snap(ps_service_t *self, struct ss_snap *sn)
{
    struct ss_listen_stats ls = {0};
    struct ss_auth_stats as = {0};
    size_t hello = 0;
    for (int i = 0; i < self->n_threads; i++) {
        struct ss_listen_stats t = {0};
        if (self->threads[i].listen)
            ss_listen_get_stats(self->threads[i].listen, &t);
        ls.open += t.open;
        ls.accepted += t.accepted;
        ls.accept_failed += t.accept_failed;
        ls.handshake_failed += t.handshake_failed;
        if (t.capacity > ls.capacity)
            ls.capacity = t.capacity;
        if (self->threads[i].peers)
            hello += ss_peers_count(self->threads[i].peers);
    }
    if (self->auth)
        ss_auth_get_stats(self->auth, &as);
    ss_snap_bool(sn, PS_F_curve, self->curve.on);
    ss_snap_u64(sn, PS_F_auth_allowed, as.allowed);
    ss_snap_u64(sn, PS_F_auth_refused, as.refused);
    ss_snap_i64(sn, PS_F_connections_open, ls.open);
    ss_snap_u64(sn, PS_F_connections_accepted, ls.accepted);
    ss_snap_u64(sn, PS_F_connections_refused, ls.accept_failed);
    ss_snap_u64(sn, PS_F_handshakes_failed, ls.handshake_failed);
    ss_snap_i64(sn, PS_F_connections_capacity, ls.capacity);
    ss_snap_u64(sn, PS_F_hello_peers, hello);
}

/* The embedding shard's or the sync shard's figures. */
static void s_shard_snap(ps_service_t *self, struct ss_snap *sn)
{
    if (self->embed) {
        struct ps_embed_stats st;
        ps_embed_stats(self->embed, &st);
        ss_snap_u64(sn, PS_F_rows, ps_embed_rows(self->embed));
        ss_snap_u64(sn, PS_F_storage_bytes, ps_embed_bytes(self->embed));
        ss_snap_i64(sn, PS_F_max_memory_bytes, self->cfg->max_memory_bytes);
        ss_snap_u64(sn, PS_F_rows_admitted, st.rows_admitted);
        ss_snap_u64(sn, PS_F_keys_not_admitted, st.keys_not_admitted);
        ss_snap_u64(sn, PS_F_rows_evicted_ttl, st.rows_evicted_ttl);
        ss_snap_u64(sn, PS_F_rows_evicted_memory, st.rows_evicted_memory);
    }
    if (self->sync) {
        uint64_t off;
        size_t l;
        ps_sync_range(self->sync, &off, &l);
        ss_snap_bool(sn, PS_F_empty, ps_sync_is_empty(self->sync));
        ss_snap_u64(sn, PS_F_range_offset, off);
        ss_snap_u64(sn, PS_F_range_length, l);
        ss_snap_u64(sn, PS_F_elastic_rounds, ps_sync_rounds(self->sync));
    }
}

/* Every figure of this PS now (v: PS_N_STATS entries): the one source of
 * STATS replies, the exit log line and the metrics endpoint. */
static void s_snapshot(ps_service_t *self, struct ss_snap *sn, struct ss_val *v)
{
    static const char *const io_threads[] = {"ZMQbg/IO"};
    uint64_t sum[PS_N_COUNTERS];
    double io_s;
    ss_snap_init(sn, s_stat_defs, PS_N_STATS, v);
    ss_ctrs_sum(self->ctrs, sum);
    ss_snap_u64s(sn, PS_S_COUNTER0, sum, PS_N_COUNTERS);
    ss_cpu_split(io_threads, 1, &io_s);
    ss_snap_str(sn, PS_F_role, ps_role_name(self->role));
    ss_snap_u64(sn, PS_F_shard, self->shard);
    ss_snap_str(sn, PS_F_endpoint, self->endpoint);
    ss_snap_i64(sn, PS_F_pid, (int64_t)getpid());
    ss_snap_i64(sn, PS_F_threads, self->n_threads);
    ss_snap_num(sn, PS_F_uptime_s, (double)(ss_now_ms() - self->start_ms) / 1e3);
    ss_snap_num(sn, PS_F_cpu_s, ss_cpu_process_s());
    ss_snap_num(sn, PS_F_cpu_zmq_io_s, io_s);
    ss_snap_u64(sn, PS_F_rss_bytes, ss_mem_rss());
    s_security_snap(self, sn);
    s_shard_snap(self, sn);
}

char *ps_service_stats_json(ps_service_t *self, size_t max)
{
    struct ss_val v[PS_N_STATS];
    struct ss_snap sn;
    int cut;
    s_snapshot(self, &sn, v);
    char *text = ss_snap_json(&sn, ~0u, max, &cut);
    if (cut)
        SS_LOG(SS_LOG_WARN, "STATS reply cut at %zu bytes (limits.max_message_bytes)", max);
    return text;
}

static int s_on_stats(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    COUNT(req->th, req_stats, 1);
    char *text = ps_service_stats_json(self, PS_STATS_MAX);
    int rc = s_reply_empty(req, text);
    ss_free(text);
    return rc;
}

void ps_service_metrics(void *arg, ss_mw_t *w)
{
    ps_service_t *self = arg;
    static const char *const lat_names[PS_LAT_N] = {"lookup", "push", "push_lookup", "sync",
                                                    "other"};
    struct ss_val v[PS_N_STATS];
    struct ss_snap sn;
    char lab[64];
    s_snapshot(self, &sn, v);
    ss_snap_prom(&sn, w);
    for (int k = 0; k < PS_LAT_N; k++) {
        struct ss_hist h;
        memset(&h, 0, sizeof h);
        for (int i = 0; i < self->n_threads; i++)
            ss_hist_merge(&h, &self->threads[i].lat[k]);
        snprintf(lab, sizeof lab, "type=\"%s\"", lat_names[k]);
        ss_mw_hist(w, "shadowsync_ps_request_seconds",
                   "time to handle one request, by type (socket to reply queued)", lab, &h);
    }
}

/* Checkpoint file of this shard inside dir. */
static void s_ckpt_path(ps_service_t *self, const char *dir, char *out, size_t len)
{
    ps_ckpt_path(out, len, dir, ps_role_name(self->role), self->shard);
}

/* Shards of this PS's role in the job (cluster.embedding or cluster.sync). */
static uint32_t s_n_shards(const ps_service_t *self)
{
    return (uint32_t)ss_cluster_count(self->cluster, self->role == PS_ROLE_SYNC
                                                         ? SS_CLUSTER_SYNC
                                                         : SS_CLUSTER_EMBEDDING);
}

static void s_ckpt_dir(ps_service_t *self, char *out, size_t len)
{
    if (self->cfg->ckpt_dir[0])
        snprintf(out, len, "%s", self->cfg->ckpt_dir);
    else
        snprintf(out, len, "%s/ckpt", self->cfg->run_dir);
}

/* Write this shard's checkpoint into folder dir (created when missing),
 * recording the job's shard count and save_id (0: none); path receives the
 * file. One at a time: concurrent requests and the recovery timer wait for
 * each other, so they never write the same temporary file at once. Returns
 * 0 or an SS_E_* with err (SS_E_NOSPC for a full disk: the text says so and
 * names the file, and travels to the client in the error reply). */
static int s_write_ckpt(ps_service_t *self, const char *dir, uint64_t save_id, char *path,
                        size_t path_len, char *err, size_t len)
{
    struct ps_ckpt_who who = {self->shard, s_n_shards(self),
                              ps_ckpt_job_id(self->cfg->job_name, (uint64_t)self->cfg->job_seed),
                              save_id};
    int rc;
    s_ckpt_path(self, dir, path, path_len);
    ss_assert(pthread_mutex_lock(&self->ckpt_lock) == 0);
    if (ss_mkdirs(dir) != 0) {
        int e = errno;
        snprintf(err, len, "cannot create checkpoint directory %s: %s", dir, strerror(e));
        rc = ss_fs_errno_rc(e);
    } else {
        uint64_t cpu0_ns = ss_thread_cpu_ns();
        rc = self->embed ? ps_embed_checkpoint(self->embed, path, &who)
                         : ps_sync_checkpoint(self->sync, path, &who);
        /* what checkpoints cost, for benchmarks that count serving CPU apart */
        COUNT(&self->threads[0], ckpt_cpu_us, (ss_thread_cpu_ns() - cpu0_ns) / 1000);
        if (rc)
            snprintf(err, len, "checkpoint to %s failed: %s (see the PS log)", path,
                     ss_strerror(rc));
    }
    ss_assert(pthread_mutex_unlock(&self->ckpt_lock) == 0);
    return rc;
}

/* 1 when folder t (absolute, no ".." component) is root or lies inside it. */
static int s_inside(const char *t, const char *root)
{
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/')
        n--;
    return root[0] == '/' && strncmp(t, root, n) == 0 && (t[n] == '\0' || t[n] == '/');
}

/* The folder a CHECKPOINT request names in its text (a save of the output
 * model or of a job checkpoint: every PS writes into the folder of that
 * save), or the checkpoint folder when it names none. A relative folder is
 * relative to this PS's job.run_dir (the run directory of its host), so that
 * the trainer can name one folder for PSs on hosts with different run
 * directories. An absolute folder must lie inside job.run_dir or the
 * checkpoint folder: a request must not make the PS write wherever its user
 * may (without security.curve, anyone who reaches the port can send one).
 * Refuses ".." components. Returns 0 or SS_E_INVAL with err. */
static int s_request_dir(ps_service_t *self, const Header *h, char *out, size_t out_len,
                         char *err, size_t len)
{
    const char *t = h->text;
    if (!t || !t[0]) {
        s_ckpt_dir(self, out, out_len);
        return 0;
    }
    size_t n = strlen(t);
    int dotdot = strcmp(t, "..") == 0 || strncmp(t, "../", 3) == 0 || strstr(t, "/../") ||
                 (n >= 3 && strcmp(t + n - 3, "/..") == 0);
    if (n >= SS_CFG_MAX_STR || dotdot || strchr(t, '\n')) {
        snprintf(err, len, "CHECKPOINT: folder '%.64s' refused (too long, a '..' component or "
                 "a newline)", t);
        return SS_E_INVAL;
    }
    if (t[0] == '/') {
        char ck[SS_CFG_MAX_STR + 8];
        s_ckpt_dir(self, ck, sizeof ck);
        if (!s_inside(t, self->cfg->run_dir) && !s_inside(t, ck)) {
            snprintf(err, len, "CHECKPOINT: folder '%.64s' refused: an absolute folder must lie "
                     "inside this PS's job.run_dir (%.64s) or checkpoint folder (%.64s)", t,
                     self->cfg->run_dir, ck);
            return SS_E_INVAL;
        }
        snprintf(out, out_len, "%s", t);
    } else
        snprintf(out, out_len, "%s/%s", self->cfg->run_dir, t);
    return 0;
}

static int s_on_checkpoint(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    char path[SS_CFG_MAX_STR * 3], dir[SS_CFG_MAX_STR * 2 + 2];
    COUNT(req->th, req_checkpoint, 1);
    const Header *h = req->msg.hdr;
    int rc = s_request_dir(self, h, dir, sizeof dir, err, len);
    if (rc == 0)
        rc = s_write_ckpt(self, dir, h->has_save_id ? h->save_id : 0, path, sizeof path, err,
                          len);
    if (rc)
        return rc;
    SS_LOG(SS_LOG_INFO, "checkpoint written to %s", path);
    return s_reply_empty(req, path);
}

/* A save was committed (a job checkpoint or the output model): the text
 * names its folder (NAME.new-ID, as its CHECKPOINT did). This PS's files in
 * the other NAME.new-* folders beside it belong to earlier saves, or to
 * failed ones: on a host that shares no file system with the leading
 * trainer's nothing else removes them, and a job with periodic checkpoints
 * would leave one folder per checkpoint there until the end. The committed
 * save's folder is kept (the launcher's gather takes its parts home). */
static int s_on_checkpoint_done(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    char dir[SS_CFG_MAX_STR * 2 + 2], n_text[32];
    const Header *h = req->msg.hdr;
    size_t n = 0;
    COUNT(req->th, req_checkpoint, 1);
    if (!h->text || !h->text[0]) {
        snprintf(err, len, "CHECKPOINT_DONE: no folder named");
        return SS_E_INVAL;
    }
    int rc = s_request_dir(self, h, dir, sizeof dir, err, len);
    if (rc)
        return rc;
    ss_assert(pthread_mutex_lock(&self->ckpt_lock) == 0);
    rc = ps_ckpt_drop_other_saves(dir, ps_role_name(self->role), self->shard, &n, err, len);
    ss_assert(pthread_mutex_unlock(&self->ckpt_lock) == 0);
    if (rc)
        return rc;
    if (n)
        SS_LOG(SS_LOG_INFO, "save in %s committed: dropped this PS's files of %zu earlier "
               "save(s) beside it", dir, n);
    snprintf(n_text, sizeof n_text, "%zu", n);
    return s_reply_empty(req, n_text);
}

/* The recovery checkpoint when it is due (checkpoint.interval_s): written to
 * the checkpoint folder's recovery/, apart from the best model's. Main
 * thread, between requests. An empty sync shard has nothing to write yet. */
static void s_recovery_ckpt(ps_service_t *self)
{
    char path[SS_CFG_MAX_STR * 2], err[512];
    uint64_t now = ss_now_ms();
    if (!self->next_ckpt_ms || now < self->next_ckpt_ms)
        return;
    self->next_ckpt_ms = now + (uint64_t)(self->cfg->ckpt_interval_s * 1000.0);
    if (self->sync && ps_sync_is_empty(self->sync))
        return;
    uint64_t t0 = ss_now_ms();
    char dir[SS_CFG_MAX_STR + 16];
    s_ckpt_dir(self, dir, sizeof dir);
    snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/recovery");
    if (s_write_ckpt(self, dir, 0, path, sizeof path, err, sizeof err) != 0)
        SS_LOG(SS_LOG_WARN, "recovery %s; the next try is in %.0f s", err,
               self->cfg->ckpt_interval_s);
    else
        SS_LOG(SS_LOG_INFO, "recovery checkpoint %s written in %llu ms", path,
               (unsigned long long)(ss_now_ms() - t0));
}

static int s_on_shutdown(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    COUNT(req->th, req_shutdown, 1);
    SS_LOG(SS_LOG_INFO, "SHUTDOWN requested%s%s", req->key[0] ? " by key " : "", req->key);
    atomic_store(&self->shutdown_requested, 1);
    return s_reply_empty(req, "shutting down");
}

/* Check the key groups of a LOOKUP/PUSH: tables, sizes and shard ownership. */
static int s_check_keys(ps_service_t *self, size_t n_groups, const uint32_t *tables,
                        uint64_t n, const uint64_t *keys, char *err, size_t len)
{
    uint32_t n_shards = self->n_shards;
    if (n > (uint64_t)self->cfg->max_keys_per_request) {
        snprintf(err, len, "%llu keys in one request, limit is %lld (limits.max_keys_per_request)",
                 (unsigned long long)n, (long long)self->cfg->max_keys_per_request);
        return SS_E_TOOBIG;
    }
    for (size_t g = 0; g < n_groups; g++)
        if (tables[g] >= (uint64_t)self->cfg->n_tables) {
            snprintf(err, len, "table %u does not exist (tables.count is %lld)", tables[g],
                     (long long)self->cfg->n_tables);
            return SS_E_RANGE;
        }
    for (uint64_t i = 0; i < n && n_shards > 1; i++)
        if (ss_key_shard(keys[i], n_shards) != self->shard) {
            snprintf(err, len, "key %016llx belongs to shard %u, not %u",
                     (unsigned long long)keys[i], ss_key_shard(keys[i], n_shards), self->shard);
            return SS_E_RANGE;
        }
    return 0;
}

/* Refuse a lookup whose reply (n_rows rows) would not fit in a message: the
 * client could not receive it (limits.max_message_bytes). */
static int s_check_reply_size(ps_service_t *self, uint64_t n_rows, char *err, size_t len)
{
    uint64_t bytes = n_rows * ss_cfg_row_dim(self->cfg) * sizeof(float);
    if (bytes + PS_REPLY_SLACK <= (uint64_t)self->cfg->max_message_bytes)
        return 0;
    snprintf(err, len, "a reply of %llu rows would be %llu bytes, over "
             "limits.max_message_bytes (%lld): look up fewer keys at once",
             (unsigned long long)n_rows, (unsigned long long)bytes,
             (long long)self->cfg->max_message_bytes);
    return SS_E_TOOBIG;
}

/* Refuse a request whose floats hold a NaN, an infinity or a value beyond
 * security.max_abs_value (one would poison a row or the center for good: a
 * huge gradient overflows an Adagrad accumulator, a huge ELASTIC the center):
 * counted, nothing applied. */
static int s_check_finite(ps_service_t *self, struct ps_req *req, const float *v, uint64_t n,
                          const char *what, char *err, size_t len)
{
    double max_abs = self->cfg->security.max_abs_value;
    uint64_t i = ss_floats_first_beyond(v, n, (float)max_abs);
    if (i == n)
        return 0;
    COUNT(req->th, nonfinite_refused, 1);
    if (ss_floats_first_nonfinite(v + i, 1) == 1)  /* finite, only too large */
        snprintf(err, len, "%s hold %g at element %llu of %llu, beyond "
                 "security.max_abs_value (%g): request refused, nothing applied", what,
                 (double)v[i], (unsigned long long)i, (unsigned long long)n, max_abs);
    else
        snprintf(err, len, "%s hold a non-finite value (%g at element %llu of %llu): request "
                 "refused, nothing applied", what, (double)v[i], (unsigned long long)i,
                 (unsigned long long)n);
    return SS_E_INVAL;
}

static int s_on_lookup(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    const Header *h = req->msg.hdr;
    const uint64_t *keys = zmq_msg_data(&req->msg.frames[0]);
    uint32_t dim = ss_cfg_row_dim(self->cfg);
    uint64_t n = ss_msg_n_keys(h);
    size_t n_full = 0;
    zmq_msg_t rows;
    int rc;

    COUNT(req->th, req_lookup, 1);
    if ((rc = s_check_keys(self, h->n_tables, h->tables, n, keys, err, len)) != 0 ||
        (rc = s_check_reply_size(self, n, err, len)) != 0)
        return rc;
    if (zmq_msg_init_size(&rows, n * dim * sizeof(float)) != 0) {
        snprintf(err, len, "cannot allocate %llu rows", (unsigned long long)n);
        return SS_E_NOMEM;
    }
    float *out = zmq_msg_data(&rows);
    if (self->noop)
        memset(out, 0, n * dim * sizeof(float));
    else if (h->has_read_only && h->read_only)  /* scoring: leaves the shard as it was */
        ps_embed_peek_groups(self->embed, h->n_tables, h->tables, h->counts, keys, out);
    else
        ps_embed_lookup_groups(self->embed, h->n_tables, h->tables, h->counts, keys, out,
                               &n_full);
    COUNT(req->th, keys_looked_up, n);
    COUNT(req->th, keys_over_capacity, n_full);
    return s_reply_floats(req, &rows, n, dim);
}

static int s_on_push(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    const Header *h = req->msg.hdr;
    const uint64_t *keys = zmq_msg_data(&req->msg.frames[0]);
    const float *grads = zmq_msg_data(&req->msg.frames[1]);
    uint32_t dim = ss_cfg_row_dim(self->cfg);
    uint64_t n = ss_msg_n_keys(h);
    size_t n_full = 0;
    int rc;

    COUNT(req->th, req_push, 1);
    if (h->dim != dim) {
        snprintf(err, len,
                 "PUSH rows have dim %u, tables have dim %u (model.embedding_dim, plus 1 "
                 "with model.first_order)", h->dim, dim);
        return SS_E_RANGE;
    }
    if ((rc = s_check_keys(self, h->n_tables, h->tables, n, keys, err, len)) != 0 ||
        (rc = s_check_finite(self, req, grads, n * dim, "PUSH gradients", err, len)) != 0)
        return rc;
    if (!self->noop)
        ps_embed_push_groups(self->embed, h->n_tables, h->tables, h->counts, keys, grads,
                             &n_full);
    COUNT(req->th, keys_pushed, n);
    if (n_full) {
        COUNT(req->th, keys_over_capacity, n_full);
        snprintf(err, len,
                 "shard %u is full (tables.capacity_rows = %lld): gradients of %zu new keys "
                 "dropped, the rest applied",
                 self->shard, (long long)self->cfg->capacity_rows, n_full);
        return SS_E_FULL;
    }
    return s_reply_empty(req, NULL);
}

/* PUSH then LOOKUP in one request (a worker's push of batch k with its lookup
 * of batch k + 2): half the messages of the two apart. The reply is the
 * lookup's; pushed keys refused at capacity are counted in its n_full. */
static int s_on_push_lookup(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    const Header *h = req->msg.hdr;
    const uint64_t *keys = zmq_msg_data(&req->msg.frames[0]);
    const float *grads = zmq_msg_data(&req->msg.frames[1]);
    const uint64_t *lkeys = zmq_msg_data(&req->msg.frames[2]);
    uint32_t dim = ss_cfg_row_dim(self->cfg);
    uint64_t n = ss_msg_n_keys(h), nl = ss_msg_n_lookup_keys(h);
    size_t n_full = 0, n_init = 0;
    zmq_msg_t rows;
    int rc;

    COUNT(req->th, req_push, 1);
    COUNT(req->th, req_lookup, 1);
    if (h->dim != dim) {
        snprintf(err, len, "PUSH_LOOKUP rows have dim %u, tables have dim %u", h->dim, dim);
        return SS_E_RANGE;
    }
    if ((rc = s_check_keys(self, h->n_tables, h->tables, n, keys, err, len)) != 0 ||
        (rc = s_check_keys(self, h->n_lookup_tables, h->lookup_tables, nl, lkeys, err, len)) ||
        (rc = s_check_reply_size(self, nl, err, len)) ||
        (rc = s_check_finite(self, req, grads, n * dim, "PUSH gradients", err, len)))
        return rc;
    if (zmq_msg_init_size(&rows, nl * dim * sizeof(float)) != 0) {
        snprintf(err, len, "cannot allocate %llu rows", (unsigned long long)nl);
        return SS_E_NOMEM;
    }
    float *out = zmq_msg_data(&rows);
    if (self->noop) {
        memset(out, 0, nl * dim * sizeof(float));
    } else {
        ps_embed_push_groups(self->embed, h->n_tables, h->tables, h->counts, keys, grads,
                             &n_full);
        ps_embed_lookup_groups(self->embed, h->n_lookup_tables, h->lookup_tables,
                               h->lookup_counts, lkeys, out, &n_init);
    }
    COUNT(req->th, keys_pushed, n);
    COUNT(req->th, keys_looked_up, nl);
    COUNT(req->th, keys_over_capacity, n_full + n_init);
    Header rh;
    s_reply_init(&rh, req);
    rh.has_length = rh.has_dim = rh.has_n_full = 1;
    rh.length = nl;
    rh.dim = dim;
    rh.n_full = n_full;
    COUNT(req->th, bytes_out, zmq_msg_size(&rows));
    return ss_msg_send_zmsgs(req->sock, req->id, req->id_len, &rh, &rows, 1);
}

static int s_on_init(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    const Header *h = req->msg.hdr;
    int applied = 0;
    COUNT(req->th, req_init, 1);
    int rc = s_check_finite(self, req, zmq_msg_data(&req->msg.frames[0]), h->length,
                            "INIT values", err, len);
    if (rc)
        return rc;
    rc = ps_sync_init(self->sync, h->offset, zmq_msg_data(&req->msg.frames[0]), h->length,
                          &applied);
    if (rc) {
        uint64_t off;
        size_t l;
        ps_sync_range(self->sync, &off, &l);
        snprintf(err, len, "INIT of [%llu, +%llu) refused: shard holds [%llu, +%zu): %s",
                 (unsigned long long)h->offset, (unsigned long long)h->length,
                 (unsigned long long)off, l, ss_strerror(rc));
        return rc;
    }
    if (applied)
        SS_LOG(SS_LOG_INFO, "center range [%llu, +%llu) initialized",
               (unsigned long long)h->offset, (unsigned long long)h->length);
    return s_reply_empty(req, applied ? "applied" : "kept");
}

/* ELASTIC and PULL share the range checks and the float reply. */
static int s_on_center(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    const Header *h = req->msg.hdr;
    zmq_msg_t out;
    int rc, elastic = h->type == MSG_TYPE__MSG_ELASTIC;

    if (elastic)
        COUNT(req->th, req_elastic, 1);
    else
        COUNT(req->th, req_pull, 1);
    /* the range before any allocation: a 20-byte PULL may ask for 16 GiB */
    uint64_t off;
    size_t held;
    ps_sync_range(self->sync, &off, &held);
    if (held > 0 && (h->length == 0 || h->offset < off || h->length > held ||
                     h->offset - off > held - h->length)) {
        snprintf(err, len, "%s of [%llu, +%llu) refused: shard holds [%llu, +%zu)",
                 ss_msg_type_name(h->type), (unsigned long long)h->offset,
                 (unsigned long long)h->length, (unsigned long long)off, held);
        return SS_E_RANGE;
    }
    if (elastic && (rc = s_check_finite(self, req, zmq_msg_data(&req->msg.frames[0]),
                                        h->length, "ELASTIC values", err, len)) != 0)
        return rc;
    if (held == 0) {
        snprintf(err, len, "sync shard %u is empty: send INIT first", self->shard);
        return SS_E_EMPTY;
    }
    if (zmq_msg_init_size(&out, h->length * sizeof(float)) != 0)
        return SS_E_NOMEM;
    rc = elastic ? ps_sync_elastic(self->sync, h->offset, zmq_msg_data(&req->msg.frames[0]),
                                   h->length, h->alpha, zmq_msg_data(&out))
                 : ps_sync_pull(self->sync, h->offset, zmq_msg_data(&out), h->length);
    if (rc) {
        uint64_t off;
        size_t l;
        zmq_msg_close(&out);
        ps_sync_range(self->sync, &off, &l);
        if (rc == SS_E_EMPTY)
            snprintf(err, len, "sync shard %u is empty: send INIT first", self->shard);
        else
            snprintf(err, len, "%s of [%llu, +%llu) refused: shard holds [%llu, +%zu): %s",
                     ss_msg_type_name(h->type), (unsigned long long)h->offset,
                     (unsigned long long)h->length, (unsigned long long)off, l,
                     ss_strerror(rc));
        return rc;
    }
    return s_reply_floats(req, &out, h->length, 0);
}

/* Which role may send which request, and which need an admin key. */
struct ps_route {
    int type;               /* MsgType */
    int role;               /* enum ps_role, or -1 for both */
    int admin;              /* only from an admin key (security.admin_keys) */
    ps_handler_fn fn;       /* handler */
};

static const struct ps_route s_routes[] = {
    {MSG_TYPE__MSG_HELLO, -1, 0, s_on_hello},
    {MSG_TYPE__MSG_PING, -1, 0, s_on_ping},
    {MSG_TYPE__MSG_STATS, -1, 0, s_on_stats},
    {MSG_TYPE__MSG_CONFIG, -1, 0, s_on_config},
    {MSG_TYPE__MSG_CHECKPOINT, -1, 1, s_on_checkpoint},
    {MSG_TYPE__MSG_CHECKPOINT_DONE, -1, 1, s_on_checkpoint_done},
    {MSG_TYPE__MSG_SHUTDOWN, -1, 1, s_on_shutdown},
    {MSG_TYPE__MSG_LOOKUP, PS_ROLE_EMBEDDING, 0, s_on_lookup},
    {MSG_TYPE__MSG_PUSH, PS_ROLE_EMBEDDING, 0, s_on_push},
    {MSG_TYPE__MSG_PUSH_LOOKUP, PS_ROLE_EMBEDDING, 0, s_on_push_lookup},
    {MSG_TYPE__MSG_INIT, PS_ROLE_SYNC, 1, s_on_init},
    {MSG_TYPE__MSG_ELASTIC, PS_ROLE_SYNC, 0, s_on_center},
    {MSG_TYPE__MSG_PULL, PS_ROLE_SYNC, 0, s_on_center},
};

/* Log a refused request: the first ten of a kind, then every 1000th. */
static void s_log_refused(uint64_t n, const char *what, const struct ps_req *req)
{
    if (n <= 10 || n % 1000 == 0)
        SS_LOG(SS_LOG_WARN, "refused %s from %s%s: %s [%llu so far on this thread]",
               ss_msg_type_name(req->msg.hdr->type), req->key[0] ? "key " : "a client",
               req->key, what, (unsigned long long)n);
}

/* HELLO first, admin requests from admin keys only (see top). */
static int s_gate(ps_service_t *self, struct ps_req *req, const struct ps_route *route,
                  char *err, size_t len)
{
    const char *name = ss_msg_type_name(route->type);
    if (route->type != MSG_TYPE__MSG_HELLO && !ss_peers_has(req->th->peers, req->id, req->id_len)) {
        s_log_refused(COUNT(req->th, refused_no_hello, 1) + 1, "no HELLO on this connection",
                      req);
        snprintf(err, len, "%s refused: say HELLO first (protocol version and config hash); "
                 "this PS serves nothing before", name);
        return SS_E_NOHELLO;
    }
    if (route->admin && !req->admin) {
        s_log_refused(COUNT(req->th, refused_not_admin, 1) + 1, "not an admin key", req);
        snprintf(err, len, "%s refused: key %s is not in security.admin_keys", name, req->key);
        return SS_E_DENIED;
    }
    if (route->admin && !ss_admin_token_ok(self->admin_token, req->msg.hdr->admin_token)) {
        s_log_refused(COUNT(req->th, refused_not_admin, 1) + 1, "no valid admin token", req);
        snprintf(err, len, "%s refused: not allowed", name);  /* says nothing of the job */
        return SS_E_DENIED;
    }
    return 0;
}

static int s_dispatch(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    int type = req->msg.hdr->type;
    for (size_t i = 0; i < sizeof s_routes / sizeof s_routes[0]; i++) {
        if (s_routes[i].type != type)
            continue;
        int rc = s_gate(self, req, &s_routes[i], err, len);
        if (rc)
            return rc;
        if (s_routes[i].role >= 0 && s_routes[i].role != self->role) {
            snprintf(err, len, "%s sent to a %s PS (shard %u)", ss_msg_type_name(type),
                     ps_role_name(self->role), self->shard);
            return SS_E_INVAL;
        }
        return s_routes[i].fn(self, req, err, len);
    }
    snprintf(err, len, "request type %d is not served by a PS", type);
    return SS_E_PROTO;
}

/* Latency histogram of a request type. */
static int s_lat_kind(int type)
{
    switch (type) {
    case MSG_TYPE__MSG_LOOKUP: return PS_LAT_LOOKUP;
    case MSG_TYPE__MSG_PUSH: return PS_LAT_PUSH;
    case MSG_TYPE__MSG_PUSH_LOOKUP: return PS_LAT_PUSH_LOOKUP;
    case MSG_TYPE__MSG_INIT: case MSG_TYPE__MSG_ELASTIC: case MSG_TYPE__MSG_PULL:
        return PS_LAT_SYNC;
    default: return PS_LAT_OTHER;
    }
}

/* Count a reply that could not be queued for its client, and log the first
 * ten and then every 1000th: a client that does not read its replies (its
 * queue holds security.max_in_flight) or that is gone. */
static void s_note_dropped(const ps_service_t *self, uint64_t n)
{
    if (n <= 10 || n % 1000 == 0)
        SS_LOG(SS_LOG_WARN, "dropped a reply: its client is gone or does not read its replies "
               "(%lld queued already: security.max_in_flight) [%llu dropped]",
               (long long)self->cfg->security.max_in_flight, (unsigned long long)n);
}

/* What the ZAP handler attached to a frame from a client: its key and
 * whether it is an admin key. Without CURVE every client may do anything. */
static void s_rights(const ps_service_t *self, const zmq_msg_t *frame, int *admin, char *key)
{
    const char *k = self->curve.on ? ss_auth_frame_key(frame) : NULL;
    *admin = !self->curve.on || ss_auth_frame_admin(frame);
    snprintf(key, SS_Z85_KEY_LEN + 1, "%s", k ? k : "");
}

/* Receive one request if one waits on sock: the identity, then the header
 * frame, whose ZAP metadata give the sender's rights, then the rest. Never
 * blocks. Returns 0, SS_E_TIMEOUT when nothing was there, SS_E_NET, or
 * ss_msg_recv()'s SS_E_PROTO with err. */
static int s_recv_request(ps_service_t *self, void *sock, struct ps_req *req, char *err,
                          size_t len)
{
    zmq_msg_t part;
    int rc = ss_msg_recv_part(sock, &part, ZMQ_DONTWAIT);
    if (rc)
        return rc;
    size_t n = zmq_msg_size(&part);
    req->id_len = n > SS_MSG_MAX_ID ? SS_MSG_MAX_ID : n;
    memcpy(req->id, zmq_msg_data(&part), req->id_len);
    int more = zmq_msg_more(&part);
    zmq_msg_close(&part);
    if (!more) {
        snprintf(err, len, "message has no header frame");
        return SS_E_PROTO;
    }
    if ((rc = ss_msg_recv_next(sock, &part)) != 0)
        return rc;
    s_rights(self, &part, &req->admin, req->key);
    return ss_msg_recv_rest(sock, &part, &req->msg, err, len);
}

/* Answer a request that failed with rc: count it, log the first few, send
 * the error reply. Refusals (no HELLO, not admin) are counted apart. */
static void s_fail(struct ps_thread *th, struct ps_req *req, int type, uint64_t req_id, int rc,
                   const char *err)
{
    if (rc != SS_E_FULL && rc != SS_E_NOHELLO && rc != SS_E_DENIED) {
        /* log the first few and then every 1000th: a flood of bad
         * requests must not flood the log too */
        uint64_t n = COUNT(th, bad_requests, 1) + 1;
        if (n <= 10 || n % 1000 == 0)
            SS_LOG(SS_LOG_WARN, "bad request (%s): %s [%llu bad so far on this thread]",
                   ss_errname(rc), err, (unsigned long long)n);
    }
    if (req->id_len &&
        ss_msg_send_error(req->sock, req->id, req->id_len, type, req_id, rc, err) != 0)
        s_note_dropped(th->svc, COUNT(th, replies_dropped, 1) + 1);
}

/* Read and handle one request waiting on sock (th's ROUTER, or a test's),
 * on this thread. Returns 1 when a message was read (served, refused or
 * bad), 0 when none waited. */
static int s_serve_one(ps_service_t *self, struct ps_thread *th, void *sock)
{
    struct ps_req req;
    char err[512] = "";
    int type = 0;
    uint64_t req_id = 0;

    req.th = th;
    req.sock = sock;
    req.id_len = 0;
    req.admin = 0;
    req.key[0] = '\0';
    memset(&req.msg, 0, sizeof req.msg);
    int rc = s_recv_request(self, sock, &req, err, sizeof err);
    if (rc == SS_E_TIMEOUT || rc == SS_E_STOPPED)
        return 0;
    if (rc == SS_E_NET)
        return 1;
    COUNT(th, bytes_in, req.msg.bytes);
    if (rc == 0) {
        type = req.msg.hdr->type;
        req_id = req.msg.hdr->req_id;
        rc = ss_msg_check(&req.msg, 0, err, sizeof err);
        uint64_t t0 = ss_now_ns();
        if (rc == 0)
            rc = s_dispatch(self, &req, err, sizeof err);
        ss_hist_add(&th->lat[s_lat_kind(type)], ss_now_ns() - t0);
    }
    if (rc == SS_E_NET || rc == SS_E_TIMEOUT)  /* the reply could not be queued */
        s_note_dropped(self, COUNT(th, replies_dropped, 1) + 1);
    else if (rc != 0)
        s_fail(th, &req, type, req_id, rc, err);
    ss_msg_close(&req.msg);
    return 1;
}

/* A SHUTDOWN came, or the main thread saw a signal: stop after the request
 * at hand. */
static int s_stopping(ps_service_t *self)
{
    return atomic_load(&self->threads_stop) || atomic_load(&self->shutdown_requested);
}

/* 1 when another request waits on sock. Asking ZMQ_EVENTS also makes the
 * socket take the commands its I/O thread sent (among them that the
 * client's pipe was read): without it a thread that sends reply after reply
 * takes them only now and then (ZeroMQ throttles that in send and recv),
 * sees the pipe as full after security.max_in_flight replies, and drops
 * the next (found by ps_bench req: a lone client waited for a dropped
 * reply). A zmq_poll() does the same, but may sleep. */
static int s_more_waiting(void *sock)
{
    int events = 0;
    size_t sz = sizeof events;
    return zmq_getsockopt(sock, ZMQ_EVENTS, &events, &sz) == 0 && (events & ZMQ_POLLIN);
}

/* Serve th's socket for one poll: wait up to timeout_ms for a request or a
 * connection event, then read every request waiting (PS_BURST at most)
 * without sleeping in between. Returns -1 when the poll failed (not EINTR). */
static int s_serve_round(ps_service_t *self, struct ps_thread *th, long timeout_ms)
{
    zmq_pollitem_t items[2] = {{th->sock, 0, ZMQ_POLLIN, 0},
                               {ss_listen_socket(th->listen), 0, ZMQ_POLLIN, 0}};
    int n = zmq_poll(items, 2, timeout_ms);
    if (n < 0)
        return zmq_errno() == EINTR ? 0 : -1;
    if (n > 0 && (items[1].revents & ZMQ_POLLIN))
        ss_listen_drain(th->listen);
    if (n > 0 && (items[0].revents & ZMQ_POLLIN))
        for (int i = 0; i < PS_BURST && !s_stopping(self); i++)
            if (!s_serve_one(self, th, th->sock) || !s_more_waiting(th->sock))
                break;
    return 0;
}

/* Service thread 1.. : serve its own socket until told to stop. */
static void *s_thread_main(void *arg)
{
    struct ps_thread *th = arg;
    ps_service_t *self = th->svc;
    char name[16];
    snprintf(name, sizeof name, "svc-%d", th->index);
    ss_log_thread(name);
    atomic_fetch_add(&self->threads_ready, 1);
    while (!s_stopping(self))
        if (s_serve_round(self, th, 100) != 0) {
            SS_LOG(SS_LOG_ERROR, "poll failed: %s; this thread stops serving",
                   zmq_strerror(zmq_errno()));
            break;
        }
    return NULL;
}

static int s_build_shard(ps_service_t *self, const struct ps_service_conf *conf, char *err,
                         size_t len)
{
    const struct ss_cfg *cfg = conf->cfg;
    if (self->role == PS_ROLE_SYNC) {
        self->sync = ps_sync_new((size_t)cfg->max_message_bytes / sizeof(float));
    } else {
        struct ps_embed_conf ec = {
            .n_tables = (uint32_t)cfg->n_tables,
            .dim = ss_cfg_row_dim(cfg),
            .first_order = cfg->first_order ? 1u : 0u,
            .optimizer = cfg->optimizer,
            .lr = (float)cfg->table_lr,
            .eps = (float)cfg->table_eps,
            .init_acc = (float)cfg->table_init_acc,
            .init_scale = (float)cfg->table_init_scale,
            .l2 = (float)cfg->table_l2,
            .seed = (uint64_t)cfg->job_seed,
            .capacity_rows = (size_t)cfg->capacity_rows,
            .n_stripes = (uint32_t)cfg->ps_stripes,
            .admit_after = (uint32_t)cfg->admit_after,
            .admit_sketch_bytes = (size_t)cfg->admit_sketch_bytes,
            .ttl_s = (uint32_t)cfg->ttl_s,
            .max_memory_bytes = (size_t)cfg->max_memory_bytes,
        };
        self->embed = ps_embed_new(&ec);
    }
    if (!self->sync && !self->embed) {
        snprintf(err, len, "cannot create the %s shard", ps_role_name(self->role));
        return SS_E_CONFIG;
    }
    if (!conf->restore_dir)
        return 0;
    /* the own file, or every file of the saved set when the job that wrote
     * it had another shard count (ps_ckpt_set.h) */
    const char *dir = conf->restore_dir;
    int rc = self->embed ? ps_embed_restore_dir(self->embed, dir, self->shard, s_n_shards(self))
                         : ps_sync_restore_dir(self->sync, dir, self->shard, s_n_shards(self));
    if (rc) {
        snprintf(err, len, "cannot restore %s shard %u from %s: %s (the lines above say which "
                 "file and why)%s", ps_role_name(self->role), self->shard, dir, ss_strerror(rc),
                 rc == SS_E_NOTFOUND ? "; checkpoint first with 'shadow-ctl checkpoint'" : "");
        return rc;
    }
    SS_LOG(SS_LOG_INFO, "restored from %s", dir);
    return 0;
}

/* Make service thread th's ROUTER (bounded queues, replies that never
 * block, CURVE), watch its connections and bind it at the thread's endpoint.
 * Returns 0 or SS_E_NET with err. Main thread, before the threads start. */
static int s_open_socket(ps_service_t *self, struct ps_thread *th, char *err, size_t len)
{
    int linger = 0, zero = 0, one = 1;
    int hwm = (int)self->cfg->security.max_in_flight, reply_hwm = 2 * hwm;
    int64_t maxmsg = self->cfg->max_message_bytes;
    char what[64];
    th->sock = zmq_socket(self->zctx, ZMQ_ROUTER);
    if (!th->sock || zmq_setsockopt(th->sock, ZMQ_LINGER, &linger, sizeof linger) ||
        zmq_setsockopt(th->sock, ZMQ_RCVHWM, &hwm, sizeof hwm) ||
        zmq_setsockopt(th->sock, ZMQ_SNDHWM, &reply_hwm, sizeof reply_hwm) ||
        zmq_setsockopt(th->sock, ZMQ_SNDTIMEO, &zero, sizeof zero) ||
        zmq_setsockopt(th->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one) ||
        zmq_setsockopt(th->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) ||
        ss_curve_server(th->sock, &self->curve)) {
        snprintf(err, len, "cannot set up the sockets: %s", zmq_strerror(zmq_errno()));
        return SS_E_NET;
    }
    snprintf(what, sizeof what, "%s PS %u", ps_role_name(self->role), self->shard);
    th->listen = ss_listen_new(self->zctx, th->sock, what, self->cfg->security.max_connections,
                               err, len);
    if (!th->listen)
        return SS_E_NET;
    int rc = ss_cluster_bind_thread(self->cluster, th->sock, th->index, err, len);
    if (rc)
        return rc;
    ss_cluster_thread_bind_endpoint(self->cluster, th->index, th->bound, sizeof th->bound);
    if (th->index == 0)
        ss_auth_warn_plain_bind(ss_cluster_bind_endpoint(self->cluster), self->curve.on, what);
    return 0;
}

/* CURVE keys and the ZAP handler, when security.curve is on. */
static int s_secure(ps_service_t *self, char *err, size_t len)
{
    const struct ss_security_cfg *sec = &self->cfg->security;
    int rc = ss_curve_load(&self->curve, sec, SS_CURVE_SERVER, err, len);
    if (rc == 0)
        rc = ss_admin_token_read(sec->admin_token_file, self->admin_token, err, len);
    if (rc || !self->curve.on)
        return rc;
    self->auth = ss_auth_new(self->zctx, sec, err, len);
    return self->auth ? 0 : SS_E_CONFIG;
}

/* The service threads' slots, their counters and sockets. Returns 0 or an
 * SS_E_* with err. */
static int s_make_threads(ps_service_t *self, char *err, size_t len)
{
    int64_t n_peers = 2 * self->cfg->security.max_connections;
    self->n_threads = ss_cluster_ps_threads(self->cluster);
    self->ctrs = ss_ctrs_new(PS_N_COUNTERS, (size_t)self->n_threads);
    self->threads = ss_aligned_alloc(64, sizeof *self->threads * (size_t)self->n_threads);
    memset(self->threads, 0, sizeof *self->threads * (size_t)self->n_threads);
    for (int i = 0; i < self->n_threads; i++) {
        struct ps_thread *th = &self->threads[i];
        th->svc = self;
        th->ctr = ss_ctrs_slot(self->ctrs, (size_t)i);
        th->index = i;
        th->peers = ss_peers_new(n_peers < PS_PEERS_MAX ? (size_t)n_peers : PS_PEERS_MAX);
    }
    for (int i = 0; i < self->n_threads; i++) {
        int rc = s_open_socket(self, &self->threads[i], err, len);
        if (rc)
            return rc;
    }
    return 0;
}

ps_service_t *ps_service_new(const struct ps_service_conf *conf, char *err, size_t len)
{
    const struct ss_cfg *cfg = conf->cfg;
    const struct ss_cluster_id *me = ss_cluster_me(conf->cluster);
    ss_assert(me && (me->role == SS_CLUSTER_EMBEDDING || me->role == SS_CLUSTER_SYNC));
    ps_service_t *self = ss_calloc(1, sizeof *self);
    self->cfg = cfg;
    self->cluster = conf->cluster;
    self->role = me->role;
    self->shard = me->index;
    self->n_shards = (uint32_t)ss_cluster_count(conf->cluster, SS_CLUSTER_EMBEDDING);
    self->noop = conf->noop;
    self->config_hash = ss_cluster_hello_hash(conf->cluster, me->role, me->index);
    self->start_ms = ss_now_ms();
    snprintf(self->endpoint, sizeof self->endpoint, "%s",
             ss_cluster_endpoint(conf->cluster, me->role, me->index));
    self->zctx = zmq_ctx_new();
    ss_assert(self->zctx);
    /* one ZeroMQ I/O thread per service thread (before any socket): each
     * socket's connections go to the least loaded one, so no single I/O
     * thread carries every request of a many-threaded PS */
    if (zmq_ctx_set(self->zctx, ZMQ_IO_THREADS, (int)cfg->ps_threads) != 0) {
        snprintf(err, len, "cannot set %lld ZeroMQ I/O threads: %s", (long long)cfg->ps_threads,
                 zmq_strerror(zmq_errno()));
        zmq_ctx_term(self->zctx);
        ss_free(self);
        return NULL;
    }
    ss_assert(pthread_mutex_init(&self->ckpt_lock, NULL) == 0);
    if (cfg->ckpt_interval_s > 0 && !conf->noop)
        self->next_ckpt_ms = self->start_ms + (uint64_t)(cfg->ckpt_interval_s * 1000.0);
    if (s_build_shard(self, conf, err, len) != 0 || s_secure(self, err, len) != 0 ||
        s_make_threads(self, err, len) != 0) {
        ps_service_destroy(&self);
        return NULL;
    }
    return self;
}

/* Start service threads 1.. with signals blocked (the main thread takes
 * them) and wait until every one runs. */
static int s_start_threads(ps_service_t *self)
{
    sigset_t all, old;
    sigfillset(&all);
    ss_assert(pthread_sigmask(SIG_BLOCK, &all, &old) == 0);
    atomic_store(&self->threads_ready, 1);  /* thread 0: this one */
    for (int i = 1; i < self->n_threads; i++) {
        if (pthread_create(&self->threads[i].tid, NULL, s_thread_main, &self->threads[i]) != 0) {
            ss_assert(pthread_sigmask(SIG_SETMASK, &old, NULL) == 0);
            SS_LOG(SS_LOG_ERROR, "cannot start service thread %d", i);
            return SS_E_NOMEM;
        }
        self->threads[i].started = 1;
    }
    ss_assert(pthread_sigmask(SIG_SETMASK, &old, NULL) == 0);
    while (atomic_load(&self->threads_ready) < self->n_threads)
        usleep(1000);
    return 0;
}

/* Stop and join service threads 1.. (each finishes the request at hand). */
static void s_join_threads(ps_service_t *self)
{
    atomic_store(&self->threads_stop, 1);
    for (int i = 1; i < self->n_threads; i++)
        if (self->threads[i].started) {
            ss_assert(pthread_join(self->threads[i].tid, NULL) == 0);
            self->threads[i].started = 0;
        }
}

/* Once a second (main thread): move the embedding shard's clock to the
 * service's uptime in seconds, which also runs its TTL sweep. */
static void s_tick(ps_service_t *self, uint64_t *next_ms)
{
    uint64_t now = ss_now_ms();
    if (!self->embed || now < *next_ms)
        return;
    *next_ms = now + 1000;
    size_t expired = ps_embed_tick(self->embed, (uint32_t)((now - self->start_ms) / 1000));
    if (expired)
        SS_LOG(SS_LOG_DEBUG, "%zu rows expired (tables.ttl_s)", expired);
}

/* "at tcp://h:7000 and 3 more (tcp://h:7001 .. tcp://h:7003)" for the ready line. */
static void s_bound_text(const ps_service_t *self, char *out, size_t len)
{
    const struct ps_thread *last = &self->threads[self->n_threads - 1];
    if (self->n_threads == 1)
        snprintf(out, len, "%s (1 service thread", self->threads[0].bound);
    else
        snprintf(out, len, "%s and %d more, through %s (%d service threads, one socket each",
                 self->threads[0].bound, self->n_threads - 1, last->bound, self->n_threads);
}

int ps_service_run(ps_service_t *self, volatile sig_atomic_t *stop)
{
    uint64_t next_tick_ms = 0;
    char bound[3 * SS_CLUSTER_EP_MAX];
    int rc = 0;

    if (s_start_threads(self) != 0) {
        s_join_threads(self);
        return SS_E_NOMEM;
    }
    s_bound_text(self, bound, sizeof bound);
    ss_log_thread("svc-0");
    SS_LOG(SS_LOG_INFO, "ready: %s shard %u on %s, bound at %s, pid %d)",
           ps_role_name(self->role), self->shard, self->endpoint, bound, (int)getpid());
    while (!*stop && !s_stopping(self)) {
        if (s_serve_round(self, &self->threads[0], 100) != 0) {
            SS_LOG(SS_LOG_ERROR, "poll failed: %s", zmq_strerror(zmq_errno()));
            rc = SS_E_NET;
            break;
        }
        if (!*stop && !s_stopping(self))
            s_recovery_ckpt(self);
        s_tick(self, &next_tick_ms);
    }
    s_join_threads(self);
    SS_LOG(SS_LOG_INFO, "stopped");
    return rc;
}

void ps_service_destroy(ps_service_t **self_p)
{
    ps_service_t *self = *self_p;
    if (!self)
        return;
    if (self->threads)
        s_join_threads(self);
    for (int i = 0; self->threads && i < self->n_threads; i++) {
        struct ps_thread *th = &self->threads[i];
        ss_listen_destroy(&th->listen);
        if (th->sock)
            zmq_close(th->sock);
        ss_peers_destroy(&th->peers);
    }
    ss_auth_destroy(&self->auth);
    zmq_ctx_term(self->zctx);
    ss_curve_wipe(&self->curve);
    ps_embed_destroy(&self->embed);
    ps_sync_destroy(&self->sync);
    pthread_mutex_destroy(&self->ckpt_lock);
    ss_free(self->threads);
    ss_ctrs_destroy(&self->ctrs);
    ss_free(self);
    *self_p = NULL;
}

int ps_service_reset(ps_service_t *self, char *err, size_t len)
{
    ss_assert(self);
    for (int i = 0; i < self->n_threads; i++)
        ss_assert(!self->threads[i].started);
    const struct ss_cfg *cfg = self->cfg;
    struct ps_service_conf conf = {.cfg = cfg, .cluster = self->cluster, .noop = self->noop};
    ps_embed_destroy(&self->embed);
    ps_sync_destroy(&self->sync);
    int rc = s_build_shard(self, &conf, err, len);
    if (rc)
        return rc;
    for (int i = 0; i < self->n_threads; i++) {
        ss_peers_clear(self->threads[i].peers);
        _Atomic uint64_t *ctr = self->threads[i].ctr;
        for (size_t k = 0; k < PS_N_COUNTERS; k++)
            atomic_store_explicit(&ctr[k], 0, memory_order_relaxed);
        memset(self->threads[i].lat, 0, sizeof self->threads[i].lat);
    }
    atomic_store(&self->shutdown_requested, 0);
    atomic_store(&self->threads_stop, 0);
    self->start_ms = ss_now_ms();
    self->next_ckpt_ms = 0;
    if (cfg->ckpt_interval_s > 0 && !self->noop)
        self->next_ckpt_ms = self->start_ms + (uint64_t)(cfg->ckpt_interval_s * 1000.0);
    return 0;
}

void ps_service_serve_one(ps_service_t *self, void *sock)
{
    ss_assert(self && sock && self->n_threads >= 1);
    s_serve_one(self, &self->threads[0], sock);
}
