/* ps_admit.h - approximate push counts of keys that have no stored row yet.
 *
 * One per lock stripe of the embedding shard (tables.admit_after >= 2): a
 * blocked count-min sketch of 8-bit counters. A key maps to one 64-byte line
 * (one cache miss) and to 4 counters inside it; its count is the least of the
 * 4. Adding uses the conservative update (only the counters equal to that
 * least value grow), which keeps the overestimate from colliding keys small.
 * Counters saturate at 255. Aging: after every counters / 8 adds all counters
 * are halved, so old counts fade and the sketch never fills up; a key is
 * admitted when it reaches the threshold within roughly that many adds to its
 * stripe. Counts are never too low before a halving, and a colliding key can
 * only make a count too high (an early admission, never a late one): with
 * distinct keys, about 1% of keys seen once read 2 (test_ps_admit.c).
 *
 * Memory: exactly the bytes given to ps_admit_init() (a power of two, >= 64),
 * allocated once (or the caller's: ps_admit_init_at()); nothing else. A struct ps_admit is caller-allocated and
 * not thread-safe: its owner serializes calls (the stripe lock). */
#ifndef PS_ADMIT_H
#define PS_ADMIT_H

#include <stddef.h>
#include <stdint.h>

#define PS_ADMIT_MAX 255u  /* counts saturate here */

struct ps_admit {
    uint8_t *cnt;           /* lines * 64 counters, 64-byte aligned; NULL when unused */
    int borrowed;           /* cnt belongs to the caller (ps_admit_init_at()) */
    size_t line_mask;       /* lines - 1 */
    size_t adds;            /* adds since the last halving */
    size_t halve_every;     /* adds between halvings: counters / 8 */
};

/* Set a up with bytes of counters (a power of two >= 64), all zero. */
void ps_admit_init(struct ps_admit *a, size_t bytes);

/* The same in the caller's memory mem (bytes bytes, 64-byte aligned; zeroed
 * here), which it owns and frees after ps_admit_fini(): the embedding shard
 * puts every stripe's counters in one block, on huge pages where it can
 * (one TLB entry per 2 MB instead of one per 4 KB: a key's line is a
 * random access). */
void ps_admit_init_at(struct ps_admit *a, size_t bytes, uint8_t *mem);

/* Set every count to zero, as ps_admit_init() left them (the embedding
 * shard's RESTORE: the counts since the save go with the rows). Accepts an
 * unused (zeroed) a. */
void ps_admit_clear(struct ps_admit *a);

/* Free the counters; a may be re-initialized. Accepts an unused (zeroed) a. */
void ps_admit_fini(struct ps_admit *a);

/* Count one more push of the key with 64-bit hash h (any well-mixed hash of
 * the key). Returns the key's count after it, 1..PS_ADMIT_MAX. */
unsigned ps_admit_add(struct ps_admit *a, uint64_t h);

/* Start loading the line of the key with hash h (ps_admit_add() of it comes
 * next): a prefetch, nothing changes. */
void ps_admit_prefetch(const struct ps_admit *a, uint64_t h);

/* The key's current count without adding, 0..PS_ADMIT_MAX. */
unsigned ps_admit_count(const struct ps_admit *a, uint64_t h);

/* Bytes of counters (0 when unused). */
size_t ps_admit_bytes(const struct ps_admit *a);

#endif
