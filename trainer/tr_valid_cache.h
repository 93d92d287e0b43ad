/* tr_valid_cache.h - the validation lines kept in memory between scorings.
 *
 * A trainer scores its validation input (the validation side of data.train's
 * split, or the files of data.valid) at every validation, and that input is
 * the same each time. The cache keeps, per scoring reader's part, the lines
 * the reader kept in its first complete pass (bad ones included), each with
 * its file and offset, so that later readers of the part replay them instead
 * of reading and splitting the files: the same lines in the same order, bad
 * lines named at their place. Part i of n belongs to the reader of part
 * (0, i) of 1 x n (tr_reader_use_cache); each part is used by one reader at
 * a time.
 *
 * A part is empty, full, or dropped. It fills during one reader's pass and
 * is full once that pass completed (tr_valid_cache_finish). A part whose
 * lines would take over max_bytes / n is dropped (one INFO log line naming
 * the input) and its readers read the files as before. A part filled by a
 * reader of other files or another byte range (its print) is emptied and
 * filled again.
 *
 * Ownership: the cache is owned by its creator (tr_shared in tr_worker.h);
 * readers borrow it while they live. Thread: a part is touched by the
 * reader that uses it only; new, destroy and tr_valid_cache_bytes while no
 * reader uses the cache. */
#ifndef TR_VALID_CACHE_H
#define TR_VALID_CACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct tr_valid_cache tr_valid_cache_t;

/* Memory the validation lines of one trainer may take (all parts). */
#define TR_VALID_CACHE_BYTES ((size_t)256 << 20)

/* What tr_valid_cache_begin tells a reader to do with its pass. */
enum tr_valid_cache_use {
    TR_VALID_CACHE_FILL = 0,    /* read the files and append the kept lines */
    TR_VALID_CACHE_REPLAY = 1,  /* read the part's lines (tr_valid_cache_line) */
    TR_VALID_CACHE_NONE = 2     /* the part is dropped: read the files only */
};

/* One kept line as a replay gives it. */
struct tr_valid_cache_line {
    const char *bytes;      /* the line, newline excluded; valid while the cache lives */
    size_t len;             /* its length */
    uint32_t file;          /* index of its file in the reader's expanded list */
    uint64_t off;           /* its byte offset in that file */
};

/* An empty cache of n_parts parts (> 0), max_bytes in all, whose log lines
 * name its input as what (e.g. "data.train", "data.valid"; copied, 31
 * characters kept). Caller owns it; free with tr_valid_cache_destroy().
 * Main thread. */
tr_valid_cache_t *tr_valid_cache_new(uint32_t n_parts, size_t max_bytes, const char *what);

/* Free the cache, set *self_p to NULL; accepts NULL. No reader may use it. */
void tr_valid_cache_destroy(tr_valid_cache_t **self_p);

/* Number of parts of the cache. */
uint32_t tr_valid_cache_parts(const tr_valid_cache_t *self);

/* Bytes the cache has allocated for lines and their places (all parts),
 * for tests and logs. */
size_t tr_valid_cache_bytes(const tr_valid_cache_t *self);

/* A reader of part (< n_parts) starts a pass from its part's start; print
 * names its files, sizes and byte range (a part filled under another print
 * is emptied first). Returns what the pass does: FILL (the part was empty;
 * a fill left unfinished before is discarded), REPLAY (full) or NONE
 * (dropped). Part's thread. */
enum tr_valid_cache_use tr_valid_cache_begin(tr_valid_cache_t *self, uint32_t part,
                                             uint64_t print);

/* Filling: append one kept line (borrowed for the call) of file at off.
 * Returns 0, or SS_E_RANGE when the part would go over its bound: the part
 * is then dropped (its memory freed, one log line) and the reader stops
 * filling. Part's thread. */
int tr_valid_cache_append(tr_valid_cache_t *self, uint32_t part, uint32_t file, uint64_t off,
                          const char *line, size_t len);

/* Filling: the pass completed; headers and held_out are the headers and
 * the other side's lines it skipped (counted again by each replay). The
 * part is full. Part's thread. */
void tr_valid_cache_finish(tr_valid_cache_t *self, uint32_t part, uint64_t headers,
                           uint64_t held_out);

/* Filling: the pass will not complete (a seek): the part is emptied. Part's
 * thread. */
void tr_valid_cache_abandon(tr_valid_cache_t *self, uint32_t part);

/* Replay: the line at *pos (0 for the first) into out, *pos moved past it.
 * Returns 1, or 0 at the part's end. Part's thread. */
int tr_valid_cache_line(const tr_valid_cache_t *self, uint32_t part, size_t *pos,
                        struct tr_valid_cache_line *out);

/* Replay: where the line at pos lies (file, off), without moving. Returns 1,
 * or 0 at the part's end. Part's thread. */
int tr_valid_cache_peek(const tr_valid_cache_t *self, uint32_t part, size_t pos,
                        uint32_t *file, uint64_t *off);

/* Replay: how far pos is through the part, 0..1 (1 for an empty part). */
double tr_valid_cache_progress(const tr_valid_cache_t *self, uint32_t part, size_t pos);

/* Replay: the headers and held-out lines of the pass that filled the part. */
void tr_valid_cache_skipped(const tr_valid_cache_t *self, uint32_t part, uint64_t *headers,
                            uint64_t *held_out);

#endif
