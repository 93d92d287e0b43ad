/* ss_mem.c - allocation wrappers. jemalloc replaces malloc when linked
 * (release builds); sanitizer builds use the system allocator. */
#include "ss_mem.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ss_log.h"

static void s_oom(size_t size)
{
    SS_LOG(SS_LOG_ERROR, "out of memory allocating %zu bytes", size);
    abort();
}

void *ss_malloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p)
        s_oom(size);
    return p;
}

void *ss_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        s_oom(n * size);
    return p;
}

void *ss_realloc(void *ptr, size_t size)
{
    void *p = realloc(ptr, size ? size : 1);
    if (!p)
        s_oom(size);
    return p;
}

void *ss_aligned_alloc(size_t alignment, size_t size)
{
    size_t rounded = (size + alignment - 1) / alignment * alignment;
    void *p = NULL;
    if (posix_memalign(&p, alignment, rounded ? rounded : alignment) != 0)
        s_oom(size);
    return p;
}

/* The injected failure (ss_mem_fail_at): calls left before it, 0 when off */
static atomic_long s_fail_in;
static atomic_long s_fail_fired;

void ss_mem_fail_at(long n)
{
    atomic_store(&s_fail_fired, 0);
    atomic_store(&s_fail_in, n > 0 ? n : 0);
}

long ss_mem_fail_fired(void)
{
    return atomic_load(&s_fail_fired);
}

/* Whether this ss_try_* call is the one to fail. */
static int s_inject(void)
{
    if (atomic_load_explicit(&s_fail_in, memory_order_relaxed) == 0)
        return 0;
    long left = atomic_load(&s_fail_in);
    while (left > 0 && !atomic_compare_exchange_weak(&s_fail_in, &left, left - 1))
        ;
    if (left != 1)
        return 0;
    atomic_fetch_add(&s_fail_fired, 1);
    return 1;
}

void *ss_try_malloc(size_t size)
{
    return s_inject() ? NULL : malloc(size ? size : 1);
}

void *ss_try_realloc(void *ptr, size_t size)
{
    return s_inject() ? NULL : realloc(ptr, size ? size : 1);
}

void *ss_try_aligned_alloc(size_t alignment, size_t size)
{
    size_t rounded = (size + alignment - 1) / alignment * alignment;
    void *p = NULL;
    if (rounded < size || s_inject() ||
        posix_memalign(&p, alignment, rounded ? rounded : alignment) != 0)
        return NULL;
    return p;
}

char *ss_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = ss_malloc(n);
    memcpy(p, s, n);
    return p;
}

void ss_free(void *ptr)
{
    free(ptr);
}

size_t ss_mem_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages_total = 0, pages_rss = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%lu %lu", &pages_total, &pages_rss) != 2)
        pages_rss = 0;
    fclose(f);
    return (size_t)pages_rss * (size_t)sysconf(_SC_PAGESIZE);
}
