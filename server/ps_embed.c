/* ps_embed.c - the embedding shard: striped open-addressing maps over row slabs.
 *
 * DESIGN: the shard is split into n_stripes stripes by the low bits of a hash of
 * (table, key); each stripe has its own pthread mutex, a linear-probing slot array
 * (16 bytes a slot: key, table, row index; table == S_EMPTY marks a free slot, so
 * every key value, 0 included, is usable) and its rows in fixed-size slabs that
 * never move, so growing the slot array copies 16-byte slots only. A call hashes
 * its keys once, groups them by stripe with a stable sort (counting sort; a small
 * sort when stripes far outnumber keys), so duplicates keep call order, and takes
 * each stripe lock once. Per row: its floats plus about 21-43 bytes of slots. The shard-wide row count is an
 * atomic reserved with compare-and-swap before a row is created, so the capacity
 * is never exceeded even under races. Lock order: at most one stripe lock at a
 * time, except restore, which holds one stripe lock of each of two shards (the
 * live one first, the private one second). */
#include "ps_embed.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ps_ckpt.h"
#include "ss_assert.h"
#include "ss_cfg.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"

#define S_EMPTY UINT32_MAX          /* slot.table of a free slot */
#define S_MAX_DIM 65536u            /* largest dim accepted */
#define S_MAX_STRIPES 65536u        /* most lock stripes */
#define S_MIN_SLOTS 16u             /* initial slot array of a stripe */
#define S_SMALL 256u                /* calls up to this many keys use stack scratch */
#define S_SLAB_MAX_BYTES (8u << 20) /* largest slab */
#define S_REC_HEAD 16u              /* checkpoint record: key u64, table u32, zero u32 */
#define S_RESTORE_BATCH 4096u       /* records read at once by restore */

/* One map entry. */
struct s_slot {
    uint64_t key;    /* the key */
    uint32_t table;  /* table id, S_EMPTY if the slot is free */
    uint32_t row;    /* row index within the stripe's slabs */
};

/* One lock stripe: a map plus its slabs. */
struct s_stripe {
    _Alignas(64) pthread_mutex_t lock;  /* guards every field below and the rows */
    struct s_slot *slots;               /* mask + 1 slots */
    size_t mask;                        /* slot count - 1 (a power of two - 1) */
    uint32_t n_rows;                    /* rows stored (= used slots) */
    uint32_t n_slabs;                   /* slabs allocated */
    uint32_t slabs_cap;                 /* entries in slabs */
    float **slabs;                      /* slab pointers, each 1 << slab_shift rows */
};

struct ps_embed {
    struct ps_embed_conf conf;   /* copy of the configuration */
    size_t row_floats;           /* dim + optimizer state floats */
    uint32_t stripe_bits;        /* log2(n_stripes) */
    uint32_t slab_shift;         /* log2(rows per slab) */
    struct s_stripe *stripes;    /* n_stripes stripes, 64-byte aligned */
    _Atomic size_t n_rows;       /* rows stored over all stripes */
    _Atomic size_t bytes;        /* bytes of slabs and slot arrays */
};

/* Per-call scratch: key hashes and key indices grouped by stripe. */
struct s_group {
    uint64_t *h;                 /* hash of each key */
    uint32_t *t;                 /* table of each key */
    uint32_t *order;             /* key indices sorted by stripe, stable */
    uint64_t h_buf[S_SMALL];     /* storage for small calls */
    uint32_t t_buf[S_SMALL];     /* storage for small calls */
    uint32_t o_buf[S_SMALL];     /* storage for small calls */
};

/* Allocate n free slots. */
static struct s_slot *s_slots_new(size_t n)
{
    struct s_slot *slots = ss_malloc(n * sizeof *slots);
    for (size_t j = 0; j < n; j++) {
        slots[j].key = 0;
        slots[j].table = S_EMPTY;
        slots[j].row = 0;
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
    return ss_mix64((uint64_t)table + 0x5851f42d4c957f2dull);
}

/* Hash of (table, key): low bits pick the stripe, the bits above the slot. */
static inline uint64_t s_hash(uint64_t salt, uint64_t key)
{
    return ss_mix64(key ^ salt);
}

/* Address of row index r of stripe st. Needs st->lock. */
static inline float *s_row(const ps_embed_t *self, const struct s_stripe *st, uint32_t r)
{
    size_t in_slab = r & ((1u << self->slab_shift) - 1);
    return st->slabs[r >> self->slab_shift] + in_slab * self->row_floats;
}

/* Validate a configuration. Returns 0 or SS_E_INVAL with a log line. */
static int s_check_conf(const struct ps_embed_conf *c)
{
    const char *bad = NULL;
    int adagrad = c->optimizer == SS_OPT_ADAGRAD || c->optimizer == SS_OPT_ROWWISE_ADAGRAD;

    if (c->n_tables == 0 || c->n_tables == S_EMPTY)
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
    if (bad)
        SS_LOG(SS_LOG_ERROR, "embedding shard: bad configuration: %s", bad);
    return bad ? SS_E_INVAL : 0;
}

/* Rows per slab: about 1/16 of a stripe's share of the capacity, 64..65536 rows,
 * at most S_SLAB_MAX_BYTES, so a small shard does not allocate much up front. */
static uint32_t s_slab_shift(const struct ps_embed_conf *c, size_t row_floats)
{
    size_t want = c->capacity_rows / c->n_stripes / 16;
    uint32_t shift = 6;
    while (shift < 16 && ((size_t)1 << shift) < want)
        shift++;
    while (shift > 6 && ((size_t)1 << shift) * row_floats * sizeof(float) > S_SLAB_MAX_BYTES)
        shift--;
    return shift;
}

ps_embed_t *ps_embed_new(const struct ps_embed_conf *conf)
{
    ss_assert(conf);
    if (s_check_conf(conf) != 0)
        return NULL;

    ps_embed_t *self = ss_calloc(1, sizeof *self);
    self->conf = *conf;
    self->row_floats = conf->dim + s_state_floats(conf);
    while ((1u << self->stripe_bits) < conf->n_stripes)
        self->stripe_bits++;
    self->slab_shift = s_slab_shift(conf, self->row_floats);
    self->stripes = ss_aligned_alloc(64, conf->n_stripes * sizeof *self->stripes);
    memset(self->stripes, 0, conf->n_stripes * sizeof *self->stripes);
    for (uint32_t i = 0; i < conf->n_stripes; i++) {
        struct s_stripe *st = &self->stripes[i];
        ss_assert(pthread_mutex_init(&st->lock, NULL) == 0);
        st->slots = s_slots_new(S_MIN_SLOTS);
        st->mask = S_MIN_SLOTS - 1;
    }
    atomic_init(&self->n_rows, 0);
    atomic_init(&self->bytes, (size_t)conf->n_stripes * S_MIN_SLOTS * sizeof(struct s_slot));
    return self;
}

/* Free a stripe's slabs and slots (not its lock). */
static void s_stripe_free_data(struct s_stripe *st)
{
    for (uint32_t s = 0; s < st->n_slabs; s++)
        ss_free(st->slabs[s]);
    ss_free(st->slabs);
    ss_free(st->slots);
    st->slabs = NULL;
    st->slots = NULL;
}

void ps_embed_destroy(ps_embed_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ps_embed_t *self = *self_p;
    for (uint32_t i = 0; i < self->conf.n_stripes; i++) {
        s_stripe_free_data(&self->stripes[i]);
        pthread_mutex_destroy(&self->stripes[i].lock);
    }
    ss_free(self->stripes);
    ss_free(self);
    *self_p = NULL;
}

void ps_embed_init_row(const ps_embed_t *self, uint32_t table, uint64_t key, float *row)
{
    ss_assert(self && row);
    uint64_t state = ss_mix64(self->conf.seed ^ ss_mix64(key ^ s_table_salt(table)));
    float scale = self->conf.init_scale;
    uint32_t n_emb = self->conf.dim - self->conf.first_order;

    for (uint32_t i = 0; i < n_emb; i++)
        row[i] = scale * (2.0f * ss_rand_unit(&state) - 1.0f);
    if (self->conf.first_order)
        row[n_emb] = 0.0f;
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

/* Double the slot array of st. Needs st->lock. */
static void s_grow(ps_embed_t *self, struct s_stripe *st)
{
    size_t old_n = st->mask + 1;
    size_t new_n = old_n * 2;
    struct s_slot *slots = s_slots_new(new_n);

    for (size_t j = 0; j < old_n; j++) {
        const struct s_slot *s = &st->slots[j];
        if (s->table == S_EMPTY)
            continue;
        size_t i = (s_hash(s_table_salt(s->table), s->key) >> self->stripe_bits) & (new_n - 1);
        while (slots[i].table != S_EMPTY)
            i = (i + 1) & (new_n - 1);
        slots[i] = *s;
    }
    ss_free(st->slots);
    __atomic_store_n(&st->slots, slots, __ATOMIC_RELAXED);  /* see s_prefetch_slots() */
    __atomic_store_n(&st->mask, new_n - 1, __ATOMIC_RELAXED);
    atomic_fetch_add_explicit(&self->bytes, old_n * sizeof *slots, memory_order_relaxed);
}

/* Make room for row index st->n_rows, allocating a slab if needed. Needs st->lock. */
static void s_ensure_slab(ps_embed_t *self, struct s_stripe *st)
{
    uint32_t slab = st->n_rows >> self->slab_shift;
    if (slab < st->n_slabs)
        return;
    if (st->n_slabs == st->slabs_cap) {
        st->slabs_cap = st->slabs_cap ? st->slabs_cap * 2 : 4;
        st->slabs = ss_realloc(st->slabs, st->slabs_cap * sizeof *st->slabs);
    }
    size_t bytes = ((size_t)1 << self->slab_shift) * self->row_floats * sizeof(float);
    st->slabs[st->n_slabs++] = ss_malloc(bytes);
    atomic_fetch_add_explicit(&self->bytes, bytes, memory_order_relaxed);
}

/* Fill a new row: initializer weights, then the accumulators at init_acc. */
static void s_fresh_row(const ps_embed_t *self, uint32_t table, uint64_t key, float *row)
{
    ps_embed_init_row(self, table, key, row);
    for (size_t i = self->conf.dim; i < self->row_floats; i++)
        row[i] = self->conf.init_acc;
}

/* Find the row of (table, key) in st; if absent and create, store a fresh one.
 * Returns the row, or NULL (absent and !create, or the shard is full). Sets
 * *created when it stored a row. Needs st->lock. */
static float *s_get(ps_embed_t *self, struct s_stripe *st, uint32_t table, uint64_t key,
                    uint64_t h, int create, int *created)
{
    size_t i = (h >> self->stripe_bits) & st->mask;
    struct s_slot *s;

    for (;;) {
        s = &st->slots[i];
        if (s->key == key && s->table == table)
            return s_row(self, st, s->row);
        if (s->table == S_EMPTY)
            break;
        i = (i + 1) & st->mask;
    }
    if (!create || st->n_rows == UINT32_MAX || !s_reserve(self))
        return NULL;
    if ((size_t)(st->n_rows + 1) * 4 > (st->mask + 1) * 3) {
        s_grow(self, st);
        i = (h >> self->stripe_bits) & st->mask;
        while (st->slots[i].table != S_EMPTY)
            i = (i + 1) & st->mask;
        s = &st->slots[i];
    }
    s_ensure_slab(self, st);
    s->key = key;
    s->table = table;
    s->row = st->n_rows++;
    float *row = s_row(self, st, s->row);
    s_fresh_row(self, table, key, row);
    if (created)
        *created = 1;
    return row;
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

/* Hash the keys of every (table, count) group and order their indices by
 * stripe. Release with s_group_fini(). */
static void s_group_init(const ps_embed_t *self, struct s_group *g, size_t n_groups,
                         const uint32_t *tables, const uint32_t *counts, const uint64_t *keys,
                         size_t n)
{
    g->h = n <= S_SMALL ? g->h_buf : ss_malloc(n * sizeof *g->h);
    g->t = n <= S_SMALL ? g->t_buf : ss_malloc(n * sizeof *g->t);
    g->order = n <= S_SMALL ? g->o_buf : ss_malloc(n * sizeof *g->order);
    for (size_t k = 0, i = 0; k < n_groups; k++) {
        uint64_t salt = s_table_salt(tables[k]);
        for (size_t e = i + counts[k]; i < e; i++) {
            g->h[i] = s_hash(salt, keys[i]);
            g->t[i] = tables[k];
        }
    }
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

/* Sum of (g[i] + l2 w[i])^2 in 8 independent lanes (vectorizable; the order of
 * the adds is fixed, so results are reproducible). With l2 = 0 it is exactly
 * the sum of g[i]^2. */
static inline float s_sum_sq(const float *g, const float *w, float l2, uint32_t n)
{
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    uint32_t i = 0;

    for (; i + 8 <= n; i += 8)
        for (uint32_t l = 0; l < 8; l++) {
            float gi = g[i + l] + l2 * w[i + l];
            lane[l] += gi * gi;
        }
    for (; i < n; i++) {
        float gi = g[i] + l2 * w[i];
        lane[0] += gi * gi;
    }
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
           ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

/* Rowwise Adagrad on the n floats of w with one accumulator *acc. */
static inline void s_rowwise(float *w, float *acc, const float *g, uint32_t n, float lr,
                             float eps, float l2)
{
    *acc += s_sum_sq(g, w, l2, n) / (float)n;
    float step = lr / (sqrtf(*acc) + eps);
    for (uint32_t i = 0; i < n; i++)
        w[i] -= step * (g[i] + l2 * w[i]);
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
        for (uint32_t i = 0; i < dim; i++)
            w[i] -= lr * (g[i] + l2 * w[i]);
    } else if (self->conf.optimizer == SS_OPT_ADAGRAD) {
        float *acc = w + dim;
        for (uint32_t i = 0; i < dim; i++) {
            float gi = g[i] + l2 * w[i];
            acc[i] += gi * gi;
            w[i] -= lr * gi / (sqrtf(acc[i]) + eps);
        }
    } else if (!self->conf.first_order) {
        s_rowwise(w, w + dim, g, dim, lr, eps, l2);
    } else {
        /* embedding floats and the first-order weight, each with its own acc */
        s_rowwise(w, w + dim, g, dim - 1, lr, eps, l2);
        s_rowwise(w + dim - 1, w + dim + 1, g + dim - 1, 1, lr, eps, l2);
    }
}

/* Start loading the rows of the keys at grouped positions [j, end) of g, all in
 * stripe st, whose slots are (prefetched, so) cheap to probe now. With every
 * row of the run in flight before the first is used, the misses overlap.
 * Needs st->lock. */
static void s_prefetch_rows(const ps_embed_t *self, const struct s_stripe *st,
                            const uint64_t *keys, const struct s_group *g, size_t j, size_t end,
                            int for_write)
{
    for (; j < end; j++) {
        uint32_t k = g->order[j];
        size_t i = (g->h[k] >> self->stripe_bits) & st->mask;
        for (;; i = (i + 1) & st->mask) {
            const struct s_slot *sl = &st->slots[i];
            if (sl->key == keys[k] && sl->table == g->t[k]) {
                const float *row = s_row(self, st, sl->row);
                if (for_write) {  /* a row may straddle two cache lines */
                    __builtin_prefetch(row, 1);
                    __builtin_prefetch(row + self->row_floats - 1, 1);
                } else {
                    __builtin_prefetch(row, 0);
                    __builtin_prefetch(row + self->conf.dim - 1, 0);
                }
                break;
            }
            if (sl->table == S_EMPTY)
                break;
        }
    }
}

/* Serve the keys at grouped positions [j, end) of g, all in stripe st: copy rows
 * out (grads == NULL) or apply grads. Returns the keys refused at capacity.
 * Takes st->lock once. */
static size_t s_access_stripe(ps_embed_t *self, struct s_stripe *st, const uint64_t *keys,
                              const struct s_group *g, size_t j, size_t end, float *rows_out,
                              const float *grads)
{
    const uint32_t dim = self->conf.dim;
    size_t full = 0;

    ss_assert(pthread_mutex_lock(&st->lock) == 0);
    s_prefetch_rows(self, st, keys, g, j, end, grads != NULL);
    for (; j < end; j++) {
        uint32_t k = g->order[j];
        float *row = s_get(self, st, g->t[k], keys[k], g->h[k], 1, NULL);
        if (grads && row) {
            s_apply(self, row, grads + (size_t)k * dim);
        } else if (row) {
            memcpy(rows_out + (size_t)k * dim, row, dim * sizeof(float));
        } else {
            if (!grads)
                ps_embed_init_row(self, g->t[k], keys[k], rows_out + (size_t)k * dim);
            full++;
        }
    }
    ss_assert(pthread_mutex_unlock(&st->lock) == 0);
    return full;
}

/* Start loading the map slot of every key before any lock is taken: a request
 * holds few keys per table and stripe, so the per-stripe prefetch in
 * s_access_stripe() rarely looks far enough ahead. The slot array and mask
 * are read without the stripe lock (atomically; s_grow() stores them
 * atomically): a prefetch of a stale address is harmless, nothing is read
 * through it. */
static void s_prefetch_slots(const ps_embed_t *self, const struct s_group *g, size_t n)
{
    const uint64_t smask = self->conf.n_stripes - 1;
    for (size_t i = 0; i < n; i++) {
        const struct s_stripe *st = &self->stripes[g->h[i] & smask];
        const struct s_slot *slots = __atomic_load_n(&st->slots, __ATOMIC_RELAXED);
        size_t mask = __atomic_load_n(&st->mask, __ATOMIC_RELAXED);
        __builtin_prefetch(&slots[(g->h[i] >> self->stripe_bits) & mask]);
    }
}

/* Shared body of lookup (grads == NULL) and push: group the keys of all
 * tables by stripe and serve each stripe's keys under its lock (one request's
 * keys together, so that the prefetches run ahead over many keys). */
static int s_access(ps_embed_t *self, size_t n_groups, const uint32_t *tables,
                    const uint32_t *counts, const uint64_t *keys, float *rows_out,
                    const float *grads, size_t *n_full)
{
    const uint64_t smask = self->conf.n_stripes - 1;
    struct s_group g;
    size_t full = 0, n = 0;

    for (size_t k = 0; k < n_groups; k++) {
        if (tables[k] >= self->conf.n_tables)
            return SS_E_RANGE;
        n += counts[k];
    }
    if (n >= UINT32_MAX)
        return SS_E_TOOBIG;
    if (n == 0)
        return 0;
    ss_assert(keys && (rows_out || grads));
    s_group_init(self, &g, n_groups, tables, counts, keys, n);
    s_prefetch_slots(self, &g, n);
    for (size_t j = 0, end; j < n; j = end) {
        uint64_t stripe = g.h[g.order[j]] & smask;
        for (end = j + 1; end < n && (g.h[g.order[end]] & smask) == stripe; end++)
            ;
        full += s_access_stripe(self, &self->stripes[stripe], keys, &g, j, end, rows_out,
                                grads);
    }
    s_group_fini(&g);
    if (n_full)
        *n_full += full;
    return 0;
}

int ps_embed_lookup(ps_embed_t *self, uint32_t table, const uint64_t *keys, size_t n,
                    float *rows_out, size_t *n_full)
{
    uint32_t count = (uint32_t)n;
    ss_assert(self);
    if (n >= UINT32_MAX)
        return table >= self->conf.n_tables ? SS_E_RANGE : SS_E_TOOBIG;
    return s_access(self, 1, &table, &count, keys, rows_out, NULL, n_full);
}

int ps_embed_push(ps_embed_t *self, uint32_t table, const uint64_t *keys, size_t n,
                  const float *grads, size_t *n_full)
{
    uint32_t count = (uint32_t)n;
    ss_assert(self && (grads || n == 0));
    if (n >= UINT32_MAX)
        return table >= self->conf.n_tables ? SS_E_RANGE : SS_E_TOOBIG;
    return s_access(self, 1, &table, &count, keys, NULL, grads, n_full);
}

int ps_embed_lookup_groups(ps_embed_t *self, size_t n_groups, const uint32_t *tables,
                           const uint32_t *counts, const uint64_t *keys, float *rows_out,
                           size_t *n_full)
{
    ss_assert(self);
    return s_access(self, n_groups, tables, counts, keys, rows_out, NULL, n_full);
}

int ps_embed_push_groups(ps_embed_t *self, size_t n_groups, const uint32_t *tables,
                         const uint32_t *counts, const uint64_t *keys, const float *grads,
                         size_t *n_full)
{
    ss_assert(self);
    return s_access(self, n_groups, tables, counts, keys, NULL, grads, n_full);
}

int ps_embed_read_row(ps_embed_t *self, uint32_t table, uint64_t key, float *out)
{
    ss_assert(self && out);
    if (table >= self->conf.n_tables)
        return SS_E_RANGE;
    uint64_t h = s_hash(s_table_salt(table), key);
    struct s_stripe *st = &self->stripes[h & (self->conf.n_stripes - 1)];
    ss_assert(pthread_mutex_lock(&st->lock) == 0);
    float *row = s_get(self, st, table, key, h, 0, NULL);
    if (row)
        memcpy(out, row, self->row_floats * sizeof(float));
    ss_assert(pthread_mutex_unlock(&st->lock) == 0);
    return row ? 0 : SS_E_NOTFOUND;
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
    return atomic_load_explicit(&self->bytes, memory_order_relaxed);
}

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

/* Copy every row of st as checkpoint records into *buf (grown as needed).
 * Takes st->lock. Returns the number of records. */
static size_t s_copy_stripe(ps_embed_t *self, struct s_stripe *st, unsigned char **buf,
                            size_t *cap)
{
    size_t rec = s_rec_bytes(self);
    size_t n = 0;

    ss_assert(pthread_mutex_lock(&st->lock) == 0);
    if ((size_t)st->n_rows * rec > *cap) {
        *cap = (size_t)st->n_rows * rec;
        ss_free(*buf);
        *buf = ss_malloc(*cap);
    }
    for (size_t i = 0; i <= st->mask; i++) {
        const struct s_slot *s = &st->slots[i];
        if (s->table == S_EMPTY)
            continue;
        unsigned char *p = *buf + n * rec;
        uint32_t zero = 0;
        memcpy(p, &s->key, 8);
        memcpy(p + 8, &s->table, 4);
        memcpy(p + 12, &zero, 4);
        memcpy(p + S_REC_HEAD, s_row(self, st, s->row), self->row_floats * sizeof(float));
        n++;
    }
    ss_assert(n == st->n_rows);
    ss_assert(pthread_mutex_unlock(&st->lock) == 0);
    return n;
}

int ps_embed_checkpoint(ps_embed_t *self, const char *path, uint32_t shard)
{
    ss_assert(self && path);
    ps_ckpt_writer_t *w;
    unsigned char *buf = NULL;
    size_t cap = 0;
    uint64_t total = 0;
    int rc;

    if ((rc = ps_ckpt_begin(path, &w)) != 0)
        return rc;
    for (uint32_t i = 0; i < self->conf.n_stripes; i++) {
        size_t n = s_copy_stripe(self, &self->stripes[i], &buf, &cap);
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
        .shard = shard,
        .shape = {self->conf.n_tables, self->conf.dim, s_shape_opt(&self->conf), total},
    };
    if ((rc = ps_ckpt_commit(&w, &hdr)) == 0)
        SS_LOG(SS_LOG_INFO, "checkpoint %s: wrote %llu rows", path, (unsigned long long)total);
    return rc;
}

/* Check the header of an embedding checkpoint against self. Returns 0,
 * SS_E_CORRUPT or SS_E_FULL (logged). */
static int s_check_shape(const ps_embed_t *self, const char *path, uint32_t shard,
                         const struct ps_ckpt_hdr *hdr)
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
    if (rows > c->capacity_rows) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: %llu rows exceed capacity_rows %zu", path,
               (unsigned long long)rows, c->capacity_rows);
        return SS_E_FULL;
    }
    return 0;
}

/* Store one checkpoint record into the private shard dst (no other thread can
 * see dst, so its stripes are used without their locks). Returns 0 or
 * SS_E_CORRUPT (logged). */
static int s_load_rec(ps_embed_t *dst, const char *path, const unsigned char *p)
{
    uint64_t key;
    uint32_t table, zero;
    int created = 0;

    memcpy(&key, p, 8);
    memcpy(&table, p + 8, 4);
    memcpy(&zero, p + 12, 4);
    if (table >= dst->conf.n_tables || zero != 0) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: bad record (table %u)", path, table);
        return SS_E_CORRUPT;
    }
    uint64_t h = s_hash(s_table_salt(table), key);
    struct s_stripe *st = &dst->stripes[h & (dst->conf.n_stripes - 1)];
    float *row = s_get(dst, st, table, key, h, 1, &created);
    if (!row || !created) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: %s (table %u key %llu)", path,
               row ? "duplicate row" : "too many rows", table, (unsigned long long)key);
        return SS_E_CORRUPT;
    }
    memcpy(row, p + S_REC_HEAD, dst->row_floats * sizeof(float));
    return 0;
}

/* Read every record of r into the private shard dst. */
static int s_load_all(ps_embed_t *dst, const char *path, ps_ckpt_reader_t *r, uint64_t rows)
{
    size_t rec = s_rec_bytes(dst);
    unsigned char *buf = ss_malloc(S_RESTORE_BATCH * rec);
    int rc = 0;

    while (rows && rc == 0) {
        size_t k = rows < S_RESTORE_BATCH ? (size_t)rows : S_RESTORE_BATCH;
        if ((rc = ps_ckpt_read(r, buf, k * rec)) != 0)
            break;
        for (size_t i = 0; i < k && rc == 0; i++)
            rc = s_load_rec(dst, path, buf + i * rec);
        rows -= k;
    }
    ss_free(buf);
    return rc;
}

#define S_SWAP(type, a, b)  \
    do {                    \
        type t_ = (a);      \
        (a) = (b);          \
        (b) = t_;           \
    } while (0)

/* Swap the stored contents of a and b (same conf), stripe by stripe, each under
 * its lock. b is private to the caller. */
static void s_swap_contents(ps_embed_t *a, ps_embed_t *b)
{
    for (uint32_t i = 0; i < a->conf.n_stripes; i++) {
        struct s_stripe *x = &a->stripes[i];
        struct s_stripe *y = &b->stripes[i];
        ss_assert(pthread_mutex_lock(&x->lock) == 0);
        ss_assert(pthread_mutex_lock(&y->lock) == 0);
        S_SWAP(struct s_slot *, x->slots, y->slots);
        S_SWAP(size_t, x->mask, y->mask);
        S_SWAP(uint32_t, x->n_rows, y->n_rows);
        S_SWAP(uint32_t, x->n_slabs, y->n_slabs);
        S_SWAP(uint32_t, x->slabs_cap, y->slabs_cap);
        S_SWAP(float **, x->slabs, y->slabs);
        ss_assert(pthread_mutex_unlock(&y->lock) == 0);
        ss_assert(pthread_mutex_unlock(&x->lock) == 0);
    }
    size_t rows = atomic_exchange(&a->n_rows, atomic_load(&b->n_rows));
    atomic_store(&b->n_rows, rows);
    size_t bytes = atomic_exchange(&a->bytes, atomic_load(&b->bytes));
    atomic_store(&b->bytes, bytes);
}

int ps_embed_restore(ps_embed_t *self, const char *path, uint32_t shard)
{
    ss_assert(self && path);
    struct ps_ckpt_hdr hdr;
    ps_ckpt_reader_t *r;
    ps_embed_t *fresh;
    int rc;

    if ((rc = ps_ckpt_open(path, PS_CKPT_EMBED, &hdr, &r)) != 0)
        return rc;
    if ((rc = s_check_shape(self, path, shard, &hdr)) != 0)
        goto out_close;
    fresh = ps_embed_new(&self->conf);
    ss_assert(fresh);
    if ((rc = s_load_all(fresh, path, r, hdr.shape[3])) != 0 || (rc = ps_ckpt_verify(r)) != 0)
        goto out_destroy;
    s_swap_contents(self, fresh);
    SS_LOG(SS_LOG_INFO, "checkpoint %s: restored %llu rows", path,
           (unsigned long long)hdr.shape[3]);

out_destroy:
    ps_embed_destroy(&fresh);
out_close:
    ps_ckpt_close(&r);
    return rc;
}
