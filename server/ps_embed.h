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
 * updated. capacity_rows never evicts; the three bounds below do.
 *
 * Admission (admit_after >= 2): a key gets a stored row on its admit_after-th
 * push; pushes are what is counted (every looked-up key is pushed right after,
 * so counting lookups too would count each use twice). Before that, lookups
 * answer the initializer row (ps_embed_init_row) without storing or counting
 * anything, and pushes are counted and their gradients dropped (counted in
 * keys_not_admitted). The admitting push creates the row from the initializer
 * and applies its own gradient. With admit_after 0 or 1 every unknown key is
 * stored at its first lookup or push, as before admission existed. Counts live
 * in a count-min sketch per stripe (ps_admit.h): admit_sketch_bytes over all
 * stripes, rounded down to a power of two per stripe and at least 64 bytes per
 * stripe, allocated once, part of ps_embed_bytes(). Collisions can only admit
 * a key early; counts halve periodically (a key must reach admit_after pushes
 * within about admit_sketch_bytes / 8 pushes of unstored keys). Counts are not
 * checkpointed, and a restore clears them: restoring is going back to the
 * save, and a PS started from the save (shadow-ps --restore) has no counts
 * either, so an online RESTORE leaves the shard as that PS would hold it. Kept,
 * they would carry what was pushed after the save into the restored shard: a
 * key admitted after the save (its row gone with the restore) would be
 * admitted again at its next push instead of its admit_after-th.
 *
 * Clock: the shard keeps a clock in whole seconds (below 2^31) that only
 * ps_embed_tick() moves (the PS service ticks it once a second with its
 * uptime; tests tick it by hand). Lookups and pushes stamp the rows they touch
 * with it.
 *
 * Recency (with ttl_s or max_memory_bytes): a lookup or push stamps each row
 * it touches with the clock second, and a lookup also sets the row's CLOCK
 * bit ("used"), both in the row header it reads anyway (no extra cache miss;
 * no write when the stamp is unchanged). Pushes do not set the bit: the
 * trainer pushes every key right after looking it up, so a push would mark
 * every new row used at once and CLOCK would have nothing to choose from (a
 * client that only pushes gets FIFO eviction). Eviction is CLOCK per stripe,
 * an approximate LRU: a hand walks
 * the stripe's rows in index order, clears the bit of a row that has it (a
 * second chance) and evicts the first row without it. A new row starts
 * without the bit, right behind the hand, so it lives at least one turn of
 * the hand. Rows touched since the hand last passed survive rows that were
 * not; among untouched rows the hand's order is the insertion order (the
 * place of an evicted row goes to the row that replaced it). Amortized O(1)
 * per eviction: each lookup sets at most one bit.
 *
 * TTL (ttl_s > 0): a row last touched at clock second t is kept through
 * second t + ttl_s and deleted by second t + ttl_s + max(1, ttl_s / 4) (if
 * ticks come every second): each tick moves a sweep cursor over its share of
 * each stripe's rows, one whole pass per max(1, ttl_s / 4) seconds, one
 * stripe lock at a time, and deletes the expired rows it meets. The CLOCK
 * hand evicts an expired row it meets too. Counted in rows_evicted_ttl.
 *
 * Memory bound (max_memory_bytes > 0): ps_embed_bytes() never exceeds it, at
 * any moment (transient copies while a slot array grows included). What is
 * left after the fixed part (the shard and stripe structs and the admission
 * sketches) is split evenly over the stripes; a stripe that would outgrow its
 * share by storing a new row (a new slab or a larger slot array) instead
 * evicts a row by CLOCK and reuses its place. Stripes are chosen by key hash,
 * so per-stripe eviction approximates a shard-wide one. Counted in
 * rows_evicted_memory (rows_evicted_ttl if the evicted row had expired).
 *
 * Memory layout and ps_embed_bytes(): a row is a 16-byte header (key, table,
 * stamp and CLOCK bit) followed by its floats, its stride rounded up to a
 * multiple of 32 bytes (so a row spans the fewest 64-byte lines its size
 * allows: 92 bytes take 96 and 2 lines, never 3); rows live densely at
 * indices 0..n-1 of a stripe in power-of-two slabs. A shard that never
 * deletes rows (no ttl_s, no max_memory_bytes) carves its slabs and slot
 * arrays (up to 1 MiB each) from one pool of 2 MiB chunks shared by all its
 * stripes, each chunk on a huge page where the system gives them, a new chunk
 * taken only when the last is used up (ps_pool.h): its memory grows in 2 MiB
 * steps as rows are stored, on as few huge pages as it needs, and a small
 * shard touches a few chunks. Its slabs are about 1/256 of a stripe's share
 * of capacity_rows, at least 64 KiB. Other shards allocate each slab and slot
 * array from jemalloc (size classes, so requested bytes are the real bytes),
 * whose freed pages go back to the system. A slot is 8 bytes (32 hash bits, row
 * index) in a linear-probing array of 16..2^32 slots, load at most 3/4;
 * deletion shifts the following entries back (no tombstones). A deleted row's
 * index is refilled at once by the stripe's last row, so rows stay dense and
 * the dense prefix is the free list: the next new row takes index n. An
 * eviction for room hands the evicted index straight to the new row. After
 * deletions a stripe frees all but one spare trailing slab and halves its slot
 * array while it is under 1/8 full, so ps_embed_bytes() goes down (jemalloc
 * returns the pages to the OS later, on its own decay timer).
 * ps_embed_bytes() = the fixed part + slabs + slot arrays + slab tables, plus
 * a pool's idle bytes (its free blocks, old slot arrays kept for reuse, and
 * the rest of its last chunk: a pool gives memory back only with the shard,
 * or whole free chunks after a restore).
 * Per row that is 16 + 4 * row_floats bytes rounded up to 32, plus 10.7-21
 * bytes of slots.
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
 * 1 + first_order floats (rowwise) or none (SGD).
 *
 * Checkpoints hold the live rows only, each stripe's in the order its CLOCK
 * hand meets them (the next victims first). A restore inserts them in file
 * order, stamped with the restoring shard's clock (TTLs restart) and without
 * CLOCK bits, so its hand meets them in the same order. Restore policy for a
 * smaller max_memory_bytes (or more stripes) than the writer had: the rows
 * that do not fit are evicted as they load, the writer's next victims first,
 * with a warning naming the count (kept in rows_evicted_memory); restore never
 * fails for the memory bound. More rows than capacity_rows is still refused
 * (SS_E_FULL).
 *
 * Restore memory: a restore loads the file aside, into a private shard, then
 * swaps it in; until then the process holds both copies. Every allocation
 * of that private shard may fail without harm: then the restore stops, frees
 * what it took, and returns SS_E_NOMEM with an error line naming the file,
 * the bytes it needed (about: ps_embed_restore_need()) and the fixes (more
 * memory, or a PS restarted from the save, which loads it beside an empty
 * shard); the shard is as it was and serves on. A pooled shard gives the
 * whole chunks the attempt took back to the system (ps_pool_trim()), as it
 * gives back the old rows' after a restore.
 * Only allocation failures are caught: where the system overcommits memory,
 * the kernel may end the process first (its OOM killer). */
#ifndef PS_EMBED_H
#define PS_EMBED_H

#include <stddef.h>
#include <stdint.h>

typedef struct ps_embed ps_embed_t;
struct ps_ckpt_who;

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
    uint32_t admit_after;   /* pushes before a key is stored, 0..255; 0 or 1: at once */
    size_t admit_sketch_bytes;  /* admission counters over all stripes (admit_after >= 2) */
    uint32_t ttl_s;         /* delete rows untouched for this many clock seconds; 0 = never */
    size_t max_memory_bytes;    /* bound of ps_embed_bytes(), 0 = none */
};

/* Row churn counters, summed over the stripes. */
struct ps_embed_stats {
    uint64_t rows_admitted;        /* rows created (every new row; with admit_after >= 2
                                    * on their admitting push) */
    uint64_t keys_not_admitted;    /* pushed keys whose gradient was dropped: not yet admitted */
    uint64_t rows_evicted_ttl;     /* rows deleted untouched for ttl_s */
    uint64_t rows_evicted_memory;  /* rows evicted to stay within max_memory_bytes */
};

/* Create an empty shard. Copies conf. Returns the shard (caller owns it, free
 * with ps_embed_destroy()) or NULL with a log line if conf is invalid (this
 * includes a max_memory_bytes too small for one slab and a slot array per
 * stripe). */
ps_embed_t *ps_embed_new(const struct ps_embed_conf *conf);

/* Free the shard and every row; sets *self_p to NULL; accepts NULL and
 * *self_p == NULL. No other thread may be using it. */
void ps_embed_destroy(ps_embed_t **self_p);

/* Copy the rows of keys[0..n) of table into rows_out (n * dim floats, row-major;
 * weights only, no optimizer state), touching them. Unknown keys are
 * materialized with the initializer (admit_after <= 1; with admission they get
 * the initializer row, unstored); at capacity they get the initializer row
 * without being stored and *n_full is incremented once per such key (n_full may
 * be NULL). Duplicate keys are fine. Returns 0, SS_E_RANGE if table >= n_tables
 * (nothing done), or SS_E_TOOBIG if n >= 2^32. Thread-safe: any number of
 * threads at once. Borrows keys and rows_out. */
int ps_embed_lookup(ps_embed_t *self, uint32_t table, const uint64_t *keys, size_t n,
                    float *rows_out, size_t *n_full);

/* Apply grads (n * dim floats, row-major) to the rows of keys[0..n) of table with
 * the optimizer, touching them. Duplicate keys are applied one after another, in
 * call order. Unknown keys are materialized first once admitted (see the top
 * of this file; a not yet admitted key's gradient is dropped and counted in the
 * stats, not in *n_full); at capacity their gradients are dropped and counted in
 * *n_full (which may be NULL). Returns 0, SS_E_RANGE or SS_E_TOOBIG as lookup.
 * Thread-safe like lookup. Borrows keys and grads. */
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

/* The keys of one part of a request: n_groups runs, run i holding counts[i]
 * keys of table tables[i], keys run after run. Borrowed. */
struct ps_embed_groups {
    size_t n_groups;          /* runs */
    const uint32_t *tables;   /* table of each run */
    const uint32_t *counts;   /* keys of each run */
    const uint64_t *keys;     /* the keys of all runs */
};

/* A push then a lookup (a PUSH_LOOKUP request) in one pass: the same results
 * as ps_embed_push_groups(push, grads) then ps_embed_lookup_groups(look,
 * rows_out), but the keys of both are grouped by stripe together, so each
 * stripe lock is taken once and a row pushed then looked up is read from
 * the cache. Keys refused at capacity are added to *n_full_push and
 * *n_full_look (either may be NULL). When the request could take the shard
 * past capacity_rows the two run one after the other (which keys are refused
 * depends on that order). Returns 0, SS_E_RANGE or SS_E_TOOBIG (nothing
 * done). Thread-safe; borrows everything. */
int ps_embed_push_lookup_groups(ps_embed_t *self, const struct ps_embed_groups *push,
                                const float *grads, const struct ps_embed_groups *look,
                                float *rows_out, size_t *n_full_push, size_t *n_full_look);

/* Read-only lookup (scoring: eval, predict): the rows of a request grouped
 * as ps_embed_lookup_groups(), weights only. A stored row is copied as it is;
 * a key without one gets the initializer row. Nothing is stored, stamped,
 * marked used or counted, so scoring leaves the shard exactly as it was
 * (issue 22). Returns 0, SS_E_RANGE or SS_E_TOOBIG as lookup. Thread-safe;
 * borrows everything. */
int ps_embed_peek_groups(ps_embed_t *self, size_t n_groups, const uint32_t *tables,
                         const uint32_t *counts, const uint64_t *keys, float *rows_out);

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

/* Bytes allocated for rows, optimizer state, the hash maps, the admission
 * sketches and the shard's own structs (see the top of this file). At most
 * max_memory_bytes when that is set. Thread-safe. */
size_t ps_embed_bytes(ps_embed_t *self);

/* Row churn counters (a snapshot; each counter is exact, the set is not taken
 * at one instant). Thread-safe. */
void ps_embed_stats(ps_embed_t *self, struct ps_embed_stats *out);

/* Move the shard's clock to now_s seconds (< 2^31; it never goes back: a
 * smaller value is ignored) and, with ttl_s, run the TTL sweep's share for the
 * seconds since the last tick, one stripe lock at a time. Returns the rows
 * deleted. Safe against lookups, pushes and checkpoints; one thread at a time
 * may tick (the PS service's main loop, once a second). */
size_t ps_embed_tick(ps_embed_t *self, uint32_t now_s);

/* Check every internal invariant (slots against rows, probe chains, cursors,
 * byte counts, the memory bound), one stripe lock at a time.
 * For tests and debugging: O(rows). Returns 0, or SS_E_CORRUPT with a log line
 * naming the first broken invariant. Call it while no thread looks up, pushes
 * or ticks, or the shard-wide totals may disagree by what is in flight. */
int ps_embed_verify(ps_embed_t *self);

/* Write every live row with its optimizer state to path atomically (see
 * ps_ckpt.h), stamped with who (shard, shard count, job and save ids) and the
 * key map SS_KEY_SHARD_MAP_ID; each stripe's rows in CLOCK order. Safe
 * while other threads look up and push: each stripe is copied under its lock,
 * so every row in the file is a state the row really had (rows created in a
 * stripe after it was copied are not in the file). Needs temporary memory for
 * one stripe's rows (not counted in ps_embed_bytes()). Returns 0, SS_E_IO or
 * SS_E_NOSPC, or SS_E_NOMEM when that memory cannot be had (logged, naming
 * path; an older file at path is kept). Borrows who. */
int ps_embed_checkpoint(ps_embed_t *self, const char *path, const struct ps_ckpt_who *who);

/* Replace the contents with the checkpoint at path. Checks magic, version, kind,
 * shard, shape (n_tables, dim, optimizer, first_order), record sizes, table ids,
 * duplicate keys and the checksum. Rows beyond max_memory_bytes are evicted
 * while loading, in CLOCK order, with a warning (see the top of this file).
 * Returns 0; SS_E_CORRUPT on any mismatch or truncation; SS_E_IO if
 * unreadable; SS_E_FULL if the file holds more than capacity_rows rows;
 * SS_E_NOMEM if the memory to load it aside cannot be had (see "Restore
 * memory" above; ps_embed_restore_need() gives the bytes) (each logged). On
 * error the contents are unchanged. Admission counts are cleared (see the
 * top of this file). Needs memory for a second
 * shard while loading. Safe while other threads look up, push and tick (a
 * PS restores online on a RESTORE request): the file is loaded aside, then
 * swapped in stripe by stripe, each under its lock. A concurrent request
 * meets each stripe either whole before or whole after; one whose keys span
 * stripes may meet some of each (old rows for some keys, restored rows for
 * others), and a push that lands on a stripe before its swap is lost with
 * the old rows (the shard's row and byte counts stay exact: each stripe's
 * difference is added under its lock). The trainer sends RESTORE only once
 * no worker trains (the last barrier: tr_train.h), so that nothing is in
 * flight. Two restores at
 * once may leave a mix of both files: the PS service serializes them (and
 * its checkpoints) with its checkpoint lock. */
int ps_embed_restore(ps_embed_t *self, const char *path, uint32_t shard);

/* Restore shard `shard` of a job with n_shards embedding shards from the
 * checkpoints in dir (DIR/embedding-K.ckpt, see ps_ckpt_set.h). Written with
 * n_shards shards: ps_embed_restore() of the own file. Written with another
 * count S (re-sharding): every file of the set is read and checked (shape,
 * checksum, and that each row's key maps to its file's shard under S), and
 * exactly the rows whose key maps to `shard` under n_shards are kept with
 * their optimizer state; so the shards of the new job together hold every
 * saved row once. Rows load file by file, each in its CLOCK order; stamps and
 * CLOCK bits restart as for one file. Logs "restored N rows from M files
 * (saved with S shards, this job has T; re-sharded)". Returns 0, or
 * SS_E_NOTFOUND (a file of the set missing), SS_E_CORRUPT, SS_E_IO, SS_E_FULL
 * (the kept rows exceed capacity_rows), SS_E_NOMEM (as ps_embed_restore()),
 * each logged naming the file and the fix; on error the contents are
 * unchanged. Same threading as
 * ps_embed_restore(). Borrows dir. */
int ps_embed_restore_dir(ps_embed_t *self, const char *dir, uint32_t shard, uint32_t n_shards);

/* About the bytes the last ps_embed_restore() or ps_embed_restore_dir()
 * needed to load its rows aside when it failed with SS_E_NOMEM (a
 * re-sharding one: for about 1/n_shards of the set's rows); 0 when the last
 * one did not fail for memory. For the error a PS answers. Same thread as the
 * restores. */
size_t ps_embed_restore_need(ps_embed_t *self);

#endif
