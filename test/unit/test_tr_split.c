/* test_tr_split.c - unit tests of trainer/tr_split, of a reader that keeps
 * one side of the split (tr_reader_set_split), and of the reader's place in
 * its part (tr_reader_progress: where model.dense_average's tail starts).
 *
 * The file written holds N lines, each with a unique id in C1 (8 hex digits:
 * its key is ss_key_make(0, id)), a few exact duplicates and a few bad lines.
 * Every split of it into trainers and workers is read on both sides: the two
 * sides together must give every good line exactly once, the validation side
 * must be the same set of lines whatever the parts (and the same on a second
 * read: deterministic), and a line's side must be what tr_split_is_valid says
 * of its bytes. The reader's cheaper paths to the same verdicts (four lines
 * at a time, the marks of a whole pass, the validation cache) are checked
 * against tr_split_is_valid over a file larger than a read buffer. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ss_hash.h"
#include "t.h"
#include "tr_reader.h"
#include "tr_split.h"

#define N_IDS 4000u      /* unique good lines */
#define N_DUPS 50u       /* ids 1..N_DUPS appear twice (exact duplicate lines) */
#define N_BAD 7u         /* bad lines (a label of 2) */
#define FRACTION 0.2

/* One good line with C1 = id (no newline) into buf; its length. The dense
 * fields vary with the id so that lines differ in more than C1. */
static size_t s_line(char *buf, size_t cap, uint64_t id)
{
    int n = snprintf(buf, cap, "%d\t%llu\t\t%llu\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t%08llx\tab\tcd",
                     (int)(id & 1), (unsigned long long)(id % 97),
                     (unsigned long long)(ss_mix64(id) % 1000), (unsigned long long)id);
    assert_true(n > 0 && (size_t)n < cap);
    return (size_t)n;
}

/* Write the test file into fix->path: ids 1..N_IDS, then the duplicates,
 * with a bad line after every 600th id. Sets want_valid[id] (1-based) to
 * whether the rule puts line id on the validation side. */
static void s_write_file(const char *path, unsigned char *want_valid)
{
    struct tr_split sp;
    char line[256];
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    tr_split_init(&sp, FRACTION);
    unsigned bad = 0;
    for (uint64_t id = 1; id <= N_IDS + N_DUPS; id++) {
        uint64_t real = id <= N_IDS ? id : id - N_IDS;
        size_t len = s_line(line, sizeof line, real);
        want_valid[real] = (unsigned char)tr_split_is_valid(&sp, line, len);
        fprintf(f, "%s\n", line);
        if (id % 600 == 0 && bad < N_BAD) {
            fprintf(f, "2\tbad%u\n", bad);
            bad++;
        }
    }
    while (bad < N_BAD)
        fprintf(f, "2\tbad%u\n", bad++);
    assert_int_equal(fclose(f), 0);
}

/* C1 key -> id, sorted by key (s_id_of). */
struct s_kid {
    uint64_t key, id;
};
static struct s_kid g_kid[N_IDS];

static int s_cmp_kid(const void *a, const void *b)
{
    uint64_t x = ((const struct s_kid *)a)->key, y = ((const struct s_kid *)b)->key;
    return x < y ? -1 : x > y;
}

/* The id whose C1 key is key, or 0. */
static uint64_t s_id_of(uint64_t key)
{
    if (g_kid[0].id == 0) {
        for (uint64_t id = 1; id <= N_IDS; id++)
            g_kid[id - 1] = (struct s_kid){ss_key_make(0, id), id};
        qsort(g_kid, N_IDS, sizeof g_kid[0], s_cmp_kid);
    }
    struct s_kid want = {key, 0};
    const struct s_kid *k = bsearch(&want, g_kid, N_IDS, sizeof g_kid[0], s_cmp_kid);
    return k ? k->id : 0;
}

/* What one side of one split into n_ranks x n_workers parts gave. */
struct s_side {
    unsigned *count;     /* [N_IDS + 1] times each id was read */
    uint64_t rows;       /* examples read */
    uint64_t lines;      /* reader stats summed */
    uint64_t bad;
    uint64_t held_out;
};

static void s_read_side(const char *path, uint32_t n_ranks, uint32_t n_workers,
                        enum tr_split_side side, struct s_side *out)
{
    const char *pats[] = {path};
    struct tr_split sp;
    struct tr_rows rows;
    char err[256];
    tr_split_init(&sp, FRACTION);
    tr_rows_init(&rows, 64, TR_N_DENSE, TR_N_SPARSE);
    memset(out, 0, sizeof *out);
    out->count = calloc(N_IDS + 1, sizeof *out->count);
    assert_non_null(out->count);
    for (uint32_t r = 0; r < n_ranks; r++)
        for (uint32_t w = 0; w < n_workers; w++) {
            tr_reader_t *rd = tr_reader_new(NULL, pats, 1, r, n_ranks, w, n_workers, err,
                                            sizeof err);
            if (!rd)
                fail_msg("tr_reader_new: %s", err);
            tr_reader_set_split(rd, &sp, side);
            int n;
            while ((n = tr_reader_read(rd, &rows, rows.max)) > 0)
                for (int b = 0; b < n; b++) {
                    uint64_t key = rows.keys[rows.offs[(size_t)b * TR_N_SPARSE]];
                    uint64_t id = s_id_of(key);
                    if (!id)
                        fail_msg("a row with an unknown C1 key %016llx",
                                 (unsigned long long)key);
                    out->count[id]++;
                    out->rows++;
                }
            assert_int_equal(n, 0);
            struct tr_reader_stats st;
            tr_reader_stats(rd, &st);
            out->lines += st.lines;
            out->bad += st.bad_lines;
            out->held_out += st.held_out;
            tr_reader_destroy(&rd);
        }
    tr_rows_fini(&rows);
}

/* The rule alone: fraction 0 sets nothing aside; a line's side depends on
 * its bytes only; the share set aside is close to the fraction; a line set
 * aside at a fraction is set aside at every larger one (nested splits). */
static void test_rule(void **state)
{
    (void)state;
    struct tr_split none, a, b, b2;
    char line[256];
    tr_split_init(&none, 0);
    tr_split_init(&a, 0.05);
    tr_split_init(&b, 0.2);
    tr_split_init(&b2, 0.2);
    assert_true(b.threshold == b2.threshold);
    unsigned in_a = 0, in_b = 0;
    const unsigned n = 100000;
    for (uint64_t id = 1; id <= n; id++) {
        size_t len = s_line(line, sizeof line, id);
        int va = tr_split_is_valid(&a, line, len), vb = tr_split_is_valid(&b, line, len);
        assert_int_equal(tr_split_is_valid(&none, line, len), 0);
        assert_int_equal(tr_split_is_valid(&b2, line, len), vb);
        if (va && !vb)
            fail_msg("line %llu is validation at 0.05 but not at 0.2",
                     (unsigned long long)id);
        in_a += (unsigned)va;
        in_b += (unsigned)vb;
    }
    /* binomial: std of the share ~ sqrt(f (1 - f) / n) = 0.0013 at 0.2 */
    print_message("set aside: %u of %u at 0.05, %u at 0.2\n", in_a, n, in_b);
    assert_in_range(in_a, 4500, 5500);
    assert_in_range(in_b, 19300, 20700);
    /* the bytes decide, not where they lie: a copy of a line elsewhere */
    size_t len = s_line(line, sizeof line, 12345);
    int v = tr_split_is_valid(&b, line, len);
    char copy[256];
    memcpy(copy, line, len);
    assert_int_equal(tr_split_is_valid(&b, copy, len), v);
}

/* Both sides of every split of the file: disjoint, together every good line
 * once (duplicates twice, on the same side), the validation side the same
 * lines for every part layout and every reread, each line where the rule
 * says; bad lines counted once over the two sides; held-out lines are not
 * lines of the side that skips them. */
static void test_reader_sides(void **state)
{
    struct t_fix *fx = *state;
    unsigned char *want_valid = calloc(N_IDS + 1, 1);
    assert_non_null(want_valid);
    s_write_file(fx->path, want_valid);
    unsigned *first_valid = NULL;
    static const uint32_t layouts[][2] = {{1, 1}, {2, 2}, {3, 1}, {1, 5}, {1, 1}};
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        struct s_side tr, va;
        s_read_side(fx->path, layouts[l][0], layouts[l][1], TR_SPLIT_TRAIN, &tr);
        s_read_side(fx->path, layouts[l][0], layouts[l][1], TR_SPLIT_VALID, &va);
        uint64_t n_valid_ids = 0;
        for (uint64_t id = 1; id <= N_IDS; id++) {
            unsigned dup = id <= N_DUPS ? 2 : 1;
            unsigned want_v = want_valid[id] ? dup : 0, want_t = want_valid[id] ? 0 : dup;
            if (va.count[id] != want_v || tr.count[id] != want_t)
                fail_msg("layout %ux%u, id %llu: read %u (valid) + %u (train), want %u + %u",
                         layouts[l][0], layouts[l][1], (unsigned long long)id, va.count[id],
                         tr.count[id], want_v, want_t);
            n_valid_ids += want_valid[id] ? 1 : 0;
        }
        uint64_t good = N_IDS + N_DUPS;
        assert_int_equal(va.rows + tr.rows, good);
        assert_int_equal(va.bad + tr.bad, N_BAD);
        /* each side's lines: its own good and bad lines; held out: the other's */
        assert_int_equal(va.lines, va.rows + va.bad);
        assert_int_equal(tr.lines, tr.rows + tr.bad);
        assert_int_equal(va.held_out, tr.lines);
        assert_int_equal(tr.held_out, va.lines);
        /* the share set aside is near the fraction (std ~ 0.006 at 4000) */
        assert_in_range(n_valid_ids, (uint64_t)(N_IDS * (FRACTION - 0.04)),
                        (uint64_t)(N_IDS * (FRACTION + 0.04)));
        if (!first_valid) {
            first_valid = va.count;
        } else {
            assert_memory_equal(first_valid, va.count, (N_IDS + 1) * sizeof *va.count);
            free(va.count);
        }
        free(tr.count);
    }
    free(first_valid);
    free(want_valid);
}

/* Without a split set, a reader reads every line as before and holds out
 * nothing; a split of fraction 0 set on it changes nothing. */
static void test_no_split(void **state)
{
    struct t_fix *fx = *state;
    unsigned char *want_valid = calloc(N_IDS + 1, 1);
    assert_non_null(want_valid);
    s_write_file(fx->path, want_valid);
    const char *pats[] = {fx->path};
    struct tr_split zero;
    struct tr_rows rows;
    struct tr_reader_stats st;
    tr_split_init(&zero, 0);
    tr_rows_init(&rows, 256, TR_N_DENSE, TR_N_SPARSE);
    for (int with = 0; with < 2; with++) {
        tr_reader_t *rd = tr_reader_new(NULL, pats, 1, 0, 1, 0, 1, NULL, 0);
        assert_non_null(rd);
        if (with)
            tr_reader_set_split(rd, &zero, TR_SPLIT_VALID);
        uint64_t total = 0;
        int n;
        while ((n = tr_reader_read(rd, &rows, rows.max)) > 0)
            total += (uint64_t)n;
        tr_reader_stats(rd, &st);
        assert_int_equal(total, N_IDS + N_DUPS);
        assert_int_equal(st.held_out, 0);
        assert_int_equal(st.lines, N_IDS + N_DUPS + N_BAD);
        tr_reader_destroy(&rd);
    }
    tr_rows_fini(&rows);
    free(want_valid);
}

/* tr_reader_progress: 0 before a pass, rising with the reads to 1 at the
 * part's end, 0 again after a rewind; each part of a split measures its own
 * range. */
static void test_progress(void **state)
{
    struct t_fix *fx = *state;
    unsigned char *want_valid = calloc(N_IDS + 1, 1);
    assert_non_null(want_valid);
    s_write_file(fx->path, want_valid);
    const char *pats[] = {fx->path};
    struct tr_rows rows;
    tr_rows_init(&rows, 100, TR_N_DENSE, TR_N_SPARSE);
    for (uint32_t part = 0; part < 2; part++) {
        tr_reader_t *rd = tr_reader_new(NULL, pats, 1, 0, 1, part, 2, NULL, 0);
        assert_non_null(rd);
        for (int pass = 0; pass < 2; pass++) {
            double last = tr_reader_progress(rd);
            assert_true(last == 0.0);
            int n, steps = 0;
            while ((n = tr_reader_read(rd, &rows, rows.max)) > 0) {
                double p = tr_reader_progress(rd);
                if (p < last || p > 1.0)
                    fail_msg("part %u: progress %g after %g", part, p, last);
                last = p;
                steps++;
            }
            /* about 2,000 lines a part in batches of 100: progress moved in steps */
            assert_in_range(steps, 15, 25);
            assert_true(tr_reader_progress(rd) == 1.0);
            assert_int_equal(tr_reader_rewind(rd), 0);
        }
        tr_reader_destroy(&rd);
    }
    tr_rows_fini(&rows);
    free(want_valid);
}

/* tr_split_is_valid4 gives tr_split_is_valid's verdicts: random bytes
 * (newlines and carriage returns among them), lengths 0 to 400 with equal
 * and unequal lanes, thresholds from none to half the range. */
static void test_valid4(void **state)
{
    (void)state;
    static char buf[TR_SPLIT_LANES][401];
    uint64_t rng = 7;
    static const uint64_t thresholds[] = {0, 1, 1ull << 58, 1ull << 62, 1ull << 63};
    for (size_t t = 0; t < sizeof thresholds / sizeof thresholds[0]; t++) {
        struct tr_split sp = {thresholds[t]};
        unsigned n_valid = 0;
        for (int round = 0; round < 4000; round++) {
            const char *lines[TR_SPLIT_LANES];
            size_t lens[TR_SPLIT_LANES];
            int got[TR_SPLIT_LANES];
            size_t same = ss_rand_next(&rng) % 401;
            for (int k = 0; k < TR_SPLIT_LANES; k++) {
                lens[k] = round % 3 == 0 ? same : ss_rand_next(&rng) % 401;
                for (size_t i = 0; i < lens[k]; i++)
                    buf[k][i] = (char)(ss_rand_next(&rng) & 0xff);
                lines[k] = buf[k];
            }
            tr_split_is_valid4(&sp, lines, lens, got);
            for (int k = 0; k < TR_SPLIT_LANES; k++) {
                int want = tr_split_is_valid(&sp, lines[k], lens[k]);
                if (got[k] != want)
                    fail_msg("threshold %016llx, round %d, lane %d (%zu bytes): %d, want %d",
                             (unsigned long long)sp.threshold, round, k, lens[k], got[k],
                             want);
                n_valid += (unsigned)want;
            }
        }
        if (t == 4)  /* half the range: both verdicts were checked, many times */
            assert_in_range(n_valid, 7000, 9000);
    }
}

/* The big file of test_reader_ahead: N_BIG lines of 40 to 940 bytes (more
 * than a 4 MiB read buffer, so that lines straddle reads), every 7th ending
 * in CRLF, an empty line and a bad line now and then, the last line without
 * a newline. */
#define N_BIG 24000u

/* C1 key -> id for the ids of the big file. */
static struct s_kid g_big[N_BIG];

static uint64_t s_big_id(uint64_t key)
{
    struct s_kid want = {key, 0};
    const struct s_kid *k = bsearch(&want, g_big, N_BIG, sizeof g_big[0], s_cmp_kid);
    return k ? k->id : 0;
}

/* Write the big file; want_valid[id] as s_write_file's; *n_bad: its bad and
 * empty lines. */
static void s_write_big(const char *path, struct tr_split *sp, unsigned char *want_valid,
                        unsigned *n_bad)
{
    static char line[1200];
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    *n_bad = 0;
    for (uint64_t id = 1; id <= N_BIG; id++) {
        g_big[id - 1] = (struct s_kid){ss_key_make(0, id), id};
        size_t len = s_line(line, 200, id), pad = ss_mix64(id * 31) % 900;
        memset(line + len, 'p', pad);  /* a longer last field */
        len += pad;
        if (id % 7 == 0)
            line[len++] = '\r';
        want_valid[id] = (unsigned char)tr_split_is_valid(sp, line, len);
        assert_int_equal(fwrite(line, 1, len, f), len);
        if (id < N_BIG)
            fputc('\n', f);
        if (id % 3001 == 0) {
            fputs(id % 2 ? "\n" : "2\tbad\n", f);
            (*n_bad)++;
        }
    }
    assert_int_equal(fclose(f), 0);
    qsort(g_big, N_BIG, sizeof g_big[0], s_cmp_kid);
}

/* Read one pass of rd into count (ids) and *rows; with via_next, through
 * tr_reader_next; seek_at > 0: after that many rows, tell and seek back to
 * the same place (the reader reopens its file there). */
static void s_read_pass(tr_reader_t *rd, int via_next, uint64_t seek_at, unsigned *count,
                        uint64_t *rows)
{
    struct tr_rows r;
    struct tr_example ex;
    uint64_t done = 0;
    tr_rows_init(&r, 50, TR_N_DENSE, TR_N_SPARSE);
    for (;;) {
        int n = 0;
        uint64_t keys[64];
        if (via_next) {
            n = tr_reader_next(rd, &ex);
            if (n == 1)
                keys[0] = ex.keys[0];
        } else if ((n = tr_reader_read(rd, &r, r.max)) > 0) {
            for (int b = 0; b < n; b++)
                keys[b] = r.keys[r.offs[(size_t)b * TR_N_SPARSE]];
        }
        assert_true(n >= 0);
        if (n == 0)
            break;
        for (int b = 0; b < n; b++) {
            uint64_t id = s_big_id(keys[b]);
            if (!id)
                fail_msg("a row with an unknown C1 key %016llx", (unsigned long long)keys[b]);
            count[id]++;
        }
        done += (uint64_t)n;
        if (seek_at && done >= seek_at && done - (uint64_t)n < seek_at)
            assert_int_equal(tr_reader_seek(rd, tr_reader_tell(rd)), 0);
    }
    *rows += done;
    tr_rows_fini(&r);
}

/* The verdicts hashed ahead (tr_reader.c, s_verdict) keep the split exact
 * over reads that cut lines, CRLF lines, empty and bad lines, a last line
 * without a newline, part edges, a rewind (a second pass) and a seek: each
 * side reads every good line of its side once per pass, as
 * tr_split_is_valid says of its bytes, at fractions 0.02 and 0.5, through
 * tr_reader_read and tr_reader_next. */
static void test_reader_ahead(void **state)
{
    struct t_fix *fx = *state;
    unsigned char *want_valid = calloc(N_BIG + 1, 1);
    unsigned *count = calloc(N_BIG + 1, sizeof *count);
    assert_true(want_valid && count);
    const char *pats[] = {fx->path};
    static const double fractions[] = {0.02, 0.5};
    static const uint32_t layouts[][3] = {{1, 1, 0}, {2, 3, 0}, {1, 4, 1}, {1, 2, 777}};
    for (size_t fi = 0; fi < 2; fi++) {
        struct tr_split sp;
        unsigned n_bad;
        tr_split_init(&sp, fractions[fi]);
        s_write_big(fx->path, &sp, want_valid, &n_bad);
        for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
            uint64_t bad = 0;  /* over both sides */
            for (int side = 0; side < 2; side++) {
                uint64_t rows = 0;
                memset(count, 0, (N_BIG + 1) * sizeof *count);
                for (uint32_t r = 0; r < layouts[l][0]; r++)
                    for (uint32_t w = 0; w < layouts[l][1]; w++) {
                        tr_reader_t *rd = tr_reader_new(NULL, pats, 1, r, layouts[l][0], w,
                                                        layouts[l][1], NULL, 0);
                        assert_non_null(rd);
                        tr_reader_set_split(rd, &sp, side ? TR_SPLIT_VALID : TR_SPLIT_TRAIN);
                        for (int pass = 0; pass < 2; pass++) {
                            s_read_pass(rd, layouts[l][2] == 1, layouts[l][2] > 1 && !pass
                                        ? layouts[l][2] : 0, count, &rows);
                            tr_reader_rewind(rd);
                        }
                        struct tr_reader_stats st;
                        tr_reader_stats(rd, &st);
                        bad += st.bad_lines;
                        tr_reader_destroy(&rd);
                    }
                uint64_t want_rows = 0;
                for (uint64_t id = 1; id <= N_BIG; id++) {
                    unsigned want = want_valid[id] == side ? 2 : 0;  /* two passes */
                    if (count[id] != want)
                        fail_msg("fraction %g, layout %ux%u, side %d, id %llu: read %u "
                                 "times, want %u", fractions[fi], layouts[l][0], layouts[l][1],
                                 side, (unsigned long long)id, count[id], want);
                    want_rows += want;
                }
                assert_int_equal(rows, want_rows);
            }
            assert_int_equal(bad, 2 * n_bad);  /* each bad line on one side, both passes */
        }
    }
    free(count);
    free(want_valid);
}

/* One pass of a validation-side reader: the ids in order, its counts. */
struct s_pass {
    uint64_t *ids;              /* ids in the order read (room for a pass) */
    uint64_t n;                 /* rows */
    struct tr_reader_stats st;  /* counts of this pass (bytes_read apart) */
    struct tr_reader_bad bad;   /* the first bad line */
    int has_bad;
};

/* Read a pass of rd (from its start, the stats as differences) into out. */
static void s_pass_read(tr_reader_t *rd, struct s_pass *out)
{
    struct tr_rows r;
    struct tr_reader_stats before;
    int n;
    tr_reader_stats(rd, &before);
    tr_rows_init(&r, 64, TR_N_DENSE, TR_N_SPARSE);
    out->n = 0;
    while ((n = tr_reader_read(rd, &r, r.max)) > 0)
        for (int b = 0; b < n; b++)
            out->ids[out->n++] = s_big_id(r.keys[r.offs[(size_t)b * TR_N_SPARSE]]);
    assert_int_equal(n, 0);
    tr_reader_stats(rd, &out->st);
    out->st.lines -= before.lines;
    out->st.bad_lines -= before.bad_lines;
    out->st.held_out -= before.held_out;
    out->st.headers -= before.headers;
    out->has_bad = tr_reader_first_bad(rd, &out->bad);
    tr_rows_fini(&r);
}

/* The start of the validation-cache tests: the big file written at path
 * with validation fraction 0.1 (*sp: that split), and ref and got with room
 * for n_ids ids each (the caller frees their ids). */
static void s_passes_init(const char *path, struct tr_split *sp, struct s_pass *ref,
                          struct s_pass *got, size_t n_ids)
{
    unsigned char *want_valid = calloc(N_BIG + 1, 1);
    unsigned n_bad;
    ref->ids = calloc(n_ids, sizeof *ref->ids);
    got->ids = calloc(n_ids, sizeof *got->ids);
    assert_true(want_valid && ref->ids && got->ids);
    tr_split_init(sp, 0.1);
    s_write_big(path, sp, want_valid, &n_bad);
    free(want_valid);
}

/* Two passes read the same lines in the same order with the same counts
 * and the same first bad line. */
static void s_pass_same(const struct s_pass *a, const struct s_pass *b, const char *what)
{
    if (a->n != b->n || memcmp(a->ids, b->ids, a->n * sizeof *a->ids) != 0)
        fail_msg("%s: %llu rows, want the %llu of the first pass in its order", what,
                 (unsigned long long)b->n, (unsigned long long)a->n);
    assert_int_equal(b->st.lines, a->st.lines);
    assert_int_equal(b->st.bad_lines, a->st.bad_lines);
    assert_int_equal(b->st.held_out, a->st.held_out);
    assert_int_equal(b->st.headers, a->st.headers);
    assert_int_equal(b->has_bad, a->has_bad);
    if (a->has_bad) {
        assert_string_equal(b->bad.path, a->bad.path);
        assert_int_equal(b->bad.offset, a->bad.offset);
        assert_string_equal(b->bad.why, a->bad.why);
    }
}

/* A validation-side reader of part (0, w) of 1 x n over path, using cache
 * (or none when cache is NULL). */
static tr_reader_t *s_valid_reader(const char *path, const struct tr_split *sp, uint32_t w,
                                   uint32_t n, tr_valid_cache_t *cache)
{
    const char *pats[] = {path};
    tr_reader_t *rd = tr_reader_new(NULL, pats, 1, 0, 1, w, n, NULL, 0);
    assert_non_null(rd);
    tr_reader_set_split(rd, sp, TR_SPLIT_VALID);
    if (cache)
        tr_reader_use_cache(rd, cache, w);
    return rd;
}

/* The validation lines kept in memory (tr_valid_cache): a reader of a part
 * fills it, later readers of the part (and the filler after a rewind) read
 * it: the same lines in the same order as the files give, the same counts
 * and first bad line, no bytes read; over its bound a part is dropped and
 * read from the files, exactly; a reader of other files starts it again;
 * a seek stops its use; a split with no validation line keeps an empty
 * part. */
static void test_valid_cache(void **state)
{
    struct t_fix *fx = *state;
    struct s_pass ref, got;
    struct tr_split sp;
    s_passes_init(fx->path, &sp, &ref, &got, N_BIG * 2);
    for (uint32_t n = 1; n <= 3; n += 2)
        for (uint32_t w = 0; w < n; w++) {
            tr_reader_t *rd = s_valid_reader(fx->path, &sp, w, n, NULL);
            s_pass_read(rd, &ref);  /* the files, no cache */
            tr_reader_destroy(&rd);
            tr_valid_cache_t *cache = tr_valid_cache_new(n, TR_VALID_CACHE_BYTES, "data.train");
            rd = s_valid_reader(fx->path, &sp, w, n, cache);
            assert_int_equal(tr_reader_from_cache(rd), 0);
            s_pass_read(rd, &got);  /* fills */
            s_pass_same(&ref, &got, "the pass that fills");
            assert_true(tr_valid_cache_bytes(cache) > 0);
            tr_reader_rewind(rd);
            assert_int_equal(tr_reader_from_cache(rd), 1);
            s_pass_read(rd, &got);
            s_pass_same(&ref, &got, "a rewound reader");
            tr_reader_destroy(&rd);
            for (int again = 0; again < 2; again++) {
                rd = s_valid_reader(fx->path, &sp, w, n, cache);
                assert_int_equal(tr_reader_from_cache(rd), 1);
                s_pass_read(rd, &got);
                s_pass_same(&ref, &got, "a reader of the cache");
                assert_int_equal(got.st.bytes_read, 0);
                tr_reader_destroy(&rd);
            }
            tr_valid_cache_destroy(&cache);
            assert_null(cache);
            /* over the bound: dropped, then read from the files */
            cache = tr_valid_cache_new(n, 4096 * n, "data.train");
            for (int k = 0; k < 2; k++) {
                rd = s_valid_reader(fx->path, &sp, w, n, cache);
                assert_int_equal(tr_reader_from_cache(rd), 0);
                s_pass_read(rd, &got);
                s_pass_same(&ref, &got, "a part over its bound");
                assert_int_equal(tr_valid_cache_bytes(cache), 0);
                tr_reader_destroy(&rd);
            }
            tr_valid_cache_destroy(&cache);
        }
    /* a seek stops the cache: the part is not filled by that pass */
    tr_valid_cache_t *cache = tr_valid_cache_new(1, TR_VALID_CACHE_BYTES, "data.train");
    tr_reader_t *rd = s_valid_reader(fx->path, &sp, 0, 1, cache);
    assert_int_equal(tr_reader_seek(rd, tr_reader_tell(rd)), 0);
    s_pass_read(rd, &got);
    tr_reader_destroy(&rd);
    rd = s_valid_reader(fx->path, &sp, 0, 1, cache);
    assert_int_equal(tr_reader_from_cache(rd), 0);
    s_pass_read(rd, &ref);  /* fills */
    tr_reader_destroy(&rd);
    /* other files (the same name, another size): filled again, exactly */
    struct tr_split sp2 = {sp.threshold};
    FILE *f = fopen(fx->path, "a");
    assert_non_null(f);
    fputs("\n0\t1\t\t1\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t00000001\tab\tcd\n", f);
    assert_int_equal(fclose(f), 0);
    rd = s_valid_reader(fx->path, &sp2, 0, 1, NULL);
    s_pass_read(rd, &ref);
    tr_reader_destroy(&rd);
    rd = s_valid_reader(fx->path, &sp2, 0, 1, cache);
    assert_int_equal(tr_reader_from_cache(rd), 0);
    s_pass_read(rd, &got);
    s_pass_same(&ref, &got, "a reader of other files");
    tr_reader_destroy(&rd);
    tr_valid_cache_destroy(&cache);
    /* no validation line at all: an empty part, replayed as empty */
    struct tr_split none = {1};
    cache = tr_valid_cache_new(1, TR_VALID_CACHE_BYTES, "data.train");
    for (int k = 0; k < 2; k++) {
        rd = s_valid_reader(fx->path, &none, 0, 1, cache);
        assert_int_equal(tr_reader_from_cache(rd), k);
        s_pass_read(rd, &got);
        assert_int_equal(got.n, 0);
        assert_int_equal(got.st.lines, 0);
        assert_true(got.st.held_out > N_BIG);
        tr_reader_destroy(&rd);
    }
    tr_valid_cache_destroy(&cache);
    free(ref.ids);
    free(got.ids);
}

/* A reader of part (0, w) of 1 x n over the two files of data.valid (no
 * split), using cache (or none when cache is NULL). */
static tr_reader_t *s_files_reader(const char *const *pats, uint32_t w, uint32_t n,
                                   tr_valid_cache_t *cache)
{
    tr_reader_t *rd = tr_reader_new(NULL, pats, 2, 0, 1, w, n, NULL, 0);
    assert_non_null(rd);
    if (cache)
        tr_reader_use_cache(rd, cache, w);
    return rd;
}

/* Copy file from into to. */
static void s_copy_file(const char *from, const char *to)
{
    char buf[1 << 16];
    size_t n;
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_true(in && out);
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

/* data.valid (explicit validation files, no split) through the cache: the
 * first validation fills it, the next ones (new readers, as each scoring
 * makes, and a rewound one) read it: the same lines in the same order, the
 * same counts and first bad line (its file and offset) as the files give,
 * no bytes read; a pass left unfinished fills nothing, the next whole one
 * does; over its bound a part is dropped and read from the files, exactly,
 * at every validation. */
static void test_valid_files_cache(void **state)
{
    struct t_fix *fx = *state;
    struct s_pass ref, got;
    struct tr_split sp;
    const char *pats[] = {fx->path, fx->tmp};
    s_passes_init(fx->path, &sp, &ref, &got, N_BIG * 4);
    s_copy_file(fx->path, fx->tmp);
    for (uint32_t n = 1; n <= 3; n += 2)
        for (uint32_t w = 0; w < n; w++) {
            tr_reader_t *rd = s_files_reader(pats, w, n, NULL);
            s_pass_read(rd, &ref);  /* the files, no cache */
            tr_reader_destroy(&rd);
            assert_true(ref.n > 0 && ref.has_bad && ref.st.held_out == 0);
            tr_valid_cache_t *cache = tr_valid_cache_new(n, TR_VALID_CACHE_BYTES,
                                                         "data.valid");
            for (int k = 0; k < 3; k++) {  /* three validations */
                rd = s_files_reader(pats, w, n, cache);
                assert_int_equal(tr_reader_from_cache(rd), k > 0);
                s_pass_read(rd, &got);
                s_pass_same(&ref, &got, k ? "a validation from the cache" : "the first");
                if (k > 0)
                    assert_int_equal(got.st.bytes_read, 0);
                tr_reader_rewind(rd);
                assert_int_equal(tr_reader_from_cache(rd), 1);
                s_pass_read(rd, &got);
                s_pass_same(&ref, &got, "a rewound reader");
                tr_reader_destroy(&rd);
            }
            assert_true(tr_valid_cache_bytes(cache) > 0);
            tr_valid_cache_destroy(&cache);
            /* a pass left unfinished fills nothing; the rewound pass fills */
            cache = tr_valid_cache_new(n, TR_VALID_CACHE_BYTES, "data.valid");
            rd = s_files_reader(pats, w, n, cache);
            struct tr_rows few;
            tr_rows_init(&few, 8, TR_N_DENSE, TR_N_SPARSE);
            assert_int_equal(tr_reader_read(rd, &few, few.max), 8);
            tr_rows_fini(&few);
            tr_reader_rewind(rd);
            assert_int_equal(tr_reader_from_cache(rd), 0);
            s_pass_read(rd, &got);
            s_pass_same(&ref, &got, "the pass after an unfinished one");
            tr_reader_rewind(rd);
            assert_int_equal(tr_reader_from_cache(rd), 1);
            s_pass_read(rd, &got);
            s_pass_same(&ref, &got, "a replay after an unfinished fill");
            tr_reader_destroy(&rd);
            tr_valid_cache_destroy(&cache);
            cache = tr_valid_cache_new(n, 4096 * n, "data.valid");  /* over the bound */
            for (int k = 0; k < 2; k++) {
                rd = s_files_reader(pats, w, n, cache);
                assert_int_equal(tr_reader_from_cache(rd), 0);
                s_pass_read(rd, &got);
                s_pass_same(&ref, &got, "a part over its bound");
                assert_true(got.st.bytes_read > 0);
                assert_int_equal(tr_valid_cache_bytes(cache), 0);
                tr_reader_destroy(&rd);
            }
            tr_valid_cache_destroy(&cache);
        }
    free(ref.ids);
    free(got.ids);
}

/* One pass of a training-side reader of the whole file into count. */
static void s_count_pass(tr_reader_t *rd, unsigned *count)
{
    uint64_t rows = 0;
    memset(count, 0, (N_BIG + 1) * sizeof *count);
    s_read_pass(rd, 0, 0, count, &rows);
    assert_int_equal(tr_reader_rewind(rd), 0);
}

/* The verdicts a training reader keeps for its next passes (the marks):
 * a second and third pass read the training side exactly; when the file's
 * lines move (the first line put last: the same size, every line ending
 * elsewhere) the marks are not used and the pass is still exact; a pass
 * after a seek is exact too. */
static void test_marks(void **state)
{
    struct t_fix *fx = *state;
    unsigned char *want_valid = calloc(N_BIG + 1, 1);
    unsigned *count = calloc(N_BIG + 1, sizeof *count);
    struct tr_split sp;
    unsigned n_bad;
    assert_true(want_valid && count);
    tr_split_init(&sp, 0.5);
    s_write_big(fx->path, &sp, want_valid, &n_bad);
    const char *pats[] = {fx->path};
    tr_reader_t *rd = tr_reader_new(NULL, pats, 1, 0, 1, 0, 1, NULL, 0);
    assert_non_null(rd);
    tr_reader_set_split(rd, &sp, TR_SPLIT_TRAIN);
    for (int pass = 0; pass < 4; pass++) {
        if (pass == 2) {  /* move the first line to the end, in place */
            FILE *f = fopen(fx->path, "r+");
            assert_non_null(f);
            assert_int_equal(fseek(f, 0, SEEK_END), 0);
            long size = ftell(f);
            char *all = malloc((size_t)size + 1), *moved = malloc((size_t)size + 1);
            assert_true(all && moved);
            rewind(f);
            assert_int_equal(fread(all, 1, (size_t)size, f), (size_t)size);
            size_t first = (size_t)(strchr(all, '\n') - all);
            memcpy(moved, all + first + 1, (size_t)size - first - 1);
            moved[size - first - 1] = '\n';
            memcpy(moved + size - first, all, first);
            rewind(f);
            assert_int_equal(fwrite(moved, 1, (size_t)size, f), (size_t)size);
            assert_int_equal(fclose(f), 0);
            free(all);
            free(moved);
        }
        if (pass == 3)  /* a seek to the start: still a whole pass */
            assert_int_equal(tr_reader_seek(rd, tr_reader_tell(rd)), 0);
        s_count_pass(rd, count);
        for (uint64_t id = 1; id <= N_BIG; id++) {
            unsigned want = want_valid[id] ? 0 : 1;
            if (count[id] != want)
                fail_msg("pass %d, id %llu: read %u times, want %u", pass,
                         (unsigned long long)id, count[id], want);
        }
    }
    tr_reader_destroy(&rd);
    free(count);
    free(want_valid);
}

static int s_setup(void **state)
{
    return t_fix_setup(state, "split", "train.tsv");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule),
        cmocka_unit_test(test_valid4),
        cmocka_unit_test_setup_teardown(test_reader_ahead, s_setup, t_fix_teardown),
        cmocka_unit_test_setup_teardown(test_valid_cache, s_setup, t_fix_teardown),
        cmocka_unit_test_setup_teardown(test_valid_files_cache, s_setup, t_fix_teardown),
        cmocka_unit_test_setup_teardown(test_marks, s_setup, t_fix_teardown),
        cmocka_unit_test_setup_teardown(test_reader_sides, s_setup, t_fix_teardown),
        cmocka_unit_test_setup_teardown(test_no_split, s_setup, t_fix_teardown),
        cmocka_unit_test_setup_teardown(test_progress, s_setup, t_fix_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
