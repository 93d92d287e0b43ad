/* ss_peers.h - the ROUTER identities that said HELLO to a server.
 *
 * A PS (and a trainer's admin endpoint) serves nothing but HELLO to a connection before it has said HELLO
 * (and passed its checks). The set is bounded: when it is full, the
 * connection that said HELLO longest ago is forgotten; its next request gets
 * SS_E_NOHELLO and the client says HELLO again (ss_net.h does so by itself).
 * Identities are kept whole, up to SS_PEER_ID_MAX bytes (ZeroMQ gives a
 * connection a 5-byte one unless the client sets ZMQ_ROUTING_ID).
 * Thread-safe (one mutex); shared by a PS's service threads. */
#ifndef SS_PEERS_H
#define SS_PEERS_H

#include <stddef.h>
#include <stdint.h>

#define SS_PEER_ID_MAX 64  /* longest identity remembered */

typedef struct ss_peers ss_peers_t;

/* A set of at most capacity identities (> 0). Caller owns; ss_peers_destroy(). */
ss_peers_t *ss_peers_new(size_t capacity);
void ss_peers_destroy(ss_peers_t **self_p);

/* Remember id (copied). Returns 0, 1 when another identity was forgotten to
 * make room, or -1 when len is 0 or above SS_PEER_ID_MAX. Any thread. */
int ss_peers_add(ss_peers_t *self, const uint8_t *id, size_t len);

/* 1 when id said HELLO and is still remembered, else 0. Any thread. */
int ss_peers_has(ss_peers_t *self, const uint8_t *id, size_t len);

/* Identities remembered now. Any thread. */
size_t ss_peers_count(ss_peers_t *self);

/* Forget every identity, as a new set of the same capacity would be
 * (ps_service_reset()); costs one forget per identity held. Any thread. */
void ss_peers_clear(ss_peers_t *self);

#endif
