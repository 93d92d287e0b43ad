/* ps_rbuf.c - reusable reply buffers of a service thread (see ps_rbuf.h). */
#include "ps_rbuf.h"

#include <stdatomic.h>
#include <stdint.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_mem.h"

#define S_HEAD 64u               /* bytes before a buffer's data: its header, padded */
#define S_ROUND (16u << 10)      /* capacities are multiples of this */

/* The header in front of every buffer's data. */
struct s_buf {
    struct s_buf *next;          /* the next buffer of a free list */
    ps_rbuf_t *pool;             /* the pool it goes back to, NULL: freed when sent */
    size_t cap;                  /* bytes of data */
};
_Static_assert(sizeof(struct s_buf) <= S_HEAD, "buffer header fits its padding");

struct ps_rbuf {
    _Atomic(struct s_buf *) back;   /* buffers ZeroMQ gave back, pushed by any thread */
    _Atomic size_t refs;            /* the owner's (1 until released) + buffers out */
    struct s_buf *free;             /* buffers ready to use (owner only) */
    unsigned n_kept;                /* buffers of the pool, free or out (owner only) */
};

ps_rbuf_t *ps_rbuf_new(void)
{
    ps_rbuf_t *self = ss_calloc(1, sizeof *self);
    atomic_init(&self->back, NULL);
    atomic_init(&self->refs, 1);
    return self;
}

/* Free a list of buffers. */
static void s_free_list(struct s_buf *b)
{
    while (b) {
        struct s_buf *next = b->next;
        ss_free(b);
        b = next;
    }
}

/* Drop one reference; the last frees the pool and every buffer it holds. */
static void s_unref(ps_rbuf_t *self)
{
    if (atomic_fetch_sub_explicit(&self->refs, 1, memory_order_acq_rel) != 1)
        return;
    s_free_list(self->free);
    s_free_list(atomic_load_explicit(&self->back, memory_order_acquire));
    ss_free(self);
}

void ps_rbuf_release(ps_rbuf_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    s_unref(*self_p);
    *self_p = NULL;
}

/* ZeroMQ's free function of a frame: its buffer goes back to its pool, or is
 * freed when it has none. Thread: any (ZeroMQ's I/O thread, or the owner). */
static void s_give_back(void *data, void *hint)
{
    struct s_buf *b = hint;
    ps_rbuf_t *self = b->pool;
    (void)data;
    if (!self) {
        ss_free(b);
        return;
    }
    struct s_buf *head = atomic_load_explicit(&self->back, memory_order_relaxed);
    do {
        b->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&self->back, &head, b,
                                                    memory_order_release, memory_order_relaxed));
    s_unref(self);
}

/* A buffer of at least bytes from the free buffers (taking back what ZeroMQ
 * returned when none is free), NULL when none is. A free one too small is
 * freed and forgotten. Thread: the owner. */
static struct s_buf *s_take(ps_rbuf_t *self, size_t bytes)
{
    if (!self->free)
        self->free = atomic_exchange_explicit(&self->back, NULL, memory_order_acquire);
    struct s_buf *b = self->free;
    if (!b)
        return NULL;
    self->free = b->next;
    if (b->cap >= bytes)
        return b;
    ss_free(b);
    self->n_kept--;
    return NULL;
}

int ps_rbuf_msg(ps_rbuf_t *self, zmq_msg_t *msg, size_t bytes)
{
    ss_assert(self && msg);
    struct s_buf *b = s_take(self, bytes);
    if (!b) {
        if (bytes > SIZE_MAX - S_HEAD - S_ROUND)
            return SS_E_NOMEM;
        size_t cap = (bytes + S_ROUND - 1) / S_ROUND * S_ROUND;
        b = ss_try_malloc(S_HEAD + cap);
        if (!b)
            return SS_E_NOMEM;
        b->cap = cap;
        b->pool = NULL;
        if (self->n_kept < PS_RBUF_KEEP) {
            b->pool = self;
            self->n_kept++;
        }
    }
    if (b->pool)
        atomic_fetch_add_explicit(&self->refs, 1, memory_order_relaxed);
    if (zmq_msg_init_data(msg, (unsigned char *)b + S_HEAD, bytes, s_give_back, b) != 0) {
        /* not handed over: back to the free list, the reference dropped */
        if (b->pool) {
            b->next = self->free;
            self->free = b;
            atomic_fetch_sub_explicit(&self->refs, 1, memory_order_relaxed);
        } else {
            ss_free(b);
        }
        return SS_E_NOMEM;
    }
    return 0;
}
