/* ps_sync.c - the EASGD center range of a sync shard, see ps_sync.h.
 *
 * One mutex guards the whole shard: an ELASTIC round is one pass over len floats,
 * short next to the network transfer of x and d, so finer locking buys nothing. */
#include "ps_sync.h"

#include <pthread.h>
#include <string.h>

#include "ps_ckpt.h"
#include "ss_assert.h"
#include "ss_err.h"
#include "ss_log.h"
#include "ss_mem.h"

struct ps_sync {
    pthread_mutex_t lock;  /* guards every field below */
    size_t max_len;        /* longest range accepted */
    int set;               /* 1 once a range is held */
    uint64_t offset;       /* first index of the range in the flat dense vector */
    size_t len;            /* floats in the range */
    float *c;              /* the center values, len floats */
    uint64_t rounds;       /* ELASTIC rounds served */
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

int ps_sync_init(ps_sync_t *self, uint64_t offset, const float *x, size_t len, int *applied)
{
    ss_assert(self && applied && (x || len == 0));
    int rc = 0;

    *applied = 0;
    if (len > self->max_len)
        return SS_E_TOOBIG;
    if (len == 0)
        return SS_E_INVAL;
    if (offset > UINT64_MAX - len)
        return SS_E_RANGE;
    float *c = ss_malloc(len * sizeof *c);
    memcpy(c, x, len * sizeof *c);
    s_lock(self);
    if (self->set) {
        rc = (offset == self->offset && len == self->len) ? 0 : SS_E_RANGE;
    } else {
        self->set = 1;
        self->offset = offset;
        self->len = len;
        self->c = c;
        c = NULL;
        *applied = 1;
    }
    s_unlock(self);
    ss_free(c);
    return rc;
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
            c[i] += d;
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

int ps_sync_checkpoint(ps_sync_t *self, const char *path, uint32_t shard)
{
    ss_assert(self && path);
    struct ps_ckpt_hdr hdr = {.kind = PS_CKPT_SYNC, .shard = shard};
    ps_ckpt_writer_t *w;
    float *copy = NULL;
    size_t len;
    int rc;

    s_lock(self);
    if (self->set) {
        len = self->len;
        copy = ss_malloc(len * sizeof *copy);
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

/* Check a sync checkpoint header against self. Needs self->lock. */
static int s_check_hdr(const ps_sync_t *self, const char *path, uint32_t shard,
                       const struct ps_ckpt_hdr *hdr)
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
    if (len > self->max_len) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: range of %llu floats exceeds the limit %zu", path,
               (unsigned long long)len, self->max_len);
        return SS_E_TOOBIG;
    }
    if (self->set && (offset != self->offset || len != self->len)) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: range [%llu, +%llu) differs from the held range "
               "[%llu, +%zu)", path, (unsigned long long)offset, (unsigned long long)len,
               (unsigned long long)self->offset, self->len);
        return SS_E_CORRUPT;
    }
    return 0;
}

int ps_sync_restore(ps_sync_t *self, const char *path, uint32_t shard)
{
    ss_assert(self && path);
    struct ps_ckpt_hdr hdr;
    ps_ckpt_reader_t *r;
    float *c = NULL;
    int rc;

    if ((rc = ps_ckpt_open(path, PS_CKPT_SYNC, &hdr, &r)) != 0)
        return rc;
    s_lock(self);
    rc = s_check_hdr(self, path, shard, &hdr);
    s_unlock(self);
    if (rc != 0)
        goto out_close;
    c = ss_malloc(hdr.payload_bytes);
    if ((rc = ps_ckpt_read(r, c, hdr.payload_bytes)) != 0 || (rc = ps_ckpt_verify(r)) != 0)
        goto out_close;
    s_lock(self);
    if ((rc = s_check_hdr(self, path, shard, &hdr)) == 0) {   /* an INIT may have raced */
        self->set = 1;
        self->offset = hdr.shape[0];
        self->len = hdr.shape[1];
        self->rounds = hdr.shape[2];
        float *t = self->c;
        self->c = c;
        c = t;
    }
    s_unlock(self);
    if (rc == 0)
        SS_LOG(SS_LOG_INFO, "checkpoint %s: restored %llu center values at offset %llu", path,
               (unsigned long long)hdr.shape[1], (unsigned long long)hdr.shape[0]);
out_close:
    ss_free(c);
    ps_ckpt_close(&r);
    return rc;
}
