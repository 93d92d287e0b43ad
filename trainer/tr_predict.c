/* tr_predict.c - scoring with the trainer's current model (evaluations,
 * eval-only, batch prediction), and the output of batch prediction: parts,
 * join, rename; or parts copied in order to a stream (standard output).
 *
 * DESIGN: each part is a stdio stream with a 1 MiB buffer, so a worker pays
 * one formatted number per row and a write(2) per megabyte. Part 0 is the
 * file that is renamed at the end; the others are appended to it with
 * read/write in 1 MiB blocks (the output is about 11 bytes per row: joining
 * costs a small fraction of scoring). Errors are read at the points where
 * they surface for buffered streams: a failed fprintf sets the stream's
 * error and errno, and fclose() reports a failed final flush.
 *
 * Stream mode: the same parts, as files that are unlinked as soon as they
 * are open (a writer stream and a read descriptor each), so that nothing is
 * left on disk however the process ends; the main thread copies part 0 to
 * the output as it grows (64 KiB buffers: the reader sees rows within a
 * fraction of a second; whole lines only, so that a stream cut short ends
 * on a line), then part 1 once part 0 is whole, and so on. Only
 * the main thread writes the output, so a reader that goes away (EPIPE) is
 * seen in one place, and the workers never block on a slow reader (they
 * write to disk; only the parts behind the one being copied wait there). */
#include "tr_predict.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_fs.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_time.h"
#include "tr_train_int.h"

#define S_BUF_BYTES (1u << 20)
#define S_STREAM_BUF_BYTES (64u << 10)
#define S_PUMP_MAX_BYTES (4u << 20)   /* copied per tr_pred_out_pump() call at most */
#define S_PATH_MAX 4096

struct tr_pred_out {
    char path[S_PATH_MAX];       /* the output */
    uint32_t n;                  /* parts */
    char (*names)[S_PATH_MAX];   /* [n] temporary file of each part (0: the joined one) */
    FILE **f;                    /* [n] open streams, NULL once closed */
    char **bufs;                 /* [n] their buffers */
    struct ss_fs_tmp out;        /* file mode: part 0, renamed over path at commit */
    int committed;               /* renamed onto path (stream: all copied): nothing to remove */
    int discarded;               /* tr_pred_out_discard: the files are gone */
    /* stream mode only (out_fd >= 0) */
    int out_fd;                  /* where the parts go, in order (borrowed); -1: file mode */
    int *rfd;                    /* [n] each (unlinked) part read back, -1 once copied */
    uint8_t *done;               /* [n] its writer is done and the stream closed */
    uint32_t cur;                /* the part being copied */
    uint64_t off;                /* bytes of part cur copied */
    char *cbuf;                  /* copy buffer */
    uint64_t lines_out;          /* newlines written to out_fd */
    int reader_gone;             /* out_fd's reader closed it (EPIPE) */
    const volatile sig_atomic_t *stop;  /* interrupts a blocked write, or NULL */
};

static void s_close_all(tr_pred_out_t *self)
{
    ss_fs_tmp_abort(&self->out);  /* file mode: part 0 (its stream and, uncommitted, its file) */
    if (self->out_fd < 0)
        self->f[0] = NULL;
    for (uint32_t k = 0; k < self->n; k++)
        if (self->f[k]) {
            fclose(self->f[k]);
            self->f[k] = NULL;
        }
}

tr_pred_out_t *tr_pred_out_new(const char *path, uint32_t n_parts, char *err, size_t err_len)
{
    ss_assert(path && n_parts >= 1);
    if (strlen(path) + 32 >= S_PATH_MAX) {
        snprintf(err, err_len, "output path too long: %.64s...", path);
        return NULL;
    }
    tr_pred_out_t *self = ss_calloc(1, sizeof *self);
    snprintf(self->path, sizeof self->path, "%s", path);
    self->n = n_parts;
    self->names = ss_calloc(n_parts, sizeof *self->names);
    self->f = ss_calloc(n_parts, sizeof *self->f);
    self->bufs = ss_calloc(n_parts, sizeof *self->bufs);
    self->out_fd = -1;
    if (ss_fs_tmp_open(&self->out, path, SS_FS_TMP_PID, err, err_len) != 0) {
        tr_pred_out_destroy(&self);
        return NULL;
    }
    for (uint32_t k = 0; k < n_parts; k++) {
        if (k == 0)
            snprintf(self->names[k], S_PATH_MAX, "%s", self->out.tmp);
        else
            snprintf(self->names[k], S_PATH_MAX, "%s.%u", self->out.tmp, k);
        self->f[k] = k == 0 ? ss_fs_tmp_stream(&self->out) : fopen(self->names[k], "w");
        if (!self->f[k]) {
            snprintf(err, err_len, "cannot create %s (next to the output %s): %s",
                     self->names[k], path, strerror(errno));
            tr_pred_out_destroy(&self);
            return NULL;
        }
        self->bufs[k] = ss_malloc(S_BUF_BYTES);
        setvbuf(self->f[k], self->bufs[k], _IOFBF, S_BUF_BYTES);
    }
    return self;
}

tr_pred_out_t *tr_pred_out_new_stream(int out_fd, const char *tmp_dir, uint32_t n_parts,
                                      const volatile sig_atomic_t *stop, char *err,
                                      size_t err_len)
{
    ss_assert(out_fd >= 0 && tmp_dir && n_parts >= 1);
    if (strlen(tmp_dir) + 64 >= S_PATH_MAX) {
        snprintf(err, err_len, "folder name too long: %.64s...", tmp_dir);
        return NULL;
    }
    tr_pred_out_t *self = ss_calloc(1, sizeof *self);
    snprintf(self->path, sizeof self->path, "standard output");
    self->n = n_parts;
    self->names = ss_calloc(n_parts, sizeof *self->names);
    self->f = ss_calloc(n_parts, sizeof *self->f);
    self->bufs = ss_calloc(n_parts, sizeof *self->bufs);
    self->rfd = ss_calloc(n_parts, sizeof *self->rfd);
    self->done = ss_calloc(n_parts, sizeof *self->done);
    self->cbuf = ss_malloc(S_BUF_BYTES);
    self->out_fd = out_fd;
    self->out.fd = -1;  /* no file to rename: the parts go to out_fd */
    self->stop = stop;
    for (uint32_t k = 0; k < n_parts; k++)
        self->rfd[k] = -1;
    for (uint32_t k = 0; k < n_parts; k++) {
        char name[S_PATH_MAX];
        snprintf(name, sizeof name, "%s/predict-stream.tmp-%ld.%u", tmp_dir, (long)getpid(), k);
        self->f[k] = fopen(name, "we");
        if (self->f[k])
            self->rfd[k] = open(name, O_RDONLY | O_CLOEXEC);
        int e = errno;
        if (self->f[k])
            unlink(name);  /* nameless from now on: nothing to remove later */
        if (!self->f[k] || self->rfd[k] < 0) {
            snprintf(err, err_len, "cannot create %s (a temporary part of the predictions "
                     "streamed to standard output; set job.run_dir to a writable folder): %s",
                     name, strerror(e));
            tr_pred_out_destroy(&self);
            return NULL;
        }
        self->bufs[k] = ss_malloc(S_STREAM_BUF_BYTES);
        setvbuf(self->f[k], self->bufs[k], _IOFBF, S_STREAM_BUF_BYTES);
    }
    return self;
}

void tr_pred_out_destroy(tr_pred_out_t **self_p)
{
    tr_pred_out_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    s_close_all(self);
    for (uint32_t k = 0; k < self->n; k++) {
        if (self->names[k][0] && !(k == 0 && self->out_fd < 0))  /* part 0: s_close_all */
            unlink(self->names[k]);
        ss_free(self->bufs[k]);
        if (self->rfd && self->rfd[k] >= 0)
            close(self->rfd[k]);
    }
    ss_free(self->rfd);
    ss_free(self->done);
    ss_free(self->cbuf);
    ss_free(self->names);
    ss_free(self->f);
    ss_free(self->bufs);
    ss_free(self);
    *self_p = NULL;
}

void tr_pred_out_discard(tr_pred_out_t *self)
{
    ss_assert(self && !self->committed);
    ss_fs_tmp_discard(&self->out);  /* part 0 of a file; the streams stay open */
    for (uint32_t k = 0; k < self->n; k++)
        if (self->names[k][0]) {
            unlink(self->names[k]);
            self->names[k][0] = '\0';
        }
    self->discarded = 1;
}

FILE *tr_pred_out_part(tr_pred_out_t *self, uint32_t k)
{
    ss_assert(self && k < self->n && self->f[k]);
    return self->f[k];
}

int tr_pred_write_nan(FILE *f, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++)
        if (fputs("nan\n", f) == EOF)
            return -1;
    return 0;
}

int tr_pred_write(FILE *f, const float *probs, const uint32_t *gaps, uint32_t n, int keep_bad)
{
    for (uint32_t i = 0; i < n; i++) {
        if (keep_bad && gaps && gaps[i] && tr_pred_write_nan(f, gaps[i]) != 0)
            return -1;
        if (fprintf(f, "%.9g\n", (double)probs[i]) < 0)
            return -1;
    }
    return 0;
}

/* err = "cannot write WHAT: why; PATH was not written", rc for errno e. */
static int s_fail(tr_pred_out_t *self, const char *what, int e, char *err, size_t len)
{
    snprintf(err, len, "cannot write %s: %s; no predictions were written to %s (its "
             "temporary files are removed)", what, strerror(e), self->path);
    return ss_fs_errno_rc(e);
}

/* Append the file name to fd (the joined output). Returns 0 or -1, errno set,
 * *reading telling which side failed. */
static int s_append(int fd, const char *name, char *buf, int *reading)
{
    int in = open(name, O_RDONLY);
    *reading = 1;
    if (in < 0)
        return -1;
    for (;;) {
        ssize_t r = read(in, buf, S_BUF_BYTES);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = errno;
            close(in);
            errno = e;
            return r < 0 ? -1 : 0;
        }
        int e = ss_fs_write_all(fd, buf, (size_t)r);
        if (e) {
            close(in);
            *reading = 0;
            errno = e;
            return -1;
        }
    }
}

int tr_pred_out_part_done(tr_pred_out_t *self, uint32_t k, char *err, size_t err_len)
{
    ss_assert(self && self->out_fd >= 0 && k < self->n);
    if (self->done[k])
        return 0;
    FILE *f = self->f[k];
    self->f[k] = NULL;
    self->done[k] = 1;
    int bad = ferror(f);
    errno = 0;
    if (fclose(f) != 0 || bad) {
        int e = bad ? EIO : errno ? errno : EIO;
        snprintf(err, err_len, "cannot write part %u of the predictions (a temporary file in "
                 "job.run_dir): %s", k, strerror(e));
        return ss_fs_errno_rc(e);
    }
    return 0;
}

/* Write n bytes of buf to the stream's output, all of them: retried after a
 * signal unless *stop is set. Returns 0, SS_E_STOPPED, or an error with err
 * (EPIPE: the reader went away, reader_gone set). */
static int s_write_out(tr_pred_out_t *self, const char *buf, size_t n, char *err, size_t len)
{
    for (size_t off = 0; off < n;) {
        ssize_t w = write(self->out_fd, buf + off, n - off);
        if (w < 0 && errno == EINTR) {
            if (self->stop && *self->stop)
                return SS_E_STOPPED;
            continue;
        }
        if (w < 0) {
            int e = errno;
            self->reader_gone = e == EPIPE;
            if (e == EPIPE)
                snprintf(err, len, "standard output was closed by its reader after %llu "
                         "prediction line(s) (EPIPE: e.g. '| head' has read what it wanted)",
                         (unsigned long long)self->lines_out);
            else
                snprintf(err, len, "cannot write predictions to standard output after %llu "
                         "line(s): %s", (unsigned long long)self->lines_out, strerror(e));
            return ss_fs_errno_rc(e);
        }
        for (const char *p = buf + off; (p = memchr(p, '\n', (size_t)(buf + off + w - p)));
             p++)
            self->lines_out++;
        off += (size_t)w;
    }
    return 0;
}

int tr_pred_out_pump(tr_pred_out_t *self, size_t *copied, char *err, size_t err_len)
{
    ss_assert(self && self->out_fd >= 0 && !self->discarded && copied);
    *copied = 0;
    while (self->cur < self->n && *copied < S_PUMP_MAX_BYTES) {
        int fd = self->rfd[self->cur], done = self->done[self->cur];
        ssize_t r = pread(fd, self->cbuf, S_BUF_BYTES, (off_t)self->off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, err_len, "cannot read back part %u of the predictions: %s",
                     self->cur, strerror(errno));
            return SS_E_IO;
        }
        if (r > 0 && !done) {
            /* whole lines only while its writer is at work (a stdio flush
             * may end mid-line): a stream that stops there ends on a line */
            const char *nl = memrchr(self->cbuf, '\n', (size_t)r);
            r = nl ? nl + 1 - self->cbuf : 0;
        }
        if (r == 0) {
            if (!done)
                return 0;  /* its writer is still at work: later */
            close(fd);
            self->rfd[self->cur++] = -1;
            self->off = 0;
            continue;
        }
        int rc = s_write_out(self, self->cbuf, (size_t)r, err, err_len);
        if (rc)
            return rc;
        self->off += (uint64_t)r;
        *copied += (size_t)r;
    }
    return 0;
}

uint64_t tr_pred_out_lines(const tr_pred_out_t *self)
{
    ss_assert(self);
    return self->lines_out;
}

int tr_pred_out_reader_gone(const tr_pred_out_t *self)
{
    ss_assert(self);
    return self->reader_gone;
}

/* Stream mode's commit: every part closed, and copied to the end. */
static int s_commit_stream(tr_pred_out_t *self, char *err, size_t err_len)
{
    int rc = 0;
    size_t copied;
    for (uint32_t k = 0; k < self->n && rc == 0; k++)
        rc = tr_pred_out_part_done(self, k, err, err_len);
    while (rc == 0 && self->cur < self->n)
        rc = tr_pred_out_pump(self, &copied, err, err_len);
    if (rc == 0)
        self->committed = 1;
    return rc;
}

int tr_pred_out_commit(tr_pred_out_t *self, char *err, size_t err_len)
{
    ss_assert(self && !self->committed && !self->discarded);
    if (self->out_fd >= 0)
        return s_commit_stream(self, err, err_len);
    int rc = 0;
    char why[2 * S_PATH_MAX + 64];
    for (uint32_t k = 0; k < self->n && rc == 0; k++) {
        FILE *f = self->f[k];
        self->f[k] = NULL;
        int bad = ferror(f);  /* a writer that failed has said why already */
        errno = 0;
        if (k == 0 ? fflush(f) != 0 : fclose(f) != 0)   /* the last flush */
            rc = s_fail(self, self->names[k], errno ? errno : EIO, err, err_len);
        else if (bad)
            rc = s_fail(self, self->names[k], EIO, err, err_len);
    }
    int fd = self->out.fd;  /* part 0, written up to its end: the others go after it */
    char *buf = rc == 0 && self->n > 1 ? ss_malloc(S_BUF_BYTES) : NULL;
    for (uint32_t k = 1; k < self->n && rc == 0; k++) {
        int reading;
        if (s_append(fd, self->names[k], buf, &reading) != 0)
            rc = s_fail(self, reading ? self->names[k] : self->names[0], errno, err, err_len);
        else
            unlink(self->names[k]);
    }
    ss_free(buf);
    if (rc == 0 && (rc = ss_fs_tmp_commit(&self->out, why, sizeof why)) != 0)
        snprintf(err, err_len, "%s; no predictions were written to %s (its temporary files "
                 "are removed)", why, self->path);
    if (rc == 0)
        self->committed = 1;
    return rc;
}

/* ------------------------------------------------------------ scoring */

/* DESIGN: scoring runs the workers of the trainer object (tr_train_int.h) in
 * eval mode over data.eval or the validation split, with the model as it is
 * (the PSs serve the same embeddings): an evaluation during training, the
 * eval-only run, and batch prediction into the output above. */
/* Create and start n workers (train or eval); returns 0 or an error. */
static int s_start_workers(tr_train_t *self, tr_worker_t **workers, uint32_t n, int eval,
                           char *err, size_t len)
{
    for (uint32_t i = 0; i < n; i++) {
        workers[i] = tr_worker_new(&self->shared, i, n, eval, err, len);
        if (!workers[i] || tr_worker_start(workers[i]) != 0) {
            if (workers[i] && !err[0])
                snprintf(err, len, "cannot start worker thread %u", i);
            return SS_E_CONFIG;
        }
    }
    return 0;
}
int tr_train_evaluate(tr_train_t *self, struct tr_eval_result *out, char *err, size_t err_len)
{
    return tr_train_score(self, TR_WORKER_EVAL, out, err, err_len);
}

/* Score what (TR_WORKER_EVAL: data.eval; TR_WORKER_VALID: the validation
 * split) with the current dense model. Returns 0 or an error (err). */
int tr_train_score(tr_train_t *self, int what, struct tr_eval_result *out, char *err,
                   size_t err_len)
{
    uint32_t n = (uint32_t)self->cfg->workers;
    tr_worker_t **workers = ss_calloc(n, sizeof *workers);
    tr_eval_t *all = tr_eval_new(1 << 16);
    struct tr_worker_counts sum;
    const char *name = tr_train_input_name(self->cfg, what);
    int rc;
    if (what == TR_WORKER_EVAL ? self->cfg->eval_files.n == 0 : !self->has_valid) {
        snprintf(err, err_len, "no %s data: set %s in the job file",
                 what == TR_WORKER_EVAL ? "eval" : "validation", name);
        rc = SS_E_CONFIG;
        goto out;
    }
    atomic_store(&self->shared.stop, 0);
    rc = s_start_workers(self, workers, n, what, err, err_len);
    for (uint32_t i = 0; i < n; i++)
        if (workers[i])
            tr_worker_join(workers[i]);
    if (rc == 0) {
        tr_train_sum(workers, n, &sum);
        if (sum.rc) {
            rc = sum.rc;
            snprintf(err, err_len, "%s", sum.err);
        }
    }
    if (rc == 0) {
        uint64_t tot[4] = {sum.c[TR_C_examples], sum.c[TR_C_lines], sum.c[TR_C_bad_lines],
                           sum.c[TR_C_headers]};
        rc = tr_train_judge_input(self->cfg, name, tot, workers, n,
                           "the model was not scored", err, err_len);
    }
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        tr_eval_merge(all, tr_worker_eval(workers[i]));
    if (rc == 0)
        tr_eval_result(all, out);
    if (rc == 0 && sum.c[TR_C_bad_lines])
        SS_LOG(SS_LOG_WARN, "%s: %llu bad lines skipped", name,
               (unsigned long long)sum.c[TR_C_bad_lines]);
out:
    for (uint32_t i = 0; i < n; i++)
        tr_worker_destroy(&workers[i]);
    ss_free(workers);
    tr_eval_destroy(&all);
    return rc;
}

/* Whether every one of the n scoring workers has left its loop. */
static int s_predict_done(tr_worker_t **workers, uint32_t n)
{
    struct tr_worker_counts c;
    for (uint32_t i = 0; i < n; i++) {
        tr_worker_snapshot(workers[i], &c);
        if (!c.finished)
            return 0;
    }
    return 1;
}

/* What a failed run leaves, for its message: "no predictions were written
 * to FILE", or for a stream what its reader already has. */
static void s_predict_lost(const struct tr_predict_opts *o, const tr_pred_out_t *po, char *buf,
                           size_t len)
{
    if (o->out_fd < 0)
        snprintf(buf, len, "no predictions were written to %s (its temporary files are "
                 "removed)", o->out);
    else
        snprintf(buf, len, "standard output got only the first %llu line(s): the output is "
                 "incomplete (the temporary parts are removed)",
                 (unsigned long long)(po ? tr_pred_out_lines(po) : 0));
}

/* Stream mode, while the workers score: close the part of each worker that
 * finished well, and copy what is there to the output. *copied: bytes
 * copied. Returns 0 or an error with err. */
static int s_predict_pump(tr_pred_out_t *po, tr_worker_t **workers, uint32_t n, size_t *copied,
                          char *err, size_t len)
{
    struct tr_worker_counts c;
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        tr_worker_snapshot(workers[i], &c);
        if (c.finished && c.rc == 0)
            rc = tr_pred_out_part_done(po, i, err, len);
    }
    return rc ? rc : tr_pred_out_pump(po, copied, err, len);
}

/* Create the output: the file's parts, or a stream's. */
static tr_pred_out_t *s_predict_out(const struct tr_predict_opts *o, uint32_t n, char *err,
                                    size_t len)
{
    if (o->out_fd < 0)
        return tr_pred_out_new(o->out, n, err, len);
    if (ss_mkdirs(o->tmp_dir) != 0) {
        snprintf(err, len, "cannot create %s (job.run_dir: the temporary parts of the "
                 "predictions streamed to standard output go there): %s", o->tmp_dir,
                 strerror(errno));
        return NULL;
    }
    return tr_pred_out_new_stream(o->out_fd, o->tmp_dir, n, o->stop, err, len);
}

int tr_train_predict(tr_train_t *self, const struct tr_predict_opts *o,
                     struct tr_predict_result *out, char *err, size_t err_len)
{
    uint32_t n = (uint32_t)self->cfg->workers;
    tr_worker_t **workers = ss_calloc(n, sizeof *workers);
    tr_eval_t *all = tr_eval_new(1 << 16);
    tr_pred_out_t *po = NULL;
    struct tr_worker_counts sum;
    uint64_t t0 = ss_now_ns();
    char lost[512];
    int rc = 0;
    memset(out, 0, sizeof *out);
    if (self->cfg->eval_files.n == 0) {
        snprintf(err, err_len, "nothing to score: set data.eval to the input file(s)");
        rc = SS_E_CONFIG;
        goto out;
    }
    if (!(po = s_predict_out(o, n, err, err_len))) {
        rc = SS_E_IO;
        goto out;
    }
    atomic_store(&self->shared.stop, 0);
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        workers[i] = tr_worker_new(&self->shared, i, n, 1, err, err_len);
        if (!workers[i]) {
            rc = SS_E_CONFIG;
            break;
        }
        tr_worker_set_output(workers[i], tr_pred_out_part(po, i), o->keep_bad);
        if (tr_worker_start(workers[i]) != 0) {
            snprintf(err, err_len, "cannot start worker thread %u", i);
            rc = SS_E_NOMEM;
        }
    }
    if (rc)
        atomic_store(&self->shared.stop, 1);
    while (rc == 0 && o->stop && !s_predict_done(workers, n)) {
        size_t copied = 0;
        if (!*o->stop && o->out_fd >= 0 &&
            (rc = s_predict_pump(po, workers, n, &copied, err, err_len)) != 0) {
            atomic_store(&self->shared.stop, 1);  /* the output failed: stop scoring now */
            out->reader_closed = tr_pred_out_reader_gone(po);
            if (rc != SS_E_STOPPED) {
                s_predict_lost(o, po, lost, sizeof lost);
                snprintf(err + strlen(err), err_len - strlen(err), "; stopped: %s", lost);
                break;
            }
        }
        if (*o->stop) {  /* the workers stop at their next batch; the files go now */
            atomic_store(&self->shared.stop, 1);
            tr_pred_out_discard(po);
            s_predict_lost(o, po, lost, sizeof lost);
            snprintf(err, err_len, "stopped by a signal: %s", lost);
            SS_LOG(SS_LOG_WARN, "%s", err);  /* before any wait */
            rc = SS_E_STOPPED;
            break;
        }
        if (copied == 0)
            usleep(o->out_fd >= 0 ? 5000 : 20000);
    }
    tr_train_join_workers(workers, n);
    if (rc == 0) {
        tr_train_sum(workers, n, &sum);
        if (sum.rc) {
            rc = sum.rc;
            s_predict_lost(o, po, lost, sizeof lost);
            snprintf(err, err_len, "%s; %s", sum.err, lost);
        }
    }
    if (rc == 0) {
        uint64_t tot[4] = {sum.c[TR_C_examples], sum.c[TR_C_lines], sum.c[TR_C_bad_lines],
                           sum.c[TR_C_headers]};
        s_predict_lost(o, po, lost, sizeof lost);
        rc = tr_train_judge_input(self->cfg, "data.eval", tot, workers, n,
                           o->out_fd < 0 ? "no predictions were written" : lost, err, err_len);
    }
    if (rc == 0 && (rc = tr_pred_out_commit(po, err, err_len)) != 0 && o->out_fd >= 0) {
        out->reader_closed = tr_pred_out_reader_gone(po);
        s_predict_lost(o, po, lost, sizeof lost);
        snprintf(err + strlen(err), err_len - strlen(err), "; %s", lost);
    }
    if (rc == 0) {
        for (uint32_t i = 0; i < n; i++)
            tr_eval_merge(all, tr_worker_eval(workers[i]));
        tr_eval_result(all, &out->eval);
        out->rows = sum.c[TR_C_examples];
        out->bad_lines = sum.c[TR_C_bad_lines];
        out->headers = sum.c[TR_C_headers];
        out->lines_written = out->rows + (o->keep_bad ? out->bad_lines : 0);
        out->wall_s = (double)(ss_now_ns() - t0) / 1e9;
        if (out->bad_lines)
            tr_train_first_bad(workers, n, out->first_bad, sizeof out->first_bad);
    }
out:
    tr_pred_out_destroy(&po);
    for (uint32_t i = 0; i < n; i++)
        tr_worker_destroy(&workers[i]);
    ss_free(workers);
    tr_eval_destroy(&all);
    return rc;
}
