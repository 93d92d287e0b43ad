/* tr_reader.c - input files: file lists, byte-range splits, reading parsed batches.
 *
 * DESIGN: the file list (paths, sizes, offsets in the concatenation) is
 * expanded once per reader, so readers share no state. A part is a global
 * byte range [start, end); for each file it intersects, the reader seeks to
 * one byte before the local start and discards through the first newline
 * (if that byte is itself a newline, the line starting exactly at the local
 * start is kept), then returns lines while their first byte is before the
 * local end, reading the last one through its newline or the end of the
 * file. Reads go into one large buffer per reader (4 MiB, or the part size
 * plus 64 KiB for small parts, grown on demand for long lines); a line is
 * handed to the parser in place (no copy) unless it straddles two reads, in
 * which case the tail of the buffer is moved to the front first. The
 * counters the main thread reads while a worker runs (lines, bad lines,
 * headers, bytes) are relaxed atomics with this reader as their only
 * writer: a plain store on x86, and exact whenever read.
 *
 * With a split, the verdict of a line costs a byte hash; three things keep
 * it cheap, each only where it gives the hash's own answer: lines are
 * hashed four at a time with the next complete lines of the buffer
 * (s_verdict, verdicts kept by file offset and length); a whole pass from
 * the part's start marks each verdict with where its line ends, and later
 * passes from the start read the marks while the ends agree
 * (s_marked_verdict); a validation-side reader with a tr_valid_cache part
 * keeps its kept lines and later readers replay them (s_replay_line). The
 * same cache serves readers with no split (data.valid): the pass that fills
 * it and the replays differ from a plain pass only in where the bytes come
 * from. */
#include "tr_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"

/* Read no further than this past the end of the part in one read(). */
#define S_READ_SLACK (64u << 10)

/* The size standard input counts as: endless (its part never ends before
 * the data), far from overflowing an offset. */
#define S_STDIN_BYTES (UINT64_MAX / 4)

/* One input file. */
struct s_file {
    char *path;         /* owned copy of the file name */
    uint64_t size;      /* bytes, from fstat at expansion time */
    uint64_t off;       /* offset of the file in the concatenation */
};

/* The expanded, ordered input. */
struct s_files {
    struct s_file *v;   /* files in order */
    size_t n;           /* number of files */
    size_t cap;         /* allocated entries */
    uint64_t total;     /* sum of sizes */
};

/* Counters written by the owner, read by any thread. */
struct s_counts {
    atomic_uint_fast64_t lines;       /* lines seen */
    atomic_uint_fast64_t bad_lines;   /* bad lines */
    atomic_uint_fast64_t headers;     /* headers skipped */
    atomic_uint_fast64_t bytes_read;  /* bytes read */
    atomic_uint_fast64_t rewinds;     /* completed rewinds */
    atomic_uint_fast64_t held_out;    /* lines of the other side of the split */
};

/* Split verdicts of the lines after the one last judged, hashed with it
 * (tr_split_is_valid4), each kept with the file offset and length of its
 * line: a verdict is used only for the line that starts there in the same
 * open file, with the same length; anything else hashes again. */
struct s_ahead {
    uint64_t off[TR_SPLIT_LANES - 1];   /* offset of the line in the open file */
    size_t len[TR_SPLIT_LANES - 1];     /* its length, newline excluded */
    int valid[TR_SPLIT_LANES - 1];      /* its verdict */
    int head;                           /* next entry to use */
    int n;                              /* entries filled */
};

/* What a reader's marks are. */
enum { S_MARKS_RECORD = 0, S_MARKS_FULL = 1, S_MARKS_OFF = 2 };

struct tr_reader {
    struct ss_data_cfg data;    /* the layout, own copy */
    struct s_files files;       /* the whole input, own copy */
    uint64_t start;             /* global byte range of this part: first byte */
    uint64_t end;               /* one past the last byte */
    size_t cur;                 /* index of the file open or to open next */
    int fd;                     /* open file, or -1 */
    uint64_t line_end;          /* lines starting at or after this local offset are not ours */
    uint64_t buf_off;           /* file offset of buf[0] */
    char *buf;                  /* read buffer, cap bytes */
    size_t cap;                 /* buffer size: grows up to TR_READER_BUF_BYTES */
    size_t len;                 /* valid bytes in buf */
    size_t pos;                 /* next unconsumed byte in buf */
    bool at_eof;                /* read() returned 0 for the open file */
    bool skipping;              /* discarding bytes through the next newline */
    bool skip_is_bad;           /* the discarded bytes are an over-long line */
    uint64_t line_off;          /* file offset of the line last returned or skipped */
    int err_rc;                 /* sticky error from tr_reader_next, or 0 */
    uint64_t part_bytes;        /* size of the part, bytes */
    struct s_counts counts;     /* lines, bad lines, headers, bytes, rewinds */
    int have_bad;               /* first_bad holds the first bad line */
    struct tr_reader_bad first_bad; /* the first bad line met */
    char err[512];              /* text of err_rc */
    uint32_t *gaps;             /* tr_reader_keep_gaps: bad lines before each row of the
                                 * last tr_reader_read, or NULL: not kept */
    size_t gaps_cap;            /* entries of gaps */
    uint64_t bad_pending;       /* bad lines since the last good row (for gaps) */
    struct tr_split split;      /* tr_reader_set_split: the validation split, or none */
    int keep_valid;             /* keep its validation side (else its training side) */
    struct s_ahead ahead;       /* verdicts of the next lines of the open file, or none */
    uint16_t *marks;            /* verdicts of a whole pass from the start: the low 15 bits
                                 * of the offset where each judged line ends << 1 | its
                                 * verdict */
    size_t n_marks;             /* entries of marks */
    size_t cap_marks;           /* entries allocated */
    size_t ord;                 /* judged lines of this pass so far */
    int from_start;             /* this pass began at the part's start (no seek) */
    int marks_state;            /* S_MARKS_*: recording, full (to use), off */
    tr_valid_cache_t *cache;    /* tr_reader_use_cache: the cache (borrowed), or NULL */
    uint32_t cpart;             /* the reader's part of cache */
    int filling;                /* this pass appends its kept lines to the part */
    int replay;                 /* the lines come from the part, not the files */
    size_t rpos;                /* replay: where the next line is in the part */
    int replay_done;            /* replay: the pass's end was counted */
    uint64_t fill_headers;      /* filling: headers before the pass */
    uint64_t fill_held_out;     /* filling: held_out before the pass */
};

/* Add n to a counter only this reader writes: no read-modify-write needed. */
static inline void s_add(atomic_uint_fast64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* Write a formatted message into err if the caller gave a buffer. */
__attribute__((format(printf, 3, 4)))
static void s_err(char *err, size_t err_len, const char *fmt, ...)
{
    if (!err || err_len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

/* Thread-safe strerror (GNU strerror_r returns the text). */
static const char *s_strerror(int e, char *buf, size_t len)
{
    return strerror_r(e, buf, len);
}

static void s_files_free(struct s_files *fl)
{
    for (size_t i = 0; i < fl->n; i++)
        ss_free(fl->v[i].path);
    ss_free(fl->v);
    memset(fl, 0, sizeof(*fl));
}

/* Append path of size bytes to fl. Returns 0. */
static int s_files_push(struct s_files *fl, const char *path, uint64_t size)
{
    if (fl->n == fl->cap) {
        fl->cap = fl->cap ? fl->cap * 2 : 16;
        fl->v = ss_realloc(fl->v, fl->cap * sizeof(*fl->v));
    }
    struct s_file *f = &fl->v[fl->n++];
    f->path = ss_strdup(path);
    f->size = size;
    f->off = fl->total;
    fl->total += f->size;
    return 0;
}

/* Check that path is a readable regular file and append it with its size.
 * Returns 0, SS_E_NOTFOUND (missing) or SS_E_IO (other failures). */
static int s_files_add(struct s_files *fl, const char *path, char *err, size_t err_len)
{
    if (strcmp(path, TR_READER_STDIN) == 0)
        return s_files_push(fl, path, S_STDIN_BYTES);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        char eb[128];
        s_err(err, err_len, "cannot open '%s': %s", path, s_strerror(e, eb, sizeof(eb)));
        return e == ENOENT || e == ENOTDIR ? SS_E_NOTFOUND : SS_E_IO;
    }
    struct stat sb;
    int rc = fstat(fd, &sb);
    int e = errno;
    close(fd);
    if (rc != 0) {
        char eb[128];
        s_err(err, err_len, "cannot stat '%s': %s", path, s_strerror(e, eb, sizeof(eb)));
        return SS_E_IO;
    }
    if (!S_ISREG(sb.st_mode)) {
        s_err(err, err_len, "cannot read '%s': not a regular file", path);
        return SS_E_IO;
    }
    return s_files_push(fl, path, (uint64_t)sb.st_size);
}

/* Expand one glob pattern (matches sorted by glob) into fl. */
static int s_files_glob(struct s_files *fl, const char *pattern, char *err, size_t err_len)
{
    glob_t g;
    int grc = glob(pattern, GLOB_BRACE, NULL, &g);
    if (grc == GLOB_NOMATCH) {
        s_err(err, err_len, "no file matches '%s'", pattern);
        return SS_E_NOTFOUND;
    }
    if (grc != 0) {
        s_err(err, err_len, "cannot expand '%s': %s", pattern,
              grc == GLOB_NOSPACE ? "out of memory" : "read error");
        return SS_E_IO;
    }
    int rc = 0;
    for (size_t i = 0; i < g.gl_pathc && rc == 0; i++)
        rc = s_files_add(fl, g.gl_pathv[i], err, err_len);
    globfree(&g);
    return rc;
}

/* 1 when fl holds standard input (then it is fl's only file). */
static bool s_is_stdin(const struct s_files *fl)
{
    for (size_t i = 0; i < fl->n; i++)
        if (strcmp(fl->v[i].path, TR_READER_STDIN) == 0)
            return true;
    return false;
}

/* Expand all patterns in order. A name without glob characters is taken
 * literally, so a missing file is reported as such. */
static int s_files_expand(struct s_files *fl, const char *const *patterns, size_t n_patterns,
                          char *err, size_t err_len)
{
    ss_assert(patterns || n_patterns == 0);
    memset(fl, 0, sizeof(*fl));
    if (n_patterns == 0) {
        s_err(err, err_len, "no input files given");
        return SS_E_INVAL;
    }
    for (size_t i = 0; i < n_patterns; i++) {
        ss_assert(patterns[i]);
        int rc;
        if (patterns[i][0] == '\0') {
            s_err(err, err_len, "empty input file name");
            rc = SS_E_INVAL;
        } else if (strpbrk(patterns[i], "*?[{")) {
            rc = s_files_glob(fl, patterns[i], err, err_len);
        } else {
            rc = s_files_add(fl, patterns[i], err, err_len);
        }
        if (rc == 0 && fl->n > 1 && s_is_stdin(fl)) {
            s_err(err, err_len, "standard input ('-') must be the only input file");
            rc = SS_E_INVAL;
        }
        if (rc != 0) {
            s_files_free(fl);
            return rc;
        }
    }
    return 0;
}

int64_t tr_reader_total_bytes(const char *const *patterns, size_t n_patterns, char *err,
                              size_t err_len)
{
    struct s_files fl;
    int rc = s_files_expand(&fl, patterns, n_patterns, err, err_len);
    if (rc != 0)
        return rc;
    int64_t total = (int64_t)fl.total;
    if (s_is_stdin(&fl)) {
        s_err(err, err_len, "standard input ('-') can be scored (data.eval, --predict), not "
              "trained on");
        total = SS_E_INVAL;
    }
    s_files_free(&fl);
    return total;
}

int tr_reader_check_inputs(const char *const *patterns, size_t n_patterns, int stdin_ok,
                           char *err, size_t err_len)
{
    struct s_files fl;
    int rc = s_files_expand(&fl, patterns, n_patterns, err, err_len);
    if (rc != 0)
        return rc;
    if (!stdin_ok && s_is_stdin(&fl)) {
        s_err(err, err_len, "standard input ('-') can be scored (data.eval, --predict), not "
              "trained on");
        rc = SS_E_INVAL;
    }
    s_files_free(&fl);
    return rc;
}

/* Byte offset where part idx of n_parts starts: floor(total * idx / n). */
static uint64_t s_part_edge(uint64_t total, uint64_t idx, uint64_t n_parts)
{
    return (uint64_t)((unsigned __int128)total * idx / n_parts);
}

tr_reader_t *tr_reader_new(const struct ss_data_cfg *data, const char *const *patterns,
                           size_t n_patterns, uint32_t rank, uint32_t n_ranks, uint32_t worker,
                           uint32_t n_workers, char *err, size_t err_len)
{
    if (n_ranks == 0 || n_workers == 0 || rank >= n_ranks || worker >= n_workers) {
        s_err(err, err_len, "bad split: rank %u of %u, worker %u of %u", rank, n_ranks,
              worker, n_workers);
        return NULL;
    }
    struct s_files fl;
    if (s_files_expand(&fl, patterns, n_patterns, err, err_len) != 0)
        return NULL;
    tr_reader_t *self = ss_calloc(1, sizeof(*self));
    if (data)
        self->data = *data;
    else
        tr_parse_criteo_layout(&self->data);
    self->files = fl;
    uint64_t n_parts = (uint64_t)n_ranks * n_workers;
    uint64_t idx = (uint64_t)rank * n_workers + worker;
    self->start = s_part_edge(fl.total, idx, n_parts);
    self->end = s_part_edge(fl.total, idx + 1, n_parts);
    if (s_is_stdin(&fl)) {  /* a pipe cannot be cut: part 0 reads it all */
        self->start = idx ? fl.total : 0;
        self->end = fl.total;
    }
    self->part_bytes = self->end - self->start;
    self->fd = -1;
    self->from_start = 1;
    /* Small parts start with a small buffer; it grows for long lines. */
    self->cap = TR_READER_BUF_BYTES;
    if (self->part_bytes + S_READ_SLACK < self->cap)
        self->cap = (size_t)self->part_bytes + S_READ_SLACK;
    self->buf = ss_malloc(self->cap);
    if (err && err_len)
        err[0] = '\0';
    return self;
}

static void s_close(tr_reader_t *self)
{
    if (self->fd >= 0)
        close(self->fd);
    self->fd = -1;
    self->len = 0;
    self->pos = 0;
    self->skipping = false;
    self->ahead.n = self->ahead.head = 0;  /* its offsets were of that file */
}

void tr_reader_destroy(tr_reader_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    tr_reader_t *self = *self_p;
    s_close(self);
    s_files_free(&self->files);
    ss_free(self->buf);
    ss_free(self->gaps);
    ss_free(self->marks);
    ss_free(self);
    *self_p = NULL;
}

/* Record a sticky I/O error about the current file. */
static int s_fail(tr_reader_t *self, const char *what, int e)
{
    char eb[128];
    snprintf(self->err, sizeof(self->err), "cannot %s '%s': %s", what,
             self->files.v[self->cur].path, s_strerror(e, eb, sizeof(eb)));
    self->err_rc = SS_E_IO;
    s_close(self);
    return SS_E_IO;
}

/* Open the next file that holds line starts of this part and position it.
 * Returns 1 (opened), 0 (no more files in the part) or SS_E_IO. */
static int s_open_next(tr_reader_t *self)
{
    for (; self->cur < self->files.n; self->cur++) {
        const struct s_file *f = &self->files.v[self->cur];
        if (f->off >= self->end)
            return 0;
        if (f->size == 0 || f->off + f->size <= self->start)
            continue;
        uint64_t ls = self->start > f->off ? self->start - f->off : 0;
        uint64_t le = (self->end < f->off + f->size ? self->end : f->off + f->size) - f->off;
        if (strcmp(f->path, TR_READER_STDIN) == 0)
            self->fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0);
        else
            self->fd = open(f->path, O_RDONLY | O_CLOEXEC);
        if (self->fd < 0)
            return s_fail(self, "open", errno);
        (void)posix_fadvise(self->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        self->buf_off = 0;
        self->skipping = false;
        if (ls > 0) {
            /* Keep the line at ls only if the byte before it ends a line. */
            if (lseek(self->fd, (off_t)(ls - 1), SEEK_SET) < 0)
                return s_fail(self, "seek in", errno);
            self->buf_off = ls - 1;
            self->skipping = true;
            self->skip_is_bad = false;
        }
        self->line_end = le;
        self->len = 0;
        self->pos = 0;
        self->at_eof = false;
        return 1;
    }
    return 0;
}

/* Append bytes from the open file to buf. Returns 0 or SS_E_IO. Reads
 * little beyond the part so that small parts stay cheap. */
static int s_fill(tr_reader_t *self)
{
    size_t want = self->cap - self->len;
    uint64_t file_pos = self->buf_off + self->len;
    uint64_t left = self->line_end > file_pos ? self->line_end - file_pos : 0;
    if (left + S_READ_SLACK < want)
        want = (size_t)left + S_READ_SLACK;
    for (;;) {
        ssize_t n = read(self->fd, self->buf + self->len, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return s_fail(self, "read", errno);
        if (n == 0)
            self->at_eof = true;
        self->len += (size_t)n;
        s_add(&self->counts.bytes_read, (uint64_t)n);
        return 0;
    }
}

/* Count a bad line (the one at line_off) and keep the first one with why it
 * is bad; line NULL: an over-long line. */
static void s_bad(tr_reader_t *self, const char *line, size_t len)
{
    s_add(&self->counts.bad_lines, 1);
    self->bad_pending++;
    if (self->have_bad)
        return;
    struct tr_reader_bad *b = &self->first_bad;
    const struct s_file *f = &self->files.v[self->cur];
    self->have_bad = 1;
    snprintf(b->path, sizeof b->path, "%s",
             strcmp(f->path, TR_READER_STDIN) ? f->path : "standard input");
    b->offset = self->line_off;
    b->global = f->off + self->line_off;
    if (line)
        tr_parse_explain(&self->data, line, len, b->why, sizeof b->why);
    else
        snprintf(b->why, sizeof b->why, "line longer than %u bytes", TR_READER_MAX_LINE);
}

/* Discard through the next newline (or the end of the file). Returns 0 when
 * done, 1 if more data is needed, SS_E_IO on error. */
static int s_skip(tr_reader_t *self)
{
    char *nl = memchr(self->buf + self->pos, '\n', self->len - self->pos);
    if (!nl && !self->at_eof) {
        self->buf_off += self->len;
        self->len = 0;
        self->pos = 0;
        return s_fill(self) < 0 ? SS_E_IO : 1;
    }
    self->pos = nl ? (size_t)(nl - self->buf) + 1 : self->len;
    self->skipping = false;
    if (self->skip_is_bad) {
        s_add(&self->counts.lines, 1);
        s_bad(self, NULL, 0);
    }
    return 0;
}

/* Find the next line of this part in the open file. Returns 1 (line, len
 * set; the line lives in buf until the next call), 0 (no more lines of the
 * part in this file) or SS_E_IO. */
static int s_next_line(tr_reader_t *self, const char **line, size_t *len)
{
    for (;;) {
        if (self->skipping) {
            int rc = s_skip(self);
            if (rc < 0)
                return rc;
            continue;
        }
        if (self->buf_off + self->pos >= self->line_end)
            return 0;
        size_t avail = self->len - self->pos;
        if (avail == 0 && self->at_eof)
            return 0;
        char *p = self->buf + self->pos;
        char *nl = memchr(p, '\n', avail);
        self->line_off = self->buf_off + self->pos;
        if (nl || self->at_eof) {
            *line = p;
            *len = nl ? (size_t)(nl - p) : avail;
            self->pos += *len + (nl ? 1 : 0);
            return 1;
        }
        if (self->pos > 0) {
            memmove(self->buf, p, avail);
            self->buf_off += self->pos;
            self->len = avail;
            self->pos = 0;
        }
        if (self->len == self->cap && self->cap < TR_READER_BUF_BYTES) {
            self->cap = self->cap * 2 < TR_READER_BUF_BYTES ? self->cap * 2
                                                            : TR_READER_BUF_BYTES;
            self->buf = ss_realloc(self->buf, self->cap);
        } else if (self->len == self->cap) {
            self->skipping = true;
            self->skip_is_bad = true;
            continue;
        }
        if (s_fill(self) < 0)
            return SS_E_IO;
    }
}

/* ------------------------------------------------------------ the cache */

/* A print of the reader's files (names, sizes) and byte range: a cache part
 * filled by a reader with another print is not read. */
static uint64_t s_print(const tr_reader_t *self)
{
    uint64_t h = ss_mix64(self->start ^ ss_mix64(self->end));
    for (size_t i = 0; i < self->files.n; i++) {
        const struct s_file *f = &self->files.v[i];
        h = ss_mix64(h ^ ss_hash_bytes(f->path, strlen(f->path), f->size));
    }
    return h;
}

/* Filling stops: the pass will not be complete (a seek, a rewind before
 * its end); the part is emptied. */
static void s_fill_stop(tr_reader_t *self)
{
    tr_valid_cache_abandon(self->cache, self->cpart);
    self->filling = 0;
}

/* Filling: append the line just kept (at line_off of file cur); over the
 * part's bound the cache drops it and this pass stops filling. */
static void s_fill_line(tr_reader_t *self, const char *line, size_t len)
{
    if (tr_valid_cache_append(self->cache, self->cpart, (uint32_t)self->cur, self->line_off,
                              line, len) != 0)
        self->filling = 0;
}

/* Filling, at the end of a complete pass: the part is full. */
static void s_fill_done(tr_reader_t *self)
{
    tr_valid_cache_finish(
        self->cache, self->cpart,
        atomic_load_explicit(&self->counts.headers, memory_order_relaxed) - self->fill_headers,
        atomic_load_explicit(&self->counts.held_out, memory_order_relaxed) -
            self->fill_held_out);
    self->filling = 0;
}

/* Replay: the next line kept in the part, as s_line returns it (cur and
 * line_off are the line's, for a bad line's place); at the end, the pass's
 * headers and held-out lines are counted. */
static int s_replay_line(tr_reader_t *self, const char **line, size_t *len)
{
    struct tr_valid_cache_line l;
    if (!tr_valid_cache_line(self->cache, self->cpart, &self->rpos, &l)) {
        if (!self->replay_done) {
            uint64_t headers, held_out;
            tr_valid_cache_skipped(self->cache, self->cpart, &headers, &held_out);
            s_add(&self->counts.headers, headers);
            s_add(&self->counts.held_out, held_out);
            s_add(&self->counts.lines, headers + held_out);
            self->replay_done = 1;
        }
        return 0;
    }
    *line = l.bytes;
    *len = l.len;
    self->cur = l.file;
    self->line_off = l.off;
    s_add(&self->counts.lines, 1);
    return 1;
}

/* Start a pass from the part's start with the cache: replay the part, fill
 * it, or neither (dropped). */
static void s_cache_begin(tr_reader_t *self)
{
    enum tr_valid_cache_use use = tr_valid_cache_begin(self->cache, self->cpart, s_print(self));
    self->replay = use == TR_VALID_CACHE_REPLAY;
    self->rpos = 0;
    self->replay_done = 0;
    self->filling = use == TR_VALID_CACHE_FILL;
    self->fill_headers = atomic_load_explicit(&self->counts.headers, memory_order_relaxed);
    self->fill_held_out = atomic_load_explicit(&self->counts.held_out, memory_order_relaxed);
}

void tr_reader_use_cache(tr_reader_t *self, tr_valid_cache_t *cache, uint32_t part)
{
    ss_assert(self && cache && part < tr_valid_cache_parts(cache) &&
              (!self->split.threshold || self->keep_valid));
    if (s_is_stdin(&self->files))  /* read once, never rewound: nothing to keep */
        return;
    self->cache = cache;
    self->cpart = part;
    s_cache_begin(self);
}

int tr_reader_from_cache(const tr_reader_t *self)
{
    ss_assert(self);
    return self->replay;
}

/* ------------------------------------------------------------ lines */

/* The next line of the part, opening files as needed (or from the cache
 * part it replays). Returns 1 (line and len set, line_off its offset; the
 * line lives in buf, or the cache, until the next call; counted in lines),
 * 0 at the end of the part, or SS_E_IO (sticky). */
static int s_line(tr_reader_t *self, const char **line, size_t *len)
{
    if (self->replay)
        return s_replay_line(self, line, len);
    for (;;) {
        if (self->err_rc)
            return self->err_rc;
        if (self->fd < 0) {
            int rc = s_open_next(self);
            if (rc == 0 && self->filling)
                s_fill_done(self);
            if (rc == 0 && self->from_start && self->marks_state == S_MARKS_RECORD &&
                self->n_marks > 0)
                self->marks_state = S_MARKS_FULL;  /* a whole pass: the next ones use it */
            if (rc <= 0)
                return rc;
        }
        int rc = s_next_line(self, line, len);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            s_close(self);
            self->cur++;
            continue;
        }
        s_add(&self->counts.lines, 1);
        return 1;
    }
}

/* Whether the line just returned is a header to skip (counted if so). */
static bool s_header(tr_reader_t *self, const char *line, size_t len)
{
    if (self->line_off != 0 || !tr_parse_is_header(&self->data, line, len))
        return false;
    s_add(&self->counts.headers, 1);
    return true;
}

void tr_reader_set_split(tr_reader_t *self, const struct tr_split *split,
                         enum tr_split_side side)
{
    ss_assert(self && split);
    self->split = *split;
    self->keep_valid = side == TR_SPLIT_VALID;
}

/* Whether the line just returned (at line_off, its bytes up to buf + pos)
 * is on the validation side: the verdict kept for it when an earlier line
 * was hashed, else its hash, computed together with the next complete lines
 * of the buffer (their verdicts kept). */
static int s_verdict(tr_reader_t *self, const char *line, size_t len)
{
    struct s_ahead *q = &self->ahead;
    const char *lines[TR_SPLIT_LANES] = {line};
    size_t lens[TR_SPLIT_LANES] = {len}, at = self->pos;
    uint64_t offs[TR_SPLIT_LANES];
    int k = 1, v[TR_SPLIT_LANES];
    while (q->head < q->n && q->off[q->head] < self->line_off)
        q->head++;  /* lines not judged (headers, another part's) */
    if (q->head < q->n && q->off[q->head] == self->line_off && q->len[q->head] == len)
        return q->valid[q->head++];
    q->head = q->n = 0;
    for (; k < TR_SPLIT_LANES && at < self->len; k++) {
        const char *nl = memchr(self->buf + at, '\n', self->len - at);
        if (!nl)
            break;
        lines[k] = self->buf + at;
        lens[k] = (size_t)(nl - lines[k]);
        offs[k] = self->buf_off + at;
        at = (size_t)(nl - self->buf) + 1;
    }
    if (k < TR_SPLIT_LANES)
        return tr_split_is_valid(&self->split, line, len);
    tr_split_is_valid4(&self->split, lines, lens, v);
    for (k = 1; k < TR_SPLIT_LANES; k++) {
        q->off[k - 1] = offs[k];
        q->len[k - 1] = lens[k];
        q->valid[k - 1] = v[k];
    }
    q->n = TR_SPLIT_LANES - 1;
    return v[0];
}

/* Stop keeping verdicts (a pass that is not whole, over the bound, or a
 * pass whose lines are not those marked). */
static void s_marks_off(tr_reader_t *self)
{
    ss_free(self->marks);
    self->marks = NULL;
    self->n_marks = self->cap_marks = 0;
    self->marks_state = S_MARKS_OFF;
}

/* The verdict of the line just returned, from the marks of an earlier whole
 * pass when it ends where the line marked there ended (the lines before it
 * and its own length the same, as far as 15 bits tell), else s_verdict
 * (marked when this is a whole pass being recorded). */
static int s_marked_verdict(tr_reader_t *self, const char *line, size_t len)
{
    uint16_t low = (uint16_t)(((self->line_off + len) & 0x7fff) << 1);  /* where it ends */
    size_t i = self->ord++;
    int v;
    if (self->from_start && self->marks_state == S_MARKS_FULL) {
        if (i < self->n_marks && (self->marks[i] & 0xfffe) == low)
            return self->marks[i] & 1;
        s_marks_off(self);  /* not the same lines: hash from now on */
    }
    v = s_verdict(self, line, len);
    if (!self->from_start || self->marks_state != S_MARKS_RECORD || self->cache)
        return v;
    if (i >= TR_READER_MARKS_MAX) {
        s_marks_off(self);
        return v;
    }
    if (i >= self->cap_marks) {
        self->cap_marks = self->cap_marks ? self->cap_marks * 2 : 4096;
        self->marks = ss_realloc(self->marks, self->cap_marks * sizeof *self->marks);
    }
    self->marks[i] = (uint16_t)(low | v);
    self->n_marks = i + 1;
    return v;
}

/* Whether the line just returned belongs to the other side of the split
 * (counted as held out, and no longer as a line, if so). */
static bool s_held_out(tr_reader_t *self, const char *line, size_t len)
{
    if (self->replay)  /* the cache holds the kept lines only */
        return false;
    if (!self->split.threshold || s_marked_verdict(self, line, len) == self->keep_valid)
        return false;
    s_add(&self->counts.held_out, 1);
    return true;
}

int tr_reader_next(tr_reader_t *self, struct tr_example *ex)
{
    ss_assert(self && ex && self->data.format == SS_DATA_CRITEO_TSV);
    const char *line;
    size_t len;
    int rc;
    while ((rc = s_line(self, &line, &len)) == 1) {
        if (s_held_out(self, line, len))
            continue;
        if (self->filling)
            s_fill_line(self, line, len);
        if (tr_parse_criteo(line, len, ex) == 0)
            return 1;
        s_bad(self, line, len);
    }
    return rc;
}

int tr_reader_read(tr_reader_t *self, struct tr_rows *rows, size_t max)
{
    ss_assert(self && rows && rows->n_dense == self->data.n_dense &&
              rows->n_fields == self->data.n_fields);
    const char *line;
    size_t len;
    int rc = 0;
    if (max > rows->max)
        max = rows->max;
    tr_rows_clear(rows);
    if (self->gaps && self->gaps_cap < max) {
        self->gaps = ss_realloc(self->gaps, max * sizeof *self->gaps);
        self->gaps_cap = max;
    }
    while (rows->n < max && (rc = s_line(self, &line, &len)) == 1) {
        if (s_header(self, line, len) || s_held_out(self, line, len))
            continue;
        if (self->filling)
            s_fill_line(self, line, len);
        if (tr_parse_line(&self->data, line, len, rows) != 0) {
            s_bad(self, line, len);
        } else if (self->gaps) {
            self->gaps[rows->n - 1] = (uint32_t)(self->bad_pending < UINT32_MAX
                                                  ? self->bad_pending : UINT32_MAX);
            self->bad_pending = 0;
        }
    }
    if (rc < 0 && rows->n == 0)
        return rc;
    return (int)rows->n;
}

void tr_reader_keep_gaps(tr_reader_t *self)
{
    ss_assert(self);
    if (!self->gaps) {
        self->gaps_cap = 1;
        self->gaps = ss_calloc(1, sizeof *self->gaps);
    }
    self->bad_pending = 0;
}

const uint32_t *tr_reader_gaps(const tr_reader_t *self)
{
    ss_assert(self && self->gaps);
    return self->gaps;
}

int tr_reader_rewind(tr_reader_t *self)
{
    ss_assert(self);
    s_close(self);
    self->cur = 0;
    self->err_rc = 0;
    self->err[0] = '\0';
    s_add(&self->counts.rewinds, 1);
    if (self->marks_state == S_MARKS_RECORD)  /* a pass not whole: record the next one */
        self->n_marks = 0;
    self->ord = 0;
    self->from_start = 1;
    if (self->filling)  /* the pass was not complete */
        s_fill_stop(self);
    if (self->cache)  /* the next pass reads the lines kept, or fills them */
        s_cache_begin(self);
    return 0;
}

uint64_t tr_reader_tell(const tr_reader_t *self)
{
    ss_assert(self && !(self->fd >= 0 && self->skipping));
    if (self->replay) {
        uint32_t file;
        uint64_t off;
        if (!tr_valid_cache_peek(self->cache, self->cpart, self->rpos, &file, &off))
            return TR_READER_POS_END;
        return self->files.v[file].off + off;
    }
    if (self->fd >= 0)
        return self->files.v[self->cur].off + self->buf_off + self->pos;
    if (self->cur == 0)
        return self->start;  /* nothing read since new or rewind */
    if (self->cur >= self->files.n || self->files.v[self->cur].off >= self->end)
        return TR_READER_POS_END;
    return self->files.v[self->cur].off;  /* the next file opens at its first byte */
}

double tr_reader_progress(const tr_reader_t *self)
{
    ss_assert(self);
    uint64_t at;
    if (self->end <= self->start)
        return 1.0;
    if (self->replay)
        return tr_valid_cache_progress(self->cache, self->cpart, self->rpos);
    if (self->fd >= 0)
        at = self->files.v[self->cur].off + self->buf_off + self->pos;
    else if (self->cur < self->files.n)
        at = self->files.v[self->cur].off;
    else
        at = self->end;
    if (at <= self->start)
        return 0.0;
    return at >= self->end ? 1.0 : (double)(at - self->start) / (double)(self->end - self->start);
}

int tr_reader_seek(tr_reader_t *self, uint64_t pos)
{
    ss_assert(self);
    s_close(self);  /* a rewind that is not an epoch: rewinds is not counted */
    if (self->filling)  /* the cache is for whole passes from the start */
        s_fill_stop(self);
    self->cache = NULL;
    self->replay = 0;
    if (self->marks_state == S_MARKS_RECORD)
        self->n_marks = 0;
    self->from_start = pos == self->start;  /* only a pass from the start is marked */
    self->ord = 0;
    self->cur = 0;
    self->err_rc = 0;
    self->err[0] = '\0';
    if (pos == self->start)
        return 0;
    if (pos == TR_READER_POS_END) {
        self->cur = self->files.n;
        return 0;
    }
    if (pos < self->start || pos > self->end)
        return SS_E_RANGE;
    size_t i = 0;
    while (i < self->files.n && !(self->files.v[i].size > 0 && pos >= self->files.v[i].off &&
                                  pos < self->files.v[i].off + self->files.v[i].size))
        i++;
    self->cur = i;
    if (i == self->files.n || pos == self->files.v[i].off)
        return 0;  /* s_open_next opens file i at its start */
    const struct s_file *f = &self->files.v[i];
    uint64_t le = (self->end < f->off + f->size ? self->end : f->off + f->size) - f->off;
    self->fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (self->fd < 0)
        return s_fail(self, "open", errno);
    if (lseek(self->fd, (off_t)(pos - f->off), SEEK_SET) < 0)
        return s_fail(self, "seek in", errno);
    self->buf_off = pos - f->off;
    self->skipping = false;
    self->line_end = le;
    self->len = 0;
    self->pos = 0;
    self->at_eof = false;
    return 0;
}

void tr_reader_stats(const tr_reader_t *self, struct tr_reader_stats *st)
{
    ss_assert(self && st);
    st->part_bytes = self->part_bytes;
    st->rewinds = atomic_load_explicit(&self->counts.rewinds, memory_order_relaxed);
    st->held_out = atomic_load_explicit(&self->counts.held_out, memory_order_relaxed);
    st->lines = atomic_load_explicit(&self->counts.lines, memory_order_relaxed) - st->held_out;
    st->bad_lines = atomic_load_explicit(&self->counts.bad_lines, memory_order_relaxed);
    st->headers = atomic_load_explicit(&self->counts.headers, memory_order_relaxed);
    st->bytes_read = atomic_load_explicit(&self->counts.bytes_read, memory_order_relaxed);
}

int tr_reader_first_bad(const tr_reader_t *self, struct tr_reader_bad *out)
{
    ss_assert(self && out);
    if (self->have_bad)
        *out = self->first_bad;
    return self->have_bad;
}

int tr_reader_line_number(const char *path, uint64_t offset, uint64_t *line)
{
    ss_assert(path && line);
    char buf[1 << 16];
    uint64_t done = 0, n_lines = 1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return SS_E_IO;
    while (done < offset) {
        size_t want = offset - done < sizeof buf ? (size_t)(offset - done) : sizeof buf;
        ssize_t n = read(fd, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + n - p))) != NULL; p++)
            n_lines++;
        done += (uint64_t)n;
    }
    close(fd);
    if (done < offset)
        return SS_E_IO;
    *line = n_lines;
    return 0;
}

const char *tr_reader_error(const tr_reader_t *self)
{
    ss_assert(self);
    return self->err;
}
