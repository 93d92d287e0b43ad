/* ss_peers.c - bounded set of ROUTER identities, oldest forgotten first.
 *
 * DESIGN: entries live in a ring in the order they were added; an open-
 * addressing index (linear probing, twice the ring's size) maps an identity
 * to its ring slot. Forgetting the oldest entry removes its index slot with
 * backward-shift deletion, so lookups never meet tombstones. */
#include "ss_peers.h"

#include <pthread.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_hash.h"
#include "ss_mem.h"

struct ps_peer {
    uint8_t id[SS_PEER_ID_MAX];      /* the identity */
    size_t len;                      /* its bytes */
};

struct ss_peers {
    pthread_mutex_t lock;            /* guards everything below */
    struct ps_peer *ring;            /* capacity entries, oldest at head */
    size_t capacity;                 /* ring size */
    size_t head;                     /* oldest entry */
    size_t count;                    /* entries used */
    uint32_t *index;                 /* ring slot + 1, 0 = empty; index_mask + 1 entries */
    size_t index_mask;               /* index size - 1 (a power of two >= 2 * capacity) */
};

ss_peers_t *ss_peers_new(size_t capacity)
{
    ss_assert(capacity > 0 && capacity < UINT32_MAX / 4);
    ss_peers_t *self = ss_calloc(1, sizeof *self);
    size_t n = 2;
    while (n < 2 * capacity)
        n <<= 1;
    self->ring = ss_calloc(capacity, sizeof *self->ring);
    self->capacity = capacity;
    self->index = ss_calloc(n, sizeof *self->index);
    self->index_mask = n - 1;
    ss_assert(pthread_mutex_init(&self->lock, NULL) == 0);
    return self;
}

void ss_peers_destroy(ss_peers_t **self_p)
{
    ss_peers_t *self = *self_p;
    if (!self)
        return;
    pthread_mutex_destroy(&self->lock);
    ss_free(self->ring);
    ss_free(self->index);
    ss_free(self);
    *self_p = NULL;
}

static size_t s_home(const ss_peers_t *self, const uint8_t *id, size_t len)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
    for (size_t i = 0; i < len; i++)
        h = ss_mix64(h ^ id[i]);
    return (size_t)h & self->index_mask;
}

/* Index slot holding id, or the empty slot where it would go. Needs lock. */
static size_t s_find(const ss_peers_t *self, const uint8_t *id, size_t len)
{
    size_t i = s_home(self, id, len);
    while (self->index[i]) {
        const struct ps_peer *p = &self->ring[self->index[i] - 1];
        if (p->len == len && memcmp(p->id, id, len) == 0)
            break;
        i = (i + 1) & self->index_mask;
    }
    return i;
}

/* Empty index slot i and shift later entries of its cluster back (Knuth's
 * algorithm R), so that every entry stays reachable from its home. */
static void s_unindex(ss_peers_t *self, size_t i)
{
    size_t j = i;
    self->index[i] = 0;
    for (;;) {
        j = (j + 1) & self->index_mask;
        if (!self->index[j])
            return;
        const struct ps_peer *p = &self->ring[self->index[j] - 1];
        size_t home = s_home(self, p->id, p->len);
        /* leave it when its home lies cyclically in (i, j] */
        if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
            continue;
        self->index[i] = self->index[j];
        self->index[j] = 0;
        i = j;
    }
}

/* Forget the oldest entry. Needs lock. */
static void s_forget_oldest(ss_peers_t *self)
{
    struct ps_peer *old = &self->ring[self->head];
    size_t i = s_find(self, old->id, old->len);
    ss_assert(self->index[i] == self->head + 1);
    s_unindex(self, i);
    self->head = (self->head + 1) % self->capacity;
    self->count--;
}

int ss_peers_add(ss_peers_t *self, const uint8_t *id, size_t len)
{
    int forgot = 0;
    if (len == 0 || len > SS_PEER_ID_MAX)
        return -1;
    ss_assert(pthread_mutex_lock(&self->lock) == 0);
    if (!self->index[s_find(self, id, len)]) {
        if (self->count == self->capacity) {
            s_forget_oldest(self);
            forgot = 1;
        }
        size_t slot = (self->head + self->count) % self->capacity;
        memcpy(self->ring[slot].id, id, len);
        self->ring[slot].len = len;
        self->index[s_find(self, id, len)] = (uint32_t)slot + 1;
        self->count++;
    }
    ss_assert(pthread_mutex_unlock(&self->lock) == 0);
    return forgot;
}

int ss_peers_has(ss_peers_t *self, const uint8_t *id, size_t len)
{
    if (len == 0 || len > SS_PEER_ID_MAX)
        return 0;
    ss_assert(pthread_mutex_lock(&self->lock) == 0);
    int has = self->index[s_find(self, id, len)] != 0;
    ss_assert(pthread_mutex_unlock(&self->lock) == 0);
    return has;
}

size_t ss_peers_count(ss_peers_t *self)
{
    ss_assert(pthread_mutex_lock(&self->lock) == 0);
    size_t n = self->count;
    ss_assert(pthread_mutex_unlock(&self->lock) == 0);
    return n;
}

void ss_peers_clear(ss_peers_t *self)
{
    ss_assert(pthread_mutex_lock(&self->lock) == 0);
    while (self->count > 0)
        s_forget_oldest(self);
    self->head = 0;
    ss_assert(pthread_mutex_unlock(&self->lock) == 0);
}
