/* tr_train_ckpt.c - the job checkpoint of a training run (periodic, every
 * job.checkpoint_interval_s, and on SIGTERM) and the resume from one. What
 * one trainer's file holds is tr_jobckpt.h's; this file takes the
 * checkpoint at a point every trainer agrees on and puts the set in place. */
#include "tr_train_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_fs.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_time.h"
#include "tr_reader.h"

/* 1 when the ring has left out a trainer (job.allow_trainer_loss): a job
 * checkpoint would lack its state. Every trainer gets the same answer after
 * a barrier (the barrier agrees on the ring). */
static int s_ring_short(const tr_train_t *self)
{
    return self->shared.n_ranks > 1 && tr_allreduce_size(self->ring) < self->shared.n_ranks;
}

/* After a segment: whether any trainer was asked (SIGTERM) to stop with a
 * job checkpoint, whether any trainer's job.checkpoint_interval_s timer is
 * due (it drained its workers, or it is due now), and whether any trainer's
 * workers left the segment before its end. Any trainer's yes is everyone's:
 * a trainer whose signal or timer came late, or whose data had just ended,
 * joins the others at the same point. Returns 0 or the barrier's error. */
int tr_train_vote_checkpoint(tr_train_t *self, tr_worker_t **workers, uint32_t n,
                             struct tr_ckpt_vote *out, char *err, size_t len)
{
    struct tr_worker_counts c;
    tr_train_sum(workers, n, &c);
    uint64_t v[3] = {self->ckpt_req && *self->ckpt_req ? 1 : 0,
                     self->draining || tr_train_ckpt_due(self, ss_now_ns()) ? 1 : 0, c.cut ? 1 : 0};
    int rc = tr_train_barrier_u64(self, v, 3, err, len);
    out->term = rc == 0 && v[0] > 0;
    out->periodic = rc == 0 && v[1] > 0;
    out->cut = rc == 0 && v[2] > 0;
    return rc;
}

/* This trainer's state for its trainer-R.state (w and acc borrowed; free
 * st->workers and st->sync). Workers joined. */
static void s_collect_state(tr_train_t *self, tr_worker_t **workers, uint32_t n,
                            uint64_t save_id, const struct tr_ckpt_at *at,
                            struct tr_jobckpt *st)
{
    struct tr_jobckpt_fixed *f = &st->f;
    memset(st, 0, sizeof *st);
    *f = (struct tr_jobckpt_fixed){
        .rank = self->rank, .n_ranks = self->shared.n_ranks, .n_workers = n,
        .has_acc = self->shared.acc != NULL, .n_params = self->n_params,
        .shape_hash = tr_train_shape_hash(self), .input_bytes = self->train_bytes,
        .save_id = save_id,
        .examples_done = atomic_load(&self->shared.examples_done),
        .iterations = atomic_load(&self->shared.iterations),
        .examples_left = atomic_load(&self->shared.examples_left),
        .seg_end = at->seg_end, .segment_left = at->segment_left, .n_ckpts = self->n_ckpts,
        .train_ns = self->train_ns, .epochs_done = self->epochs_done,
        .have_test = (uint32_t)self->have_test, .test = self->test,
        .n_test_scorings = self->n_test_scorings};
    st->kb = (struct tr_jobckpt_kb){self->kb, self->carried, self->have_carried, self->led};
    st->workers = ss_calloc(n, sizeof *st->workers);
    for (uint32_t i = 0; i < n; i++)
        tr_worker_get_pos(workers[i], &st->workers[i]);
    st->w = self->shared.w;  /* workers are joined: plain reads */
    st->acc = self->shared.acc;
    f->n_sync = self->shadow ? tr_shadow_state(self->shadow, NULL) : 0;
    st->sync = f->n_sync ? ss_malloc(f->n_sync * sizeof(float)) : NULL;
    if (st->sync)
        tr_shadow_state(self->shadow, st->sync);
    /* the latency histograms: each worker's PS wait, then the sync rounds' */
    st->n_hists = n + 1;
    st->hists = ss_malloc((size_t)st->n_hists * SS_HIST_VALUES * sizeof *st->hists);
    for (uint32_t i = 0; i < n; i++)
        ss_hist_get(&self->shared.ps_wait_hist[i], st->hists + (size_t)i * SS_HIST_VALUES);
    ss_hist_get(&self->shared.sync_round_hist, st->hists + (size_t)n * SS_HIST_VALUES);
}

/* A digest of the dense replica and its optimizer state, logged when a job
 * checkpoint is written and when it is resumed (the two must match: the
 * resume drill compares them). Workers stopped. */
static uint64_t s_dense_digest(const tr_train_t *self)
{
    size_t bytes = self->n_params * sizeof(float);
    uint64_t h = ss_hash_bytes(self->shared.w, bytes, 0);
    return self->shared.acc ? ss_hash_bytes(self->shared.acc, bytes, h) : h;
}

/* DIR/MANIFEST of a job checkpoint. */
static int s_write_job_manifest(tr_train_t *self, const char *dir, uint64_t save_id,
                                uint64_t examples, char *err, size_t len)
{
    char path[SS_CFG_MAX_STR * 3], text[320];
    int with_sync = self->shadow && tr_shadow_uses_sync_ps(self->shadow);
    int k = snprintf(text, sizeof text,
                     "shadowsync-jobckpt 1\nsave_id %016llx\ntrainers %u\nworkers %lld\n"
                     "embedding_shards %zu\nsync_shards %zu\nexamples %llu\n",
                     (unsigned long long)save_id, self->shared.n_ranks,
                     (long long)self->cfg->workers,
                     ss_cluster_count(self->cluster, SS_CLUSTER_EMBEDDING),
                     with_sync ? ss_cluster_count(self->cluster, SS_CLUSTER_SYNC) : (size_t)0,
                     (unsigned long long)examples);
    struct ss_fs_piece piece = {text, (size_t)k};
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    return ss_fs_write_atomic(path, &piece, 1, err, len);
}

/* After save id's job checkpoint was committed: the folder of the one before
 * (JOBCKPT.new-ID) where it is still there. That is only on hosts that share
 * no file system with the leading trainer's, where each trainer's part (and
 * its host's PSs' parts) stayed in that folder (the launcher's gather puts
 * the set together: docs/checkpoints.md); without this each periodic
 * checkpoint would add one there. */
static void s_prune_previous(tr_train_t *self, uint64_t save_id)
{
    char dir[SS_CFG_MAX_STR * 2 + 32];
    if (self->ckpt_last_id && self->ckpt_last_id != save_id) {
        snprintf(dir, sizeof dir, "%s.new-%016llx", self->jobckpt_dir,
                 (unsigned long long)self->ckpt_last_id);
        (void)ss_fs_remove_tree(dir);
    }
    self->ckpt_last_id = save_id;
}

/* DESIGN: a job checkpoint is taken at a consistent point of every trainer:
 * the workers drained (every example read is trained, every push
 * acknowledged), the segment's final sync done, and the vote barrier passed,
 * so no trainer changes the embeddings or the center any more. Then, as for
 * the output model, everything goes into a new folder that replaces
 * jobckpt_dir in one step only when every part is written: the leader picks
 * the save id (a barrier carries it to all), each trainer writes its
 * trainer-R.state, the leader has every PS checkpoint into the folder, a
 * barrier counts failures, the leader writes MANIFEST and commits, and a last
 * barrier tells every trainer whether it did. A failure anywhere leaves the
 * previous job checkpoint as it was.
 * Returns 0 with *saved 1 (committed; *examples: all trainers' examples) or
 * 0 (a part failed: err says which); an error only when a barrier failed. */
static int s_job_checkpoint(tr_train_t *self, tr_worker_t **workers, uint32_t n,
                            const struct tr_ckpt_at *at, int *saved, uint64_t *examples_all,
                            char *err, size_t len)
{
    char dir[SS_CFG_MAX_STR * 2 + 32], path[SS_CFG_MAX_STR * 3], why[1024] = "";
    int leader = tr_train_leader(self), rc;
    uint64_t id = leader ? tr_train_new_save_id() : 0;
    *saved = 0;
    if ((rc = tr_train_barrier_u64(self, &id, 1, err, len)) != 0)
        return rc;
    snprintf(dir, sizeof dir, "%s.new-%016llx", self->jobckpt_dir, (unsigned long long)id);
    if (ss_mkdirs(dir) != 0) {
        snprintf(why, sizeof why, "cannot create %s: %s", dir, strerror(errno));
        rc = ss_fs_errno_rc(errno);
    }
    struct tr_jobckpt st;
    s_collect_state(self, workers, n, id, at, &st);
    uint64_t examples = 0;
    for (uint32_t i = 0; i < n; i++)
        examples += st.workers[i].counts.c[TR_C_examples];
    snprintf(path, sizeof path, "%s/trainer-%u.state", dir, self->rank);
    if (rc == 0)
        rc = tr_jobckpt_write(path, &st, why, sizeof why);
    if (rc == 0)
        SS_LOG(SS_LOG_INFO, "job checkpoint: state written (%llu examples, %llu floats of sync "
               "state, digest %016llx; dense state digest %016llx)",
               (unsigned long long)examples, (unsigned long long)st.f.n_sync,
               (unsigned long long)ss_hash_bytes(st.sync, st.f.n_sync * sizeof(float), 0),
               (unsigned long long)s_dense_digest(self));
    ss_free(st.workers);
    ss_free(st.sync);
    ss_free(st.hists);
    if (rc == 0 && leader)
        rc = tr_train_checkpoint_ps(self, id, dir, why, sizeof why);
    uint64_t tally[2] = {rc ? 1 : 0, examples};
    if ((rc = tr_train_barrier_u64(self, tally, 2, err, len)) != 0)
        return rc;
    int failed = (int)tally[0], mine = failed && why[0];
    if (!failed && s_ring_short(self)) {
        /* a trainer lost during it: its state may be missing, and a set
         * without it cannot be resumed; the previous one must stay */
        failed = 1;
        mine = leader;
        snprintf(why, sizeof why, "%u of %u trainers are left (a trainer was lost during it)",
                 tr_allreduce_size(self->ring), self->shared.n_ranks);
    }
    if (!failed && leader) {
        rc = s_write_job_manifest(self, dir, id, tally[1], why, sizeof why);
        if (rc == 0)
            rc = ss_fs_replace_dir(dir, self->jobckpt_dir, why, sizeof why);
        mine = rc != 0;
    }
    uint64_t commit = mine ? 1 : 0;  /* the leader's commit, or a part's failure */
    if ((rc = tr_train_barrier_u64(self, &commit, 1, err, len)) != 0)
        return rc;
    if (!failed && commit == 0) {
        if (leader)
            SS_LOG(SS_LOG_INFO, "job checkpoint saved in %s: %llu examples trained by all "
                   "trainers", self->jobckpt_dir, (unsigned long long)tally[1]);
        s_prune_previous(self, id);
        if (leader)
            tr_train_ps_drop_earlier(self, id, dir);
        *saved = 1;
        *examples_all = tally[1];
        return 0;
    }
    (void)ss_fs_remove_tree(dir);  /* every trainer: its host's part, where hosts differ */
    if (mine)
        snprintf(err, len, "job checkpoint failed: %s; the previous one in %s (if any) is kept",
                 why, self->jobckpt_dir);
    else
        snprintf(err, len, "job checkpoint failed on another trainer (its log says why); the "
                 "previous one in %s (if any) is kept", self->jobckpt_dir);
    return 0;
}

/* SIGTERM after the ring lost a trainer: no job checkpoint (it would hold
 * the survivors' states only, and --resume wants every trainer's), nothing
 * written over the last complete one; the run ends (exit 76, and the
 * launcher says which checkpoint stays). */
static void s_stop_kept(tr_train_t *self)
{
    char kept[SS_CFG_MAX_STR * 2 + 64];
    if (self->ckpt_last_id)
        snprintf(kept, sizeof kept, "the last complete one in %s (save %016llx) stays as it was",
                 self->jobckpt_dir, (unsigned long long)self->ckpt_last_id);
    else
        snprintf(kept, sizeof kept, "this run has none to keep");
    SS_LOG(SS_LOG_WARN, "SIGTERM: no job checkpoint written: %u of %u trainers are left, and a "
           "resume needs every one's state; %s; stopping", tr_allreduce_size(self->ring),
           self->shared.n_ranks, kept);
    self->stopped_kept = 1;
}

/* The job checkpoint SIGTERM asked for: taken, the run ends (exit 75). When
 * trainers were lost (before, or during it) none is written (s_stop_kept).
 * Returns 0, or an error when it failed. */
int tr_train_stop_checkpoint(tr_train_t *self, tr_worker_t **workers, uint32_t n,
                             const struct tr_ckpt_at *at, char *err, size_t len)
{
    uint64_t examples = 0;
    if (s_ring_short(self)) {
        s_stop_kept(self);
        return 0;
    }
    int saved, rc = s_job_checkpoint(self, workers, n, at, &saved, &examples, err, len);
    if (rc == 0 && !saved && s_ring_short(self)) {
        s_stop_kept(self);
        return 0;
    }
    if (rc == 0 && !saved)
        rc = SS_E_IO;
    self->checkpointed = rc == 0;
    return rc;
}

/* A periodic job checkpoint (job.checkpoint_interval_s): taken, and training
 * goes on; t_stop: when this trainer's workers were stopped for it. One that
 * failed (a full disk, a PS that did not answer) is logged and counted, the
 * previous one kept, and training goes on too. The next one is due one
 * interval after this one ended, on every trainer alike (they leave its last
 * barrier together). Returns 0, or a barrier's error. */
int tr_train_periodic_checkpoint(tr_train_t *self, tr_worker_t **workers, uint32_t n,
                                 const struct tr_ckpt_at *at, uint64_t t_stop, char *err,
                                 size_t len)
{
    uint64_t examples = 0, t_save = ss_now_ns();
    char why[1024] = "";
    if (s_ring_short(self)) {
        /* a trainer was left out (job.allow_trainer_loss): its state would be
         * missing, and a resume needs every trainer's; the same answer on
         * every trainer (the vote's barrier agreed on the ring) */
        SS_LOG(SS_LOG_WARN, "no more periodic job checkpoints: %u of %u trainers are left, and "
               "a resume needs every one's state; the last complete one in %s stays",
               tr_allreduce_size(self->ring), self->shared.n_ranks, self->jobckpt_dir);
        self->ckpt_interval_ns = 0;
        self->ckpt_next_ns = 0;
        return 0;
    }
    /* counted before the save, so that the state it writes counts itself (a
     * job resumed from it goes on from this count) */
    self->n_ckpts++;
    int saved, rc = s_job_checkpoint(self, workers, n, at, &saved, &examples, why, sizeof why);
    if (rc || !saved)
        self->n_ckpts--;
    if (rc) {
        snprintf(err, len, "%s", why);
        return rc;
    }
    uint64_t t_end = ss_now_ns();
    self->ckpt_next_ns = t_end + self->ckpt_interval_ns;
    if (saved) {
        /* the pause ends when the workers train again: tr_train_pause_end() */
        self->pause_open = 1;
        self->pause_stop_ns = t_stop;
        self->pause_save_ns = t_save;
        self->pause_commit_ns = t_end;
        self->pause_examples = examples;
    } else {
        self->n_ckpt_failures++;
        SS_LOG(SS_LOG_WARN, "periodic %s; training goes on (the next try is in %.0f s)", why,
               self->cfg->job_ckpt_interval_s);
    }
    tr_stats_set_ckpts(self->stats, self->n_ckpts, self->n_ckpt_failures);
    return 0;
}

/* The pause of the last periodic job checkpoint ends when every worker,
 * started again after it, has trained its first batch (or left without
 * one): now is the workers' sum. Then it is logged and published: the
 * workers' stop, the final sync, the save and the restart (threads, PS
 * connections, the first lookups) are all time the workers did not train.
 * Main thread. */
void tr_train_pause_end(tr_train_t *self, const struct tr_worker_counts *now, uint32_t n)
{
    if (!self->pause_open || (uint32_t)now->back < n)
        return;
    self->pause_open = 0;
    uint64_t back = now->back_ns > self->pause_commit_ns ? now->back_ns : self->pause_commit_ns;
    double pause_s = (double)(back - self->pause_stop_ns) / 1e9;
    self->ckpt_pause_s = pause_s;
    self->ckpt_pause_total_s += pause_s;
    SS_LOG(SS_LOG_INFO, "periodic job checkpoint %u: %llu examples (all trainers); training "
           "paused %.0f ms (stopping and final sync %.0f ms, saving %.0f ms, restarting the "
           "workers %.0f ms)", self->n_ckpts, (unsigned long long)self->pause_examples,
           pause_s * 1e3, (double)(self->pause_save_ns - self->pause_stop_ns) / 1e6,
           (double)(self->pause_commit_ns - self->pause_save_ns) / 1e6,
           (double)(back - self->pause_commit_ns) / 1e6);
    tr_stats_set_ckpt_pause(self->stats, self->ckpt_pause_s, self->ckpt_pause_total_s);
}

/* The latency histograms of the resumed state go on from its counts, as the
 * counters do (Prometheus then sees them grow across the restart). A state
 * of an older build holds none: they start empty, and the log says so. */
static void s_resume_hists(tr_train_t *self, const char *path)
{
    const struct tr_jobckpt *st = &self->resume;
    uint32_t n = st->f.n_workers;
    if (st->n_hists != n + 1) {
        SS_LOG(SS_LOG_INFO, "%s holds %s latency histograms (%u, this trainer keeps %u): "
               "they start empty, the counters go on", path, st->n_hists ? "other" : "no",
               st->n_hists, n + 1);
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        ss_hist_set(&self->shared.ps_wait_hist[i], st->hists + (size_t)i * SS_HIST_VALUES);
    ss_hist_set(&self->shared.sync_round_hist, st->hists + (size_t)n * SS_HIST_VALUES);
}

int tr_train_resume(tr_train_t *self, const char *dir, char *err, size_t len)
{
    char path[SS_CFG_MAX_STR * 3], terr[256];
    const char *pats[SS_CFG_MAX_LIST];
    snprintf(path, sizeof path, "%s/trainer-%u.state", dir, self->rank);
    int rc = tr_jobckpt_read(path, &self->resume, err, len);
    if (rc)
        return rc;
    const struct tr_jobckpt_fixed *f = &self->resume.f;
    for (size_t i = 0; i < self->cfg->train_files.n; i++)
        pats[i] = self->cfg->train_files.v[i];
    int64_t total = tr_reader_total_bytes(pats, self->cfg->train_files.n, terr, sizeof terr);
    rc = SS_E_CONFIG;
    if (f->rank != self->rank || f->n_ranks != self->shared.n_ranks)
        snprintf(err, len, "%s was written by trainer %u of %u; this is trainer %u of %u (a "
                 "resumed job needs the same trainers)", path, f->rank, f->n_ranks, self->rank,
                 self->shared.n_ranks);
    else if (f->n_workers != (uint32_t)self->cfg->workers)
        snprintf(err, len, "%s was written with trainer.workers %u, the job has %lld (the "
                 "input split depends on it)", path, f->n_workers,
                 (long long)self->cfg->workers);
    else if (f->n_params != self->n_params || f->shape_hash != tr_train_shape_hash(self) ||
             f->has_acc != (self->shared.acc != NULL))
        snprintf(err, len, "%s holds another model or dense optimizer than the job's", path);
    else if (total != f->input_bytes)
        snprintf(err, len, "data.train is %lld bytes, %lld when %s was written: the input "
                 "changed, the readers' places would be wrong", (long long)total,
                 (long long)f->input_bytes, path);
    else
        rc = 0;
    if (rc) {
        tr_jobckpt_free(&self->resume);
        return rc;
    }
    memcpy(self->shared.w, self->resume.w, self->n_params * sizeof(float));
    if (self->shared.acc)
        memcpy(self->shared.acc, self->resume.acc, self->n_params * sizeof(float));
    atomic_store(&self->shared.examples_done, f->examples_done);
    atomic_store(&self->shared.iterations, f->iterations);
    atomic_store(&self->shared.examples_left, f->examples_left);
    self->train_ns = f->train_ns;
    self->epochs_done = f->epochs_done;
    /* the keep-best state whole: what chose the model kept (its save id
     * too, which a state of format 2 lacks: 0, nothing compared at the end),
     * and what the leader last sent (a trainer that takes over after the
     * resume goes on from it; nothing in a state of format 2) */
    self->kb = self->resume.kb.own;
    self->carried = self->resume.kb.carried;
    self->have_carried = self->resume.kb.have_carried;
    self->led = self->resume.kb.led;
    self->have_test = (int)f->have_test;
    self->test = f->test;
    self->n_test_scorings = f->n_test_scorings;
    if (self->cfg->valid_files.n > 0 || self->cfg->valid_fraction > 0) {
        /* a validation split scores data.eval once, at the run's end: a
         * state holds no test scoring (one written by a build that scored
         * the model kept along the way is not carried on). The model held
         * now (the checkpoint's) is the kept one when the state says so;
         * an older state says 0, and the end restores the kept set before
         * scoring it */
        self->have_test = 0;
        self->n_test_scorings = 0;
        self->kb.kept_current = self->kb.kept_current && self->kb.saved;
    } else {
        self->kb.kept_current = 0;  /* what only a validation split's end reads */
    }
    self->n_ckpts = f->n_ckpts;
    self->ckpt_last_id = f->save_id;
    tr_stats_set_ckpts(self->stats, f->n_ckpts, self->n_ckpt_failures);
    for (uint32_t i = 0; i < f->n_workers; i++)
        self->resumed_examples += self->resume.workers[i].counts.c[TR_C_examples];
    s_resume_hists(self, path);
    self->resumed = 1;
    SS_LOG(SS_LOG_INFO, "resuming from %s: %llu examples trained, %llu epoch(s) done, dense "
           "state digest %016llx", path, (unsigned long long)self->resumed_examples,
           (unsigned long long)f->epochs_done, (unsigned long long)s_dense_digest(self));
    return 0;
}

int tr_train_checkpointed(const tr_train_t *self)
{
    return self->checkpointed;
}

int tr_train_stopped_kept(const tr_train_t *self)
{
    return self->stopped_kept;
}

