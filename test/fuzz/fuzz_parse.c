/* fuzz_parse.c - libFuzzer harness: the data line parsers of tr_parse.h.
 *
 * Input: a layout selector byte, then text. The layouts are real job-file
 * layouts (ss_cfg_load() with --set overrides): criteo_tsv, csv with every
 * column role (comma and tab separated, header auto and true), libsvm and
 * libffm. The text is parsed as one line, and as many lines the way
 * tr_reader reads a file (header check on the first line, a batch of rows
 * refilled when full). Checks:
 *   - a parsed example is well formed: label 0 or 1, finite dense values,
 *     n_fields non-empty fields of finite, nonzero-weight values;
 *   - a bad line leaves rows as they were;
 *   - tr_parse_explain() writes "" exactly for a line that parses;
 *   - for criteo_tsv, tr_parse_criteo() agrees with tr_parse_line(). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_layouts.h"
#include "fuzz_util.h"
#include "ss_cfg.h"
#include "ss_err.h"
#include "tr_parse.h"

#define S_BATCH 8  /* examples per batch in the many-lines pass */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Example b of rows is well formed. */
static void s_check_example(const struct tr_rows *r, uint32_t b)
{
    FUZZ_CHECK(r->labels[b] == 0.0f || r->labels[b] == 1.0f, "label %g", (double)r->labels[b]);
    for (uint32_t j = 0; j < r->n_dense; j++)
        FUZZ_CHECK(isfinite(r->dense[(size_t)b * r->n_dense + j]), "dense %u not finite", j);
    const uint32_t *offs = r->offs + (size_t)b * r->n_fields;
    for (uint32_t f = 0; f < r->n_fields; f++) {
        FUZZ_CHECK(offs[f + 1] > offs[f], "field %u of example %u is empty", f, b);
        for (uint32_t i = offs[f]; i < offs[f + 1]; i++)
            FUZZ_CHECK(isfinite(r->weights[i]) && r->weights[i] != 0.0f,
                       "field %u value %u: weight %g", f, i - offs[f], (double)r->weights[i]);
    }
    FUZZ_CHECK(offs[r->n_fields] <= r->cap, "values past the capacity");
}

/* Parse one line into rows (room for one more) and check the result. */
static int s_line(const struct ss_data_cfg *d, const char *line, size_t len,
                  struct tr_rows *rows)
{
    uint32_t n0 = rows->n;
    size_t v0 = tr_rows_values(rows);
    int rc = tr_parse_line(d, line, len, rows);
    FUZZ_CHECK(rc == 0 || rc == SS_E_PROTO, "tr_parse_line returned %d", rc);
    if (rc == 0) {
        FUZZ_CHECK(rows->n == n0 + 1, "a good line added %u examples", rows->n - n0);
        FUZZ_CHECK(rows->offs[(size_t)n0 * rows->n_fields] == v0, "earlier values moved");
        s_check_example(rows, n0);
    } else {
        FUZZ_CHECK(rows->n == n0 && tr_rows_values(rows) == v0, "a bad line changed rows");
    }
    return rc;
}

/* The whole text as one line, with the explanation and the criteo check. */
static void s_one_line(const struct ss_data_cfg *d, const char *text, size_t len)
{
    struct tr_rows rows;
    char why[256];
    tr_rows_init(&rows, 1, d->n_dense, d->n_fields);
    int rc = s_line(d, text, len, &rows);
    tr_parse_explain(d, text, len, why, sizeof why);
    FUZZ_CHECK((rc == 0) == (why[0] == '\0'), "parse rc %d but explanation '%s'", rc, why);
    (void)tr_parse_is_header(d, text, len);
    if (d->format == SS_DATA_CRITEO_TSV && d->n_dense == TR_N_DENSE &&
        d->n_fields == TR_N_SPARSE) {
        struct tr_example ex;
        int rc2 = tr_parse_criteo(text, len, &ex);
        FUZZ_CHECK(rc2 == rc, "tr_parse_criteo %d, tr_parse_line %d", rc2, rc);
        if (rc == 0) {
            FUZZ_CHECK(ex.label == rows.labels[0], "labels differ");
            FUZZ_CHECK(memcmp(ex.dense, rows.dense, sizeof ex.dense) == 0, "dense differ");
            FUZZ_CHECK(memcmp(ex.keys, rows.keys, sizeof ex.keys) == 0, "keys differ");
        }
    }
    tr_rows_fini(&rows);
}

/* The text as lines, read like tr_reader_read(). */
static void s_many_lines(const struct ss_data_cfg *d, const char *text, size_t len)
{
    struct tr_rows rows;
    const char *p = text, *end = text + len;
    tr_rows_init(&rows, S_BATCH, d->n_dense, d->n_fields);
    for (int first = 1; p < end; first = 0) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (rows.n == rows.max)
            tr_rows_clear(&rows);
        if (!(first && tr_parse_is_header(d, p, n)))
            s_line(d, p, n, &rows);
        p += n + (nl ? 1 : 0);
    }
    tr_rows_fini(&rows);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const struct ss_data_cfg *d = &fuzz_layouts[data[0] % FUZZ_N_LAYOUTS];
    /* a private copy: the parsers must not read past len */
    char *text = malloc(size - 1 ? size - 1 : 1);
    FUZZ_CHECK(text, "out of memory");
    memcpy(text, data + 1, size - 1);
    s_one_line(d, text, size - 1);
    if (memchr(text, '\n', size - 1))
        s_many_lines(d, text, size - 1);
    free(text);
    return 0;
}

/* ------------------------------------------------------------------ seeds */


/* The first lines of a repository sample (run from its root). */
static void s_seed_file(const char *dir, const char *name, unsigned layout, const char *path,
                        int lines)
{
    char buf[8192];
    fuzz_read_lines(path, lines, buf, sizeof buf);
    fuzz_seed_text(dir, name, layout, buf);
}

static void s_write_seeds(const char *dir)
{
    s_seed_file(dir, "criteo", 0, "test/data/criteo/criteo_train_head10k.tsv", 4);
    s_seed_file(dir, "libffm", 4, "test/data/criteo_libffm/xlearn_small_train.txt", 3);
    fuzz_seed_text(dir, "criteo-short", 0, "1\t5\t\t-3\n0\t\t\t\t\t\t\t\t\t\t\t\t\t\t68fd1e64\r\n");
    fuzz_seed_text(dir, "csv", 1, "click,a,b,c,d,e,f,g\n1,0.5,-2,x,,05db9164,u|v||w,zz\n"
                               "0,1e3,,y,z,8 chars!,,\n-1,,,,,,,\n");
    fuzz_seed_text(dir, "csv-tab", 2, "i\tm\tlabel\td\nq\ta;b\t+1\t2.5\n");
    fuzz_seed_text(dir, "libsvm", 3, "+1 3:1 11:0.5 14:-2\n-1\n0 7:0\n1.0 1:1e-3\t2:4\n");
    fuzz_seed_text(dir, "libffm", 4, "1 0:5:1 3:9:0.5 0:6:1\n0 2:1:2\n");
    fuzz_seed_text(dir, "semicolon", 6, "a,b,,c;1\n;0\n");
    s_seed_file(dir, "csv-criteo", 7, "test/data/criteo/criteo_train_head10k.tsv", 2);
    s_seed_file(dir, "avazu", 1, "test/data/avazu/avazu_sample.csv", 3);
    fuzz_seed_text(dir, "bad", 0, "2\tx\n1\t-\t\n1 2:3\n");
    fuzz_seed_text(dir, "libsvm-unlabeled", 8, "3:1 11:0.5 14:-2\n\n7:0\n1 2:4\n");
    fuzz_seed_text(dir, "libffm-unlabeled", 9, "0:5:1 3:9:0.5 0:6:1\n2:1:2\n1 0:1:1\n");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    fuzz_seed_mode(s_write_seeds);
    fuzz_load_layouts();
    return 0;
}
