/* tr_admin.c - the admin thread of a trainer: HELLO, PING, STATS, CONFIG.
 *
 * DESIGN: the thread creates, binds, serves and closes its ROUTER itself (a
 * socket never changes threads); tr_admin_new() waits until the bind has
 * succeeded or failed, so a taken port stops the trainer at start with the
 * reason. Requests are tiny and rare (an operator's tool): one thread, one
 * request at a time, a 100 ms poll to notice the stop flag. */
#include "tr_admin.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_msg.h"
#include "ss_msg_types.h"
#include "ss_peers.h"

#define TR_ADMIN_PEERS 1024            /* connections remembered as having said HELLO */
#define TR_ADMIN_STATS_MAX (64u << 10) /* most bytes of a STATS reply */

struct tr_admin {
    struct tr_admin_conf conf;     /* borrowed pointers */
    uint32_t rank;                 /* this trainer */
    uint64_t hello_hash;           /* what HELLO must carry */
    ss_peers_t *peers;             /* connections that said HELLO (admin thread) */
    pthread_t tid;                 /* the thread */
    int started;                   /* tid is running */
    atomic_int stop;               /* tells the thread to exit */
    atomic_ullong requests;        /* requests answered */
    pthread_mutex_t lock;          /* guards ready, rc, err (start-up only) */
    pthread_cond_t cond;           /* signalled when ready */
    int ready;                     /* the thread bound (or failed to) */
    int rc;                        /* 0 or why the bind failed */
    char err[512];                 /* what went wrong */
};

/* A reply with text to request h from id. */
static int s_reply(void *sock, const uint8_t *id, size_t id_len, const Header *req,
                   const char *text)
{
    Header h = HEADER__INIT;
    h.version = SS_PROTO_VERSION;
    h.type = req->type;
    h.req_id = req->req_id;
    h.has_status = 1;
    h.status = 0;
    h.text = (char *)text;
    return ss_msg_send(sock, id, id_len, &h, NULL, 0);
}

/* One request being answered: where it came from and what it asks. */
struct tr_admin_req {
    void *sock;              /* the admin ROUTER */
    const uint8_t *id;       /* the client's routing id */
    size_t id_len;           /* bytes of id */
    const Header *h;         /* the checked request */
};

static int s_on_hello(tr_admin_t *self, const struct tr_admin_req *r, char *err, size_t len)
{
    const Header *h = r->h;
    if (!h->has_config_hash || h->config_hash != self->hello_hash) {
        snprintf(err, len, "cluster config hash mismatch: trainer %u has another cluster "
                 "configuration than the client; use the job file and --set options the "
                 "job was started with (shadow-ctl --run RUN_DIR)", self->rank);
        return SS_E_HASH;
    }
    if (ss_peers_add(self->peers, r->id, r->id_len) < 0) {
        snprintf(err, len, "routing id of %zu bytes: at most %d", r->id_len, SS_PEER_ID_MAX);
        return SS_E_INVAL;
    }
    return s_reply(r->sock, r->id, r->id_len, h, "hello");
}

static int s_on_ping(tr_admin_t *self, const struct tr_admin_req *r, char *err, size_t len)
{
    return s_reply(r->sock, r->id, r->id_len, r->h, "pong");
}

static int s_on_stats(tr_admin_t *self, const struct tr_admin_req *r, char *err, size_t len)
{
    char *text = self->conf.stats(self->conf.stats_arg, TR_ADMIN_STATS_MAX);
    int rc = s_reply(r->sock, r->id, r->id_len, r->h, text);
    ss_free(text);
    return rc;
}

static int s_on_config(tr_admin_t *self, const struct tr_admin_req *r, char *err, size_t len)
{
    char value[SS_CFG_MAX_LIST * SS_CFG_MAX_STR];
    const char *key = r->h->text;
    if (!key || ss_cfg_get(self->conf.cfg, key, value, sizeof value) != 0) {
        snprintf(err, len, "no config key '%.100s' (see conf/local.yaml)", key ? key : "");
        return SS_E_NOTFOUND;
    }
    return s_reply(r->sock, r->id, r->id_len, r->h, value);
}

typedef int (*tr_admin_fn)(tr_admin_t *self, const struct tr_admin_req *r, char *err,
                           size_t len);

/* The handler of each row of ss_msg_types.h (its tr_fn column), NULL for a
 * type a trainer does not serve. */
#define s_on_none NULL
static const tr_admin_fn s_handlers[SS_MSG_N_TYPES] = {SS_MSG_TYPES(SS_MSG_TR_HANDLER)};
#undef s_on_none

int tr_admin_serves(int type)
{
    const struct ss_msg_type *t = ss_msg_type_find(type);
    return t && s_handlers[t->row] != NULL;
}

/* "HELLO, PING, STATS, CONFIG": the types a trainer serves, for a refusal. */
static void s_served_names(char *out, size_t len)
{
    out[0] = '\0';
    for (size_t i = 0; i < SS_MSG_N_TYPES; i++)
        if (s_handlers[i])
            snprintf(out + strlen(out), len - strlen(out), "%s%s", out[0] ? ", " : "",
                     ss_msg_type_at(i)->name);
}

/* Answer one checked request through its row of ss_msg_types.h: HELLO
 * first on a connection. Returns 0 (replied) or an SS_E_* with err. */
static int s_answer(tr_admin_t *self, void *sock, const uint8_t *id, size_t id_len,
                    const Header *h, char *err, size_t len)
{
    const struct tr_admin_req r = {sock, id, id_len, h};
    const struct ss_msg_type *t = ss_msg_type_find(h->type);
    if (h->type != MSG_TYPE__MSG_HELLO && !ss_peers_has(self->peers, id, id_len)) {
        snprintf(err, len, "%s refused: say HELLO first (protocol version and config hash); "
                 "this trainer serves nothing before", ss_msg_type_name(h->type));
        return SS_E_NOHELLO;
    }
    if (!t || !s_handlers[t->row]) {
        char names[128];
        s_served_names(names, sizeof names);
        snprintf(err, len, "%s is not served by a trainer (only %s)", ss_msg_type_name(h->type),
                 names);
        return SS_E_PROTO;
    }
    return s_handlers[t->row](self, &r, err, len);
}

/* Read and answer one request waiting on sock. */
static void s_serve_one(tr_admin_t *self, void *sock)
{
    uint8_t id[SS_MSG_MAX_ID];
    size_t id_len = 0;
    struct ss_msg msg = {0};
    char err[512] = "";
    int rc = ss_msg_recv(sock, ZMQ_DONTWAIT, id, &id_len, &msg, err, sizeof err);
    if (rc == SS_E_TIMEOUT || rc == SS_E_STOPPED || rc == SS_E_NET)
        return;
    atomic_fetch_add(&self->requests, 1);  /* before the reply: a client may ask at once */
    int type = rc == 0 ? (int)msg.hdr->type : 0;
    uint64_t req_id = rc == 0 ? msg.hdr->req_id : 0;
    if (rc == 0)
        rc = ss_msg_check(&msg, 0, err, sizeof err);
    if (rc == 0)
        rc = s_answer(self, sock, id, id_len, msg.hdr, err, sizeof err);
    if (rc && rc != SS_E_NET && rc != SS_E_TIMEOUT && id_len)
        ss_msg_send_error(sock, id, id_len, type, req_id, rc, err);
    ss_msg_close(&msg);
}

/* Create and bind the ROUTER. Returns it, or NULL with err. */
static void *s_open(tr_admin_t *self, char *err, size_t len)
{
    int linger = 0, zero = 0, one = 1, hwm = 64;
    int64_t maxmsg = self->conf.cfg->max_message_bytes;
    void *sock = zmq_socket(self->conf.zctx, ZMQ_ROUTER);
    if (!sock || zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger) ||
        zmq_setsockopt(sock, ZMQ_SNDTIMEO, &zero, sizeof zero) ||
        zmq_setsockopt(sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one) ||
        zmq_setsockopt(sock, ZMQ_RCVHWM, &hwm, sizeof hwm) ||
        zmq_setsockopt(sock, ZMQ_SNDHWM, &hwm, sizeof hwm) ||
        zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) ||
        ss_curve_server(sock, self->conf.curve)) {
        snprintf(err, len, "admin endpoint: cannot set up the socket: %s",
                 zmq_strerror(zmq_errno()));
        if (sock)
            zmq_close(sock);
        return NULL;
    }
    if (ss_cluster_admin_bind(self->conf.cluster, sock, err, len) != 0) {
        zmq_close(sock);
        return NULL;
    }
    return sock;
}

static void s_set_ready(tr_admin_t *self, int rc, const char *err)
{
    ss_assert(pthread_mutex_lock(&self->lock) == 0);
    self->ready = 1;
    self->rc = rc;
    snprintf(self->err, sizeof self->err, "%s", err);
    ss_assert(pthread_cond_signal(&self->cond) == 0);
    ss_assert(pthread_mutex_unlock(&self->lock) == 0);
}

static void *s_main(void *arg)
{
    tr_admin_t *self = arg;
    char err[512] = "";
    ss_log_thread("admin");
    void *sock = s_open(self, err, sizeof err);
    s_set_ready(self, sock ? 0 : SS_E_NET, err);
    if (!sock)
        return NULL;
    while (!atomic_load(&self->stop)) {
        zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 100) > 0)
            s_serve_one(self, sock);
    }
    zmq_close(sock);
    return NULL;
}

tr_admin_t *tr_admin_new(const struct tr_admin_conf *conf, char *err, size_t err_len)
{
    const struct ss_cluster_id *me = ss_cluster_me(conf->cluster);
    ss_assert(conf->zctx && conf->cfg && conf->stats && me && me->role == SS_CLUSTER_TRAINER);
    tr_admin_t *self = ss_calloc(1, sizeof *self);
    self->conf = *conf;
    self->rank = me->index;
    self->hello_hash = ss_cluster_hello_hash(conf->cluster, SS_CLUSTER_TRAINER, me->index);
    self->peers = ss_peers_new(TR_ADMIN_PEERS);
    atomic_init(&self->stop, 0);
    atomic_init(&self->requests, 0);
    ss_assert(pthread_mutex_init(&self->lock, NULL) == 0);
    ss_assert(pthread_cond_init(&self->cond, NULL) == 0);
    if (pthread_create(&self->tid, NULL, s_main, self) != 0) {
        snprintf(err, err_len, "cannot start the admin thread");
        tr_admin_destroy(&self);
        return NULL;
    }
    self->started = 1;
    ss_assert(pthread_mutex_lock(&self->lock) == 0);
    while (!self->ready)
        ss_assert(pthread_cond_wait(&self->cond, &self->lock) == 0);
    int rc = self->rc;
    snprintf(err, err_len, "%s", self->err);
    ss_assert(pthread_mutex_unlock(&self->lock) == 0);
    if (rc) {
        tr_admin_destroy(&self);
        return NULL;
    }
    return self;
}

void tr_admin_destroy(tr_admin_t **self_p)
{
    tr_admin_t *self = *self_p;
    if (!self)
        return;
    atomic_store(&self->stop, 1);
    if (self->started)
        ss_assert(pthread_join(self->tid, NULL) == 0);
    ss_peers_destroy(&self->peers);
    pthread_cond_destroy(&self->cond);
    pthread_mutex_destroy(&self->lock);
    ss_free(self);
    *self_p = NULL;
}

unsigned long long tr_admin_requests(const tr_admin_t *self)
{
    return atomic_load(&((tr_admin_t *)self)->requests);
}
