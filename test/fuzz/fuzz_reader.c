/* fuzz_reader.c - libFuzzer harness: the input reader (tr_reader.h) in front
 * of the line parsers: line splitting, byte-range parts, headers, counts.
 *
 * Input: a selector byte, then text. Selector bits 0-2 pick a layout of
 * fuzz_layouts.h; bits 3-7 (k) cut the text into two files at k/32 of its
 * length (k = 0: one file). Both files are read by every part of several
 * splits (1, 2, 3 and 2x2 parts) and the counts summed over the parts must
 * equal what parsing each file's lines directly gives: every line is read by
 * exactly one part, good, bad or header, for any cut. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_layouts.h"
#include "fuzz_util.h"
#include "ss_err.h"
#include "tr_parse.h"
#include "tr_reader.h"

#define S_BATCH 4  /* examples per tr_reader_read() */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char s_paths[2][600];  /* the two input files */

/* What a set of lines holds. */
struct s_counts {
    uint64_t lines;    /* every line */
    uint64_t good;     /* examples parsed */
    uint64_t bad;      /* bad lines */
    uint64_t headers;  /* csv headers skipped */
};

/* The reference: parse the lines of one file directly, as tr_reader_read()
 * promises to. */
static void s_direct(const struct ss_data_cfg *d, const char *text, size_t len,
                     struct s_counts *c)
{
    struct tr_rows rows;
    const char *p = text, *end = text + len;
    tr_rows_init(&rows, 1, d->n_dense, d->n_fields);
    for (int first = 1; p < end; first = 0) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        c->lines++;
        tr_rows_clear(&rows);
        if (first && tr_parse_is_header(d, p, n))
            c->headers++;
        else if (tr_parse_line(d, p, n, &rows) == 0)
            c->good++;
        else
            c->bad++;
        p += n + (nl ? 1 : 0);
    }
    tr_rows_fini(&rows);
}

/* Read every part of an n_ranks x n_workers split and add up the counts. */
static void s_read_split(const struct ss_data_cfg *d, size_t n_files, uint32_t n_ranks,
                         uint32_t n_workers, struct s_counts *c)
{
    const char *paths[2] = {s_paths[0], s_paths[1]};
    struct tr_rows rows;
    char err[512];
    tr_rows_init(&rows, S_BATCH, d->n_dense, d->n_fields);
    for (uint32_t rank = 0; rank < n_ranks; rank++) {
        for (uint32_t w = 0; w < n_workers; w++) {
            tr_reader_t *r = tr_reader_new(d, paths, n_files, rank, n_ranks, w, n_workers, err,
                                           sizeof err);
            FUZZ_CHECK(r, "tr_reader_new: %s", err);
            int n;
            while ((n = tr_reader_read(r, &rows, S_BATCH)) > 0)
                c->good += (uint64_t)n;
            FUZZ_CHECK(n == 0, "tr_reader_read: %s (%s)", ss_errname(n), tr_reader_error(r));
            struct tr_reader_stats st;
            struct tr_reader_bad bad;
            tr_reader_stats(r, &st);
            c->lines += st.lines;
            c->bad += st.bad_lines;
            c->headers += st.headers;
            FUZZ_CHECK(tr_reader_first_bad(r, &bad) == (st.bad_lines > 0),
                       "first bad line kept %d, %llu bad lines", tr_reader_first_bad(r, &bad),
                       (unsigned long long)st.bad_lines);
            tr_reader_destroy(&r);
        }
    }
    tr_rows_fini(&rows);
}

static int s_same(const struct s_counts *a, const struct s_counts *b)
{
    return a->lines == b->lines && a->good == b->good && a->bad == b->bad &&
           a->headers == b->headers;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint32_t splits[][2] = {{1, 1}, {1, 2}, {3, 1}, {2, 2}};
    if (size < 1)
        return 0;
    const struct ss_data_cfg *d = &fuzz_layouts[(data[0] & 7) % FUZZ_N_LAYOUTS];
    const char *text = (const char *)data + 1;
    size_t len = size - 1, cut = len * (data[0] >> 3) / 32;
    size_t n_files = cut ? 2 : 1;
    struct s_counts want = {0};
    if (!cut)
        cut = len;
    fuzz_write_file(s_paths[0], text, cut);
    fuzz_write_file(s_paths[1], text + cut, len - cut);
    s_direct(d, text, cut, &want);
    if (n_files == 2)
        s_direct(d, text + cut, len - cut, &want);
    for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
        struct s_counts got = {0};
        s_read_split(d, n_files, splits[i][0], splits[i][1], &got);
        FUZZ_CHECK(s_same(&got, &want),
                   "%ux%u parts of %zu file(s) read %llu lines (%llu good, %llu bad, %llu "
                   "headers), the files hold %llu (%llu, %llu, %llu)", splits[i][0],
                   splits[i][1], n_files, (unsigned long long)got.lines,
                   (unsigned long long)got.good, (unsigned long long)got.bad,
                   (unsigned long long)got.headers, (unsigned long long)want.lines,
                   (unsigned long long)want.good, (unsigned long long)want.bad,
                   (unsigned long long)want.headers);
    }
    return 0;
}

/* ------------------------------------------------------------------ seeds */


static void s_write_seeds(const char *dir)
{
    fuzz_seed_text(dir, "criteo", 0 | (16 << 3),
           "1\t1\t2\t\t\t\t\t\t\t\t\t\t\t\t68fd1e64\n0\t5\n\n1\tx\n"
           "0\t\t\t\t\t\t\t\t\t\t\t\t\t\ta\r\n1\t3");
    fuzz_seed_text(dir, "csv-headers", 1 | (11 << 3),
           "click,a,b,c,d,e,f,g\n1,0.5,-2,x,,y,u|v,zz\nclick,a,b,c,d,e,f,g\n0,,,,,,,\n");
    fuzz_seed_text(dir, "csv-header-true", 2 | (20 << 3), "i\tm\tlabel\td\nq\ta;b\t+1\t2.5\n");
    fuzz_seed_text(dir, "libsvm", 3, "+1 3:1 11:0.5\n-1\n\n0 7:0\nbad\n1 1:1e39\n");
    fuzz_seed_text(dir, "libffm-no-newline", 4 | (31 << 3), "1 0:5:1 3:9:0.5\n0 2:1:2");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    fuzz_seed_mode(s_write_seeds);
    const char *tmp = fuzz_tmpdir("reader");
    snprintf(s_paths[0], sizeof s_paths[0], "%s/a.txt", tmp);
    snprintf(s_paths[1], sizeof s_paths[1], "%s/b.txt", tmp);
    fuzz_load_layouts();
    return 0;
}
