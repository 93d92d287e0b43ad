/* ps_embed.c - the embedding shard: striped open-addressing maps over row slabs.
 *
 * DESIGN: the shard is split into n_stripes stripes by the low bits of a hash of
 * (table, key); each stripe has its own pthread mutex, a linear-probing slot array
 * (8 bytes a slot: the hash's high 32 bits and a row index; row == S_NIL marks a
 * free slot) and its rows in power-of-two slabs that never move. A row starts
 * with a header holding its key, so a slot needs no key: a probe compares the
 * 32 hash bits and reads the row only on a match (the row is read next anyway),
 * and the home slot of an entry is its hash bits & mask, which is all that
 * growing, shrinking and backward-shift deletion need. Rows are dense at
 * indices 0..n_rows-1 (a deletion moves the last row into the hole), so slabs
 * can be freed from the end. A shard that never deletes rows takes its slabs
 * and slot arrays from a pool of 2 MiB huge-page chunks shared by its stripes
 * (ps_pool.h: the rows of every stripe on few huge pages, so few TLB misses;
 * touched in 2 MiB steps as rows are stored). With recency on, the row header
 * also holds the touch stamp and the CLOCK bit, so a touch costs no cache miss
 * and eviction walks rows in memory order. A call hashes its keys once, groups them by stripe
 * with a stable sort (counting sort; a small sort when stripes far outnumber
 * keys), so duplicates keep call order, and takes each stripe lock once (a
 * PUSH_LOOKUP's push and lookup are grouped together, the push's keys first in
 * each stripe: ps_embed_push_lookup_groups()). The
 * shard-wide row count is an atomic reserved with compare-and-swap before a row
 * is created, so the capacity is never exceeded even under races; the memory
 * bound is kept per stripe under its lock (ps_embed.h). Lock order: at most one
 * stripe lock at a time, except restore, which holds one stripe lock of each of
 * two shards (the live one first, the private one second); the pool's lock
 * is taken last, under a stripe lock. */
#include "ps_embed.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <sys/mman.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "ps_admit.h"
#include "ps_ckpt.h"
#include "ps_ckpt_set.h"
#include "ps_pool.h"
#include "ss_assert.h"
#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_isa.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_msg.h"
#include "ss_rowinit.h"

#define S_NIL UINT32_MAX            /* no row (a free slot) */
#define S_HDR 16u                   /* bytes of a row header */
#define S_MAX_DIM 65536u            /* largest dim accepted */
#define S_MAX_STRIPES 65536u        /* most lock stripes */
#define S_MAX_STRIPE_ROWS (1u << 31) /* rows per stripe (slot arrays stay <= 2^32) */
#define S_MIN_SLOTS 16u             /* smallest slot array of a stripe */
#define S_SMALL 256u                /* calls up to this many keys use stack scratch */
#define S_SLAB_MIN 4096u            /* smallest slab, bytes */
#define S_SLAB_MAX (8u << 20)       /* largest slab unless one row needs more (no pool) */
#define S_SLAB_SHARE 256u           /* a pooled shard's slab: 1/this of a stripe's share */
#define S_SLAB_POOLED (64u << 10)   /* ... and at least this (a short slab table) */
#define S_ROW_ALIGN 32u             /* row strides are multiples: no row spans an extra line */
#define S_HUGE (2u << 20)           /* a huge page: slabs and slot arrays of whole ones get them */
#define S_REC_HEAD 16u              /* checkpoint record: key u64, table u32, zero u32 */
#define S_RESTORE_BATCH 4096u       /* records read at once by restore */

/* One map entry. */
struct s_slot {
    uint32_t tag;    /* bits 32..63 of the key's hash; its home slot is tag & mask */
    uint32_t row;    /* row index within the stripe's slabs, S_NIL if the slot is free */
};

/* The header at the start of every row; its floats follow at byte S_HDR.
 * Packed with 4-byte alignment: rows are 4-byte aligned. */
struct __attribute__((packed, aligned(4))) s_hdr {
    uint64_t key;     /* the key */
    uint32_t table;   /* its table */
    uint32_t stamp;   /* with recency: clock second of the last touch << 1 | CLOCK bit */
};
_Static_assert(sizeof(struct s_hdr) == S_HDR, "row header is 16 bytes");

/* What a stripe stores: swapped whole by restore (s_map_move() copies each
 * field: a new field goes there too). */
struct s_map {
    struct s_slot *slots;   /* mask + 1 slots */
    size_t mask;            /* slot count - 1 (a power of two - 1) */
    uint32_t n_rows;        /* rows stored, at indices 0..n_rows-1 (= used slots) */
    uint32_t n_slabs;       /* slabs allocated */
    uint32_t slabs_cap;     /* entries of slabs */
    unsigned char **slabs;  /* slab pointers, each slab_rows rows */
    uint32_t hand;          /* CLOCK hand: the next row eviction looks at */
    uint32_t sweep;         /* TTL sweep cursor: the next row a tick looks at */
    size_t bytes;           /* bytes of slots, slabs and the slab table */
};

/* One lock stripe. The counters are written only under lock (a relaxed load
 * and store, no locked add) and read by ps_embed_stats() without it. */
struct s_stripe {
    _Alignas(64) pthread_mutex_t lock;  /* guards m, admit and the rows */
    struct s_map m;                     /* the map and its rows */
    struct ps_admit admit;              /* push counts of unstored keys (admit_after >= 2) */
    _Atomic uint64_t n_admitted;        /* rows created */
    _Atomic uint64_t n_not_admitted;    /* pushed keys dropped before admission */
    _Atomic uint64_t n_evict_ttl;       /* rows deleted for the TTL */
    _Atomic uint64_t n_evict_mem;       /* rows evicted for the memory bound */
};

struct ps_embed {
    struct ps_embed_conf conf;   /* copy of the configuration */
    size_t row_floats;           /* dim + optimizer state floats */
    size_t stride;               /* bytes of a row: header + floats */
    uint32_t stripe_bits;        /* log2(n_stripes) */
    size_t slab_bytes;           /* bytes of a slab, a power of two */
    uint32_t slab_rows;          /* rows in a slab: slab_bytes / stride, >= 2 */
    uint64_t slab_magic;         /* 2^64 / slab_rows rounded up: index / slab_rows by a multiply */
    int recency;                 /* stamp touches, CLOCK bits (ttl_s or max_memory_bytes) */
    size_t budget;               /* bytes a stripe's map may use, 0 = unbounded */
    ps_pool_t *pool;             /* without recency: slabs and slot arrays up to PS_POOL_MAX */
    int own_pool;                /* pool is this shard's (a restore's private shard borrows) */
    size_t fixed_bytes;          /* shard and stripe structs plus admission sketches */
    struct s_stripe *stripes;    /* n_stripes stripes, 64-byte aligned */
    uint8_t *sketches;           /* every stripe's admission counters, one block (or NULL) */
    _Atomic size_t n_rows;       /* rows stored over all stripes */
    _Atomic size_t bytes;        /* fixed_bytes plus every stripe's m.bytes */
    _Atomic uint32_t now_s;      /* the clock, moved by ps_embed_tick() */
    uint32_t swept_s;            /* clock of the last TTL sweep (ticking thread only) */
    int init_512;                /* initializer rows by AVX-512 (ss_isa_get() allows it) */
    int fallible;                /* a restore's private shard: an allocation that fails
                                  * is reported (oom_bytes), not fatal */
    size_t oom_bytes;            /* bytes of the first allocation that failed (fallible) */
    _Atomic size_t restore_need; /* bytes the last restore lacked memory for, or 0 */
};

/* One part of a call: n keys in n_groups runs, run i holding counts[i] keys
 * of table tables[i]; a push's gradients or a lookup's rows (one of them). */
struct s_part {
    size_t n_groups;             /* runs */
    const uint32_t *tables;      /* table of each run */
    const uint32_t *counts;      /* keys of each run */
    const uint64_t *keys;        /* the keys, run after run */
    size_t n;                    /* keys in all runs */
    const float *grads;          /* a push: n * dim gradients, else NULL */
    float *rows_out;             /* a lookup: n * dim floats out, else NULL */
    size_t full;                 /* keys refused at capacity (out) */
};

/* Per-call scratch: key hashes and key indices grouped by stripe. Key index
 * k < n_push is key k of the push part, other k key k - n_push of the lookup
 * part (a call has one part or both). */
struct s_group {
    uint64_t *h;                 /* hash of each key */
    uint32_t *t;                 /* table of each key */
    uint32_t *order;             /* key indices sorted by stripe, stable */
    uint64_t h_buf[S_SMALL];     /* storage for small calls */
    uint32_t t_buf[S_SMALL];     /* storage for small calls */
    uint32_t o_buf[S_SMALL];     /* storage for small calls */
};

/* Add n to a stripe counter. Needs the stripe's lock (the only writer). */
static inline void s_count(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* Change the shard's byte count by delta (may be negative). */
static inline void s_bytes_add(ps_embed_t *self, struct s_map *m, ptrdiff_t delta)
{
    m->bytes += (size_t)delta;
    atomic_fetch_add_explicit(&self->bytes, (size_t)delta, memory_order_relaxed);
}

/* An allocation of bytes for self failed (only a fallible shard's can):
 * remember the first one's size. Returns NULL. */
static void *s_oom(ps_embed_t *self, size_t bytes)
{
    ss_assert(self->fallible);
    if (!self->oom_bytes)
        self->oom_bytes = bytes;
    return NULL;
}

/* The shard's allocators, ss_mem.h's and ps_pool.h's keyed on the shard: an
 * ordinary shard's abort on out-of-memory; a fallible one's (a restore's
 * private shard) return NULL and remember the size (s_oom()). */
static void *s_mem_malloc(ps_embed_t *self, size_t bytes)
{
    void *p = self->fallible ? ss_try_malloc(bytes) : ss_malloc(bytes);
    return p ? p : s_oom(self, bytes);
}

static void *s_mem_realloc(ps_embed_t *self, void *old, size_t bytes)
{
    void *p = self->fallible ? ss_try_realloc(old, bytes) : ss_realloc(old, bytes);
    return p ? p : s_oom(self, bytes);
}

static void *s_mem_aligned(ps_embed_t *self, size_t align, size_t bytes)
{
    void *p = self->fallible ? ss_try_aligned_alloc(align, bytes)
                             : ss_aligned_alloc(align, bytes);
    return p ? p : s_oom(self, bytes);
}

static void *s_mem_pool_get(ps_embed_t *self, size_t bytes)
{
    void *p = self->fallible ? ps_pool_try_get(self->pool, bytes)
                             : ps_pool_get(self->pool, bytes);
    return p ? p : s_oom(self, bytes);
}

/* Allocate bytes for rows or slots (free with ss_free()), 64-byte aligned.
 * With huge set, a whole number of huge pages is 2 MB aligned and advised to
 * be backed by huge pages (MADV_HUGEPAGE: random row reads then miss the TLB
 * far less). Where the system gives none the advice fails or is ignored,
 * quietly: the memory is the same either way. A huge page is zeroed whole at
 * its first touch, so memory that may stay mostly untouched (a stripe's first
 * slab) is not advised: on a small job every PS paid about 0.3 s of system
 * time zeroing 2 MB pages of slabs that held a few rows each. */
static void *s_alloc_rows(ps_embed_t *self, size_t bytes, int huge)
{
    size_t align = huge && bytes >= S_HUGE && bytes % S_HUGE == 0 ? S_HUGE : 64;
    void *p = s_mem_aligned(self, align, bytes);
#ifdef MADV_HUGEPAGE
    if (p && align == S_HUGE)
        (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

/* Allocate a slab or slot array of bytes (a power of two), 64-byte aligned:
 * from the shard's pool when it has one and the block fits (shared 2 MiB
 * chunks on huge pages, see ps_pool.h), else s_alloc_rows(bytes, huge). Free
 * with s_block_free(). NULL only for a fallible shard (s_oom()). */
static void *s_block_new(ps_embed_t *self, size_t bytes, int huge)
{
    if (self->pool && bytes <= PS_POOL_MAX)
        return s_mem_pool_get(self, bytes);
    return s_alloc_rows(self, bytes, huge);
}

/* Free a block of bytes from s_block_new(). */
static void s_block_free(ps_embed_t *self, void *p, size_t bytes)
{
    if (self->pool && bytes <= PS_POOL_MAX)
        ps_pool_put(self->pool, p, bytes);
    else
        ss_free(p);
}

/* Allocate n free slots (NULL as s_block_new()). */
static struct s_slot *s_slots_new(ps_embed_t *self, size_t n)
{
    struct s_slot *slots = s_block_new(self, n * sizeof *slots, 1);
    if (!slots)
        return NULL;
    for (size_t j = 0; j < n; j++) {
        slots[j].tag = 0;
        slots[j].row = S_NIL;
    }
    return slots;
}

/* Floats of optimizer state stored after a row's weights. */
static size_t s_state_floats(const struct ps_embed_conf *c)
{
    if (c->optimizer == SS_OPT_ADAGRAD)
        return c->dim;
    return c->optimizer == SS_OPT_ROWWISE_ADAGRAD ? 1 + (c->first_order ? 1 : 0) : 0;
}

/* Per-table salt for the hashes; computed once per call. */
static inline uint64_t s_table_salt(uint32_t table)
{
    return ss_rowinit_table_salt(table);
}

/* Hash of (table, key): low bits pick the stripe, the high 32 bits the slot.
 * It is ss_rowinit_key_hash(table, key), which seeds the key's initial row:
 * s_init_row() starts from it. */
static inline uint64_t s_hash(uint64_t salt, uint64_t key)
{
    return ss_mix64(key ^ salt);
}

#if defined(__x86_64__)
/* ss_rowinit_row_hashed() with its splitmix64 streams 8 at a time: the
 * weights of blocks of 8 (VPMULLQ for the two 64-bit multiplies, the top 24
 * bits converted exactly), the rest as ss_rowinit_row_hashed() does them. The
 * same integer steps, then the same float operations in the same order
 * (no contraction under -std=c11), so the floats are the same bit for bit
 * (test_ps_embed: test_init_rows_match). */
__attribute__((target("avx512f,avx512dq"))) static void
s_init_row_512(const struct ps_embed_conf *c, uint64_t h, float *row)
{
    const uint64_t gamma = 0x9e3779b97f4a7c15ull;
    uint64_t state = ss_mix64(c->seed ^ h);
    uint32_t n_emb = c->dim - c->first_order, i = 0;
    __m512i st = _mm512_add_epi64(_mm512_set1_epi64((long long)state),
                                  _mm512_mullo_epi64(_mm512_set_epi64(8, 7, 6, 5, 4, 3, 2, 1),
                                                     _mm512_set1_epi64((long long)gamma)));
    const __m512i step = _mm512_set1_epi64((long long)(gamma * 8));
    const __m512i m1 = _mm512_set1_epi64((long long)0xbf58476d1ce4e5b9ull);
    const __m512i m2 = _mm512_set1_epi64((long long)0x94d049bb133111ebull);
    const __m256 unit = _mm256_set1_ps(1.0f / 16777216.0f), two = _mm256_set1_ps(2.0f);
    const __m256 one = _mm256_set1_ps(1.0f), scale = _mm256_set1_ps(c->init_scale);

    for (; i + 8 <= n_emb; i += 8) {
        __m512i x = st;
        x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 30));
        x = _mm512_mullo_epi64(x, m1);
        x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 27));
        x = _mm512_mullo_epi64(x, m2);
        x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
        __m256 u = _mm256_mul_ps(_mm512_cvtepi64_ps(_mm512_srli_epi64(x, 40)), unit);
        _mm256_storeu_ps(row + i, _mm256_mul_ps(scale, _mm256_sub_ps(_mm256_mul_ps(two, u), one)));
        st = _mm512_add_epi64(st, step);
    }
    state += gamma * i;
    for (; i < n_emb; i++)
        row[i] = c->init_scale * (2.0f * ss_rand_unit(&state) - 1.0f);
    if (c->first_order)
        row[n_emb] = 0.0f;
}
#endif

/* ps_embed_init_row() of the key whose s_hash() is h, without hashing the key
 * again (the same floats: ss_rowinit_row() seeds the row from that hash). */
static inline void s_init_row(const ps_embed_t *self, uint64_t h, float *row)
{
#if defined(__x86_64__)
    if (self->init_512) {
        s_init_row_512(&self->conf, h, row);
        return;
    }
#endif
    ss_rowinit_row_hashed(self->conf.seed, self->conf.init_scale, self->conf.dim,
                          self->conf.first_order, h, row);
}

/* Start of row index r of map m (its header). Needs the stripe's lock. */
static inline unsigned char *s_row(const ps_embed_t *self, const struct s_map *m, uint32_t r)
{
    /* r / slab_rows as one multiply: exact for 32-bit r and divisor (Lemire) */
    uint32_t slab = (uint32_t)(((unsigned __int128)self->slab_magic * r) >> 64);
    return m->slabs[slab] + (size_t)(r - slab * self->slab_rows) * self->stride;
}

static inline struct s_hdr *s_hdr(const ps_embed_t *self, const struct s_map *m, uint32_t r)
{
    return (struct s_hdr *)s_row(self, m, r);
}

/* The floats of row r. */
static inline float *s_w(const ps_embed_t *self, const struct s_map *m, uint32_t r)
{
    return (float *)(s_row(self, m, r) + S_HDR);
}

/* Validate a configuration (what does not depend on the layout). Returns 0 or
 * SS_E_INVAL with a log line. */
static int s_check_conf(const struct ps_embed_conf *c)
{
    const char *bad = NULL;
    int adagrad = c->optimizer == SS_OPT_ADAGRAD || c->optimizer == SS_OPT_ROWWISE_ADAGRAD;

    if (c->n_tables == 0 || c->n_tables == UINT32_MAX)
        bad = "n_tables must be in 1..2^32-2";
    else if (c->dim == 0 || c->dim > S_MAX_DIM)
        bad = "dim must be in 1..65536";
    else if (c->optimizer != SS_OPT_SGD && !adagrad)
        bad = "unknown optimizer";
    else if (c->first_order > 1 || (c->first_order && c->dim < 2))
        bad = "first_order must be 0 or 1, and needs dim >= 2";
    else if (!isfinite(c->lr) || !isfinite(c->eps) || !isfinite(c->init_acc) ||
             !isfinite(c->init_scale) || !isfinite(c->l2) || c->lr < 0 || c->eps < 0 ||
             c->init_acc < 0 || c->init_scale < 0 || c->l2 < 0)
        bad = "lr, eps, init_acc, init_scale and l2 must be finite and >= 0";
    else if (adagrad && c->eps + c->init_acc <= 0)
        bad = "Adagrad needs eps > 0 or init_acc > 0 (else 0/0)";
    else if (c->capacity_rows == 0)
        bad = "capacity_rows must be >= 1";
    else if (c->n_stripes == 0 || c->n_stripes > S_MAX_STRIPES ||
             (c->n_stripes & (c->n_stripes - 1)) != 0)
        bad = "n_stripes must be a power of two in 1..65536";
    else if (c->admit_after > PS_ADMIT_MAX)
        bad = "admit_after must be in 0..255";
    else if (c->admit_after >= 2 && c->admit_sketch_bytes == 0)
        bad = "admit_sketch_bytes must be > 0 with admit_after >= 2";
    if (bad)
        SS_LOG(SS_LOG_ERROR, "embedding shard: bad configuration: %s", bad);
    return bad ? SS_E_INVAL : 0;
}

/* Admission sketch bytes of one stripe: a power of two, at least 64. */
static size_t s_sketch_bytes(const struct ps_embed_conf *c)
{
    size_t per = c->admit_sketch_bytes / c->n_stripes, b = 64;
    if (c->admit_after < 2)
        return 0;
    while (b * 2 <= per)
        b *= 2;
    return b;
}

/* Slab bytes, a power of two with room for at least two rows. Pooled
 * (see s_new()): about 1/256 of a stripe's share of the capacity, 64 KiB ..
 * PS_POOL_MAX: a stripe that holds few rows touches one small slab, the slabs
 * of all stripes share huge pages, and a stripe has at most about 256 slabs,
 * so its slab table stays in cache. Otherwise: about 1/16 of the share,
 * 4 KiB..8 MiB, at least a huge page when the share is 4 MiB or more (at
 * most half of it then sits in a partly filled slab), at most 1/16 of a
 * bounded stripe's budget. */
static size_t s_slab_bytes(const struct ps_embed_conf *c, size_t stride, size_t budget,
                           int pooled)
{
    size_t want = c->capacity_rows / c->n_stripes / 16 * stride;
    size_t b = S_SLAB_MIN;

    if (pooled) {
        size_t per = c->capacity_rows / c->n_stripes / S_SLAB_SHARE * stride;
        b = S_SLAB_POOLED;
        while (b < per && b < PS_POOL_MAX)
            b *= 2;
    } else {
        while (b < want && b < S_SLAB_MAX)
            b *= 2;
        if (want * 16 >= 2 * (size_t)S_HUGE && b < S_HUGE)
            b = S_HUGE;
        while (budget && b > S_SLAB_MIN && b > budget / 16)
            b /= 2;
    }
    while (b < 2 * stride)
        b *= 2;
    return b;
}

/* Bytes of an empty stripe map. */
static size_t s_map_empty_bytes(const ps_embed_t *self)
{
    size_t cap = self->budget ? self->budget / self->slab_bytes + 1 : 0;
    return S_MIN_SLOTS * sizeof(struct s_slot) + cap * sizeof(unsigned char *);
}

/* Work out the layout: stride, slabs, the per-stripe budget. Returns 0, or
 * SS_E_INVAL with a log line when max_memory_bytes cannot hold a minimal map
 * in every stripe. */
static int s_layout(ps_embed_t *self)
{
    const struct ps_embed_conf *c = &self->conf;
    size_t n = c->n_stripes;

    /* a multiple of 32 bytes: in 64-byte aligned slabs a row then spans the
     * fewest cache lines its size allows (92 bytes: 2 lines, not 2 or 3) */
    self->stride = (S_HDR + self->row_floats * sizeof(float) + S_ROW_ALIGN - 1) /
                   S_ROW_ALIGN * S_ROW_ALIGN;
    self->recency = c->ttl_s > 0 || c->max_memory_bytes > 0;
    self->fixed_bytes = sizeof *self + n * sizeof(struct s_stripe) + n * s_sketch_bytes(c);
    if (c->max_memory_bytes && c->max_memory_bytes > self->fixed_bytes)
        self->budget = (c->max_memory_bytes - self->fixed_bytes) / n;
    /* without recency rows are never deleted: such a shard uses a pool */
    self->slab_bytes = s_slab_bytes(c, self->stride, self->budget, !self->recency);
    self->slab_rows = (uint32_t)(self->slab_bytes / self->stride);
    self->slab_magic = UINT64_MAX / self->slab_rows + 1;
    /* a stripe must fit its empty map, two slabs and one slot-array doubling */
    size_t need = s_map_empty_bytes(self) + 2 * self->slab_bytes +
                  2 * S_MIN_SLOTS * sizeof(struct s_slot);
    if (c->max_memory_bytes && (self->budget == 0 || self->budget < need)) {
        SS_LOG(SS_LOG_ERROR,
               "embedding shard: max_memory_bytes %zu is too small: %zu bytes of shard "
               "structs and admission sketches plus %u stripes of at least %zu bytes "
               "(rows of %zu bytes)", c->max_memory_bytes, self->fixed_bytes, c->n_stripes,
               need, self->stride);
        return SS_E_INVAL;
    }
    return 0;
}

/* Set up an empty map. Returns 0, or SS_E_NOMEM (a fallible shard only; m is
 * then safe to s_map_fini()). */
static int s_map_init(ps_embed_t *self, struct s_map *m)
{
    memset(m, 0, sizeof *m);
    if (!(m->slots = s_slots_new(self, S_MIN_SLOTS)))
        return SS_E_NOMEM;
    m->mask = S_MIN_SLOTS - 1;
    if (self->budget) {
        /* bounded: the slab table is sized once for the most slabs that fit */
        uint32_t cap = (uint32_t)(self->budget / self->slab_bytes + 1);
        size_t b = cap * sizeof *m->slabs;
        if (!(m->slabs = s_mem_malloc(self, b)))
            return SS_E_NOMEM;
        m->slabs_cap = cap;
    }
    m->bytes = s_map_empty_bytes(self);
    return 0;
}

/* Free a map's slabs, slots and slab table (of a map that s_map_init() may
 * have left half set up). */
static void s_map_fini(ps_embed_t *self, struct s_map *m)
{
    for (uint32_t s = 0; s < m->n_slabs; s++)
        s_block_free(self, m->slabs[s], self->slab_bytes);
    ss_free(m->slabs);
    if (m->slots)
        s_block_free(self, m->slots, (m->mask + 1) * sizeof *m->slots);
    m->slabs = NULL;
    m->slots = NULL;
}

/* Create an empty shard (see ps_embed_new()). With parent (same conf), it
 * is a restore's private shard: it takes its blocks from parent's pool (its
 * maps move into parent), has no admission sketches (a restore does not
 * admit) and is fallible: NULL when its memory cannot be had, and later
 * allocations that fail are reported (s_oom()). */
static ps_embed_t *s_new(const struct ps_embed_conf *conf, ps_embed_t *parent)
{
    if (s_check_conf(conf) != 0)
        return NULL;

    ps_embed_t *self = parent ? ss_try_malloc(sizeof *self) : ss_malloc(sizeof *self);
    if (!self)
        return NULL;
    memset(self, 0, sizeof *self);
    self->conf = *conf;
    self->fallible = parent != NULL;
    self->row_floats = conf->dim + s_state_floats(conf);
    self->init_512 = ss_isa_get() >= SS_ISA_AVX512;
    while ((1u << self->stripe_bits) < conf->n_stripes)
        self->stripe_bits++;
    if (s_layout(self) != 0) {
        ss_free(self);
        return NULL;
    }
    if (parent) {
        self->pool = parent->pool;
    } else if (!self->recency) {
        /* rows are never deleted (no TTL, no memory bound), so the pool,
         * which keeps freed blocks, holds about what the rows need (a shard
         * that deletes rows gives their memory back through jemalloc) */
        self->pool = ps_pool_new();
        self->own_pool = 1;
    }
    size_t sb = conf->n_stripes * sizeof *self->stripes;
    self->stripes = s_mem_aligned(self, 64, sb);
    if (!self->stripes) {
        ss_free(self);
        return NULL;
    }
    memset(self->stripes, 0, sb);
    size_t bytes = self->fixed_bytes, sketch = parent ? 0 : s_sketch_bytes(conf);
    if (sketch)   /* one block: huge pages when it is whole ones (all of it is used) */
        self->sketches = s_alloc_rows(self, sketch * conf->n_stripes, 1);
    for (uint32_t i = 0; i < conf->n_stripes; i++)
        ss_assert(pthread_mutex_init(&self->stripes[i].lock, NULL) == 0);
    int rc = 0;
    for (uint32_t i = 0; i < conf->n_stripes && rc == 0; i++) {
        struct s_stripe *st = &self->stripes[i];
        rc = s_map_init(self, &st->m);
        if (sketch)
            ps_admit_init_at(&st->admit, sketch, self->sketches + (size_t)i * sketch);
        bytes += st->m.bytes;
    }
    atomic_init(&self->n_rows, 0);
    atomic_init(&self->bytes, bytes);
    atomic_init(&self->now_s, 0);
    atomic_init(&self->restore_need, 0);
    if (rc != 0)
        ps_embed_destroy(&self);
    return self;
}

ps_embed_t *ps_embed_new(const struct ps_embed_conf *conf)
{
    ss_assert(conf);
    return s_new(conf, NULL);
}

void ps_embed_destroy(ps_embed_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ps_embed_t *self = *self_p;
    for (uint32_t i = 0; i < self->conf.n_stripes; i++) {
        s_map_fini(self, &self->stripes[i].m);
        ps_admit_fini(&self->stripes[i].admit);
        pthread_mutex_destroy(&self->stripes[i].lock);
    }
    ss_free(self->stripes);
    ss_free(self->sketches);
    if (self->own_pool)
        ps_pool_destroy(&self->pool);
    ss_free(self);
    *self_p = NULL;
}

void ps_embed_init_row(const ps_embed_t *self, uint32_t table, uint64_t key, float *row)
{
    ss_assert(self && row);
    s_init_row(self, s_hash(s_table_salt(table), key), row);
}

/* Take one row of the shard-wide capacity. Returns 1, or 0 when full. */
static int s_reserve(ps_embed_t *self)
{
    size_t cur = atomic_load_explicit(&self->n_rows, memory_order_relaxed);
    while (cur < self->conf.capacity_rows) {
        if (atomic_compare_exchange_weak_explicit(&self->n_rows, &cur, cur + 1,
                                                  memory_order_relaxed, memory_order_relaxed))
            return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ slot array */

/* Position of (table, key) in m, or of the free slot that ends its probe
 * (*found = 0). Needs the stripe's lock. */
static size_t s_probe(const ps_embed_t *self, const struct s_map *m, uint32_t table,
                      uint64_t key, uint64_t h, int *found)
{
    uint32_t tag = (uint32_t)(h >> 32);
    size_t i = tag & m->mask;

    for (;; i = (i + 1) & m->mask) {
        const struct s_slot *s = &m->slots[i];
        if (s->row == S_NIL) {
            *found = 0;
            return i;
        }
        if (s->tag == tag) {
            const struct s_hdr *r = s_hdr(self, m, s->row);
            if (r->key == key && r->table == table) {
                *found = 1;
                return i;
            }
        }
    }
}

/* First free slot on the probe path of tag. Needs the stripe's lock. */
static size_t s_free_slot(const struct s_map *m, uint32_t tag)
{
    size_t i = tag & m->mask;
    while (m->slots[i].row != S_NIL)
        i = (i + 1) & m->mask;
    return i;
}

/* Position of the slot that points at row r. Needs the stripe's lock. */
static size_t s_slot_of(const ps_embed_t *self, const struct s_map *m, uint32_t r)
{
    const struct s_hdr *hd = s_hdr(self, m, r);
    uint32_t tag = (uint32_t)(s_hash(s_table_salt(hd->table), hd->key) >> 32);
    size_t i = tag & m->mask;

    while (m->slots[i].row != r) {
        ss_assert(m->slots[i].row != S_NIL);
        i = (i + 1) & m->mask;
    }
    return i;
}

/* Replace the slot array of m by one of n slots holding the same entries.
 * Returns 0, or SS_E_NOMEM (a fallible shard only; m is unchanged). */
static int s_rehash(ps_embed_t *self, struct s_map *m, size_t n)
{
    size_t old_n = m->mask + 1;
    struct s_slot *old = m->slots, *slots = s_slots_new(self, n);

    if (!slots)
        return SS_E_NOMEM;
    /* stored atomically: s_prefetch_slot() reads them without the lock */
    __atomic_store_n(&m->slots, slots, __ATOMIC_RELAXED);
    __atomic_store_n(&m->mask, n - 1, __ATOMIC_RELAXED);
    for (size_t j = 0; j < old_n; j++)
        if (old[j].row != S_NIL)
            m->slots[s_free_slot(m, old[j].tag)] = old[j];
    s_block_free(self, old, old_n * sizeof *old);
    s_bytes_add(self, m, ((ptrdiff_t)n - (ptrdiff_t)old_n) * (ptrdiff_t)sizeof *old);
    return 0;
}

/* Empty slot i and shift the entries after it back where their probe allows
 * (backward-shift deletion: probe chains stay unbroken without tombstones). */
static void s_slot_delete(struct s_map *m, size_t i)
{
    for (size_t j = (i + 1) & m->mask; m->slots[j].row != S_NIL; j = (j + 1) & m->mask) {
        size_t home = m->slots[j].tag & m->mask;
        /* the entry at j may move to i unless its home lies in (i, j] */
        if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i].tag = 0;
    m->slots[i].row = S_NIL;
}

/* ----------------------------------------------------------------- CLOCK */

/* A row's stamp: the clock second and the CLOCK bit. */
static inline uint32_t s_stamp(uint32_t now, uint32_t used)
{
    return now << 1 | used;
}

/* A lookup or push touched a row: stamp it now; a lookup also sets its CLOCK
 * bit, a push keeps it (the trainer pushes every key right after looking it
 * up: were pushes to set it, every new row would look used at once and CLOCK
 * would have nothing to choose from). The row header is in cache already
 * (the probe read its key), so this costs no miss; it writes only when the
 * stamp changes. Needs the stripe's lock and self->recency. */
static inline void s_touch(struct s_hdr *hd, uint32_t now, int push)
{
    uint32_t st = s_stamp(now, push ? hd->stamp & 1 : 1);
    if (hd->stamp != st)
        hd->stamp = st;
}

/* ------------------------------------------------------ rows: add, delete */

/* Make room for row index m->n_rows, allocating a slab if needed. Returns 0,
 * or SS_E_NOMEM (a fallible shard only; m is as it was, or with a larger
 * slab table). Needs the stripe's lock. */
static int s_ensure_slab(ps_embed_t *self, struct s_map *m)
{
    if (m->n_rows < (size_t)m->n_slabs * self->slab_rows)
        return 0;
    if (m->n_slabs == m->slabs_cap) {
        ss_assert(!self->budget);   /* bounded tables are sized up front */
        uint32_t cap = m->slabs_cap ? m->slabs_cap * 2 : 4;
        size_t b = cap * sizeof *m->slabs;
        unsigned char **slabs = s_mem_realloc(self, m->slabs, b);
        if (!slabs)
            return SS_E_NOMEM;
        m->slabs = slabs;
        s_bytes_add(self, m, (ptrdiff_t)(cap - m->slabs_cap) * (ptrdiff_t)sizeof *m->slabs);
        m->slabs_cap = cap;
    }
    unsigned char *slab = s_block_new(self, self->slab_bytes, m->n_slabs > 0);
    if (!slab)
        return SS_E_NOMEM;
    m->slabs[m->n_slabs] = slab;
    m->n_slabs++;
    s_bytes_add(self, m, (ptrdiff_t)self->slab_bytes);
    return 0;
}

/* Free trailing slabs beyond one spare, and halve the slot array while it is
 * under 1/8 full (memory goes back after deletions). Needs the stripe's lock. */
static void s_shrink(ps_embed_t *self, struct s_map *m)
{
    uint32_t need = (uint32_t)((m->n_rows + (size_t)self->slab_rows - 1) / self->slab_rows);

    while (m->n_slabs > need + 1) {
        s_block_free(self, m->slabs[--m->n_slabs], self->slab_bytes);
        s_bytes_add(self, m, -(ptrdiff_t)self->slab_bytes);
    }
    size_t n = m->mask + 1;
    while (n > S_MIN_SLOTS && (size_t)m->n_rows * 8 < n)
        n /= 2;
    if (n < m->mask + 1)
        (void)s_rehash(self, m, n);  /* only a fallible shard's can fail: it stays larger */
}

/* Would storing one more row take m past its budget? Then evict instead.
 * Counts a new slab and a slot-array doubling (old and new arrays both live
 * while it copies). */
static int s_over_budget(const ps_embed_t *self, const struct s_map *m)
{
    size_t need = 0;

    if (!self->budget || m->n_rows == 0)
        return 0;
    if (m->n_rows == (size_t)m->n_slabs * self->slab_rows)
        need += self->slab_bytes;
    if ((size_t)(m->n_rows + 1) * 4 > (m->mask + 1) * 3)
        need += 2 * (m->mask + 1) * sizeof(struct s_slot);
    return need && m->bytes + need > self->budget;
}

/* Move row from (the stripe's last) into the free index to: its bytes and
 * its slot. Needs the stripe's lock. */
static void s_move_row(ps_embed_t *self, struct s_map *m, uint32_t from, uint32_t to)
{
    m->slots[s_slot_of(self, m, from)].row = to;
    memcpy(s_row(self, m, to), s_row(self, m, from), self->stride);
}

/* Delete row r for good: its slot goes, the last row fills the hole. Needs
 * the stripe's lock. */
static void s_delete(ps_embed_t *self, struct s_map *m, uint32_t r)
{
    s_slot_delete(m, s_slot_of(self, m, r));
    if (r != m->n_rows - 1)
        s_move_row(self, m, m->n_rows - 1, r);
    m->n_rows--;
    if (m->hand > m->n_rows)
        m->hand = 0;
    atomic_fetch_sub_explicit(&self->n_rows, 1, memory_order_relaxed);
}

/* Did the row with this stamp expire by now? */
static inline int s_expired(const ps_embed_t *self, uint32_t stamp, uint32_t now)
{
    return self->conf.ttl_s && (uint64_t)(stamp >> 1) + self->conf.ttl_s < now;
}

/* Warm the next eviction: the row under the hand (its header is read next,
 * and a new row may be written over it) and the one after. */
static inline void s_warm_hand(const ps_embed_t *self, const struct s_map *m)
{
    for (uint32_t k = 0; k < 2 && m->hand + k < m->n_rows; k++) {
        const unsigned char *p = s_row(self, m, m->hand + k);
        for (size_t off = 0; off < self->stride; off += 64)
            __builtin_prefetch(p + off, 1);
        __builtin_prefetch(p + self->stride - 1, 1);
    }
}

/* Evict a row of st for a new one by CLOCK and return its index, which the
 * caller fills at once (n_rows is unchanged). The hand walks the rows in
 * index order: a row with its CLOCK bit set (touched since the hand last
 * passed) loses the bit and is passed over, unless it expired; the first
 * other row goes. Amortized O(1): each lookup sets at most one bit; one call
 * looks at most at n_rows + 1 rows. Needs st->lock. */
static uint32_t s_evict_clock(ps_embed_t *self, struct s_stripe *st, uint32_t now)
{
    struct s_map *m = &st->m;

    ss_assert(m->n_rows > 0);
    for (;;) {
        if (m->hand >= m->n_rows)
            m->hand = 0;
        uint32_t r = m->hand++;
        struct s_hdr *hd = s_hdr(self, m, r);
        int expired = s_expired(self, hd->stamp, now);
        if ((hd->stamp & 1) && !expired) {
            hd->stamp &= ~1u;
            continue;
        }
        s_count(expired ? &st->n_evict_ttl : &st->n_evict_mem, 1);
        s_slot_delete(m, s_slot_of(self, m, r));
        s_warm_hand(self, m);
        return r;
    }
}

/* Fill a new row: initializer weights, then the accumulators at init_acc. */
static void s_fresh_row(const ps_embed_t *self, uint64_t h, float *row)
{
    s_init_row(self, h, row);
    for (size_t i = self->conf.dim; i < self->row_floats; i++)
        row[i] = self->conf.init_acc;
}

/* Store a fresh row for (table, key), which st does not hold, evicting a row
 * by CLOCK when the budget asks for it. Returns the row index,
 * or S_NIL when refused (capacity_rows, or the stripe's row limit; for a
 * fallible shard also memory, with oom_bytes set). Needs st->lock. */
static uint32_t s_insert(ps_embed_t *self, struct s_stripe *st, uint32_t table, uint64_t key,
                         uint64_t h, uint32_t now)
{
    struct s_map *m = &st->m;
    uint32_t r;

    if (s_over_budget(self, m)) {
        r = s_evict_clock(self, st, now);
    } else {
        if (m->n_rows >= S_MAX_STRIPE_ROWS || !s_reserve(self))
            return S_NIL;
        if (((size_t)(m->n_rows + 1) * 4 > (m->mask + 1) * 3 &&
             s_rehash(self, m, (m->mask + 1) * 2) != 0) ||
            s_ensure_slab(self, m) != 0) {
            atomic_fetch_sub_explicit(&self->n_rows, 1, memory_order_relaxed);
            return S_NIL;
        }
        r = m->n_rows++;
    }
    size_t i = s_free_slot(m, (uint32_t)(h >> 32));
    m->slots[i].tag = (uint32_t)(h >> 32);
    m->slots[i].row = r;
    struct s_hdr *hd = s_hdr(self, m, r);
    hd->key = key;
    hd->table = table;
    hd->stamp = s_stamp(now, 0);   /* a new row gets no second chance yet */
    s_fresh_row(self, h, s_w(self, m, r));
    s_count(&st->n_admitted, 1);
    return r;
}

/* The row of (table, key) in st, touched; or, for an unknown key, a new row
 * if the key is admitted now (push says whether this is a push). Returns the
 * row index or S_NIL; *full = 1 when a new row was refused for capacity.
 * Needs st->lock. */
static uint32_t s_get(ps_embed_t *self, struct s_stripe *st, uint32_t table, uint64_t key,
                      uint64_t h, int push, uint32_t now, int *full)
{
    int found;
    size_t i = s_probe(self, &st->m, table, key, h, &found);

    if (found) {
        uint32_t r = st->m.slots[i].row;
        if (self->recency)
            s_touch(s_hdr(self, &st->m, r), now, push);
        return r;
    }
    if (self->conf.admit_after >= 2) {
        if (!push)
            return S_NIL;
        if (ps_admit_add(&st->admit, h) < self->conf.admit_after) {
            s_count(&st->n_not_admitted, 1);
            return S_NIL;
        }
    }
    uint32_t r = s_insert(self, st, table, key, h, now);
    *full = r == S_NIL;
    return r;
}

/* qsort order of uint64_t values. */
static int s_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Few keys over many stripes: sort (stripe << 32 | index), stable by construction. */
static void s_group_sparse(const ps_embed_t *self, struct s_group *g, size_t n)
{
    uint64_t smask = self->conf.n_stripes - 1;
    uint64_t small[S_SMALL];
    uint64_t *packed = n <= S_SMALL ? small : ss_malloc(n * sizeof *packed);

    for (size_t i = 0; i < n; i++)
        packed[i] = (g->h[i] & smask) << 32 | i;
    if (n <= 32) {
        for (size_t i = 1; i < n; i++) {
            uint64_t v = packed[i];
            size_t j = i;
            for (; j > 0 && packed[j - 1] > v; j--)
                packed[j] = packed[j - 1];
            packed[j] = v;
        }
    } else {
        qsort(packed, n, sizeof *packed, s_u64_cmp);
    }
    for (size_t i = 0; i < n; i++)
        g->order[i] = (uint32_t)packed[i];
    if (packed != small)
        ss_free(packed);
}

/* Many keys: counting sort by stripe, stable. */
static void s_group_dense(const ps_embed_t *self, struct s_group *g, size_t n)
{
    uint32_t ns = self->conf.n_stripes;
    uint32_t cnt_buf[1025];
    uint32_t *cnt = ns < 1025 ? cnt_buf : ss_malloc((ns + 1) * sizeof *cnt);

    memset(cnt, 0, (ns + 1) * sizeof *cnt);
    for (size_t i = 0; i < n; i++)
        cnt[(g->h[i] & (ns - 1)) + 1]++;
    for (uint32_t s = 0; s < ns; s++)
        cnt[s + 1] += cnt[s];
    for (size_t i = 0; i < n; i++)
        g->order[cnt[g->h[i] & (ns - 1)]++] = (uint32_t)i;
    if (cnt != cnt_buf)
        ss_free(cnt);
}

/* Hash the keys of part p into h and t from index i on. The part's
 * pointers are read once into locals: with -fno-strict-aliasing each store
 * to h or t would otherwise reload them. */
static inline __attribute__((always_inline)) void s_group_hash(uint64_t *h, uint32_t *t,
                                                               const struct s_part *p, size_t i)
{
    const uint64_t *const keys = p->keys;
    const uint32_t *const tables = p->tables, *const counts = p->counts;
    const size_t n_groups = p->n_groups;

    for (size_t k = 0, j = 0; k < n_groups; k++) {
        const uint64_t salt = s_table_salt(tables[k]);
        const uint32_t table = tables[k];
        for (size_t e = j + counts[k]; j < e; j++, i++) {
            h[i] = s_hash(salt, keys[j]);
            t[i] = table;
        }
    }
}

/* Hash the keys of both parts (push first, either may be empty) and order
 * their n indices by stripe, stably: in each stripe the push's keys come
 * before the lookup's, each part's in call order. Release with
 * s_group_fini(). */
static void s_group_init(const ps_embed_t *self, struct s_group *g, const struct s_part *push,
                         const struct s_part *look, size_t n)
{
    g->h = n <= S_SMALL ? g->h_buf : ss_malloc(n * sizeof *g->h);
    g->t = n <= S_SMALL ? g->t_buf : ss_malloc(n * sizeof *g->t);
    g->order = n <= S_SMALL ? g->o_buf : ss_malloc(n * sizeof *g->order);
    s_group_hash(g->h, g->t, push, 0);
    s_group_hash(g->h, g->t, look, push->n);
    if (self->conf.n_stripes == 1) {
        for (size_t i = 0; i < n; i++)
            g->order[i] = (uint32_t)i;
    } else if ((size_t)self->conf.n_stripes > 4 * n) {
        s_group_sparse(self, g, n);
    } else {
        s_group_dense(self, g, n);
    }
}

/* Free what s_group_init() allocated. */
static void s_group_fini(struct s_group *g)
{
    if (g->h != g->h_buf)
        ss_free(g->h);
    if (g->t != g->t_buf)
        ss_free(g->t);
    if (g->order != g->o_buf)
        ss_free(g->order);
}

/* Four floats as one GCC vector (SSE on x86-64, NEON on arm64): the row
 * kernels below use them because -O2 leaves loops of run-time length
 * scalar, and scalar loops were most of a push's instructions. Vector
 * arithmetic is element-wise IEEE arithmetic (no contraction under -std=c11),
 * so every result is the scalar loop's bit for bit. */
typedef float s_v4 __attribute__((vector_size(16)));

static inline s_v4 s_ld4(const float *p)
{
    s_v4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void s_st4(float *p, s_v4 v)
{
    memcpy(p, &v, sizeof v);
}

/* Sum of (g[i] + l2 w[i])^2 in 8 independent lanes (lane l takes the i with
 * i % 8 == l of the whole blocks of 8, lane 0 the rest; the order of the adds
 * is fixed, so results are reproducible). With l2 = 0 it is exactly the sum
 * of g[i]^2. */
static inline float s_sum_sq(const float *g, const float *w, float l2, uint32_t n)
{
    s_v4 lo = {0, 0, 0, 0}, hi = {0, 0, 0, 0};
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        s_v4 a = s_ld4(g + i) + l2 * s_ld4(w + i);
        s_v4 b = s_ld4(g + i + 4) + l2 * s_ld4(w + i + 4);
        lo += a * a;
        hi += b * b;
    }
    for (; i < n; i++) {
        float gi = g[i] + l2 * w[i];
        lo[0] += gi * gi;
    }
    /* (lo0 + lo1), (lo2 + lo3), (hi0 + hi1), (hi2 + hi3) in one add */
#if defined(__clang__)
    s_v4 pair = __builtin_shufflevector(lo, hi, 0, 2, 4, 6) +
                __builtin_shufflevector(lo, hi, 1, 3, 5, 7);
#else
    typedef int s_v4i __attribute__((vector_size(16)));
    s_v4 pair = __builtin_shuffle(lo, hi, (s_v4i){0, 2, 4, 6}) +
                __builtin_shuffle(lo, hi, (s_v4i){1, 3, 5, 7});
#endif
    return (pair[0] + pair[1]) + (pair[2] + pair[3]);
}

/* w[i] -= step * (g[i] + l2 * w[i]) for i < n. */
static inline void s_step(float *w, const float *g, float step, float l2, uint32_t n)
{
    size_t i = 0;

    for (; i + 4 <= n; i += 4) {
        s_v4 wv = s_ld4(w + i);
        s_st4(w + i, wv - step * (s_ld4(g + i) + l2 * wv));
    }
    for (; i < n; i++)
        w[i] -= step * (g[i] + l2 * w[i]);
}

/* An Adagrad accumulator plus a squared gradient, held at FLT_MAX: one that
 * overflowed to infinity would freeze its weights for good (step lr / inf).
 * The PS refuses gradients beyond security.max_abs_value, so this only
 * guards the sum of many large ones. */
static inline float s_acc_add(float acc, float g2)
{
    float sum = acc + g2;
    return sum <= FLT_MAX ? sum : FLT_MAX;
}

/* Full Adagrad on the n floats of w with accumulators acc. */
static inline void s_adagrad(float *w, float *acc, const float *g, float lr, float eps, float l2,
                             uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        float gi = g[i] + l2 * w[i];
        acc[i] = s_acc_add(acc[i], gi * gi);
        w[i] -= lr * gi / (sqrtf(acc[i]) + eps);
    }
}

/* Rowwise Adagrad on the n floats of w with one accumulator *acc. */
static inline void s_rowwise(float *w, float *acc, const float *g, uint32_t n, float lr,
                             float eps, float l2)
{
    *acc = s_acc_add(*acc, s_sum_sq(g, w, l2, n) / (float)n);
    s_step(w, g, lr / (sqrtf(*acc) + eps), l2, n);
}

/* Apply gradient g to row w (weights then state) with the optimizer, after
 * g += l2 * w. Needs the row's stripe lock. */
static void s_apply(const ps_embed_t *self, float *w, const float *g)
{
    const uint32_t dim = self->conf.dim;
    const float lr = self->conf.lr;
    const float eps = self->conf.eps;
    const float l2 = self->conf.l2;

    if (self->conf.optimizer == SS_OPT_SGD) {
        s_step(w, g, lr, l2, dim);
    } else if (self->conf.optimizer == SS_OPT_ADAGRAD) {
        s_adagrad(w, w + dim, g, lr, eps, l2, dim);
    } else if (!self->conf.first_order) {
        s_rowwise(w, w + dim, g, dim, lr, eps, l2);
    } else {
        /* embedding floats and the first-order weight, each with its own acc;
         * the weight's is s_rowwise() with n = 1 written out (the same
         * arithmetic: a sum of one square, divided by 1) */
        s_rowwise(w, w + dim, g, dim - 1, lr, eps, l2);
        float *u = w + dim - 1, *acc = w + dim + 1, gu = g[dim - 1] + l2 * *u;
        *acc = s_acc_add(*acc, gu * gu);
        *u -= lr / (sqrtf(*acc) + eps) * gu;
    }
}

#define S_PF_SLOT 32   /* keys ahead whose slot is prefetched */
#define S_PF_ROW 16    /* keys ahead whose row is prefetched */
#define S_PF_PROBE 4   /* slots the row stage looks at from the home slot */

/* The row a key with hash h probably has: the first of the few slots from its
 * home that holds its hash bits (no key compare: a hint for prefetching), or
 * S_NIL. Needs the stripe's lock. */
static inline uint32_t s_peek_row(const struct s_map *m, uint64_t h)
{
    uint32_t tag = (uint32_t)(h >> 32);
    size_t i = tag & m->mask;
    for (unsigned n = 0; n < S_PF_PROBE; n++, i = (i + 1) & m->mask) {
        if (m->slots[i].row == S_NIL)
            break;
        if (m->slots[i].tag == tag)
            return m->slots[i].row;
    }
    return S_NIL;
}

/* Prefetch every cache line of the bytes [p, p + n). Always inlined: GCC
 * takes a separate void function whose only effect is a prefetch for pure
 * and deletes the calls. */
static inline __attribute__((always_inline)) void s_prefetch_bytes(const void *p, size_t n,
                                                                   int write)
{
    /* each line once: a prefetch that misses the TLB walks the page table */
    uintptr_t end = (uintptr_t)p + n;
    for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63; a < end; a += 64) {
        if (write)
            __builtin_prefetch((const void *)a, 1);
        else
            __builtin_prefetch((const void *)a, 0);
    }
}

/* Prefetch for a key with hash h, whose home slot is in cache by now (see
 * s_prefetch_slot()): every cache line of its row and, for a push (grad: the
 * key's gradient, else NULL), of its gradient, and for a key that seems
 * unstored under admission the line of its admission counters, which the
 * push reads next. Needs the stripe's lock. Always inlined (see
 * s_prefetch_bytes()). */
static inline __attribute__((always_inline)) void s_prefetch(const ps_embed_t *self,
                                                             const struct s_stripe *st,
                                                             uint64_t h, const float *grad)
{
    const struct s_map *m = &st->m;
    uint32_t r = s_peek_row(m, h);
    if (grad)
        s_prefetch_bytes(grad, self->conf.dim * sizeof *grad, 0);
    if (r != S_NIL)
        s_prefetch_bytes(s_row(self, m, r), self->stride, grad || self->recency);
    else if (grad && self->conf.admit_after >= 2)
        ps_admit_prefetch(&st->admit, h);
}

/* Start loading the home slot of a key with hash h, in any stripe, with no
 * lock held. The slot array and mask are read atomically (s_rehash stores
 * them so): a prefetch of a stale address is harmless, nothing is read
 * through it. Always inlined, like s_prefetch(). */
static inline __attribute__((always_inline)) void s_prefetch_slot(const ps_embed_t *self,
                                                                  uint64_t h)
{
    const struct s_map *m = &self->stripes[h & (self->conf.n_stripes - 1)].m;
    const struct s_slot *slots = __atomic_load_n(&m->slots, __ATOMIC_RELAXED);
    size_t mask = __atomic_load_n(&m->mask, __ATOMIC_RELAXED);
    __builtin_prefetch(&slots[(uint32_t)(h >> 32) & mask]);
}

/* Keep the home-slot prefetch S_PF_SLOT keys ahead of grouped position j of
 * the n keys of g: *pf is the next position whose slot is not prefetched.
 * It rolls on across stripes, so the next stripe's first slots are in cache
 * when its run starts. */
static inline __attribute__((always_inline)) void s_prefetch_slots_to(const ps_embed_t *self,
                                                                      const struct s_group *g,
                                                                      size_t j, size_t n,
                                                                      size_t *pf)
{
    for (; *pf < n && *pf < j + S_PF_SLOT; (*pf)++)
        s_prefetch_slot(self, g->h[g->order[*pf]]);
}

/* Serve the keys at grouped positions [j, end) of g, all in stripe st: apply
 * the push part's gradients, copy rows out for the lookup part (push keys
 * first: g orders them so). Counts refused keys in each part's full. Takes
 * st->lock once. The loop keeps what it reads of self, g and the parts in
 * locals: with -fno-strict-aliasing every store to a row would otherwise
 * make the compiler load them again. */
static void s_access_stripe(ps_embed_t *self, struct s_stripe *st, const struct s_group *g,
                            size_t j, size_t end, size_t n, size_t *pf, struct s_part *push,
                            struct s_part *look)
{
    const uint32_t dim = self->conf.dim;
    const uint32_t *const order = g->order;
    const uint64_t *const h = g->h;
    const uint32_t *const t = g->t;
    const size_t n_push = push->n;
    const uint64_t *const pkeys = push->keys, *const lkeys = look->keys;
    const float *const grads = push->grads;
    float *const rows_out = look->rows_out;
    size_t full_push = 0, full_look = 0;

    ss_assert(pthread_mutex_lock(&st->lock) == 0);
    /* read under the lock: stamps then never go back within a stripe */
    uint32_t now = atomic_load_explicit(&self->now_s, memory_order_relaxed);
    /* the run's first rows, all in flight before the first is used: their
     * slots were prefetched while earlier stripes were served, and a request
     * leaves few keys in each stripe */
    for (size_t q = j; q < end && q < j + S_PF_ROW; q++) {
        uint32_t k = order[q];
        s_prefetch(self, st, h[k], k < n_push ? grads + (size_t)k * dim : NULL);
    }
    for (; j < end; j++) {
        uint32_t k = order[j];
        int refused = 0;
        /* two-stage prefetch: large shards miss the cache on both the slot
         * and the row for almost every key */
        s_prefetch_slots_to(self, g, j, n, pf);
        if (j + S_PF_ROW < end) {
            uint32_t kf = order[j + S_PF_ROW];
            s_prefetch(self, st, h[kf], kf < n_push ? grads + (size_t)kf * dim : NULL);
        }
        if (k < n_push) {
            uint32_t r = s_get(self, st, t[k], pkeys[k], h[k], 1, now, &refused);
            if (r != S_NIL)
                s_apply(self, s_w(self, &st->m, r), grads + (size_t)k * dim);
            full_push += (size_t)refused;
        } else {
            size_t i = k - n_push;
            float *out = rows_out + i * dim;
            uint32_t r = s_get(self, st, t[k], lkeys[i], h[k], 0, now, &refused);
            if (r != S_NIL)
                ss_copy_floats(out, s_w(self, &st->m, r), dim);
            else
                s_init_row(self, h[k], out);
            full_look += (size_t)refused;
        }
    }
    ss_assert(pthread_mutex_unlock(&st->lock) == 0);
    push->full += full_push;
    look->full += full_look;
}

/* Check a part's tables and count its keys into p->n. Returns 0, SS_E_RANGE
 * or SS_E_TOOBIG. */
static int s_part_check(const ps_embed_t *self, struct s_part *p)
{
    size_t n = 0;
    for (size_t k = 0; k < p->n_groups; k++) {
        if (p->tables[k] >= self->conf.n_tables)
            return SS_E_RANGE;
        n += p->counts[k];
    }
    if (n >= UINT32_MAX)
        return SS_E_TOOBIG;
    p->n = n;
    return 0;
}

/* Shared body of lookup, push and push-then-lookup: group the keys of both
 * parts (of all tables) by stripe and serve each stripe's keys under its
 * lock, the push's before the lookup's (one request's keys together, so that
 * the prefetches run ahead over many keys). Keys of different stripes never
 * share a row, so this gives each row what a whole push then a whole lookup
 * would. */
static int s_access(ps_embed_t *self, struct s_part *push, struct s_part *look)
{
    const uint64_t smask = self->conf.n_stripes - 1;
    struct s_group g;
    int rc;

    if ((rc = s_part_check(self, push)) != 0 || (rc = s_part_check(self, look)) != 0)
        return rc;
    size_t n = push->n + look->n;
    if (n >= UINT32_MAX)
        return SS_E_TOOBIG;
    if (n == 0)
        return 0;
    ss_assert((push->n == 0 || (push->keys && push->grads)) &&
              (look->n == 0 || (look->keys && look->rows_out)));
    s_group_init(self, &g, push, look, n);
    size_t pf = 0;   /* the next grouped position whose slot is not prefetched */
    s_prefetch_slots_to(self, &g, 0, n, &pf);
    for (size_t j = 0, end; j < n; j = end) {
        uint64_t stripe = g.h[g.order[j]] & smask;
        for (end = j + 1; end < n && (g.h[g.order[end]] & smask) == stripe; end++)
            ;
        s_access_stripe(self, &self->stripes[stripe], &g, j, end, n, &pf, push, look);
    }
    s_group_fini(&g);
    return 0;
}

/* Run one part alone (the other empty) and add its refusals to *n_full. */
static int s_access_one(ps_embed_t *self, size_t n_groups, const uint32_t *tables,
                        const uint32_t *counts, const uint64_t *keys, float *rows_out,
                        const float *grads, size_t *n_full)
{
    struct s_part p = {n_groups, tables, counts, keys, 0, grads, rows_out, 0};
    struct s_part none = {0, NULL, NULL, NULL, 0, NULL, NULL, 0};
    int rc = grads ? s_access(self, &p, &none) : s_access(self, &none, &p);
    if (rc == 0 && n_full)
        *n_full += p.full;
    return rc;
}

int ps_embed_lookup(ps_embed_t *self, uint32_t table, const uint64_t *keys, size_t n,
                    float *rows_out, size_t *n_full)
{
    uint32_t count = (uint32_t)n;
    ss_assert(self);
    if (n >= UINT32_MAX)
        return table >= self->conf.n_tables ? SS_E_RANGE : SS_E_TOOBIG;
    return s_access_one(self, 1, &table, &count, keys, rows_out, NULL, n_full);
}

int ps_embed_push(ps_embed_t *self, uint32_t table, const uint64_t *keys, size_t n,
                  const float *grads, size_t *n_full)
{
    uint32_t count = (uint32_t)n;
    ss_assert(self && (grads || n == 0));
    if (n >= UINT32_MAX)
        return table >= self->conf.n_tables ? SS_E_RANGE : SS_E_TOOBIG;
    return s_access_one(self, 1, &table, &count, keys, NULL, grads, n_full);
}

int ps_embed_lookup_groups(ps_embed_t *self, size_t n_groups, const uint32_t *tables,
                           const uint32_t *counts, const uint64_t *keys, float *rows_out,
                           size_t *n_full)
{
    ss_assert(self);
    return s_access_one(self, n_groups, tables, counts, keys, rows_out, NULL, n_full);
}

int ps_embed_push_groups(ps_embed_t *self, size_t n_groups, const uint32_t *tables,
                         const uint32_t *counts, const uint64_t *keys, const float *grads,
                         size_t *n_full)
{
    ss_assert(self);
    return s_access_one(self, n_groups, tables, counts, keys, NULL, grads, n_full);
}

int ps_embed_push_lookup_groups(ps_embed_t *self, const struct ps_embed_groups *push,
                                const float *grads, const struct ps_embed_groups *look,
                                float *rows_out, size_t *n_full_push, size_t *n_full_look)
{
    ss_assert(self && push && look);
    struct s_part p = {push->n_groups, push->tables, push->counts, push->keys, 0, grads, NULL,
                       0};
    struct s_part l = {look->n_groups, look->tables, look->counts, look->keys, 0, NULL,
                       rows_out, 0};
    size_t cap = self->conf.capacity_rows;
    int rc;

    /* at capacity the order in which keys reserve rows decides which are
     * refused: there the two parts go one after the other, as two calls */
    if ((rc = s_part_check(self, &p)) != 0 || (rc = s_part_check(self, &l)) != 0)
        return rc;
    if (ps_embed_rows(self) + p.n + l.n > cap) {
        size_t np = 0, nl = 0;
        rc = ps_embed_push_groups(self, p.n_groups, p.tables, p.counts, p.keys, grads, &np);
        if (rc == 0)
            rc = ps_embed_lookup_groups(self, l.n_groups, l.tables, l.counts, l.keys, rows_out,
                                        &nl);
        p.full = np;
        l.full = nl;
    } else {
        rc = s_access(self, &p, &l);
    }
    if (rc == 0 && n_full_push)
        *n_full_push += p.full;
    if (rc == 0 && n_full_look)
        *n_full_look += l.full;
    return rc;
}

int ps_embed_read_row(ps_embed_t *self, uint32_t table, uint64_t key, float *out)
{
    ss_assert(self && out);
    if (table >= self->conf.n_tables)
        return SS_E_RANGE;
    uint64_t h = s_hash(s_table_salt(table), key);
    struct s_stripe *st = &self->stripes[h & (self->conf.n_stripes - 1)];
    int found;
    ss_assert(pthread_mutex_lock(&st->lock) == 0);
    size_t i = s_probe(self, &st->m, table, key, h, &found);
    if (found)
        memcpy(out, s_w(self, &st->m, st->m.slots[i].row), self->row_floats * sizeof(float));
    ss_assert(pthread_mutex_unlock(&st->lock) == 0);
    return found ? 0 : SS_E_NOTFOUND;
}

/* Start loading the weights of the stored row a key with hash h probably
 * has (s_peek_row), for reading. Needs the stripe's lock. Always inlined
 * (see s_prefetch_bytes()). */
static inline __attribute__((always_inline)) void s_prefetch_peek(const ps_embed_t *self,
                                                                  const struct s_stripe *st,
                                                                  uint64_t h)
{
    uint32_t r = s_peek_row(&st->m, h);
    if (r != S_NIL)
        s_prefetch_bytes(s_w(self, &st->m, r), self->conf.dim * sizeof(float), 0);
}

/* Copy out the weights of the keys at grouped positions [j, end) of g, all in
 * stripe st (the initializer row for a key without one), under st->lock
 * taken once, the slots and rows prefetched ahead as s_access_stripe() does.
 * Stores nothing. */
static void s_peek_stripe(ps_embed_t *self, struct s_stripe *st, const struct s_group *g,
                          size_t j, size_t end, size_t n, size_t *pf, const struct s_part *look)
{
    const uint32_t dim = self->conf.dim;
    const uint32_t *const order = g->order;
    const uint64_t *const h = g->h;
    const uint32_t *const t = g->t;
    const uint64_t *const keys = look->keys;
    float *const rows_out = look->rows_out;

    ss_assert(pthread_mutex_lock(&st->lock) == 0);
    for (size_t q = j; q < end && q < j + S_PF_ROW; q++)
        s_prefetch_peek(self, st, h[order[q]]);
    for (; j < end; j++) {
        uint32_t k = order[j];
        float *out = rows_out + (size_t)k * dim;
        int found;
        s_prefetch_slots_to(self, g, j, n, pf);
        if (j + S_PF_ROW < end)
            s_prefetch_peek(self, st, h[order[j + S_PF_ROW]]);
        size_t slot = s_probe(self, &st->m, t[k], keys[k], h[k], &found);
        if (found)
            ss_copy_floats(out, s_w(self, &st->m, st->m.slots[slot].row), dim);
        else
            s_init_row(self, h[k], out);
    }
    ss_assert(pthread_mutex_unlock(&st->lock) == 0);
}

/* DESIGN: a peek groups its keys by stripe like s_access() (one lock a
 * stripe, slots and rows prefetched ahead); each key's row is what a probe
 * of it alone would copy, so the grouping changes no output. */
int ps_embed_peek_groups(ps_embed_t *self, size_t n_groups, const uint32_t *tables,
                         const uint32_t *counts, const uint64_t *keys, float *rows_out)
{
    ss_assert(self);
    const uint64_t smask = self->conf.n_stripes - 1;
    struct s_part look = {n_groups, tables, counts, keys, 0, NULL, rows_out, 0};
    struct s_part none = {0, NULL, NULL, NULL, 0, NULL, NULL, 0};
    struct s_group g;
    int rc;

    if ((rc = s_part_check(self, &look)) != 0)
        return rc;
    size_t n = look.n;
    if (n == 0)
        return 0;
    ss_assert(keys && rows_out);
    s_group_init(self, &g, &none, &look, n);
    size_t pf = 0;   /* the next grouped position whose slot is not prefetched */
    s_prefetch_slots_to(self, &g, 0, n, &pf);
    for (size_t j = 0, end; j < n; j = end) {
        uint64_t stripe = g.h[g.order[j]] & smask;
        for (end = j + 1; end < n && (g.h[g.order[end]] & smask) == stripe; end++)
            ;
        s_peek_stripe(self, &self->stripes[stripe], &g, j, end, n, &pf, &look);
    }
    s_group_fini(&g);
    return 0;
}

size_t ps_embed_row_floats(const ps_embed_t *self)
{
    return self->row_floats;
}

const struct ps_embed_conf *ps_embed_conf(const ps_embed_t *self)
{
    return &self->conf;
}

size_t ps_embed_rows(ps_embed_t *self)
{
    return atomic_load_explicit(&self->n_rows, memory_order_relaxed);
}

size_t ps_embed_bytes(ps_embed_t *self)
{
    size_t idle = self->own_pool ? ps_pool_idle_bytes(self->pool) : 0;
    return atomic_load_explicit(&self->bytes, memory_order_relaxed) + idle;
}

void ps_embed_stats(ps_embed_t *self, struct ps_embed_stats *out)
{
    ss_assert(self && out);
    memset(out, 0, sizeof *out);
    for (uint32_t i = 0; i < self->conf.n_stripes; i++) {
        struct s_stripe *st = &self->stripes[i];
        out->rows_admitted += atomic_load_explicit(&st->n_admitted, memory_order_relaxed);
        out->keys_not_admitted += atomic_load_explicit(&st->n_not_admitted, memory_order_relaxed);
        out->rows_evicted_ttl += atomic_load_explicit(&st->n_evict_ttl, memory_order_relaxed);
        out->rows_evicted_memory += atomic_load_explicit(&st->n_evict_mem, memory_order_relaxed);
    }
}

/* ------------------------------------------------------------ clock, TTL */

/* Move st's sweep cursor over step/period of its rows (rounded up; a whole
 * pass per period) and delete the expired rows it meets, then give memory
 * back. A deletion moves the last row under the cursor, which looks at it
 * before moving on, so every row is looked at in each pass. Takes st->lock.
 * Returns the rows deleted. */
static size_t s_expire_stripe(ps_embed_t *self, struct s_stripe *st, uint32_t step_s,
                              uint32_t period_s)
{
    struct s_map *m = &st->m;
    size_t deleted = 0;

    ss_assert(pthread_mutex_lock(&st->lock) == 0);
    uint32_t now = atomic_load_explicit(&self->now_s, memory_order_relaxed);
    size_t n = ((size_t)m->n_rows * step_s + period_s - 1) / period_s;
    for (size_t moved = 0; moved < n && m->n_rows > 0;) {
        if (m->sweep >= m->n_rows)
            m->sweep = 0;
        if (s_expired(self, s_hdr(self, m, m->sweep)->stamp, now)) {
            s_delete(self, m, m->sweep);
            deleted++;
        } else {
            m->sweep++;
            moved++;
        }
    }
    if (deleted) {
        s_shrink(self, m);
        s_count(&st->n_evict_ttl, deleted);
    }
    ss_assert(pthread_mutex_unlock(&st->lock) == 0);
    return deleted;
}

size_t ps_embed_tick(ps_embed_t *self, uint32_t now_s)
{
    ss_assert(self);
    uint32_t cur = atomic_load(&self->now_s);
    size_t n = 0;

    ss_assert(now_s < (1u << 31));
    while (now_s > cur && !atomic_compare_exchange_weak(&self->now_s, &cur, now_s))
        ;
    if (!self->conf.ttl_s || now_s <= self->swept_s)
        return 0;
    /* sweep every row once per period: a quarter of the TTL, at least 1 s */
    uint32_t period = self->conf.ttl_s / 4 ? self->conf.ttl_s / 4 : 1;
    uint32_t step = now_s - self->swept_s < period ? now_s - self->swept_s : period;
    self->swept_s = now_s;
    for (uint32_t i = 0; i < self->conf.n_stripes; i++)
        n += s_expire_stripe(self, &self->stripes[i], step, period);
    return n;
}

/* ---------------------------------------------------------------- verify */

/* Fail verify: log what broke in which stripe. */
static int s_broken(uint32_t stripe, const char *what)
{
    SS_LOG(SS_LOG_ERROR, "embedding shard: stripe %u: %s", stripe, what);
    return SS_E_CORRUPT;
}

/* Slots against rows: each row has exactly one slot, reachable by a probe,
 * with the right hash bits and stripe. Needs the stripe's lock. */
static const char *s_verify_slots(const ps_embed_t *self, const struct s_map *m, uint32_t idx)
{
    uint8_t *seen = ss_calloc(m->n_rows + 1u, 1);
    size_t used = 0;
    const char *bad = NULL;

    for (size_t i = 0; i <= m->mask && !bad; i++) {
        const struct s_slot *s = &m->slots[i];
        if (s->row == S_NIL)
            continue;
        used++;
        if (s->row >= m->n_rows || seen[s->row]++) {
            bad = "a slot points past the rows or at a row with another slot";
            break;
        }
        const struct s_hdr *hd = s_hdr(self, m, s->row);
        uint64_t h = s_hash(s_table_salt(hd->table), hd->key);
        int found;
        if ((uint32_t)(h >> 32) != s->tag || (h & (self->conf.n_stripes - 1)) != idx)
            bad = "a slot's hash bits or stripe do not match its row's key";
        else if (s_probe(self, m, hd->table, hd->key, h, &found) != i || !found)
            bad = "a row is not reachable from its home slot";
    }
    if (!bad && used != m->n_rows)
        bad = "used slots differ from n_rows";
    ss_free(seen);
    return bad;
}

/* Byte count of m from what it holds. */
static size_t s_map_bytes(const ps_embed_t *self, const struct s_map *m)
{
    return (m->mask + 1) * sizeof(struct s_slot) + m->slabs_cap * sizeof *m->slabs +
           (size_t)m->n_slabs * self->slab_bytes;
}

int ps_embed_verify(ps_embed_t *self)
{
    ss_assert(self);
    size_t rows = 0, bytes = self->fixed_bytes;
    const char *bad = NULL;
    uint32_t i;

    for (i = 0; i < self->conf.n_stripes && !bad; i++) {
        struct s_stripe *st = &self->stripes[i];
        const struct s_map *m = &st->m;
        ss_assert(pthread_mutex_lock(&st->lock) == 0);
        if (m->bytes != s_map_bytes(self, m))
            bad = "its byte count differs from its slots and slabs";
        else if (self->budget && m->bytes > self->budget)
            bad = "it is over its memory budget";
        else if ((size_t)m->n_slabs * self->slab_rows < m->n_rows)
            bad = "rows beyond its slabs";
        else if ((size_t)m->n_rows * 4 > (m->mask + 1) * 3)
            bad = "its slot array is over 3/4 full";
        else if (m->hand > m->n_rows || m->sweep > m->n_rows)
            bad = "its CLOCK hand or sweep cursor is past the rows";
        if (!bad)
            bad = s_verify_slots(self, m, i);
        rows += m->n_rows;
        bytes += m->bytes;
        ss_assert(pthread_mutex_unlock(&st->lock) == 0);
    }
    if (bad)
        return s_broken(i - 1, bad);
    size_t total = atomic_load_explicit(&self->bytes, memory_order_relaxed);
    if (rows != ps_embed_rows(self) || bytes != total) {
        SS_LOG(SS_LOG_ERROR, "embedding shard: rows %zu and bytes %zu, the totals say %zu and %zu",
               rows, bytes, ps_embed_rows(self), total);
        return SS_E_CORRUPT;
    }
    return 0;
}

/* ----------------------------------------------------------- checkpoints */

/* Checkpoint shape[2]: the optimizer, plus 256 with first-order weights (so a
 * file written without them, version 1's only kind, keeps its value). */
static uint64_t s_shape_opt(const struct ps_embed_conf *c)
{
    return (uint64_t)c->optimizer + (c->first_order ? 256u : 0u);
}

/* Bytes of one checkpoint record. */
static size_t s_rec_bytes(const ps_embed_t *self)
{
    return S_REC_HEAD + self->row_floats * sizeof(float);
}

/* Write row r of m as a checkpoint record at p. */
static void s_put_rec(const ps_embed_t *self, const struct s_map *m, uint32_t r,
                      unsigned char *p)
{
    const struct s_hdr *hd = s_hdr(self, m, r);
    uint64_t key = hd->key;
    uint32_t table = hd->table, zero = 0;

    memcpy(p, &key, 8);
    memcpy(p + 8, &table, 4);
    memcpy(p + 12, &zero, 4);
    memcpy(p + S_REC_HEAD, s_w(self, m, r), self->row_floats * sizeof(float));
}

/* Copy every row of st as checkpoint records into *buf (grown as needed), in
 * the order the CLOCK hand meets them (from the hand on, wrapping around):
 * the next victims first. Takes st->lock. Returns the number of records, or
 * SIZE_MAX when *buf cannot grow (no memory: logged, *buf as it was). */
static size_t s_copy_stripe(ps_embed_t *self, const char *path, struct s_stripe *st,
                            unsigned char **buf, size_t *cap)
{
    const struct s_map *m = &st->m;
    size_t rec = s_rec_bytes(self);
    size_t n = 0;

    ss_assert(pthread_mutex_lock(&st->lock) == 0);
    if ((size_t)m->n_rows * rec > *cap) {
        size_t want = (size_t)m->n_rows * rec;
        unsigned char *grown = ss_try_malloc(want);
        if (!grown) {
            ss_assert(pthread_mutex_unlock(&st->lock) == 0);
            SS_LOG(SS_LOG_ERROR, "checkpoint %s: no memory to copy a stripe's %zu bytes of "
                   "rows; an older file there is kept", path, want);
            return SIZE_MAX;
        }
        ss_free(*buf);
        *buf = grown;
        *cap = want;
    }
    uint32_t start = m->hand < m->n_rows ? m->hand : 0;
    for (uint32_t k = 0; k < m->n_rows; k++) {
        uint32_t r = start + k < m->n_rows ? start + k : start + k - m->n_rows;
        s_put_rec(self, m, r, *buf + n++ * rec);
    }
    ss_assert(n == m->n_rows);
    ss_assert(pthread_mutex_unlock(&st->lock) == 0);
    return n;
}

int ps_embed_checkpoint(ps_embed_t *self, const char *path, const struct ps_ckpt_who *who)
{
    ss_assert(self && path && who);
    ps_ckpt_writer_t *w;
    unsigned char *buf = NULL;
    size_t cap = 0;
    uint64_t total = 0;
    int rc;

    if ((rc = ps_ckpt_begin(path, &w)) != 0)
        return rc;
    for (uint32_t i = 0; i < self->conf.n_stripes; i++) {
        size_t n = s_copy_stripe(self, path, &self->stripes[i], &buf, &cap);
        if (n == SIZE_MAX) {
            rc = SS_E_NOMEM;   /* fails this checkpoint, not the PS; the older file stays */
            break;
        }
        total += n;
        if ((rc = ps_ckpt_write(w, buf, n * s_rec_bytes(self))) != 0)
            break;
    }
    ss_free(buf);
    if (rc != 0) {
        ps_ckpt_abort(&w);
        return rc;
    }
    struct ps_ckpt_hdr hdr = {
        .kind = PS_CKPT_EMBED,
        .shard = who->shard,
        .shape = {self->conf.n_tables, self->conf.dim, s_shape_opt(&self->conf), total},
        .n_shards = who->n_shards,
        .map_id = SS_KEY_SHARD_MAP_ID,
        .job_id = who->job_id,
        .save_id = who->save_id,
    };
    if ((rc = ps_ckpt_commit(&w, &hdr)) == 0)
        SS_LOG(SS_LOG_INFO, "checkpoint %s: wrote %llu rows", path, (unsigned long long)total);
    return rc;
}

/* Check the header of an embedding checkpoint against self (and its row count
 * against capacity_rows when whole: the file is loaded whole). Returns 0,
 * SS_E_CORRUPT or SS_E_FULL (logged). */
static int s_check_shape(const ps_embed_t *self, const char *path, uint32_t shard,
                         const struct ps_ckpt_hdr *hdr, int whole)
{
    const struct ps_embed_conf *c = &self->conf;
    uint64_t rows = hdr->shape[3];

    if (hdr->shard != shard) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: written by shard %u, this is shard %u", path,
               hdr->shard, shard);
        return SS_E_CORRUPT;
    }
    if (hdr->shape[0] != c->n_tables || hdr->shape[1] != c->dim ||
        hdr->shape[2] != s_shape_opt(c)) {
        SS_LOG(SS_LOG_ERROR,
               "checkpoint %s: shape n_tables=%llu dim=%llu optimizer=%llu first_order=%llu, "
               "this shard has n_tables=%u dim=%u optimizer=%d first_order=%u", path,
               (unsigned long long)hdr->shape[0], (unsigned long long)hdr->shape[1],
               (unsigned long long)(hdr->shape[2] & 255), (unsigned long long)(hdr->shape[2] >> 8),
               c->n_tables, c->dim, c->optimizer, c->first_order);
        return SS_E_CORRUPT;
    }
    if (rows > hdr->payload_bytes / s_rec_bytes(self) ||
        rows * s_rec_bytes(self) != hdr->payload_bytes) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: %llu payload bytes do not hold %llu rows", path,
               (unsigned long long)hdr->payload_bytes, (unsigned long long)rows);
        return SS_E_CORRUPT;
    }
    if (whole && rows > c->capacity_rows) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: %llu rows exceed capacity_rows %zu", path,
               (unsigned long long)rows, c->capacity_rows);
        return SS_E_FULL;
    }
    return 0;
}

/* Which records of a file a re-sharding restore keeps (see s_restore_set()). */
struct s_filter {
    uint32_t from, n_from;  /* the file is shard `from` of n_from: every key must map there */
    uint32_t to, n_to;      /* keep the keys that map to shard `to` of n_to */
    uint64_t kept;          /* records kept so far */
};

/* 1 if the record of (table, key) at path is to be stored under filter f (NULL:
 * every record); 0 to skip it; SS_E_CORRUPT (logged) if it is not the file's. */
static int s_keep(const char *path, struct s_filter *f, uint32_t table, uint64_t key)
{
    if (!f)
        return 1;
    uint32_t owner = ss_key_shard(key, f->n_from);
    if (owner != f->from) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: row (table %u key %016llx) belongs to shard %u of "
               "%u, not to this file's shard %u: the set is not what its files say (a file "
               "missing, or another key map); restore into %u shards, which needs only each "
               "PS's own file", path, table, (unsigned long long)key, owner, f->n_from, f->from,
               f->n_from);
        return SS_E_CORRUPT;
    }
    if (ss_key_shard(key, f->n_to) != f->to)
        return 0;
    f->kept++;
    return 1;
}

/* Store one checkpoint record into the private shard dst (no other thread can
 * see dst, so its stripes are used without their locks) if filter f keeps it.
 * Admission does not apply; the memory bound does (the least recently loaded
 * rows go first). Returns 0, SS_E_CORRUPT or SS_E_FULL (logged). */
static int s_load_rec(ps_embed_t *dst, const char *path, const unsigned char *p, uint32_t now,
                      struct s_filter *f)
{
    uint64_t key;
    uint32_t table, zero;
    int found, keep;

    memcpy(&key, p, 8);
    memcpy(&table, p + 8, 4);
    memcpy(&zero, p + 12, 4);
    if (table >= dst->conf.n_tables || zero != 0) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: bad record (table %u)", path, table);
        return SS_E_CORRUPT;
    }
    if ((keep = s_keep(path, f, table, key)) <= 0)
        return keep;
    const float *v = (const float *)(const void *)(p + S_REC_HEAD);
    uint64_t bad = ss_floats_first_nonfinite(v, dst->row_floats);
    if (bad < dst->row_floats) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: row (table %u key %016llx) value %llu is not "
               "finite (NaN or infinity): the run that saved it diverged; restore an earlier "
               "checkpoint or start without one", path, table, (unsigned long long)key,
               (unsigned long long)bad);
        return SS_E_CORRUPT;
    }
    uint64_t h = s_hash(s_table_salt(table), key);
    struct s_stripe *st = &dst->stripes[h & (dst->conf.n_stripes - 1)];
    s_probe(dst, &st->m, table, key, h, &found);
    uint32_t r = found ? S_NIL : s_insert(dst, st, table, key, h, now);
    if (r == S_NIL && dst->oom_bytes)
        return SS_E_NOMEM;   /* the caller says so (s_no_memory()) */
    if (r == S_NIL && !found && ps_embed_rows(dst) >= dst->conf.capacity_rows) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: the rows of this shard exceed capacity_rows %zu "
               "(raise tables.capacity_rows)", path, dst->conf.capacity_rows);
        return SS_E_FULL;
    }
    if (r == S_NIL) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: %s (table %u key %llu)", path,
               found ? "duplicate row" : "too many rows", table, (unsigned long long)key);
        return SS_E_CORRUPT;
    }
    memcpy(s_w(dst, &st->m, r), p + S_REC_HEAD, dst->row_floats * sizeof(float));
    return 0;
}

/* Read every record of r into the private shard dst, through filter f.
 * Returns 0, or an error (logged, except SS_E_NOMEM: dst->oom_bytes). */
static int s_load_all(ps_embed_t *dst, const char *path, ps_ckpt_reader_t *r, uint64_t rows,
                      struct s_filter *f)
{
    size_t rec = s_rec_bytes(dst);
    unsigned char *buf = s_mem_malloc(dst, S_RESTORE_BATCH * rec);  /* dst: fallible */
    uint32_t now = atomic_load(&dst->now_s);
    int rc = 0;

    if (!buf)
        return SS_E_NOMEM;
    while (rows && rc == 0) {
        size_t k = rows < S_RESTORE_BATCH ? (size_t)rows : S_RESTORE_BATCH;
        if ((rc = ps_ckpt_read(r, buf, k * rec)) != 0)
            break;
        for (size_t i = 0; i < k && rc == 0; i++)
            rc = s_load_rec(dst, path, buf + i * rec, now, f);
        rows -= k;
    }
    ss_free(buf);
    return rc;
}

/* Put src's map into dst (a stripe's map, its lock held). The slot array
 * and mask are stored atomically, as s_rehash() does: s_prefetch_slot()
 * reads them with no lock from other threads while an online restore swaps
 * the maps. */
static void s_map_move(struct s_map *dst, const struct s_map *src)
{
    __atomic_store_n(&dst->slots, src->slots, __ATOMIC_RELAXED);
    __atomic_store_n(&dst->mask, src->mask, __ATOMIC_RELAXED);
    dst->n_rows = src->n_rows;
    dst->n_slabs = src->n_slabs;
    dst->slabs_cap = src->slabs_cap;
    dst->slabs = src->slabs;
    dst->hand = src->hand;
    dst->sweep = src->sweep;
    dst->bytes = src->bytes;
}

/* Swap the stored contents of a and b (same conf), stripe by stripe, each under
 * its lock; b's memory evictions are added to a's counters, and a's admission
 * counts are cleared (as a PS started from the save has none). b is private
 * to the caller. The shard-wide row and byte counts move by each stripe's difference
 * while its lock is held, not by one exchange at the end: rows that other
 * threads create (or a tick deletes) in a's stripes during the swap stay
 * counted (test_ps_embed: test_restore_while_inserting). */
static void s_swap_contents(ps_embed_t *a, ps_embed_t *b)
{
    for (uint32_t i = 0; i < a->conf.n_stripes; i++) {
        struct s_stripe *x = &a->stripes[i];
        struct s_stripe *y = &b->stripes[i];
        ss_assert(pthread_mutex_lock(&x->lock) == 0);
        ss_assert(pthread_mutex_lock(&y->lock) == 0);
        size_t dr = (size_t)y->m.n_rows - x->m.n_rows;   /* mod 2^N: signed difference */
        size_t db = y->m.bytes - x->m.bytes;
        struct s_map t = x->m;
        s_map_move(&x->m, &y->m);
        s_map_move(&y->m, &t);
        atomic_fetch_add(&a->n_rows, dr);
        atomic_fetch_sub(&b->n_rows, dr);
        atomic_fetch_add(&a->bytes, db);
        atomic_fetch_sub(&b->bytes, db);
        s_count(&x->n_evict_mem, atomic_load_explicit(&y->n_evict_mem, memory_order_relaxed));
        ps_admit_clear(&x->admit);   /* the counts since the save go too (ps_embed.h) */
        ss_assert(pthread_mutex_unlock(&y->lock) == 0);
        ss_assert(pthread_mutex_unlock(&x->lock) == 0);
    }
}

/* Swap fresh's rows into self and warn about the rows the memory bound
 * evicted while loading (of `rows` loaded). */
static void s_install(ps_embed_t *self, ps_embed_t *fresh, const char *what, uint64_t rows)
{
    struct ps_embed_stats dropped;
    ps_embed_stats(fresh, &dropped);
    s_swap_contents(self, fresh);
    if (dropped.rows_evicted_memory)
        SS_LOG(SS_LOG_WARN,
               "checkpoint %s: %llu of %llu rows do not fit max_memory_bytes %zu: the least "
               "recently used were dropped", what,
               (unsigned long long)dropped.rows_evicted_memory, (unsigned long long)rows,
               self->conf.max_memory_bytes);
}

/* About the bytes a private shard needs to load rows rows aside: each
 * stripe's share (rows spread evenly) in whole slabs, its slot array at
 * most 3/4 full, its empty map, the shard's structs and the read buffer;
 * with max_memory_bytes, at most that. For the error a restore that cannot
 * get them answers. */
static size_t s_restore_need(const ps_embed_t *self, uint64_t rows)
{
    uint64_t n = self->conf.n_stripes, per = (rows + n - 1) / n;
    uint64_t slabs = (per + self->slab_rows - 1) / self->slab_rows, slots = S_MIN_SLOTS;
    while (slots * 3 < per * 4)
        slots *= 2;
    uint64_t map = slabs * self->slab_bytes + slots * sizeof(struct s_slot) +
                   s_map_empty_bytes(self) - S_MIN_SLOTS * sizeof(struct s_slot);
    uint64_t b = self->fixed_bytes + n * map;
    if (self->conf.max_memory_bytes && b > self->conf.max_memory_bytes)
        b = self->conf.max_memory_bytes;
    b += (uint64_t)S_RESTORE_BATCH * s_rec_bytes(self);
    return b > SIZE_MAX ? SIZE_MAX : (size_t)b;
}

/* A restore of `what` (rows rows) could not get its memory (fresh NULL: not
 * even its private shard's structs): log it with the fix, and remember the
 * bytes for ps_embed_restore_need(). Returns SS_E_NOMEM. */
static int s_no_memory(ps_embed_t *self, const ps_embed_t *fresh, const char *what,
                       uint64_t rows)
{
    size_t need = s_restore_need(self, rows);
    char failed[64] = "its structs";
    if (fresh && fresh->oom_bytes)
        snprintf(failed, sizeof failed, "a block of %zu bytes", fresh->oom_bytes);
    else if (fresh)  /* a member file's read buffer (ps_ckpt_open), not the shard's */
        snprintf(failed, sizeof failed, "a file's read buffer");
    atomic_store(&self->restore_need, need);
    SS_LOG(SS_LOG_ERROR, "checkpoint %s: not enough memory to load its %llu rows aside: about "
           "%zu bytes beside the %zu of the shard held now (%s could not be had); the shard "
           "is as it was. Give the PS more memory (a PS started from the save with shadow-ps "
           "--restore needs no more than that: its shard is empty)", what,
           (unsigned long long)rows, need, ps_embed_bytes(self), failed);
    return SS_E_NOMEM;
}

/* Free a restore's private shard (after the swap: the old rows; after a
 * failure: what was loaded) and give the whole chunks that frees in a pooled
 * shard back to the system: the pool would keep them idle, a second copy of
 * the shard after a restore, and after one that ran out of memory all the
 * memory it could get, which the PS then lacks to serve. */
static void s_drop_fresh(ps_embed_t *self, ps_embed_t **fresh_p)
{
    ps_embed_destroy(fresh_p);
    if (self->pool) {
        size_t b = ps_pool_trim(self->pool);
        if (b)
            SS_LOG(SS_LOG_DEBUG, "restore: %zu bytes of whole free chunks given back", b);
    }
}

size_t ps_embed_restore_need(ps_embed_t *self)
{
    ss_assert(self);
    return atomic_load(&self->restore_need);
}

int ps_embed_restore(ps_embed_t *self, const char *path, uint32_t shard)
{
    ss_assert(self && path);
    struct ps_ckpt_hdr hdr;
    ps_ckpt_reader_t *r;
    ps_embed_t *fresh;
    int rc;

    atomic_store(&self->restore_need, 0);
    if ((rc = ps_ckpt_open(path, PS_CKPT_EMBED, &hdr, &r)) != 0)
        return rc;
    if ((rc = s_check_shape(self, path, shard, &hdr, 1)) != 0)
        goto out_close;
    if (!(fresh = s_new(&self->conf, self))) {
        rc = s_no_memory(self, NULL, path, hdr.shape[3]);
        goto out_close;
    }
    atomic_store(&fresh->now_s, atomic_load(&self->now_s));
    if ((rc = s_load_all(fresh, path, r, hdr.shape[3], NULL)) != 0 ||
        (rc = ps_ckpt_verify(r)) != 0) {
        if (rc == SS_E_NOMEM)
            s_no_memory(self, fresh, path, hdr.shape[3]);
        goto out_destroy;
    }
    s_install(self, fresh, path, hdr.shape[3]);
    SS_LOG(SS_LOG_INFO, "checkpoint %s: restored %zu rows", path, ps_embed_rows(self));

out_destroy:
    s_drop_fresh(self, &fresh);
out_close:
    ps_ckpt_close(&r);
    return rc;
}

/* Load shard j's file of set into fresh through f. Returns 0 or an error
 * (logged); adds the file's row count to *rows. */
static int s_load_member(ps_embed_t *self, ps_embed_t *fresh, const struct ps_ckpt_set *set,
                         uint32_t j, struct s_filter *f, uint64_t *rows)
{
    const char *path = set->paths[j];
    struct ps_ckpt_hdr hdr;
    ps_ckpt_reader_t *r;
    int rc;

    if ((rc = ps_ckpt_open(path, PS_CKPT_EMBED, &hdr, &r)) != 0)
        return rc;
    f->from = j;
    if ((rc = s_check_shape(self, path, j, &hdr, 0)) == 0 &&
        (rc = s_load_all(fresh, path, r, hdr.shape[3], f)) == 0)
        rc = ps_ckpt_verify(r);
    *rows += hdr.shape[3];
    ps_ckpt_close(&r);
    return rc;
}

/* Re-shard: keep the rows of every file of set that map to shard of n_shards. */
static int s_restore_set(ps_embed_t *self, const char *dir, const struct ps_ckpt_set *set,
                         uint32_t shard, uint32_t n_shards)
{
    struct s_filter f = {.n_from = set->n, .to = shard, .n_to = n_shards};
    uint32_t map = set->hdrs[0].map_id;
    uint64_t rows = 0;
    int rc = 0;

    if (map != 0 && map != SS_KEY_SHARD_MAP_ID) {
        SS_LOG(SS_LOG_ERROR, "checkpoint set %s: written with key map %u, this build maps keys "
               "with map %u and cannot move its rows: restore into %u shards", dir, map,
               SS_KEY_SHARD_MAP_ID, set->n);
        return SS_E_CORRUPT;
    }
    uint64_t all = 0;   /* the rows of every file: about all / n_shards are kept */
    for (uint32_t j = 0; j < set->n; j++)
        all += set->hdrs[j].shape[3];
    ps_embed_t *fresh = s_new(&self->conf, self);
    if (!fresh)
        return s_no_memory(self, NULL, dir, all / n_shards);
    atomic_store(&fresh->now_s, atomic_load(&self->now_s));
    for (uint32_t j = 0; j < set->n && rc == 0; j++)
        rc = s_load_member(self, fresh, set, j, &f, &rows);
    if (rc == SS_E_NOMEM)
        s_no_memory(self, fresh, dir, all / n_shards);
    if (rc == 0) {
        s_install(self, fresh, dir, f.kept);
        SS_LOG(SS_LOG_INFO, "checkpoint set %s: restored %zu rows from %u files (saved with %u "
               "shards, this job has %u; re-sharded): the %llu of %llu saved rows that map to "
               "shard %u", dir, ps_embed_rows(self), set->n, set->n, n_shards,
               (unsigned long long)f.kept, (unsigned long long)rows, shard);
    }
    s_drop_fresh(self, &fresh);
    return rc;
}

int ps_embed_restore_dir(ps_embed_t *self, const char *dir, uint32_t shard, uint32_t n_shards)
{
    ss_assert(self && dir && shard < n_shards);
    struct ps_ckpt_set set;
    atomic_store(&self->restore_need, 0);
    int rc = ps_ckpt_set_open(dir, PS_CKPT_NAME_EMBED, PS_CKPT_EMBED, shard, n_shards, &set);
    if (rc != 0)
        return rc;
    if (set.own_only)
        rc = ps_embed_restore(self, set.paths[shard], shard);
    else
        rc = s_restore_set(self, dir, &set, shard, n_shards);
    ps_ckpt_set_free(&set);
    return rc;
}
