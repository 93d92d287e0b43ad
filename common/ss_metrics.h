/* ss_metrics.h - Prometheus metrics over HTTP: GET /metrics on a port.
 *
 * A process creates one server with a scrape callback. On each scrape the
 * server's thread (libmicrohttpd's) calls the callback with a writer, and the
 * callback writes the process's current figures into it with ss_mw_counter(),
 * ss_mw_gauge() and ss_mw_histogram(). The writer produces the text
 * exposition format (version 0.0.4): one HELP and TYPE line per metric name
 * (a name written several times with different labels gets them once, when
 * the calls for one name are consecutive), then "name{labels} value". Every
 * sample carries the process's constant labels (job, role, shard or rank).
 *
 * The callback runs on the HTTP thread while the process works: it must only
 * read thread-safe snapshots (atomics, or data under the owner's lock).
 *
 * ss_hist is a fixed-bucket latency histogram that any thread may add to
 * (relaxed atomics); ss_mw_hist() writes it. */
#ifndef SS_METRICS_H
#define SS_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ss_metrics ss_metrics_t;
typedef struct ss_mw ss_mw_t;

/* Fills w on each scrape; arg is the one given to ss_metrics_new(). */
typedef void (*ss_metrics_fn)(void *arg, ss_mw_t *w);

/* Serve GET /metrics on port (other paths answer 404) with labels (e.g.
 * "job=\"local\",role=\"embedding\",shard=\"0\"", copied) added to every
 * sample. It listens where the process binds its ZeroMQ socket:
 * bind_endpoint is that endpoint (ss_cluster_bind_endpoint()), and its host
 * is used (host 127.0.0.1: loopback only; host '*': every interface); NULL
 * or a non-tcp endpoint listens on 127.0.0.1. Slow clients
 * cannot lock scrapes out: 2 s of silence closes a connection, and it takes
 * 32 connections per address (128 in all). Returns the server (caller owns;
 * ss_metrics_destroy()) or NULL with err naming the address, the port and
 * why (in use, no permission). */
ss_metrics_t *ss_metrics_new(const char *bind_endpoint, int port, const char *labels,
                             ss_metrics_fn fn, void *arg, char *err, size_t err_len);

/* The address the server listens on ("127.0.0.1", "*" for every interface).
 * Valid while self lives. */
const char *ss_metrics_host(const ss_metrics_t *self);

/* Stop serving (waits for a scrape in progress) and free; sets *self_p to
 * NULL; accepts NULL. */
void ss_metrics_destroy(ss_metrics_t **self_p);

/* The text one scrape would serve: fn(arg) written with constant labels
 * (may be NULL). Caller owns it: ss_free(); *len (may be NULL) gets its
 * length. Any thread (tests, and the HTTP thread itself). */
char *ss_metrics_text(const char *labels, ss_metrics_fn fn, void *arg, size_t *len);

/* Scrapes served so far. */
uint64_t ss_metrics_scrapes(const ss_metrics_t *self);

/* One sample of a counter (monotonic) or a gauge. labels: extra labels for
 * this sample ("type=\"lookup\"") or NULL. help: one line, no newline. */
void ss_mw_counter(ss_mw_t *w, const char *name, const char *help, const char *labels,
                   double value);
void ss_mw_gauge(ss_mw_t *w, const char *name, const char *help, const char *labels,
                 double value);

/* Latency buckets of ss_hist, seconds (upper bounds; +Inf is implicit). */
#define SS_HIST_BUCKETS 14

/* A latency histogram: counts per bucket, total count and sum. Zeroed
 * memory is an empty histogram. */
struct ss_hist {
    _Atomic uint64_t bucket[SS_HIST_BUCKETS + 1];  /* [i]: <= bound i; last: +Inf */
    _Atomic uint64_t sum_ns;                      /* sum of observations */
};

/* Add one observation of ns nanoseconds. Any thread. */
void ss_hist_add(struct ss_hist *h, uint64_t ns);

/* Add src's counts into dst (a snapshot sum; not atomic as a whole). */
void ss_hist_merge(struct ss_hist *dst, const struct ss_hist *src);

/* Write h as a Prometheus histogram (name_bucket, name_sum, name_count). */
void ss_mw_hist(ss_mw_t *w, const char *name, const char *help, const char *labels,
                const struct ss_hist *h);

/* Upper bound of bucket i in seconds (i < SS_HIST_BUCKETS). */
double ss_hist_bound_s(int i);

/* Observations in h so far (the sum of its buckets; relaxed loads). */
uint64_t ss_hist_count(const struct ss_hist *h);

/* A histogram as plain numbers, for a state file that carries it across a
 * restart (tr_jobckpt.h): its SS_HIST_BUCKETS + 1 bucket counts, then
 * sum_ns. */
#define SS_HIST_VALUES (SS_HIST_BUCKETS + 2)

/* Copy h into out[SS_HIST_VALUES] (relaxed loads). Any thread. */
void ss_hist_get(const struct ss_hist *h, uint64_t *out);

/* Make h hold in[SS_HIST_VALUES] (what ss_hist_get() gave), replacing its
 * counts. Before any thread adds to h. */
void ss_hist_set(struct ss_hist *h, const uint64_t *in);

/* Per-thread histograms: n empty ones in one block, each on its own 64-byte
 * lines, so that threads adding to their own never share a line (one per
 * worker, like ss_stats.h's counter slots). Caller owns; ss_free(). */
struct ss_hist *ss_hists_new(size_t n);

/* out = the sum of h[0] .. h[n-1], read with relaxed loads while their
 * threads may still add (each bucket is as of some recent moment); out's
 * previous contents are discarded. Any thread. */
void ss_hists_sum(const struct ss_hist *h, size_t n, struct ss_hist *out);

#endif
