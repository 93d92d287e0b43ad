/* ps_rbuf.h - reusable buffers for a service thread's reply frames.
 *
 * DESIGN: a LOOKUP or PUSH_LOOKUP reply is one frame of rows, tens of KiB in
 * make run's job. zmq_msg_init_size() takes it from jemalloc, and ZeroMQ's
 * I/O thread frees it once sent: a large size class, allocated on one thread
 * and freed on another, through the arena's locks and page purging, once per
 * request. Here a service thread keeps the buffers of its sent replies
 * instead: ZeroMQ hands each back through the message's free function (on
 * its I/O thread, or on the service thread when a send fails), which pushes
 * it on a lock-free stack that only the owner pops (all at once: no ABA).
 * The next reply reuses the buffer freed last, still in cache. At most
 * PS_RBUF_KEEP buffers are kept; a reply that finds none free while that many
 * are out gets a buffer of its own, freed by ZeroMQ as before.
 *
 * The pool lives as long as its owner holds it or any of its buffers is in a
 * message (a reference count): the owner may release it while ZeroMQ still
 * holds replies, and the last returned buffer frees it. */
#ifndef PS_RBUF_H
#define PS_RBUF_H

#include <stddef.h>
#include <zmq.h>

#define PS_RBUF_KEEP 8u   /* most buffers a pool keeps */

typedef struct ps_rbuf ps_rbuf_t;

/* An empty pool. Caller owns its reference; drop it with ps_rbuf_release().
 * Thread: any; afterwards only one thread (the owner) may call
 * ps_rbuf_msg(). */
ps_rbuf_t *ps_rbuf_new(void);

/* Drop the owner's reference, set *self_p to NULL (NULL accepted): the pool
 * goes when the last buffer in a message comes back. Thread: the owner. */
void ps_rbuf_release(ps_rbuf_t **self_p);

/* Initialize msg as a frame of bytes bytes (contents undefined) in a buffer of
 * the pool, or of its own when the pool keeps PS_RBUF_KEEP buffers and all
 * are out. The caller owns msg and sends or closes it as any zmq message;
 * the buffer stays valid until then. Returns 0, or SS_E_NOMEM. Thread: the
 * owner. */
int ps_rbuf_msg(ps_rbuf_t *self, zmq_msg_t *msg, size_t bytes);

#endif
