/* ps_stats.c - the PS's figures: its table of metrics (ps_stats.h) as data,
 * the snapshot every output reads, the STATS reply's JSON, the Prometheus
 * scrape, and the table as docs/metrics.md lists it (--list-metrics).
 *
 * A snapshot sums the service threads' counter slots with relaxed loads and
 * reads the shard's and the sockets' figures through their thread-safe
 * getters, so any thread may take one while the threads serve. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ps_service.h"
#include "ps_service_int.h"
#include "ss_cpu.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_metrics.h"
#include "ss_time.h"

const struct ss_stat_def ps_stat_defs[PS_N_STATS] = {
#define PS_DEF(name, prom, labels, kind, unit, help) \
    {#name, prom, labels, 0, SS_STAT_##kind, help, 0},
    PS_HEAD(PS_DEF)
#define PS_DEF_C(name, unit, help) \
    {#name, "shadowsync_ps_" #name "_total", NULL, 0, SS_STAT_COUNTER, help, 0},
    PS_COUNTERS(PS_DEF_C)
#undef PS_DEF_C
    PS_FIGURES(PS_DEF)
#undef PS_DEF
};

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
    ss_snap_init(sn, ps_stat_defs, PS_N_STATS, v);
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

void ps_service_metrics(void *arg, ss_mw_t *w)
{
    ps_service_t *self = arg;
    struct ss_val v[PS_N_STATS];
    struct ss_snap sn;
    char lab[64];
    s_snapshot(self, &sn, v);
    ss_snap_prom(&sn, w);
    for (int k = 0; k < SS_MSG_LAT_N; k++) {
        struct ss_hist h;
        memset(&h, 0, sizeof h);
        for (int i = 0; i < self->n_threads; i++)
            ss_hist_merge(&h, &self->threads[i].lat[k]);
        snprintf(lab, sizeof lab, "type=\"%s\"", ss_msg_lat_name(k));
        ss_mw_hist(w, "shadowsync_ps_request_seconds",
                   "time to handle one request, by type (socket to reply queued)", lab, &h);
    }
}

/* The unit column of each row, in the order of ps_stat_defs. */
static const char *const s_units[PS_N_STATS] = {
#define PS_UNIT(name, prom, labels, kind, unit, help) unit,
#define PS_UNIT_C(name, unit, help) unit,
    PS_HEAD(PS_UNIT) PS_COUNTERS(PS_UNIT_C) PS_FIGURES(PS_UNIT)
#undef PS_UNIT_C
#undef PS_UNIT
};

void ps_service_list_metrics(FILE *out)
{
    char row[1024];
    for (size_t i = 0; i < PS_N_STATS; i++)
        fprintf(out, "%s\n",
                ss_stat_doc_row(&ps_stat_defs[i], s_units[i], NULL, 0, row, sizeof row));
}
