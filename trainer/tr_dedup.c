/* tr_dedup.c - the O(1)-emptied key set of tr_dedup.h. */
#include "tr_dedup.h"

#include <string.h>

#include "ss_assert.h"
#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_mem.h"

#define TR_DEDUP_MIN_SLOTS 16u
#define TR_DEDUP_MAX_SHARDS SS_CFG_MAX_LIST /* cluster.embedding holds at most this many */
#define TR_DEDUP_SHARD_BITS 6u   /* 2^6 = TR_DEDUP_MAX_SHARDS */

void tr_dedup_init(struct tr_dedup *self)
{
    ss_assert(self);
    memset(self, 0, sizeof *self);
}

void tr_dedup_fini(struct tr_dedup *self)
{
    if (!self)
        return;
    ss_free(self->slots);
    memset(self, 0, sizeof *self);
}

void tr_dedup_begin(struct tr_dedup *self, size_t n)
{
    size_t want = TR_DEDUP_MIN_SLOTS;
    unsigned bits = 4;
    ss_assert(self && n <= UINT32_MAX);
    while (want < 4 * n) {  /* a quarter full at most: a probe rarely goes on */
        want <<= 1;
        bits++;
    }
    if (want > self->cap) {
        /* zeroed: stamp 0 is never a set's, so every slot is empty */
        ss_free(self->slots);
        self->slots = ss_calloc(want, sizeof *self->slots);
        self->cap = want;
    }
    self->mask = want - 1;
    self->shift = 64 - bits;
    if (++self->stamp == 0) {  /* wrapped: empty every slot once */
        memset(self->slots, 0, self->cap * sizeof *self->slots);
        self->stamp = 1;
    }
}

/* The body of tr_dedup_batch. A key new in its field gets its shard and its
 * index in that shard's keys at once; with packed (fewer than 2^(32 -
 * TR_DEDUP_SHARD_BITS) values in the batch) its slot keeps both (the shard in
 * the top TR_DEDUP_SHARD_BITS bits of first), so a repeat reads them from the
 * slot it found, with no further load; else the slot keeps the value's place
 * and a repeat copies that value's shard and index. The shards' key counts
 * and key pointers live in local arrays (the stores through parts[s].keys
 * could alias the parts' fields, which every key then reloaded); each shard's
 * group of field f is written once the field is done. single: value i of
 * field f in example b is b * F + f (no offsets read). */
static inline __attribute__((always_inline)) void
s_batch(struct tr_dedup *self, const uint64_t *keys, const uint32_t *offs, uint32_t B,
        uint32_t F, struct tr_dedup_part *parts, uint32_t n_shards, uint32_t *pos_shard,
        uint32_t *pos_index, int single, int packed)
{
    uint64_t *kp[TR_DEDUP_MAX_SHARDS];
    uint32_t nk[TR_DEDUP_MAX_SHARDS], nk0[TR_DEDUP_MAX_SHARDS];
    const unsigned sb = 32 - TR_DEDUP_SHARD_BITS;
    for (uint32_t s = 0; s < n_shards; s++) {
        parts[s].n_keys = parts[s].n_groups = 0;
        kp[s] = parts[s].keys;
        nk[s] = 0;
    }
    for (uint32_t f = 0; f < F; f++) {
        size_t n = 0;
        if (single)
            n = B;
        else
            for (uint32_t b = 0; b < B; b++)
                n += offs[(size_t)b * F + f + 1] - offs[(size_t)b * F + f];
        if (n == 0)
            continue;
        tr_dedup_begin(self, n);
        for (uint32_t s = 0; s < n_shards; s++)
            nk0[s] = nk[s];
        /* the set's fields in locals: the stores below could alias them */
        struct tr_dedup_slot *slots = self->slots;
        const size_t mask = self->mask;
        const unsigned shift = self->shift;
        const uint32_t stamp = self->stamp;
        for (uint32_t b = 0; b < B; b++) {
            size_t p = (size_t)b * F + f;
            uint32_t i0 = single ? (uint32_t)p : offs[p];
            uint32_t i1 = single ? (uint32_t)p + 1 : offs[p + 1];
            for (uint32_t i = i0; i < i1; i++) {
                uint64_t key = keys[i];
                size_t h = (size_t)((key * 0x9e3779b97f4a7c15ull) >> shift);
                struct tr_dedup_slot *sl = &slots[h];
                uint32_t s, x;
                while (sl->stamp == stamp) {
                    if (sl->key == key)
                        goto seen;
                    h = (h + 1) & mask;
                    sl = &slots[h];
                }
                s = n_shards > 1 ? ss_key_shard(key, n_shards) : 0;
                x = nk[s]++;
                kp[s][x] = key;
                *sl = (struct tr_dedup_slot){key, stamp, packed ? s << sb | x : i};
                pos_shard[i] = s;
                pos_index[i] = x;
                continue;
            seen:
                pos_shard[i] = packed ? sl->first >> sb : pos_shard[sl->first];
                pos_index[i] = packed ? sl->first & ((1u << sb) - 1) : pos_index[sl->first];
            }
        }
        for (uint32_t s = 0; s < n_shards; s++) {  /* a group per shard the field reached */
            struct tr_dedup_part *pt = &parts[s];
            if (nk[s] == nk0[s])
                continue;
            pt->tables[pt->n_groups] = f;
            pt->counts[pt->n_groups++] = nk[s] - nk0[s];
        }
    }
    for (uint32_t s = 0; s < n_shards; s++)
        parts[s].n_keys = nk[s];
}

void tr_dedup_batch(struct tr_dedup *self, const uint64_t *keys, const uint32_t *offs,
                    uint32_t B, uint32_t F, struct tr_dedup_part *parts, uint32_t n_shards,
                    uint32_t *pos_shard, uint32_t *pos_index)
{
    size_t n_pos = (size_t)B * F;
    ss_assert(self && offs && parts && (n_shards > 0 || offs[n_pos] == 0));
    ss_assert(n_shards <= TR_DEDUP_MAX_SHARDS && TR_DEDUP_MAX_SHARDS <= 1u << TR_DEDUP_SHARD_BITS);
    uint32_t irregular = offs[0];  /* 0 when every position holds one value */
    for (size_t p = 0; p < n_pos; p++)
        irregular |= offs[p + 1] ^ (uint32_t)(p + 1);
    int packed = offs[n_pos] < 1u << (32 - TR_DEDUP_SHARD_BITS);
    if (!irregular && packed)
        s_batch(self, keys, offs, B, F, parts, n_shards, pos_shard, pos_index, 1, 1);
    else if (packed)
        s_batch(self, keys, offs, B, F, parts, n_shards, pos_shard, pos_index, 0, 1);
    else
        s_batch(self, keys, offs, B, F, parts, n_shards, pos_shard, pos_index, 0, 0);
}
