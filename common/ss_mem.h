/* ss_mem.h - allocation wrappers (jemalloc in release builds).
 *
 * ss_malloc/ss_calloc/ss_realloc/ss_aligned_alloc abort with a log line on
 * out-of-memory (redis zmalloc): callers never check them. Check sizes that
 * come from the network or config against limits first, or use
 * ss_try_malloc() where the failure must be reported to a peer.
 * Every pointer is freed with ss_free(). Thread-safe. */
#ifndef SS_MEM_H
#define SS_MEM_H

#include <stddef.h>

void *ss_malloc(size_t size);
void *ss_calloc(size_t n, size_t size);
void *ss_realloc(void *ptr, size_t size);
/* Alignment must be a power of two >= sizeof(void *); size is rounded up. */
void *ss_aligned_alloc(size_t alignment, size_t size);
/* Return NULL on failure instead of aborting (the memory, or realloc's old
 * block, is then unchanged and still the caller's). */
void *ss_try_malloc(size_t size);
void *ss_try_realloc(void *ptr, size_t size);
void *ss_try_aligned_alloc(size_t alignment, size_t size);
/* For tests (sqlite's malloc-failure sweep): make the n-th ss_try_* call
 * from now on fail (return NULL without allocating), once; n <= 0 turns it
 * off. ss_mem_fail_fired() says how many calls have been failed so since
 * the last ss_mem_fail_at(). Process-wide; the aborting allocators are never
 * failed. Costs the ss_try_* calls one relaxed atomic load when off. */
void ss_mem_fail_at(long n);
long ss_mem_fail_fired(void);
char *ss_strdup(const char *s);
void ss_free(void *ptr);

/* Copy n floats from src to dst (not overlapping). For short rows
 * (embedding rows of 8-33 floats, copied millions of times a second): the
 * constant-size chunks are inlined moves, where memcpy with a run-time size
 * is a library call that costs more than the copy. */
static inline void ss_copy_floats(float *restrict dst, const float *restrict src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        __builtin_memcpy(dst + i, src + i, 8 * sizeof(float));
    if (n - i >= 4) {
        __builtin_memcpy(dst + i, src + i, 4 * sizeof(float));
        i += 4;
    }
    if (n - i >= 2) {
        __builtin_memcpy(dst + i, src + i, 2 * sizeof(float));
        i += 2;
    }
    if (i < n)
        dst[i] = src[i];
}

/* Resident set size of this process in bytes (from /proc), or 0. */
size_t ss_mem_rss(void);

#endif
