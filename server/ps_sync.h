/* ps_sync.h - one sync shard: a contiguous range of the dense EASGD center.
 *
 * The shard holds c = center[offset, offset + len). It starts empty and is
 * seeded by INIT: from the first INIT at once (ps_sync_init()), or, when it
 * expects n trainers (ps_sync_expect()), from the mean of the replicas they
 * offer (ps_sync_offer()). A sync PS restarted empty mid-run is re-seeded
 * that way: each ELASTIC round keeps sum(x_i) + c constant, so a center taken
 * from one replica (or a stale checkpoint) would pull the consensus towards
 * it; the mean of the live replicas is where the center sits when they agree.
 * It waits for every trainer's offer, at most wait_ms after the first (a
 * trainer lost or stalled must not keep the shard empty), then takes the mean
 * of the offers it has. At the start every replica is the same
 * initialization, so the mean is that initialization. Each ELASTIC round
 * from a trainer's shadow thread sends its snapshot x of the range and gets
 * back d = alpha * (x - c) while the center moves by d. Every call is atomic
 * with respect to the others (one mutex per shard); any thread may call. */
#ifndef PS_SYNC_H
#define PS_SYNC_H

#include <stddef.h>
#include <stdint.h>

typedef struct ps_sync ps_sync_t;
struct ps_ckpt_who;

/* Create an empty shard that refuses ranges longer than max_len floats.
 * Returns the shard (caller owns it; free with ps_sync_destroy()) or NULL if
 * max_len is 0. */
ps_sync_t *ps_sync_new(size_t max_len);

/* Free the shard; sets *self_p to NULL; accepts NULL and *self_p == NULL. */
void ps_sync_destroy(ps_sync_t **self_p);

/* If the shard is empty, hold the range [offset, offset + len) with values x and
 * set *applied = 1. If it is already set, change nothing, set *applied = 0 and
 * return 0 if (offset, len) equals the held range, else SS_E_RANGE.
 * Returns SS_E_TOOBIG if len > max_len, SS_E_INVAL if len == 0, SS_E_RANGE if
 * offset + len overflows (*applied = 0 on every error). Borrows x. */
int ps_sync_init(ps_sync_t *self, uint64_t offset, const float *x, size_t len, int *applied);

/* One EASGD round: for each i, d = alpha * (x[i] - c[i]); c[i] += d (in double
 * where float would overflow, so a finite center stays finite);
 * d_out[i] = d. d_out may be x itself. [offset, offset+len) must be a non-empty
 * part of the held range (a sync group may cover part of the center):
 * SS_E_RANGE otherwise; SS_E_EMPTY if the shard is empty; SS_E_INVAL if alpha is
 * not in [0, 1]. Counts a round on success. Borrows x and d_out. */
int ps_sync_elastic(ps_sync_t *self, uint64_t offset, const float *x, size_t len, float alpha,
                    float *d_out);

/* Copy the center into out (len floats). Same range checks as ps_sync_elastic().
 * Borrows out. */
int ps_sync_pull(ps_sync_t *self, uint64_t offset, float *out, size_t len);

/* 1 if no range is held yet, else 0. */
int ps_sync_is_empty(ps_sync_t *self);

/* The held range, or offset 0 and len 0 when empty. */
void ps_sync_range(ps_sync_t *self, uint64_t *offset, size_t *len);

/* Re-seed from the mean of n_ranks replicas (ranks 0..n_ranks-1), waiting at
 * most wait_ms after the first offer for the others (see the top). n_ranks 0
 * or 1: an offer seeds the shard at once. Call before the shard is shared. */
void ps_sync_expect(ps_sync_t *self, uint32_t n_ranks, uint64_t wait_ms);

/* What ps_sync_offer() did with an offer. */
enum ps_sync_offer_res {
    PS_SYNC_SEEDED = 1,    /* this offer completed the set: the shard holds their mean */
    PS_SYNC_COLLECTED = 2, /* taken; the shard waits for the other ranks' offers */
    PS_SYNC_REPEATED = 3,  /* this rank has offered already: nothing changed */
    PS_SYNC_KEPT = 4,      /* the shard was seeded already: nothing changed */
};

/* Offer rank's replica x of [offset, offset + len) to an empty shard (INIT
 * with a sender). The shard sums the first offer of each rank in double and
 * is seeded with c[i] = (float)(sum[i] / k), the mean of the k offers, when
 * every expected rank has offered, or by the first offer or
 * ps_sync_settle() at or after now_ms of the first offer + wait_ms. *res
 * says which (enum ps_sync_offer_res); *n_from gets the offers in the mean
 * (SEEDED) or collected so far (COLLECTED, REPEATED), 0 for KEPT. Returns 0;
 * SS_E_INVAL for rank >= the expected ranks (when ranks are expected) or
 * len == 0; SS_E_TOOBIG over max_len; SS_E_RANGE for a range other than the
 * held or collected one (or one that overflows); *res = 0 on error. Borrows x. */
int ps_sync_offer(ps_sync_t *self, uint32_t rank, uint64_t offset, const float *x, size_t len,
                  uint64_t now_ms, int *res, uint32_t *n_from);

/* Seed an empty shard that holds offers from their mean when the wait is
 * over (now_ms >= first offer + wait_ms). Returns the offers in the mean
 * when it seeded the shard now, else 0. */
uint32_t ps_sync_settle(ps_sync_t *self, uint64_t now_ms);

/* ELASTIC rounds served (restored from a checkpoint by ps_sync_restore()). */
uint64_t ps_sync_rounds(ps_sync_t *self);

/* Write the range, values and round count to path atomically (see ps_ckpt.h),
 * stamped with who and the split SS_RANGE_SPLIT_ID. The values are copied
 * under the lock, then written.
 * Returns 0, SS_E_EMPTY if no range is held (nothing written), SS_E_IO,
 * SS_E_NOSPC, or SS_E_NOMEM when the copy or the write buffer cannot be had
 * (logged, naming path; an older file at path is kept). */
int ps_sync_checkpoint(ps_sync_t *self, const char *path, const struct ps_ckpt_who *who);

/* Replace range, values and round count with the checkpoint at path. Checks
 * magic, version, kind, shard, shape and checksum: SS_E_CORRUPT on any mismatch
 * or truncation, including a range different from a range already held;
 * SS_E_TOOBIG if its len exceeds max_len; SS_E_IO if unreadable; SS_E_NOMEM
 * if the memory to load the values aside (a second copy of the range) cannot
 * be had, with ps_sync_restore_need() bytes (each logged). On error the shard
 * is unchanged and serves on. */
int ps_sync_restore(ps_sync_t *self, const char *path, uint32_t shard);

/* Restore shard `shard` of a job with n_shards sync shards from the
 * checkpoints in dir (DIR/sync-K.ckpt, see ps_ckpt_set.h). Written with
 * n_shards shards: ps_sync_restore() of the own file. Written with another
 * count S: the S slices must cover [0, total) once, in shard order; this
 * shard takes the range ss_range_split(total, n_shards, shard) (the range
 * its trainers will INIT), copied from the files it overlaps (each read whole
 * and verified), and the largest round count of the slices. Logs "restored L
 * center values at offset O from M files (saved with S shards, this job has
 * T; re-sliced ...)". Returns 0, SS_E_NOTFOUND, SS_E_CORRUPT (including a
 * held range that differs, or more shards than values), SS_E_TOOBIG,
 * SS_E_NOMEM (as ps_sync_restore()) or SS_E_IO, each logged; on error the
 * shard is unchanged. Borrows dir. */
int ps_sync_restore_dir(ps_sync_t *self, const char *dir, uint32_t shard, uint32_t n_shards);

/* About the bytes the last ps_sync_restore() or ps_sync_restore_dir() needed
 * to load its values aside when it failed with SS_E_NOMEM; 0 when the last
 * one did not fail for memory. Same thread as the restores. */
size_t ps_sync_restore_need(ps_sync_t *self);

#endif
