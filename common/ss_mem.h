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
/* Return NULL on failure instead of aborting. */
void *ss_try_malloc(size_t size);
char *ss_strdup(const char *s);
void ss_free(void *ptr);

/* Resident set size of this process in bytes (from /proc), or 0. */
size_t ss_mem_rss(void);

#endif
