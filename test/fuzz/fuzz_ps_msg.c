/* fuzz_ps_msg.c - libFuzzer harness: wire messages into a real PS.
 *
 * The input is a small script of ZeroMQ messages for one shadow-ps service
 * (ps_service_new(), embedding or sync role, tiny config) in the state a
 * fresh one starts in:
 *
 *   input   = selector frame*
 *   frame   = tag(1 byte) length(2 bytes, little-endian) bytes[length]
 *             tag bit 0 set: the frame is the last of its message
 *             (a short last frame takes what is left)
 *   selector bit 0: sync role (else embedding); bit 1: model.first_order;
 *             bits 2-3: tables.optimizer (sgd, adagrad, rowwise_adagrad);
 *             bit 4: two embedding shards (this one is shard bit 5);
 *             bit 6: noop (benchmark) mode
 *
 * Each message is sent from a DEALER to a ROUTER the harness owns and handed
 * to ps_service_serve_one(): the service threads' path (ss_msg_recv, the
 * protobuf-c Header unpack, ss_msg_check, the handlers behind the dispatcher,
 * the error replies). Checks: every request gets exactly one reply, and that
 * reply passes the client's ss_msg_check(reply). The same frames also go
 * through the client's receive path (ss_msg_recv without identity,
 * ss_msg_check as a reply) on a PAIR. CHECKPOINT writes into a private
 * folder, and CHECKPOINT_DONE deletes in it (job.run_dir is that folder,
 * checkpoint.dir is inside it; the PS refuses folders outside those two);
 * SHUTDOWN only sets a flag nobody reads here.
 *
 * Nothing outside the private folder may change: it is box/ in the
 * harness's temporary folder, and beside it lie decoys, the folders a
 * CHECKPOINT_DONE that got out would empty first (box.new-ID, and
 * jobckpt.new-ID and model.new-ID for a relative name taken against the
 * wrong folder), each holding the file of every role and shard the
 * harness serves. After each input the temporary folder must hold exactly
 * box/ and the decoys, each decoy its three files (an opendir and a few
 * stat calls: a few microseconds).
 *
 * Speed: a new service per input (its ZeroMQ context and bound sockets, and
 * the shard) cost most of each run. The harness makes the service of each
 * selector once, on first use, and keeps it, like its own ZeroMQ context,
 * sockets and temporary folder, for the whole process.
 *
 * Inputs stay independent, so that a crash reproduces from its saved input
 * alone (build/fuzz/fuzz_ps_msg FILE, a fresh process): before each input
 *   - a kept service is put back into the state of a new one with
 *     ps_service_reset(): a new empty shard (rows, optimizer state,
 *     admission sketch, clock), no connection remembered as having said
 *     HELLO, counters and histograms zero, no SHUTDOWN pending. Nothing else
 *     of it changes between inputs: its own sockets are never used here
 *     (requests come through the harness's ROUTER);
 *   - everything below the private folder is removed, so no checkpoint of
 *     an earlier input is there (a CHECKPOINT into a folder named like an
 *     earlier file would fail, a CHECKPOINT_DONE would find other saves);
 *   - the harness's sockets hold nothing: after each request it checks
 *     that no reply and no request part is left, and after each client
 *     frame that nothing is left on the PAIR;
 *   - configs and memberships are read-only once made.
 * What still differs is only what differs between two fresh processes too:
 * STATS figures of time, CPU and memory. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "fuzz_util.h"
#include "ps_service.h"
#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_msg.h"

#define S_MAX_MESSAGES 16   /* messages run per input */
#define S_MAX_PARTS 8       /* frames sent per message (more than the codec takes) */
#define S_N_TABLES 3        /* tables.count of the tiny config */
#define S_DIM 4             /* model.embedding_dim */
#define S_REPLY_MS 2000     /* a reply later than this is a hang */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The decoys beside the private folder (see the top), and the files in each. */
static const char *const s_decoys[] = {"box.new-0000000000000000", "jobckpt.new-00000000000000aa",
                                       "model.new-00000000000000bb"};
static const char *const s_decoy_files[] = {"embedding-0.ckpt", "embedding-1.ckpt",
                                            "sync-0.ckpt"};
#define S_N_DECOYS (sizeof s_decoys / sizeof s_decoys[0])
#define S_N_DECOY_FILES (sizeof s_decoy_files / sizeof s_decoy_files[0])

static char s_box[600];             /* the private folder: TMP/box */
static struct ss_cfg *s_cfgs[128];  /* config of each selector, made on first use */
static ss_cluster_t *s_cls[128];    /* its membership as the selected PS, likewise */
static ps_service_t *s_svcs[128];   /* the service of each selector, made on first use */
static void *s_ctx;                 /* the harness's ZeroMQ context */
static void *s_router, *s_dealer;   /* request path: dealer -> router -> service */
static void *s_pair_in, *s_pair_out;  /* client receive path */

/* The private folder, made with the decoys beside it on first use. */
static const char *s_private(void)
{
    char path[900];
    if (s_box[0])
        return s_box;
    const char *tmp = fuzz_tmpdir("ps_msg");
    snprintf(s_box, sizeof s_box, "%s/box", tmp);
    FUZZ_CHECK(mkdir(s_box, 0755) == 0, "cannot create %s", s_box);
    for (size_t i = 0; i < S_N_DECOYS; i++) {
        snprintf(path, sizeof path, "%s/%s", tmp, s_decoys[i]);
        FUZZ_CHECK(mkdir(path, 0755) == 0, "cannot create %s", path);
        for (size_t j = 0; j < S_N_DECOY_FILES; j++) {
            snprintf(path, sizeof path, "%s/%s/%s", tmp, s_decoys[i], s_decoy_files[j]);
            fuzz_write_file(path, "decoy", 5);
        }
    }
    return s_box;
}

/* Nothing outside the private folder changed: the temporary folder holds
 * box/ and the decoys, each decoy all its files. */
static void s_check_outside(void)
{
    const char *tmp = fuzz_tmpdir("ps_msg");
    char path[900];
    struct stat st;
    size_t n = 0;
    DIR *d = opendir(tmp);
    FUZZ_CHECK(d, "cannot read %s", tmp);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            int known = strcmp(e->d_name, "box") == 0;
            for (size_t i = 0; i < S_N_DECOYS; i++)
                known |= strcmp(e->d_name, s_decoys[i]) == 0;
            FUZZ_CHECK(known, "%s/%s was made outside the private folder", tmp, e->d_name);
            n++;
        }
    closedir(d);
    FUZZ_CHECK(n == 1 + S_N_DECOYS, "%zu entries in %s, want box/ and %zu decoys", n, tmp,
               S_N_DECOYS);
    for (size_t i = 0; i < S_N_DECOYS; i++)
        for (size_t j = 0; j < S_N_DECOY_FILES; j++) {
            snprintf(path, sizeof path, "%s/%s/%s", tmp, s_decoys[i], s_decoy_files[j]);
            FUZZ_CHECK(stat(path, &st) == 0 && st.st_size == 5,
                       "%s outside the private folder was removed or changed", path);
        }
}

/* The config of selector sel (bits as in the file comment). */
static const struct ss_cfg *s_cfg(unsigned sel)
{
    static const char *const opts[] = {"sgd", "adagrad", "rowwise_adagrad", "rowwise_adagrad"};
    char ckpt[700], run[700], emb[96], opt[64], fo[64], err[512];
    sel &= 127;
    if (s_cfgs[sel])
        return s_cfgs[sel];
    snprintf(ckpt, sizeof ckpt, "checkpoint.dir=%s/ckpt", s_private());
    snprintf(run, sizeof run, "job.run_dir=%s", s_private());
    snprintf(emb, sizeof emb, "cluster.embedding=inproc://fuzz-emb-0%s",
             (sel & 16) ? ",inproc://fuzz-emb-1" : "");
    snprintf(opt, sizeof opt, "tables.optimizer=%s", opts[(sel >> 2) & 3]);
    snprintf(fo, sizeof fo, "model.first_order=%s", (sel & 2) ? "true" : "false");
    const char *sets[] = {
        emb, "cluster.sync=inproc://fuzz-sync-0", "cluster.trainers=inproc://fuzz-tr-0",
        "data.format=libffm", "data.fields=3", "model.embedding_dim=4", "model.bottom_mlp=8,4",
        opt, fo, "tables.capacity_rows=16", "limits.max_keys_per_request=64",
        "limits.max_message_bytes=4096", "ps.stripes=4", "checkpoint.interval_s=0", ckpt,
        "tables.l2=0.01", run, "tables.admit_sketch_bytes=4096",
    };
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    FUZZ_CHECK(cfg, "out of memory");
    int rc = ss_cfg_load(cfg, NULL, sets, sizeof sets / sizeof sets[0], err, sizeof err);
    FUZZ_CHECK(rc == 0, "config: %s", err);
    return s_cfgs[sel] = cfg;
}

/* The membership of selector sel's config, as the PS it selects. */
static const ss_cluster_t *s_cl(unsigned sel)
{
    char err[512];
    sel &= 127;
    if (s_cls[sel])
        return s_cls[sel];
    struct ss_cluster_id me = {(sel & 1) ? SS_CLUSTER_SYNC : SS_CLUSTER_EMBEDDING,
                               (sel & 1) ? 0 : (sel >> 5) & (sel >> 4) & 1};
    s_cls[sel] = ss_cluster_new(s_cfg(sel), &me, NULL, err, sizeof err);
    FUZZ_CHECK(s_cls[sel], "cluster: %s", err);
    return s_cls[sel];
}

static void *s_socket(int type)
{
    int linger = 0, timeout = S_REPLY_MS;
    void *s = zmq_socket(s_ctx, type);
    FUZZ_CHECK(s, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    FUZZ_CHECK(zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger) == 0 &&
               zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout, sizeof timeout) == 0, "setsockopt");
    return s;
}

static void s_sockets(void)
{
    s_ctx = zmq_ctx_new();
    FUZZ_CHECK(s_ctx, "zmq_ctx_new");
    s_router = s_socket(ZMQ_ROUTER);
    s_dealer = s_socket(ZMQ_DEALER);
    s_pair_in = s_socket(ZMQ_PAIR);
    s_pair_out = s_socket(ZMQ_PAIR);
    FUZZ_CHECK(zmq_bind(s_router, "inproc://fuzz-req") == 0 &&
               zmq_connect(s_dealer, "inproc://fuzz-req") == 0 &&
               zmq_bind(s_pair_out, "inproc://fuzz-client") == 0 &&
               zmq_connect(s_pair_in, "inproc://fuzz-client") == 0, "bind/connect");
}

/* One message cut from the input: up to S_MAX_PARTS frames. */
struct s_message {
    size_t n;                          /* frames */
    const uint8_t *data[S_MAX_PARTS];  /* each frame's bytes, borrowed from the input */
    size_t len[S_MAX_PARTS];           /* each frame's length */
};

/* Cut the next message from *p..end; returns 0 when the input is used up. */
static int s_next_message(const uint8_t **p, const uint8_t *end, struct s_message *m)
{
    m->n = 0;
    while (*p < end) {
        uint8_t tag = **p;
        size_t len = 0;
        (*p)++;
        for (int i = 0; i < 2 && *p < end; i++, (*p)++)
            len |= (size_t)**p << (8 * i);
        if (len > (size_t)(end - *p))
            len = (size_t)(end - *p);
        if (m->n < S_MAX_PARTS) {
            m->data[m->n] = *p;
            m->len[m->n] = len;
            m->n++;
        }
        *p += len;
        if (tag & 1)
            break;
    }
    return m->n > 0;
}

static void s_send(void *sock, const struct s_message *m)
{
    for (size_t i = 0; i < m->n; i++) {
        int rc = zmq_send(sock, m->data[i], m->len[i], i + 1 < m->n ? ZMQ_SNDMORE : 0);
        FUZZ_CHECK(rc >= 0, "zmq_send: %s", zmq_strerror(zmq_errno()));
    }
}

/* zmq_poll of one socket for input, again when a signal (libFuzzer's
 * timeout alarm ticks every second) interrupts it. Returns 1, 0 or -1. */
static int s_poll(void *sock, long timeout_ms)
{
    zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
    int rc;
    do
        rc = zmq_poll(&item, 1, timeout_ms);
    while (rc < 0 && zmq_errno() == EINTR);
    return rc;
}

/* ss_msg_recv(), again when a signal came before the first part. */
static int s_recv(void *sock, struct ss_msg *msg, char *err, size_t err_len)
{
    int rc;
    do
        rc = ss_msg_recv(sock, 0, NULL, NULL, msg, err, err_len);
    while (rc == SS_E_STOPPED);
    return rc;
}

/* The request path: the service answers exactly once, with a valid reply. */
static void s_request(ps_service_t *svc, const struct s_message *m)
{
    struct ss_msg reply;
    char err[512] = "";

    s_send(s_dealer, m);
    FUZZ_CHECK(s_poll(s_router, S_REPLY_MS) == 1, "the request did not arrive");
    ps_service_serve_one(svc, s_router);
    int rc = s_recv(s_dealer, &reply, err, sizeof err);
    FUZZ_CHECK(rc == 0, "no valid reply: %s %s", ss_errname(rc), err);
    rc = ss_msg_check(&reply, 1, err, sizeof err);
    FUZZ_CHECK(rc == 0, "the reply fails the client's check: %s", err);
    ss_msg_close(&reply);
    FUZZ_CHECK(s_poll(s_dealer, 0) == 0, "more than one reply");
    FUZZ_CHECK(s_poll(s_router, 0) == 0, "parts of the request left unread");
}

/* The client path: a trainer receiving these frames as a reply. */
static void s_client(const struct s_message *m)
{
    struct ss_msg msg;
    char err[512];
    s_send(s_pair_out, m);
    int rc = s_recv(s_pair_in, &msg, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == SS_E_PROTO || rc == SS_E_NOMEM, "client recv: %s",
               ss_errname(rc));
    if (rc == 0 && ss_msg_check(&msg, 1, err, sizeof err) == 0) {
        /* a client reads every byte the check let through (a packed
         * message's views must lie inside its frame: ASan) */
        volatile uint8_t sum = 0;
        for (size_t i = 0; i < msg.n_frames; i++) {
            const uint8_t *d = zmq_msg_data(&msg.frames[i]);
            for (size_t k = 0; k < zmq_msg_size(&msg.frames[i]); k++)
                sum ^= d[k];
        }
        (void)sum;
    }
    ss_msg_close(&msg);
    FUZZ_CHECK(s_poll(s_pair_in, 0) == 0, "parts left over after a message");
}

/* Remove everything below the private folder (not the folder itself). */
static int s_rm_below(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return ftw->level > 0 ? s_fuzz_rm(path, st, flag, ftw) : 0;
}

/* Selector sel's service in the state a fresh ps_service_new() leaves it in:
 * made on first use, reset by ps_service_reset() on every later one. */
static ps_service_t *s_service(unsigned sel)
{
    char err[512];
    sel &= 127;
    if (s_svcs[sel]) {
        int rc = ps_service_reset(s_svcs[sel], err, sizeof err);
        FUZZ_CHECK(rc == 0, "ps_service_reset: %s", err);
        return s_svcs[sel];
    }
    struct ps_service_conf conf = {
        .cfg = s_cfg(sel),
        .cluster = s_cl(sel),
        .noop = (sel >> 6) & 1,
    };
    s_svcs[sel] = ps_service_new(&conf, err, sizeof err);
    FUZZ_CHECK(s_svcs[sel], "ps_service_new: %s", err);
    return s_svcs[sel];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct s_message m;
    if (size < 1)
        return 0;
    /* no file of an earlier input's CHECKPOINTs stays (a folder named like
     * one of its files would fail to be made) */
    nftw(s_private(), s_rm_below, 16, FTW_DEPTH | FTW_PHYS);
    ps_service_t *svc = s_service(data[0]);
    const uint8_t *p = data + 1, *end = data + size;
    for (int i = 0; i < S_MAX_MESSAGES && s_next_message(&p, end, &m); i++) {
        s_request(svc, &m);
        s_client(&m);
    }
    s_check_outside();
    return 0;
}

/* ------------------------------------------------------------------ seeds */

/* Append one frame to a seed. */
static void s_put_frame(struct fuzz_buf *b, const void *data, size_t len, int last)
{
    uint8_t head[3] = {(uint8_t)(last ? 1 : 0), (uint8_t)(len & 255), (uint8_t)(len >> 8)};
    fuzz_buf_add(b, head, 3);
    fuzz_buf_add(b, data, len);
}

/* Append a message: a packed h and n array frames. */
static void s_put_msg(struct fuzz_buf *b, const Header *h, const void *const *frames,
                      const size_t *lens, size_t n)
{
    uint8_t packed[1024];
    size_t len = header__get_packed_size(h);
    FUZZ_CHECK(len <= sizeof packed, "seed header too large");
    header__pack(h, packed);
    s_put_frame(b, packed, len, n == 0);
    for (size_t i = 0; i < n; i++)
        s_put_frame(b, frames[i], lens[i], i + 1 == n);
}

static void s_hdr(Header *h, int type, uint64_t req_id)
{
    header__init(h);
    h->version = SS_PROTO_VERSION;
    h->type = (MsgType)type;
    h->req_id = req_id;
}

/* Keys owned by shard of n_shards. */
static void s_keys(uint64_t *keys, size_t n, uint32_t shard, uint32_t n_shards)
{
    uint64_t raw = 1;
    for (size_t i = 0; i < n; raw++)
        if (ss_key_shard(ss_key_make(0, raw), n_shards) == shard)
            keys[i++] = ss_key_make(0, raw);
}

static void s_seed_file(const char *dir, const char *name, struct fuzz_buf *b)
{
    fuzz_seed(dir, name, b->p, b->n);
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* Start a seed of selector sel: its selector byte, then the HELLO (request
 * req_id) with the config hash the selected PS expects. */
static void s_put_hello(struct fuzz_buf *b, unsigned sel, uint64_t req_id)
{
    Header h;
    uint8_t s = (uint8_t)sel;
    fuzz_buf_add(b, &s, 1);
    s_hdr(&h, MSG_TYPE__MSG_HELLO, req_id);
    h.has_config_hash = 1;
    const struct ss_cluster_id *me = ss_cluster_me(s_cl(sel));
    h.config_hash = ss_cluster_hello_hash(s_cl(sel), me->role, me->index);
    s_put_msg(b, &h, NULL, NULL, 0);
}

/* Embedding role: LOOKUP, PUSH, PUSH_LOOKUP and the common requests. */
static void s_seeds_embedding(const char *dir, unsigned sel, const char *name)
{
    struct fuzz_buf b = {0};
    Header h;
    uint32_t tables[2] = {0, 2}, counts[2] = {2, 1}, ltables[1] = {1}, lcounts[1] = {3};
    uint32_t dim = S_DIM + ((sel & 2) ? 1 : 0);
    uint64_t keys[3], lkeys[3];
    float grads[3 * (S_DIM + 1)];
    uint32_t shard = (sel >> 5) & (sel >> 4) & 1, n_shards = (sel & 16) ? 2 : 1;
    s_keys(keys, 3, shard, n_shards);
    s_keys(lkeys, 3, shard, n_shards);
    for (size_t i = 0; i < sizeof grads / sizeof grads[0]; i++)
        grads[i] = 0.125f * (float)i - 0.5f;
    s_put_hello(&b, sel, 1);

    s_hdr(&h, MSG_TYPE__MSG_LOOKUP, 2);
    h.n_tables = h.n_counts = 2;
    h.tables = tables;
    h.counts = counts;
    const void *f1[] = {keys};
    size_t l1[] = {sizeof keys};
    s_put_msg(&b, &h, f1, l1, 1);

    s_hdr(&h, MSG_TYPE__MSG_PUSH, 3);
    h.n_tables = h.n_counts = 2;
    h.tables = tables;
    h.counts = counts;
    h.has_dim = 1;
    h.dim = dim;
    const void *f2[] = {keys, grads};
    size_t l2[] = {sizeof keys, 3 * dim * sizeof(float)};
    s_put_msg(&b, &h, f2, l2, 2);

    s_hdr(&h, MSG_TYPE__MSG_PUSH_LOOKUP, 4);
    h.n_tables = h.n_counts = 2;
    h.tables = tables;
    h.counts = counts;
    h.has_dim = 1;
    h.dim = dim;
    h.n_lookup_tables = h.n_lookup_counts = 1;
    h.lookup_tables = ltables;
    h.lookup_counts = lcounts;
    const void *f3[] = {keys, grads, lkeys};
    size_t l3[] = {sizeof keys, 3 * dim * sizeof(float), sizeof lkeys};
    s_put_msg(&b, &h, f3, l3, 3);

    s_hdr(&h, MSG_TYPE__MSG_STATS, 5);
    s_put_msg(&b, &h, NULL, NULL, 0);
    s_hdr(&h, MSG_TYPE__MSG_CHECKPOINT, 6);
    s_put_msg(&b, &h, NULL, NULL, 0);
    s_hdr(&h, MSG_TYPE__MSG_PING, 7);
    s_put_msg(&b, &h, NULL, NULL, 0);
    s_hdr(&h, MSG_TYPE__MSG_SHUTDOWN, 8);
    s_put_msg(&b, &h, NULL, NULL, 0);
    s_hdr(&h, MSG_TYPE__MSG_LOOKUP, 9);
    h.n_tables = h.n_counts = 2;
    h.tables = tables;
    h.counts = counts;
    s_put_msg(&b, &h, f1, l1, 1);
    s_seed_file(dir, name, &b);
}

/* Append a message of n arrays packed into one frame (Header.packed, at
 * ss_msg_pack_offsets(); zero padding). */
static void s_put_packed(struct fuzz_buf *b, Header *h, const void *const *frames,
                         const size_t *lens, size_t n)
{
    uint8_t buf[512] = {0};
    size_t off[SS_MSG_MAX_FRAMES];
    size_t total = ss_msg_pack_offsets(lens, n, off);
    FUZZ_CHECK(total <= sizeof buf, "packed seed frame too large");
    for (size_t i = 0; i < n; i++)
        memcpy(buf + off[i], frames[i], lens[i]);
    h->has_packed = h->packed = 1;
    const void *one[1] = {buf};
    s_put_msg(b, h, one, &total, 1);
}

/* Embedding role, the packed form: PUSH_LOOKUP, PUSH and LOOKUP each with
 * its arrays in one frame (dim S_DIM + 1 with first_order: 3 rows of 5
 * floats, padded to 64 bytes). */
static void s_seeds_packed(const char *dir, unsigned sel, const char *name)
{
    struct fuzz_buf b = {0};
    Header h;
    uint32_t tables[2] = {0, 2}, counts[2] = {2, 1}, ltables[1] = {1}, lcounts[1] = {3};
    uint32_t dim = S_DIM + ((sel & 2) ? 1 : 0);
    uint64_t keys[3], lkeys[3];
    float grads[3 * (S_DIM + 1)];
    s_keys(keys, 3, 0, 1);
    s_keys(lkeys, 3, 0, 1);
    for (size_t i = 0; i < sizeof grads / sizeof grads[0]; i++)
        grads[i] = 0.125f * (float)i - 0.5f;
    s_put_hello(&b, sel, 1);
    s_hdr(&h, MSG_TYPE__MSG_PUSH_LOOKUP, 2);
    h.n_tables = h.n_counts = 2;
    h.tables = tables;
    h.counts = counts;
    h.has_dim = 1;
    h.dim = dim;
    h.n_lookup_tables = h.n_lookup_counts = 1;
    h.lookup_tables = ltables;
    h.lookup_counts = lcounts;
    const void *f3[] = {keys, grads, lkeys};
    size_t l3[] = {sizeof keys, 3 * dim * sizeof(float), sizeof lkeys};
    s_put_packed(&b, &h, f3, l3, 3);
    s_hdr(&h, MSG_TYPE__MSG_PUSH, 3);
    h.n_tables = h.n_counts = 2;
    h.tables = tables;
    h.counts = counts;
    h.has_dim = 1;
    h.dim = dim;
    s_put_packed(&b, &h, f3, l3, 2);
    s_hdr(&h, MSG_TYPE__MSG_LOOKUP, 4);
    h.n_tables = h.n_counts = 2;
    h.tables = tables;
    h.counts = counts;
    s_put_packed(&b, &h, f3, l3, 1);
    s_seed_file(dir, name, &b);
}

/* Sync role: INIT, ELASTIC, PULL, STATS, CHECKPOINT. */
static void s_seeds_sync(const char *dir)
{
    struct fuzz_buf b = {0};
    Header h;
    float x[8] = {0.5f, -1, 2, 0.25f, 0, 1, -0.5f, 3};
    uint8_t s = 1;
    fuzz_buf_add(&b, &s, 1);

    s_hdr(&h, MSG_TYPE__MSG_INIT, 1);
    h.has_offset = h.has_length = 1;
    h.offset = 16;
    h.length = 8;
    const void *f[] = {x};
    size_t l[] = {sizeof x};
    s_put_msg(&b, &h, f, l, 1);

    s_hdr(&h, MSG_TYPE__MSG_ELASTIC, 2);
    h.has_offset = h.has_length = h.has_alpha = 1;
    h.offset = 18;
    h.length = 4;
    h.alpha = 0.5f;
    size_t l4[] = {4 * sizeof(float)};
    s_put_msg(&b, &h, f, l4, 1);

    s_hdr(&h, MSG_TYPE__MSG_PULL, 3);
    h.has_offset = h.has_length = 1;
    h.offset = 16;
    h.length = 8;
    s_put_msg(&b, &h, NULL, NULL, 0);

    s_hdr(&h, MSG_TYPE__MSG_STATS, 4);
    s_put_msg(&b, &h, NULL, NULL, 0);
    s_hdr(&h, MSG_TYPE__MSG_CHECKPOINT, 5);
    s_put_msg(&b, &h, NULL, NULL, 0);
    s_seed_file(dir, "sync", &b);
}

/* Malformed shapes: a bad header, too many frames, a short keys frame. */
static void s_seeds_bad(const char *dir)
{
    struct fuzz_buf b = {0};
    Header h;
    uint32_t tables[1] = {0}, counts[1] = {2};
    uint64_t keys[1] = {7};
    uint8_t s = 0;
    fuzz_buf_add(&b, &s, 1);
    s_put_frame(&b, "\xff\xff\xff", 3, 1);
    s_hdr(&h, MSG_TYPE__MSG_PING, 1);
    const void *f[] = {keys, keys, keys, keys, keys};
    size_t l[] = {8, 8, 8, 8, 8};
    s_put_msg(&b, &h, f, l, 5);
    s_hdr(&h, MSG_TYPE__MSG_LOOKUP, 2);
    h.n_tables = h.n_counts = 1;
    h.tables = tables;
    h.counts = counts;
    s_put_msg(&b, &h, f, l, 1);
    s_hdr(&h, MSG_TYPE__MSG_INIT, 3);
    s_put_msg(&b, &h, NULL, NULL, 0);
    s_seed_file(dir, "malformed", &b);
}

/* A request with text (a folder) and a save id (0: none). */
static void s_put_text(struct fuzz_buf *b, int type, uint64_t req_id, const char *text,
                       uint64_t save_id)
{
    Header h;
    s_hdr(&h, type, req_id);
    h.text = (char *)text;
    h.has_save_id = save_id != 0;
    h.save_id = save_id;
    s_put_msg(b, &h, NULL, NULL, 0);
}

/* CHECKPOINT_DONE: two saves (relative folders, and one in the checkpoint
 * folder), the later committed, which drops this PS's file of the earlier;
 * again (nothing left); then the refused names: no folder, not a save's, a
 * '..' component, an absolute folder outside, a bad ID. */
static void s_seeds_ckpt_done(const char *dir, unsigned sel, const char *name)
{
    struct fuzz_buf b = {0};
    uint64_t id = 1;
    s_put_hello(&b, sel, id++);
    s_put_text(&b, MSG_TYPE__MSG_CHECKPOINT, id++, "jobckpt.new-0000000000000001", 1);
    s_put_text(&b, MSG_TYPE__MSG_CHECKPOINT, id++, "jobckpt.new-0000000000000002", 2);
    s_put_text(&b, MSG_TYPE__MSG_CHECKPOINT, id++, "ckpt/model.new-00000000000000c1", 3);
    s_put_text(&b, MSG_TYPE__MSG_CHECKPOINT_DONE, id++, "jobckpt.new-0000000000000002", 0);
    s_put_text(&b, MSG_TYPE__MSG_CHECKPOINT_DONE, id++, "jobckpt.new-0000000000000002", 0);
    s_put_text(&b, MSG_TYPE__MSG_CHECKPOINT_DONE, id++, "ckpt/model.new-00000000000000c2", 0);
    s_put_text(&b, MSG_TYPE__MSG_CHECKPOINT_DONE, id++, NULL, 0);
    s_put_text(&b, MSG_TYPE__MSG_CHECKPOINT_DONE, id++, "jobckpt", 0);
    s_put_text(&b, MSG_TYPE__MSG_CHECKPOINT_DONE, id++, "../box.new-0000000000000001", 0);
    s_put_text(&b, MSG_TYPE__MSG_CHECKPOINT_DONE, id++, "/box.new-0000000000000001", 0);
    s_put_text(&b, MSG_TYPE__MSG_CHECKPOINT_DONE, id++, "jobckpt.new-000000000000000G", 0);
    s_put_text(&b, MSG_TYPE__MSG_CHECKPOINT_DONE, id++, "x/../jobckpt.new-0000000000000001", 0);
    s_seed_file(dir, name, &b);
}

/* RESTORE: a save (a committed folder that kept its .new-ID name), restored
 * by its base name and by its own; then the refused ones: no folder, a '..'
 * component, an absolute folder outside, no such folder, another save. */
static void s_seeds_restore(const char *dir, unsigned sel, const char *name)
{
    struct fuzz_buf b = {0};
    uint64_t id = 1;
    s_put_hello(&b, sel, id++);
    s_put_text(&b, MSG_TYPE__MSG_CHECKPOINT, id++, "model.new-0000000000000005", 5);
    s_put_text(&b, MSG_TYPE__MSG_RESTORE, id++, "model", 5);
    s_put_text(&b, MSG_TYPE__MSG_RESTORE, id++, "model.new-0000000000000005", 5);
    s_put_text(&b, MSG_TYPE__MSG_RESTORE, id++, "model.new-0000000000000005", 0);
    s_put_text(&b, MSG_TYPE__MSG_RESTORE, id++, NULL, 5);
    s_put_text(&b, MSG_TYPE__MSG_RESTORE, id++, "../box", 5);
    s_put_text(&b, MSG_TYPE__MSG_RESTORE, id++, "/box.new-0000000000000001", 5);
    s_put_text(&b, MSG_TYPE__MSG_RESTORE, id++, "nosuch", 5);
    s_put_text(&b, MSG_TYPE__MSG_RESTORE, id++, "model", 6);
    s_seed_file(dir, name, &b);
}

static void s_write_seeds(const char *dir)
{
    s_seeds_embedding(dir, 0, "embedding");
    s_seeds_embedding(dir, 2 | 4, "embedding-fo-adagrad");
    s_seeds_embedding(dir, 16 | 32, "embedding-2-shards-sgd");
    s_seeds_packed(dir, 0, "packed");
    s_seeds_packed(dir, 2 | 4, "packed-fo-adagrad");
    s_seeds_sync(dir);
    s_seeds_bad(dir);
    s_seeds_ckpt_done(dir, 0, "checkpoint-done");
    s_seeds_ckpt_done(dir, 1, "checkpoint-done-sync");
    s_seeds_ckpt_done(dir, 16 | 32, "checkpoint-done-2-shards");
    s_seeds_restore(dir, 0, "restore");
    s_seeds_restore(dir, 1, "restore-sync");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    fuzz_seed_mode(s_write_seeds);
    s_sockets();
    return 0;
}
