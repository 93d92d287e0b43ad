/* tr_reader.h - input files: file lists, byte-range splits, reading parsed batches.
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
 * Lines are parsed by tr_parse.h in the layout of data.* (Criteo TSV by
 * default). Bad lines (see tr_parse.h; also lines longer than
 * TR_READER_MAX_LINE bytes) are skipped and counted; the first one is kept
 * with its place and why it is bad (tr_reader_first_bad), so that the
 * trainer can name it when a run has too many. With csv, the first line of
 * each file may be a header (tr_parse_is_header): it is skipped and
 * counted apart.
 *
 * Standard input: the name "-" (TR_READER_STDIN), the only input then, reads
 * the process's standard input (a pipe or a file) once, streaming: it cannot
 * be cut into byte ranges, so part 0 reads all of it and every other part is
 * empty; it is never rewound (scoring reads its input once) and cannot be
 * trained on (tr_reader_total_bytes refuses it).
 *
 * Thread: a reader is used by one thread at a time. Readers share nothing,
 * so each worker thread opens its own (own file descriptor and buffer). */
#ifndef TR_READER_H
#define TR_READER_H

#include <stddef.h>
#include <stdint.h>

#include "ss_cfg.h"
#include "tr_parse.h"
#include "tr_split.h"
#include "tr_valid_cache.h"

/* Read buffer per reader; also the longest line accepted (longer lines are
 * counted as bad and skipped). */
#define TR_READER_BUF_BYTES (4u << 20)
#define TR_READER_MAX_LINE TR_READER_BUF_BYTES

/* The most lines of a part whose split verdicts a reader keeps
 * (tr_reader_set_split): 32 MiB of marks. */
#define TR_READER_MARKS_MAX ((size_t)16 << 20)

/* The input name that stands for standard input. */
#define TR_READER_STDIN "-"

typedef struct tr_reader tr_reader_t;

/* Counters of one reader, cumulative since tr_reader_new (they keep
 * counting across tr_reader_rewind). */
struct tr_reader_stats {
    uint64_t lines;         /* lines seen: good, bad and headers (held_out apart) */
    uint64_t bad_lines;     /* lines skipped as malformed */
    uint64_t headers;       /* csv header lines skipped */
    uint64_t bytes_read;    /* bytes read from the files */
    uint64_t part_bytes;    /* size of this part's byte range */
    uint64_t rewinds;       /* completed tr_reader_rewind calls (epochs) */
    uint64_t held_out;      /* lines of the other side of a split (tr_reader_set_split),
                             * skipped unparsed and not in lines */
};

/* The first bad line a reader met. */
struct tr_reader_bad {
    char path[1024];        /* its file, as expanded from the patterns */
    uint64_t offset;        /* byte offset of the line in the file */
    uint64_t global;        /* offset in the concatenation of all files (orders the
                             * bad lines of different parts) */
    char why[384];          /* what was expected and found (tr_parse_explain) */
};

/* Expand patterns (file names or glob(3) patterns, brace expansion on) and
 * open the part of (rank, worker) among n_ranks * n_workers parts, to be
 * parsed in data's layout (NULL: Criteo TSV; data is copied). Every
 * named file is checked to be a readable regular file. On failure returns
 * NULL and writes a message naming the file or pattern into err (if err is
 * not NULL), e.g. "cannot open 'a.tsv': No such file or directory" or
 * "no file matches 'day_*.tsv'". Caller owns the reader; free it with
 * tr_reader_destroy(). Borrows patterns for the call only. Any thread. */
tr_reader_t *tr_reader_new(const struct ss_data_cfg *data, const char *const *patterns,
                           size_t n_patterns, uint32_t rank,
                           uint32_t n_ranks, uint32_t worker, uint32_t n_workers,
                           char *err, size_t err_len);

/* Close and free the reader, set *self_p to NULL. Accepts NULL and *self_p
 * NULL. Owning thread. */
void tr_reader_destroy(tr_reader_t **self_p);

/* Parse the next good line of the part into ex; the reader's layout must be
 * Criteo TSV (tools and tests). Returns 1 (ex filled), 0 at the end of the
 * part, or SS_E_IO when a file cannot be opened or read (tr_reader_error()
 * has the text; the error is sticky until rewind). Owning thread. */
int tr_reader_next(tr_reader_t *self, struct tr_example *ex);

/* Clear rows (shaped for the reader's layout: tr_rows_init with its n_dense
 * and n_fields) and fill it with up to min(max, rows->max) examples.
 * Returns the number filled (0 only at the end of the part), or SS_E_IO if
 * an error happens before any example was filled (examples filled before
 * an error are returned first; the next call reports it). Owning thread. */
int tr_reader_read(tr_reader_t *self, struct tr_rows *rows, size_t max);

/* Keep, from now on, how many bad lines each row of a tr_reader_read()
 * followed: what lets a scorer write one output line per input line in
 * order (batch prediction). Costs a few bytes per batch row. Owning thread. */
void tr_reader_keep_gaps(tr_reader_t *self);

/* After tr_reader_read() returned n rows (tr_reader_keep_gaps on): entry i,
 * i < n, is the number of bad lines (headers not counted) between row i's
 * line and the good line before it in the part (or the part's start);
 * saturates at UINT32_MAX. Bad lines after the part's last good row are in
 * no entry: the reader's bad_lines count minus the sum of all entries. Valid
 * until the next read. Owning thread. */
const uint32_t *tr_reader_gaps(const tr_reader_t *self);

/* Keep only one side of split (copied) from now on: the other side's lines
 * are skipped before parsing and counted in held_out, not in lines (a bad
 * line is counted bad by the side it belongs to). Headers are skipped
 * first. A reader that reads its whole part from its start (after new or a
 * rewind, no seek since) keeps each line's verdict with the low bits of
 * the offset where the line ends (2 bytes a line, up to TR_READER_MARKS_MAX
 * lines), and its next passes from the start take the verdicts from there
 * instead of hashing again, as long as each line ends where the marked one
 * did (else it drops them and hashes from there on). Owning thread, before the first read. */
void tr_reader_set_split(tr_reader_t *self, const struct tr_split *split,
                         enum tr_split_side side);

/* Let the reader use part `part` of cache (tr_valid_cache.h; borrowed
 * while the reader lives): each pass from its part's start reads the part
 * when it is full and was filled from the same files and byte range, else
 * fills it (a part dropped over its bound: reads the files only). The
 * reader keeps the validation side of a split (tr_reader_set_split before
 * this) or has no split (data.valid) and reads a part of 1 x n; standard
 * input uses no cache (it is read once). A seek stops its use of the cache. The lines, their
 * order, the counts at a pass's end and the first bad line are those of the
 * files (bytes_read apart: a replay reads none). Owning thread, before the
 * first read. */
void tr_reader_use_cache(tr_reader_t *self, tr_valid_cache_t *cache, uint32_t part);

/* Whether the reader reads its lines from the cache (1) or the files (0). */
int tr_reader_from_cache(const tr_reader_t *self);

/* Go back to the start of the part (next epoch) and clear a sticky error.
 * Returns 0. Owning thread. */
int tr_reader_rewind(tr_reader_t *self);

/* Where the part's next line starts, as a byte offset in the concatenation
 * of all files: the reader's place, to be given back to tr_reader_seek() by
 * a reader of the same part (a resumed job). TR_READER_POS_END when the part
 * is used up. A reader that has read nothing since new or rewind is at its
 * part's start. Owning thread, between reads. */
#define TR_READER_POS_END UINT64_MAX
uint64_t tr_reader_tell(const tr_reader_t *self);

/* How far the reader is through its part in this pass, 0..1: the bytes of
 * the part before the next unread line over the part's size (0 before the
 * first read of a pass, 1 once the part is used up). Owning thread. */
double tr_reader_progress(const tr_reader_t *self);

/* Go to pos, a value tr_reader_tell() returned for this part (the same files
 * and split): the next read returns the line that starts there. Returns 0,
 * SS_E_RANGE when pos lies outside the part, or SS_E_IO (the file cannot be
 * opened; tr_reader_error() says which). Owning thread. */
int tr_reader_seek(tr_reader_t *self, uint64_t pos);

/* Copy the counters into st. Any thread: the owner updates them as it goes
 * (relaxed atomics), so they are exact at every moment, up to the line
 * being parsed. */
void tr_reader_stats(const tr_reader_t *self, struct tr_reader_stats *st);

/* Copy the first bad line met since tr_reader_new into out. Returns 1, or 0
 * when there was none. Owning thread (or any thread after it joined). */
int tr_reader_first_bad(const tr_reader_t *self, struct tr_reader_bad *out);

/* The 1-based number of the line that starts at byte offset of path
 * (newlines before it, plus one): reads the file up to offset. Returns 0
 * with *line set, or SS_E_IO. Any thread. */
int tr_reader_line_number(const char *path, uint64_t offset, uint64_t *line);

/* Text of the last SS_E_IO from tr_reader_next ("" if none); valid until the
 * next call on the reader. Owning thread. */
const char *tr_reader_error(const tr_reader_t *self);

/* Total bytes of all files the patterns name (for progress and ETA).
 * Returns the sum (>= 0), or SS_E_NOTFOUND (a file is missing or a pattern
 * matches nothing) or SS_E_IO (not readable, not a regular file), with a
 * message in err. Any thread. */
int64_t tr_reader_total_bytes(const char *const *patterns, size_t n_patterns, char *err,
                              size_t err_len);

/* Check patterns as tr_reader_new() expands them, without reading a line:
 * every named file there and a readable regular file, every glob matching
 * one; "-" (standard input) only alone, and only when stdin_ok (scoring).
 * For launchers, before any process starts (shadow-ctl check-data). Returns
 * 0, or SS_E_NOTFOUND, SS_E_IO or SS_E_INVAL with a message in err naming
 * the file or pattern. Borrows patterns. Any thread. */
int tr_reader_check_inputs(const char *const *patterns, size_t n_patterns, int stdin_ok,
                           char *err, size_t err_len);

#endif
