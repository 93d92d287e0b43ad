/* tr_train_report.c - what a trainer reports: the progress line on stderr,
 * the rows of metrics-trainer-R.jsonl, result-trainer-R.json and the summary
 * on stdout, and the live figures for the metrics scrape and the admin
 * endpoint's STATS reply. The figures are tr_stats.h's table. */
#include "tr_train_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ss_assert.h"
#include "ss_cpu.h"
#include "ss_err.h"
#include "ss_fs.h"
#include "ss_log.h"
#include "ss_metrics.h"
#include "ss_stats.h"
#include "ss_time.h"

/* ------------------------------------------------------------ progress */

//* Print one progress line of sn (redrawn in place on a terminal). */
static void s_print_progress(const tr_train_t *self, const struct ss_snap *sn, double t,
                             double frac, int final)
{
    char eta[32] = "", sync[160] = "";
    int tty = isatty(STDERR_FILENO);
    if (frac > 0.001 && frac < 1 && !final)
        snprintf(eta, sizeof eta, "  ETA %.0fs", t * (1 - frac) / frac);
    if (ss_snap_has(sn, TR_S_sync_rounds))
        snprintf(sync, sizeof sync, " | sync %.0f/min gap %.1f drift %.2g",
                 ss_snap_get(sn, TR_S_sync_rounds_per_min), ss_snap_get(sn, TR_S_sync_gap),
                 ss_snap_get(sn, TR_S_sync_drift));
    double ne = ss_snap_get(sn, TR_S_train_ne);
    char ne_s[32] = "-";  /* no example trained yet: no NE, not "nan" */
    if (isfinite(ne))
        snprintf(ne_s, sizeof ne_s, "%.4f", ne);
    fprintf(stderr, "%strainer %u | %.0f ex | %.0f ex/s | train NE %s%s | %.1fs%s%s",
            tty ? "\r\033[K" : "", self->rank, ss_snap_get(sn, TR_S_examples),
            ss_snap_get(sn, TR_S_eps), ne_s, sync, t, eta, tty && !final ? "" : "\n");
    fflush(stderr);
}

/* Publish the figures of a progress step for the metrics and admin threads,
 * then print one progress line and one JSONL row; final: 1 for the last
 * line, -1 for a JSONL row only. */
void tr_train_progress(tr_train_t *self, const struct tr_worker_counts *now,
                       const struct tr_worker_counts *prev, double t, double dt, FILE *jsonl,
                       int final)
{
    struct ss_val v[TR_N_STATS];
    struct ss_snap sn;
    struct tr_shadow_stats ss = {0};
    double eps =
        dt > 0 ? (double)(now->c[TR_C_examples] - prev->c[TR_C_examples]) / dt : 0;
    double frac = self->input_bytes > 0
                      ? (double)now->c[TR_C_bytes_read] / (double)self->input_bytes
                      : 0;
    if (self->shadow)
        tr_shadow_get_stats(self->shadow, &ss);
    tr_stats_set_progress(self->stats, eps, now->epochs_done, self->shadow ? &ss : NULL);
    tr_stats_snap(self->stats, now, &sn, v);
    ss_snap_num(&sn, TR_S_t, t);
    if (final >= 0)
        s_print_progress(self, &sn, t, frac, final);
    if (jsonl)
        tr_stats_write_row(jsonl, &sn, TR_IN_PROGRESS);
}

FILE *tr_train_open_jsonl(const tr_train_t *self)
{
    char path[SS_CFG_MAX_STR * 2];
    if (ss_mkdirs(self->cfg->run_dir) != 0)
        return NULL;
    snprintf(path, sizeof path, "%s/metrics-trainer-%u.jsonl", self->cfg->run_dir, self->rank);
    FILE *f = fopen(path, "w");
    if (!f)
        SS_LOG(SS_LOG_WARN, "cannot write %s: %s (progress only on stderr)", path,
               strerror(errno));
    return f;
}

/* One evaluation row of the JSONL file (the evaluation is published): of
 * the validation split (what, TR_WORKER_VALID: valid_* and best) or of
 * data.eval (eval_*; best too when no validation split chooses). */
void tr_train_jsonl_eval(tr_train_t *self, int what, int best)
{
    struct ss_val v[TR_N_STATS];
    struct ss_snap sn;
    if (!self->jsonl)
        return;
    tr_stats_snap(self->stats, &self->total, &sn, v);
    ss_snap_num(&sn, TR_S_t, (double)(ss_now_ns() - self->t0_ns) / 1e9);
    /* the test row of a validation split names the epoch of the model scored:
     * the kept one (restored when training went past it) */
    int kept = what == TR_WORKER_EVAL && self->has_valid && self->test_plan != TR_TEST_UNSAVED;
    ss_snap_u64(&sn, TR_S_epoch, kept ? self->kb.best_epoch : self->epochs_done);
    if (what == TR_WORKER_VALID)
        tr_stats_snap_eval(&sn, NULL);
    else
        tr_stats_snap_valid(&sn, NULL);
    if (what == TR_WORKER_VALID || !self->has_valid)
        ss_snap_bool(&sn, TR_S_best, best);
    tr_stats_write_row(self->jsonl, &sn, TR_IN_EVAL);
}

/* Publish r, an evaluation of what (TR_WORKER_EVAL or TR_WORKER_VALID), for
 * the metrics and admin threads. */
void tr_train_publish_eval(tr_train_t *self, int what, const struct tr_eval_result *r)
{
    tr_stats_set_eval(self->stats, what, r, self->kb.n_evals);
}

/* ------------------------------------------------------------ results */

/* What the output model is, for the result file and the summary. */
static const char *s_output_kind(const tr_train_t *self)
{
    if (!self->shadow)
        return "replica";  /* sync none: each trainer's own */
    return tr_shadow_uses_sync_ps(self->shadow) && !tr_shadow_uses_ring(self->shadow)
               ? "center"
               : "average";
}

/* Where the process's CPU time went: training workers, shadow thread (its
 * rounds), ZeroMQ I/O thread, and the rest (main thread, evaluation, exited
 * threads). */
static void s_snap_cpu(struct ss_snap *sn, const struct tr_worker_counts *t, tr_shadow_t *shadow)
{
    static const char *const io[] = {"ZMQbg/IO"};
    double total = ss_cpu_process_s(), io_s, workers = (double)t->c[TR_C_cpu_ns] / 1e9, sh = 0;
    struct tr_shadow_stats st;
    if (shadow) {
        tr_shadow_get_stats(shadow, &st);
        sh = st.cpu_s;
    }
    ss_cpu_split(io, 1, &io_s);
    ss_snap_num(sn, TR_S_cpu_s, total);
    ss_snap_num(sn, TR_S_cpu_workers_s, workers);
    ss_snap_num(sn, TR_S_cpu_shadow_s, sh);
    ss_snap_num(sn, TR_S_cpu_zmq_io_s, io_s);
    ss_snap_num(sn, TR_S_cpu_other_s, total - workers - sh - io_s);
}

/* The sync figures at the end (shadow algorithms) and the ring's. */
static void s_snap_sync(const tr_train_t *self, struct ss_snap *sn)
{
    if (self->ring && self->shared.n_ranks > 1) {  /* the ring at the end: survivors */
        struct tr_allreduce_stats a;
        tr_allreduce_get_stats(self->ring, &a);
        ss_snap_u64(sn, TR_S_ring_size, tr_allreduce_size(self->ring));
        ss_snap_u64(sn, TR_S_ring_changes, a.changes);
        ss_snap_u64(sn, TR_S_ring_reform_ms, a.reform_ms);
        ss_snap_u64(sn, TR_S_ring_handshakes_failed, a.handshakes_failed);
    }
    if (!self->shadow)
        return;
    const struct tr_shadow_stats *y = &self->sync;
    tr_stats_snap_sync(sn, y);
    ss_snap_u64(sn, TR_S_sync_reseeds, y->reseeds);
    ss_snap_bool(sn, TR_S_sync_final_ok, y->final_ok);
    ss_snap_u64(sn, TR_S_sync_ring_bytes_sent, y->ring_bytes_sent);
    ss_snap_u64(sn, TR_S_sync_ring_bytes_received, y->ring_bytes_received);
}

/* What the model folder holds: the output model (model_saved) when its
 * save succeeded; the epoch of the model in it (model_epoch), which is an
 * earlier one when the output model's save failed after an earlier save
 * (a failed save leaves the folder as it was). */
static void s_snap_saved(const tr_train_t *self, struct ss_snap *sn, int loaded)
{
    int kept_saved = self->kb.saved && !self->save_error[0];
    uint64_t epoch = self->saved_epoch ? self->saved_epoch
                     : kept_saved      ? self->kb.best_epoch
                                       : 0;  /* saved by a lost leader, or before a resume */
    ss_snap_bool(sn, TR_S_model_saved, kept_saved);
    if (!loaded && epoch)
        ss_snap_u64(sn, TR_S_model_epoch, epoch);
}

int tr_train_write_result(tr_train_t *self, const struct tr_eval_result *loaded, char *err,
                          size_t len)
{
    char path[SS_CFG_MAX_STR * 2];
    const struct tr_worker_counts *t = &self->total;
    const struct tr_eval_result *ev = loaded                ? loaded
                                      : self->has_valid     ? (self->have_test ? &self->test : NULL)
                                      : self->kb.have_eval  ? &self->kb.best
                                                            : NULL;
    const struct tr_eval_result *va = !loaded && self->has_valid && self->kb.have_eval
                                          ? &self->kb.best : NULL;
    double examples = (double)t->c[TR_C_examples];
    double eps = self->wall_s > 0 ? examples / self->wall_s : 0;
    struct ss_val v[TR_N_STATS];
    struct ss_snap sn;
    tr_stats_snap(self->stats, t, &sn, v);
    ss_snap_num(&sn, TR_S_eps, eps);
    ss_snap_num(&sn, TR_S_wall_s, self->wall_s);
    ss_snap_num(&sn, TR_S_train_ne, self->train.ne);
    ss_snap_u64(&sn, TR_S_epochs_done, self->epochs_done);
    ss_snap_u64(&sn, TR_S_evals, self->kb.n_evals);
    ss_snap_bool(&sn, TR_S_stopped_early, self->stopped_early);
    ss_snap_str(&sn, TR_S_sync_algorithm, self->shadow ? tr_shadow_name(self->shadow) : "none");
    ss_snap_str(&sn, TR_S_output_model, s_output_kind(self));
    s_snap_saved(self, &sn, loaded != NULL);
    if (!loaded && (self->save_error[0] || self->test_error[0]))
        ss_snap_str(&sn, TR_S_error, self->save_error[0] ? self->save_error : self->test_error);
    s_snap_sync(self, &sn);
    if (ev || va)
        ss_snap_u64(&sn, TR_S_best_epoch, self->kb.best_epoch);
    tr_stats_snap_eval(&sn, ev);
    tr_stats_snap_valid(&sn, va);
    if (!loaded && self->selects)
        ss_snap_str(&sn, TR_S_selected_on,
                    tr_train_input_name(self->cfg,
                                        self->has_valid ? TR_WORKER_VALID : TR_WORKER_EVAL));
    if (!loaded)
        ss_snap_u64(&sn, TR_S_eval_scorings, self->n_test_scorings);
    s_snap_cpu(&sn, t, self->shadow);
    snprintf(path, sizeof path, "%s/result-trainer-%u.json", self->cfg->run_dir, self->rank);
    FILE *f = ss_mkdirs(self->cfg->run_dir) == 0 ? fopen(path, "w") : NULL;
    if (!f) {
        snprintf(err, len, "cannot write %s: %s", path, strerror(errno));
        return SS_E_IO;
    }
    tr_stats_write_row(f, &sn, TR_IN_RESULT);
    if (fclose(f) != 0) {
        snprintf(err, len, "cannot write %s: %s", path, strerror(errno));
        return SS_E_IO;
    }
    printf("trainer %u: %.0f examples in %.1f s (%.0f ex/s), %.0f bad lines, train NE %.4f\n",
           self->rank, examples, self->wall_s, eps, ss_snap_get(&sn, TR_S_bad_lines),
           self->train.ne);
    if (va)
        printf("trainer %u valid: rows %llu  logloss %.5f  NE %.4f  AUC %.4f  (%s: chose the "
               "model kept)\n", self->rank, (unsigned long long)va->rows, va->logloss, va->ne,
               va->auc, tr_train_input_name(self->cfg, TR_WORKER_VALID));
    if (ev)
        printf("trainer %u eval: rows %llu  logloss %.5f  NE %.4f  AUC %.4f  calibration %.3f\n",
               self->rank, (unsigned long long)ev->rows, ev->logloss, ev->ne, ev->auc,
               ev->calibration);
    if (ev && !loaded && self->has_valid && self->test_plan == TR_TEST_UNSAVED &&
        self->saved_epoch)
        printf("trainer %u: the eval figures are of the model trained last, after %llu "
               "epoch(s): its save failed, and the model folder holds an earlier model, of "
               "epoch %llu\n", self->rank, (unsigned long long)self->epochs_done,
               (unsigned long long)self->saved_epoch);
    else if (ev && !loaded && self->has_valid && self->test_plan == TR_TEST_UNSAVED)
        printf("trainer %u: the eval figures are of the model trained last, after %llu "
               "epoch(s): no model is kept on disk (%s)\n", self->rank,
               (unsigned long long)self->epochs_done,
               self->save_error[0] ? "its save failed" : "none was saved");
    else if (ev && !loaded && self->has_valid)
        printf("trainer %u: data.eval scored %u time(s), on the model kept (epoch %llu%s)\n",
               self->rank, self->n_test_scorings, (unsigned long long)self->kb.best_epoch,
               self->test_plan == TR_TEST_RESTORE ? ", restored on every PS after the last "
               "epoch" : ", the last one trained");
    if (ev && !loaded && self->selects && !self->has_valid)
        printf("trainer %u: the epoch kept was chosen on data.eval (no validation split): its "
               "eval NE is biased low; set data.valid or data.valid_fraction\n", self->rank);
    return 0;
}

/* The figures now, for the metrics and admin threads: the workers' counter
 * slots summed this moment, the rest as of the last progress line. */
static void s_snap_live(tr_train_t *self, struct ss_snap *sn, struct ss_val *v)
{
    struct tr_worker_counts now;
    tr_worker_counts_of(self->ctrs, &now);
    tr_stats_snap(self->stats, &now, sn, v);
}

/* The latency histograms, after the table's samples (so the wait
 * histogram is read after the batch counter: see tr_worker.c). The round
 * histogram is there once the sync rules are known, labelled with their
 * name (tr_shadow_name: "s-easgd", "bottom:s-ma,top:s-bmuf"). */
static void s_prom_hists(tr_train_t *self, ss_mw_t *w)
{
    struct ss_hist h;
    char labels[160] = "";
    ss_hists_sum(self->shared.ps_wait_hist, (size_t)self->cfg->workers, &h);
    ss_mw_hist(w, "shadowsync_trainer_batch_ps_wait_seconds",
               "time a training worker waited for its embedding PS replies, per batch", NULL,
               &h);
    const char *sync_name = tr_stats_sync_name(self->stats);
    if (strcmp(sync_name, "none") != 0)
        snprintf(labels, sizeof labels, "algorithm=\"%s\"", sync_name);
    if (labels[0])
        ss_mw_hist(w, "shadowsync_trainer_sync_round_seconds",
                   "duration of each completed shadow sync round", labels,
                   &self->shared.sync_round_hist);
}

void tr_train_metrics(void *arg, ss_mw_t *w)
{
    struct ss_val v[TR_N_STATS];
    struct ss_snap sn;
    s_snap_live(arg, &sn, v);
    ss_snap_prom(&sn, w);
    s_prom_hists(arg, w);
}

char *tr_train_stats_json(tr_train_t *self, size_t max)
{
    struct ss_val v[TR_N_STATS];
    struct ss_snap sn;
    s_snap_live(self, &sn, v);
    return ss_snap_json(&sn, TR_IN_STATS, max, NULL);
}

char *tr_train_stats_fn(void *arg, size_t max)
{
    return tr_train_stats_json(arg, max);
}

