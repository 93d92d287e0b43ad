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
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "ss_err.h"
#include "ss_cluster.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_msg.h"
#include "ss_msg_types.h"

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

/* A request header of row t's type with plausible fields for its frames:
 * two key groups (3 keys) of rows of dim 3, one lookup group (2 keys),
 * a range of 5 floats at 7. */
static void s_request(Header *h, const struct ss_msg_type *t, uint32_t *tables,
                      uint32_t *counts)
{
    static uint32_t lk_tables[1] = {4}, lk_counts[1] = {2};
    header__init(h);
    h->version = SS_PROTO_VERSION;
    h->type = (MsgType)t->type;
    h->req_id = 1000 + (uint64_t)t->type;
    if (t->req == SS_MSG_F_KEYS || t->req == SS_MSG_F_PUSH || t->req == SS_MSG_F_PUSH_KEYS) {
        h->n_tables = h->n_counts = 2;
        h->tables = tables;
        h->counts = counts;
        h->has_dim = t->req != SS_MSG_F_KEYS;
        h->dim = 3;
    }
    if (t->req == SS_MSG_F_PUSH_KEYS) {
        h->n_lookup_tables = h->n_lookup_counts = 1;
        h->lookup_tables = lk_tables;
        h->lookup_counts = lk_counts;
    }
    if (t->req == SS_MSG_F_RANGE || t->req == SS_MSG_F_RANGE_ALPHA ||
        t->req == SS_MSG_F_RANGE_ONLY) {
        h->has_offset = h->has_length = 1;
        h->offset = 7;
        h->length = 5;
        h->has_alpha = t->req == SS_MSG_F_RANGE_ALPHA;
        h->alpha = 0.25f;
    }
    if (t->type == MSG_TYPE__MSG_HELLO) {
        h->has_config_hash = 1;
        h->config_hash = 0x123456789abcdef0ull;
    }
}

/* The array frames of s_request()'s message for row t; returns how many. */
static size_t s_frames(const struct ss_msg_type *t, struct ss_frame *f, const uint64_t *keys,
                       const float *floats)
{
    switch (t->req) {
    case SS_MSG_F_KEYS:
        f[0] = (struct ss_frame){keys, 3 * sizeof *keys};
        return 1;
    case SS_MSG_F_PUSH: case SS_MSG_F_PUSH_KEYS:
        f[0] = (struct ss_frame){keys, 3 * sizeof *keys};
        f[1] = (struct ss_frame){floats, 9 * sizeof(float)};
        f[2] = (struct ss_frame){keys + 1, 2 * sizeof *keys};
        return t->req == SS_MSG_F_PUSH ? 2 : 3;
    case SS_MSG_F_RANGE: case SS_MSG_F_RANGE_ALPHA:
        f[0] = (struct ss_frame){floats, 5 * sizeof(float)};
        return 1;
    default:
        return 0;
    }
}

/* Every MsgType value of proto/shadow.proto but MSG_NONE has its row in
 * ss_msg_types.h, under its name, and every row is a MsgType value. */
static void test_types_table_matches_proto(void **state)
{
    (void)state;
    const ProtobufCEnumDescriptor *d = &msg_type__descriptor;
    char want[64];
    for (unsigned i = 0; i < d->n_values; i++) {
        const ProtobufCEnumValue *v = &d->values[i];
        if (v->value == MSG_TYPE__MSG_NONE)
            continue;
        const struct ss_msg_type *t = ss_msg_type_find(v->value);
        if (!t)
            fail_msg("MsgType %s = %d has no row in common/ss_msg_types.h", v->name, v->value);
        snprintf(want, sizeof want, "MSG_%s", t->name);
        assert_string_equal(v->name, want);
        assert_string_equal(ss_msg_type_name(v->value), t->name);
    }
    for (size_t i = 0; i < SS_MSG_N_TYPES; i++) {
        const struct ss_msg_type *t = ss_msg_type_at(i);
        assert_int_equal(t->row, i);
        if (!protobuf_c_enum_descriptor_get_value(d, t->type))
            fail_msg("row %s (%d) of common/ss_msg_types.h is no MsgType value", t->name,
                     t->type);
        assert_ptr_equal(ss_msg_type_find(t->type), t);
        /* what only an admin may send changes something */
        if (t->admin)
            assert_false(t->read_only);
    }
    assert_int_equal(d->n_values, SS_MSG_N_TYPES + 1);  /* and MSG_NONE */
    assert_null(ss_msg_type_find(MSG_TYPE__MSG_NONE));
    assert_null(ss_msg_type_find(9));
    assert_string_equal(ss_msg_type_name(9), "UNKNOWN");
}

static void test_round_trip_every_type(void **state)
{
    struct pair *p = *state;
    uint32_t tables[2] = {3, 9}, counts[2] = {2, 1};
    uint64_t keys[3] = {1, 0xffffffffffffffffull, 42};
    float floats[9] = {1.5f, -2, 3, 4, 5, 6, 7, 8, 9};
    for (size_t i = 0; i < SS_MSG_N_TYPES; i++) {
        const struct ss_msg_type *t = ss_msg_type_at(i);
        Header h;
        struct ss_frame f[3];
        s_request(&h, t, tables, counts);
        size_t nf = s_frames(t, f, keys, floats);
        assert_int_equal(ss_msg_send(p->client, NULL, 0, &h, f, nf), 0);
        uint8_t id[SS_MSG_MAX_ID];
        size_t id_len = 0;
        struct ss_msg m;
        char err[256] = "";
        assert_int_equal(ss_msg_recv(p->server, 0, id, &id_len, &m, err, sizeof err), 0);
        if (ss_msg_check(&m, 0, err, sizeof err) != 0)
            fail_msg("%s: %s", t->name, err);
        assert_int_equal(m.hdr->type, t->type);
        assert_int_equal(m.hdr->req_id, h.req_id);
        assert_int_equal(m.n_frames, nf);
        for (size_t k = 0; k < nf; k++) {
            assert_int_equal(zmq_msg_size(&m.frames[k]), f[k].len);
            assert_memory_equal(zmq_msg_data(&m.frames[k]), f[k].data, f[k].len);
            assert_int_equal((uintptr_t)zmq_msg_data(&m.frames[k]) % 8, 0);  /* aligned */
        }
        if (t->type == MSG_TYPE__MSG_HELLO)
            assert_true(m.hdr->config_hash == 0x123456789abcdef0ull);
        if (t->type == MSG_TYPE__MSG_ELASTIC)
            assert_true(m.hdr->alpha == 0.25f);
        if (t->type == MSG_TYPE__MSG_PUSH_LOOKUP)
            assert_int_equal(ss_msg_n_lookup_keys(m.hdr), 2);
        /* an error reply goes back to the client and checks as a reply */
        assert_int_equal(ss_msg_send_error(p->server, id, id_len, t->type, h.req_id, SS_E_RANGE,
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

/* The packed layout: a push's floats first, each array at a multiple of 8
 * (36 bytes of floats are padded to 40), one array alone is itself. */
static void test_pack_offsets(void **state)
{
    (void)state;
    size_t len[3] = {24, 36, 16}, off[3];
    assert_int_equal(ss_msg_pack_offsets(len, 3, off), 80);
    assert_int_equal(off[1], 0);
    assert_int_equal(off[0], 40);
    assert_int_equal(off[2], 64);
    assert_int_equal(ss_msg_pack_offsets(len, 2, off), 64);
    assert_int_equal(off[1], 0);
    assert_int_equal(off[0], 40);
    assert_int_equal(ss_msg_pack_offsets(len + 1, 1, off), 36);
    assert_int_equal(off[0], 0);
    assert_int_equal(ss_msg_pack_offsets(len, 0, off), 0);
}

/* Every type sent packed arrives as one frame and checks into the same
 * frames as the unpacked form: same bytes, aligned; a second check keeps
 * them. */
static void test_packed_round_trip_every_type(void **state)
{
    struct pair *p = *state;
    uint32_t tables[2] = {3, 9}, counts[2] = {2, 1};
    uint64_t keys[3] = {1, 0xffffffffffffffffull, 42};
    float floats[9] = {1.5f, -2, 3, 4, 5, 6, 7, 8, 9};
    for (size_t i = 0; i < SS_MSG_N_TYPES; i++) {
        const struct ss_msg_type *t = ss_msg_type_at(i);
        Header h;
        struct ss_frame f[3];
        s_request(&h, t, tables, counts);
        size_t nf = s_frames(t, f, keys, floats);
        assert_int_equal(ss_msg_send_packed(p->client, NULL, 0, &h, f, nf), 0);
        uint8_t id[SS_MSG_MAX_ID];
        size_t id_len = 0;
        struct ss_msg m;
        char err[256] = "";
        assert_int_equal(ss_msg_recv(p->server, 0, id, &id_len, &m, err, sizeof err), 0);
        assert_true(m.hdr->has_packed && m.hdr->packed);
        assert_int_equal(m.n_frames, nf > 0);  /* one frame on the wire */
        for (int pass = 0; pass < 2; pass++) {
            if (ss_msg_check(&m, 0, err, sizeof err) != 0)
                fail_msg("%s packed: %s", t->name, err);
            assert_int_equal(m.n_frames, nf);
            for (size_t k = 0; k < nf; k++) {
                assert_int_equal(zmq_msg_size(&m.frames[k]), f[k].len);
                assert_memory_equal(zmq_msg_data(&m.frames[k]), f[k].data, f[k].len);
                assert_int_equal((uintptr_t)zmq_msg_data(&m.frames[k]) % 8, 0);
            }
        }
        ss_msg_close(&m);
        assert_int_equal(m.has_packed, 0);
    }
}

/* A checked packed message may be moved as a struct (the ring keeps a
 * newer round's piece by copying it: tr_allreduce s_handle): its views must
 * not point into the struct itself. A small frame (a 5-float range, 24
 * bytes of keys) is held inside its zmq_msg_t by ZeroMQ; once the original
 * struct is overwritten the copy's frames must still read the arrays. */
static void test_packed_checked_then_moved(void **state)
{
    struct pair *p = *state;
    uint32_t tables[2] = {3, 9}, counts[2] = {2, 1};
    uint64_t keys[3] = {1, 0xffffffffffffffffull, 42};
    float floats[9] = {1.5f, -2, 3, 4, 5, 6, 7, 8, 9};
    for (size_t i = 0; i < SS_MSG_N_TYPES; i++) {
        const struct ss_msg_type *t = ss_msg_type_at(i);
        Header h;
        struct ss_frame f[3];
        s_request(&h, t, tables, counts);
        size_t nf = s_frames(t, f, keys, floats);
        if (nf == 0)
            continue;
        assert_int_equal(ss_msg_send_packed(p->client, NULL, 0, &h, f, nf), 0);
        uint8_t id[SS_MSG_MAX_ID];
        size_t id_len = 0;
        struct ss_msg *m = malloc(sizeof *m), *moved = malloc(sizeof *moved);
        char err[256] = "";
        assert_non_null(m);
        assert_non_null(moved);
        assert_int_equal(ss_msg_recv(p->server, 0, id, &id_len, m, err, sizeof err), 0);
        if (ss_msg_check(m, 0, err, sizeof err) != 0)
            fail_msg("%s packed: %s", t->name, err);
        *moved = *m;
        memset(m, 0x5a, sizeof *m);  /* what a reused stack slot would hold */
        assert_int_equal(ss_msg_check(moved, 0, err, sizeof err), 0);
        for (size_t k = 0; k < nf; k++) {
            assert_int_equal(zmq_msg_size(&moved->frames[k]), f[k].len);
            if (memcmp(zmq_msg_data(&moved->frames[k]), f[k].data, f[k].len) != 0)
                fail_msg("%s packed, moved after its check: frame %zu reads other bytes",
                         t->name, k);
        }
        ss_msg_close(moved);
        free(moved);
        free(m);
    }
}

/* A packed frame whose length is not the header's (short, long, the arrays
 * without their padding), a packed message of two frames, or one frame for
 * a type that carries none, is refused naming the problem; nothing is read
 * past the frame (ASan). */
static void test_packed_malformed_rejected(void **state)
{
    struct pair *p = *state;
    uint32_t tables[1] = {0}, counts[1] = {3}, lk_tables[1] = {1}, lk_counts[1] = {2};
    uint8_t body[128] = {0}, hb[256];
    char err[256];
    struct {
        const char *what;
        size_t len;          /* the packed frame's bytes */
        size_t n;            /* parts: header + frames */
        int type;
        const char *needle;
    } cases[] = {
        {"short", 79, 2, MSG_TYPE__MSG_PUSH_LOOKUP, "packed frame has 79 bytes, header implies 80"},
        {"long", 81, 2, MSG_TYPE__MSG_PUSH_LOOKUP, "packed frame has 81 bytes, header implies 80"},
        {"unpadded", 76, 2, MSG_TYPE__MSG_PUSH_LOOKUP, "packed frame has 76 bytes"},
        {"empty", 0, 2, MSG_TYPE__MSG_PUSH_LOOKUP, "packed frame has 0 bytes"},
        {"push short", 60, 2, MSG_TYPE__MSG_PUSH, "packed frame has 60 bytes, header implies 64"},
        {"two frames", 80, 3, MSG_TYPE__MSG_PUSH_LOOKUP, "packed message has 2 array frames"},
        {"no frame", 0, 1, MSG_TYPE__MSG_PUSH_LOOKUP, "packed message has 0 array frames"},
        {"frame for none", 8, 2, MSG_TYPE__MSG_PING, "packed message has 1 array frames, expected 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Header h = HEADER__INIT;
        h.version = SS_PROTO_VERSION;
        h.type = (MsgType)cases[i].type;
        h.has_packed = h.packed = 1;
        if (h.type != MSG_TYPE__MSG_PING) {
            h.n_tables = h.n_counts = 1;
            h.tables = tables;
            h.counts = counts;  /* 3 keys of dim 3: 36 bytes of floats, 24 of keys */
            h.has_dim = 1;
            h.dim = 3;
        }
        if (h.type == MSG_TYPE__MSG_PUSH_LOOKUP) {
            h.n_lookup_tables = h.n_lookup_counts = 1;
            h.lookup_tables = lk_tables;
            h.lookup_counts = lk_counts;  /* 16 bytes of keys */
        }
        /* the frame is its own allocation of exactly len bytes: ASan sees a
         * read past it */
        uint8_t *frame = malloc(cases[i].len ? cases[i].len : 1);
        memcpy(frame, body, cases[i].len);
        const void *parts[3] = {hb, frame, frame};
        size_t lens[3] = {header__pack(&h, hb), cases[i].len, cases[i].len};
        err[0] = 0;
        int rc = s_raw(p, parts, lens, cases[i].n, err, sizeof err);
        free(frame);
        if (rc != SS_E_PROTO || !strstr(err, cases[i].needle))
            fail_msg("%s: got %s '%s', want SS_E_PROTO containing '%s'", cases[i].what,
                     ss_errname(rc), err, cases[i].needle);
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
        cmocka_unit_test(test_types_table_matches_proto),
        cmocka_unit_test_setup_teardown(test_round_trip_every_type, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_malformed_rejected, s_setup, s_teardown),
        cmocka_unit_test(test_pack_offsets),
        cmocka_unit_test_setup_teardown(test_packed_round_trip_every_type, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_packed_malformed_rejected, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_packed_checked_then_moved, s_setup, s_teardown),
        cmocka_unit_test(test_key_shard),
        cmocka_unit_test(test_floats_beyond),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
