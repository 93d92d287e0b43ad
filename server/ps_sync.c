/* ps_sync.c - the EASGD center range of a sync shard, see ps_sync.h.
 *
 * One mutex guards the whole shard: an ELASTIC round is one pass over len floats,
 * short next to the network transfer of x and d, so finer locking buys nothing.
 * Offers of an empty shard (the re-seed from the mean of the replicas) are
 * summed in double as they come, so the shard holds one sum, not one copy per
 * trainer; the wait for the missing ones is checked when a request comes (the
 * trainers ask every round), so no timer thread is needed. */
#include "ps_sync.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "ps_ckpt.h"
#include "ps_ckpt_set.h"
#include "ss_assert.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_msg.h"

#define S_PIECE 65536u   /* floats read at once by a re-slicing restore */

struct ps_sync {
    pthread_mutex_t lock;  /* guards every field below */
    size_t max_len;        /* longest range accepted */
    int set;               /* 1 once a range is held */
    uint64_t offset;       /* first index of the range in the flat dense vector */
    size_t len;            /* floats in the range */
    float *c;              /* the center values, len floats */
    uint64_t rounds;       /* ELASTIC rounds served */
    uint32_t n_ranks;      /* offers expected (ps_sync_expect()), 0 = seed at once */
    uint64_t wait_ms;      /* longest wait for them after the first */
    double *sum;           /* while empty: the sum of the offers, len floats; or NULL */
    uint8_t *offered;      /* while empty: 1 for each rank whose offer is in sum */
    uint32_t n_offered;    /* offers in sum */
    uint64_t first_ms;     /* when the first offer came */
    _Atomic size_t restore_need;  /* bytes the last restore lacked memory for, or 0
                                   * (not under lock: the restoring thread's) */
};

ps_sync_t *ps_sync_new(size_t max_len)
{
    if (max_len == 0)
        return NULL;
    ps_sync_t *self = ss_calloc(1, sizeof *self);
    ss_assert(pthread_mutex_init(&self->lock, NULL) == 0);
    self->max_len = max_len;
    return self;
}

void ps_sync_destroy(ps_sync_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ps_sync_t *self = *self_p;
    pthread_mutex_destroy(&self->lock);
    ss_free(self->sum);
    ss_free(self->offered);
    ss_free(self->c);
    ss_free(self);
    *self_p = NULL;
}

/* Take and release the shard mutex; failing is a broken invariant. */
static void s_lock(ps_sync_t *self)
{
    ss_assert(pthread_mutex_lock(&self->lock) == 0);
}

static void s_unlock(ps_sync_t *self)
{
    ss_assert(pthread_mutex_unlock(&self->lock) == 0);
}

/* Forget the offers collected (the shard was seeded). Needs self->lock. */
static void s_drop_offers(ps_sync_t *self)
{
    ss_free(self->sum);
    ss_free(self->offered);
    self->sum = NULL;
    self->offered = NULL;
    self->n_offered = 0;
}

/* Check the range [offset, +len) that an INIT or an offer names, before it
 * is compared with the one held: at most max_len floats (SS_E_TOOBIG), not
 * empty (SS_E_INVAL), inside the 64-bit index space (SS_E_RANGE). Returns 0
 * or that code. No lock (max_len is fixed). */
static int s_check_request(const ps_sync_t *self, uint64_t offset, size_t len)
{
    if (len > self->max_len)
        return SS_E_TOOBIG;
    if (len == 0)
        return SS_E_INVAL;
    if (offset > UINT64_MAX - len)
        return SS_E_RANGE;
    return 0;
}

/* 1 when [offset, +len) is the range held (or being collected). Needs
 * self->lock. */
static int s_same_range(const ps_sync_t *self, uint64_t offset, size_t len)
{
    return offset == self->offset && len == self->len;
}

int ps_sync_init(ps_sync_t *self, uint64_t offset, const float *x, size_t len, int *applied)
{
    ss_assert(self && applied && (x || len == 0));
    int rc = 0;

    *applied = 0;
    if ((rc = s_check_request(self, offset, len)) != 0)
        return rc;
    float *c = ss_malloc(len * sizeof *c);
    memcpy(c, x, len * sizeof *c);
    s_lock(self);
    if (self->set) {
        rc = s_same_range(self, offset, len) ? 0 : SS_E_RANGE;
    } else {
        self->set = 1;
        self->offset = offset;
        self->len = len;
        self->c = c;
        c = NULL;
        *applied = 1;
        s_drop_offers(self);
    }
    s_unlock(self);
    ss_free(c);
    return rc;
}

void ps_sync_expect(ps_sync_t *self, uint32_t n_ranks, uint64_t wait_ms)
{
    ss_assert(self);
    s_lock(self);
    self->n_ranks = n_ranks;
    self->wait_ms = wait_ms;
    s_unlock(self);
}

/* Seed the shard with the mean of the offers in sum: c[i] = (float)(sum[i] /
 * n_offered). Returns the number of offers. Needs self->lock; sum set. */
static uint32_t s_seed_mean(ps_sync_t *self)
{
    uint32_t k = self->n_offered;
    ss_assert(self->sum && k > 0 && !self->set);
    float *c = ss_malloc(self->len * sizeof *c);
    for (size_t i = 0; i < self->len; i++)
        c[i] = (float)(self->sum[i] / (double)k);
    ss_free(self->c);
    self->c = c;
    self->set = 1;
    self->rounds = 0;
    s_drop_offers(self);
    return k;
}

/* Add rank's offer x to the sum (the first offer sets the range). Returns
 * PS_SYNC_COLLECTED, PS_SYNC_REPEATED, or SS_E_RANGE for another range.
 * Needs self->lock; the shard is empty. */
static int s_collect(ps_sync_t *self, uint32_t rank, uint64_t offset, const float *x,
                     size_t len, uint64_t now_ms)
{
    if (!self->sum) {
        self->sum = ss_calloc(len, sizeof *self->sum);
        self->offered = ss_calloc(self->n_ranks > 0 ? self->n_ranks : 1, 1);
        self->offset = offset;
        self->len = len;
        self->first_ms = now_ms;
    } else if (!s_same_range(self, offset, len)) {
        return SS_E_RANGE;
    }
    uint32_t slot = self->n_ranks > 0 ? rank : 0;
    if (self->offered[slot])
        return PS_SYNC_REPEATED;
    for (size_t i = 0; i < len; i++)
        self->sum[i] += (double)x[i];
    self->offered[slot] = 1;
    self->n_offered++;
    return PS_SYNC_COLLECTED;
}

/* 1 when the offers collected are to be averaged now: every expected rank
 * offered, or the wait is over. Needs self->lock; sum set. */
static int s_offers_done(const ps_sync_t *self, uint64_t now_ms)
{
    return self->n_offered >= (self->n_ranks > 0 ? self->n_ranks : 1) ||
           now_ms - self->first_ms >= self->wait_ms;
}

int ps_sync_offer(ps_sync_t *self, uint32_t rank, uint64_t offset, const float *x, size_t len,
                  uint64_t now_ms, int *res, uint32_t *n_from)
{
    ss_assert(self && res && n_from && (x || len == 0));
    int rc;

    *res = 0;
    *n_from = 0;
    if ((rc = s_check_request(self, offset, len)) != 0)
        return rc;
    s_lock(self);
    if (self->n_ranks > 0 && rank >= self->n_ranks) {
        rc = SS_E_INVAL;
    } else if (self->set) {
        rc = s_same_range(self, offset, len) ? PS_SYNC_KEPT : SS_E_RANGE;
    } else {
        rc = s_collect(self, rank, offset, x, len, now_ms);
        *n_from = self->n_offered;
        if (rc > 0 && s_offers_done(self, now_ms)) {
            *n_from = s_seed_mean(self);
            rc = PS_SYNC_SEEDED;
        }
    }
    s_unlock(self);
    if (rc < 0)
        return rc;
    *res = rc;
    return 0;
}

uint32_t ps_sync_settle(ps_sync_t *self, uint64_t now_ms)
{
    ss_assert(self);
    uint32_t k = 0;
    s_lock(self);
    if (!self->set && self->sum && s_offers_done(self, now_ms))
        k = s_seed_mean(self);
    s_unlock(self);
    return k;
}

/* Range check shared by elastic and pull. Needs self->lock. */
static int s_check_range(const ps_sync_t *self, uint64_t offset, size_t len)
{
    if (!self->set)
        return SS_E_EMPTY;
    /* any non-empty sub-range of the held range: per-component sync groups
     * exchange only their part of the center */
    if (len == 0 || offset < self->offset || offset - self->offset > self->len ||
        len > self->len - (offset - self->offset))
        return SS_E_RANGE;
    return 0;
}

int ps_sync_elastic(ps_sync_t *self, uint64_t offset, const float *x, size_t len, float alpha,
                    float *d_out)
{
    ss_assert(self && ((x && d_out) || len == 0));
    int rc;

    if (!(alpha >= 0.0f && alpha <= 1.0f))
        return SS_E_INVAL;
    s_lock(self);
    if ((rc = s_check_range(self, offset, len)) == 0) {
        float *c = self->c + (offset - self->offset);
        for (size_t i = 0; i < len; i++) {
            float d = alpha * (x[i] - c[i]);
            float cn = c[i] + d;
            /* x - c of two huge finite floats overflows in float (x = 3.4e38
             * against c = -3.4e38 made the center infinite, then NaN): redo
             * it in double, where the new center, between c and x, is
             * finite */
            if (!(fabsf(cn) <= FLT_MAX && fabsf(d) <= FLT_MAX)) {
                double dd = (double)alpha * ((double)x[i] - (double)c[i]);
                cn = (float)((double)c[i] + dd);
                d = (float)(dd <= FLT_MAX ? (dd >= -FLT_MAX ? dd : -FLT_MAX) : FLT_MAX);
            }
            c[i] = cn;
            d_out[i] = d;
        }
        self->rounds++;
    }
    s_unlock(self);
    return rc;
}

int ps_sync_pull(ps_sync_t *self, uint64_t offset, float *out, size_t len)
{
    ss_assert(self && (out || len == 0));
    int rc;

    s_lock(self);
    if ((rc = s_check_range(self, offset, len)) == 0)
        memcpy(out, self->c + (offset - self->offset), len * sizeof *out);
    s_unlock(self);
    return rc;
}

int ps_sync_is_empty(ps_sync_t *self)
{
    ss_assert(self);
    s_lock(self);
    int empty = !self->set;
    s_unlock(self);
    return empty;
}

void ps_sync_range(ps_sync_t *self, uint64_t *offset, size_t *len)
{
    ss_assert(self && offset && len);
    s_lock(self);
    *offset = self->set ? self->offset : 0;
    *len = self->set ? self->len : 0;
    s_unlock(self);
}

uint64_t ps_sync_rounds(ps_sync_t *self)
{
    ss_assert(self);
    s_lock(self);
    uint64_t rounds = self->rounds;
    s_unlock(self);
    return rounds;
}

int ps_sync_checkpoint(ps_sync_t *self, const char *path, const struct ps_ckpt_who *who)
{
    ss_assert(self && path && who);
    struct ps_ckpt_hdr hdr = {.kind = PS_CKPT_SYNC, .shard = who->shard,
                              .n_shards = who->n_shards, .map_id = SS_RANGE_SPLIT_ID,
                              .job_id = who->job_id, .save_id = who->save_id};
    ps_ckpt_writer_t *w;
    float *copy = NULL;
    size_t len;
    int rc;

    s_lock(self);
    if (self->set) {
        len = self->len;
        /* no memory for the copy fails this checkpoint, not the PS */
        if (!(copy = ss_try_malloc(len * sizeof *copy))) {
            s_unlock(self);
            SS_LOG(SS_LOG_ERROR, "checkpoint %s: no memory for a copy of the %zu center "
                   "values; an older file there is kept", path, len);
            return SS_E_NOMEM;
        }
        memcpy(copy, self->c, len * sizeof *copy);
        hdr.shape[0] = self->offset;
        hdr.shape[1] = len;
        hdr.shape[2] = self->rounds;
    }
    s_unlock(self);
    if (!copy)
        return SS_E_EMPTY;
    if ((rc = ps_ckpt_begin(path, &w)) != 0)
        goto out_free;
    if ((rc = ps_ckpt_write(w, copy, len * sizeof *copy)) != 0) {
        ps_ckpt_abort(&w);
        goto out_free;
    }
    if ((rc = ps_ckpt_commit(&w, &hdr)) == 0)
        SS_LOG(SS_LOG_INFO, "checkpoint %s: wrote %zu center values", path, len);
out_free:
    ss_free(copy);
    return rc;
}

/* Check the shard and shape of a sync checkpoint header. Returns 0 or
 * SS_E_CORRUPT (logged). */
static int s_check_shape(const char *path, uint32_t shard, const struct ps_ckpt_hdr *hdr)
{
    uint64_t offset = hdr->shape[0];
    uint64_t len = hdr->shape[1];

    if (hdr->shard != shard) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: written by shard %u, this is shard %u", path,
               hdr->shard, shard);
        return SS_E_CORRUPT;
    }
    if (len == 0 || offset > UINT64_MAX - len || hdr->shape[3] != 0 ||
        len > hdr->payload_bytes / sizeof(float) || len * sizeof(float) != hdr->payload_bytes) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: bad shape (offset %llu, len %llu, %llu bytes)",
               path, (unsigned long long)offset, (unsigned long long)len,
               (unsigned long long)hdr->payload_bytes);
        return SS_E_CORRUPT;
    }
    return 0;
}

/* Check that the range [offset, +len) from what (a file or set) fits self:
 * SS_E_TOOBIG over max_len, SS_E_CORRUPT if another range is held (logged).
 * Needs self->lock. */
static int s_check_fit(const ps_sync_t *self, const char *what, uint64_t offset, uint64_t len)
{
    if (len > self->max_len) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: range of %llu floats exceeds the limit %zu", what,
               (unsigned long long)len, self->max_len);
        return SS_E_TOOBIG;
    }
    if (self->set && (offset != self->offset || len != self->len)) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: range [%llu, +%llu) differs from the held range "
               "[%llu, +%zu)", what, (unsigned long long)offset, (unsigned long long)len,
               (unsigned long long)self->offset, self->len);
        return SS_E_CORRUPT;
    }
    return 0;
}

/* Check a sync checkpoint header against self. Needs self->lock. */
static int s_check_hdr(const ps_sync_t *self, const char *path, uint32_t shard,
                       const struct ps_ckpt_hdr *hdr)
{
    int rc = s_check_shape(path, shard, hdr);
    return rc ? rc : s_check_fit(self, path, hdr->shape[0], hdr->shape[1]);
}

/* Hold [offset, +len) with values *c (swapped in: *c gets the old values) and
 * rounds, unless an INIT raced in with another range. Returns s_check_fit()'s rc. */
static int s_install(ps_sync_t *self, const char *what, uint64_t offset, uint64_t len,
                     float **c, uint64_t rounds)
{
    /* a checkpoint's checksum proves the bytes, not that they are a model:
     * a center saved after a diverged run holds NaN, which would spread to
     * every trainer at its first round */
    uint64_t bad = ss_floats_first_nonfinite(*c, len);
    if (bad < len) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: center value %llu (of %llu at offset %llu) is "
               "not finite (NaN or infinity): the run that saved it diverged; restore an "
               "earlier checkpoint or start without one", what, (unsigned long long)bad,
               (unsigned long long)len, (unsigned long long)offset);
        return SS_E_CORRUPT;
    }
    s_lock(self);
    int rc = s_check_fit(self, what, offset, len);
    if (rc == 0) {
        self->set = 1;
        self->offset = offset;
        self->len = (size_t)len;
        self->rounds = rounds;
        float *t = self->c;
        self->c = *c;
        *c = t;
        s_drop_offers(self);
    }
    s_unlock(self);
    return rc;
}

/* A restore of `what` could not get the bytes bytes to load its values (or
 * a piece of them) aside: log it with the fix and remember need (the bytes
 * it needs in all) for ps_sync_restore_need(). Returns SS_E_NOMEM. */
static int s_no_memory(ps_sync_t *self, const char *what, size_t need, size_t bytes)
{
    atomic_store(&self->restore_need, need);
    SS_LOG(SS_LOG_ERROR, "checkpoint %s: not enough memory to load its center values aside: "
           "about %zu bytes beside the shard's own (an allocation of %zu bytes failed); the "
           "shard is as it was. Give the PS more memory (a PS started from the save with "
           "shadow-ps --restore needs no more than that: its shard is empty)", what, need,
           bytes);
    return SS_E_NOMEM;
}

size_t ps_sync_restore_need(ps_sync_t *self)
{
    ss_assert(self);
    return atomic_load(&self->restore_need);
}

int ps_sync_restore(ps_sync_t *self, const char *path, uint32_t shard)
{
    ss_assert(self && path);
    struct ps_ckpt_hdr hdr;
    ps_ckpt_reader_t *r;
    float *c = NULL;
    int rc;

    atomic_store(&self->restore_need, 0);
    if ((rc = ps_ckpt_open(path, PS_CKPT_SYNC, &hdr, &r)) != 0)
        return rc;
    s_lock(self);
    rc = s_check_hdr(self, path, shard, &hdr);
    s_unlock(self);
    if (rc != 0)
        goto out_close;
    if (!(c = ss_try_malloc(hdr.payload_bytes))) {
        rc = s_no_memory(self, path, hdr.payload_bytes, hdr.payload_bytes);
        goto out_close;
    }
    if ((rc = ps_ckpt_read(r, c, hdr.payload_bytes)) != 0 || (rc = ps_ckpt_verify(r)) != 0)
        goto out_close;
    /* s_install checks the range again: an INIT may have raced */
    rc = s_install(self, path, hdr.shape[0], hdr.shape[1], &c, hdr.shape[2]);
    if (rc == 0)
        SS_LOG(SS_LOG_INFO, "checkpoint %s: restored %llu center values at offset %llu", path,
               (unsigned long long)hdr.shape[1], (unsigned long long)hdr.shape[0]);
out_close:
    ss_free(c);
    ps_ckpt_close(&r);
    return rc;
}

/* Check that the slices of set tile [0, *total) in shard order; sets *total
 * and *rounds (the largest count of a slice). Returns 0 or SS_E_CORRUPT
 * (logged). */
static int s_check_tiling(const char *dir, const struct ps_ckpt_set *set, uint64_t *total,
                          uint64_t *rounds)
{
    uint32_t map = set->hdrs[0].map_id;
    int rc;

    if (map != 0 && map != SS_RANGE_SPLIT_ID) {
        SS_LOG(SS_LOG_ERROR, "checkpoint set %s: written with range split %u, this build splits "
               "with %u and cannot re-slice it: restore into %u sync shards", dir, map,
               SS_RANGE_SPLIT_ID, set->n);
        return SS_E_CORRUPT;
    }
    *total = 0;
    *rounds = 0;
    for (uint32_t j = 0; j < set->n; j++) {
        const struct ps_ckpt_hdr *h = &set->hdrs[j];
        if ((rc = s_check_shape(set->paths[j], j, h)) != 0)
            return rc;
        if (h->shape[0] != *total || h->shape[1] > UINT64_MAX - *total) {
            SS_LOG(SS_LOG_ERROR, "checkpoint set %s: %s holds [%llu, +%llu), but the slices "
                   "before it end at %llu: the files do not cover the center once, in order "
                   "(files of different saves?)", dir, set->paths[j],
                   (unsigned long long)h->shape[0], (unsigned long long)h->shape[1],
                   (unsigned long long)*total);
            return SS_E_CORRUPT;
        }
        *total += h->shape[1];
        if (h->shape[2] > *rounds)
            *rounds = h->shape[2];
    }
    return 0;
}

/* Copy the part of shard j's slice of set that falls in [off, off + len) into
 * c (len floats for [off, off + len)). The whole file is read, in pieces, and
 * verified. Returns 0, SS_E_NOMEM (the piece buffer; not logged) or an error
 * (logged). */
static int s_copy_slice(const struct ps_ckpt_set *set, uint32_t j, uint64_t off, uint64_t len,
                        float *c)
{
    const struct ps_ckpt_hdr *want = &set->hdrs[j];
    uint64_t lo = want->shape[0], n = want->shape[1];
    struct ps_ckpt_hdr hdr;
    ps_ckpt_reader_t *r;
    int rc;

    if (lo + n <= off || lo >= off + len)
        return 0;
    if ((rc = ps_ckpt_open(set->paths[j], PS_CKPT_SYNC, &hdr, &r)) != 0)
        return rc;
    if (hdr.shape[0] != lo || hdr.shape[1] != n) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: changed while it was restored", set->paths[j]);
        ps_ckpt_close(&r);
        return SS_E_CORRUPT;
    }
    float *buf = ss_try_malloc(S_PIECE * sizeof *buf);
    if (!buf) {
        ps_ckpt_close(&r);
        return SS_E_NOMEM;
    }
    for (uint64_t at = lo; at < lo + n && rc == 0; at += S_PIECE) {
        uint64_t k = lo + n - at < S_PIECE ? lo + n - at : S_PIECE;
        if ((rc = ps_ckpt_read(r, buf, (size_t)k * sizeof *buf)) != 0)
            break;
        uint64_t a = at > off ? at : off, b = at + k < off + len ? at + k : off + len;
        if (a < b)
            memcpy(c + (a - off), buf + (a - at), (size_t)(b - a) * sizeof *c);
    }
    if (rc == 0)
        rc = ps_ckpt_verify(r);
    ss_free(buf);
    ps_ckpt_close(&r);
    return rc;
}

/* Re-slice: hold shard `shard` of n_shards of the center the set's slices
 * cover, cut as the trainers cut it (ss_range_split()). */
static int s_restore_set(ps_sync_t *self, const char *dir, const struct ps_ckpt_set *set,
                         uint32_t shard, uint32_t n_shards)
{
    uint64_t total, rounds, off, len;
    int rc = s_check_tiling(dir, set, &total, &rounds);

    if (rc != 0)
        return rc;
    ss_range_split(total, n_shards, shard, &off, &len);
    if (len == 0) {
        SS_LOG(SS_LOG_ERROR, "checkpoint set %s: the center has %llu values, fewer than the "
               "%u sync shards of this job: use at most %llu sync shards", dir,
               (unsigned long long)total, n_shards, (unsigned long long)total);
        return SS_E_CORRUPT;
    }
    s_lock(self);
    rc = s_check_fit(self, dir, off, len);
    s_unlock(self);
    if (rc != 0)
        return rc;
    size_t need = (size_t)len * sizeof(float) + S_PIECE * sizeof(float);
    float *c = ss_try_malloc((size_t)len * sizeof *c);
    if (!c)
        return s_no_memory(self, dir, need, (size_t)len * sizeof *c);
    for (uint32_t j = 0; j < set->n && rc == 0; j++)
        rc = s_copy_slice(set, j, off, len, c);
    if (rc == SS_E_NOMEM)
        s_no_memory(self, dir, need, S_PIECE * sizeof(float));
    if (rc == 0 && (rc = s_install(self, dir, off, len, &c, rounds)) == 0)
        SS_LOG(SS_LOG_INFO, "checkpoint set %s: restored %llu center values at offset %llu "
               "from %u files (saved with %u shards, this job has %u; re-sliced the %llu "
               "values)", dir, (unsigned long long)len, (unsigned long long)off, set->n,
               set->n, n_shards, (unsigned long long)total);
    ss_free(c);
    return rc;
}

int ps_sync_restore_dir(ps_sync_t *self, const char *dir, uint32_t shard, uint32_t n_shards)
{
    ss_assert(self && dir && shard < n_shards);
    struct ps_ckpt_set set;
    atomic_store(&self->restore_need, 0);
    int rc = ps_ckpt_set_open(dir, PS_CKPT_NAME_SYNC, PS_CKPT_SYNC, shard, n_shards, &set);
    if (rc != 0)
        return rc;
    if (set.own_only)
        rc = ps_sync_restore(self, set.paths[shard], shard);
    else
        rc = s_restore_set(self, dir, &set, shard, n_shards);
    ps_ckpt_set_free(&set);
    return rc;
}
