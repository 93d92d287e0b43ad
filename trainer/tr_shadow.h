/* tr_shadow.h - keeps a trainer's dense replica in sync with the others.
 *
 * Background algorithms (s-*): one shadow thread runs rounds back to back
 * (throttled by sync.min_interval_ms) while the workers train; it owns the
 * sync sockets. Foreground baselines (fr-*): rounds run inside the training
 * loop: fr-easgd in each worker every sync.gap of its own iterations; fr-ma
 * and fr-bmuf every sync.gap trainer iterations, with all of the trainer's
 * workers paused at a gate while one of them runs the collective.
 *
 * End of training (or of a segment between two evaluations): the ring rules
 * carry a "done" flag in every round, so all trainers see the same final
 * round; each trainer then holds the average. EASGD trainers meet at the
 * trainer's barrier, then a final PULL makes w the center. The rounds are
 * paced by sync.min_interval_ms and sync.cpu_share. */
#ifndef TR_SHADOW_H
#define TR_SHADOW_H

#include <stddef.h>
#include <stdint.h>

#include "tr_model.h"
#include "tr_worker.h"

typedef struct tr_shadow tr_shadow_t;

struct tr_shadow_stats {
    uint64_t rounds;           /* completed rounds */
    uint64_t failed_rounds;    /* rounds that timed out or failed */
    uint64_t reseeds;          /* sync PS shards re-seeded (EASGD) */
    double rounds_per_min;     /* completed rounds per minute of training */
    double gap_mean;           /* worker iterations between completed rounds */
    double latency_p50_ms;     /* round latency, median */
    double latency_p99_ms;     /* round latency, 99th percentile */
    double drift;              /* last replica drift */
    double cpu_s;              /* CPU time of the shadow thread (or of fg rounds) */
    uint64_t ring_bytes_sent;  /* payload bytes this trainer sent on the ring (MA, BMUF) */
    uint64_t ring_bytes_received; /* payload bytes it accepted from its neighbour */
    int final_ok;              /* the final sync completed */
};

/* Build the sync machinery for the trainer's shared state; NULL with err
 * when sync.algorithm is none is not an error: returns NULL and err "".
 * Main thread, before the workers start. */
tr_shadow_t *tr_shadow_new(struct tr_shared *shared, const tr_model_t *model, char *err,
                           size_t err_len);
void tr_shadow_destroy(tr_shadow_t **self_p);

/* Start: the shadow thread (s-*) or the foreground hooks (fr-*). Opens the
 * connections, seeds the sync PSs. Returns 0 or an error with err. */
int tr_shadow_start(tr_shadow_t *self, char *err, size_t err_len);

/* End of a segment, after the workers are joined: stop the background
 * rounds (join the shadow thread; it never runs the final sync itself).
 * tr_shadow_start() may be called again for the next segment. Main thread. */
void tr_shadow_stop(tr_shadow_t *self);

/* The final blocking sync, after tr_shadow_stop(), on the main thread: ring
 * groups run rounds until every trainer is done (every trainer ends with the
 * same average), then EASGD groups pull the center into w. For EASGD the
 * caller first waits at a barrier until every trainer has stopped (see
 * tr_shadow_needs_barrier), so that the center holds all their rounds.
 * Returns 0, or an error when it could not complete (the replica stays
 * local; stats.final_ok says which). */
int tr_shadow_final(tr_shadow_t *self, char *err, size_t err_len);

/* tr_shadow_stop() then tr_shadow_final(). */
int tr_shadow_finish(tr_shadow_t *self, char *err, size_t err_len);

/* A save between segments (the output model, a job checkpoint) found sync
 * PS k empty: it restarted after the final sync had pulled the center into
 * every replica. Put that center back from model (the dense arena holding
 * it: w, or the live model while model.dense_average scores an average),
 * at once (tr_sync_easgd_restore), counted as a re-seed and logged; the
 * save then asks the PS again. Returns 0 (also when the PS held a center
 * again by then) or an error with err (SS_E_STOPPED when the rounds are
 * not stopped after a start, or were aborted). Main thread. */
int tr_shadow_restore_center(tr_shadow_t *self, size_t k, const float *model, char *err,
                             size_t err_len);

/* Stop the rounds for good, without a final sync (an interrupted or failed
 * run). Idempotent. Main thread. */
void tr_shadow_abort(tr_shadow_t *self);

/* 1 when some group syncs through the sync PSs (EASGD) / through the ring. */
int tr_shadow_uses_sync_ps(const tr_shadow_t *self);
int tr_shadow_uses_ring(const tr_shadow_t *self);

/* 1 when the final sync pulls from the sync PSs without a ring round that
 * would bring the trainers together first: the caller must barrier. */
int tr_shadow_needs_barrier(const tr_shadow_t *self);

/* The sync rules' own state (BMUF: global model, block momentum and target
 * of each group; MA and EASGD keep none), for a job checkpoint: returns how
 * many floats, and copies them into out unless it is NULL. 0 before the
 * first tr_shadow_start(). Main thread, rounds stopped (tr_shadow_stop). */
size_t tr_shadow_state(const tr_shadow_t *self, float *out);

/* Give the state a job checkpoint saved (n floats, copied) to restore when
 * tr_shadow_start() sets the groups up; that start fails (SS_E_CONFIG) when
 * the groups need another count. Main thread, before the first start. */
void tr_shadow_set_state(tr_shadow_t *self, const float *in, size_t n);

/* Thread-safe copy of the statistics. */
void tr_shadow_get_stats(tr_shadow_t *self, struct tr_shadow_stats *st);

/* Name of the algorithm(s), for reports ("s-easgd", "bottom:s-ma,top:s-bmuf"). */
const char *tr_shadow_name(const tr_shadow_t *self);

/* How long the shadow thread rests after a round that took wall_ns of wall
 * time and cpu_ns of its CPU: at least sync.min_interval_ms from the round's
 * start, and long enough that its CPU stays within sync.cpu_share of one core
 * (cpu_ns over a cycle of wall_ns + rest). Milliseconds, <= 0: none. Any
 * thread. */
int64_t tr_shadow_rest_ms(const struct ss_cfg *cfg, uint64_t wall_ns, uint64_t cpu_ns);

#endif
