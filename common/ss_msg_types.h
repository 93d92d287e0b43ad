/* ss_msg_types.h - the one table of message types: what each carries, who
 * serves it, who may send it.
 *
 * proto/shadow.proto keeps the wire definitions (the MsgType enum and the
 * Header fields, from which protobuf-c generates the codec); this table says
 * everything else about a type, once, and is read by:
 *   - common/ss_msg.c: the type's name and the array frames its request and
 *     its reply must carry (ss_msg_check());
 *   - server/ps_handlers.c: the PS's route table (which role serves it, its
 *     handler, whether it needs an admin key and token), and the latency
 *     histogram it is timed in;
 *   - trainer/tr_admin.c: the trainer admin endpoint's dispatch (its
 *     handler; only read-only types may have one);
 *   - test/unit/test_ss_msg.c: every MsgType value but MSG_NONE has a row
 *     and every row a MsgType value.
 * Adding a message type: a MsgType value (and any new Header field) in the
 * proto, one row here, a handler in each server the row names
 * (docs/howto-message.md). */
#ifndef SS_MSG_TYPES_H
#define SS_MSG_TYPES_H

#include <stddef.h>

/* The array frames after a header (ss_msg.h), by shape. */
enum ss_msg_shape {
    SS_MSG_F_NONE = 0,     /* no frame */
    SS_MSG_F_KEYS,         /* keys (tables/counts groups): uint64 keys */
    SS_MSG_F_PUSH,         /* keys, then dim floats per key (header dim) */
    SS_MSG_F_PUSH_KEYS,    /* PUSH's two frames, then keys of lookup_tables/lookup_counts */
    SS_MSG_F_RANGE,        /* offset and length in the header; length floats */
    SS_MSG_F_RANGE_ALPHA,  /* SS_MSG_F_RANGE with alpha in the header */
    SS_MSG_F_RANGE_ONLY,   /* offset and length in the header; no frame */
    SS_MSG_F_ROWS,         /* reply: length rows of dim floats (header length and dim) */
    SS_MSG_F_FLOATS,       /* reply: length floats (header length) */
    SS_MSG_F_SAME,         /* reply: the frames of the request shape */
};

/* Which parameter server serves a type. */
enum ss_msg_ps {
    SS_MSG_PS_NONE = 0,    /* no PS (answered "not served by a PS") */
    SS_MSG_PS_BOTH,        /* embedding and sync PSs */
    SS_MSG_PS_EMBED,       /* embedding PSs only */
    SS_MSG_PS_SYNC,        /* sync PSs only */
};

/* The PS latency histogram a request is timed in
 * (shadowsync_ps_request_seconds{type=...}). */
enum ss_msg_lat {
    SS_MSG_LAT_LOOKUP = 0,
    SS_MSG_LAT_PUSH,
    SS_MSG_LAT_PUSH_LOOKUP,
    SS_MSG_LAT_SYNC,
    SS_MSG_LAT_OTHER,
    SS_MSG_LAT_N
};

/* The table. Columns:
 *   name   MsgType value MSG_<name> (proto/shadow.proto)
 *   req    request frames (enum ss_msg_shape, without SS_MSG_F_)
 *   reply  frames of a reply with status 0 (an error reply carries none)
 *   ps     which PS serves it (enum ss_msg_ps, without SS_MSG_PS_)
 *   ps_fn  the PS's handler: s_on_<ps_fn> in server/ps_handlers.c; none
 *   tr_fn  the trainer admin's handler: s_on_<tr_fn> in trainer/tr_admin.c; none
 *   ad     1: only from an admin key with the admin token (security.*)
 *   ro     1: changes nothing the server holds (rows, center, files, run)
 *   lat    the PS latency histogram (enum ss_msg_lat, without SS_MSG_LAT_)
 * Peers' messages (PING between trainers, AR_CHUNK) are served by the ring
 * (trainer/tr_allreduce.c), not through this dispatch. */
#define SS_MSG_TYPES(X)                                                                        \
    /* name            req          reply   ps     ps_fn            tr_fn   ad ro lat */       \
    X(HELLO,           NONE,        NONE,   BOTH,  hello,           hello,  0, 1, OTHER)       \
    X(PING,            NONE,        NONE,   BOTH,  ping,            ping,   0, 1, OTHER)       \
    X(STATS,           NONE,        NONE,   BOTH,  stats,           stats,  0, 1, OTHER)       \
    X(CHECKPOINT,      NONE,        NONE,   BOTH,  checkpoint,      none,   1, 0, OTHER)       \
    X(SHUTDOWN,        NONE,        NONE,   BOTH,  shutdown,        none,   1, 0, OTHER)       \
    X(CONFIG,          NONE,        NONE,   BOTH,  config,          config, 0, 1, OTHER)       \
    X(CHECKPOINT_DONE, NONE,        NONE,   BOTH,  checkpoint_done, none,   1, 0, OTHER)       \
    X(LOOKUP,          KEYS,        ROWS,   EMBED, lookup,          none,   0, 0, LOOKUP)      \
    X(PUSH,            PUSH,        NONE,   EMBED, push,            none,   0, 0, PUSH)        \
    X(PUSH_LOOKUP,     PUSH_KEYS,   ROWS,   EMBED, push_lookup,     none,   0, 0, PUSH_LOOKUP) \
    X(INIT,            RANGE,       NONE,   SYNC,  init,            none,   1, 0, SYNC)        \
    X(ELASTIC,         RANGE_ALPHA, FLOATS, SYNC,  center,          none,   0, 0, SYNC)        \
    X(PULL,            RANGE_ONLY,  FLOATS, SYNC,  center,          none,   0, 1, SYNC)        \
    X(AR_CHUNK,        RANGE,       SAME,   NONE,  none,            none,   0, 0, OTHER)       \
    X(RESTORE,         NONE,        NONE,   BOTH,  restore,         none,   1, 0, OTHER)

/* Row indices (SS_MSG_ROW_LOOKUP ...) and their count. */
enum {
#define SS_MSG_ROW_ID(name, req, reply, ps, ps_fn, tr_fn, admin, ro, lat) SS_MSG_ROW_##name,
    SS_MSG_TYPES(SS_MSG_ROW_ID)
#undef SS_MSG_ROW_ID
    SS_MSG_N_TYPES
};

/* Designated initializers of a server's handler table, indexed by row:
 * s_on_<ps_fn> (SS_MSG_PS_HANDLER) or s_on_<tr_fn> (SS_MSG_TR_HANDLER) of
 * each row. The server defines s_on_none as NULL around the expansion:
 *   static const my_fn s_routes[SS_MSG_N_TYPES] = {SS_MSG_TYPES(SS_MSG_PS_HANDLER)}; */
#define SS_MSG_PS_HANDLER(name, req, reply, ps, ps_fn, tr_fn, admin, ro, lat) \
    [SS_MSG_ROW_##name] = s_on_##ps_fn,
#define SS_MSG_TR_HANDLER(name, req, reply, ps, ps_fn, tr_fn, admin, ro, lat) \
    [SS_MSG_ROW_##name] = s_on_##tr_fn,

/* One row of the table, as data. */
struct ss_msg_type {
    int row;            /* index in the table (SS_MSG_ROW_<name>) */
    int type;           /* MsgType value */
    const char *name;   /* "LOOKUP" */
    int req;            /* enum ss_msg_shape of the request */
    int reply;          /* enum ss_msg_shape of a reply with status 0 */
    int ps;             /* enum ss_msg_ps */
    int admin;          /* needs an admin key and the admin token */
    int read_only;      /* changes nothing the server holds */
    int lat;            /* enum ss_msg_lat */
};

/* The row of MsgType value type, or NULL when no row has it (MSG_NONE, a
 * value from the network that is none). Any thread. */
const struct ss_msg_type *ss_msg_type_find(int type);

/* Row i (< SS_MSG_N_TYPES). Any thread. */
const struct ss_msg_type *ss_msg_type_at(size_t i);

/* The histogram label of lat ("lookup", "push", "push_lookup", "sync",
 * "other"). */
const char *ss_msg_lat_name(int lat);

#endif
