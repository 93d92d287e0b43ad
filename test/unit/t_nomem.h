/* t_nomem.h - what the unit tests of a restore that runs out of memory
 * share: a forked child whose address space is capped (setrlimit(RLIMIT_AS))
 * and filled with ballast, so that the code under test gets about the bytes
 * the test leaves it, whatever the allocator had mapped already.
 *
 * Not under a sanitizer: its shadow memory needs an unlimited address space
 * (T_SANITIZED; the test skips). Checks in the child use T_CHILD_CHECK,
 * which says what failed and exits 1: cmocka's asserts belong to the
 * parent. */
#ifndef T_NOMEM_H
#define T_NOMEM_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define T_SANITIZED 1
#else
#define T_SANITIZED 0
#endif

/* A forked child's check: on failure it says which and exits 1. */
#define T_CHILD_CHECK(cond)                                                             \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "child: %s:%d: %s\n", __FILE__, __LINE__, #cond);           \
            _exit(1);                                                                   \
        }                                                                               \
    } while (0)

/* Ballast: blocks of every size from the allocator, largest first (its free
 * blocks of each size), then mappings of the pages left, which it may not
 * reach (it maps in large steps). The margin is left in T_BIG blocks (a
 * freed one leaves room for an aligned 2 MiB block). */
enum { T_BIG = 4u << 20, T_BALL = 64u << 10, T_BALLS = 1u << 16, T_MAPS = 256 };

/* The ballast blocks and the limit they fill. */
struct t_nomem {
    void *ball[T_BALLS];    /* blocks held */
    size_t n;               /* how many */
    void *map[T_MAPS];      /* mappings held */
    size_t map_bytes[T_MAPS];   /* their sizes */
    size_t n_maps;          /* how many */
    struct rlimit old;      /* the limit before */
};

/* Address space of this process now, in bytes. */
static inline size_t t_vm_bytes(void)
{
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    T_CHILD_CHECK(f && fscanf(f, "%lu", &pages) == 1);
    fclose(f);
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* Cap the address space 32 MiB above what the process holds, take blocks
 * and then pages until the cap refuses one, then free margin bytes (a
 * multiple of T_BIG) of them: the process can then get about margin bytes
 * more, from its allocator.
 * Undo with t_nomem_end(). In a forked child only. */
static inline void t_nomem_begin(struct t_nomem *b, size_t margin)
{
    struct rlimit lim;
    size_t n_keep = margin / T_BIG;
    T_CHILD_CHECK(getrlimit(RLIMIT_AS, &b->old) == 0);
    lim = b->old;
    lim.rlim_cur = t_vm_bytes() + (32u << 20);
    T_CHILD_CHECK(setrlimit(RLIMIT_AS, &lim) == 0);
    b->n = 0;
    /* the margin's blocks first, freed at the end; then every size down to
     * T_BALL (jemalloc serves large sizes from an arena apart, whose free
     * blocks only requests of about their size reuse) */
    while (b->n < n_keep && (b->ball[b->n] = malloc(T_BIG)) != NULL)
        b->n++;
    T_CHILD_CHECK(b->n == n_keep);
    for (size_t sz = 64u << 20; sz >= T_BALL; sz /= 2)
        while (b->n < T_BALLS && (b->ball[b->n] = malloc(sz)) != NULL)
            b->n++;
    T_CHILD_CHECK(b->n < T_BALLS);
    b->n_maps = 0;
    for (size_t sz = T_BIG; sz >= 4096; sz /= 2) {
        void *p;
        while (b->n_maps < T_MAPS &&
               (p = mmap(NULL, sz, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                         0)) != MAP_FAILED) {
            b->map[b->n_maps] = p;
            b->map_bytes[b->n_maps++] = sz;
        }
    }
    T_CHILD_CHECK(b->n_maps < T_MAPS);   /* the cap was reached */
    for (size_t k = 0; k < n_keep; k++) {
        free(b->ball[k]);
        b->ball[k] = NULL;
    }
}

/* Free the ballast and lift the cap. */
static inline void t_nomem_end(struct t_nomem *b)
{
    while (b->n > 0)
        free(b->ball[--b->n]);
    while (b->n_maps > 0) {
        b->n_maps--;
        munmap(b->map[b->n_maps], b->map_bytes[b->n_maps]);
    }
    T_CHILD_CHECK(setrlimit(RLIMIT_AS, &b->old) == 0);
}

/* Run fn(arg) in a forked child, which must exit 0; returns its wait status
 * (0: it did). */
static inline int t_nomem_fork(void (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        fn(arg);
        _exit(0);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return st;
}

#endif
