/* tr_train.c - a trainer's life and its training run: the dense replica,
 * the workers' segments, the barriers that end them, the vote on going on.
 * The other jobs of the object are in the files tr_train_int.h lists. */
#include "tr_train_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_fs.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_metrics.h"
#include "ss_time.h"
#include "tr_mfile.h"
#include "tr_reader.h"

/* The name of the input what scores (TR_WORKER_EVAL or TR_WORKER_VALID), for
 * messages and the result's selected_on. */
const char *tr_train_input_name(const struct ss_cfg *cfg, int what)
{
    if (what == TR_WORKER_EVAL)
        return "data.eval";
    return cfg->valid_fraction > 0 ? "data.valid_fraction" : "data.valid";
}

/* The model's shape from the job: one home, shared with the model file
 * (export and scorer must build the same shape). */
static int s_model_conf(const struct ss_cfg *cfg, struct tr_model_conf *mc)
{
    return tr_mfile_model_conf(cfg, mc);
}

/* This trainer's own key must be let in: listed in security.authorized or
 * security.admin_keys (the PSs and the other trainers check), and an admin
 * key when admin_keys is set (trainers send INIT and CHECKPOINT). */
static int s_check_own_key(const tr_train_t *self, char *err, size_t len)
{
    const struct ss_security_cfg *sec = &self->cfg->security;
    const char *key = self->curve.client_public;
    int admin = sec->admin_keys[0] ? ss_auth_list_has(sec->admin_keys, "security.admin_keys",
                                                      key, err, len) : 1;
    int listed = admin > 0 && sec->admin_keys[0] ? 1
                 : ss_auth_list_has(sec->authorized, "security.authorized", key, err, len);
    if (admin < 0 || listed < 0)
        return SS_E_CONFIG;
    if (!listed || !admin) {
        snprintf(err, len, "this trainer's key %s (security.client_key %s) is not in %s: add "
                 "the line of its .pub file there%s", key, sec->client_key,
                 !admin ? "security.admin_keys" : "security.authorized",
                 !admin ? " (trainers send INIT and CHECKPOINT)" : "");
        return SS_E_CONFIG;
    }
    return 0;
}

/* CURVE keys (the trainer is a client of the PSs and of its ring neighbour,
 * and the server of its allreduce endpoint) and the ZAP handler. */
static int s_secure(tr_train_t *self, char *err, size_t len)
{
    const struct ss_security_cfg *sec = &self->cfg->security;
    int rc = ss_curve_load(&self->curve, sec, SS_CURVE_SERVER | SS_CURVE_CLIENT, err, len);
    if (rc || !ss_curve_secured(&self->curve))
        return rc;
    self->shared.curve = &self->curve;  /* CURVE keys or the job token (PLAIN) */
    if (self->curve.on && (rc = s_check_own_key(self, err, len)) != 0)
        return rc;
    self->auth = ss_auth_new(self->shared.zctx, sec, err, len);
    return self->auth ? 0 : SS_E_CONFIG;
}

/* ZeroMQ I/O threads of the trainer's context: trainer.io_threads, or with
 * 0 (auto) one per 4 workers, at least 1 (one I/O thread carries the
 * sockets of about 4 workers: docs/scaling.md). */
static int s_io_threads(const struct ss_cfg *cfg)
{
    if (cfg->io_threads > 0)
        return (int)cfg->io_threads;
    return (int)((cfg->workers + 3) / 4);
}

/* Every embedding PS and trainer the trainer may connect to: its host name
 * resolves (the sync PSs are checked where EASGD connects to them). */
static int s_check_peers(const ss_cluster_t *cluster, char *err, size_t len)
{
    static const int roles[] = {SS_CLUSTER_EMBEDDING, SS_CLUSTER_TRAINER};
    for (size_t r = 0; r < 2; r++)
        for (size_t i = 0; i < ss_cluster_count(cluster, roles[r]); i++) {
            int rc = ss_cluster_check_peer(cluster, roles[r], i, err, len);
            if (rc)
                return rc;
        }
    return 0;
}

tr_train_t *tr_train_new(const struct ss_cfg *cfg, const ss_cluster_t *cluster, char *err,
                         size_t err_len)
{
    struct tr_model_conf mc;
    const struct ss_cluster_id *me = ss_cluster_me(cluster);
    ss_assert(me && me->role == SS_CLUSTER_TRAINER);
    if (s_check_peers(cluster, err, err_len) != 0)
        return NULL;
    tr_train_t *self = ss_calloc(1, sizeof *self);
    uint32_t rank = me->index;
    self->cfg = cfg;
    self->cluster = cluster;
    self->rank = rank;
    if (s_model_conf(cfg, &mc) != 0 || !(self->model = tr_model_new(&mc, err, err_len))) {
        if (!self->model && !err[0])
            snprintf(err, err_len, "model: too many layers");
        ss_free(self);
        return NULL;
    }
    self->n_params = tr_model_n_params(self->model);
    self->stats = tr_stats_new(rank, self->n_params);
    self->ctrs = ss_ctrs_new(TR_N_COUNTERS, (size_t)cfg->workers);
    self->shared.ctrs = self->ctrs;
    self->shared.ps_wait_hist = ss_hists_new((size_t)cfg->workers);
    self->shared.cfg = cfg;
    self->shared.cluster = cluster;
    self->shared.model = self->model;
    self->shared.w = ss_aligned_alloc(64, self->n_params * sizeof(float));
    tr_model_init_params(self->model, self->shared.w, (uint64_t)cfg->job_seed);
    if (cfg->dense_optimizer == SS_OPT_ADAGRAD)
        self->shared.acc = ss_aligned_alloc(64, self->n_params * sizeof(float));
    if (self->shared.acc)
        memset(self->shared.acc, 0, self->n_params * sizeof(float));
    self->shared.zctx = zmq_ctx_new();
    ss_assert(self->shared.zctx);
    self->shared.rank = rank;
    self->shared.n_ranks = (uint32_t)ss_cluster_count(cluster, SS_CLUSTER_TRAINER);
    atomic_init(&self->shared.stop, 0);
    atomic_init(&self->shared.drain, 0);
    atomic_init(&self->shared.examples_done, 0);
    atomic_init(&self->shared.segment_left, -1LL);
    atomic_init(&self->shared.examples_left,
                cfg->max_examples > 0 ? (long long)cfg->max_examples : -1LL);
    /* before any socket: I/O threads, and room for every worker's and
     * evaluator's sockets, and the shadow thread's and the main thread's, to
     * every PS plus the ring (ZeroMQ's default limit is 1023) */
    int io_threads = s_io_threads(cfg);
    if (zmq_ctx_set(self->shared.zctx, ZMQ_IO_THREADS, io_threads) != 0) {
        snprintf(err, err_len, "cannot set %d ZeroMQ I/O threads (trainer.io_threads): %s",
                 io_threads, zmq_strerror(zmq_errno()));
        tr_train_destroy(&self);
        return NULL;
    }
    SS_LOG(SS_LOG_INFO, "ZeroMQ I/O threads: %d%s", io_threads,
           cfg->io_threads > 0 ? "" : " (trainer.io_threads auto: one per 4 workers)");
    if (ss_cluster_zmq_setup(cluster, self->shared.zctx, 2 * cfg->workers + 2, err,
                             err_len) != 0 || s_secure(self, err, err_len) != 0) {
        tr_train_destroy(&self);
        return NULL;
    }
    char how[160];
    tr_model_describe(self->model, how, sizeof how);
    SS_LOG(SS_LOG_INFO, "model: %zu dense parameters, %.0f FLOP per example; %s",
           self->n_params, tr_model_flops_per_example(self->model), how);
    return self;
}

void tr_train_destroy(tr_train_t **self_p)
{
    tr_train_t *self = *self_p;
    if (!self)
        return;
    tr_shadow_destroy(&self->shadow);
    tr_allreduce_destroy(&self->ring);
    ss_auth_destroy(&self->auth);
    zmq_ctx_term(self->shared.zctx);
    ss_curve_wipe(&self->curve);
    ss_free(self->shared.w);
    ss_free(self->shared.acc);
    ss_free(self->w_live);
    tr_model_destroy(&self->model);
    tr_jobckpt_free(&self->resume);
    ss_ctrs_destroy(&self->ctrs);
    ss_free(self->shared.ps_wait_hist);
    tr_valid_cache_destroy(&self->shared.valid_cache);
    tr_stats_destroy(&self->stats);
    ss_free(self);
    *self_p = NULL;
}

/* ------------------------------------------------------------ workers */

/* Sum the counters of n workers; returns how many have finished. */
int tr_train_sum(tr_worker_t **workers, uint32_t n, struct tr_worker_counts *sum)
{
    tr_worker_counts_init(sum);
    for (uint32_t i = 0; i < n; i++) {
        struct tr_worker_counts c;
        if (!workers[i])
            continue;  /* never created: its error is already in err */
        tr_worker_snapshot(workers[i], &c);
        tr_worker_counts_add(sum, &c);
    }
    return sum->finished;
}

void tr_train_join_workers(tr_worker_t **workers, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (workers[i])
            tr_worker_join(workers[i]);
}

/* 1 when this trainer's timer says a periodic job checkpoint is due at now. */
int tr_train_ckpt_due(const tr_train_t *self, uint64_t now)
{
    return self->ckpt_next_ns && now >= self->ckpt_next_ns;
}
/* Run one segment: start the workers (and the shadow's rounds), report
 * progress until they are all done, join them; *end_ns: when the last worker
 * left its loop. Returns 0, SS_E_STOPPED on
 * *stop, or the first worker error (err). */
static int s_segment(tr_train_t *self, tr_worker_t **workers, uint32_t n,
                     volatile sig_atomic_t *stop, struct tr_worker_counts *prev, uint64_t *last,
                     uint64_t *end_ns, char *err, size_t len)
{
    struct tr_worker_counts now;
    int rc = self->shadow ? tr_shadow_start(self->shadow, err, len) : 0;
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        if (tr_worker_start(workers[i]) != 0) {
            snprintf(err, len, "cannot start worker thread %u", i);
            atomic_store(&self->shared.stop, 1);
            rc = SS_E_NOMEM;
        }
    while (rc == 0) {
        usleep(50000);
        uint64_t t = ss_now_ns();
        int done = tr_train_sum(workers, n, &now);
        tr_train_pause_end(self, &now, n);
        if (*stop) {
            snprintf(err, len, "interrupted");
            rc = SS_E_STOPPED;
            break;
        }
        int term = self->ckpt_req && *self->ckpt_req;
        if ((term || tr_train_ckpt_due(self, t)) && !self->draining) {
            /* the workers train what they have read and leave; the segment
             * then ends as usual (pushes acknowledged, final sync) */
            if (term)
                SS_LOG(SS_LOG_INFO, "job checkpoint requested (SIGTERM): stopping at a batch "
                       "boundary");
            else
                SS_LOG(SS_LOG_DEBUG, "periodic job checkpoint due: stopping at a batch "
                       "boundary");
            self->draining = 1;
            self->drain_ns = t;
            atomic_store(&self->shared.drain, 1);
        }
        if (done == (int)n || now.rc)
            break;
        /* JSONL rows every metrics.interval_s, but more often while the run
         * is young (a fortieth of its age, at least 0.1 s), so that a short
         * job still draws a curve; the progress line keeps the interval */
        double age = (double)(t - self->t0_ns) / 1e9;
        double iv = fmin(self->cfg->metrics_interval_s, fmax(0.1, age / 40.0));
        if ((double)(t - *last) / 1e9 >= iv) {
            int print = (double)(t - self->last_print_ns) / 1e9 >= self->cfg->metrics_interval_s;
            tr_train_progress(self, &now, prev, age, (double)(t - *last) / 1e9, self->jsonl,
                       print ? 0 : -1);
            *prev = now;
            *last = t;
            if (print)
                self->last_print_ns = t;
        }
    }
    if (rc)
        atomic_store(&self->shared.stop, 1);
    tr_train_join_workers(workers, n);
    tr_train_sum(workers, n, &now);
    tr_train_pause_end(self, &now, n);
    if (rc == 0 && now.rc) {
        rc = now.rc;
        snprintf(err, len, "%s", now.err);
    }
    self->epochs_done = UINT64_MAX;
    *end_ns = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct tr_worker_counts c;
        tr_worker_snapshot(workers[i], &c);
        if (c.epochs_done < self->epochs_done)
            self->epochs_done = c.epochs_done;
        if (c.finished_ns > *end_ns)
            *end_ns = c.finished_ns;  /* the last worker out, not the next poll */
    }
    return rc;
}

/* Wait until every trainer has called this with the same n, and sum v over
 * them (in place). The ring's deadline is trainer.barrier_timeout_s here:
 * trainers of different speed reach the end of a segment far apart. */
int tr_train_barrier(tr_train_t *self, float *v, size_t n, char *err, size_t len)
{
    if (self->shared.n_ranks == 1)
        return 0;
    tr_allreduce_set_timeout(self->ring, self->cfg->barrier_timeout_s * 1000);
    int rc = tr_allreduce_sum(self->ring, v, n, err, len);
    tr_allreduce_set_timeout(self->ring, self->cfg->sync_timeout_ms);
    if (rc)
        snprintf(err + strlen(err), len - strlen(err),
                 " (waiting for the other trainers at the end of training)");
    return rc;
}

/* tr_train_barrier for counters: sums n (at most 8) 64-bit counts over every
 * trainer exactly, as 16-bit limbs (a float holds the sum of 64 of them). */
int tr_train_barrier_u64(tr_train_t *self, uint64_t *v, size_t n, char *err, size_t len)
{
    float limbs[8 * 4];
    ss_assert(n <= 8);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 4; k++)
            limbs[i * 4 + k] = (float)((v[i] >> (16 * k)) & 0xFFFF);
    int rc = tr_train_barrier(self, limbs, n * 4, err, len);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        v[i] = 0;
        for (int k = 0; k < 4; k++)
            v[i] += (uint64_t)limbs[i * 4 + k] << (16 * k);
    }
    return rc;
}

/* End of a segment: every trainer's workers are done and their pushes
 * acknowledged, the final sync is done (after a barrier where EASGD needs
 * one). Then no trainer changes the embeddings or the center until the
 * decision barrier in tr_train_run() lets the next segment start. */
static int s_end_segment(tr_train_t *self, char *err, size_t len)
{
    float one = 1;
    int rc = 0;
    SS_LOG(SS_LOG_INFO, "segment done: %llu epoch(s), pushes acknowledged; meeting the other "
           "trainers", (unsigned long long)self->epochs_done);
    if (self->shadow)
        tr_shadow_stop(self->shadow);
    if (!self->shadow || tr_shadow_needs_barrier(self->shadow))
        rc = tr_train_barrier(self, &one, 1, err, len);
    if (rc == 0 && self->shadow) {
        char serr[512] = "";
        if (tr_shadow_final(self->shadow, serr, sizeof serr) != 0) {
            snprintf(err, len, "final sync did not complete: %s", serr);
            rc = SS_E_TIMEOUT;
        }
        tr_shadow_get_stats(self->shadow, &self->sync);
    }
    if (rc == 0)
        SS_LOG(SS_LOG_INFO, "all trainers done with the segment%s",
               self->shadow ? ", final sync complete" : "");
    return rc;
}

/* 1 for the trainer that scores and saves the shared model: rank 0, or
 * after rank 0 died and the ring re-formed without it, the lowest rank
 * left (the same on every trainer once a barrier has completed). */
int tr_train_leader(const tr_train_t *self)
{
    uint64_t m = self->ring ? tr_allreduce_members(self->ring) : 1;
    return m && self->rank == (uint32_t)__builtin_ctzll(m);
}


/* The vote: [stop, trainers with data left], then the leader's keep-best
 * state (tr_keepbest.h; zeros from the others). */
#define TR_VOTE_FLOATS (2 + TR_KB_FLOATS)

/* A trainer that leads now and did not before goes on from the keep-best
 * state of the leader it replaces (the last one a vote carried; none when
 * that leader was lost before its first vote: then its own). fresh: that
 * state came in the vote just passed. */
static void s_take_over_state(tr_train_t *self, int fresh)
{
    if (self->led)
        return;
    self->led = 1;
    if (!self->have_carried)
        return;
    self->kb = tr_keepbest_adopt(&self->kb, &self->carried, 1, fresh);
    self->save_error[0] = '\0';  /* a failed save of its own is not the state's */
    const struct tr_keepbest *s = &self->kb;
    if (s->have_eval)
        SS_LOG(SS_LOG_INFO, "going on from the lost leader's keep-best state: best %s NE "
               "%.5f after %llu epoch(s), save %016llx%s, %u evaluation(s) without gain",
               self->has_valid ? "validation" : "eval", s->best.ne,
               (unsigned long long)s->best_epoch, (unsigned long long)s->save_id,
               s->saved ? "" : " (not saved)", s->evals_since_best);
    else
        SS_LOG(SS_LOG_INFO, "the lost leader had kept no model yet");
}

/* After the vote's barrier: a trainer that does not lead keeps the state the
 * leader sent (v: the vote's state part). Returns 1 when one came. */
static int s_keep_carried(tr_train_t *self, const float *v)
{
    char why[256];
    struct tr_keepbest s;
    int rc = tr_keepbest_unpack(v, &s, why, sizeof why);
    if (rc < 0)
        SS_LOG(SS_LOG_WARN, "%s; it is ignored (a new leader would go on from the one before)",
               why);
    if (rc == 1) {
        self->carried = s;
        self->have_carried = 1;
    }
    return rc == 1;
}

/* The vote's barrier. When it fails after the ring dropped bad pieces, the
 * error says what that may be: a trainer of an older build sends a vote of
 * 2 floats, whose pieces do not fit this one's (never summed, never read). */
static int s_vote_barrier(tr_train_t *self, float *vote, char *err, size_t len)
{
    struct tr_allreduce_stats st0 = {0}, st1 = {0};
    if (self->ring)
        tr_allreduce_get_stats(self->ring, &st0);
    int rc = tr_train_barrier(self, vote, TR_VOTE_FLOATS, err, len);
    if (rc && self->ring) {
        tr_allreduce_get_stats(self->ring, &st1);
        if (st1.msgs_bad > st0.msgs_bad)
            snprintf(err + strlen(err), len - strlen(err),
                     "; the ring dropped %llu bad piece(s) meanwhile: a trainer of another "
                     "build, whose vote is not %d floats (the keep-best state)?",
                     (unsigned long long)(st1.msgs_bad - st0.msgs_bad), TR_VOTE_FLOATS);
    }
    return rc;
}

/* The rank of the trainer that leads now (tr_train_leader's), 0 without a
 * ring. */
static uint32_t s_leader_rank(const tr_train_t *self)
{
    uint64_t m = self->ring ? tr_allreduce_members(self->ring) : 1;
    return m ? (uint32_t)__builtin_ctzll(m) : 0;
}

/* The leader's part of the vote: its keep-best state as sent (a last save
 * that failed keeps nothing). */
static void s_pack_state(const tr_train_t *self, float *v)
{
    struct tr_keepbest kb = self->kb;
    kb.saved = kb.saved && !self->save_error[0];
    tr_keepbest_pack(&kb, v);
}

/* The vote's barrier found the leader gone: the ring re-formed without it,
 * so the sum holds neither its stop vote nor its state, and it may have
 * saved a model no other trainer has figures for. Every trainer votes again
 * (vote: [stop, data left, state], rewritten), and the one that leads now
 * first does what the lost one did (scores the segment's model, or with
 * sync none compares its own replica's validation), from the lost leader's
 * keep-best state as last received (fresh: in the barrier just passed).
 * The others wait in that barrier, so that no trainer trains while it
 * scores and saves (they would change the embeddings it scores and saves)
 * and its stop vote counts. last: no segment follows. Returns 0 or an
 * error. */
static int s_vote_again(tr_train_t *self, int eval, int due, int scored, int fresh,
                        int data_left, int last, float *vote, char *err, size_t len)
{
    int rc = 0;
    memset(vote, 0, TR_VOTE_FLOATS * sizeof *vote);
    vote[1] = data_left ? 1.0f : 0.0f;
    if (tr_train_leader(self)) {
        SS_LOG(SS_LOG_INFO, "the trainer that scores was lost; this one (rank %u) takes over",
               self->rank);
        s_take_over_state(self, fresh);
        if (eval && due && !scored)
            rc = tr_train_evaluate_segment(self, last, &vote[0], err, len);
        else if (eval && scored && self->have_carried)
            rc = tr_train_reconsider(self, last, &vote[0], err, len);  /* none: its replica */
        if (rc == 0)
            s_pack_state(self, vote + 2);
    } else {
        SS_LOG(SS_LOG_INFO, "the trainer that scores was lost; voting again once rank %u, "
               "which leads now, has done its part", s_leader_rank(self));
    }
    if (rc == 0)
        rc = s_vote_barrier(self, vote, err, len);
    if (rc == 0 && !tr_train_leader(self))
        s_keep_carried(self, vote + 2);
    return rc;
}

/* The end's work, the leader's: data.eval scored once on the model kept
 * (eval, with a validation split), or the save (no evaluation). A leader
 * lost after the vote, in its work or in the vote's all-gather (the ring of
 * that sum still holds it, so every trainer still takes it for the leader),
 * would leave it undone while the others end. So with
 * job.allow_trainer_loss every trainer meets once more after it (one
 * float); when that barrier finds the leader gone, the one that leads now
 * goes on from the state the vote carried (fresh: it came in the vote just
 * passed) and does the work, and they meet again. Returns 0 or an error. */
static int s_end_work(tr_train_t *self, int eval, int fresh, char *err, size_t len)
{
    int rc = 0, loss_ok = self->shared.n_ranks > 1 && ss_cfg_trainer_loss_allowed(self->cfg);
    for (;;) {
        uint32_t lead = s_leader_rank(self);
        if (eval)
            rc = tr_train_final_test(self, err, len);
        else if (tr_train_leader(self) && (rc = tr_train_save(self, self->model_dir, err, len)) == 0)
            self->kb.saved = 1;
        if (rc || !loss_ok)
            return rc;
        float one = 1;
        if ((rc = tr_train_barrier(self, &one, 1, err, len)) != 0 || s_leader_rank(self) == lead)
            return rc;
        SS_LOG(SS_LOG_INFO, "the trainer that does the end's work (rank %u) was lost; rank %u, "
               "which leads now, does it", lead, s_leader_rank(self));
        if (tr_train_leader(self))
            s_take_over_state(self, fresh && self->cfg->sync_algorithm != SS_SYNC_NONE);
    }
}

/* After a segment (every trainer met): score the model (keeping it when it
 * is the best), or save it at the end when nothing is scored; then agree with
 * every trainer whether to go on. The vote is [stop, trainers with data
 * left, the leader's keep-best state]: trainer 0's evaluation decides, and
 * all go on while any one has data left (with trainer.eval_every_examples a
 * trainer's part may end at a segment's end while another's has a few rows
 * left: the one done meets the others at once in the next segments, so that
 * those rows are trained too); the others keep the state, from which one
 * goes on when it takes over the lead (s_take_over_state; when the leader
 * is lost in the vote itself, s_vote_again).
 * trained: the segment trained examples (one that found no data left has
 * nothing new to score). *more: run another segment. */
static int s_score_and_vote(tr_train_t *self, int eval, int trained, int *more, char *err,
                            size_t len)
{
    int data_left = self->epochs_done < (uint64_t)self->cfg->epochs &&
                    atomic_load(&self->shared.examples_left) != 0;
    float vote[TR_VOTE_FLOATS] = {0, data_left ? 1.0f : 0.0f}, mine = 0;
    int rc = 0, leader = tr_train_leader(self), due = trained || self->kb.n_evals == 0;
    uint32_t lead_rank = s_leader_rank(self);
    *more = 0;
    if (leader)
        s_take_over_state(self, 0);
    self->scores = eval && (leader || self->cfg->sync_algorithm == SS_SYNC_NONE);
    int scored = self->scores && due;
    if (scored)
        rc = tr_train_evaluate_segment(self, !data_left, leader ? &vote[0] : &mine, err, len);
    if (rc == 0 && leader)
        s_pack_state(self, vote + 2);
    if (rc == 0)
        rc = s_vote_barrier(self, vote, err, len);
    int last = rc == 0 && vote[1] < 0.5f;
    int fresh = rc == 0 && !leader && s_keep_carried(self, vote + 2);
    if (rc == 0 && s_leader_rank(self) != lead_rank) {
        rc = s_vote_again(self, eval, due, scored, fresh, data_left, last, vote, err, len);
        last = rc == 0 && vote[1] < 0.5f;
    }
    /* with a validation split: data.eval once, on the model kept, now that
     * no trainer trains (the vote's barrier); without evaluation the leader
     * saves the model at the end */
    if (rc == 0 && ((eval && self->has_valid && (last || vote[0] > 0.5f)) || (!eval && last)))
        rc = s_end_work(self, eval, fresh, err, len);
    if (rc || last)
        return rc;
    if (vote[0] > 0.5f)
        self->stopped_early = 1;
    else
        *more = 1;
    return 0;
}

/* ------------------------------------------------------------ averaging */

/* model.dense_average, at a segment's end (every trainer met, workers
 * joined): put the average of the dense models the workers summed into w
 * (over every trainer's sums when sync keeps one model; each trainer's own
 * for none), keeping the model in w_live, so that the average is what is
 * scored and saved. Returns 0 or the barrier's error; with no model summed
 * anywhere, w is left as it is. */
static int s_average_in(tr_train_t *self, tr_worker_t **workers, uint32_t n, char *err,
                        size_t len)
{
    size_t np = self->n_params;
    if (self->cfg->dense_average <= 0)
        return 0;
    float *sum = ss_calloc(np + 1, sizeof(float));
    uint64_t count = 0;
    for (uint32_t i = 0; i < n; i++)
        count += tr_worker_take_average(workers[i], sum);
    sum[np] = (float)count;
    int rc = self->shadow ? tr_train_barrier(self, sum, np + 1, err, len) : 0;
    if (rc == 0 && sum[np] > 0.5f) {
        if (!self->w_live)
            self->w_live = ss_aligned_alloc(64, np * sizeof(float));
        memcpy(self->w_live, self->shared.w, np * sizeof(float));
        for (size_t i = 0; i < np; i++)
            self->shared.w[i] = sum[i] / sum[np];
        self->averaged = 1;
        SS_LOG(SS_LOG_INFO, "model.dense_average: scoring the average of %.0f dense models",
               (double)sum[np]);
    }
    ss_free(sum);
    return rc;
}

/* Undo s_average_in() before training goes on: w is the model again. */
static void s_average_out(tr_train_t *self)
{
    if (!self->averaged)
        return;
    memcpy(self->shared.w, self->w_live, self->n_params * sizeof(float));
    self->averaged = 0;
}

/* ------------------------------------------------------------ input checks */

/* "PATH:LINE: why" of the first bad line the workers met (the earliest in
 * the input) into out. Returns 1, or 0 when they met none. */
int tr_train_first_bad(tr_worker_t **workers, uint32_t n, char *out, size_t len)
{
    struct tr_reader_bad best, b;
    uint64_t line;
    int have = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!workers[i] || !tr_worker_first_bad(workers[i], &b))
            continue;
        if (!have || b.global < best.global)
            best = b;
        have = 1;
    }
    if (!have)
        return 0;
    if (tr_reader_line_number(best.path, best.offset, &line) == 0)
        snprintf(out, len, "%s:%llu: %s", best.path, (unsigned long long)line, best.why);
    else
        snprintf(out, len, "%s (byte %llu): %s", best.path, (unsigned long long)best.offset,
                 best.why);
    return 1;
}

/* Fail when the input what ("data.train", "data.eval") gave no example, or
 * more bad lines than data.max_bad_fraction of its lines (headers apart).
 * tot: examples, lines, bad lines, headers (over every trainer for
 * data.train). The message starts with the first bad line of these
 * workers; result names what was not done. */
int tr_train_judge_input(const struct ss_cfg *cfg, const char *what, const uint64_t tot[4],
                         tr_worker_t **workers, uint32_t n, const char *result, char *err,
                         size_t len)
{
    double ex = (double)tot[0], lines = (double)tot[1], bad = (double)tot[2];
    double data_lines = (double)(tot[1] - tot[3]);
    double limit = cfg->data.max_bad_fraction;
    int too_many = data_lines > 0 && bad > limit * data_lines;
    char where[1536] = "";
    if (ex > 0 && !too_many)
        return 0;
    if (ex == 0 && bad == 0) {
        snprintf(err, len, "%s: no example: %.0f line(s) in the input%s; %s", what, lines,
                 lines > 0 ? ", all headers" : " (empty files?)", result);
        return SS_E_CONFIG;
    }
    if (!tr_train_first_bad(workers, n, where, sizeof where))
        snprintf(where, sizeof where, "(the other trainers' logs name the first bad line)");
    if (ex == 0)
        snprintf(err, len, "%s -- %s: no example, %.0f of %.0f lines bad; %s", where, what, bad,
                 data_lines, result);
    else
        snprintf(err, len, "%s -- %s: %.0f of %.0f lines bad (%.2g%%), more than "
                 "data.max_bad_fraction %g; %s", where, what, bad, data_lines,
                 100.0 * bad / data_lines, limit, result);
    return SS_E_CONFIG;
}

/* After a segment: sum the training input's counts over every trainer and
 * stop the run (before anything is scored or saved) when it has no example
 * or too many bad lines. Every trainer reaches the same verdict. A segment
 * that a job checkpoint's drain cut short before any trainer read an
 * example (a SIGTERM in training's first instant) has no verdict yet: the
 * checkpoint is taken, and the resumed run reads the input. */
static int s_check_train_input(tr_train_t *self, tr_worker_t **workers, uint32_t n, char *err,
                               size_t len)
{
    struct tr_worker_counts c;
    tr_train_sum(workers, n, &c);
    uint64_t tot[5] = {c.c[TR_C_examples], c.c[TR_C_lines], c.c[TR_C_bad_lines],
                       c.c[TR_C_headers], c.cut ? 1 : 0};
    int rc = tr_train_barrier_u64(self, tot, 5, err, len);
    if (rc == 0 && c.c[TR_C_bad_lines])
        SS_LOG(SS_LOG_INFO, "data.train: %llu of %llu lines bad so far (this trainer)",
               (unsigned long long)c.c[TR_C_bad_lines],
               (unsigned long long)(c.c[TR_C_lines] - c.c[TR_C_headers]));
    if (rc == 0 && tot[0] == 0 && tot[4] > 0)
        return 0;  /* cut before the first example: nothing to judge yet */
    return rc ? rc : tr_train_judge_input(self->cfg, "data.train", tot, workers, n,
                                          "nothing was scored or saved", err, len);
}

/* Open the ring among all trainers: barriers, and the ring sync rules. */
static int s_open_ring(tr_train_t *self, char *err, size_t len)
{
    const struct ss_cfg *cfg = self->cfg;
    const char *eps[SS_CFG_MAX_LIST];
    for (uint32_t i = 0; i < self->shared.n_ranks; i++)
        eps[i] = ss_cluster_endpoint(self->cluster, SS_CLUSTER_TRAINER, i);
    struct tr_allreduce_conf ac = {self->rank, self->shared.n_ranks, eps, cfg->sync_timeout_ms,
                                   0, cfg->max_message_bytes, &self->curve, self->cluster, 0};
    ac.allow_loss = ss_cfg_trainer_loss_allowed(cfg);
    self->ring = tr_allreduce_new(self->shared.zctx, &ac, err, len);
    self->shared.ring = self->ring;
    return self->ring ? 0 : SS_E_NET;
}

/* Where only barriers use the ring (s-easgd, none), form it at the start
 * with one tiny round, so that a trainer that dies before the first barrier
 * can be left out there (the ring leaves out only ranks it has seen: see
 * tr_allreduce.c). One try: a trainer that starts late is waited for at the
 * first barrier as before. The ring rules' shadow thread does this itself. */
static void s_ring_form(tr_train_t *self)
{
    char err[512] = "";
    float one = 1.0f;
    if (self->shared.n_ranks < 2 || !ss_cfg_trainer_loss_allowed(self->cfg))
        return;
    if (tr_allreduce_sum(self->ring, &one, 1, err, sizeof err) != 0)
        SS_LOG(SS_LOG_INFO, "ring not complete at start (%s); it forms at the first barrier, "
               "and a trainer lost before then ends the job", err);
}

/* The save of the output model failed (a full disk, a PS that could not
 * checkpoint) after its evaluation, or the model kept could not be restored
 * to score data.eval (a PS refused the RESTORE): write the result file all
 * the same, with the error and the figures obtained, so that the job's
 * result.json has them (issue 22: there was none); the run still fails. */
static void s_result_after_failed_save(tr_train_t *self)
{
    char werr[512];
    if (tr_train_write_result(self, NULL, werr, sizeof werr) != 0)
        SS_LOG(SS_LOG_WARN, "%s (the result after the failed save)", werr);
}

int tr_train_run(tr_train_t *self, const struct tr_run_opts *opts, volatile sig_atomic_t *stop,
                 char *err, size_t err_len)
{
    const struct ss_cfg *cfg = self->cfg;
    uint32_t n = (uint32_t)cfg->workers;
    tr_worker_t **workers = ss_calloc(n, sizeof *workers);
    struct tr_worker_counts now, prev;
    const char *pats[SS_CFG_MAX_LIST];
    char terr[256];
    int rc;

    for (size_t i = 0; i < cfg->train_files.n; i++)
        pats[i] = cfg->train_files.v[i];
    int64_t total = tr_reader_total_bytes(pats, cfg->train_files.n, terr, sizeof terr);
    if (total < 0) {
        snprintf(err, err_len, "data.train: %s", terr);
        ss_free(workers);
        return (int)total;
    }
    self->model_dir = opts->model_dir;
    self->ckpt_req = opts->checkpoint;
    self->jobckpt_dir = opts->jobckpt_dir;
    self->train_bytes = total;
    self->has_valid = cfg->valid_files.n > 0 || cfg->valid_fraction > 0;
    int eval = !opts->no_eval && (cfg->eval_files.n > 0 || self->has_valid);
    self->scores = eval && (self->rank == 0 || cfg->sync_algorithm == SS_SYNC_NONE);
    self->input_bytes = total > 0 ? total * cfg->epochs / (int64_t)self->shared.n_ranks : 0;
    self->jsonl = tr_train_open_jsonl(self);
    atomic_store(&self->shared.stop, 0);
    err[0] = 0;
    rc = s_open_ring(self, err, err_len);
    if (rc == 0) {
        self->shadow = tr_shadow_new(&self->shared, self->model, err, err_len);
        rc = (!self->shadow && err[0]) ? SS_E_CONFIG : 0;
        tr_stats_set_sync_name(self->stats, self->shadow ? tr_shadow_name(self->shadow) : "none");
    }
    if (rc == 0 && self->resumed && self->resume.f.n_sync) {
        if (self->shadow)  /* restored when the shadow sets its groups up */
            tr_shadow_set_state(self->shadow, self->resume.sync, self->resume.f.n_sync);
        else
            snprintf(err, err_len, "the job checkpoint holds sync state, the job has sync "
                     "none"), rc = SS_E_CONFIG;
    }
    if (rc == 0 && !(self->shadow && tr_shadow_uses_ring(self->shadow)))
        s_ring_form(self);
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        if (!(workers[i] = tr_worker_new(&self->shared, i, n, 0, err, err_len)))
            rc = SS_E_CONFIG;
        else if (self->resumed)
            rc = tr_worker_set_pos(workers[i], &self->resume.workers[i], err, err_len);
    /* segments: eval_every_examples examples per trainer, or eval_every
     * epochs, or everything at once */
    int by_examples = eval && cfg->eval_every_examples > 0;
    int64_t seg = eval && cfg->eval_every > 0 && !by_examples ? cfg->eval_every : cfg->epochs;
    long long seg_budget = by_examples ? (long long)cfg->eval_every_examples : -1LL;
    self->selects = seg < cfg->epochs || by_examples;
    SS_LOG(SS_LOG_INFO, "training: %u workers, batch %lld, %lld epoch(s)%s", n,
           (long long)cfg->batch_size, (long long)cfg->epochs,
           self->selects ? ", eval and keep the best model between segments" : "");
    if (self->selects && self->has_valid)
        SS_LOG(SS_LOG_INFO, "keep-best and patience read the validation split (%s); data.eval "
               "is scored only on the model kept", tr_train_input_name(cfg, TR_WORKER_VALID));
    else if (self->selects && self->scores)
        SS_LOG(SS_LOG_WARN, "no validation split: keep-best%s choose the epoch on data.eval, so "
               "its eval NE is biased low (set data.valid or data.valid_fraction)",
               cfg->patience > 0 ? " and patience" : "");
    /* A resumed job goes on in the segment its checkpoint names, with that
     * segment's eval_every_examples budget left, the same segment on every
     * trainer (they took the checkpoint in the same one); a barrier checks
     * it. That barrier, or one at the start, is also where the trainers'
     * periodic checkpoint timers start together. */
    int64_t first = seg;
    if (rc == 0 && self->resumed) {
        first = self->resume.f.seg_end;
        uint64_t v[2] = {(uint64_t)first, 1};
        rc = tr_train_barrier_u64(self, v, 2, err, err_len);
        if (rc == 0 && v[0] != v[1] * (uint64_t)first)
            snprintf(err, err_len, "the trainers' job checkpoint states name different "
                     "segments (this one: epoch %lld): they are not of one checkpoint",
                     (long long)first), rc = SS_E_CORRUPT;
        atomic_store(&self->shared.segment_left, (long long)self->resume.f.segment_left);
        if (!by_examples)
            atomic_store(&self->shared.segment_left, -1LL);
    } else if (rc == 0 && cfg->job_ckpt_interval_s > 0) {
        float one = 1;
        rc = tr_train_barrier(self, &one, 1, err, err_len);
    }
    self->ckpt_interval_ns = (uint64_t)(cfg->job_ckpt_interval_s * 1e9);
    if (rc == 0 && self->ckpt_interval_ns)
        self->ckpt_next_ns = ss_now_ns() + self->ckpt_interval_ns;
    /* the clock starts with the workers: connecting the ring and seeding the
     * sync PSs are set-up, not training */
    self->t0_ns = ss_now_ns();
    uint64_t last = self->t0_ns;
    tr_worker_counts_init(&prev);
    int more = 1, fresh = !self->resumed;
    /* One segment per turn, ending at the barriers of s_end_segment and the
     * vote. A periodic job checkpoint that cut the segment short is taken
     * there and the same segment goes on (a trainer whose workers had finished it
     * meets the others again at once); one that found every trainer at the
     * segment's end waits for the evaluation and is taken before the next
     * segment starts. */
    for (int64_t end = first; rc == 0;) {
        self->shared.epoch_end = (uint64_t)(end < cfg->epochs ? end : cfg->epochs);
        if (fresh)
            atomic_store(&self->shared.segment_left, seg_budget);
        fresh = 1;
        uint64_t seg_t0 = ss_now_ns(), seg_end = 0;
        rc = s_segment(self, workers, n, stop, &prev, &last, &seg_end, err, err_len);
        /* training time: up to the last worker's end; the barrier wait for
         * slower trainers and the final sync are not this trainer's work */
        self->train_ns += (seg_end > seg_t0 ? seg_end : ss_now_ns()) - seg_t0;
        if (rc == 0)
            rc = s_end_segment(self, err, err_len);
        if (rc == 0)
            rc = s_check_train_input(self, workers, n, err, err_len);
        struct tr_ckpt_vote vote = {0};
        if (rc == 0)
            rc = tr_train_vote_checkpoint(self, workers, n, &vote, err, err_len);
        if (rc)
            break;
        struct tr_ckpt_at at = {end, (long long)atomic_load(&self->shared.segment_left)};
        if (vote.term) {
            rc = tr_train_stop_checkpoint(self, workers, n, &at, err, err_len);
            break;
        }
        uint64_t t_stop = self->draining ? self->drain_ns : ss_now_ns();
        self->draining = 0;
        atomic_store(&self->shared.drain, 0);
        if (vote.cut) {  /* periodic, in the middle of the segment: go on in it */
            rc = tr_train_periodic_checkpoint(self, workers, n, &at, t_stop, err, err_len);
            fresh = 0;
            continue;
        }
        uint64_t before = self->total.c[TR_C_examples];
        tr_train_sum(workers, n, &self->total);
        rc = s_average_in(self, workers, n, err, err_len);
        if (rc == 0)
            rc = s_score_and_vote(self, eval, self->total.c[TR_C_examples] > before, &more, err,
                          err_len);
        if (rc || !more)
            break;
        s_average_out(self);
        end += seg;
        if (vote.periodic) {  /* at the segment's end: before the next one */
            at = (struct tr_ckpt_at){end, seg_budget};
            rc = tr_train_periodic_checkpoint(self, workers, n, &at, ss_now_ns(), err, err_len);
        }
    }
    if (rc && self->shadow)
        tr_shadow_abort(self->shadow);
    self->wall_s = (double)self->train_ns / 1e9;
    tr_train_sum(workers, n, &now);
    struct tr_worker_counts zero;
    tr_worker_counts_init(&zero);
    tr_train_progress(self, &now, &zero, (double)(ss_now_ns() - self->t0_ns) / 1e9, self->wall_s,
               self->jsonl, 1);
    self->total = now;
    tr_eval_prog_result(&now.prog, &self->train);
    for (uint32_t i = 0; i < n; i++)
        tr_worker_destroy(&workers[i]);
    ss_free(workers);
    if (self->jsonl)
        fclose(self->jsonl);
    self->jsonl = NULL;
    if (rc && (self->save_error[0] || self->test_error[0]))
        s_result_after_failed_save(self);
    return rc;
}

void *tr_train_zctx(tr_train_t *self)
{
    return self->shared.zctx;
}

const struct ss_curve *tr_train_curve(const tr_train_t *self)
{
    return &self->curve;
}
