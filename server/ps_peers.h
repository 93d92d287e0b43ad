/* ps_peers.h - the ROUTER identities that said HELLO to this PS.
 *
 * A PS serves nothing but HELLO to a connection before it has said HELLO
 * (and passed its checks). The set is bounded: when it is full, the
 * connection that said HELLO longest ago is forgotten; its next request gets
 * SS_E_NOHELLO and the client says HELLO again (ss_net.h does so by itself).
 * Identities are kept whole, up to PS_PEER_ID_MAX bytes (ZeroMQ gives a
 * connection a 5-byte one unless the client sets ZMQ_ROUTING_ID).
 * Thread-safe (one mutex); shared by the service threads. */
#ifndef PS_PEERS_H
#define PS_PEERS_H

#include <stddef.h>
#include <stdint.h>

#define PS_PEER_ID_MAX 64  /* longest identity remembered */

typedef struct ps_peers ps_peers_t;

/* A set of at most capacity identities (> 0). Caller owns; ps_peers_destroy(). */
ps_peers_t *ps_peers_new(size_t capacity);
void ps_peers_destroy(ps_peers_t **self_p);

/* Remember id (copied). Returns 0, 1 when another identity was forgotten to
 * make room, or -1 when len is 0 or above PS_PEER_ID_MAX. Any thread. */
int ps_peers_add(ps_peers_t *self, const uint8_t *id, size_t len);

/* 1 when id said HELLO and is still remembered, else 0. Any thread. */
int ps_peers_has(ps_peers_t *self, const uint8_t *id, size_t len);

/* Identities remembered now. Any thread. */
size_t ps_peers_count(ps_peers_t *self);

#endif
