/* test_ss_msg.c - the wire codec: every message type survives a round trip
 * over a real DEALER -> ROUTER pair with its arrays intact, and every
 * malformed shape is rejected with a message naming the problem. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <string.h>
#include <zmq.h>

#include "ss_err.h"
#include "ss_cluster.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_msg.h"

struct pair {
    void *ctx, *client, *server;
};

static int s_setup(void **state)
{
    static struct pair p;
    static int n;
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://msg-%d", n++);
    p.ctx = zmq_ctx_new();
    p.server = zmq_socket(p.ctx, ZMQ_ROUTER);
    p.client = zmq_socket(p.ctx, ZMQ_DEALER);
    assert_int_equal(zmq_bind(p.server, ep), 0);
    assert_int_equal(zmq_connect(p.client, ep), 0);
    *state = &p;
    return 0;
}

static int s_teardown(void **state)
{
    struct pair *p = *state;
    int linger = 0;
    zmq_setsockopt(p->client, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(p->server, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(p->client);
    zmq_close(p->server);
    zmq_ctx_term(p->ctx);
    return 0;
}

/* A request header of type t with plausible fields for its frames. */
static void s_request(Header *h, int type, uint32_t *tables, uint32_t *counts)
{
    header__init(h);
    h->version = SS_PROTO_VERSION;
    h->type = (MsgType)type;
    h->req_id = 1000 + (uint64_t)type;
    if (type == MSG_TYPE__MSG_LOOKUP || type == MSG_TYPE__MSG_PUSH) {
        h->n_tables = h->n_counts = 2;
        h->tables = tables;
        h->counts = counts;
        h->has_dim = type == MSG_TYPE__MSG_PUSH;
        h->dim = 3;
    }
    if (type >= MSG_TYPE__MSG_INIT) {
        h->has_offset = h->has_length = 1;
        h->offset = 7;
        h->length = 5;
        h->has_alpha = type == MSG_TYPE__MSG_ELASTIC;
        h->alpha = 0.25f;
    }
    if (type == MSG_TYPE__MSG_HELLO) {
        h->has_config_hash = 1;
        h->config_hash = 0x123456789abcdef0ull;
    }
}

static void test_round_trip_every_type(void **state)
{
    struct pair *p = *state;
    const int types[] = {MSG_TYPE__MSG_HELLO,  MSG_TYPE__MSG_PING,    MSG_TYPE__MSG_STATS,
                         MSG_TYPE__MSG_CHECKPOINT, MSG_TYPE__MSG_SHUTDOWN, MSG_TYPE__MSG_LOOKUP,
                         MSG_TYPE__MSG_PUSH,   MSG_TYPE__MSG_INIT,    MSG_TYPE__MSG_ELASTIC,
                         MSG_TYPE__MSG_PULL,   MSG_TYPE__MSG_AR_CHUNK,
                         MSG_TYPE__MSG_CHECKPOINT_DONE};
    uint32_t tables[2] = {3, 9}, counts[2] = {2, 1};
    uint64_t keys[3] = {1, 0xffffffffffffffffull, 42};
    float floats[9] = {1.5f, -2, 3, 4, 5, 6, 7, 8, 9};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        Header h;
        struct ss_frame f[2] = {{keys, 0}, {floats, 0}};
        size_t nf = 0;
        s_request(&h, types[i], tables, counts);
        if (types[i] == MSG_TYPE__MSG_LOOKUP || types[i] == MSG_TYPE__MSG_PUSH) {
            f[0].len = sizeof keys;
            f[1].len = 9 * sizeof(float);
            nf = types[i] == MSG_TYPE__MSG_PUSH ? 2 : 1;
        } else if (h.has_length && types[i] != MSG_TYPE__MSG_PULL) {
            f[0] = (struct ss_frame){floats, 5 * sizeof(float)};
            nf = 1;
        }
        assert_int_equal(ss_msg_send(p->client, NULL, 0, &h, f, nf), 0);
        uint8_t id[SS_MSG_MAX_ID];
        size_t id_len = 0;
        struct ss_msg m;
        char err[256] = "";
        assert_int_equal(ss_msg_recv(p->server, 0, id, &id_len, &m, err, sizeof err), 0);
        assert_int_equal(ss_msg_check(&m, 0, err, sizeof err), 0);
        assert_int_equal(m.hdr->type, types[i]);
        assert_int_equal(m.hdr->req_id, h.req_id);
        assert_int_equal(m.n_frames, nf);
        for (size_t k = 0; k < nf; k++) {
            assert_int_equal(zmq_msg_size(&m.frames[k]), f[k].len);
            assert_memory_equal(zmq_msg_data(&m.frames[k]), f[k].data, f[k].len);
            assert_int_equal((uintptr_t)zmq_msg_data(&m.frames[k]) % 8, 0);  /* aligned */
        }
        if (types[i] == MSG_TYPE__MSG_HELLO)
            assert_true(m.hdr->config_hash == 0x123456789abcdef0ull);
        if (types[i] == MSG_TYPE__MSG_ELASTIC)
            assert_true(m.hdr->alpha == 0.25f);
        /* an error reply goes back to the client and checks as a reply */
        assert_int_equal(ss_msg_send_error(p->server, id, id_len, types[i], h.req_id, SS_E_RANGE,
                                           "nope"), 0);
        ss_msg_close(&m);
        assert_int_equal(ss_msg_recv(p->client, 0, NULL, NULL, &m, err, sizeof err), 0);
        assert_int_equal(ss_msg_check(&m, 1, err, sizeof err), 0);
        assert_int_equal(m.hdr->status, SS_E_RANGE);
        assert_string_equal(m.hdr->error, "nope");
        ss_msg_close(&m);
    }
}

/* Send parts raw and return ss_msg_recv + ss_msg_check's verdict and text. */
static int s_raw(struct pair *p, const void *const *parts, const size_t *lens, size_t n,
                 char *err, size_t err_len)
{
    for (size_t i = 0; i < n; i++)
        zmq_send(p->client, parts[i], lens[i], i + 1 < n ? ZMQ_SNDMORE : 0);
    uint8_t id[SS_MSG_MAX_ID];
    size_t id_len;
    struct ss_msg m;
    int rc = ss_msg_recv(p->server, 0, id, &id_len, &m, err, err_len);
    if (rc == 0) {
        rc = ss_msg_check(&m, 0, err, err_len);
        ss_msg_close(&m);
    }
    return rc;
}

static void test_malformed_rejected(void **state)
{
    struct pair *p = *state;
    uint32_t tables[2] = {0, 1}, counts[2] = {1, 1}, big[2] = {2000000000u, 1};
    uint64_t keys[2] = {5, 6};
    float g[8] = {0};
    uint8_t hb[256];
    char err[256];
    struct {
        const char *what;   /* the case */
        const char *needle; /* expected in the error text */
        int want;           /* expected code */
    } cases[] = {
        {"not protobuf", "not a valid protobuf", SS_E_PROTO},
        {"missing keys frame", "0 array frames, expected 1", SS_E_PROTO},
        {"keys size mismatch", "frame 1 has 12 bytes", SS_E_PROTO},
        {"unknown type", "unknown message type 77", SS_E_PROTO},
        {"wrong version", "protocol version 9", SS_E_VERSION},
        {"tables/counts differ", "1 tables but 2 counts", SS_E_PROTO},
        {"push without dim", "no row dim", SS_E_PROTO},
        {"grads size mismatch", "frame 2 has 4 bytes", SS_E_PROTO},
        {"too many frames", "more than 4 array frames", SS_E_PROTO},
        {"elastic without alpha", "no alpha", SS_E_PROTO},
        {"count too large", "too large", SS_E_PROTO},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Header h = HEADER__INIT;
        const void *parts[7] = {hb, keys, g, g, g, g, g};
        size_t lens[7] = {0, 16, 8 * 4, 4, 4, 4, 4}, n = 2;
        h.version = SS_PROTO_VERSION;
        h.type = MSG_TYPE__MSG_LOOKUP;
        h.n_tables = h.n_counts = 2;
        h.tables = tables;
        h.counts = counts;
        switch (i) {
        case 0: memcpy(hb, "\xff\xff\xff\xff", 4); lens[0] = 4; n = 1; break;
        case 1: n = 1; break;
        case 2: lens[1] = 12; break;
        case 3: h.type = (MsgType)77; n = 1; break;
        case 4: h.version = 9; break;
        case 5: h.n_tables = 1; break;
        case 6: h.type = MSG_TYPE__MSG_PUSH; n = 3; break;
        case 7: h.type = MSG_TYPE__MSG_PUSH; h.has_dim = 1; h.dim = 4; lens[2] = 4; n = 3; break;
        case 8: n = 7; break;
        case 9: h.type = MSG_TYPE__MSG_ELASTIC; h.has_offset = h.has_length = 1; h.length = 2;
            lens[1] = 8; break;
        case 10: h.counts = big; break;
        }
        if (i != 0)
            lens[0] = header__pack(&h, hb);
        err[0] = 0;
        int rc = s_raw(p, parts, lens, n, err, sizeof err);
        if (rc != cases[i].want || !strstr(err, cases[i].needle))
            fail_msg("%s: got %s '%s', want %s containing '%s'", cases[i].what, ss_errname(rc),
                     err, ss_errname(cases[i].want), cases[i].needle);
    }
}

/* Which shard owns a key is part of the contract between trainers, PSs and
 * checkpoints: the power-of-two fast path gives exactly the modulo of the
 * mixed key, for every shard count, and keys spread evenly. */
static void test_key_shard(void **state)
{
    (void)state;
    uint64_t st = 11;
    uint32_t count[8] = {0};
    for (int i = 0; i < 200000; i++) {
        uint64_t k = ss_rand_next(&st);
        for (uint32_t n = 1; n <= 8; n++)
            assert_int_equal(ss_key_shard(k, n),
                             (uint32_t)(ss_mix64(k ^ 0x5bd1e9955bd1e995ull) % n));
        count[ss_key_shard(k, 8)]++;
    }
    for (int s = 0; s < 8; s++)  /* 25000 each, give or take 3% */
        assert_true(count[s] > 24250 && count[s] < 25750);
}

/* issue 22 item 3: a finite but huge value is refused like a NaN. The bound
 * is inclusive, the sign does not matter, and the first offender's index is
 * found wherever it sits (the vectorized blocks of 16 and the tail). */
static void test_floats_beyond(void **state)
{
    (void)state;
    float v[40];
    for (int i = 0; i < 40; i++)
        v[i] = (float)(i - 20) * 0.5f;
    assert_int_equal(ss_floats_first_beyond(v, 40, 10.0f), 40);    /* |v| <= 10 */
    assert_int_equal(ss_floats_first_beyond(v, 40, 9.75f), 0);     /* v[0] = -10 */
    assert_int_equal(ss_floats_first_nonfinite(v, 40), 40);
    for (int at = 0; at < 40; at++) {
        float keep = v[at];
        v[at] = 1e30f;
        assert_int_equal(ss_floats_first_beyond(v, 40, 1e8f), at);
        assert_int_equal(ss_floats_first_nonfinite(v, 40), 40);    /* finite */
        v[at] = -3.4e38f;
        assert_int_equal(ss_floats_first_beyond(v, 40, 1e8f), at);
        v[at] = NAN;
        assert_int_equal(ss_floats_first_beyond(v, 40, FLT_MAX), at);
        v[at] = -INFINITY;
        assert_int_equal(ss_floats_first_beyond(v, 40, FLT_MAX), at);
        v[at] = keep;
    }
    v[3] = FLT_MAX;
    assert_int_equal(ss_floats_first_beyond(v, 40, FLT_MAX), 40);
    assert_int_equal(ss_floats_first_beyond(v, 0, 1.0f), 0);
}

int main(void)
{
    ss_log_init("test", SS_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip_every_type, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_malformed_rejected, s_setup, s_teardown),
        cmocka_unit_test(test_key_shard),
        cmocka_unit_test(test_floats_beyond),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
