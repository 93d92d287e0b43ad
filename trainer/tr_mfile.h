/* tr_mfile.h - the model file (.ssm): a trained model in one file, scored
 * with no PS (shadow-score, score/ss_model.h).
 *
 * `shadow-ctl export RUN_DIR/model -o model.ssm` writes it (tools/ctl_export.c)
 * from a model set (dense.bin, every embedding-K.ckpt, MANIFEST). It holds
 * what scoring a line as `--predict` does needs: the job keys that lay out a
 * line and shape the model (as text), the dense parameters, and every stored
 * embedding row's weights (no optimizer state). A row the file does not hold
 * scores as its initial row (common/ss_rowinit.h), as a PS answers it.
 *
 * Layout (integers little-endian, floats IEEE-754 binary32 in host order:
 * ShadowSync runs on little-endian hosts):
 *
 *   offset  size  field
 *   0       8     magic "SSMODEL1"
 *   8       4     format version: 1 (TR_MFILE_VERSION)
 *   12      4     header bytes: 128
 *   16      8     file bytes: the whole file, trailer included
 *   24      8     config text bytes (C)
 *   32      8     dense floats (n_params)
 *   40      8     rows (n_rows)
 *   48      4     floats per row (row_dim: model.embedding_dim + first_order)
 *   52      4     tables (tables.count)
 *   56      8     save id of the model set (its MANIFEST), 0 = unknown
 *   64      8     shape hash of the dense model (as dense.bin records it)
 *   72      48    reserved, written 0, must read 0
 *   120     8     checksum of bytes 0..119
 *   128     C     config text: lines "key=value\n" (ss_cfg --set syntax), then
 *                 zero bytes up to a multiple of 64
 *   ...     4*n_params   dense floats, then zero bytes up to a multiple of 64
 *   ...     n_rows * (16 + 4*row_dim)   row records: key u64, table u32,
 *                 zero u32, row_dim floats (the row's weights)
 *   end-8   8     checksum of every byte from 128 up to here (tr_mfile_sum)
 *
 * A reader checks magic, version, both checksums, that the sizes add up to
 * the file's size exactly (a truncated or extended file is refused), every
 * record's table, no duplicate row, every float finite, and the config text
 * (ss_cfg_load). Errors name the file and what is wrong.
 *
 * Thread: writers and loading belong to one thread; a loaded tr_mfile_t is
 * immutable and its lookups are thread-safe. */
#ifndef TR_MFILE_H
#define TR_MFILE_H

#include <stddef.h>
#include <stdint.h>

#include "ss_cfg.h"
#include "tr_model.h"

#define TR_MFILE_MAGIC "SSMODEL1"
#define TR_MFILE_VERSION 1u
#define TR_MFILE_HDR_BYTES 128u
#define TR_MFILE_MAX_TEXT (64u << 10)   /* longest config text */
#define TR_MFILE_ALIGN 64u              /* sections start at multiples of this */
#define TR_MFILE_REC_HEAD 16u           /* key, table, zero before a row's floats */

/* The counts a model file's header records. */
struct tr_mfile_info {
    uint64_t n_params;      /* dense floats */
    uint64_t n_rows;        /* embedding rows */
    uint32_t row_dim;       /* floats per row */
    uint32_t n_tables;      /* tables */
    uint64_t save_id;       /* the model set's save id, 0 = unknown */
    uint64_t shape_hash;    /* tr_mfile_shape_hash() of the dense model */
    uint64_t text_bytes;    /* config text */
};

/* Streaming checksum of the payload (4 lanes over 8-byte words; any split
 * of the bytes gives the same value). Caller-allocated. */
struct tr_mfile_sum {
    uint64_t lane[4];       /* running lanes */
    unsigned char tail[32]; /* bytes not yet a whole block */
    size_t n_tail;          /* of tail */
    uint64_t total;         /* bytes summed */
};

void tr_mfile_sum_init(struct tr_mfile_sum *s);
void tr_mfile_sum_add(struct tr_mfile_sum *s, const void *p, size_t n);
uint64_t tr_mfile_sum_final(const struct tr_mfile_sum *s);

/* The keys of the job that a model file records: what lays out a line and
 * shapes the model (NULL-terminated). Keys this build does not know are
 * left out when writing. */
extern const char *const tr_mfile_keys[];

/* Write cfg's values of tr_mfile_keys as the config text ("key=value\n"
 * lines, lists as [..] flow lists) into out. Returns the length, or
 * SS_E_TOOBIG when out (len bytes) is too small. */
int tr_mfile_cfg_text(const struct ss_cfg *cfg, char *out, size_t len);

/* The dense model's shape from the job: the one home of that rule (the
 * trainer builds its model with it too, tr_train.c). Returns 0, or
 * SS_E_CONFIG when an MLP has more than TR_MODEL_MAX_MLP layers. */
int tr_mfile_model_conf(const struct ss_cfg *cfg, struct tr_model_conf *mc);

/* Hash of a shape, as dense.bin records it (tr_modelset.c calls it). Without
 * first-order terms it covers the fields up to first_order only: the hash of
 * the shape before that field existed, so older dense.bin files still load.
 * portable, precision and gemm (how the products run) do not count. */
uint64_t tr_mfile_shape_hash(const struct tr_model_conf *mc);

/* Bytes of a model file with these counts. */
uint64_t tr_mfile_bytes(const struct tr_mfile_info *info);

/* ------------------------------------------------------------ writing */

typedef struct tr_mfile_writer tr_mfile_writer_t;

/* Start writing path (through PATH.tmp-PID, renamed at commit): the header
 * of info (text_bytes = text_len) and the config text. Returns the writer,
 * or NULL with err naming the file and why. Caller owns it: finish with
 * tr_mfile_writer_commit() or tr_mfile_writer_abort(). Borrows everything. */
tr_mfile_writer_t *tr_mfile_writer_new(const char *path, const struct tr_mfile_info *info,
                                       const char *text, size_t text_len, char *err,
                                       size_t err_len);

/* Append n dense floats (all of them, in one or more calls, before any
 * row). Returns 0, or SS_E_IO / SS_E_NOSPC / SS_E_INVAL (more than
 * n_params) with err. */
int tr_mfile_write_dense(tr_mfile_writer_t *w, const float *v, size_t n, char *err,
                         size_t err_len);

/* Append one row of table (row_dim floats). Returns 0 or an error as above
 * (more rows than n_rows: SS_E_INVAL). */
int tr_mfile_write_row(tr_mfile_writer_t *w, uint32_t table, uint64_t key, const float *row,
                       char *err, size_t err_len);

/* Check that every float and row announced was written, write the
 * trailer, fsync, rename onto path. Frees the writer and sets *w_p to NULL;
 * on failure the temporary file is removed and path is untouched. Returns
 * 0 or an error with err. */
int tr_mfile_writer_commit(tr_mfile_writer_t **w_p, char *err, size_t err_len);

/* Remove the temporary file and free; accepts NULL and *w_p NULL. */
void tr_mfile_writer_abort(tr_mfile_writer_t **w_p);

/* ------------------------------------------------------------ reading */

typedef struct tr_mfile tr_mfile_t;

/* Map path and check it (see the top of this file); the job config is the
 * file's text with sets ("data.KEY=VALUE" only: how the lines to score are
 * laid out, e.g. data.labels=false) applied after it. Returns the model
 * file, or NULL with err ("model.ssm: truncated: 1000 bytes, the header
 * says 4160"). Caller owns it; free with tr_mfile_destroy(). */
tr_mfile_t *tr_mfile_load(const char *path, const char *const *sets, size_t n_sets,
                          char *err, size_t err_len);

/* The same over n bytes at buf, which the caller keeps unchanged until the
 * result is destroyed (name: the file's name for messages). */
tr_mfile_t *tr_mfile_load_mem(const void *buf, size_t n, const char *name,
                              const char *const *sets, size_t n_sets, char *err,
                              size_t err_len);

/* Unmap and free; sets *m_p to NULL; accepts NULL and *m_p NULL. */
void tr_mfile_destroy(tr_mfile_t **m_p);

/* The counts of the header (borrowed, valid while m lives). */
const struct tr_mfile_info *tr_mfile_info(const tr_mfile_t *m);

/* The job config of the file (and the sets), borrowed. */
const struct ss_cfg *tr_mfile_cfg(const tr_mfile_t *m);

/* The dense floats (n_params; 4-byte aligned only), borrowed. */
const float *tr_mfile_dense(const tr_mfile_t *m);

/* The row of (table, key) (row_dim floats), or NULL when the file holds
 * none (it then scores as its initial row). Thread-safe. */
const float *tr_mfile_row(const tr_mfile_t *m, uint32_t table, uint64_t key);

#endif
