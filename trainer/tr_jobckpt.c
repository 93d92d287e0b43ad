/* tr_jobckpt.c - a trainer's part of a job checkpoint (see tr_jobckpt.h).
 *
 * Layout: magic "SSJOBTR2", u32 sizeof(struct tr_jobckpt_fixed), u32
 * sizeof(struct tr_worker_pos), the fixed part, n_workers worker places, w,
 * acc (when has_acc), n_sync floats of sync state, u32 n_hists, u32
 * SS_HIST_VALUES, n_hists * SS_HIST_VALUES u64 of latency histograms, and a
 * u64 chain of ss_hash_bytes over those pieces. Format 1 (magic "SSJOBTR1",
 * written before the histograms were kept) ends after the sync state: its
 * chain has no histogram pieces. */
#include "tr_jobckpt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ss_err.h"
#include "ss_fs.h"
#include "ss_hash.h"
#include "ss_mem.h"

#define S_MAGIC "SSJOBTR2"
#define S_MAGIC_V1 "SSJOBTR1"  /* no histograms: still read */
#define S_MAX_HISTS 8192       /* more than any trainer keeps (trainer.workers + 1) */

struct s_head {
    char magic[8];                 /* S_MAGIC or S_MAGIC_V1 */
    uint32_t fixed_bytes;          /* sizeof(struct tr_jobckpt_fixed) */
    uint32_t pos_bytes;            /* sizeof(struct tr_worker_pos) */
};

/* Format 2: what follows the sync state. */
struct s_hist_head {
    uint32_t n_hists;              /* histograms */
    uint32_t values;               /* SS_HIST_VALUES of the build that wrote it */
};

/* Bytes of the payload after the head up to the sync state's end. */
static size_t s_body_bytes(const struct tr_jobckpt_fixed *f)
{
    return sizeof *f + f->n_workers * sizeof(struct tr_worker_pos) +
           f->n_params * sizeof(float) * (f->has_acc ? 2 : 1) + f->n_sync * sizeof(float);
}

int tr_jobckpt_write(const char *path, const struct tr_jobckpt *st, char *err, size_t err_len)
{
    const struct tr_jobckpt_fixed *f = &st->f;
    struct s_head h = {S_MAGIC, sizeof(struct tr_jobckpt_fixed), sizeof(struct tr_worker_pos)};
    struct s_hist_head hh = {st->n_hists, SS_HIST_VALUES};
    size_t wb = f->n_params * sizeof(float);
    size_t hb = (size_t)st->n_hists * SS_HIST_VALUES * sizeof(uint64_t);
    struct ss_fs_piece p[9] = {{&h, sizeof h},
                               {f, sizeof *f},
                               {st->workers, f->n_workers * sizeof *st->workers},
                               {st->w, wb},
                               {st->acc, f->has_acc ? wb : 0},
                               {st->sync, f->n_sync * sizeof(float)},
                               {&hh, sizeof hh},
                               {st->hists, hb},
                               {NULL, sizeof(uint64_t)}};
    uint64_t sum = 0;
    for (int i = 0; i < 8; i++)
        sum = ss_hash_bytes(p[i].data, p[i].len, sum);
    p[8].data = &sum;
    return ss_fs_write_atomic(path, p, 9, err, err_len);
}

/* Read the whole file into a new buffer; *n its size. */
static int s_slurp(const char *path, unsigned char **buf, size_t *n, char *err, size_t len)
{
    struct stat sb;
    FILE *fp = fopen(path, "rb");
    if (!fp || fstat(fileno(fp), &sb) != 0) {
        snprintf(err, len, "cannot read %s: %s", path, strerror(errno));
        if (fp)
            fclose(fp);
        return SS_E_IO;
    }
    *n = (size_t)sb.st_size;
    *buf = ss_malloc(*n + 1);
    size_t got = fread(*buf, 1, *n, fp);
    fclose(fp);
    if (got != *n) {
        snprintf(err, len, "cannot read %s: short read (%zu of %zu bytes)", path, got, *n);
        ss_free(*buf);
        return SS_E_IO;
    }
    return 0;
}

int tr_jobckpt_read(const char *path, struct tr_jobckpt *st, char *err, size_t err_len)
{
    unsigned char *b;
    size_t n;
    struct s_head h;
    struct s_hist_head hh = {0, SS_HIST_VALUES};
    memset(st, 0, sizeof *st);
    int rc = s_slurp(path, &b, &n, err, err_len);
    if (rc)
        return rc;
    rc = SS_E_CORRUPT;
    if (n < sizeof h + sizeof st->f + sizeof(uint64_t)) {
        snprintf(err, err_len, "%s is truncated (%zu bytes)", path, n);
        goto out;
    }
    memcpy(&h, b, sizeof h);
    int v1 = memcmp(h.magic, S_MAGIC_V1, 8) == 0;
    if ((!v1 && memcmp(h.magic, S_MAGIC, 8) != 0) || h.fixed_bytes != sizeof st->f ||
        h.pos_bytes != sizeof(struct tr_worker_pos)) {
        snprintf(err, err_len, "%s is not a trainer state written by this build of "
                 "shadow-trainer", path);
        goto out;
    }
    memcpy(&st->f, b + sizeof h, sizeof st->f);
    size_t body = st->f.n_workers > 4096 || st->f.n_params > ((size_t)1 << 36) ||
                          st->f.n_sync > ((size_t)1 << 38)
                      ? 0 : s_body_bytes(&st->f);
    uint64_t sum;
    /* format 2: the histograms' head follows the sync state */
    if (body && !v1 && n >= sizeof h + body + sizeof hh + sizeof sum) {
        memcpy(&hh, b + sizeof h + body, sizeof hh);
        if (hh.values != SS_HIST_VALUES) {
            snprintf(err, err_len, "%s is not a trainer state written by this build of "
                     "shadow-trainer (histograms of %u values, this build's have %d)", path,
                     hh.values, SS_HIST_VALUES);
            goto out;
        }
        body = hh.n_hists > S_MAX_HISTS ? 0
               : body + sizeof hh + (size_t)hh.n_hists * SS_HIST_VALUES * sizeof(uint64_t);
    } else if (!v1)
        body = 0;
    if (body == 0 || n != sizeof h + body + sizeof sum) {
        snprintf(err, err_len, "%s is truncated or corrupted (%zu bytes, its header says %zu)",
                 path, n, sizeof h + body + sizeof sum);
        goto out;
    }
    memcpy(&sum, b + n - sizeof sum, sizeof sum);
    /* the same chain of hashes as the writer's pieces (format 1: six) */
    size_t off = 0, cuts[8] = {sizeof h, sizeof st->f,
                               st->f.n_workers * sizeof(struct tr_worker_pos),
                               st->f.n_params * sizeof(float),
                               st->f.has_acc ? st->f.n_params * sizeof(float) : 0,
                               st->f.n_sync * sizeof(float), sizeof hh,
                               (size_t)hh.n_hists * SS_HIST_VALUES * sizeof(uint64_t)};
    uint64_t chk = 0;
    for (int i = 0; i < (v1 ? 6 : 8); i++) {
        chk = ss_hash_bytes(b + off, cuts[i], chk);
        off += cuts[i];
    }
    if (chk != sum) {
        snprintf(err, err_len, "%s is corrupted (checksum)", path);
        goto out;
    }
    off = sizeof h + sizeof st->f;
    st->workers = ss_malloc(cuts[2] + 1);
    memcpy(st->workers, b + off, cuts[2]);
    off += cuts[2];
    st->w = ss_malloc(cuts[3] + 1);
    memcpy(st->w, b + off, cuts[3]);
    off += cuts[3];
    if (st->f.has_acc) {
        st->acc = ss_malloc(cuts[4] + 1);
        memcpy(st->acc, b + off, cuts[4]);
    }
    off += cuts[4];
    if (st->f.n_sync) {
        st->sync = ss_malloc(cuts[5] + 1);
        memcpy(st->sync, b + off, cuts[5]);
    }
    off += cuts[5] + sizeof hh;
    if (hh.n_hists) {
        st->n_hists = hh.n_hists;
        st->hists = ss_malloc(cuts[7]);
        memcpy(st->hists, b + off, cuts[7]);
    }
    rc = 0;
out:
    ss_free(b);
    if (rc)
        memset(st, 0, sizeof *st);
    return rc;
}

void tr_jobckpt_free(struct tr_jobckpt *st)
{
    ss_free(st->workers);
    ss_free(st->w);
    ss_free(st->acc);
    ss_free(st->sync);
    ss_free(st->hists);
    memset(st, 0, sizeof *st);
}
