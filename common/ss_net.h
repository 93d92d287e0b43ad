/* ss_net.h - client connections: one DEALER socket to one server endpoint.
 *
 * Many requests may be in flight on one connection; each carries a request
 * id and replies are matched by it (replies to requests the caller gave up
 * on are dropped). A connection belongs to the thread that created it for
 * its whole life (ZeroMQ sockets are not thread-safe).
 *
 * A PS serves nothing before HELLO. A connection that said HELLO remembers
 * it: when a reply says SS_E_NOHELLO (the PS restarted, or forgot this
 * connection), it says HELLO again before it hands that reply back, so the
 * caller may simply resend; ss_conn_call() resends once by itself.
 *
 * Queues: replies waiting to be read are capped at opts.max_in_flight
 * messages (ZMQ_RCVHWM; the PS holds the rest), requests waiting to leave
 * at SS_CONN_SNDHWM (a send that finds it full fails after timeout_ms
 * instead of blocking for good). */
#ifndef SS_NET_H
#define SS_NET_H

#include <stddef.h>
#include <stdint.h>

#include "ss_msg.h"

typedef struct ss_conn ss_conn_t;

#define SS_CONN_SNDHWM 1024        /* requests queued to leave, e.g. while a PS restarts */
#define SS_CONN_IN_FLIGHT 8        /* replies queued when max_in_flight is 0 */

struct ss_curve;

/* Connection options taken from the job config. */
struct ss_conn_opts {
    int64_t max_message_bytes;      /* ZMQ_MAXMSGSIZE for replies */
    int64_t timeout_ms;             /* default wait for a reply, and for a full send queue */
    const struct ss_curve *curve;   /* CURVE client keys (ss_auth.h); NULL or off: plain.
                                     * Borrowed for ss_conn_new() only */
    int64_t max_in_flight;          /* replies queued unread (security.max_in_flight);
                                     * 0: SS_CONN_IN_FLIGHT */
};

/* Connect a DEALER to endpoint using zctx (shared, thread-safe). Returns
 * NULL (and logs why) on failure. Caller owns; ss_conn_destroy(). */
ss_conn_t *ss_conn_new(void *zctx, const char *endpoint, const struct ss_conn_opts *opts);
void ss_conn_destroy(ss_conn_t **self_p);

/* The endpoint string, for messages. */
const char *ss_conn_endpoint(const ss_conn_t *self);

/* Raw socket, for zmq_poll over several connections. */
void *ss_conn_socket(ss_conn_t *self);

/* Send a request: stamps version and a fresh req_id into *hdr, returns the
 * id in *req_id. Returns 0 or SS_E_NET. Frames are borrowed for the call. */
int ss_conn_send(ss_conn_t *self, Header *hdr, const struct ss_frame *frames, size_t n_frames,
                 uint64_t *req_id);

/* The same with frames as ZeroMQ messages (ss_msg_send_zmsgs), which the
 * call takes over (closes) whatever it returns: a frame made with
 * zmq_msg_init_data goes out without a copy. */
int ss_conn_send_zmsgs(ss_conn_t *self, Header *hdr, zmq_msg_t *frames, size_t n_frames,
                       uint64_t *req_id);

/* Wait up to timeout_ms from now for the reply to req_id, or (timeout_ms <
 * 0) until the connection's default timeout has passed since the request was
 * sent: requests sent together and waited for one after another all give up
 * at about the same time (the last 64 requests' send times are kept; an
 * older one counts from now). Stale replies are dropped. On 0, *reply is filled and checked
 * (sizes match the header); the caller closes it with ss_msg_close(). A
 * reply with a nonzero status returns SS_E_PEER with reply filled and its
 * error text in err. SS_E_TIMEOUT names nothing: the caller knows the peer
 * (ss_conn_endpoint). SS_E_PROTO for a malformed reply. */
int ss_conn_wait(ss_conn_t *self, uint64_t req_id, int64_t timeout_ms, struct ss_msg *reply,
                 char *err, size_t err_len);
/* A request that asked for "still working" replies (Header progress_ms: a
 * CHECKPOINT or RESTORE) gets them while the server works; each is logged
 * (its text) and starts the wait's timeout again, so that a server that
 * keeps answering is waited for however long the work takes, and one that
 * stops is given up timeout_ms after its last word. ss_conn_progress():
 * how many the last ss_conn_wait() took. */
uint64_t ss_conn_progress(const ss_conn_t *self);

/* Send then wait: one round trip. A request answered SS_E_NOHELLO after
 * HELLO was said is sent once more (after HELLO again). Same returns as
 * ss_conn_wait(). */
int ss_conn_call(ss_conn_t *self, Header *hdr, const struct ss_frame *frames, size_t n_frames,
                 int64_t timeout_ms, struct ss_msg *reply, char *err, size_t err_len);

/* HELLO: check the protocol version and config hash with the server, and
 * remember to say it again when the server forgot us (see top).
 * Returns 0, SS_E_TIMEOUT, or SS_E_PEER with the server's text in err. */
int ss_conn_hello(ss_conn_t *self, uint64_t config_hash, char *err, size_t err_len);

/* ss_conn_hello() in two halves, for a caller that sends on several
 * connections before waiting on any: send the HELLO (a request sent after
 * it on this connection is read after it), then wait for its answer. Same
 * returns: the send's SS_E_NET (with err) or ss_conn_hello()'s. */
int ss_conn_hello_send(ss_conn_t *self, uint64_t config_hash, char *err, size_t err_len);
int ss_conn_hello_finish(ss_conn_t *self, char *err, size_t err_len);

#endif
