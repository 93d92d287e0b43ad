/* tr_jobckpt.c - a trainer's part of a job checkpoint (see tr_jobckpt.h).
 *
 * Layout: magic "SSJOBTR3", u32 sizeof(struct tr_jobckpt_fixed), u32
 * sizeof(struct tr_worker_pos), the fixed part, n_workers worker places, w,
 * acc (when has_acc), n_sync floats of sync state, u32 n_hists, u32
 * SS_HIST_VALUES, n_hists * SS_HIST_VALUES u64 of latency histograms, u32
 * TR_KB_WORDS, u32 keep-best flags, the own and the carried keep-best states
 * (TR_KB_WORDS u64 each, tr_keepbest_encode), and a u64 chain of
 * ss_hash_bytes over those pieces. Format 2 (magic "SSJOBTR2") ends after
 * the histograms, format 1 ("SSJOBTR1", written before the histograms were
 * kept) after the sync state: their chains have no pieces after those. */
#include "tr_jobckpt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ss_err.h"
#include "ss_fs.h"
#include "ss_hash.h"
#include "ss_mem.h"

#define S_MAGIC "SSJOBTR3"
#define S_MAGIC_V2 "SSJOBTR2"  /* the keep-best state in the fixed part: still read */
#define S_MAGIC_V1 "SSJOBTR1"  /* no histograms either: still read */
#define S_MAX_HISTS 8192       /* more than any trainer keeps (trainer.workers + 1) */
#define S_KB_CARRIED 1u        /* keep-best flag: kb.have_carried */
#define S_KB_LED 2u            /* keep-best flag: kb.led */
#define S_PIECES 11            /* format 3's pieces before the checksum */

struct s_head {
    char magic[8];                 /* S_MAGIC, S_MAGIC_V2 or S_MAGIC_V1 */
    uint32_t fixed_bytes;          /* sizeof(struct tr_jobckpt_fixed) */
    uint32_t pos_bytes;            /* sizeof(struct tr_worker_pos) */
};

/* Formats 2 and 3: what follows the sync state. */
struct s_hist_head {
    uint32_t n_hists;              /* histograms */
    uint32_t values;               /* SS_HIST_VALUES of the build that wrote it */
};

/* Format 3: what follows the histograms. */
struct s_kb_head {
    uint32_t words;                /* TR_KB_WORDS: 64-bit words of each state */
    uint32_t flags;                /* S_KB_CARRIED, S_KB_LED */
};

/* Bytes of the payload after the head up to the sync state's end. */
static size_t s_body_bytes(const struct tr_jobckpt_fixed *f)
{
    return sizeof *f + f->n_workers * sizeof(struct tr_worker_pos) +
           f->n_params * sizeof(float) * (f->has_acc ? 2 : 1) + f->n_sync * sizeof(float);
}

int tr_jobckpt_write(const char *path, const struct tr_jobckpt *st, char *err, size_t err_len)
{
    struct tr_jobckpt_fixed f = st->f;
    struct s_head h = {S_MAGIC, sizeof(struct tr_jobckpt_fixed), sizeof(struct tr_worker_pos)};
    struct s_hist_head hh = {st->n_hists, SS_HIST_VALUES};
    struct s_kb_head kh = {TR_KB_WORDS, (st->kb.have_carried ? S_KB_CARRIED : 0) |
                                            (st->kb.led ? S_KB_LED : 0)};
    uint64_t kb[2][TR_KB_WORDS];
    size_t wb = f.n_params * sizeof(float);
    size_t hb = (size_t)st->n_hists * SS_HIST_VALUES * sizeof(uint64_t);
    /* the keep-best state has one home here, kb: the old fields are zero */
    f.old_kept_current = f.old_n_evals = f.old_evals_since_best = 0;
    f.old_have_eval = f.old_saved = 0;
    f.old_best_epoch = 0;
    memset(&f.old_best, 0, sizeof f.old_best);
    tr_keepbest_encode(&st->kb.own, kb[0]);
    tr_keepbest_encode(&st->kb.carried, kb[1]);
    struct ss_fs_piece p[S_PIECES + 1] = {{&h, sizeof h},
                                          {&f, sizeof f},
                                          {st->workers, f.n_workers * sizeof *st->workers},
                                          {st->w, wb},
                                          {st->acc, f.has_acc ? wb : 0},
                                          {st->sync, f.n_sync * sizeof(float)},
                                          {&hh, sizeof hh},
                                          {st->hists, hb},
                                          {&kh, sizeof kh},
                                          {kb[0], sizeof kb[0]},
                                          {kb[1], sizeof kb[1]},
                                          {NULL, sizeof(uint64_t)}};
    uint64_t sum = 0;
    for (int i = 0; i < S_PIECES; i++)
        sum = ss_hash_bytes(p[i].data, p[i].len, sum);
    p[S_PIECES].data = &sum;
    return ss_fs_write_atomic(path, p, S_PIECES + 1, err, err_len);
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

/* The format head h names: 3, 2 or 1; 0: none of them. */
static int s_format(const struct s_head *h)
{
    if (memcmp(h->magic, S_MAGIC, 8) == 0)
        return 3;
    if (memcmp(h->magic, S_MAGIC_V2, 8) == 0)
        return 2;
    return memcmp(h->magic, S_MAGIC_V1, 8) == 0 ? 1 : 0;
}

/* Formats 1 and 2: the keep-best state from the fixed part's old_ fields
 * (they recorded no save id and nothing carried). */
static void s_kb_from_old(struct tr_jobckpt *st)
{
    const struct tr_jobckpt_fixed *f = &st->f;
    st->kb.own = (struct tr_keepbest){
        .have_eval = f->old_have_eval != 0, .saved = f->old_saved != 0,
        .kept_current = f->old_kept_current != 0, .best_epoch = f->old_best_epoch,
        .n_evals = f->old_n_evals, .evals_since_best = f->old_evals_since_best,
        .best = f->old_best};
}

/* Format 3: the keep-best state from its piece at p (the head, then the
 * own and the carried states' words). Returns 0 or SS_E_CORRUPT with err. */
static int s_kb_read(struct tr_jobckpt *st, const unsigned char *p, const char *path,
                     char *err, size_t len)
{
    struct s_kb_head kh;
    uint64_t w[2][TR_KB_WORDS];
    char why[160];
    memcpy(&kh, p, sizeof kh);
    memcpy(w, p + sizeof kh, sizeof w);
    if (kh.flags & ~(S_KB_CARRIED | S_KB_LED)) {
        snprintf(err, len, "%s: keep-best flags %#x, this build knows %#x", path, kh.flags,
                 S_KB_CARRIED | S_KB_LED);
        return SS_E_CORRUPT;
    }
    for (int i = 0; i < 2; i++)
        if (tr_keepbest_decode(w[i], i ? &st->kb.carried : &st->kb.own, why, sizeof why)) {
            snprintf(err, len, "%s: the %s keep-best state: %s", path, i ? "carried" : "own",
                     why);
            return SS_E_CORRUPT;
        }
    st->kb.have_carried = (kh.flags & S_KB_CARRIED) != 0;
    st->kb.led = (kh.flags & S_KB_LED) != 0;
    return 0;
}

/* The bytes after the head, up to the checksum, that the file of format
 * ver with buffer b (n bytes; the fixed part read into st->f) must have,
 * reading the histograms' and the keep-best state's heads on the way
 * (*hh, *kh). Returns 0 for a file too short or of impossible counts, or
 * -1 with err for heads of another build. */
static long long s_payload_bytes(const unsigned char *b, size_t n, int ver,
                                 const struct tr_jobckpt *st, struct s_hist_head *hh,
                                 struct s_kb_head *kh, const char *path, char *err, size_t len)
{
    const struct tr_jobckpt_fixed *f = &st->f;
    size_t at = sizeof(struct s_head), tail = sizeof(uint64_t);
    if (f->n_workers > 4096 || f->n_params > ((size_t)1 << 36) || f->n_sync > ((size_t)1 << 38))
        return 0;
    size_t body = s_body_bytes(f);
    if (ver >= 2) {
        if (n < at + body + sizeof *hh + tail)
            return 0;
        memcpy(hh, b + at + body, sizeof *hh);
        if (hh->values != SS_HIST_VALUES) {
            snprintf(err, len, "%s is not a trainer state written by this build of "
                     "shadow-trainer (histograms of %u values, this build's have %d)", path,
                     hh->values, SS_HIST_VALUES);
            return -1;
        }
        if (hh->n_hists > S_MAX_HISTS)
            return 0;
        body += sizeof *hh + (size_t)hh->n_hists * SS_HIST_VALUES * sizeof(uint64_t);
    }
    if (ver >= 3) {
        if (n < at + body + sizeof *kh + tail)
            return 0;
        memcpy(kh, b + at + body, sizeof *kh);
        if (kh->words != TR_KB_WORDS) {
            snprintf(err, len, "%s is not a trainer state written by this build of "
                     "shadow-trainer (keep-best states of %u words, this build's have %d)",
                     path, kh->words, TR_KB_WORDS);
            return -1;
        }
        body += sizeof *kh + 2 * TR_KB_WORDS * sizeof(uint64_t);
    }
    return (long long)body;
}

int tr_jobckpt_read(const char *path, struct tr_jobckpt *st, char *err, size_t err_len)
{
    unsigned char *b;
    size_t n;
    struct s_head h;
    struct s_hist_head hh = {0, SS_HIST_VALUES};
    struct s_kb_head kh = {TR_KB_WORDS, 0};
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
    int ver = s_format(&h);
    if (!ver || h.fixed_bytes != sizeof st->f || h.pos_bytes != sizeof(struct tr_worker_pos)) {
        snprintf(err, err_len, "%s is not a trainer state written by this build of "
                 "shadow-trainer", path);
        goto out;
    }
    memcpy(&st->f, b + sizeof h, sizeof st->f);
    long long body = s_payload_bytes(b, n, ver, st, &hh, &kh, path, err, err_len);
    if (body < 0)
        goto out;
    uint64_t sum;
    if (body == 0 || n != sizeof h + (size_t)body + sizeof sum) {
        snprintf(err, err_len, "%s is truncated or corrupted (%zu bytes, its header says %zu)",
                 path, n, sizeof h + (size_t)body + sizeof sum);
        goto out;
    }
    memcpy(&sum, b + n - sizeof sum, sizeof sum);
    /* the same chain of hashes as the writer's pieces (format 1: six, 2: eight) */
    size_t kbw = TR_KB_WORDS * sizeof(uint64_t);
    size_t off = 0, cuts[S_PIECES] = {sizeof h, sizeof st->f,
                                      st->f.n_workers * sizeof(struct tr_worker_pos),
                                      st->f.n_params * sizeof(float),
                                      st->f.has_acc ? st->f.n_params * sizeof(float) : 0,
                                      st->f.n_sync * sizeof(float), sizeof hh,
                                      (size_t)hh.n_hists * SS_HIST_VALUES * sizeof(uint64_t),
                                      sizeof kh, kbw, kbw};
    uint64_t chk = 0;
    for (int i = 0; i < (ver == 1 ? 6 : ver == 2 ? 8 : S_PIECES); i++) {
        chk = ss_hash_bytes(b + off, cuts[i], chk);
        off += cuts[i];
    }
    if (chk != sum) {
        snprintf(err, err_len, "%s is corrupted (checksum)", path);
        goto out;
    }
    size_t kb_at = sizeof h + (size_t)body - sizeof kh - 2 * kbw;
    if (ver >= 3 && (rc = s_kb_read(st, b + kb_at, path, err, err_len)) != 0)
        goto out;
    if (ver < 3)
        s_kb_from_old(st);
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
