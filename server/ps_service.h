/* ps_service.h - the shadow-ps service: sockets, threads, request dispatch.
 *
 * Each of the ps.threads service threads owns a ROUTER bound where the
 * cluster says for that thread (ss_cluster_bind_run: the PS's endpoint,
 * port + t for thread t), and serves every request it reads on that thread:
 * decodes and checks it, calls the embedding or sync shard, and replies.
 * Thread 0 is the caller of ps_service_run(). A bad request gets an error
 * reply naming the problem and is counted.
 *
 * Security (security.*): nothing but HELLO is served on a connection before
 * its HELLO (SS_E_NOHELLO); with CURVE on, only listed keys connect (ZAP
 * handler, ss_auth.h) and SHUTDOWN, CHECKPOINT and INIT need an admin key
 * (SS_E_DENIED). Each connection has at most security.max_in_flight requests
 * and twice as many replies queued; replies beyond are dropped and counted. */
#ifndef PS_SERVICE_H
#define PS_SERVICE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ss_cfg.h"
#include "ss_cluster.h"

/* The two PS roles, as ss_cluster.h numbers them. */
enum ps_role { PS_ROLE_EMBEDDING = SS_CLUSTER_EMBEDDING, PS_ROLE_SYNC = SS_CLUSTER_SYNC };

typedef struct ps_service ps_service_t;

struct ps_service_conf {
    const struct ss_cfg *cfg;   /* borrowed for the service's life */
    const ss_cluster_t *cluster; /* borrowed for the service's life; its identity (an
                                 * embedding or sync PS) says which shard this is, its bind
                                 * endpoint where to listen */
    const char *restore_dir;    /* NULL or a directory holding ROLE-K.ckpt */
    int noop;                   /* benchmark mode: LOOKUP/PUSH skip the shard */
};

/* Build the shard (restoring it when asked), bind the endpoint, start the
 * service threads. Returns NULL with a message in err. Main thread. */
ps_service_t *ps_service_new(const struct ps_service_conf *conf, char *err, size_t err_len);

/* Serve (as service thread 0, with threads 1.. started here) until *stop
 * becomes nonzero (a signal) or a SHUTDOWN request comes, then let every
 * thread finish the request at hand and join them. Returns 0, SS_E_NOMEM
 * when a thread cannot start, SS_E_NET when polling fails. Main thread. */
int ps_service_run(ps_service_t *self, volatile sig_atomic_t *stop);

/* The STATS reply's JSON object (role, shard, uptime, process CPU seconds and
 * those of the ZeroMQ I/O thread, every request and key counter summed over
 * the service threads, rows held; docs/metrics.md lists them), at most max
 * bytes (cut at a whole field, still valid JSON, if it does not fit).
 * Caller owns the text: ss_free(). Any thread; counters are read with
 * relaxed loads, so a figure may be one request behind while threads serve. */
char *ps_service_stats_json(ps_service_t *self, size_t max);

/* Stop and join the threads, free everything. Accepts NULL. */
void ps_service_destroy(ps_service_t **self_p);

/* For tests and fuzzing: read one request waiting on sock (a ROUTER the
 * caller owns: identity frame first) and answer it on sock, through the same
 * decode, check, dispatch and error-reply path as the service threads,
 * counted as service thread 0. A SHUTDOWN only sets the flag that
 * ps_service_run() reads. Calling thread only, and only while
 * ps_service_run() is not running. Does nothing if no message waits. */
void ps_service_serve_one(ps_service_t *self, void *sock);

/* For tests and fuzzing: put the service back into the state a fresh
 * ps_service_new() without restore_dir leaves it in, without its costly part
 * (ZeroMQ context, sockets, bind): a new empty shard, no connection
 * remembered as having said HELLO, every counter and latency histogram zero,
 * no SHUTDOWN requested, uptime and the recovery checkpoint timer from now.
 * The sockets and their connection figures stay. Returns 0, or an SS_E_* with
 * err if the shard cannot be made (the service then has none: destroy it).
 * Main thread, only while ps_service_run() is not running (it joins its
 * threads before it returns). */
int ps_service_reset(ps_service_t *self, char *err, size_t err_len);

/* 1 when a PS of role (enum ps_role) answers requests of MsgType type: its
 * row of ss_msg_types.h names this role (or both) and a PS handler. Any
 * thread. */
int ps_service_serves(int type, int role);

/* Role name, "embedding" or "sync". */
const char *ps_role_name(int role);

/* Scrape callback for ss_metrics_new() (arg: the service): every counter of
 * `stats`, request latency histograms by type, rows and memory of the
 * shard. Safe on the HTTP thread while the service runs. */
struct ss_mw;
void ps_service_metrics(void *arg, struct ss_mw *w);

/* Write the PS's table of figures to out, one markdown row per figure as
 * docs/metrics.md lists them (ss_stat_doc_row()): `shadow-ps
 * --list-metrics`. Any thread; needs no service. */
void ps_service_list_metrics(FILE *out);

#endif
