/* tr_modelset.c - the model set of a training run: keep-best between
 * segments (score, compare, keep the best model so far), the test scoring of
 * data.eval once at the end on the model kept when a validation split
 * chooses (going back to it on every PS when training went on past it),
 * and the saved model folder: the dense model, every PS's checkpoint and
 * MANIFEST of one save, put in place in one step; the requests that make the
 * PSs checkpoint or restore; loading dense.bin. */
#include "tr_train_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ss_assert.h"
#include "ss_auth.h"
#include "ss_err.h"
#include "ss_fs.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_msg.h"
#include "ss_net.h"
#include "ss_time.h"
#include "tr_mfile.h"

#define TR_DENSE_MAGIC "SSDENSE1"

/* ------------------------------------------------------------ keep-best */

/* With a validation split, data.eval is the test set: scored once, at the
 * run's end, on the model kept (tr_train_final_test). Nothing chooses on the
 * figure. */
static int s_score_test(tr_train_t *self, int plan, char *err, size_t len)
{
    struct tr_eval_result r;
    int rc = tr_train_score(self, TR_WORKER_EVAL, &r, err, len);
    if (rc)
        return rc;
    self->test = r;
    self->have_test = 1;
    self->test_plan = plan;
    self->n_test_scorings++;
    tr_train_publish_eval(self, TR_WORKER_EVAL, &r);
    tr_train_jsonl_eval(self, TR_WORKER_EVAL, 0);
    if (plan == TR_TEST_UNSAVED)
        SS_LOG(SS_LOG_WARN, "test (data.eval) of the model trained last, after %llu epoch(s), "
               "which is not on disk: NE %.5f AUC %.4f", (unsigned long long)self->epochs_done,
               r.ne, r.auc);
    else
        SS_LOG(SS_LOG_INFO, "test (data.eval) of the model kept, from epoch %llu, scored once%s: "
               "NE %.5f AUC %.4f (not used to choose)", (unsigned long long)self->kb.best_epoch,
               plan == TR_TEST_RESTORE ? " after restoring it" : "", r.ne, r.auc);
    return 0;
}

/* The save id that DIR/MANIFEST names (the save every file of the folder
 * belongs to). Returns 0, or SS_E_IO / SS_E_CORRUPT with err. */
static int s_manifest_save_id(const char *dir, uint64_t *save_id, char *err, size_t len)
{
    char path[SS_CFG_MAX_STR * 3], line[128];
    unsigned long long id = 0;
    int found = 0;
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, len, "cannot open %s: %s", path, strerror(errno));
        return SS_E_IO;
    }
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "save_id %16llx", &id) == 1;
    fclose(f);
    if (!found || id == 0) {
        snprintf(err, len, "%s names no save_id", path);
        return SS_E_CORRUPT;
    }
    *save_id = id;
    return 0;
}

static int s_each_ps(tr_train_t *self, int type, uint64_t save_id, const char *dir, char *err,
                     size_t len);

/* Go back to the model kept in model_dir: every PS restores its file of the
 * kept save (RESTORE, which the PS answers only when done), then this
 * trainer loads the kept dense.bin into the replica it scores. The sync PSs
 * (where EASGD uses them) are restored too, so that every PS of the job
 * holds the model folder's set afterwards. Returns 0 or an error (err). */
static int s_restore_kept(tr_train_t *self, char *err, size_t len)
{
    char why[1024] = "";
    uint64_t save_id = 0, t0 = ss_now_ms();
    int rc = s_manifest_save_id(self->model_dir, &save_id, why, sizeof why);
    if (rc == 0 && self->kb.save_id && save_id != self->kb.save_id)
        SS_LOG(SS_LOG_WARN, "%s/MANIFEST names save %016llx, the model kept is save %016llx "
               "(a lost leader saved after its last vote, or a save came after the job "
               "checkpoint this job resumed from?): restoring the folder's",
               self->model_dir, (unsigned long long)save_id,
               (unsigned long long)self->kb.save_id);
    if (rc == 0)
        rc = s_each_ps(self, MSG_TYPE__MSG_RESTORE, save_id, self->model_dir, why, sizeof why);
    if (rc == 0)
        rc = tr_train_load(self, self->model_dir, why, sizeof why);
    if (rc) {
        snprintf(err, len, "cannot go back to the model kept in %s (epoch %llu) to score "
                 "data.eval: %s; nothing is scored (the PSs may hold a mix of the kept and "
                 "the last model); the model folder is as saved: score it on its own with "
                 "shadow-launch --eval-only, whose PSs start from its files", self->model_dir,
                 (unsigned long long)self->kb.best_epoch, why);
        snprintf(self->test_error, sizeof self->test_error, "%s", err);  /* result.json */
        return rc;
    }
    SS_LOG(SS_LOG_INFO, "the model kept (epoch %llu, save %016llx) restored on every PS and "
           "in the dense replica in %llu ms, to score data.eval on it",
           (unsigned long long)self->kb.best_epoch, (unsigned long long)save_id,
           (unsigned long long)(ss_now_ms() - t0));
    return 0;
}

/* With a validation split, after the run's last segment (every trainer has
 * stopped training: the vote's barrier) or a failed save of the model kept:
 * score data.eval once, on the model kept (tr_eval_test_plan: restored
 * first when it is not the one held now; the model held now, said so, when
 * none is on disk). The leader only. Returns 0 or an error (err). */
int tr_train_final_test(tr_train_t *self, char *err, size_t len)
{
    int saved = self->kb.saved && !self->save_error[0];
    int plan = tr_eval_test_plan(self->cfg->eval_files.n > 0, tr_train_leader(self),
                                 self->test_plan != TR_TEST_SKIP, saved, self->kb.kept_current);
    int rc = 0;
    if (plan == TR_TEST_SKIP)
        return 0;
    if (plan == TR_TEST_RESTORE)
        rc = s_restore_kept(self, err, len);
    else if (plan == TR_TEST_UNSAVED && self->saved_epoch)
        SS_LOG(SS_LOG_WARN, "the model kept was not saved (%s holds an earlier model, of "
               "epoch %llu): data.eval is scored on the model trained last instead",
               self->model_dir, (unsigned long long)self->saved_epoch);
    else if (plan == TR_TEST_UNSAVED)
        SS_LOG(SS_LOG_WARN, "no model is kept in %s (%s): data.eval is scored on the model "
               "trained last instead", self->model_dir,
               self->save_error[0] ? "its save failed" : "none was saved");
    if (rc == 0)
        rc = s_score_test(self, plan, err, len);
    if (rc == 0 && plan == TR_TEST_RESTORE)
        self->kb.kept_current = 1;
    return rc;
}

/* Score the model every trainer now holds (for sync none: this trainer's own
 * replica); keep it in model_dir when it is the best so far. *stop_vote: 1
 * when trainer.patience evaluations brought no gain. With a validation
 * split nothing else is scored here: data.eval waits for the run's end
 * (tr_train_final_test), unless the save of a model just kept fails. */
static int s_keep_if_better(tr_train_t *self, const struct tr_eval_result *in, int last,
                            float *stop_vote, char *err, size_t len);

int tr_train_evaluate_segment(tr_train_t *self, int last, float *stop_vote, char *err,
                              size_t len)
{
    struct tr_eval_result r;
    int what = self->has_valid ? TR_WORKER_VALID : TR_WORKER_EVAL;
    int rc = tr_train_score(self, what, &r, err, len);
    if (rc)
        return rc;
    self->kb.n_evals++;
    if (what == TR_WORKER_EVAL)
        self->n_test_scorings++;
    self->last_eval = r;
    tr_train_publish_eval(self, what, &r);
    return s_keep_if_better(self, &r, last, stop_vote, err, len);
}

/* Keep the model held now when r, its evaluation, is better than the best
 * so far (the leader saves it); count evaluations without gain for
 * trainer.patience (*stop_vote). Returns 0 or the save's error. */
static int s_keep_if_better(tr_train_t *self, const struct tr_eval_result *in, int last,
                            float *stop_vote, char *err, size_t len)
{
    struct tr_eval_result r = *in;
    int what = self->has_valid ? TR_WORKER_VALID : TR_WORKER_EVAL;
    const char *name = self->has_valid ? "validation" : "eval";
    int rc = 0;
    int better = tr_eval_better(&r, self->kb.have_eval ? &self->kb.best : NULL);
    if (!better && !isfinite(r.ne) && !isfinite(r.logloss))
        SS_LOG(SS_LOG_WARN, "%s after %llu epoch(s) is not finite (logloss %g): the model "
               "diverged; it is not kept", tr_train_input_name(self->cfg, what),
               (unsigned long long)self->epochs_done, r.logloss);
    if (better) {
        self->kb.best = r;
        self->kb.have_eval = 1;
        self->kb.best_epoch = self->epochs_done;
        self->kb.evals_since_best = 0;
    } else {
        self->kb.evals_since_best++;
    }
    self->kb.kept_current = 0;  /* the model held now is kept only once saved */
    tr_train_jsonl_eval(self, what, better);
    SS_LOG(SS_LOG_INFO, "%s after %llu epoch(s): NE %.5f AUC %.4f%s", name,
           (unsigned long long)self->epochs_done, r.ne, r.auc,
           better ? " (best so far)" : "");
    if (!better && last)
        SS_LOG(SS_LOG_INFO, "the output model is the best one, from epoch %llu (%s NE %.5f)",
               (unsigned long long)self->kb.best_epoch, name, self->kb.best.ne);
    if (better && tr_train_leader(self)) {
        rc = tr_train_save(self, self->model_dir, err, len);
        self->kb.saved |= rc == 0;
        self->kb.kept_current = rc == 0;
        char terr[1024];
        if (rc && self->has_valid && tr_train_final_test(self, terr, sizeof terr) != 0)
            SS_LOG(SS_LOG_WARN, "after the failed save: %s", terr);
    }
    if (self->cfg->patience > 0 && self->kb.evals_since_best >= (uint32_t)self->cfg->patience) {
        *stop_vote = 1;
        if (!last)
            SS_LOG(SS_LOG_INFO, "stopping early: %u evaluation(s) without a better NE",
                   self->kb.evals_since_best);
    }
    return rc;
}
int tr_train_reconsider(tr_train_t *self, int last, float *stop_vote, char *err, size_t len)
{
    SS_LOG(SS_LOG_INFO, "this trainer's own %s after %llu epoch(s), NE %.5f, against the lost "
           "leader's best%s", self->has_valid ? "validation" : "eval",
           (unsigned long long)self->epochs_done, self->last_eval.ne,
           self->kb.have_eval ? "" : " (it had none)");
    return s_keep_if_better(self, &self->last_eval, last, stop_vote, err, len);
}

/* ------------------------------------------------------------ save/load */

struct tr_dense_hdr {
    char magic[8];             /* TR_DENSE_MAGIC */
    uint64_t n_params;         /* floats that follow */
    uint64_t shape_hash;       /* hash of the model shape */
    uint64_t checksum;         /* ss_hash_bytes of the floats */
};

/* Hash of the model shape. Without first-order terms it covers the fields up to
 * first_order only: the hash of the shape before that field existed, so older
 * dense.bin files still load; the fields after first_order (how the products
 * run) are never part of it. */
uint64_t tr_train_shape_hash(const tr_train_t *self)
{
    return tr_mfile_shape_hash(tr_model_conf(self->model));
}

/* Write the dense model to DIR/dense.bin (atomic: a temporary file renamed
 * over it). A full disk is named: "cannot write PATH: No space left on
 * device". */
static int s_save_dense(tr_train_t *self, const char *dir, char *err, size_t len)
{
    char path[SS_CFG_MAX_STR * 3];
    size_t bytes = self->n_params * sizeof(float);
    float *copy = ss_malloc(bytes);
    memcpy(copy, self->shared.w, bytes);  /* workers are stopped: a plain copy */
    uint64_t bad = ss_floats_first_nonfinite(copy, self->n_params);
    if (bad < self->n_params) {  /* a diverged model scores NaN: never save one */
        snprintf(err, len, "the dense model holds a non-finite value (parameter %llu of %zu "
                 "is %g): the training diverged (try a lower model.lr); it is not saved",
                 (unsigned long long)bad, self->n_params, (double)copy[bad]);
        ss_free(copy);
        return SS_E_INVAL;
    }
    struct tr_dense_hdr h = {TR_DENSE_MAGIC, self->n_params, tr_train_shape_hash(self),
                             ss_hash_bytes(copy, bytes, 0)};
    struct ss_fs_piece pieces[2] = {{&h, sizeof h}, {copy, bytes}};
    snprintf(path, sizeof path, "%s/dense.bin", dir);
    int rc = ss_fs_write_atomic(path, pieces, 2, err, len);
    ss_free(copy);
    if (rc == 0)
        SS_LOG(SS_LOG_INFO, "dense model saved to %s", path);
    return rc;
}

/* A save id: one per save, the same in every file of the save. */
uint64_t tr_train_new_save_id(void)
{
    return ss_mix64(ss_now_ns() ^ ((uint64_t)getpid() << 32)) | 1;
}

/* The folder name a PS is sent for dir: relative to job.run_dir when dir
 * lies inside it (each PS resolves it in its own run directory, which
 * differs per host with --remote-run-dir), else dir itself. */
static const char *s_ps_folder(const tr_train_t *self, const char *dir)
{
    size_t n = strlen(self->cfg->run_dir);
    if (n && strncmp(dir, self->cfg->run_dir, n) == 0 && dir[n] == '/' && dir[n + 1])
        return dir + n + 1;
    return dir;
}

/* One try of a request to one PS, in flight: its own connection (its HELLO
 * sent) and the request's id (s_ps_send), answered in s_ps_finish. */
struct s_ask {
    ss_conn_t *c;
    uint64_t id;
    int rc;             /* the send's failure, else 0 */
};

/* Send HELLO and then request type to the PS at ep (role, shard k) on a
 * new connection, waiting for neither (s_ps_finish waits for both): a PS
 * that does not answer its HELLO delays no other PS's request. Returns 0 or
 * an error with why (a->c may hold a connection either way). Main thread. */
static int s_ps_send(tr_train_t *self, const struct ss_conn_opts *o, const char *ep, int role,
                     size_t k, int type, uint64_t save_id, const char *dir, const char *token,
                     struct s_ask *a, char *why, size_t len)
{
    Header h = HEADER__INIT;
    a->c = ss_conn_new(self->shared.zctx, ep, o);
    h.type = type;
    h.has_save_id = 1;
    h.save_id = save_id;
    h.text = dir ? (char *)s_ps_folder(self, dir) : NULL;
    h.admin_token = token[0] ? (char *)token : NULL;
    if (type == MSG_TYPE__MSG_CHECKPOINT || type == MSG_TYPE__MSG_RESTORE) {
        /* a large shard's file takes what it takes: the PS says it is at it
         * each request_timeout_ms, and each word starts o->timeout_ms again */
        h.has_progress_ms = 1;
        h.progress_ms = (uint32_t)self->cfg->request_timeout_ms;
    }
    /* the PS reads a connection's messages in order: the request finds the
     * HELLO said */
    a->rc = a->c ? ss_conn_hello_send(a->c, ss_cluster_hello_hash(self->cluster, role, k),
                                      why, len)
                 : SS_E_NET;
    if (a->rc == 0)
        a->rc = ss_conn_send(a->c, &h, NULL, 0, &a->id);
    if (a->rc && a->c)
        snprintf(why, len, "cannot send to %s: %s", ep, ss_strerror(a->rc));
    return a->rc;
}

/* Wait for the reply to a's request (its HELLO answered). Returns 0 or an
 * error with why (SS_E_EMPTY: a sync PS that holds no center). */
static int s_ps_reply(struct s_ask *a, const char *ep, int type, char *why, size_t len)
{
    struct ss_msg reply = {0};
    int rc = ss_conn_wait(a->c, a->id, -1, &reply, why, len);
    if (rc == 0 && type == MSG_TYPE__MSG_CHECKPOINT)
        SS_LOG(SS_LOG_INFO, "PS %s checkpointed to %s", ep, reply.hdr->text);
    if (rc == 0 || rc == SS_E_PEER) {
        if (rc == SS_E_PEER && reply.hdr->status == SS_E_EMPTY)
            rc = SS_E_EMPTY;  /* a sync PS that holds no center (s_each_ps) */
        ss_msg_close(&reply);
    }
    return rc;
}

/* Wait for the answers to a's HELLO and request (sent by s_ps_send; each
 * given up o->timeout_ms after it was sent, the request's each time the PS
 * says it is still working) and close its connection. Returns 0 or an
 * error with why (a refused HELLO's; SS_E_EMPTY: a sync PS that holds no
 * center, for s_each_ps). Main thread. */
static int s_ps_finish(struct s_ask *a, const char *ep, int type, char *why, size_t len)
{
    int rc = a->rc;
    if (rc == 0)
        rc = ss_conn_hello_finish(a->c, why, len);  /* a refused HELLO: its text in why */
    if (rc == 0)
        rc = s_ps_reply(a, ep, type, why, len);
    ss_conn_destroy(&a->c);
    return rc;
}

/* One try of request type to the PS at ep (role, shard k): a new connection,
 * HELLO, the request, its reply. Returns 0 or an error with why. Main
 * thread. */
static int s_ps_request(tr_train_t *self, const struct ss_conn_opts *o, const char *ep,
                        int role, size_t k, int type, uint64_t save_id, const char *dir,
                        const char *token, char *why, size_t len)
{
    struct s_ask a = {0};
    s_ps_send(self, o, ep, role, k, type, save_id, dir, token, &a, why, len);
    return s_ps_finish(&a, ep, type, why, len);
}

/* Whether a request that failed with rc may be sent again: the PS did not
 * answer (dead, frozen, restarting: its restart loses what the old
 * connection had sent) or answered as a restarted PS does ("HELLO
 * required"). A refusal (SS_E_PEER, SS_E_DENIED: a full disk, a wrong
 * token) is the PS's answer, not retried. */
static int s_ps_retryable(int rc)
{
    return rc == SS_E_TIMEOUT || rc == SS_E_NET || rc == SS_E_NOHELLO;
}

/* Times one save puts the center back into one sync PS (it restarted again
 * each time). */
#define TR_SAVE_RESTORES 3

/* Sync PS k answered a CHECKPOINT with "not initialized": it restarted
 * empty after the final sync pulled its center into every replica (a kill
 * between that PULL and this save; the re-seed of the rounds never saw
 * it). Put that center back (tr_shadow_restore_center) from the model this
 * trainer holds (the live one while model.dense_average scores an average),
 * so that the save is asked again and nothing trained is lost. Returns 0 or
 * an error with err. */
static int s_restore_center(tr_train_t *self, size_t k, char *err, size_t len)
{
    const float *model = self->averaged ? self->w_live : self->shared.w;
    int rc = tr_shadow_restore_center(self->shadow, k, model, err, len);
    if (rc == 0)
        tr_shadow_get_stats(self->shadow, &self->sync);  /* the re-seed in the result */
    return rc;
}

/* Send every PS of the job (the sync PSs only where EASGD uses them) one
 * request of type (CHECKPOINT, CHECKPOINT_DONE or RESTORE) naming folder dir
 * (see s_ps_folder) and save_id: to all of them first, then wait for each,
 * so that they write or read their files at the same time (a save takes the
 * slowest PS's time, not the sum). A CHECKPOINT or RESTORE asks for "still
 * working" replies each limits.request_timeout_ms, so a shard whose file
 * takes minutes is waited for. A PS that does not answer (nor say it is
 * working) within 6 x limits.request_timeout_ms is asked again, alone, on a
 * new connection, until limits.recovery_timeout_ms has passed since its
 * reply was first waited for (the PSs before it may have taken long), as
 * lookups wait for a PS the launcher restarts (a checkpoint
 * to the same folder and save is the same files again). A sync PS that
 * answers a CHECKPOINT "not initialized" gets its center back first
 * (s_restore_center, at most TR_SAVE_RESTORES times). Returns 0 or the
 * first failure in PS order, with err naming the PS and carrying its reply.
 * Main thread. */
static int s_each_ps(tr_train_t *self, int type, uint64_t save_id, const char *dir, char *err,
                     size_t len)
{
    const struct ss_cfg *cfg = self->cfg;
    struct ss_conn_opts o = {.max_message_bytes = cfg->max_message_bytes,
                             .timeout_ms = cfg->request_timeout_ms * 6,
                             .curve = &self->curve,
                             .max_in_flight = cfg->security.max_in_flight};
    size_t n_emb = ss_cluster_count(self->cluster, SS_CLUSTER_EMBEDDING);
    size_t n_sync = ss_cluster_count(self->cluster, SS_CLUSTER_SYNC), n = n_emb + n_sync;
    int with_sync = self->shadow && tr_shadow_uses_sync_ps(self->shadow);
    const char *what = type == MSG_TYPE__MSG_CHECKPOINT ? "checkpoint"
                       : type == MSG_TYPE__MSG_RESTORE  ? "restore the model kept"
                                                        : "take note of the committed save";
    char token[SS_ADMIN_TOKEN_MAX];  /* admin requests carry the job's token, if any */
    int rc = ss_admin_token_read(cfg->security.admin_token_file, token, err, len);
    if (rc)
        return rc;
    struct s_ask *asks = ss_calloc(n ? n : 1, sizeof *asks);
    char (*whys)[768] = ss_calloc(n ? n : 1, sizeof *whys);
    /* the first try of every PS, all in flight at once (sync PSs hold
     * nothing without EASGD, alone or in a group) */
    for (size_t i = 0; i < n; i++) {
        int role = i < n_emb ? SS_CLUSTER_EMBEDDING : SS_CLUSTER_SYNC;
        size_t k = i < n_emb ? i : i - n_emb;
        if (role == SS_CLUSTER_EMBEDDING || with_sync)
            s_ps_send(self, &o, ss_cluster_endpoint(self->cluster, role, k), role, k, type,
                      save_id, dir, token, &asks[i], whys[i], sizeof whys[i]);
    }
    for (size_t i = 0; i < n; i++) {
        int role = i < n_emb ? SS_CLUSTER_EMBEDDING : SS_CLUSTER_SYNC;
        size_t k = i < n_emb ? i : i - n_emb;
        const char *ep = ss_cluster_endpoint(self->cluster, role, k);
        if (role == SS_CLUSTER_SYNC && !with_sync)
            continue;
        char *why = whys[i];
        size_t wl = sizeof whys[i];
        /* this PS's retries have their own limits.recovery_timeout_ms from
         * now, as when each PS was asked in turn: the time spent waiting for
         * the PSs before it (a large shard's file) is not taken from it */
        uint64_t t_ps = ss_now_ms();
        int tries = 1, restores = 0, prc = s_ps_finish(&asks[i], ep, type, why, wl);
        for (;;) {
            int at_once = 0;  /* asked again at once: the PS holds the center now */
            if (prc == SS_E_EMPTY && role == SS_CLUSTER_SYNC &&
                type == MSG_TYPE__MSG_CHECKPOINT && restores < TR_SAVE_RESTORES) {
                restores++;
                at_once = (prc = s_restore_center(self, k, why, wl)) == 0;
                /* a PS that did not answer the INIT is asked again below */
            }
            if (!at_once) {
                /* once one PS failed the request fails: the others are not
                 * asked again */
                if (prc == 0 || !s_ps_retryable(prc) || rc != 0 ||
                    ss_now_ms() - t_ps >= (uint64_t)cfg->recovery_timeout_ms)
                    break;
                SS_LOG(SS_LOG_WARN, "%s PS %zu (%s) did not %s: %s; asking again (until "
                       "limits.recovery_timeout_ms, %lld ms, has passed)",
                       role == SS_CLUSTER_SYNC ? "sync" : "embedding", k, ep, what,
                       why[0] ? why : ss_strerror(prc), (long long)cfg->recovery_timeout_ms);
                usleep(200000);  /* a PS that refused at once: not a busy loop */
            }
            why[0] = '\0';
            prc = s_ps_request(self, &o, ep, role, k, type, save_id, dir, token, why, wl);
            tries++;
        }
        if (prc == 0 && tries > 1)
            SS_LOG(SS_LOG_INFO, "%s PS %zu answered the save at try %d, after %.1f s",
                   role == SS_CLUSTER_SYNC ? "sync" : "embedding", k, tries,
                   (double)(ss_now_ms() - t_ps) / 1e3);
        if (prc && rc == 0) {
            rc = prc;
            snprintf(err, len, "%s PS %zu did not %s: %s",
                     role == SS_CLUSTER_SYNC ? "sync" : "embedding", k, what,
                     why[0] ? why : ss_strerror(prc));
        }
    }
    ss_free(asks);
    ss_free(whys);
    return rc;
}

int tr_train_checkpoint_ps(tr_train_t *self, uint64_t save_id, const char *dir, char *err,
                           size_t len)
{
    return s_each_ps(self, MSG_TYPE__MSG_CHECKPOINT, save_id, dir, err, len);
}

/* After the save in folder dir (DIR.new-ID) was committed: every PS drops
 * its files of earlier saves beside it (CHECKPOINT_DONE). They are left
 * only on hosts that share no file system with this trainer's, where
 * nothing else removes them before the launcher's gather. A failure costs
 * disk space, not the save: logged, not returned. Main thread. */
void tr_train_ps_drop_earlier(tr_train_t *self, uint64_t save_id, const char *dir)
{
    char err[1024];
    if (s_each_ps(self, MSG_TYPE__MSG_CHECKPOINT_DONE, save_id, dir, err, sizeof err) != 0)
        SS_LOG(SS_LOG_WARN, "%s; the PS keeps its files of earlier saves beside %s until the "
               "launcher gathers the run directory", err, dir);
}

/* DIR/MANIFEST: what the model folder holds and the save it comes from
 * (the PS files record the same save id). */
static int s_write_manifest(tr_train_t *self, const char *dir, uint64_t save_id, char *err,
                            size_t len)
{
    char path[SS_CFG_MAX_STR * 3], text[256];
    int with_sync = self->shadow && tr_shadow_uses_sync_ps(self->shadow);
    int n = snprintf(text, sizeof text,
                     "shadowsync-model 1\nsave_id %016llx\ndense dense.bin\n"
                     "embedding_shards %zu\nsync_shards %zu\n", (unsigned long long)save_id,
                     ss_cluster_count(self->cluster, SS_CLUSTER_EMBEDDING),
                     with_sync ? ss_cluster_count(self->cluster, SS_CLUSTER_SYNC) : (size_t)0);
    struct ss_fs_piece piece = {text, (size_t)n};
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    return ss_fs_write_atomic(path, &piece, 1, err, len);
}

/* DESIGN: the output model is one set, the dense model and every PS's
 * embeddings (and EASGD center) of one save. It is written into a new folder
 * next to dir, DIR.new-ID: dense.bin, each PS's ROLE-K.ckpt, then MANIFEST
 * naming the save. Only when every part succeeded does the new folder take
 * dir's place in one step (ss_fs_replace_dir: an atomic exchange); on any
 * failure (a PS that cannot checkpoint, a full disk here) the new folder is
 * removed and dir stays as it was, whole. */
int tr_train_save(tr_train_t *self, const char *dir, char *err, size_t len)
{
    char tmp[SS_CFG_MAX_STR * 2 + 32], why[1024] = "";
    uint64_t save_id = tr_train_new_save_id();
    snprintf(tmp, sizeof tmp, "%s.new-%016llx", dir, (unsigned long long)save_id);
    int rc = ss_mkdirs(tmp);
    if (rc)
        snprintf(why, sizeof why, "cannot create %s: %s", tmp, strerror(errno)),
            rc = ss_fs_errno_rc(errno);
    if (rc == 0)
        rc = s_save_dense(self, tmp, why, sizeof why);
    if (rc == 0)
        rc = tr_train_checkpoint_ps(self, save_id, tmp, why, sizeof why);
    if (rc == 0)
        rc = s_write_manifest(self, tmp, save_id, why, sizeof why);
    if (rc == 0)
        rc = ss_fs_replace_dir(tmp, dir, why, sizeof why);
    if (rc) {
        (void)ss_fs_remove_tree(tmp);
        char prev[SS_CFG_MAX_STR * 2 + 16];
        snprintf(prev, sizeof prev, "%s/dense.bin", dir);
        if (access(prev, F_OK) == 0)
            snprintf(err, len, "saving the model failed: %s; the previous model in %s is kept "
                     "as it was", why, dir);
        else
            snprintf(err, len, "saving the model failed: %s; no model is saved in %s", why,
                     dir);
        snprintf(self->save_error, sizeof self->save_error, "%s", err);
        return rc;
    }
    self->save_error[0] = '\0';
    self->kb.save_id = save_id;
    self->saved_epoch = self->epochs_done;
    SS_LOG(SS_LOG_INFO, "model saved to %s (dense model and embeddings of save %016llx)", dir,
           (unsigned long long)save_id);
    tr_train_ps_drop_earlier(self, save_id, tmp);
    return 0;
}

int tr_train_save_failed(const tr_train_t *self)
{
    return self->save_error[0] != '\0';
}

int tr_train_load(tr_train_t *self, const char *dir, char *err, size_t len)
{
    char path[SS_CFG_MAX_STR * 2];
    struct tr_dense_hdr h;
    size_t bytes = self->n_params * sizeof(float);
    snprintf(path, sizeof path, "%s/dense.bin", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, len, "cannot open %s: %s", path, strerror(errno));
        return SS_E_IO;
    }
    float *buf = ss_malloc(bytes);
    int rc = 0;
    if (fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, TR_DENSE_MAGIC, 8) != 0)
        snprintf(err, len, "%s is not a ShadowSync dense model", path), rc = SS_E_CORRUPT;
    else if (h.n_params != self->n_params || h.shape_hash != tr_train_shape_hash(self))
        snprintf(err, len, "%s has another model shape (%llu parameters, job has %zu)", path,
                 (unsigned long long)h.n_params, self->n_params), rc = SS_E_CORRUPT;
    else if (fread(buf, 1, bytes, f) != bytes || ss_hash_bytes(buf, bytes, 0) != h.checksum)
        snprintf(err, len, "%s is truncated or corrupted (checksum)", path), rc = SS_E_CORRUPT;
    else
        memcpy(self->shared.w, buf, bytes);
    fclose(f);
    ss_free(buf);
    return rc;
}

