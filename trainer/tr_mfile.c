/* tr_mfile.c - the model file (.ssm): format, writer, checked loader.
 *
 * DESIGN: the loader maps the file and checks everything before anything
 * uses it: header checksum, sizes against the file's size, the payload
 * checksum over every byte, then each record (table, zero field, finite
 * floats) while it builds the row index. Rows are read in place from the
 * mapping (the page cache is shared by every scorer of one file); the
 * index is an open-addressing array of row numbers (linear probing, load at
 * most 1/2), written once at load and only read afterwards, so lookups from
 * many threads need no lock. */
#include "tr_mfile.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_fs.h"
#include "ss_hash.h"
#include "ss_mem.h"
#include "ss_rowinit.h"

#define S_BUF_BYTES (1u << 20)
#define S_PATH_MAX 4096
#define S_MAX_SETS 256

const char *const tr_mfile_keys[] = {
    "job.seed", "tables.count", "tables.init_scale", "model.embedding_dim",
    "model.first_order", "model.bottom_mlp", "model.top_mlp", "model.pooling",
    "model.field_pooling", "model.precision", "data.format", "data.columns",
    "data.delimiter", "data.header", "data.multi_separator", "data.fields", "data.labels",
    NULL,
};

/* ------------------------------------------------------------ checksum */

#define S_P1 0x9e3779b185ebca87ull
#define S_P2 0xc2b2ae3d27d4eb4full

static inline uint64_t s_rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t s_word(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* One 32-byte block into the four lanes. */
static inline void s_block(uint64_t *lane, const unsigned char *p)
{
    for (int i = 0; i < 4; i++)
        lane[i] = s_rotl(lane[i] + s_word(p + 8 * i) * S_P2, 31) * S_P1;
}

void tr_mfile_sum_init(struct tr_mfile_sum *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 4; i++)
        s->lane[i] = ss_mix64((uint64_t)i + 0x53534d4f44454cull);
}

void tr_mfile_sum_add(struct tr_mfile_sum *s, const void *data, size_t n)
{
    const unsigned char *p = data;
    s->total += n;
    if (s->n_tail) {
        size_t take = 32 - s->n_tail < n ? 32 - s->n_tail : n;
        memcpy(s->tail + s->n_tail, p, take);
        s->n_tail += take;
        p += take;
        n -= take;
        if (s->n_tail < 32)
            return;
        s_block(s->lane, s->tail);
        s->n_tail = 0;
    }
    for (; n >= 32; p += 32, n -= 32)
        s_block(s->lane, p);
    memcpy(s->tail, p, n);
    s->n_tail = n;
}

uint64_t tr_mfile_sum_final(const struct tr_mfile_sum *s)
{
    uint64_t h = s->total * S_P1;
    for (int i = 0; i < 4; i++)
        h = ss_mix64(h ^ s->lane[i]);
    for (size_t i = 0; i < s->n_tail; i++)
        h = (h ^ s->tail[i]) * 0x100000001b3ull;
    return ss_mix64(h);
}

/* ------------------------------------------------------------ shape and text */

int tr_mfile_model_conf(const struct ss_cfg *cfg, struct tr_model_conf *mc)
{
    memset(mc, 0, sizeof *mc);
    mc->n_dense = cfg->data.n_dense;
    mc->n_sparse = cfg->data.n_fields;
    mc->dim = (uint32_t)cfg->embedding_dim;
    mc->first_order = cfg->first_order ? 1u : 0u;
    mc->precision = (uint32_t)cfg->precision;
    if (cfg->bottom_mlp.n > TR_MODEL_MAX_MLP || cfg->top_mlp.n > TR_MODEL_MAX_MLP)
        return SS_E_CONFIG;
    mc->n_bottom = (uint32_t)cfg->bottom_mlp.n;
    for (size_t i = 0; i < cfg->bottom_mlp.n; i++)
        mc->bottom[i] = (uint32_t)cfg->bottom_mlp.v[i];
    mc->n_top = (uint32_t)cfg->top_mlp.n;
    for (size_t i = 0; i < cfg->top_mlp.n; i++)
        mc->top[i] = (uint32_t)cfg->top_mlp.v[i];
    return 0;
}

uint64_t tr_mfile_shape_hash(const struct tr_model_conf *mc)
{
    struct tr_model_conf copy = *mc;
    copy.portable = 0;
    /* the fields after first_order (how the products run) are never hashed */
    size_t n = copy.first_order ? offsetof(struct tr_model_conf, precision)
                                : offsetof(struct tr_model_conf, first_order);
    return ss_hash_bytes(&copy, n, 7);
}

/* Append text to out at *at; returns 0 or SS_E_TOOBIG. */
static int s_put(char *out, size_t len, size_t *at, const char *text)
{
    size_t n = strlen(text);
    if (*at + n >= len)
        return SS_E_TOOBIG;
    memcpy(out + *at, text, n + 1);
    *at += n;
    return 0;
}

/* A list value (one entry a line) as a YAML flow list of quoted entries. */
static int s_put_list(char *out, size_t len, size_t *at, char *lines)
{
    int rc = s_put(out, len, at, "[");
    char *save = NULL, q[SS_CFG_MAX_STR * 2 + 4];
    int first = 1;
    for (char *e = strtok_r(lines, "\n", &save); e && rc == 0; e = strtok_r(NULL, "\n", &save)) {
        size_t k = 0;
        q[k++] = '"';
        for (const char *c = e; *c && k + 4 < sizeof q; c++) {
            if (*c == '"' || *c == '\\')
                q[k++] = '\\';
            q[k++] = *c;
        }
        q[k++] = '"';
        q[k] = '\0';
        if (!first)
            rc = s_put(out, len, at, ", ");
        if (rc == 0)
            rc = s_put(out, len, at, q);
        first = 0;
    }
    return rc ? rc : s_put(out, len, at, "]");
}

int tr_mfile_cfg_text(const struct ss_cfg *cfg, char *out, size_t len)
{
    char val[SS_CFG_MAX_LIST * SS_CFG_MAX_STR], cnt[32], name[128];
    size_t at = 0;
    int rc = 0;
    ss_assert(len > 0);
    out[0] = '\0';
    for (size_t i = 0; tr_mfile_keys[i] && rc == 0; i++) {
        const char *key = tr_mfile_keys[i];
        if (ss_cfg_get(cfg, key, val, sizeof val) == SS_E_NOTFOUND)
            continue;  /* a key this build does not have */
        snprintf(name, sizeof name, "%s.count", key);
        int list = ss_cfg_get(cfg, name, cnt, sizeof cnt) == 0;
        if ((rc = s_put(out, len, &at, key)) == 0 && (rc = s_put(out, len, &at, "=")) == 0)
            rc = list ? s_put_list(out, len, &at, val) : s_put(out, len, &at, val);
        if (rc == 0)
            rc = s_put(out, len, &at, "\n");
    }
    return rc ? rc : (int)at;
}

/* Round n up to a multiple of TR_MFILE_ALIGN. */
static uint64_t s_align(uint64_t n)
{
    return (n + TR_MFILE_ALIGN - 1) / TR_MFILE_ALIGN * TR_MFILE_ALIGN;
}

static uint64_t s_rec_bytes(uint32_t row_dim)
{
    return TR_MFILE_REC_HEAD + 4ull * row_dim;
}

uint64_t tr_mfile_bytes(const struct tr_mfile_info *info)
{
    return TR_MFILE_HDR_BYTES + s_align(info->text_bytes) + s_align(info->n_params * 4) +
           info->n_rows * s_rec_bytes(info->row_dim) + 8;
}

/* The 128 header bytes of info. */
static void s_header(const struct tr_mfile_info *info, unsigned char *h)
{
    uint32_t version = TR_MFILE_VERSION, hdr = TR_MFILE_HDR_BYTES;
    uint64_t bytes = tr_mfile_bytes(info);
    memset(h, 0, TR_MFILE_HDR_BYTES);
    memcpy(h, TR_MFILE_MAGIC, 8);
    memcpy(h + 8, &version, 4);
    memcpy(h + 12, &hdr, 4);
    memcpy(h + 16, &bytes, 8);
    memcpy(h + 24, &info->text_bytes, 8);
    memcpy(h + 32, &info->n_params, 8);
    memcpy(h + 40, &info->n_rows, 8);
    memcpy(h + 48, &info->row_dim, 4);
    memcpy(h + 52, &info->n_tables, 4);
    memcpy(h + 56, &info->save_id, 8);
    memcpy(h + 64, &info->shape_hash, 8);
    uint64_t sum = ss_hash_bytes(h, 120, 0x55);
    memcpy(h + 120, &sum, 8);
}

/* ------------------------------------------------------------ writing */

struct tr_mfile_writer {
    struct ss_fs_tmp out;       /* PATH.tmp-PID, renamed over the output at commit */
    FILE *f;                    /* its stream (out's) */
    char *buf;                  /* its stdio buffer */
    struct tr_mfile_info info;  /* the counts announced */
    uint64_t dense_done;        /* dense floats written */
    uint64_t rows_done;         /* rows written */
    struct tr_mfile_sum sum;    /* of the payload so far */
};

/* Write n bytes to the payload (summed). Returns 0 or an error with err. */
static int s_out(tr_mfile_writer_t *w, const void *p, size_t n, char *err, size_t len)
{
    tr_mfile_sum_add(&w->sum, p, n);
    if (fwrite(p, 1, n, w->f) == n)
        return 0;
    int e = errno ? errno : EIO;
    snprintf(err, len, "cannot write %s: %s", w->out.tmp, strerror(e));
    return ss_fs_errno_rc(e);
}

/* Zero bytes up to the next multiple of TR_MFILE_ALIGN after n bytes. */
static int s_pad(tr_mfile_writer_t *w, uint64_t n, char *err, size_t len)
{
    static const unsigned char zeros[TR_MFILE_ALIGN];
    return s_out(w, zeros, (size_t)(s_align(n) - n), err, len);
}

tr_mfile_writer_t *tr_mfile_writer_new(const char *path, const struct tr_mfile_info *info,
                                       const char *text, size_t text_len, char *err,
                                       size_t err_len)
{
    ss_assert(path && info && text);
    if (strlen(path) + 32 >= S_PATH_MAX) {
        snprintf(err, err_len, "output path too long: %.64s...", path);
        return NULL;
    }
    tr_mfile_writer_t *w = ss_calloc(1, sizeof *w);
    w->info = *info;
    w->info.text_bytes = text_len;
    tr_mfile_sum_init(&w->sum);
    if (ss_fs_tmp_open(&w->out, path, SS_FS_TMP_PID, err, err_len) != 0) {
        ss_free(w);
        return NULL;
    }
    if (!(w->f = ss_fs_tmp_stream(&w->out))) {
        snprintf(err, err_len, "cannot write %s: %s", w->out.tmp, strerror(errno));
        tr_mfile_writer_abort(&w);
        return NULL;
    }
    w->buf = ss_malloc(S_BUF_BYTES);
    setvbuf(w->f, w->buf, _IOFBF, S_BUF_BYTES);
    unsigned char h[TR_MFILE_HDR_BYTES];
    s_header(&w->info, h);
    int rc = fwrite(h, 1, sizeof h, w->f) == sizeof h ? 0 : SS_E_IO;
    if (rc)
        snprintf(err, err_len, "cannot write %s: %s", w->out.tmp, strerror(errno ? errno : EIO));
    if (rc == 0 && (rc = s_out(w, text, text_len, err, err_len)) == 0)
        rc = s_pad(w, text_len, err, err_len);
    if (rc)
        tr_mfile_writer_abort(&w);
    return w;
}

int tr_mfile_write_dense(tr_mfile_writer_t *w, const float *v, size_t n, char *err,
                         size_t err_len)
{
    ss_assert(w && (v || n == 0));
    if (w->dense_done + n > w->info.n_params || w->rows_done) {
        snprintf(err, err_len, "%s: more dense floats than the %llu announced", w->out.path,
                 (unsigned long long)w->info.n_params);
        return SS_E_INVAL;
    }
    w->dense_done += n;
    int rc = s_out(w, v, n * sizeof(float), err, err_len);
    if (rc == 0 && w->dense_done == w->info.n_params)
        rc = s_pad(w, w->info.n_params * 4, err, err_len);
    return rc;
}

int tr_mfile_write_row(tr_mfile_writer_t *w, uint32_t table, uint64_t key, const float *row,
                       char *err, size_t err_len)
{
    ss_assert(w && row);
    if (w->rows_done >= w->info.n_rows || w->dense_done != w->info.n_params ||
        table >= w->info.n_tables) {
        snprintf(err, err_len, "%s: row %llu (table %u) does not fit the %llu rows of %u "
                 "tables announced", w->out.path, (unsigned long long)w->rows_done, table,
                 (unsigned long long)w->info.n_rows, w->info.n_tables);
        return SS_E_INVAL;
    }
    unsigned char head[TR_MFILE_REC_HEAD] = {0};
    memcpy(head, &key, 8);
    memcpy(head + 8, &table, 4);
    w->rows_done++;
    int rc = s_out(w, head, sizeof head, err, err_len);
    return rc ? rc : s_out(w, row, (size_t)w->info.row_dim * sizeof(float), err, err_len);
}

int tr_mfile_writer_commit(tr_mfile_writer_t **w_p, char *err, size_t err_len)
{
    tr_mfile_writer_t *w = *w_p;
    ss_assert(w);
    int rc = 0;
    if (w->dense_done != w->info.n_params || w->rows_done != w->info.n_rows) {
        snprintf(err, err_len, "%s: %llu of %llu dense floats and %llu of %llu rows written",
                 w->out.path, (unsigned long long)w->dense_done,
                 (unsigned long long)w->info.n_params, (unsigned long long)w->rows_done,
                 (unsigned long long)w->info.n_rows);
        rc = SS_E_INVAL;
    }
    uint64_t sum = tr_mfile_sum_final(&w->sum);
    if (rc == 0 && fwrite(&sum, 1, 8, w->f) != 8) {
        snprintf(err, err_len, "cannot write %s: %s", w->out.tmp, strerror(errno ? errno : EIO));
        rc = SS_E_IO;
    }
    if (rc == 0)
        rc = ss_fs_tmp_commit(&w->out, err, err_len);
    ss_fs_tmp_abort(&w->out);  /* after a failure: the temporary file goes */
    ss_free(w->buf);
    ss_free(w);
    *w_p = NULL;
    return rc;
}

void tr_mfile_writer_abort(tr_mfile_writer_t **w_p)
{
    tr_mfile_writer_t *w = w_p ? *w_p : NULL;
    if (!w)
        return;
    ss_fs_tmp_abort(&w->out);
    ss_free(w->buf);
    ss_free(w);
    *w_p = NULL;
}

/* ------------------------------------------------------------ reading */

struct tr_mfile {
    const unsigned char *base;   /* the file's bytes */
    size_t n;                    /* their count */
    int mapped;                  /* base is an mmap of n bytes (ours to unmap) */
    struct tr_mfile_info info;   /* the header's counts */
    struct ss_cfg *cfg;          /* the job config: text and sets */
    const float *dense;          /* [n_params] in base */
    const unsigned char *recs;   /* [n_rows] records in base */
    uint64_t rec_bytes;          /* bytes of one record */
    uint32_t *slots;             /* [n_slots] row number + 1, 0 = empty */
    uint64_t mask;               /* n_slots - 1 (a power of two) */
};

static uint64_t s_u64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t s_u32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Check the header of m's bytes and fill m->info. */
static int s_check_header(tr_mfile_t *m, const char *name, char *err, size_t len)
{
    const unsigned char *h = m->base;
    if (m->n < TR_MFILE_HDR_BYTES || memcmp(h, TR_MFILE_MAGIC, 8) != 0) {
        snprintf(err, len, "%s is not a ShadowSync model file (%s)", name,
                 m->n < TR_MFILE_HDR_BYTES ? "shorter than a header" : "no SSMODEL1 magic");
        return SS_E_CORRUPT;
    }
    if (s_u32(h + 8) != TR_MFILE_VERSION || s_u32(h + 12) != TR_MFILE_HDR_BYTES) {
        snprintf(err, len, "%s: model file format version %u, this build reads version %u",
                 name, s_u32(h + 8), TR_MFILE_VERSION);
        return SS_E_CORRUPT;
    }
    if (ss_hash_bytes(h, 120, 0x55) != s_u64(h + 120)) {
        snprintf(err, len, "%s: the header is corrupted (checksum)", name);
        return SS_E_CORRUPT;
    }
    for (size_t i = 72; i < 120; i++)
        if (h[i]) {
            snprintf(err, len, "%s: the header's reserved bytes are not zero", name);
            return SS_E_CORRUPT;
        }
    struct tr_mfile_info *in = &m->info;
    in->text_bytes = s_u64(h + 24);
    in->n_params = s_u64(h + 32);
    in->n_rows = s_u64(h + 40);
    in->row_dim = s_u32(h + 48);
    in->n_tables = s_u32(h + 52);
    in->save_id = s_u64(h + 56);
    in->shape_hash = s_u64(h + 64);
    if (in->text_bytes > TR_MFILE_MAX_TEXT || in->n_params > (1ull << 40) ||
        in->n_rows >= UINT32_MAX || in->row_dim == 0 || in->row_dim > TR_MODEL_MAX_DIM + 1 ||
        in->n_tables == 0 || in->n_tables > SS_CFG_MAX_FIELDS) {
        snprintf(err, len, "%s: implausible counts in the header (config text %llu bytes, "
                 "%llu dense floats, %llu rows of %u floats, %u tables)", name,
                 (unsigned long long)in->text_bytes, (unsigned long long)in->n_params,
                 (unsigned long long)in->n_rows, in->row_dim, in->n_tables);
        return SS_E_CORRUPT;
    }
    uint64_t want = tr_mfile_bytes(in);
    if (s_u64(h + 16) != want || m->n != want) {
        snprintf(err, len, "%s: %s: %zu bytes, the header says %llu", name,
                 m->n < want ? "truncated" : "wrong size", m->n, (unsigned long long)want);
        return SS_E_CORRUPT;
    }
    return 0;
}

/* 1 when line is "KEY=..." for a KEY of tr_mfile_keys: the file's text sets
 * nothing else (no file names, no keys of the cluster or of security). */
static int s_known_key(const char *line)
{
    const char *eq = strchr(line, '=');
    for (size_t i = 0; eq && tr_mfile_keys[i]; i++)
        if (strlen(tr_mfile_keys[i]) == (size_t)(eq - line) &&
            strncmp(line, tr_mfile_keys[i], (size_t)(eq - line)) == 0)
            return 1;
    return 0;
}

/* The config: the file's text lines, then the caller's data.* sets. */
static int s_load_cfg(tr_mfile_t *m, const char *name, const char *const *sets, size_t n_sets,
                      char *err, size_t len)
{
    size_t tn = (size_t)m->info.text_bytes;
    char *text = ss_malloc(tn + 1);
    const char *all[S_MAX_SETS];
    size_t n = 0;
    int rc = 0;
    memcpy(text, m->base + TR_MFILE_HDR_BYTES, tn);
    text[tn] = '\0';
    if (strlen(text) != tn || (tn && text[tn - 1] != '\n')) {
        snprintf(err, len, "%s: the config text is not text lines", name);
        rc = SS_E_CORRUPT;
    }
    char *save = NULL;
    for (char *l = rc ? NULL : strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (n + n_sets >= S_MAX_SETS || !s_known_key(l)) {
            snprintf(err, len, "%s: the config text has a line that is not one of the keys "
                     "a model file records, or too many lines", name);
            rc = SS_E_CORRUPT;
            break;
        }
        all[n++] = l;
    }
    for (size_t i = 0; rc == 0 && i < n_sets; i++) {
        if (strncmp(sets[i], "data.", 5) != 0) {
            snprintf(err, len, "%s: only data.* keys may be set when scoring (how a line is "
                     "laid out), not '%s'", name, sets[i]);
            rc = SS_E_CONFIG;
        }
        all[n++] = sets[i];
    }
    char why[1024];
    m->cfg = ss_calloc(1, sizeof *m->cfg);
    if (rc == 0 && ss_cfg_load(m->cfg, NULL, all, n, why, sizeof why) != 0) {
        snprintf(err, len, "%s: its config%s does not load: %s", name,
                 n_sets ? " with the data.* settings given" : "", why);
        rc = n_sets ? SS_E_CONFIG : SS_E_CORRUPT;
    }
    ss_free(text);
    if (rc == 0 && (ss_cfg_row_dim(m->cfg) != m->info.row_dim ||
                    (uint64_t)m->cfg->n_tables != m->info.n_tables)) {
        snprintf(err, len, "%s: rows of %u floats in %u tables, its config says %u in %lld",
                 name, m->info.row_dim, m->info.n_tables, ss_cfg_row_dim(m->cfg),
                 (long long)m->cfg->n_tables);
        rc = SS_E_CORRUPT;
    }
    struct tr_model_conf mc;
    if (rc == 0 && (tr_mfile_model_conf(m->cfg, &mc) != 0 ||
                    tr_mfile_shape_hash(&mc) != m->info.shape_hash)) {
        snprintf(err, len, "%s: its config (with the data.* settings given: %u dense and %u "
                 "categorical fields a line) does not give the shape of its dense model",
                 name, m->cfg->data.n_dense, m->cfg->data.n_fields);
        rc = n_sets ? SS_E_CONFIG : SS_E_CORRUPT;
    }
    return rc;
}

/* Index row r (record at p). Returns 0 or SS_E_CORRUPT (a duplicate). */
static int s_index_row(tr_mfile_t *m, uint32_t r, uint32_t table, uint64_t key)
{
    uint64_t i = ss_mix64(key ^ ss_rowinit_table_salt(table)) & m->mask;
    for (; m->slots[i]; i = (i + 1) & m->mask) {
        const unsigned char *q = m->recs + (m->slots[i] - 1) * m->rec_bytes;
        if (s_u64(q) == key && s_u32(q + 8) == table)
            return SS_E_CORRUPT;
    }
    m->slots[i] = r + 1;
    return 0;
}

/* Check the payload: dense floats finite, every record sound, index it. */
static int s_check_payload(tr_mfile_t *m, const char *name, char *err, size_t len)
{
    const struct tr_mfile_info *in = &m->info;
    uint64_t off = TR_MFILE_HDR_BYTES + s_align(in->text_bytes);
    m->dense = (const float *)(const void *)(m->base + off);
    for (uint64_t i = 0; i < in->n_params; i++)
        if (!isfinite(m->dense[i])) {
            snprintf(err, len, "%s: dense float %llu is not finite", name, (unsigned long long)i);
            return SS_E_CORRUPT;
        }
    m->recs = m->base + off + s_align(in->n_params * 4);
    m->rec_bytes = s_rec_bytes(in->row_dim);
    uint64_t n_slots = 16;
    while (n_slots < 2 * in->n_rows)
        n_slots *= 2;
    m->slots = ss_calloc((size_t)n_slots, sizeof *m->slots);
    m->mask = n_slots - 1;
    for (uint64_t r = 0; r < in->n_rows; r++) {
        const unsigned char *p = m->recs + r * m->rec_bytes;
        uint64_t key = s_u64(p);
        uint32_t table = s_u32(p + 8);
        const float *v = (const float *)(const void *)(p + TR_MFILE_REC_HEAD);
        const char *bad = table >= in->n_tables || s_u32(p + 12) ? "a bad table" : NULL;
        for (uint32_t j = 0; !bad && j < in->row_dim; j++)
            if (!isfinite(v[j]))
                bad = "a float that is not finite";
        if (!bad && s_index_row(m, (uint32_t)r, table, key) != 0)
            bad = "a duplicate key";
        if (bad) {
            snprintf(err, len, "%s: row %llu (table %u key %016llx) has %s", name,
                     (unsigned long long)r, table, (unsigned long long)key, bad);
            return SS_E_CORRUPT;
        }
    }
    return 0;
}

/* Check and index m's bytes (base, n set). */
static int s_load(tr_mfile_t *m, const char *name, const char *const *sets, size_t n_sets,
                  char *err, size_t len)
{
    int rc = s_check_header(m, name, err, len);
    if (rc)
        return rc;
    struct tr_mfile_sum s;
    tr_mfile_sum_init(&s);
    tr_mfile_sum_add(&s, m->base + TR_MFILE_HDR_BYTES, m->n - TR_MFILE_HDR_BYTES - 8);
    if (tr_mfile_sum_final(&s) != s_u64(m->base + m->n - 8)) {
        snprintf(err, len, "%s is corrupted (payload checksum)", name);
        return SS_E_CORRUPT;
    }
    if ((rc = s_load_cfg(m, name, sets, n_sets, err, len)) != 0)
        return rc;
    return s_check_payload(m, name, err, len);
}

tr_mfile_t *tr_mfile_load_mem(const void *buf, size_t n, const char *name,
                              const char *const *sets, size_t n_sets, char *err,
                              size_t err_len)
{
    ss_assert((buf || n == 0) && name && (sets || n_sets == 0));
    if (n_sets >= S_MAX_SETS / 2) {
        snprintf(err, err_len, "too many data.* settings (%zu)", n_sets);
        return NULL;
    }
    tr_mfile_t *m = ss_calloc(1, sizeof *m);
    m->base = buf;
    m->n = n;
    if (s_load(m, name, sets, n_sets, err, err_len) != 0)
        tr_mfile_destroy(&m);
    return m;
}

tr_mfile_t *tr_mfile_load(const char *path, const char *const *sets, size_t n_sets,
                          char *err, size_t err_len)
{
    ss_assert(path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, err_len, "cannot open %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || st.st_size < (off_t)TR_MFILE_HDR_BYTES) {
        snprintf(err, err_len, "%s is not a ShadowSync model file (%s)", path,
                 S_ISREG(st.st_mode) ? "shorter than a header" : "not a regular file");
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(err, err_len, "cannot map %s (%lld bytes): %s", path, (long long)st.st_size,
                 strerror(e));
        return NULL;
    }
    (void)madvise(p, (size_t)st.st_size, MADV_WILLNEED);
    tr_mfile_t *m = tr_mfile_load_mem(p, (size_t)st.st_size, path, sets, n_sets, err, err_len);
    if (m)
        m->mapped = 1;
    else
        munmap(p, (size_t)st.st_size);
    return m;
}

void tr_mfile_destroy(tr_mfile_t **m_p)
{
    tr_mfile_t *m = m_p ? *m_p : NULL;
    if (!m)
        return;
    if (m->mapped)
        munmap((void *)m->base, m->n);
    ss_free(m->cfg);
    ss_free(m->slots);
    ss_free(m);
    *m_p = NULL;
}

const struct tr_mfile_info *tr_mfile_info(const tr_mfile_t *m)
{
    ss_assert(m);
    return &m->info;
}

const struct ss_cfg *tr_mfile_cfg(const tr_mfile_t *m)
{
    ss_assert(m);
    return m->cfg;
}

const float *tr_mfile_dense(const tr_mfile_t *m)
{
    ss_assert(m);
    return m->dense;
}

const float *tr_mfile_row(const tr_mfile_t *m, uint32_t table, uint64_t key)
{
    uint64_t i = ss_mix64(key ^ ss_rowinit_table_salt(table)) & m->mask;
    for (; m->slots[i]; i = (i + 1) & m->mask) {
        const unsigned char *q = m->recs + (m->slots[i] - 1) * m->rec_bytes;
        if (s_u64(q) == key && s_u32(q + 8) == table)
            return (const float *)(const void *)(q + TR_MFILE_REC_HEAD);
    }
    return NULL;
}
