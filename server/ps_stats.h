/* ps_stats.h - PRIVATE to server/ps_*.c: the PS's one table of metrics.
 *
 * Every figure a PS reports is one row here: its JSON key (the STATS reply,
 * the "stats at exit" log line), its Prometheus name and labels (or NULL:
 * JSON only), its kind (COUNTER, GAUGE, INFO: JSON only), its unit and one
 * line of help. PS_COUNTERS are the per-thread counters the handlers bump
 * (COUNT(), ps_service_int.h); PS_HEAD and PS_FIGURES are read when a
 * snapshot is taken (server/ps_stats.c). docs/metrics.md lists the same rows:
 * `shadow-ps --list-metrics` prints them, and test_ps_stats checks the doc
 * against this table (docs/howto-metric.md). */
#ifndef PS_STATS_H
#define PS_STATS_H

#include <stddef.h>

#include "ss_stats.h"

/* Per-thread counters, listed once (memcached thread_stats): JSON key (also
 * the Prometheus name shadowsync_ps_<key>_total), unit, help. */
#define PS_COUNTERS(X)                                                                    \
    X(req_hello, NULL, "HELLO requests")                                                          \
    X(req_ping, NULL, "PING requests")                                                            \
    X(req_stats, NULL, "STATS requests")                                                          \
    X(req_checkpoint, NULL, "CHECKPOINT and CHECKPOINT_DONE requests")                            \
    X(req_restore, NULL, "RESTORE requests (going back to a committed save)")                     \
    X(req_shutdown, NULL, "SHUTDOWN requests")                                                    \
    X(req_lookup, NULL, "LOOKUP requests (a PUSH_LOOKUP counts as a push and a lookup)")          \
    X(req_push, NULL, "PUSH requests (a PUSH_LOOKUP counts as a push and a lookup)")              \
    X(req_init, NULL, "INIT requests")                                                            \
    X(req_elastic, NULL, "ELASTIC requests")                                                      \
    X(req_pull, NULL, "PULL requests")                                                            \
    X(bad_requests, NULL, "requests answered with an error (not an empty sync shard's)")          \
    X(nonfinite_refused, NULL, "pushes, INITs or ELASTICs refused for a NaN, an infinity "        \
      "or a value beyond security.max_abs_value")                                                 \
    X(keys_looked_up, NULL, "keys looked up")                                                     \
    X(keys_pushed, NULL, "keys whose gradients were applied or refused")                          \
    X(keys_over_capacity, NULL,                                                                   \
      "keys refused because the shard was full (tables.capacity_rows)")                           \
    X(refused_no_hello, NULL, "requests refused: no HELLO on the connection")                     \
    X(refused_not_admin, NULL, "requests refused: not an admin key, or no valid admin "           \
      "token (security.admin_token_file)")                                                        \
    X(replies_dropped, NULL, "replies dropped: the client is gone or does not read")              \
    X(hellos_forgotten, NULL, "connections forgotten to make room for a new HELLO")               \
    X(bytes_in, "bytes", "request bytes")                                                         \
    X(bytes_out, "bytes", "reply bytes")                                                          \
    X(ckpt_cpu_us, "us", "CPU microseconds spent writing checkpoints")                          \
    X(restores_no_memory, NULL, "RESTOREs refused: no memory to load the save beside the "        \
      "shard (it serves on as it was)")

/* Everything else a STATS reply and the metrics endpoint show (JSON key,
 * Prometheus name or NULL, labels, kind, unit or NULL, help): PS_HEAD before the counters,
 * PS_FIGURES after them (the order of the STATS reply; scripts read the
 * counters from the PS's one-line "stats at exit" log, cut at 1 KiB). */
#define PS_HEAD(X)                                                                                \
    X(role, NULL, NULL, INFO, NULL, "embedding or sync")                                          \
    X(shard, NULL, NULL, INFO, NULL, "shard index")                                               \
    X(endpoint, NULL, NULL, INFO, NULL, "advertised endpoint")                                    \
    X(pid, NULL, NULL, INFO, NULL, "process id")                                                  \
    X(threads, NULL, NULL, INFO, NULL, "service threads")                                         \
    X(uptime_s, "shadowsync_ps_uptime_seconds", NULL, GAUGE, "s", "seconds since the PS started") \
    X(cpu_s, "shadowsync_ps_cpu_seconds", NULL, GAUGE, "s", "CPU time of the PS process")         \
    X(cpu_zmq_io_s, NULL, NULL, INFO, "s", "CPU seconds of the ZeroMQ I/O thread")                \
    X(rss_bytes, "shadowsync_ps_rss_bytes", NULL, GAUGE, "bytes", "resident memory of the process")
#define PS_FIGURES(X)                                                                             \
    X(curve, NULL, NULL, INFO, NULL, "security.curve")                                            \
    X(auth_allowed, NULL, NULL, INFO, NULL, "handshakes admitted: listed keys, or the job token")  \
    X(auth_refused, "shadowsync_ps_auth_refused_total", NULL, COUNTER, NULL,                      \
      "handshakes refused (key not listed, wrong job token)")                                     \
    X(connections_open, "shadowsync_ps_connections_open", NULL, GAUGE, NULL, "connections open")  \
    X(connections_accepted, NULL, NULL, INFO, NULL, "connections accepted")                       \
    X(connections_refused, "shadowsync_ps_connections_refused_total", NULL, COUNTER, NULL,        \
      "connections refused (open-file limit)")                                                    \
    X(handshakes_failed, NULL, NULL, INFO, NULL, "handshakes that failed")                        \
    X(connections_capacity, NULL, NULL, INFO, NULL, "connections the open-file limit allows")     \
    X(hello_peers, NULL, NULL, INFO, NULL, "connections remembered as having said HELLO")         \
    X(rows, "shadowsync_ps_rows", NULL, GAUGE, NULL, "embedding rows stored in this shard")       \
    X(storage_bytes, "shadowsync_ps_memory_bytes", NULL, GAUGE, "bytes",                          \
      "bytes of rows, optimizer state and maps in this shard")                                    \
    X(max_memory_bytes, NULL, NULL, INFO, "bytes", "tables.max_memory_bytes")                     \
    X(rows_admitted, "shadowsync_ps_rows_admitted_total", NULL, COUNTER, NULL, "rows created")    \
    X(keys_not_admitted, "shadowsync_ps_keys_not_admitted_total", NULL, COUNTER, NULL,            \
      "pushed keys dropped: not yet seen tables.admit_after times")                               \
    X(rows_evicted_ttl, "shadowsync_ps_rows_evicted_total", "cause=\"ttl\"", COUNTER, NULL,       \
      "rows deleted, by cause")                                                                   \
    X(rows_evicted_memory, "shadowsync_ps_rows_evicted_total", "cause=\"memory\"", COUNTER, NULL, \
      "rows deleted, by cause")                                                                   \
    X(empty, NULL, NULL, INFO, NULL, "sync shard not yet seeded")                                 \
    X(range_offset, NULL, NULL, INFO, NULL, "first center element of this sync shard")            \
    X(range_length, NULL, NULL, INFO, NULL, "center elements of this sync shard")                 \
    X(elastic_rounds, "shadowsync_ps_elastic_rounds_total", NULL, COUNTER, NULL,                  \
      "EASGD rounds served by this sync shard")

/* Counter slots (PS_C_*) and figures (PS_F_*); in the table of all stats
 * the counters sit at PS_S_COUNTER0 + PS_C_*, between PS_HEAD and PS_FIGURES. */
enum {
#define PS_ID(name, unit, help) PS_C_##name,
    PS_COUNTERS(PS_ID)
#undef PS_ID
    PS_N_COUNTERS
};
enum {
#define PS_ID(name, prom, labels, kind, unit, help) PS_F_##name,
    PS_HEAD(PS_ID)
    PS_S_COUNTER0,
    PS_S_BEFORE_FIGURES = PS_S_COUNTER0 + PS_N_COUNTERS - 1,
    PS_FIGURES(PS_ID)
#undef PS_ID
    PS_N_STATS
};

/* The table of every figure: PS_N_STATS rows, indexed by PS_F_* and by
 * PS_S_COUNTER0 + PS_C_*. */
extern const struct ss_stat_def ps_stat_defs[PS_N_STATS];

#endif
