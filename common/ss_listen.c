/* ss_listen.c - socket monitor of a server socket: connection counts, the
 * open-file limit, refused connections. */
#include "ss_listen.h"

#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <zmq.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_time.h"

#define S_EVENTS                                                                       \
    (ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_ACCEPT_FAILED | ZMQ_EVENT_DISCONNECTED |           \
     ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |      \
     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
#define S_FD_RESERVE 64         /* descriptors the raised limit keeps for files, logs */
#define S_FD_SPARE 16           /* descriptors left out of the room for connections */
#define S_DRAIN_MAX 256         /* events read per ss_listen_drain() */
#define S_LOG_EVERY_MS 10000    /* least time between two refusal log lines */
#define S_ADMIT_WAIT_MS 200     /* longest wait of ss_listen_admit() for a connection's ACCEPTED */

/* What the events read so far say of a descriptor (ss_listen_admit). */
enum { S_FD_UNSEEN, S_FD_OPEN, S_FD_SHUT };

struct ss_listen {
    void *sock;                      /* watched socket, borrowed */
    void *pair;                      /* monitor events arrive here; owned */
    char what[64];                   /* for log lines */
    int64_t fd_limit;                /* soft RLIMIT_NOFILE in force */
    int64_t max_connections;         /* security.max_connections: more are shut at once */
    _Atomic int64_t capacity;        /* connections the limit leaves room for */
    _Atomic int64_t open;            /* accepted minus disconnected */
    _Atomic uint64_t accepted;       /* ZMQ_EVENT_ACCEPTED */
    _Atomic uint64_t accept_failed;  /* ZMQ_EVENT_ACCEPT_FAILED */
    _Atomic uint64_t handshake_failed; /* ZMQ_EVENT_HANDSHAKE_FAILED_* */
    int near_warned;                 /* the 90% warning is out (re-armed below 80%) */
    uint64_t refused_logged_ms;      /* when a refusal was last logged */
    uint64_t refused_unlogged;       /* refusals since then */
    uint64_t handshake_logged;       /* handshake failures logged so far */
    uint8_t *fd_state;               /* S_FD_* by descriptor; owned */
    size_t fd_state_len;             /* entries of fd_state */
};

int64_t ss_fd_limit_raise(int64_t want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return -1;
    if (want > 0 && rl.rlim_cur != RLIM_INFINITY && (int64_t)rl.rlim_cur < want) {
        rlim_t to = (rl.rlim_max == RLIM_INFINITY || (int64_t)rl.rlim_max > want)
                        ? (rlim_t)want : rl.rlim_max;
        struct rlimit nl = {to, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &nl) == 0)
            rl.rlim_cur = to;
    }
    return rl.rlim_cur == RLIM_INFINITY ? INT64_MAX : (int64_t)rl.rlim_cur;
}

int64_t ss_fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    int64_t n = 0;
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n - 3;  /* ".", ".." and the directory's own descriptor */
}

/* Raise the fd limit for max_connections and say what it allows. */
static void s_set_capacity(ss_listen_t *self, int64_t max_connections)
{
    int64_t in_use = ss_fd_count();
    self->fd_limit = ss_fd_limit_raise(max_connections + S_FD_RESERVE + (in_use > 0 ? in_use : 0));
    int64_t room = self->fd_limit - S_FD_SPARE - (in_use > 0 ? in_use : 0);
    if (room < 1)
        room = 1;
    atomic_store(&self->capacity, room < max_connections ? room : max_connections);
    if (room < max_connections)
        SS_LOG(SS_LOG_WARN, "%s: the open-file limit (%lld, hard limit included) leaves room for "
               "about %lld client connections, fewer than security.max_connections (%lld): "
               "raise it ('ulimit -n') or more clients are refused", self->what,
               (long long)self->fd_limit, (long long)room, (long long)max_connections);
    else
        SS_LOG(SS_LOG_INFO, "%s: up to %lld client connections (security.max_connections; "
               "open-file limit %lld)", self->what, (long long)max_connections,
               (long long)self->fd_limit);
}

ss_listen_t *ss_listen_new(void *zctx, void *sock, const char *what, int64_t max_connections,
                           char *err, size_t err_len)
{
    char ep[64];
    ss_assert(zctx && sock && what && max_connections > 0);
    ss_listen_t *self = ss_calloc(1, sizeof *self);
    self->sock = sock;
    snprintf(self->what, sizeof self->what, "%s", what);
    snprintf(ep, sizeof ep, "inproc://ss-listen-%p", (void *)self);
    if (zmq_socket_monitor(sock, ep, S_EVENTS) != 0 ||
        !(self->pair = zmq_socket(zctx, ZMQ_PAIR)) || zmq_connect(self->pair, ep) != 0) {
        snprintf(err, err_len, "%s: cannot monitor its connections: %s", what,
                 zmq_strerror(zmq_errno()));
        ss_listen_destroy(&self);
        return NULL;
    }
    s_set_capacity(self, max_connections);
    self->max_connections = max_connections;
    return self;
}

void ss_listen_destroy(ss_listen_t **self_p)
{
    ss_listen_t *self = *self_p;
    if (!self)
        return;
    zmq_socket_monitor(self->sock, NULL, 0);
    if (self->pair)
        zmq_close(self->pair);
    ss_free(self->fd_state);
    ss_free(self);
    *self_p = NULL;
}

void *ss_listen_socket(ss_listen_t *self)
{
    return self->pair;
}

/* Record what the events say of descriptor fd (a connection's, from the
 * kernel: below the open-file limit). */
static void s_fd_set(ss_listen_t *self, uint32_t fd, uint8_t state)
{
    if (fd >= self->fd_state_len) {
        size_t len = self->fd_state_len ? self->fd_state_len : 64;
        while (len <= fd)
            len *= 2;
        self->fd_state = ss_realloc(self->fd_state, len);
        memset(self->fd_state + self->fd_state_len, S_FD_UNSEEN, len - self->fd_state_len);
        self->fd_state_len = len;
    }
    self->fd_state[fd] = state;
}

static uint8_t s_fd_get(const ss_listen_t *self, int fd)
{
    return (size_t)fd < self->fd_state_len ? self->fd_state[fd] : S_FD_UNSEEN;
}

/* A connection beyond security.max_connections was shut: counted with the
 * refused ones, logged at most every S_LOG_EVERY_MS. */
static void s_on_over_max(ss_listen_t *self, int64_t open)
{
    uint64_t now = ss_now_ms();
    atomic_fetch_add_explicit(&self->accept_failed, 1, memory_order_relaxed);
    self->refused_unlogged++;
    if (self->refused_logged_ms && now - self->refused_logged_ms < S_LOG_EVERY_MS)
        return;
    SS_LOG(SS_LOG_WARN, "%s: shut %llu connection%s beyond security.max_connections (%lld; "
           "%lld open with it): raise it to take more clients", self->what,
           (unsigned long long)self->refused_unlogged, self->refused_unlogged == 1 ? "" : "s",
           (long long)self->max_connections, (long long)open);
    self->refused_logged_ms = now;
    self->refused_unlogged = 0;
}

/* A connection came in (fd: its socket): warn once when the open ones reach
 * 90% of the room; one beyond security.max_connections is shut down at once
 * (ZeroMQ has no such bound, and the open-file limit keeps a reserve above
 * it: 4,500 were accepted at 4,096). shutdown(), not close(): ZeroMQ owns
 * the descriptor, sees the end of the stream and closes the connection
 * itself, and its DISCONNECTED event counts it out again. Counted and
 * logged as a refused connection. */
static void s_on_accepted(ss_listen_t *self, uint32_t fd, int gone)
{
    int64_t open = atomic_fetch_add(&self->open, 1) + 1, cap = atomic_load(&self->capacity);
    atomic_fetch_add_explicit(&self->accepted, 1, memory_order_relaxed);
    if (open > self->max_connections && !gone && shutdown((int)fd, SHUT_RDWR) == 0) {
        s_fd_set(self, fd, S_FD_SHUT);
        s_on_over_max(self, open);
        return;
    }
    s_fd_set(self, fd, S_FD_OPEN);
    if (!self->near_warned && open * 10 >= cap * 9) {
        self->near_warned = 1;
        SS_LOG(SS_LOG_WARN, "%s: %lld client connections open, 90%% of the %lld the open-file "
               "limit leaves room for: more will be refused (raise 'ulimit -n' and "
               "security.max_connections)", self->what, (long long)open, (long long)cap);
    }
}

static void s_on_disconnected(ss_listen_t *self, uint32_t fd)
{
    s_fd_set(self, fd, S_FD_UNSEEN);
    int64_t open = atomic_fetch_sub(&self->open, 1) - 1;
    if (self->near_warned && open * 10 < atomic_load(&self->capacity) * 8)
        self->near_warned = 0;
}

/* accept() failed (value: errno): new clients are locked out. Logged at once,
 * then at most every S_LOG_EVERY_MS with the count (ZeroMQ retries the
 * accept as fast as it can, so these come in floods). */
static void s_on_accept_failed(ss_listen_t *self, uint32_t value)
{
    uint64_t now = ss_now_ms();
    char fds[64] = "";
    atomic_fetch_add_explicit(&self->accept_failed, 1, memory_order_relaxed);
    self->refused_unlogged++;
    if (self->refused_logged_ms && now - self->refused_logged_ms < S_LOG_EVERY_MS)
        return;
    int64_t in_use = ss_fd_count();  /* -1 when even /proc cannot be opened */
    if (in_use >= 0)
        snprintf(fds, sizeof fds, ", %lld descriptors in use", (long long)in_use);
    SS_LOG(SS_LOG_WARN, "%s: refused %llu connection attempt%s: accept failed: %s (%lld "
           "connections open, open-file limit %lld%s): new clients are locked out until some "
           "disconnect; raise 'ulimit -n' (security.max_connections)",
           self->what, (unsigned long long)self->refused_unlogged,
           self->refused_unlogged == 1 ? "" : "s", strerror((int)value),
           (long long)atomic_load(&self->open), (long long)self->fd_limit, fds);
    self->refused_logged_ms = now;
    self->refused_unlogged = 0;
}

static const char *s_handshake_why(uint16_t event, uint32_t value)
{
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        return "its key was refused (see the ZAP handler's line)";
    if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
        return "security mechanism mismatch: one side has security.curve on or a job token "
               "(security.token_file), the other not (a client without the job's secret?)";
    if (value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
        return "CURVE failed: the client uses another security.server_public";
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        return "the client left (or stalled) before the handshake was done";
    return "malformed handshake (not a ShadowSync client?)";
}

/* A handshake failed: logged the first ten times, then every 1000th. */
static void s_on_handshake_failed(ss_listen_t *self, uint16_t event, uint32_t value)
{
    uint64_t n = atomic_fetch_add_explicit(&self->handshake_failed, 1, memory_order_relaxed) + 1;
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        return;  /* the ZAP handler logs these with the key */
    if (++self->handshake_logged <= 10 || self->handshake_logged % 1000 == 0)
        SS_LOG(SS_LOG_WARN, "%s: a connection failed its handshake: %s [%llu failed so far]",
               self->what, s_handshake_why(event, value), (unsigned long long)n);
}

/* Read one event (2 frames: event+value, endpoint). Returns 0 or -1. */
static int s_read_event(ss_listen_t *self, uint16_t *event, uint32_t *value)
{
    zmq_msg_t head, addr;
    zmq_msg_init(&head);
    if (zmq_msg_recv(&head, self->pair, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&head);
        return -1;
    }
    int ok = zmq_msg_size(&head) >= 6 && zmq_msg_more(&head);
    if (ok) {
        memcpy(event, zmq_msg_data(&head), 2);
        memcpy(value, (const char *)zmq_msg_data(&head) + 2, 4);
    }
    int more = zmq_msg_more(&head);
    zmq_msg_close(&head);
    while (more) {
        zmq_msg_init(&addr);
        if (zmq_msg_recv(&addr, self->pair, 0) < 0)
            more = 0;
        else
            more = zmq_msg_more(&addr);
        zmq_msg_close(&addr);
    }
    return ok ? 0 : -1;
}

/* Whether a DISCONNECTED event of descriptor fd is among events [from, n). */
static int s_gone_later(const uint16_t *event, const uint32_t *value, int from, int n, uint32_t fd)
{
    for (int j = from; j < n; j++)
        if (event[j] == ZMQ_EVENT_DISCONNECTED && value[j] == fd)
            return 1;
    return 0;
}

/* The events waiting are read first, then handled: an ACCEPTED connection
 * whose DISCONNECTED is already among them is not shut, because ZeroMQ may
 * have given its descriptor to a newer connection since (shutting that one
 * instead loses its first request: test_ps_limits' client after the flood).
 * A descriptor reused between this read and the shutdown() can still be
 * hit; that client's request times out and is sent again. */
static int s_drain(ss_listen_t *self)
{
    uint16_t event[S_DRAIN_MAX];
    uint32_t value[S_DRAIN_MAX];
    int n = 0;
    while (n < S_DRAIN_MAX && s_read_event(self, &event[n], &value[n]) == 0)
        n++;
    for (int i = 0; i < n; i++) {
        if (event[i] == ZMQ_EVENT_ACCEPTED)
            s_on_accepted(self, value[i], s_gone_later(event, value, i + 1, n, value[i]));
        else if (event[i] == ZMQ_EVENT_DISCONNECTED)
            s_on_disconnected(self, value[i]);
        else if (event[i] == ZMQ_EVENT_ACCEPT_FAILED)
            s_on_accept_failed(self, value[i]);
        else
            s_on_handshake_failed(self, event[i], value[i]);
    }
    return n;
}

void ss_listen_drain(ss_listen_t *self)
{
    s_drain(self);
}

void ss_listen_catch_up(ss_listen_t *self)
{
    while (s_drain(self) == S_DRAIN_MAX)
        ;
}

int ss_listen_admit(ss_listen_t *self, int fd)
{
    ss_listen_catch_up(self);
    if (fd < 0)
        return 1;
    uint64_t t0 = ss_now_ms(), waited = 0;
    while (s_fd_get(self, fd) == S_FD_UNSEEN && waited < S_ADMIT_WAIT_MS) {
        zmq_pollitem_t it = {self->pair, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, (long)(S_ADMIT_WAIT_MS - waited)) < 0 && zmq_errno() != EINTR)
            break;
        ss_listen_catch_up(self);
        waited = ss_now_ms() - t0;
    }
    return s_fd_get(self, fd) != S_FD_SHUT;
}

void ss_listen_get_stats(const ss_listen_t *self, struct ss_listen_stats *st)
{
    st->open = atomic_load(&self->open);
    st->accepted = atomic_load_explicit(&self->accepted, memory_order_relaxed);
    st->accept_failed = atomic_load_explicit(&self->accept_failed, memory_order_relaxed);
    st->handshake_failed = atomic_load_explicit(&self->handshake_failed, memory_order_relaxed);
    st->capacity = atomic_load(&self->capacity);
}
