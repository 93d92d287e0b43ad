/* ps_embed.h - one shard of every embedding table, with its optimizer state.
 *
 * Rows are keyed by (table, 64-bit key) and materialized on first touch with a
 * deterministic initializer (a function of the job seed, table and key only, so
 * results never depend on arrival order or on the stripe count). Lookups and
 * pushes from many service threads run at once: the map is split into lock
 * stripes by key hash, each an open-addressing table whose rows live in slabs.
 *
 * Capacity policy: the shard stores at most capacity_rows rows over all tables.
 * When it is full, a lookup of an unknown key answers the initializer row
 * without storing it, and a push to an unknown key drops that key's gradient;
 * both count the key in *n_full. Rows already stored keep being served and
 * updated. Rows are never evicted.
 *
 * Optimizers (w: row, g: gradient, acc: state, all float):
 *   SGD              w -= lr * g
 *   Adagrad          acc[i] += g[i]^2;        w[i] -= lr * g[i] / (sqrt(acc[i]) + eps)
 *   rowwise Adagrad  acc += sum_i(g[i]^2) / n; w[i] -= lr * g[i] / (sqrt(acc) + eps)
 * With l2 > 0 every optimizer first replaces g by g + l2 * w (weight decay,
 * applied lazily: only to the rows a push touches, once per push of the row).
 * The accumulators start at init_acc.
 *
 * First-order weights (first_order = 1): the last of a row's dim floats is the
 * row's 1-dim first-order (logistic-regression) weight; the other dim - 1 are
 * the embedding. It starts at 0, and under rowwise Adagrad it has its own
 * accumulator (n = 1) apart from the embedding's (n = dim - 1): its gradient is
 * d loss / d logit itself, typically far larger than an embedding float's, so a
 * shared accumulator would shrink the embedding's steps and blow the weight's
 * step up by about sqrt(dim). Without first_order, n = dim.
 *
 * A stored row is dim weights followed by its state: dim floats (Adagrad),
 * 1 + first_order floats (rowwise) or none (SGD). */
#ifndef PS_EMBED_H
#define PS_EMBED_H

#include <stddef.h>
#include <stdint.h>

typedef struct ps_embed ps_embed_t;

/* Shape and optimizer of a shard (from the tables.* and ps.* config keys). */
struct ps_embed_conf {
    uint32_t n_tables;      /* tables, ids 0..n_tables-1 */
    uint32_t dim;           /* floats per row (same for all tables), first-order weight
                             * included */
    uint32_t first_order;   /* 1: the last float of a row is a first-order weight (dim >= 2) */
    int optimizer;          /* enum ss_opt_kind */
    float lr;               /* learning rate, >= 0 */
    float eps;              /* Adagrad epsilon, >= 0 */
    float init_acc;         /* initial accumulator, >= 0 (eps + init_acc > 0 for Adagrad) */
    float init_scale;       /* new rows uniform in [-init_scale, init_scale), >= 0 */
    float l2;               /* L2 penalty added to a pushed row's gradient, >= 0 */
    uint64_t seed;          /* job seed mixed into the row initializer */
    size_t capacity_rows;   /* most rows this shard holds over all tables, >= 1 */
    uint32_t n_stripes;     /* lock stripes: a power of two in 1..65536 */
};

/* Create an empty shard. Copies conf. Returns the shard (caller owns it, free
 * with ps_embed_destroy()) or NULL with a log line if conf is invalid. */
ps_embed_t *ps_embed_new(const struct ps_embed_conf *conf);

/* Free the shard and every row; sets *self_p to NULL; accepts NULL and
 * *self_p == NULL. No other thread may be using it. */
void ps_embed_destroy(ps_embed_t **self_p);

/* Copy the rows of keys[0..n) of table into rows_out (n * dim floats, row-major;
 * weights only, no optimizer state). Unknown keys are materialized with the
 * initializer; at capacity they get the initializer row without being stored and
 * *n_full is incremented once per such key (n_full may be NULL). Duplicate keys
 * are fine. Returns 0, SS_E_RANGE if table >= n_tables (nothing done), or
 * SS_E_TOOBIG if n >= 2^32. Thread-safe: any number of threads at once.
 * Borrows keys and rows_out. */
int ps_embed_lookup(ps_embed_t *self, uint32_t table, const uint64_t *keys, size_t n,
                    float *rows_out, size_t *n_full);

/* Apply grads (n * dim floats, row-major) to the rows of keys[0..n) of table with
 * the optimizer. Duplicate keys are applied one after another, in call order.
 * Unknown keys are materialized first; at capacity their gradients are dropped
 * and counted in *n_full (which may be NULL). Returns 0, SS_E_RANGE or
 * SS_E_TOOBIG as lookup. Thread-safe like lookup. Borrows keys and grads. */
int ps_embed_push(ps_embed_t *self, uint32_t table, const uint64_t *keys, size_t n,
                  const float *grads, size_t *n_full);

/* Lookup and push of a whole request at once: keys[0..n) are n_groups runs,
 * run i holding counts[i] keys of table tables[i] (n = the sum of counts).
 * Same results as one ps_embed_lookup()/ps_embed_push() per run in order,
 * but the keys of all runs are grouped by stripe together, so each lock is
 * taken once and memory is fetched far ahead (a request spreads few keys
 * over each table). Returns 0; SS_E_RANGE if any table >= n_tables, or
 * SS_E_TOOBIG if n >= 2^32 (nothing done). Thread-safe; borrows everything. */
int ps_embed_lookup_groups(ps_embed_t *self, size_t n_groups, const uint32_t *tables,
                           const uint32_t *counts, const uint64_t *keys, float *rows_out,
                           size_t *n_full);
int ps_embed_push_groups(ps_embed_t *self, size_t n_groups, const uint32_t *tables,
                         const uint32_t *counts, const uint64_t *keys, const float *grads,
                         size_t *n_full);

/* Write the initializer row of (table, key) into row (dim floats) without
 * touching the map: uniform draws, and 0 for a first-order weight. Thread-safe. */
void ps_embed_init_row(const ps_embed_t *self, uint32_t table, uint64_t key, float *row);

/* Copy the stored row of (table, key) with its optimizer state into out
 * (ps_embed_row_floats() floats) without materializing anything. Returns 0,
 * SS_E_NOTFOUND if not stored, SS_E_RANGE for a bad table. Thread-safe. */
int ps_embed_read_row(ps_embed_t *self, uint32_t table, uint64_t key, float *out);

/* Floats in a stored row: dim plus the optimizer state (dim, 1 + first_order
 * or 0). */
size_t ps_embed_row_floats(const ps_embed_t *self);

/* The configuration the shard was created with. */
const struct ps_embed_conf *ps_embed_conf(const ps_embed_t *self);

/* Rows stored now, over all tables. Thread-safe (a snapshot). */
size_t ps_embed_rows(ps_embed_t *self);

/* Bytes allocated for rows, optimizer state and the hash maps. Thread-safe. */
size_t ps_embed_bytes(ps_embed_t *self);

/* Write every row with its optimizer state to path atomically (see ps_ckpt.h),
 * stamped with shard. Safe while other threads look up and push: each stripe is
 * copied under its lock, so every row in the file is a state the row really had
 * (rows created in a stripe after it was copied are not in the file). Needs
 * temporary memory for one stripe's rows. Returns 0 or SS_E_IO (logged, naming
 * path; an older file at path is kept). */
int ps_embed_checkpoint(ps_embed_t *self, const char *path, uint32_t shard);

/* Replace the contents with the checkpoint at path. Checks magic, version, kind,
 * shard, shape (n_tables, dim, optimizer, first_order), record sizes, table ids,
 * duplicate keys and the checksum. Returns 0; SS_E_CORRUPT on any mismatch or truncation;
 * SS_E_IO if unreadable; SS_E_FULL if the file holds more than capacity_rows
 * rows (each logged). On error the contents are unchanged. Call before serving:
 * it is safe against concurrent calls but they may see a partly swapped shard. */
int ps_embed_restore(ps_embed_t *self, const char *path, uint32_t shard);

#endif
