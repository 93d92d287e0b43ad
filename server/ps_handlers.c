/* ps_handlers.c - one request to a PS: read it, check it, gate it, route it
 * to its handler, reply.
 *
 * The route table is ss_msg_types.h's: each row names the PS role that
 * serves the type, its handler here (s_on_<ps_fn>), and whether it needs an
 * admin key; s_routes below is that table expanded. A handler returns 0
 * when it replied, or an SS_E_* with err, and ps_svc_serve_one() sends the
 * error reply and counts it.
 *
 * Who may ask what: with security.curve on, every ROUTER is a CURVE server
 * and the ZAP handler (ss_auth) admits only listed keys. Every request then
 * goes through s_gate(): a connection that has not said HELLO gets
 * SS_E_NOHELLO (HELLO is the only request served before), and the types the
 * table marks admin (SHUTDOWN, CHECKPOINT(_DONE), INIT, RESTORE) need an admin key
 * and the admin token (SS_E_DENIED). The rights come from the ZAP metadata
 * of the request's header frame (not the identity frame: ZeroMQ leaves it
 * off that one after a poll). Each thread keeps the connections that said
 * HELLO on its own socket (routing ids are per socket: two sockets may give
 * two connections the same one).
 *
 * Thread: every function runs on the service thread that read the request
 * (or a test's thread through ps_service_serve_one()). */
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "ps_ckpt.h"
#include "ps_service_int.h"
#include "ss_assert.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_super.h"
#include "ss_time.h"

#define PS_REPLY_SLACK 4096          /* bytes of a reply besides its rows (header, frames) */

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

/* "Still working" replies to a CHECKPOINT or RESTORE whose client asked for
 * them (progress_ms in its header): at most one each progress_ms (0: each
 * MiB), while the files are written or read (ps_ckpt_progress), so that a
 * client waits on for a shard that takes longer than its timeout and gives
 * up on one that stops answering. */
struct s_prog {
    struct ps_req *req;
    const char *what;    /* "written", "read" */
    uint64_t every_ms;
    uint64_t last_ms;    /* when the last one went (or the request came) */
};

static void s_on_progress(void *arg, const char *path, uint64_t bytes, uint64_t total)
{
    struct s_prog *p = arg;
    uint64_t now = ss_now_ms();
    if (now - p->last_ms < p->every_ms)
        return;
    char text[SS_CFG_MAX_STR * 3 + 96];
    Header h;
    if (bytes == PS_CKPT_WAITING)
        snprintf(text, sizeof text, "%s waiting for another checkpoint or restore of this "
                 "shard to end before %s is %s", SS_SUPER_WORKING_WORD, path, p->what);
    else if (total)
        snprintf(text, sizeof text, "%s %.1f of %.1f MiB of %s %s", SS_SUPER_WORKING_WORD,
                 bytes / 1048576.0, total / 1048576.0, path, p->what);
    else
        snprintf(text, sizeof text, "%s %.1f MiB of %s %s", SS_SUPER_WORKING_WORD,
                 bytes / 1048576.0, path, p->what);
    s_reply_init(&h, p->req);
    h.has_progress_ms = 1;
    h.progress_ms = (uint32_t)p->every_ms;
    h.text = text;
    (void)ss_msg_send(p->req->sock, p->req->id, p->req->id_len, &h, NULL, 0);  /* best effort */
    p->last_ms = now;
}

/* Start the "still working" replies of req when its client asked for them. */
static void s_progress_begin(struct s_prog *p, struct ps_req *req, const char *what)
{
    const Header *h = req->msg.hdr;
    *p = (struct s_prog){req, what, h->progress_ms, ss_now_ms()};
    if (h->has_progress_ms)
        ps_ckpt_progress(s_on_progress, p);
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
    if (!ss_listen_admit(req->th->listen, req->fd)) {
        /* shut beyond security.max_connections (counted and logged there):
         * nothing is answered on it */
        return 0;
    }
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

static int s_on_stats(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    COUNT(req->th, req_stats, 1);
    char *text = ps_service_stats_json(self, PS_STATS_MAX);
    int rc = s_reply_empty(req, text);
    ss_free(text);
    return rc;
}

static int s_on_checkpoint(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    char path[SS_CFG_MAX_STR * 3], dir[SS_CFG_MAX_STR * 2 + 2];
    COUNT(req->th, req_checkpoint, 1);
    const Header *h = req->msg.hdr;
    struct s_prog prog;
    int rc = ps_svc_request_dir(self, h, dir, sizeof dir, err, len);
    s_progress_begin(&prog, req, "written");
    if (rc == 0)
        rc = ps_svc_write_ckpt(self, dir, h->has_save_id ? h->save_id : 0, path, sizeof path, err,
                          len);
    ps_ckpt_progress(NULL, NULL);
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
    int rc = ps_svc_request_dir(self, h, dir, sizeof dir, err, len);
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

/* Go back to a committed save (the trainer's output model when the model it
 * kept is not the one trained last: tr_modelset.c): the text names the
 * save's folder, save_id its id (0: any). The PS replaces its shard with its
 * file of that save and replies, with the file, only when done; a file that
 * is missing, corrupt, of another save or of another shape is refused and
 * the shard is as it was. The folder is checked as a CHECKPOINT's: inside
 * job.run_dir or the checkpoint folder. */
static int s_on_restore(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    char dir[SS_CFG_MAX_STR * 2 + 2], path[SS_CFG_MAX_STR * 3];
    const Header *h = req->msg.hdr;
    COUNT(req->th, req_restore, 1);
    if (!h->text || !h->text[0]) {
        snprintf(err, len, "RESTORE: no folder named");
        return SS_E_INVAL;
    }
    struct s_prog prog;
    int rc = ps_svc_request_dir(self, h, dir, sizeof dir, err, len);
    s_progress_begin(&prog, req, "read");
    if (rc == 0)
        rc = ps_svc_restore(self, dir, h->has_save_id ? h->save_id : 0, path, sizeof path, err,
                            len);
    ps_ckpt_progress(NULL, NULL);
    if (rc == SS_E_NOMEM)
        COUNT(req->th, restores_no_memory, 1);
    if (rc)
        return rc;
    SS_LOG(SS_LOG_INFO, "shard restored from %s (RESTORE%s%s)", path,
           req->key[0] ? " by key " : "", req->key);
    return s_reply_empty(req, path);
}

static int s_on_shutdown(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    COUNT(req->th, req_shutdown, 1);
    SS_LOG(SS_LOG_INFO, "SHUTDOWN requested%s%s", req->key[0] ? " by key " : "", req->key);
    atomic_store(&self->shutdown_requested, 1);
    ps_svc_wake_all(self);  /* the other service threads sleep until told */
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
        struct ps_embed_groups pg = {h->n_tables, h->tables, h->counts, keys};
        struct ps_embed_groups lg = {h->n_lookup_tables, h->lookup_tables, h->lookup_counts,
                                     lkeys};
        ps_embed_push_lookup_groups(self->embed, &pg, grads, &lg, out, &n_full, &n_init);
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

/* The reply text of an INIT by what the shard did with it (the trainer
 * reads it: tr_sync_easgd.c). */
static const char *s_offer_text(int res)
{
    switch (res) {
    case PS_SYNC_SEEDED: return "applied";
    case PS_SYNC_COLLECTED: return "collected";
    case PS_SYNC_REPEATED: return "waiting";
    default: return "kept";
    }
}

/* INIT with a sender: an offer towards the mean of the replicas (ps_sync.h);
 * without one (an older trainer, a tool): the values, at once. */
static int s_on_init(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    const Header *h = req->msg.hdr;
    const float *x = zmq_msg_data(&req->msg.frames[0]);
    int res = 0;
    uint32_t n_from = 0;
    COUNT(req->th, req_init, 1);
    int rc = s_check_finite(self, req, x, h->length, "INIT values", err, len);
    if (rc)
        return rc;
    if (h->has_sender) {
        rc = ps_sync_offer(self->sync, h->sender, h->offset, x, h->length, ss_now_ms(), &res,
                           &n_from);
    } else {
        int applied = 0;
        rc = ps_sync_init(self->sync, h->offset, x, h->length, &applied);
        res = applied ? PS_SYNC_SEEDED : PS_SYNC_KEPT;
        n_from = 1;
    }
    if (rc) {
        uint64_t off;
        size_t l;
        ps_sync_range(self->sync, &off, &l);
        snprintf(err, len, "INIT of [%llu, +%llu)%s refused: shard holds [%llu, +%zu): %s",
                 (unsigned long long)h->offset, (unsigned long long)h->length,
                 rc == SS_E_INVAL && h->has_sender ? " from an unknown trainer rank" : "",
                 (unsigned long long)off, l, ss_strerror(rc));
        return rc;
    }
    if (res == PS_SYNC_SEEDED && !h->has_sender)
        SS_LOG(SS_LOG_INFO, "center range [%llu, +%llu) initialized from one INIT without a "
               "sender (a center put back by a trainer, or a tool)",
               (unsigned long long)h->offset, (unsigned long long)h->length);
    else if (res == PS_SYNC_SEEDED)
        SS_LOG(SS_LOG_INFO, "center range [%llu, +%llu) initialized from the mean of %u "
               "trainer replica(s)", (unsigned long long)h->offset,
               (unsigned long long)h->length, n_from);
    else if (res == PS_SYNC_COLLECTED)
        SS_LOG(SS_LOG_INFO, "center range [%llu, +%llu): replica %u of %zu offered (trainer "
               "%u); waiting for the others' (at most %lld ms after the first) to seed it "
               "with their mean", (unsigned long long)h->offset, (unsigned long long)h->length,
               n_from, ss_cluster_count(self->cluster, SS_CLUSTER_TRAINER), h->sender,
               (long long)ps_svc_reseed_wait_ms(self->cfg));
    return s_reply_empty(req, s_offer_text(res));
}

/* An empty sync shard whose wait for the trainers' offers is over takes
 * their mean now (ps_sync_settle()); logged when it does. */
static void s_settle(ps_service_t *self)
{
    uint32_t k = ps_sync_settle(self->sync, ss_now_ms());
    uint64_t off;
    size_t l;
    if (k == 0)
        return;
    ps_sync_range(self->sync, &off, &l);
    SS_LOG(SS_LOG_WARN, "center range [%llu, +%zu) initialized from the mean of %u of %zu "
           "trainer replicas: the others offered none within %lld ms (2 x sync.timeout_ms)",
           (unsigned long long)off, l, k, ss_cluster_count(self->cluster, SS_CLUSTER_TRAINER),
           (long long)ps_svc_reseed_wait_ms(self->cfg));
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
    if (held == 0) {
        s_settle(self);
        ps_sync_range(self->sync, &off, &held);
    }
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

/* ------------------------------------------------------------ the routes */

typedef int (*ps_handler_fn)(ps_service_t *self, struct ps_req *req, char *err, size_t len);

/* The handler of each row of ss_msg_types.h, NULL for a type no PS serves. */
#define s_on_none NULL
static const ps_handler_fn s_routes[SS_MSG_N_TYPES] = {SS_MSG_TYPES(SS_MSG_PS_HANDLER)};
#undef s_on_none

/* Log a refused request: the first ten of a kind, then every 1000th. */
static void s_log_refused(uint64_t n, const char *what, const struct ps_req *req)
{
    if (n <= 10 || n % 1000 == 0)
        SS_LOG(SS_LOG_WARN, "refused %s from %s%s: %s [%llu so far on this thread]",
               ss_msg_type_name(req->msg.hdr->type), req->key[0] ? "key " : "a client",
               req->key, what, (unsigned long long)n);
}

/* HELLO first, admin requests from admin keys only (see top). */
static int s_gate(ps_service_t *self, struct ps_req *req, const struct ss_msg_type *t,
                  char *err, size_t len)
{
    if (t->type != MSG_TYPE__MSG_HELLO && !ss_peers_has(req->th->peers, req->id, req->id_len)) {
        s_log_refused(COUNT(req->th, refused_no_hello, 1) + 1, "no HELLO on this connection",
                      req);
        snprintf(err, len, "%s refused: say HELLO first (protocol version and config hash); "
                 "this PS serves nothing before", t->name);
        return SS_E_NOHELLO;
    }
    if (t->admin && !req->admin) {
        s_log_refused(COUNT(req->th, refused_not_admin, 1) + 1, "not an admin key", req);
        snprintf(err, len, "%s refused: key %s is not in security.admin_keys", t->name,
                 req->key);
        return SS_E_DENIED;
    }
    if (t->admin && !ss_admin_token_ok(self->admin_token, req->msg.hdr->admin_token)) {
        s_log_refused(COUNT(req->th, refused_not_admin, 1) + 1, "no valid admin token", req);
        snprintf(err, len, "%s refused: not allowed", t->name);  /* says nothing of the job */
        return SS_E_DENIED;
    }
    return 0;
}

/* 1 when a PS of role serves the requests of row t. */
static int s_role_serves(const struct ss_msg_type *t, int role)
{
    return t->ps == SS_MSG_PS_BOTH ||
           (t->ps == SS_MSG_PS_EMBED && role == PS_ROLE_EMBEDDING) ||
           (t->ps == SS_MSG_PS_SYNC && role == PS_ROLE_SYNC);
}

int ps_service_serves(int type, int role)
{
    const struct ss_msg_type *t = ss_msg_type_find(type);
    return t && t->ps != SS_MSG_PS_NONE && s_routes[t->row] && s_role_serves(t, role);
}

/* Route a checked request through its row of ss_msg_types.h: the gate, the
 * role, the handler. */
static int s_dispatch(ps_service_t *self, struct ps_req *req, char *err, size_t len)
{
    int type = req->msg.hdr->type;
    const struct ss_msg_type *t = ss_msg_type_find(type);
    if (!t || t->ps == SS_MSG_PS_NONE || !s_routes[t->row]) {
        snprintf(err, len, "request type %d is not served by a PS", type);
        return SS_E_PROTO;
    }
    int rc = s_gate(self, req, t, err, len);
    if (rc)
        return rc;
    if (!s_role_serves(t, self->role)) {
        snprintf(err, len, "%s sent to a %s PS (shard %u)", t->name, ps_role_name(self->role),
                 self->shard);
        return SS_E_INVAL;
    }
    return s_routes[t->row](self, req, err, len);
}

/* The latency histogram a request of type is timed in. */
static int s_lat_kind(int type)
{
    const struct ss_msg_type *t = ss_msg_type_find(type);
    return t ? t->lat : SS_MSG_LAT_OTHER;
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
    req->fd = zmq_msg_get(&part, ZMQ_SRCFD);  /* -1 where ZeroMQ does not know */
    return ss_msg_recv_rest(sock, &part, &req->msg, err, len);
}

/* Answer a request that failed with rc: count it, log the first few, send
 * the error reply. Refusals (no HELLO, not admin) are counted apart; an
 * empty sync shard (restarted, or waiting for the trainers' replicas: the
 * INIT handler logs that) is a state, not a bad request. */
static void s_fail(struct ps_thread *th, struct ps_req *req, int type, uint64_t req_id, int rc,
                   const char *err)
{
    if (rc != SS_E_FULL && rc != SS_E_NOHELLO && rc != SS_E_DENIED && rc != SS_E_EMPTY) {
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
int ps_svc_serve_one(ps_service_t *self, struct ps_thread *th, void *sock)
{
    struct ps_req req;
    char err[512] = "";
    int type = 0;
    uint64_t req_id = 0;

    req.th = th;
    req.sock = sock;
    req.id_len = 0;
    req.fd = -1;
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
