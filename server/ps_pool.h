/* ps_pool.h - blocks for an embedding shard's row slabs and slot arrays,
 * carved from shared 2 MiB chunks on huge pages.
 *
 * DESIGN: a shard with many lock stripes holds many small arrays (each
 * stripe's row slabs and its slot array). Allocated one by one, each sits on
 * its own 4 KiB pages, and a random key's slot and row miss the TLB almost
 * every time. Advising each array to use 2 MiB pages instead makes the kernel
 * zero a whole 2 MiB page per array at its first touch (on a small job every
 * PS paid about 0.3 s of system time for slabs that held a few rows). The
 * pool carves the arrays of every stripe from shared 2 MiB chunks, each
 * 2 MiB aligned and advised MADV_HUGEPAGE, taking a new chunk only when the
 * last one is used up: the shard's memory grows in 2 MiB steps as rows are
 * stored, on as few huge pages as its contents need. Where the system gives
 * no huge pages the advice is ignored, quietly; nothing else changes.
 *
 * Blocks are powers of two from PS_POOL_MIN to PS_POOL_MAX bytes, each
 * aligned to its size. A freed block goes on a free list of its size, and the
 * next request of that size takes it (last in, first out); the gaps left by
 * aligning a block are put on the free lists of their sizes. A request with
 * no free block of its size splits the smallest larger free block in halves
 * (keeping one, freeing the others) before it carves new memory. Memory goes back
 * to the system with the whole pool, or a whole chunk at a time when its
 * owner asks (ps_pool_trim(); returning part of a huge page would split it):
 * so the pool suits an owner that rarely frees, such as a shard that never
 * deletes rows, whose frees are its slot arrays' old copies.
 *
 * Thread-safe: one mutex, taken last (callers may hold their own locks). */
#ifndef PS_POOL_H
#define PS_POOL_H

#include <stddef.h>

#define PS_POOL_CHUNK (2u << 20)           /* bytes of a chunk: a huge page */
#define PS_POOL_MIN 64u                    /* smallest block */
#define PS_POOL_MAX (PS_POOL_CHUNK / 2)    /* largest block */

typedef struct ps_pool ps_pool_t;

/* An empty pool (no chunk yet). Caller owns it; free with ps_pool_destroy(). */
ps_pool_t *ps_pool_new(void);

/* Free the pool and every chunk (so every block it gave out); sets *self_p to
 * NULL; accepts NULL and *self_p == NULL. No other thread may be using it. */
void ps_pool_destroy(ps_pool_t **self_p);

/* A block of bytes bytes (a power of two in PS_POOL_MIN..PS_POOL_MAX),
 * aligned to bytes; its contents are undefined. Never NULL (aborts on
 * out-of-memory, like ss_malloc()). The block is the caller's until
 * ps_pool_put(). Thread-safe. */
void *ps_pool_get(ps_pool_t *self, size_t bytes);

/* The same, but NULL when the memory for a new chunk cannot be had (the pool
 * is then as it was): for a restore, which must fail cleanly rather than
 * abort the PS (ps_embed.h). Thread-safe. */
void *ps_pool_try_get(ps_pool_t *self, size_t bytes);

/* Give back a block from ps_pool_get() with its size. Thread-safe. */
void ps_pool_put(ps_pool_t *self, void *block, size_t bytes);

/* Give back to the system every chunk of which no block is given out (all
 * of it free or not yet carved): whole chunks, so no huge page is split.
 * For an owner that has just freed many blocks at once (a restore's copy of
 * a shard, loaded or given up: ps_embed.h). O(chunks + free blocks) under
 * the pool's lock. Returns the bytes given back. Thread-safe. */
size_t ps_pool_trim(ps_pool_t *self);

/* Bytes of the chunks the pool holds (given out, free, or not yet carved).
 * Thread-safe. */
size_t ps_pool_chunk_bytes(ps_pool_t *self);

/* Bytes of those chunks not given out now (free blocks and the rest of the
 * last chunk). Thread-safe. */
size_t ps_pool_idle_bytes(ps_pool_t *self);

#endif
