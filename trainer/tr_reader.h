/* tr_reader.h - Criteo TSV input: file lists, byte-range splits, parsing.
 *
 * A job's input is a list of files and glob patterns, taken in order (the
 * matches of one pattern sorted by name). Their concatenation is cut by bytes
 * into n_ranks * n_workers equal parts; part (rank * n_workers + worker) owns
 * every line whose FIRST byte lies in its range [start, end) (the Hadoop
 * rule: a part that starts mid-line skips to the next line start, and the
 * last line that starts before `end` is read through its newline). Each line
 * of every file is therefore read by exactly one part, for any file sizes
 * and part counts. A file boundary always ends a line, with or without a
 * trailing newline.
 *
 * Line format: label, I1..I13, C1..C26, separated by tabs (40 fields).
 * Empty fields are missing values; lines with 2..39 fields read the missing
 * trailing fields as empty (some copies strip trailing tabs); a trailing CR
 * is ignored. Preprocessing:
 *   - label "0" or "1" -> 0.0f / 1.0f;
 *   - dense I_j: an integer v -> log(1 + max(v, 0)) as float; empty -> 0;
 *   - categorical C_f (f = 0..25): the key is ss_key_make(f, raw), where raw
 *     comes from the value's bytes in one of three disjoint ranges, so that
 *     two different strings never share a raw value (up to 62-bit hash
 *     collisions) and the empty field has a raw value no string can reach:
 *       exactly 8 lowercase hex digits (Criteo): the number, in [0, 2^32);
 *       any other nonempty string (other lengths, upper case, "0a" vs "a"):
 *         TR_READER_HASHED_RAW | (ss_hash_bytes(value, len, 0) >> 2),
 *         in [2^62, 2^63);
 *       the empty value (also missing trailing fields): TR_READER_MISSING_RAW.
 *     For a fixed table ss_key_make is a bijection of raw (key 0 is folded
 *     into 1; no field's empty key is 1, test_tr_reader checks), so distinct
 *     strings give distinct keys within a field and no string gives the
 *     empty field's key. Lowercase 8-hex values and empty fields keep the
 *     keys of earlier versions (checkpointed rows stay valid); other values
 *     got new keys when the three ranges were introduced.
 * Bad lines (label not 0/1, a dense field that is not an integer, more than
 * 40 or fewer than 2 fields, longer than TR_READER_MAX_LINE bytes) are
 * skipped and counted, never fatal.
 *
 * Thread: a reader is used by one thread at a time. Readers share nothing,
 * so each worker thread opens its own (own file descriptor and buffer). */
#ifndef TR_READER_H
#define TR_READER_H

#include <stddef.h>
#include <stdint.h>

#define TR_N_DENSE 13
#define TR_N_SPARSE 26
#define TR_N_FIELDS (1 + TR_N_DENSE + TR_N_SPARSE)

/* Raw value that stands for an empty categorical field: outside both value
 * ranges (8 hex digits: below 2^32; hashed: [2^62, 2^63)). */
#define TR_READER_MISSING_RAW 0xFFFFFFFFFFFFFFFFull

/* Bit set in the raw value of every hashed (not 8-lowercase-hex) value. */
#define TR_READER_HASHED_RAW (1ull << 62)

/* Read buffer per reader; also the longest line accepted (longer lines are
 * counted as bad and skipped). */
#define TR_READER_BUF_BYTES (4u << 20)
#define TR_READER_MAX_LINE TR_READER_BUF_BYTES

/* One parsed example. */
struct tr_example {
    float label;                    /* 0.0f or 1.0f */
    float dense[TR_N_DENSE];        /* log(1 + max(I_j, 0)); 0 when missing */
    uint64_t keys[TR_N_SPARSE];     /* ss_key_make(field, raw value) */
};

typedef struct tr_reader tr_reader_t;

/* Counters of one reader, cumulative since tr_reader_new (they keep
 * counting across tr_reader_rewind). */
struct tr_reader_stats {
    uint64_t lines;         /* lines seen, good and bad */
    uint64_t bad_lines;     /* lines skipped as malformed */
    uint64_t bytes_read;    /* bytes read from the files */
    uint64_t part_bytes;    /* size of this part's byte range */
    uint64_t rewinds;       /* completed tr_reader_rewind calls (epochs) */
};

/* Expand patterns (file names or glob(3) patterns, brace expansion on) and
 * open the part of (rank, worker) among n_ranks * n_workers parts. Every
 * named file is checked to be a readable regular file. On failure returns
 * NULL and writes a message naming the file or pattern into err (if err is
 * not NULL), e.g. "cannot open 'a.tsv': No such file or directory" or
 * "no file matches 'day_*.tsv'". Caller owns the reader; free it with
 * tr_reader_destroy(). Borrows patterns for the call only. Any thread. */
tr_reader_t *tr_reader_new(const char *const *patterns, size_t n_patterns, uint32_t rank,
                           uint32_t n_ranks, uint32_t worker, uint32_t n_workers,
                           char *err, size_t err_len);

/* Close and free the reader, set *self_p to NULL. Accepts NULL and *self_p
 * NULL. Owning thread. */
void tr_reader_destroy(tr_reader_t **self_p);

/* Parse the next good line of the part into ex. Returns 1 (ex filled), 0 at
 * the end of the part, or SS_E_IO when a file cannot be opened or read
 * (tr_reader_error() has the text; the error is sticky until rewind).
 * Owning thread. */
int tr_reader_next(tr_reader_t *self, struct tr_example *ex);

/* Fill up to max (at most INT_MAX) examples into ex[0..max). Returns the
 * number filled (0 only at the end of the part), or SS_E_IO if an error
 * happens before any example was filled (examples filled before an error
 * are returned first; the next call reports it). Owning thread. */
int tr_reader_batch(tr_reader_t *self, struct tr_example *ex, size_t max);

/* Go back to the start of the part (next epoch) and clear a sticky error.
 * Returns 0. Owning thread. */
int tr_reader_rewind(tr_reader_t *self);

/* Copy the counters into st. Owning thread (the counters are not atomic). */
void tr_reader_stats(const tr_reader_t *self, struct tr_reader_stats *st);

/* Text of the last SS_E_IO from tr_reader_next ("" if none); valid until the
 * next call on the reader. Owning thread. */
const char *tr_reader_error(const tr_reader_t *self);

/* Total bytes of all files the patterns name (for progress and ETA).
 * Returns the sum (>= 0), or SS_E_NOTFOUND (a file is missing or a pattern
 * matches nothing) or SS_E_IO (not readable, not a regular file), with a
 * message in err. Any thread. */
int64_t tr_reader_total_bytes(const char *const *patterns, size_t n_patterns, char *err,
                              size_t err_len);

/* Parse one line (len bytes, no newline; a trailing CR is ignored) into ex.
 * Returns 0, or SS_E_PROTO for a bad line (ex is then unspecified).
 * Exposed for tests and tools. Thread-safe. */
int tr_reader_parse_line(const char *line, size_t len, struct tr_example *ex);

#endif
