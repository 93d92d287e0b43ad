/* tr_dedup.c - the O(1)-emptied key set of tr_dedup.h. */
#include "tr_dedup.h"

#include <string.h>

#include "ss_assert.h"
#include "ss_mem.h"

#define TR_DEDUP_MIN_SLOTS 16u

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
