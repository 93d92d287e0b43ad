/* ss_net.c - DEALER client connections with request ids. */
#include "ss_net.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_auth.h"
#include "ss_cluster.h"
#include "ss_err.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_time.h"

#define SS_CONN_STASH 64         /* out-of-order replies kept for later waits */
#define SS_CONN_SENT 64          /* send times remembered, by request id modulo this */

struct ss_conn {
    void *sock;                  /* DEALER, owned */
    int fd;                      /* its ZMQ_FD (s_wait_readable) */
    struct ss_msg stash[SS_CONN_STASH]; /* replies that came before they were awaited */
    size_t n_stash;              /* used entries */
    char endpoint[256];          /* where it connects */
    struct ss_conn_opts opts;    /* copied options */
    uint64_t next_id;            /* next request id */
    uint64_t sent_id[SS_CONN_SENT]; /* request id whose send time is in sent_ms (id % SENT) */
    uint64_t sent_ms[SS_CONN_SENT]; /* ss_now_ms() when that request was sent */
    uint64_t hello_hash;         /* config hash of the last HELLO */
    uint64_t hello_id;           /* request id of the last HELLO sent */
    int said_hello;              /* HELLO succeeded once: say it again when forgotten */
    int in_hello;                /* a HELLO round trip is running (no nested one) */
    uint64_t n_progress;         /* "still working" replies taken by the last wait */
};

ss_conn_t *ss_conn_new(void *zctx, const char *endpoint, const struct ss_conn_opts *opts)
{
    ss_conn_t *self = ss_calloc(1, sizeof *self);
    int linger = 0, sndhwm = SS_CONN_SNDHWM, ipv6 = ss_endpoint_is_ipv6(endpoint);
    int rcvhwm = opts->max_in_flight > 0 ? (int)opts->max_in_flight : SS_CONN_IN_FLIGHT;
    int sndtimeo = opts->timeout_ms > 0 && opts->timeout_ms < INT32_MAX ? (int)opts->timeout_ms
                                                                        : -1;
    int64_t maxmsg = opts->max_message_bytes;

    ss_assert(zctx && endpoint && opts);
    self->opts = *opts;
    self->opts.curve = NULL;  /* borrowed for this call only */
    snprintf(self->endpoint, sizeof self->endpoint, "%s", endpoint);
    self->next_id = 1;
    self->sock = zmq_socket(zctx, ZMQ_DEALER);
    if (!self->sock)
        goto fail;
    if (zmq_setsockopt(self->sock, ZMQ_LINGER, &linger, sizeof linger) ||
        zmq_setsockopt(self->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) ||
        zmq_setsockopt(self->sock, ZMQ_SNDHWM, &sndhwm, sizeof sndhwm) ||
        zmq_setsockopt(self->sock, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm) ||
        zmq_setsockopt(self->sock, ZMQ_SNDTIMEO, &sndtimeo, sizeof sndtimeo) ||
        zmq_setsockopt(self->sock, ZMQ_IPV6, &ipv6, sizeof ipv6) ||
        ss_curve_client(self->sock, opts->curve) != 0 ||
        zmq_connect(self->sock, endpoint) != 0)
        goto fail;
    size_t fd_len = sizeof self->fd;
    if (zmq_getsockopt(self->sock, ZMQ_FD, &self->fd, &fd_len) != 0)
        goto fail;
    return self;
fail:
    SS_LOG(SS_LOG_ERROR, "cannot connect to %s: %s", endpoint, zmq_strerror(zmq_errno()));
    if (self->sock)
        zmq_close(self->sock);
    ss_free(self);
    return NULL;
}

void ss_conn_destroy(ss_conn_t **self_p)
{
    ss_conn_t *self = *self_p;
    if (!self)
        return;
    zmq_close(self->sock);
    for (size_t i = 0; i < self->n_stash; i++)
        ss_msg_close(&self->stash[i]);
    ss_free(self);
    *self_p = NULL;
}

const char *ss_conn_endpoint(const ss_conn_t *self)
{
    return self->endpoint;
}

void *ss_conn_socket(ss_conn_t *self)
{
    return self->sock;
}

/* Stamp hdr with the protocol version and the next request id (into
 * *req_id too), and note when that id was sent. */
static void s_stamp(ss_conn_t *self, Header *hdr, uint64_t *req_id)
{
    hdr->version = SS_PROTO_VERSION;
    hdr->req_id = self->next_id++;
    *req_id = hdr->req_id;
    self->sent_id[hdr->req_id % SS_CONN_SENT] = hdr->req_id;
    self->sent_ms[hdr->req_id % SS_CONN_SENT] = ss_now_ms();
}

int ss_conn_send(ss_conn_t *self, Header *hdr, const struct ss_frame *frames, size_t n_frames,
                 uint64_t *req_id)
{
    s_stamp(self, hdr, req_id);
    return ss_msg_send(self->sock, NULL, 0, hdr, frames, n_frames);
}

int ss_conn_send_zmsgs(ss_conn_t *self, Header *hdr, zmq_msg_t *frames, size_t n_frames,
                       uint64_t *req_id)
{
    s_stamp(self, hdr, req_id);
    return ss_msg_send_zmsgs(self->sock, NULL, 0, hdr, frames, n_frames);
}

/* When the wait for req_id gives up: timeout_ms from now, or (timeout_ms <
 * 0) the connection's timeout from when the request was sent, so that
 * waiting for several requests one after another costs the longest of
 * their timeouts, not their sum. A request too old to be remembered
 * counts from now. */
static uint64_t s_deadline(const ss_conn_t *self, uint64_t req_id, int64_t timeout_ms)
{
    uint64_t now = ss_now_ms();
    if (timeout_ms >= 0)
        return now + (uint64_t)timeout_ms;
    if (self->sent_id[req_id % SS_CONN_SENT] == req_id)
        return self->sent_ms[req_id % SS_CONN_SENT] + (uint64_t)self->opts.timeout_ms;
    return now + (uint64_t)self->opts.timeout_ms;
}

/* Keep a reply for a later wait; the oldest (lowest id) makes room. */
static void s_stash(ss_conn_t *self, struct ss_msg *reply)
{
    if (self->n_stash == SS_CONN_STASH) {
        size_t lo = 0;
        for (size_t i = 1; i < self->n_stash; i++)
            if (self->stash[i].hdr->req_id < self->stash[lo].hdr->req_id)
                lo = i;
        ss_msg_close(&self->stash[lo]);
        self->stash[lo] = self->stash[--self->n_stash];
    }
    self->stash[self->n_stash++] = *reply;
}

/* Move the stashed reply to req_id into reply; returns 1 when found. */
static int s_unstash(ss_conn_t *self, uint64_t req_id, struct ss_msg *reply)
{
    for (size_t i = 0; i < self->n_stash; i++)
        if (self->stash[i].hdr->req_id == req_id) {
            *reply = self->stash[i];
            self->stash[i] = self->stash[--self->n_stash];
            return 1;
        }
    return 0;
}

static int s_hello(ss_conn_t *self, char *err, size_t err_len);

/* The server answered a request sent after our last HELLO with "HELLO
 * required": it restarted or forgot this connection. Say HELLO again now,
 * so that the caller's resend comes after it. */
static void s_hello_again(ss_conn_t *self, const struct ss_msg *reply)
{
    char err[512] = "";
    if (!self->said_hello || self->in_hello || reply->hdr->req_id < self->hello_id)
        return;
    int rc = s_hello(self, err, sizeof err);
    if (rc == 0)
        SS_LOG(SS_LOG_INFO, "%s had forgotten this client (restarted?): said HELLO again",
               self->endpoint);
    else
        SS_LOG(SS_LOG_WARN, "%s asks for HELLO again, which failed: %s", self->endpoint,
               err[0] ? err : ss_strerror(rc));
}

/* Check a reply to our request: sizes, status. */
static int s_finish_reply(ss_conn_t *self, struct ss_msg *reply, char *err, size_t err_len)
{
    int rc = ss_msg_check(reply, 1, err, err_len);
    if (rc) {
        ss_msg_close(reply);
        return rc;
    }
    if (reply->hdr->has_status && reply->hdr->status == SS_E_NOHELLO)
        s_hello_again(self, reply);
    if (reply->hdr->has_status && reply->hdr->status != 0) {
        snprintf(err, err_len, "%s: %s", self->endpoint,
                 reply->hdr->error ? reply->hdr->error : ss_strerror(reply->hdr->status));
        return SS_E_PEER;
    }
    return 0;
}

/* Wait up to timeout_ms for a message on the socket: 1 when one waits, 0
 * when none came in time, -1 with errno. Like zmq_poll() on the one socket,
 * less its first pass (a poll() without waiting before it asks ZMQ_EVENTS):
 * ZMQ_EVENTS first, and only when nothing waits a poll() on ZMQ_FD, which
 * turns readable when commands reach the socket (edge-triggered: ZMQ_EVENTS
 * is asked again after each wake-up). */
static int s_wait_readable(ss_conn_t *self, int64_t timeout_ms)
{
    uint64_t until = ss_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        int events = 0;
        size_t sz = sizeof events;
        if (zmq_getsockopt(self->sock, ZMQ_EVENTS, &events, &sz) != 0)
            return -1;
        if (events & ZMQ_POLLIN)
            return 1;
        int64_t left = (int64_t)(until - ss_now_ms());
        if (left <= 0)
            return 0;
        struct pollfd p = {self->fd, POLLIN, 0};
        int n = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;
    }
}

int ss_conn_wait(ss_conn_t *self, uint64_t req_id, int64_t timeout_ms, struct ss_msg *reply,
                 char *err, size_t err_len)
{
    reply->hdr = NULL;  /* holds nothing unless a reply is returned */
    reply->n_frames = 0;
    reply->has_packed = 0;
    self->n_progress = 0;
    if (s_unstash(self, req_id, reply))
        return s_finish_reply(self, reply, err, err_len);
    uint64_t deadline = s_deadline(self, req_id, timeout_ms);
    int last_look = 0;
    for (;;) {
        int64_t left = (int64_t)(deadline - ss_now_ms());
        if (left < 0)
            left = 0;
        int n = s_wait_readable(self, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 && !last_look) {
            /* one last look: when this process was stopped (SIGSTOP) or
             * starved, the answer may be waiting in the kernel already */
            last_look = 1;
            deadline = ss_now_ms() + 300;
            continue;
        }
        if (n < 0)
            return SS_E_NET;
        if (n == 0) {
            snprintf(err, err_len, "no reply from %s within %lld ms", self->endpoint,
                     (long long)(timeout_ms < 0 ? self->opts.timeout_ms : timeout_ms));
            return SS_E_TIMEOUT;
        }
        int rc = ss_msg_recv(self->sock, ZMQ_DONTWAIT, NULL, NULL, reply, err, err_len);
        if (rc == SS_E_TIMEOUT)
            continue;
        if (rc)
            return rc;
        if (reply->hdr->has_progress_ms) {
            /* "still working" (a CHECKPOINT or RESTORE that asked for it):
             * the peer is alive and at it, so the wait starts again */
            if (reply->hdr->req_id == req_id) {
                self->n_progress++;
                SS_LOG_ALWAYS(SS_LOG_INFO, "%s: %s", self->endpoint,
                              reply->hdr->text ? reply->hdr->text : "working");
                deadline = ss_now_ms() +
                           (uint64_t)(timeout_ms < 0 ? self->opts.timeout_ms : timeout_ms);
                last_look = 0;
            }
            ss_msg_close(reply);
            continue;
        }
        if (reply->hdr->req_id != req_id) {
            /* an answer to another request in flight (or to one we gave up on) */
            if (reply->hdr->req_id < self->next_id) {
                s_stash(self, reply);
                reply->hdr = NULL;  /* the stash owns it now: *reply holds nothing */
                reply->n_frames = 0;
                reply->has_packed = 0;
            } else {
                ss_msg_close(reply);
            }
            continue;
        }
        return s_finish_reply(self, reply, err, err_len);
    }
}

uint64_t ss_conn_progress(const ss_conn_t *self)
{
    return self->n_progress;
}

/* One send and wait. */
static int s_call_once(ss_conn_t *self, Header *hdr, const struct ss_frame *frames,
                       size_t n_frames, int64_t timeout_ms, struct ss_msg *reply, char *err,
                       size_t err_len)
{
    uint64_t id;
    int rc = ss_conn_send(self, hdr, frames, n_frames, &id);
    if (rc) {
        snprintf(err, err_len, "cannot send to %s: %s", self->endpoint, ss_strerror(rc));
        reply->hdr = NULL;
        reply->n_frames = 0;
        return rc;
    }
    return ss_conn_wait(self, id, timeout_ms, reply, err, err_len);
}

int ss_conn_call(ss_conn_t *self, Header *hdr, const struct ss_frame *frames, size_t n_frames,
                 int64_t timeout_ms, struct ss_msg *reply, char *err, size_t err_len)
{
    int rc = s_call_once(self, hdr, frames, n_frames, timeout_ms, reply, err, err_len);
    if (rc == SS_E_PEER && reply->hdr->status == SS_E_NOHELLO && self->said_hello &&
        !self->in_hello) {
        ss_msg_close(reply);  /* HELLO was said again (s_hello_again): once more */
        rc = s_call_once(self, hdr, frames, n_frames, timeout_ms, reply, err, err_len);
    }
    return rc;
}

/* One HELLO round trip with the remembered hash. */
/* Send HELLO with self->hello_hash; its id in self->hello_id. */
static int s_hello_send(ss_conn_t *self, char *err, size_t err_len)
{
    Header h = HEADER__INIT;
    h.type = MSG_TYPE__MSG_HELLO;
    h.has_config_hash = 1;
    h.config_hash = self->hello_hash;
    int rc = ss_conn_send(self, &h, NULL, 0, &self->hello_id);
    if (rc)
        snprintf(err, err_len, "cannot send to %s: %s", self->endpoint, ss_strerror(rc));
    return rc;
}

/* Wait for the answer to the HELLO last sent. */
static int s_hello_wait(ss_conn_t *self, char *err, size_t err_len)
{
    struct ss_msg reply;
    self->in_hello = 1;
    int rc = ss_conn_wait(self, self->hello_id, -1, &reply, err, err_len);
    self->in_hello = 0;
    if (rc == 0 || rc == SS_E_PEER)
        ss_msg_close(&reply);
    return rc;
}

static int s_hello(ss_conn_t *self, char *err, size_t err_len)
{
    int rc = s_hello_send(self, err, err_len);
    return rc ? rc : s_hello_wait(self, err, err_len);
}

int ss_conn_hello(ss_conn_t *self, uint64_t config_hash, char *err, size_t err_len)
{
    int rc = ss_conn_hello_send(self, config_hash, err, err_len);
    return rc ? rc : ss_conn_hello_finish(self, err, err_len);
}

int ss_conn_hello_send(ss_conn_t *self, uint64_t config_hash, char *err, size_t err_len)
{
    self->hello_hash = config_hash;
    self->said_hello = 0;
    return s_hello_send(self, err, err_len);
}

int ss_conn_hello_finish(ss_conn_t *self, char *err, size_t err_len)
{
    int rc = s_hello_wait(self, err, err_len);
    self->said_hello = rc == 0;
    return rc;
}
