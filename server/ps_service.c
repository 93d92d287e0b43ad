/* ps_service.c - shadow-ps sockets and service threads: start, serve, stop.
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
 * Who may ask what, and the handlers, are ps_handlers.c's; the checkpoint
 * folders ps_service_ckpt.c's; the figures ps_stats.c's (ps_service_int.h).
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
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include "ps_ckpt.h"
#include "ps_service_int.h"
#include "ss_assert.h"
#include "ss_err.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_super.h"
#include "ss_time.h"

#define PS_BURST 64                  /* requests read in a row before polling again */
#define PS_SLEEP_MAX_MS 1000         /* longest idle sleep of service thread 0 */
#define PS_PEERS_MAX (1u << 18)      /* most connections remembered as having said HELLO */
#define PS_THREADS_MAX 64            /* ps.threads' maximum (ss_cfg) */

const char *ps_role_name(int role)
{
    return role == PS_ROLE_SYNC ? "sync" : "embedding";
}

/* Shards of this PS's role in the job (cluster.embedding or cluster.sync). */
uint32_t ps_svc_n_shards(const ps_service_t *self)
{
    return (uint32_t)ss_cluster_count(self->cluster, self->role == PS_ROLE_SYNC
                                                         ? SS_CLUSTER_SYNC
                                                         : SS_CLUSTER_EMBEDDING);
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

void ps_svc_wake_all(ps_service_t *self)
{
    uint64_t one = 1;
    if (self->wake_fd >= 0 && write(self->wake_fd, &one, sizeof one) != sizeof one)
        SS_LOG(SS_LOG_WARN, "cannot wake the service threads: %s", strerror(errno));
}

/* Empty the wake-up eventfd (a stopped service about to run again). */
static void s_wake_clear(ps_service_t *self)
{
    uint64_t n;
    if (self->wake_fd >= 0 && read(self->wake_fd, &n, sizeof n) < 0 && errno != EAGAIN)
        SS_LOG(SS_LOG_WARN, "cannot clear the service threads' wake-up: %s", strerror(errno));
}

/* What a service thread knows of its two ZeroMQ sockets between polls. It
 * sleeps in a plain poll() on their ZMQ_FDs (and the wake-up eventfd)
 * instead of zmq_poll(): zmq_poll() first polls every item without waiting
 * and asks every socket's ZMQ_EVENTS (a poll() and a getpid() each), then
 * does it all again after the wait, about 7 poll() and 5 getpid() calls a
 * request on an idle PS; this asks a socket only when its descriptor says
 * something came, or when a call on it may have taken the news (3 and 2).
 * ZMQ_FD is edge-triggered: it turns readable when commands reach the
 * socket, and any call on the socket may take them, so a socket is slept on
 * only after its ZMQ_EVENTS, read after the last call on it, said nothing
 * waits (the seen flags). */
struct s_waiter {
    int sock_fd;                 /* the ROUTER's ZMQ_FD */
    int listen_fd;               /* its connection monitor's ZMQ_FD */
    int sock_seen;               /* the ROUTER's ZMQ_EVENTS, read since the last call on it,
                                  * said no request waits */
    int listen_seen;             /* likewise for the monitor's events */
};

/* Set up w for th's sockets. Returns 0, or -1 when ZeroMQ gives no ZMQ_FD. */
static int s_waiter_init(struct s_waiter *w, struct ps_thread *th)
{
    size_t sz = sizeof w->sock_fd;
    w->sock_seen = w->listen_seen = 0;
    if (zmq_getsockopt(th->sock, ZMQ_FD, &w->sock_fd, &sz) != 0)
        return -1;
    sz = sizeof w->listen_fd;
    return zmq_getsockopt(ss_listen_socket(th->listen), ZMQ_FD, &w->listen_fd, &sz) != 0 ? -1
                                                                                          : 0;
}

/* Read the connection events waiting (ss_listen_drain) until ZMQ_EVENTS says
 * none is left; then the monitor may be slept on. */
static void s_listen_check(struct ps_thread *th, struct s_waiter *w)
{
    void *pair = ss_listen_socket(th->listen);
    for (int i = 0; i < 16; i++) {
        if (!s_more_waiting(pair)) {
            w->listen_seen = 1;
            return;
        }
        ss_listen_drain(th->listen);
    }
    w->listen_seen = 0;  /* a flood: look again next round before sleeping */
}

/* Serve th's socket for one poll: wait up to timeout_ms (-1: no limit) for a
 * request, a connection event or a stop (wake_fd), then read every request
 * waiting (PS_BURST at most) without sleeping in between. Returns -1 when
 * the poll failed (not EINTR). */
static int s_serve_round(ps_service_t *self, struct ps_thread *th, struct s_waiter *w,
                         long timeout_ms)
{
    int ready = 0;
    if (!w->listen_seen)
        s_listen_check(th, w);
    if (!w->sock_seen)
        ready = s_more_waiting(th->sock), w->sock_seen = !ready;
    if (!ready) {
        struct pollfd fds[3] = {{w->sock_fd, POLLIN, 0},
                                {w->listen_fd, POLLIN, 0},
                                {self->wake_fd, POLLIN, 0}};
        int n = poll(fds, self->wake_fd >= 0 ? 3 : 2, (int)timeout_ms);
        if (n < 0)
            return errno == EINTR ? 0 : -1;
        if (fds[1].revents)
            s_listen_check(th, w);
        if (fds[0].revents)
            ready = s_more_waiting(th->sock), w->sock_seen = !ready;
    }
    if (!ready)
        return 0;
    w->sock_seen = 0;  /* the calls below may take the next request's news */
    for (int i = 0; i < PS_BURST && !s_stopping(self); i++) {
        if (!ps_svc_serve_one(self, th, th->sock))
            break;
        if (!s_more_waiting(th->sock)) {
            w->sock_seen = 1;
            break;
        }
    }
    return 0;
}

/* The start-up restore's progress line, at most one a second (arg: the
 * time of the last one). "restoring:" tells the supervisor, which waits
 * for "ready:", that the PS is at it (ss_super.c): a large shard may take
 * longer to read than the start-up timeout. */
static void s_restore_progress(void *arg, const char *path, uint64_t bytes, uint64_t total)
{
    uint64_t *last_ms = arg, now = ss_now_ms();
    if (now - *last_ms < 1000)
        return;
    *last_ms = now;
    SS_LOG_ALWAYS(SS_LOG_INFO, "%s %.1f of %.1f MiB of %s read", SS_SUPER_RESTORING_WORD,
                  bytes / 1048576.0, total / 1048576.0, path);
}
/* Service thread 1.. : serve its own socket until told to stop. It has no
 * timer: an idle one sleeps until a request, a connection event or a stop
 * (wake_fd) comes, never waking on its own. */
static void *s_thread_main(void *arg)
{
    struct ps_thread *th = arg;
    ps_service_t *self = th->svc;
    char name[16];
    snprintf(name, sizeof name, "svc-%d", th->index);
    ss_log_thread(name);
    struct s_waiter w;
    int ok = s_waiter_init(&w, th) == 0;
    if (!ok)
        SS_LOG(SS_LOG_ERROR, "no ZMQ_FD: %s; this thread serves nothing",
               zmq_strerror(zmq_errno()));
    atomic_fetch_add(&self->threads_ready, 1);
    while (ok && !s_stopping(self))
        if (s_serve_round(self, th, &w, self->wake_fd >= 0 ? -1 : PS_SLEEP_MAX_MS) != 0) {
            SS_LOG(SS_LOG_ERROR, "poll failed: %s; this thread stops serving", strerror(errno));
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
        /* an empty shard is seeded from the mean of every trainer's replica
         * (ps_sync.h), waiting for them at most ps_svc_reseed_wait_ms */
        if (self->sync && conf->cluster)
            ps_sync_expect(self->sync,
                           (uint32_t)ss_cluster_count(conf->cluster, SS_CLUSTER_TRAINER),
                           ps_svc_reseed_wait_ms(cfg));
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
            .admit_sketch_bytes = (size_t)ss_cfg_admit_shard_bytes(cfg, self->n_shards),
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
     * it had another shard count (ps_ckpt_set.h); a line each second while
     * the files are read */
    const char *dir = conf->restore_dir;
    uint32_t n_shards = ps_svc_n_shards(self);
    uint64_t last_ms = ss_now_ms();
    ps_ckpt_progress(s_restore_progress, &last_ms);
    int rc = self->embed ? ps_embed_restore_dir(self->embed, dir, self->shard, n_shards)
                         : ps_sync_restore_dir(self->sync, dir, self->shard, n_shards);
    ps_ckpt_progress(NULL, NULL);
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
 * block, CURVE) and watch its connections (bound by s_bind_threads).
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
    return th->listen ? 0 : SS_E_NET;
}

/* Bind the service threads' sockets, each at its endpoint (a PS with port
 * 0: a run of free ports, tried again from a new port 0 when one is in use;
 * ss_cluster_bind_run). Returns 0 or SS_E_NET with err. Main thread. */
static int s_bind_threads(ps_service_t *self, char *err, size_t len)
{
    void *socks[PS_THREADS_MAX];
    char *bound[PS_THREADS_MAX];
    char what[64];
    ss_assert(self->n_threads <= PS_THREADS_MAX);
    for (int i = 0; i < self->n_threads; i++) {
        socks[i] = self->threads[i].sock;
        bound[i] = self->threads[i].bound;
    }
    int rc = ss_cluster_bind_run(self->cluster, socks, self->n_threads, 0, bound,
                                 sizeof self->threads[0].bound, err, len);
    if (rc)
        return rc;
    snprintf(what, sizeof what, "%s PS %u", ps_role_name(self->role), self->shard);
    ss_auth_warn_plain_bind(ss_cluster_bind_endpoint(self->cluster), self->curve.on, what);
    return 0;
}

/* CURVE keys or the job token, and the ZAP handler that checks them (bound
 * before any ROUTER is: a PLAIN server without one would admit anyone). */
static int s_secure(ps_service_t *self, char *err, size_t len)
{
    const struct ss_security_cfg *sec = &self->cfg->security;
    int rc = ss_curve_load(&self->curve, sec, SS_CURVE_SERVER, err, len);
    if (rc == 0)
        rc = ss_admin_token_read(sec->admin_token_file, self->admin_token, err, len);
    if (rc || !ss_curve_secured(&self->curve))
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
    return s_bind_threads(self, err, len);
}

ps_service_t *ps_service_new(const struct ps_service_conf *conf, char *err, size_t len)
{
    const struct ss_cfg *cfg = conf->cfg;
    const struct ss_cluster_id *me = ss_cluster_me(conf->cluster);
    ss_assert(me && (me->role == SS_CLUSTER_EMBEDDING || me->role == SS_CLUSTER_SYNC));
    ps_service_t *self = ss_calloc(1, sizeof *self);
    self->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);  /* -1: threads poll with a timeout */
    if (self->wake_fd < 0)
        SS_LOG(SS_LOG_WARN, "no eventfd (%s): idle service threads wake every %d ms",
               strerror(errno), PS_SLEEP_MAX_MS);
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
        if (self->wake_fd >= 0)
            close(self->wake_fd);
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
    ps_svc_wake_all(self);
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
    /* not while a RESTORE swaps the shard in (or a checkpoint copies it): a
     * row a tick deleted in a stripe already swapped would be missing from
     * the row count the swap sets at its end; the next try catches up (the
     * clock moves by the seconds since the last tick) */
    int rc = pthread_mutex_trylock(&self->ckpt_lock);
    if (rc == EBUSY)
        return;
    ss_assert(rc == 0);
    *next_ms = now + 1000;
    size_t expired = ps_embed_tick(self->embed, (uint32_t)((now - self->start_ms) / 1000));
    ss_assert(pthread_mutex_unlock(&self->ckpt_lock) == 0);
    if (expired)
        SS_LOG(SS_LOG_DEBUG, "%zu rows expired (tables.ttl_s)", expired);
}

/* How long service thread 0 may sleep in its poll: until its next timer
 * (the shard's clock tick, the recovery checkpoint), PS_SLEEP_MAX_MS at
 * most. A request, a connection event, a SHUTDOWN taken by another service
 * thread (wake_fd) or a signal wakes it sooner (it is the only thread of the
 * PS that takes SIGTERM and SIGINT: ps_main.c). An idle PS so wakes about
 * once a second, however many service threads it has (threads 1.. not at
 * all): on a job with many PS processes their idle wake-ups add up
 * (docs/scaling.md). */
static long s_sleep_ms(const ps_service_t *self, uint64_t next_tick_ms)
{
    uint64_t now = ss_now_ms();
    uint64_t due = now + PS_SLEEP_MAX_MS;
    if (self->embed && next_tick_ms < due)
        due = next_tick_ms;
    if (self->next_ckpt_ms && self->next_ckpt_ms < due)
        due = self->next_ckpt_ms;
    return due > now ? (long)(due - now) : 0;
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

    struct s_waiter w;
    if (s_waiter_init(&w, &self->threads[0]) != 0) {
        SS_LOG(SS_LOG_ERROR, "no ZMQ_FD: %s", zmq_strerror(zmq_errno()));
        return SS_E_NET;
    }
    if (s_start_threads(self) != 0) {
        s_join_threads(self);
        return SS_E_NOMEM;
    }
    s_bound_text(self, bound, sizeof bound);
    ss_log_thread("svc-0");
    SS_LOG_ALWAYS(SS_LOG_INFO, "ready: %s shard %u on %s, bound at %s, pid %d)",
                  ps_role_name(self->role), self->shard, self->endpoint, bound, (int)getpid());
    while (!*stop && !s_stopping(self)) {
        if (s_serve_round(self, &self->threads[0], &w, s_sleep_ms(self, next_tick_ms)) != 0) {
            SS_LOG(SS_LOG_ERROR, "poll failed: %s", strerror(errno));
            rc = SS_E_NET;
            break;
        }
        if (!*stop && !s_stopping(self))
            ps_svc_recovery_ckpt(self);
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
    if (self->wake_fd >= 0)
        close(self->wake_fd);
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
    s_wake_clear(self);
    self->start_ms = ss_now_ms();
    self->next_ckpt_ms = 0;
    if (cfg->ckpt_interval_s > 0 && !self->noop)
        self->next_ckpt_ms = self->start_ms + (uint64_t)(cfg->ckpt_interval_s * 1000.0);
    return 0;
}

void ps_service_serve_one(ps_service_t *self, void *sock)
{
    ss_assert(self && sock && self->n_threads >= 1);
    ps_svc_serve_one(self, &self->threads[0], sock);
}
