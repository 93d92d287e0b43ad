/* ps_service_ckpt.c - a PS's checkpoint folders: where a CHECKPOINT or
 * RESTORE request may make the PS write or read, the one-at-a-time write of
 * the shard's file, the restore of the shard from its file of a committed
 * save (RESTORE), and the recovery checkpoint on a timer
 * (checkpoint.interval_s).
 *
 * DESIGN: a request names a folder in its text; the PS writes and reads only
 * inside its job.run_dir or its checkpoint folder, so that without CURVE a
 * client cannot make it write (or load) wherever its user may. The file
 * format and the shard's part are ps_ckpt.h's and ps_embed.h's /
 * ps_sync.h's. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ps_ckpt.h"
#include "ps_service_int.h"
#include "ss_assert.h"
#include "ss_cpu.h"
#include "ss_err.h"
#include "ss_fs.h"
#include "ss_log.h"
#include "ss_time.h"

/* Checkpoint file of this shard inside dir. */
static void s_ckpt_path(ps_service_t *self, const char *dir, char *out, size_t len)
{
    ps_ckpt_path(out, len, dir, ps_role_name(self->role), self->shard);
}

/* The checkpoint folder: checkpoint.dir, else RUN_DIR/ckpt. */
static void s_ckpt_dir(ps_service_t *self, char *out, size_t len)
{
    if (self->cfg->ckpt_dir[0])
        snprintf(out, len, "%s", self->cfg->ckpt_dir);
    else
        snprintf(out, len, "%s/ckpt", self->cfg->run_dir);
}

/* Take ckpt_lock for a request that writes or reads path (a folder, for a
 * restore): while another checkpoint or restore holds it (another service
 * thread's, the recovery timer's), the request's client is told each
 * S_LOCK_TICK_MS that the PS is at it (ps_ckpt_progress_waiting: its
 * "still working" replies, when it asked for them), as it is while the
 * file is written or read. */
#define S_LOCK_TICK_MS 250

static void s_lock_ckpt(ps_service_t *self, const char *path)
{
    for (;;) {
        struct timespec ts;
        ss_assert(clock_gettime(CLOCK_REALTIME, &ts) == 0);
        ts.tv_nsec += S_LOCK_TICK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        int rc = pthread_mutex_timedlock(&self->ckpt_lock, &ts);
        if (rc == 0)
            return;
        ss_assert(rc == ETIMEDOUT);
        ps_ckpt_progress_waiting(path);
    }
}

/* Write this shard's checkpoint into folder dir (created when missing),
 * recording the job's shard count and save_id (0: none); path receives the
 * file. One at a time: concurrent requests and the recovery timer wait for
 * each other, so they never write the same temporary file at once. Returns
 * 0 or an SS_E_* with err (SS_E_NOSPC for a full disk: the text says so and
 * names the file, and travels to the client in the error reply). */
int ps_svc_write_ckpt(ps_service_t *self, const char *dir, uint64_t save_id, char *path,
                      size_t path_len, char *err, size_t len)
{
    struct ps_ckpt_who who = {self->shard, ps_svc_n_shards(self),
                              ps_ckpt_job_id(self->cfg->job_name, (uint64_t)self->cfg->job_seed),
                              save_id};
    int rc;
    s_ckpt_path(self, dir, path, path_len);
    s_lock_ckpt(self, path);
    if (ss_mkdirs(dir) != 0) {
        int e = errno;
        snprintf(err, len, "cannot create checkpoint directory %s: %s", dir, strerror(e));
        rc = ss_fs_errno_rc(e);
    } else {
        uint64_t cpu0_ns = ss_thread_cpu_ns();
        rc = self->embed ? ps_embed_checkpoint(self->embed, path, &who)
                         : ps_sync_checkpoint(self->sync, path, &who);
        /* what checkpoints cost, for benchmarks that count serving CPU apart */
        COUNT(&self->threads[0], ckpt_cpu_us, (ss_thread_cpu_ns() - cpu0_ns) / 1000);
        if (rc)
            snprintf(err, len, "checkpoint to %s failed: %s (see the PS log)", path,
                     ss_strerror(rc));
    }
    ss_assert(pthread_mutex_unlock(&self->ckpt_lock) == 0);
    return rc;
}

/* 1 when folder t (absolute, no ".." component) is root or lies inside it. */
static int s_inside(const char *t, const char *root)
{
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/')
        n--;
    return root[0] == '/' && strncmp(t, root, n) == 0 && (t[n] == '\0' || t[n] == '/');
}

/* The folder a CHECKPOINT request names in its text (a save of the output
 * model or of a job checkpoint: every PS writes into the folder of that
 * save), or the checkpoint folder when it names none. A relative folder is
 * relative to this PS's job.run_dir (the run directory of its host), so that
 * the trainer can name one folder for PSs on hosts with different run
 * directories. An absolute folder must lie inside job.run_dir or the
 * checkpoint folder: a request must not make the PS write wherever its user
 * may (without security.curve, anyone who reaches the port can send one).
 * Refuses ".." components. Returns 0 or SS_E_INVAL with err. */
int ps_svc_request_dir(ps_service_t *self, const Header *h, char *out, size_t out_len,
                       char *err, size_t len)
{
    const char *t = h->text;
    if (!t || !t[0]) {
        s_ckpt_dir(self, out, out_len);
        return 0;
    }
    size_t n = strlen(t);
    int dotdot = strcmp(t, "..") == 0 || strncmp(t, "../", 3) == 0 || strstr(t, "/../") ||
                 (n >= 3 && strcmp(t + n - 3, "/..") == 0);
    const char *what = ss_msg_type_name(h->type);
    if (n >= SS_CFG_MAX_STR || dotdot || strchr(t, '\n')) {
        snprintf(err, len, "%s: folder '%.64s' refused (too long, a '..' component or "
                 "a newline)", what, t);
        return SS_E_INVAL;
    }
    if (t[0] == '/') {
        char ck[SS_CFG_MAX_STR + 8];
        s_ckpt_dir(self, ck, sizeof ck);
        if (!s_inside(t, self->cfg->run_dir) && !s_inside(t, ck)) {
            snprintf(err, len, "%s: folder '%.64s' refused: an absolute folder must lie "
                     "inside this PS's job.run_dir (%.64s) or checkpoint folder (%.64s)", what,
                     t, self->cfg->run_dir, ck);
            return SS_E_INVAL;
        }
        snprintf(out, out_len, "%s", t);
    } else
        snprintf(out, out_len, "%s/%s", self->cfg->run_dir, t);
    return 0;
}

/* The folder of save save_id (0: any) named dir that holds this PS's file:
 * DIR.new-ID when this PS's file is there (on a host that shares no file
 * system with the trainer that committed the save, the save's folder keeps
 * that name until the launcher's gather), else dir itself (the committed
 * folder, renamed from DIR.new-ID in one step). */
static void s_restore_folder(ps_service_t *self, const char *dir, uint64_t save_id, char *out,
                             size_t len)
{
    char p[SS_CFG_MAX_STR * 3];
    if (save_id) {
        snprintf(out, len, "%s.new-%016llx", dir, (unsigned long long)save_id);
        s_ckpt_path(self, out, p, sizeof p);
        if (access(p, F_OK) == 0)
            return;
    }
    snprintf(out, len, "%s", dir);
}

/* Check this PS's file of the save at path before anything is replaced:
 * there, readable, whole (ps_ckpt_open's checks), of save_id when that is
 * not 0. Returns 0 or an SS_E_* with err naming the file. */
static int s_restore_check(ps_service_t *self, const char *path, uint64_t save_id, char *err,
                           size_t len)
{
    struct ps_ckpt_hdr hdr;
    ps_ckpt_reader_t *r = NULL;
    if (access(path, R_OK) != 0) {
        int e = errno;
        snprintf(err, len, "RESTORE: %s: %s (this PS has no file in the save named); the "
                 "shard is as it was", path, strerror(e));
        return e == ENOENT ? SS_E_NOTFOUND : SS_E_IO;
    }
    int rc = ps_ckpt_open(path, self->embed ? PS_CKPT_EMBED : PS_CKPT_SYNC, &hdr, &r);
    if (rc == SS_E_NOMEM)
        return rc;   /* the caller says so: s_restore_no_memory() */
    if (rc) {
        snprintf(err, len, "RESTORE: %s cannot be read: %s (the PS log says why); the shard "
                 "is as it was", path, ss_strerror(rc));
        return rc;
    }
    ps_ckpt_close(&r);
    if (save_id && hdr.save_id != save_id) {
        snprintf(err, len, "RESTORE: %s is of save %016llx, not of save %016llx named; the "
                 "shard is as it was", path, (unsigned long long)hdr.save_id,
                 (unsigned long long)save_id);
        return SS_E_CORRUPT;
    }
    return 0;
}

/* The error of a restore from path that could not get the memory to load
 * the save aside (the shard keeps serving what it held): the bytes it
 * needed (loaded: the shard's restore ran and says how many; else not even
 * the file's read buffer could be had) and the fixes, logged too. */
static void s_restore_no_memory(ps_service_t *self, const char *path, int loaded, char *err,
                                size_t len)
{
    size_t need = !loaded ? 0 : self->embed ? ps_embed_restore_need(self->embed)
                                            : ps_sync_restore_need(self->sync);
    char what[96];
    if (need)
        snprintf(what, sizeof what, "about %zu bytes more", need);
    else
        snprintf(what, sizeof what, "not even its read buffer could be had");
    snprintf(err, len, "RESTORE from %s refused: not enough memory to load it beside the "
             "shard held now (%s); the shard is as it was and serves on. Give the PS more "
             "memory, or restart it from the save (shadow-ps --restore with that folder), "
             "which needs no second copy", path, what);
    SS_LOG(SS_LOG_WARN, "%s", err);
}

/* Replace this shard with its file of the committed save named dir (or
 * DIR.new-ID, s_restore_folder) and save_id (0: any save): ps_embed.h's or
 * ps_sync.h's restore of the own file, under ckpt_lock so that no
 * checkpoint copies a half-restored shard. path receives the file. On any
 * error (missing, unreadable, corrupt, another save, another shape, no
 * memory to load it aside: SS_E_NOMEM) the shard is as it was. Returns 0 or
 * an SS_E_* with err naming the file. Any service thread. */
int ps_svc_restore(ps_service_t *self, const char *dir, uint64_t save_id, char *path,
                   size_t path_len, char *err, size_t len)
{
    char from[SS_CFG_MAX_STR * 2 + 32];
    uint32_t n_shards = ps_svc_n_shards(self);
    /* the check and the load under one hold of ckpt_lock: a CHECKPOINT into
     * the same folder (which replaces the file under that lock) cannot slip
     * a file of another save in between */
    s_lock_ckpt(self, dir);
    s_restore_folder(self, dir, save_id, from, sizeof from);
    s_ckpt_path(self, from, path, path_len);
    int rc = s_restore_check(self, path, save_id, err, len), check = rc;
    if (rc == 0) {
        rc = self->embed ? ps_embed_restore_dir(self->embed, from, self->shard, n_shards)
                         : ps_sync_restore_dir(self->sync, from, self->shard, n_shards);
        if (rc == SS_E_NOMEM)
            s_restore_no_memory(self, path, 1, err, len);
        else if (rc)
            snprintf(err, len, "RESTORE from %s failed: %s (the PS log says why: another "
                     "shape, a bad checksum, over capacity); the shard is as it was", path,
                     ss_strerror(rc));
    } else if (check == SS_E_NOMEM) {
        s_restore_no_memory(self, path, 0, err, len);
    }
    ss_assert(pthread_mutex_unlock(&self->ckpt_lock) == 0);
    return rc;
}

/* The recovery checkpoint when it is due (checkpoint.interval_s): written to
 * the checkpoint folder's recovery/, apart from the best model's. Main
 * thread, between requests. An empty sync shard has nothing to write yet. */
void ps_svc_recovery_ckpt(ps_service_t *self)
{
    char path[SS_CFG_MAX_STR * 2], err[512];
    uint64_t now = ss_now_ms();
    if (!self->next_ckpt_ms || now < self->next_ckpt_ms)
        return;
    self->next_ckpt_ms = now + (uint64_t)(self->cfg->ckpt_interval_s * 1000.0);
    if (self->sync && ps_sync_is_empty(self->sync))
        return;
    uint64_t t0 = ss_now_ms();
    char dir[SS_CFG_MAX_STR + 16];
    s_ckpt_dir(self, dir, sizeof dir);
    snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/recovery");
    if (ps_svc_write_ckpt(self, dir, 0, path, sizeof path, err, sizeof err) != 0)
        SS_LOG(SS_LOG_WARN, "recovery %s; the next try is in %.0f s", err,
               self->cfg->ckpt_interval_s);
    else
        SS_LOG(SS_LOG_INFO, "recovery checkpoint %s written in %llu ms", path,
               (unsigned long long)(ss_now_ms() - t0));
}
