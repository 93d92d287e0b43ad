/* ps_admit.c - the admission sketch: a blocked count-min sketch with
 * conservative update and periodic halving (see ps_admit.h). */
#include "ps_admit.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ss_assert.h"
#include "ss_hash.h"
#include "ss_mem.h"

#define S_LINE 64u     /* counters per line: one cache line */
#define S_DEPTH 4u     /* counters per key */

/* Zero bytes at p without writing the whole pages inside: they are given
 * back (MADV_DONTNEED: private anonymous memory, as every large block of
 * the allocator, reads as zero pages afterwards), so a counter page is
 * zeroed by the kernel at its first use only and one never used costs
 * nothing, where a memset wrote every page at start (and on a huge page
 * the kernel had zeroed it first). The partial pages at either end, or
 * all of it when the advice fails, are memset. */
static void s_zero(uint8_t *p, size_t bytes)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + pg - 1) & ~(pg - 1), hi = ((uintptr_t)p + bytes) & ~(pg - 1);
    if (pg == 0 || (pg & (pg - 1)) != 0 || hi <= lo ||
        madvise((void *)lo, hi - lo, MADV_DONTNEED) != 0) {
        memset(p, 0, bytes);
        return;
    }
    memset(p, 0, lo - (uintptr_t)p);
    memset((void *)hi, 0, (uintptr_t)p + bytes - hi);
}

void ps_admit_init_at(struct ps_admit *a, size_t bytes, uint8_t *mem)
{
    ss_assert(a && mem && ((uintptr_t)mem & 63) == 0);
    ss_assert(bytes >= S_LINE && (bytes & (bytes - 1)) == 0);
    a->cnt = mem;
    a->borrowed = 1;
    s_zero(a->cnt, bytes);
    a->line_mask = bytes / S_LINE - 1;
    a->adds = 0;
    a->halve_every = bytes / 8;
}

void ps_admit_init(struct ps_admit *a, size_t bytes)
{
    ss_assert(a && bytes >= S_LINE && (bytes & (bytes - 1)) == 0);
    ps_admit_init_at(a, bytes, ss_aligned_alloc(64, bytes));
    a->borrowed = 0;
}

void ps_admit_clear(struct ps_admit *a)
{
    ss_assert(a);
    if (a->cnt)
        s_zero(a->cnt, (a->line_mask + 1) * S_LINE);
    a->adds = 0;
}

void ps_admit_fini(struct ps_admit *a)
{
    ss_assert(a);
    if (!a->borrowed)
        ss_free(a->cnt);
    memset(a, 0, sizeof *a);
}

/* The line of h and the positions of its counters in it. The line comes from
 * a remix of h, so it is independent of the bits the caller used for its own
 * stripe and slot choice. */
static uint8_t *s_line(const struct ps_admit *a, uint64_t h, unsigned pos[S_DEPTH])
{
    uint64_t m = ss_mix64(h ^ 0x6a09e667f3bcc909ull);
    for (unsigned i = 0; i < S_DEPTH; i++)
        pos[i] = (unsigned)(m >> (40 + 6 * i)) & (S_LINE - 1);
    return a->cnt + (size_t)(m & a->line_mask) * S_LINE;
}

/* Least of the key's counters. */
static unsigned s_min(const uint8_t *line, const unsigned pos[S_DEPTH])
{
    unsigned m = line[pos[0]];
    for (unsigned i = 1; i < S_DEPTH; i++)
        if (line[pos[i]] < m)
            m = line[pos[i]];
    return m;
}

/* Halve every counter (a vectorizable byte loop). */
static void s_halve(struct ps_admit *a)
{
    size_t n = (a->line_mask + 1) * S_LINE;
    for (size_t i = 0; i < n; i++)
        a->cnt[i] >>= 1;
    a->adds = 0;
}

unsigned ps_admit_add(struct ps_admit *a, uint64_t h)
{
    ss_assert(a && a->cnt);
    unsigned pos[S_DEPTH];
    uint8_t *line = s_line(a, h, pos);
    unsigned m = s_min(line, pos);

    if (m < PS_ADMIT_MAX) {
        /* conservative update: raise only the counters at the minimum (a
         * position listed twice is raised once: the second sees m + 1) */
        for (unsigned i = 0; i < S_DEPTH; i++)
            if (line[pos[i]] == m)
                line[pos[i]] = (uint8_t)(m + 1);
        m++;
    }
    if (++a->adds >= a->halve_every)
        s_halve(a);
    return m;
}

void ps_admit_prefetch(const struct ps_admit *a, uint64_t h)
{
    unsigned pos[S_DEPTH];
    __builtin_prefetch(s_line(a, h, pos), 1);
}

unsigned ps_admit_count(const struct ps_admit *a, uint64_t h)
{
    ss_assert(a && a->cnt);
    unsigned pos[S_DEPTH];
    return s_min(s_line(a, h, pos), pos);
}

size_t ps_admit_bytes(const struct ps_admit *a)
{
    return a->cnt ? (a->line_mask + 1) * S_LINE : 0;
}
