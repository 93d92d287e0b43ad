/* ps_pool.c - a shard's blocks from shared 2 MiB chunks (see ps_pool.h). */
#include "ps_pool.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_mem.h"

#define S_CLASSES 15u            /* block sizes 64 B .. 1 MiB */

/* A free block: its first bytes link it into the free list of its size. */
struct s_free {
    struct s_free *next;   /* the next free block of the same size */
};

struct ps_pool {
    pthread_mutex_t lock;               /* guards everything below */
    struct s_free *free[S_CLASSES];     /* free blocks of 64 << i bytes */
    unsigned char *cur;                 /* the chunk being carved, NULL before the first */
    size_t used;                        /* bytes of cur carved so far */
    size_t out;                         /* bytes of the blocks given out now */
    unsigned char **chunks;             /* every chunk, to free them */
    size_t n_chunks;                    /* chunks held */
    size_t chunks_cap;                  /* entries of chunks */
};

/* Free list index of a block size (a power of two in MIN..MAX). */
static unsigned s_class(size_t bytes)
{
    ss_assert(bytes >= PS_POOL_MIN && bytes <= PS_POOL_MAX && (bytes & (bytes - 1)) == 0);
    return (unsigned)__builtin_ctzll(bytes) - 6u;
}

ps_pool_t *ps_pool_new(void)
{
    ps_pool_t *self = ss_calloc(1, sizeof *self);
    ss_assert(pthread_mutex_init(&self->lock, NULL) == 0);
    return self;
}

void ps_pool_destroy(ps_pool_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ps_pool_t *self = *self_p;
    for (size_t i = 0; i < self->n_chunks; i++)
        ss_free(self->chunks[i]);
    ss_free(self->chunks);
    pthread_mutex_destroy(&self->lock);
    ss_free(self);
    *self_p = NULL;
}

/* Put a block on the free list of its size. Needs self->lock. */
static void s_push(ps_pool_t *self, void *block, size_t bytes)
{
    struct s_free *f = block;
    unsigned c = s_class(bytes);
    f->next = self->free[c];
    self->free[c] = f;
}

/* Put the current chunk's bytes [used, end) on the free lists, in the largest
 * pieces their alignment allows, and mark them carved. Needs self->lock. */
static void s_carve_to(ps_pool_t *self, size_t end)
{
    while (self->used < end) {
        /* the alignment of used: a piece there may be that large */
        size_t piece = self->used ? self->used & (~self->used + 1) : PS_POOL_CHUNK;
        while (piece > PS_POOL_MAX || self->used + piece > end)
            piece /= 2;
        s_push(self, self->cur + self->used, piece);
        self->used += piece;
    }
}

/* Start a new chunk: 2 MiB aligned, advised to be one huge page. With
 * fallible set, an allocation that fails leaves the pool as it was and
 * returns SS_E_NOMEM (else it aborts, as ss_malloc()). Needs self->lock. */
static int s_new_chunk(ps_pool_t *self, int fallible)
{
    if (self->n_chunks == self->chunks_cap) {
        size_t cap = self->chunks_cap ? self->chunks_cap * 2 : 16;
        unsigned char **c = fallible ? ss_try_realloc(self->chunks, cap * sizeof *c)
                                     : ss_realloc(self->chunks, cap * sizeof *c);
        if (!c)
            return SS_E_NOMEM;
        self->chunks = c;
        self->chunks_cap = cap;
    }
    unsigned char *cur = fallible ? ss_try_aligned_alloc(PS_POOL_CHUNK, PS_POOL_CHUNK)
                                  : ss_aligned_alloc(PS_POOL_CHUNK, PS_POOL_CHUNK);
    if (!cur)
        return SS_E_NOMEM;
    self->cur = cur;
#ifdef MADV_HUGEPAGE
    (void)madvise(self->cur, PS_POOL_CHUNK, MADV_HUGEPAGE);
#endif
    self->chunks[self->n_chunks++] = self->cur;
    self->used = 0;
    return 0;
}

/* A free block of class c, split off a larger free block if none of its
 * size is free (the other halves go on the free lists), or NULL. Needs
 * self->lock. */
static void *s_take_free(ps_pool_t *self, unsigned c)
{
    unsigned k = c;
    while (k < S_CLASSES && !self->free[k])
        k++;
    if (k == S_CLASSES)
        return NULL;
    unsigned char *block = (unsigned char *)self->free[k];
    self->free[k] = self->free[k]->next;
    while (k > c) {
        k--;
        s_push(self, block + ((size_t)PS_POOL_MIN << k), (size_t)PS_POOL_MIN << k);
    }
    return block;
}

/* ps_pool_get() or, with fallible, ps_pool_try_get(). */
static void *s_get(ps_pool_t *self, size_t bytes, int fallible)
{
    ss_assert(self);
    unsigned c = s_class(bytes);
    void *block;

    ss_assert(pthread_mutex_lock(&self->lock) == 0);
    if ((block = s_take_free(self, c)) == NULL) {
        size_t at = (self->used + bytes - 1) & ~(bytes - 1);
        if (!self->cur || at + bytes > PS_POOL_CHUNK) {
            if (self->cur)
                s_carve_to(self, PS_POOL_CHUNK);  /* the rest goes on the free lists */
            if (s_new_chunk(self, fallible) != 0) {
                ss_assert(pthread_mutex_unlock(&self->lock) == 0);
                return NULL;
            }
            at = 0;
        }
        s_carve_to(self, at);
        block = self->cur + at;
        self->used = at + bytes;
    }
    self->out += bytes;
    ss_assert(pthread_mutex_unlock(&self->lock) == 0);
    return block;
}

void *ps_pool_get(ps_pool_t *self, size_t bytes)
{
    return s_get(self, bytes, 0);
}

void *ps_pool_try_get(ps_pool_t *self, size_t bytes)
{
    return s_get(self, bytes, 1);
}

void ps_pool_put(ps_pool_t *self, void *block, size_t bytes)
{
    ss_assert(self && block && ((uintptr_t)block & (bytes - 1)) == 0);
    ss_assert(pthread_mutex_lock(&self->lock) == 0);
    ss_assert(self->out >= bytes);
    s_push(self, block, bytes);
    self->out -= bytes;
    ss_assert(pthread_mutex_unlock(&self->lock) == 0);
}

/* Order of chunk addresses, for qsort() and s_find(). */
static int s_cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(unsigned char *const *)a;
    uintptr_t y = (uintptr_t)*(unsigned char *const *)b;
    return x < y ? -1 : x > y;
}

/* Index in sorted (n chunk addresses, ascending) of the chunk holding p. */
static size_t s_find(unsigned char *const *sorted, size_t n, const void *p)
{
    uintptr_t c = (uintptr_t)p & ~(uintptr_t)(PS_POOL_CHUNK - 1);
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)sorted[mid] <= c)
            lo = mid;
        else
            hi = mid;
    }
    ss_assert((uintptr_t)sorted[lo] == c);
    return lo;
}

/* Drop from the free lists, the current chunk and the chunk table every
 * chunk whose free bytes (free_b[i] for sorted[i]) make it whole, and free
 * them. Returns the bytes freed. Needs self->lock. */
static size_t s_release_whole(ps_pool_t *self, unsigned char *const *sorted,
                              const size_t *free_b)
{
    size_t n = self->n_chunks, k = 0, released = 0;
#define S_WHOLE(p) (free_b[s_find(sorted, n, (p))] == PS_POOL_CHUNK)
    for (unsigned c = 0; c < S_CLASSES; c++) {
        struct s_free **pp = &self->free[c];
        while (*pp)
            if (S_WHOLE(*pp))
                *pp = (*pp)->next;
            else
                pp = &(*pp)->next;
    }
    if (self->cur && S_WHOLE(self->cur)) {
        self->cur = NULL;
        self->used = 0;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char *chunk = self->chunks[i];
        if (S_WHOLE(chunk)) {
            ss_free(chunk);
            released += PS_POOL_CHUNK;
        } else {
            self->chunks[k++] = chunk;
        }
    }
#undef S_WHOLE
    self->n_chunks = k;
    return released;
}

size_t ps_pool_trim(ps_pool_t *self)
{
    ss_assert(self);
    ss_assert(pthread_mutex_lock(&self->lock) == 0);
    size_t n = self->n_chunks, released = 0;
    /* scratch from the allocator: when there is none, nothing is trimmed */
    unsigned char **sorted = n ? ss_try_malloc(n * sizeof *sorted) : NULL;
    size_t *free_b = n ? ss_try_malloc(n * sizeof *free_b) : NULL;
    if (sorted && free_b) {
        memcpy(sorted, self->chunks, n * sizeof *sorted);
        qsort(sorted, n, sizeof *sorted, s_cmp_ptr);
        memset(free_b, 0, n * sizeof *free_b);
        if (self->cur)   /* its tail not carved yet */
            free_b[s_find(sorted, n, self->cur)] += PS_POOL_CHUNK - self->used;
        for (unsigned c = 0; c < S_CLASSES; c++)
            for (struct s_free *f = self->free[c]; f; f = f->next)
                free_b[s_find(sorted, n, f)] += (size_t)PS_POOL_MIN << c;
        released = s_release_whole(self, sorted, free_b);
    }
    ss_assert(pthread_mutex_unlock(&self->lock) == 0);
    ss_free(sorted);
    ss_free(free_b);
    return released;
}

size_t ps_pool_chunk_bytes(ps_pool_t *self)
{
    ss_assert(self);
    ss_assert(pthread_mutex_lock(&self->lock) == 0);
    size_t n = self->n_chunks * (size_t)PS_POOL_CHUNK;
    ss_assert(pthread_mutex_unlock(&self->lock) == 0);
    return n;
}

size_t ps_pool_idle_bytes(ps_pool_t *self)
{
    ss_assert(self);
    ss_assert(pthread_mutex_lock(&self->lock) == 0);
    size_t n = self->n_chunks * (size_t)PS_POOL_CHUNK - self->out;
    ss_assert(pthread_mutex_unlock(&self->lock) == 0);
    return n;
}
