/* tr_dedup.h - a reusable hash set of 64-bit keys, emptied in O(1), for the
 * de-duplication of one field's keys in a batch (tr_client.c).
 *
 * A set maps each key to the position where it was first inserted. The
 * client fills one set per field of a batch: about B keys, so a table of
 * 4 * B slots (8 KiB at B = 128) stays in the L1 cache, where one table
 * for the whole batch (26 fields) did not. At most a quarter of the slots
 * are used (half before: on make run's batches the client's key work,
 * de-duplication and the round's merge, took 6-9% less). Emptying bumps a
 * stamp; a slot whose stamp differs is empty. Slots are found by a multiplicative hash
 * of the key (the top bits of key * 2^64 / phi) and linear probing.
 *
 * The struct is caller-allocated (tr_dedup_init/tr_dedup_fini) and its
 * fields are touched only through these functions; tr_dedup_insert is
 * inline because it runs once per key. tr_dedup_batch groups a whole batch
 * (the client's per-worker de-duplication). Thread: one thread per set. */
#ifndef TR_DEDUP_H
#define TR_DEDUP_H

#include <stddef.h>
#include <stdint.h>

struct tr_dedup_slot {
    uint64_t key;            /* the key */
    uint32_t stamp;          /* the set it belongs to; any other value: empty */
    uint32_t first;          /* position of its first insertion (tr_dedup_batch: its
                              * shard and its index in the shard's keys) */
};

struct tr_dedup {
    struct tr_dedup_slot *slots; /* cap slots */
    size_t cap;              /* allocated slots, a power of two */
    size_t mask;             /* slots of the current set - 1 */
    unsigned shift;          /* 64 - log2(mask + 1) */
    uint32_t stamp;          /* the current set's stamp (never 0 after begin) */
};

/* An empty set of no capacity (call tr_dedup_begin before inserting). */
void tr_dedup_init(struct tr_dedup *self);

/* Free the slots; self may be initialized again. */
void tr_dedup_fini(struct tr_dedup *self);

/* Empty the set and make room for n distinct keys (at most a quarter of the
 * slots of the current set are used, so a probe is short). Allocates when n
 * exceeds every earlier n. */
void tr_dedup_begin(struct tr_dedup *self, size_t n);

/* Insert key, first seen at position pos. Returns pos when key is new in
 * this set, else the position given when it was first inserted. At most the
 * n of tr_dedup_begin distinct keys per set. */
static inline uint32_t tr_dedup_insert(struct tr_dedup *self, uint64_t key, uint32_t pos)
{
    size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> self->shift);
    struct tr_dedup_slot *s = &self->slots[i];
    while (s->stamp == self->stamp) {
        if (s->key == key)
            return s->first;
        i = (i + 1) & self->mask;
        s = &self->slots[i];
    }
    *s = (struct tr_dedup_slot){key, self->stamp, pos};
    return pos;
}

/* Add key, known to be absent from this set, first seen at position pos
 * (no key compared: the round merge's first contribution to a run, whose
 * keys are distinct and the set empty). */
static inline void tr_dedup_add(struct tr_dedup *self, uint64_t key, uint32_t pos)
{
    size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> self->shift);
    while (self->slots[i].stamp == self->stamp)
        i = (i + 1) & self->mask;
    self->slots[i] = (struct tr_dedup_slot){key, self->stamp, pos};
}

/* The position key was first inserted at, or none when it is not in this
 * set; the set is not changed. Both tests of a slot are taken at once, so
 * the loop branches only on a slot held by another key (rare, the set being
 * at most a quarter full) and the answer is a select, not a branch: the
 * round merge's last contribution to a run finds about half its keys, at
 * random, where a branch on it mispredicts. */
static inline uint32_t tr_dedup_find(const struct tr_dedup *self, uint64_t key, uint32_t none)
{
    size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> self->shift);
    const struct tr_dedup_slot *s = &self->slots[i];
    int held = s->stamp == self->stamp;
    while (held & (s->key != key)) {
        i = (i + 1) & self->mask;
        s = &self->slots[i];
        held = s->stamp == self->stamp;
    }
    return held ? s->first : none;
}

/* One shard's unique keys of a batch, grouped by table: n_groups runs of
 * counts[g] keys of table tables[g], in table order. */
struct tr_dedup_part {
    uint64_t *keys;          /* unique keys, grouped by table */
    uint32_t *tables;        /* group tables */
    uint32_t *counts;        /* group sizes */
    size_t n_keys;           /* unique keys */
    size_t n_groups;         /* groups */
};

/* Group the keys of a batch of B examples of F fields in CSR form (tr_bag.h:
 * field f of example b holds keys [offs[b * F + f], offs[b * F + f + 1])) by
 * shard (ss_key_shard over n_shards) and field, de-duplicated per field
 * (field f is table f; a key in two fields stays two). Walks the batch
 * field-major, one set (self) per field. Fills parts [n_shards] (their
 * arrays sized by the caller: keys for offs[B * F] keys, tables and counts
 * for F groups) and, per value i, where its key landed: pos_shard[i] and
 * pos_index[i] (index in parts[pos_shard[i]].keys) [offs[B * F]]. */
void tr_dedup_batch(struct tr_dedup *self, const uint64_t *keys, const uint32_t *offs,
                    uint32_t B, uint32_t F, struct tr_dedup_part *parts, uint32_t n_shards,
                    uint32_t *pos_shard, uint32_t *pos_index);

#endif
