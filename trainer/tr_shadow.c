/* tr_shadow.c - the shadow thread (s-*) and the foreground pauses (fr-*).
 *
 * DESIGN: a round of every group is one "sync round". Statistics are kept
 * under one mutex (stats_lock) that is taken once per round and by readers;
 * the rounds themselves run outside it. The fr-ma/fr-bmuf gate is a mutex +
 * condition variable barrier over the workers that are still training:
 * when the trainer's iteration count crosses a multiple of sync.gap, every
 * worker that reaches its hook waits; the last one to arrive (or the last
 * one to finish its data) runs the round while the others wait, so no
 * worker writes w during a foreground round. The ring's sockets are used by
 * one thread at a time (handed over under the gate mutex). */
#include "tr_shadow.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_time.h"
#include "tr_sync.h"

#define TR_LAT_RING 2048          /* latencies kept for percentiles */
#define TR_FINAL_TRIES 5          /* failed rounds tolerated once done */

/* One fr-easgd worker's own connections. */
struct fg_worker {
    struct tr_sync_env env;       /* its sync PS connections */
    struct tr_sync_group groups[SS_CFG_MAX_GROUPS]; /* its copy of the groups */
    int open;                     /* env opened and groups initialized */
    int failed;                   /* opening failed: stop trying */
};

struct tr_shadow {
    struct tr_shared *sh;         /* borrowed */
    const tr_model_t *model;      /* borrowed */
    char name[128];               /* for reports */
    struct tr_sync_group groups[SS_CFG_MAX_GROUPS]; /* the groups */
    size_t n_groups;              /* count */
    int foreground;               /* fr-* */
    int ring;                     /* some group uses the ring */
    struct tr_sync_env env;       /* shadow thread / gate / main env */
    pthread_t tid;                /* shadow thread */
    int started;                  /* tid valid */
    int opened;                   /* env opened and groups initialized */
    int has_easgd;                /* some group syncs through the sync PSs */
    atomic_int workers_done;      /* all workers left their loops */
    atomic_int aborted;           /* stop the rounds, no final sync */
    /* fr-ma / fr-bmuf gate */
    pthread_mutex_t gate_lock;    /* guards the gate fields */
    pthread_cond_t gate_cond;     /* signalled when a round ends */
    uint32_t active;              /* workers still training */
    uint32_t arrived;             /* workers waiting at the gate */
    int pending;                  /* a round is due */
    uint64_t generation;          /* rounds run through the gate */
    uint64_t next_due;            /* trainer iteration that triggers the next round */
    struct fg_worker *fgw;        /* fr-easgd: one per worker */
    /* statistics */
    pthread_mutex_t stats_lock;   /* guards what follows */
    struct tr_shadow_stats st;    /* counters */
    double lat_ms[TR_LAT_RING];   /* recent latencies */
    uint64_t n_lat;               /* latencies recorded */
    uint64_t last_iter;           /* iterations at the last completed round */
    uint64_t gap_sum;             /* sum of gaps */
    uint64_t start_ns;            /* when training started */
    uint64_t cpu_ns;              /* CPU time of rounds */
    float *restore;               /* sync state to restore at the first start, or NULL */
    size_t n_restore;             /* its floats */
};

static int s_component(const void *model, const char *name, size_t *off, size_t *len)
{
    return tr_model_component(model, name, off, len);
}

tr_shadow_t *tr_shadow_new(struct tr_shared *sh, const tr_model_t *model, char *err, size_t len)
{
    const struct ss_cfg *cfg = sh->cfg;
    struct tr_sync_group groups[SS_CFG_MAX_GROUPS];
    err[0] = 0;
    int n = tr_sync_groups(cfg, sh->n_ranks, tr_model_n_params(model), s_component, model,
                           groups, SS_CFG_MAX_GROUPS, err, len);
    if (n <= 0)
        return NULL;
    tr_shadow_t *self = ss_calloc(1, sizeof *self);
    self->sh = sh;
    self->model = model;
    self->n_groups = (size_t)n;
    memcpy(self->groups, groups, sizeof groups);
    self->foreground = tr_sync_is_foreground(groups[0].algorithm);
    for (size_t i = 0; i < self->n_groups; i++) {
        self->ring |= groups[i].traits->ring;
        self->has_easgd |= groups[i].traits->sync_ps;
    }
    ss_sync_label(cfg, self->name, sizeof self->name);
    self->env = (struct tr_sync_env){cfg, sh->rank, sh->n_ranks, sh->w,
                                     tr_model_n_params(model), sh->zctx, sh->ring, NULL, 0,
                                     NULL, NULL, sh->ring != NULL, sh->curve, sh->cluster};
    pthread_mutex_init(&self->gate_lock, NULL);
    pthread_cond_init(&self->gate_cond, NULL);
    pthread_mutex_init(&self->stats_lock, NULL);
    self->active = (uint32_t)cfg->workers;
    self->next_due = (uint64_t)cfg->sync_gap;
    return self;
}

void tr_shadow_destroy(tr_shadow_t **self_p)
{
    tr_shadow_t *self = *self_p;
    if (!self)
        return;
    tr_shadow_abort(self);
    for (uint32_t i = 0; self->fgw && i < (uint32_t)self->sh->cfg->workers; i++) {
        tr_sync_destroy_groups(self->fgw[i].groups, self->n_groups);
        tr_sync_env_close(&self->fgw[i].env);
    }
    ss_free(self->fgw);
    tr_sync_destroy_groups(self->groups, self->n_groups);
    tr_sync_env_close(&self->env);
    ss_free(self->restore);
    pthread_mutex_destroy(&self->gate_lock);
    pthread_cond_destroy(&self->gate_cond);
    pthread_mutex_destroy(&self->stats_lock);
    ss_free(self);
    *self_p = NULL;
}

const char *tr_shadow_name(const tr_shadow_t *self)
{
    return self->name;
}

/* ------------------------------------------------------------ rounds */

/* Count a round that took ns: its latency goes to the p50/p99 ring and the
 * trainer's round histogram (relaxed atomics, read by the metrics thread). */
static void s_record(tr_shadow_t *self, int rc, uint64_t ns, const struct tr_sync_round *r,
                     uint64_t cpu_ns)
{
    uint64_t iters = atomic_load_explicit(&self->sh->iterations, memory_order_relaxed);
    pthread_mutex_lock(&self->stats_lock);
    self->cpu_ns += cpu_ns;
    if (rc) {
        self->st.failed_rounds++;
    } else {
        self->st.rounds++;
        self->st.drift = r->drift;
        self->st.reseeds += r->reseeds;
        if (r->ring_bytes_sent) {
            self->st.ring_bytes_sent = r->ring_bytes_sent;
            self->st.ring_bytes_received = r->ring_bytes_received;
        }
        self->lat_ms[self->n_lat++ % TR_LAT_RING] = (double)ns / 1e6;
        ss_hist_add(&self->sh->sync_round_hist, ns);
        self->gap_sum += iters - self->last_iter;
        self->last_iter = iters;
    }
    pthread_mutex_unlock(&self->stats_lock);
}

enum { S_ALL, S_RING_ONLY, S_PS_ONLY };  /* which groups a round runs */

/* One round of the groups picked by which on env. *all_done: the ring says
 * every trainer in it is done (or, without a ring, this one is); after a
 * trainer died and the ring re-formed, every survivor. */
static int s_round_of(tr_shadow_t *self, struct tr_sync_env *env, struct tr_sync_group *groups,
                      int which, int done, int final, int *all_done, char *err, size_t len)
{
    struct tr_sync_round r = {0}, total = {0};
    uint64_t t0 = ss_now_ns(), c0 = ss_thread_cpu_ns();
    int rc = 0, ring_done = 1;
    for (size_t i = 0; i < self->n_groups && rc == 0; i++) {
        if ((which == S_RING_ONLY && !groups[i].traits->ring) ||
            (which == S_PS_ONLY && groups[i].traits->ring))
            continue;
        memset(&r, 0, sizeof r);
        rc = groups[i].algo->round(&groups[i], env, done ? 1.0f : 0.0f, final, &r, err, len);
        total.drift = fmax(total.drift, r.drift);
        total.reseeds += r.reseeds;
        if (groups[i].traits->ring && !(r.done_sum > (float)r.ring_size - 0.5f))
            ring_done = 0;
    }
    if (env->ring) {  /* the ring's counters, read by the thread that just used it */
        struct tr_allreduce_stats a;
        tr_allreduce_get_stats(env->ring, &a);
        total.ring_bytes_sent = a.bytes_sent;
        total.ring_bytes_received = a.bytes_received;
    }
    *all_done = rc == 0 && (self->ring ? ring_done : done);
    s_record(self, rc, ss_now_ns() - t0, &total, ss_thread_cpu_ns() - c0);
    return rc;
}

static int s_round(tr_shadow_t *self, struct tr_sync_env *env, struct tr_sync_group *groups,
                   int done, int final, int *all_done, char *err, size_t len)
{
    return s_round_of(self, env, groups, S_ALL, done, final, all_done, err, len);
}

/* The final sync, on the calling thread once the rounds have stopped. Ring
 * groups run rounds (done flag set) until the round in which every trainer
 * is done: the same round everywhere, after which each holds the average.
 * Then EASGD groups pull the center (the caller has made sure that every
 * trainer's last elastic round is in, e.g. by a barrier). */
static int s_final(tr_shadow_t *self, struct tr_sync_env *env, char *err, size_t len)
{
    int all_done = 0, fails = 0, rc = 0;
    while (self->ring && !all_done && fails < TR_FINAL_TRIES) {
        rc = s_round_of(self, env, self->groups, S_RING_ONLY, 1, 1, &all_done, err, len);
        if (rc && env->ring && tr_allreduce_expelled(env->ring))
            break;  /* the others went on without this trainer: no retry helps */
        if (rc) {
            fails++;
            SS_LOG(SS_LOG_WARN, "final sync round failed (%d/%d): %s", fails, TR_FINAL_TRIES,
                   err);
        }
    }
    if (rc == 0 && self->has_easgd) {
        int unused;
        rc = s_round_of(self, env, self->groups, S_PS_ONLY, 1, 1, &unused, err, len);
        if (rc)
            SS_LOG(SS_LOG_WARN, "final pull of the center failed: %s", err);
    }
    pthread_mutex_lock(&self->stats_lock);
    self->st.final_ok = rc == 0 && (all_done || !self->ring);
    pthread_mutex_unlock(&self->stats_lock);
    return self->st.final_ok ? 0 : (rc ? rc : SS_E_TIMEOUT);
}

static void s_sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

int64_t tr_shadow_rest_ms(const struct ss_cfg *cfg, uint64_t wall_ns, uint64_t cpu_ns)
{
    int64_t rest = cfg->sync_min_interval_ms - (int64_t)(wall_ns / 1000000);
    if (cfg->sync_cpu_share > 0 && cfg->sync_cpu_share < 1) {
        double cycle_ns = (double)cpu_ns / cfg->sync_cpu_share;
        int64_t by_cpu = (int64_t)((cycle_ns - (double)wall_ns) / 1e6);
        if (by_cpu > rest)
            rest = by_cpu;
    }
    return rest;
}

/* The shadow thread: rounds while the workers train, paced by tr_shadow_rest_ms.
 * It never runs the final sync (the main thread does, after
 * tr_shadow_stop): so no ordering of the stop flags can skip it. */
static void *s_thread_main(void *arg)
{
    tr_shadow_t *self = arg;
    char err[512] = "";
    int all_done = 0, warned = 0;
    ss_log_thread("shadow");
    while (!atomic_load(&self->workers_done) && !atomic_load(&self->aborted)) {
        uint64_t t0 = ss_now_ns(), c0 = ss_thread_cpu_ns();
        int rc = s_round(self, &self->env, self->groups, 0, 0, &all_done, err, sizeof err);
        if (rc && self->env.ring && tr_allreduce_expelled(self->env.ring)) {
            /* the others re-formed the ring without this trainer: its
             * updates must stop (the final sync reports the error) */
            SS_LOG(SS_LOG_ERROR, "%s; stopping this trainer's workers", err);
            atomic_store(&self->sh->stop, 1);
            break;
        }
        if (rc && (warned++ % 20) == 0)
            SS_LOG(SS_LOG_WARN, "sync round failed, workers keep training: %s", err);
        else if (rc == 0 && warned) {
            SS_LOG(SS_LOG_INFO, "sync rounds resumed");
            warned = 0;
        }
        int64_t rest = tr_shadow_rest_ms(self->sh->cfg, ss_now_ns() - t0,
                                         ss_thread_cpu_ns() - c0);
        /* rest in slices so that the end of the workers is seen at once */
        while (rest > 0 && !atomic_load(&self->workers_done) && !atomic_load(&self->aborted)) {
            s_sleep_ms(rest < 5 ? rest : 5);
            rest -= 5;
        }
    }
    return NULL;
}

/* ------------------------------------------------------------ foreground */

/* fr-easgd: each worker syncs every gap of its own iterations. */
static void s_fg_easgd(tr_shadow_t *self, uint32_t worker, uint64_t iteration)
{
    struct fg_worker *f = &self->fgw[worker];
    char err[512] = "";
    int all_done;
    if (iteration % (uint64_t)self->sh->cfg->sync_gap != 0 || f->failed)
        return;
    if (!f->open) {
        f->env = self->env;
        f->env.sync_conns = NULL;
        f->env.ring = NULL;
        memcpy(f->groups, self->groups, sizeof f->groups);
        if (tr_sync_env_open(&f->env, f->groups, self->n_groups, err, sizeof err) != 0 ||
            tr_sync_init_groups(f->groups, self->n_groups, &f->env, err, sizeof err) != 0) {
            SS_LOG(SS_LOG_ERROR, "worker %u cannot sync: %s", worker, err);
            f->failed = 1;
            return;
        }
        f->open = 1;
    }
    if (s_round(self, &f->env, f->groups, 0, 0, &all_done, err, sizeof err) != 0)
        SS_LOG(SS_LOG_WARN, "worker %u: sync round failed: %s", worker, err);
}

/* Run the due gate round (gate_lock held, every active worker waiting). */
static void s_gate_run(tr_shadow_t *self)
{
    char err[512] = "";
    int all_done;
    if (s_round(self, &self->env, self->groups, 0, 0, &all_done, err, sizeof err) != 0)
        SS_LOG(SS_LOG_WARN, "foreground sync round failed, training goes on: %s", err);
    self->pending = 0;
    self->arrived = 0;
    self->generation++;
    pthread_cond_broadcast(&self->gate_cond);
}

/* fr-ma / fr-bmuf: every gap trainer iterations all workers pause. */
static void s_fg_gate(tr_shadow_t *self, uint32_t worker, uint64_t iteration)
{
    uint64_t iters = atomic_load_explicit(&self->sh->iterations, memory_order_relaxed);
    pthread_mutex_lock(&self->gate_lock);
    if (!self->pending && iters >= self->next_due) {
        self->pending = 1;
        self->next_due += (uint64_t)self->sh->cfg->sync_gap;
    }
    if (self->pending) {
        uint64_t gen = self->generation;
        if (++self->arrived >= self->active) {
            s_gate_run(self);
        } else {
            while (gen == self->generation && !atomic_load(&self->sh->stop)) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 100000000;
                if (ts.tv_nsec >= 1000000000) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000;
                }
                pthread_cond_timedwait(&self->gate_cond, &self->gate_lock, &ts);
            }
        }
    }
    pthread_mutex_unlock(&self->gate_lock);
}

static void s_on_iteration(void *arg, uint32_t worker, uint64_t iteration)
{
    tr_shadow_t *self = arg;
    if (self->ring)
        s_fg_gate(self, worker, iteration);
    else
        s_fg_easgd(self, worker, iteration);
}

static void s_on_worker_done(void *arg, uint32_t worker)
{
    tr_shadow_t *self = arg;
    if (!self->ring)
        return;
    pthread_mutex_lock(&self->gate_lock);
    self->active--;
    if (self->pending && self->active > 0 && self->arrived >= self->active)
        s_gate_run(self);  /* the others are all waiting: run their round */
    else if (self->pending && self->active == 0)
        s_gate_run(self);
    pthread_mutex_unlock(&self->gate_lock);
}

/* ------------------------------------------------------------ API */

/* Connect the ring before training: one tiny allreduce among all trainers
 * (the first exchange over fresh connections takes ~100 ms; without this,
 * short jobs would spend their first rounds on it while replicas drift). */
static void s_ring_warmup(tr_shadow_t *self)
{
    char err[512] = "";
    float one = 1.0f;
    uint64_t t0 = ss_now_ms();
    for (int tries = 0; tries < 3; tries++) {
        one = 1.0f;
        if (tr_allreduce_sum(self->env.ring, &one, 1, err, sizeof err) == 0) {
            SS_LOG(SS_LOG_INFO, "ring of %u trainers connected in %llu ms", self->sh->n_ranks,
                   (unsigned long long)(ss_now_ms() - t0));
            return;
        }
    }
    SS_LOG(SS_LOG_WARN, "ring not complete at start (%s): training starts, rounds will "
           "resume when every trainer is up", err);
}

size_t tr_shadow_state(const tr_shadow_t *self, float *out)
{
    size_t n = 0;
    for (size_t i = 0; self->opened && i < self->n_groups; i++) {
        const struct tr_sync_group *g = &self->groups[i];
        if (!g->algo->state_len)
            continue;
        if (out)
            g->algo->state_get(g, out + n);
        n += g->algo->state_len(g);
    }
    return n;
}

void tr_shadow_set_state(tr_shadow_t *self, const float *in, size_t n)
{
    ss_assert(!self->opened);
    ss_free(self->restore);
    self->restore = ss_malloc(n * sizeof(float) + 1);
    memcpy(self->restore, in, n * sizeof(float));
    self->n_restore = n;
}

/* Put the state given by tr_shadow_set_state() into the freshly set-up
 * groups (a resumed job). Returns 0 or SS_E_CONFIG with err. */
static int s_restore_state(tr_shadow_t *self, char *err, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < self->n_groups; i++)
        if (self->groups[i].algo->state_len)
            n += self->groups[i].algo->state_len(&self->groups[i]);
    if (n != self->n_restore) {
        snprintf(err, len, "the job checkpoint holds %zu floats of sync state, %s needs %zu "
                 "(another sync.algorithm or model?)", self->n_restore, self->name, n);
        return SS_E_CONFIG;
    }
    for (size_t i = 0, k = 0; i < self->n_groups; i++) {
        struct tr_sync_group *g = &self->groups[i];
        if (!g->algo->state_len)
            continue;
        g->algo->state_set(g, self->restore + k);
        k += g->algo->state_len(g);
    }
    float *check = ss_malloc(n * sizeof(float) + 1);
    tr_shadow_state(self, check);
    SS_LOG(SS_LOG_INFO, "sync state restored: %zu floats, digest %016llx", n,
           (unsigned long long)ss_hash_bytes(check, n * sizeof(float), 0));
    ss_free(check);
    ss_free(self->restore);
    self->restore = NULL;
    return 0;
}

int tr_shadow_start(tr_shadow_t *self, char *err, size_t len)
{
    if (!self->opened) {
        int rc = tr_sync_env_open(&self->env, self->groups, self->n_groups, err, len);
        if (rc == 0)
            rc = tr_sync_init_groups(self->groups, self->n_groups, &self->env, err, len);
        if (rc == 0 && self->restore) {
            self->opened = 1;  /* for tr_shadow_state */
            rc = s_restore_state(self, err, len);
            self->opened = 0;
        }
        if (rc)
            return rc;
        if (self->ring)
            s_ring_warmup(self);
        self->start_ns = ss_now_ns();
        self->opened = 1;
        SS_LOG(SS_LOG_INFO, "sync: %s (%s)", self->name,
               self->foreground ? "foreground baseline" : "shadow thread");
    }
    atomic_store(&self->workers_done, 0);
    if (self->foreground) {
        pthread_mutex_lock(&self->gate_lock);
        self->active = (uint32_t)self->sh->cfg->workers;
        self->arrived = 0;
        self->pending = 0;
        pthread_mutex_unlock(&self->gate_lock);
        if (!self->ring && !self->fgw)
            self->fgw = ss_calloc((size_t)self->sh->cfg->workers, sizeof *self->fgw);
        self->sh->on_iteration = s_on_iteration;
        self->sh->on_worker_done = s_on_worker_done;
        self->sh->on_iteration_arg = self;
        return 0;
    }
    if (pthread_create(&self->tid, NULL, s_thread_main, self) != 0) {
        snprintf(err, len, "cannot start the shadow thread");
        return SS_E_NOMEM;
    }
    self->started = 1;
    return 0;
}

void tr_shadow_stop(tr_shadow_t *self)
{
    atomic_store(&self->workers_done, 1);
    if (self->started) {
        pthread_join(self->tid, NULL);
        self->started = 0;
    }
}

void tr_shadow_abort(tr_shadow_t *self)
{
    atomic_store(&self->aborted, 1);
    tr_shadow_stop(self);
}

int tr_shadow_final(tr_shadow_t *self, char *err, size_t len)
{
    ss_assert(!self->started);
    err[0] = 0;
    if (!self->opened || atomic_load(&self->aborted)) {
        snprintf(err, len, "sync was not started or was aborted");
        return SS_E_STOPPED;
    }
    return s_final(self, &self->env, err, len);
}

int tr_shadow_restore_center(tr_shadow_t *self, size_t k, const float *model, char *err,
                             size_t len)
{
    int applied = 0;
    err[0] = 0;
    if (!self->opened || self->started || atomic_load(&self->aborted) || !self->has_easgd) {
        snprintf(err, len, "cannot re-seed sync PS %zu: sync %s", k,
                 !self->has_easgd ? "uses no sync PS" : "is not stopped after a start");
        return SS_E_STOPPED;
    }
    int rc = tr_sync_easgd_restore(&self->env, k, model, &applied, err, len);
    if (rc)
        return rc;
    SS_LOG(SS_LOG_WARN, "sync PS %zu (%s) was empty after the final sync (restarted?): %s", k,
           ss_conn_endpoint(self->env.sync_conns[k]),
           applied ? "put back the center this trainer pulled in the final sync"
                   : "it holds a center again (another trainer re-seeded it)");
    if (applied) {
        pthread_mutex_lock(&self->stats_lock);
        self->st.reseeds++;
        pthread_mutex_unlock(&self->stats_lock);
    }
    return 0;
}

int tr_shadow_finish(tr_shadow_t *self, char *err, size_t len)
{
    tr_shadow_stop(self);
    return tr_shadow_final(self, err, len);
}

int tr_shadow_uses_sync_ps(const tr_shadow_t *self)
{
    return self->has_easgd;
}

int tr_shadow_uses_ring(const tr_shadow_t *self)
{
    return self->ring;
}

int tr_shadow_needs_barrier(const tr_shadow_t *self)
{
    return self->has_easgd && !self->ring;
}

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void tr_shadow_get_stats(tr_shadow_t *self, struct tr_shadow_stats *st)
{
    double lat[TR_LAT_RING];
    pthread_mutex_lock(&self->stats_lock);
    *st = self->st;
    size_t n = self->n_lat < TR_LAT_RING ? (size_t)self->n_lat : TR_LAT_RING;
    memcpy(lat, self->lat_ms, n * sizeof(double));
    double minutes = (double)(ss_now_ns() - self->start_ns) / 60e9;
    st->rounds_per_min = minutes > 0 ? (double)self->st.rounds / minutes : 0;
    st->gap_mean = self->st.rounds ? (double)self->gap_sum / (double)self->st.rounds : 0;
    st->cpu_s = (double)self->cpu_ns / 1e9;
    pthread_mutex_unlock(&self->stats_lock);
    qsort(lat, n, sizeof(double), s_cmp);
    st->latency_p50_ms = n ? lat[n / 2] : 0;
    st->latency_p99_ms = n ? lat[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1] : 0;
}
