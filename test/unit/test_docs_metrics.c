/* test_docs_metrics.c - docs/metrics.md lists exactly the tables of figures.
 *
 * The PS's table (server/ps_stats.h) must appear in the "Parameter servers"
 * section row for row, as `shadow-ps --list-metrics` prints it. The
 * trainer's table (TR_STATS) must appear in the "Trainers" section row for
 * row too, help included, as `shadow-trainer --list-metrics` prints it; that
 * half runs where the table has its own header, trainer/tr_stats.h. Run from
 * the repository root (scripts/run-tests.sh does). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_service.h"
#include "ss_mem.h"
#include "ss_stats.h"
#if defined(__has_include)
#if __has_include("tr_stats.h")
#include "tr_stats.h"
#define HAVE_TR_STATS 1
#endif
#endif

#define MAX_ROWS 256

/* The rows of a markdown table: owned copies, without the newline. */
struct rows {
    size_t n;
    char *row[MAX_ROWS];
};

static void s_rows_free(struct rows *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->row[i]);
    r->n = 0;
}

/* Append each line of text starting with "| `" to r. */
static void s_rows_from_text(struct rows *r, const char *text)
{
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len > 3 && strncmp(p, "| `", 3) == 0) {
            assert_true(r->n < MAX_ROWS);
            r->row[r->n++] = strndup(p, len);
        }
        p += len + (nl ? 1 : 0);
    }
}

/* The table rows of docs/metrics.md's section that starts with heading. */
static void s_doc_section(struct rows *r, const char *heading)
{
    FILE *f = fopen("docs/metrics.md", "r");
    if (!f)
        fail_msg("cannot open docs/metrics.md: run from the repository root");
    char line[4096];
    int in = 0, in_table = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "## ", 3) == 0) {
            if (in)
                break;
            in = strcmp(line, heading) == 0;
            continue;
        }
        if (!in)
            continue;
        if (strncmp(line, "| `", 3) == 0) {
            in_table = 1;
            assert_true(r->n < MAX_ROWS);
            r->row[r->n++] = strdup(line);
        } else if (in_table) {
            break;  /* the first table of the section only */
        }
    }
    fclose(f);
    if (r->n == 0)
        fail_msg("docs/metrics.md: no table under '%s'", heading);
}

/* Length of row up to and including its n_cols'th cell ('|' n_cols + 1). */
static size_t s_cols_len(const char *row, int n_cols)
{
    int bars = 0;
    for (size_t i = 0; row[i]; i++)
        if (row[i] == '|' && ++bars == n_cols + 1)
            return i + 1;
    return strlen(row);
}

/* Index of the first row where doc and table differ in their first n_cols
 * cells (0: whole rows), doc->n or table->n when one has more rows, or -1
 * when they agree. */
static long s_first_diff(const struct rows *doc, const struct rows *table, int n_cols)
{
    size_t n = doc->n < table->n ? doc->n : table->n;
    for (size_t i = 0; i < n; i++) {
        size_t ld = n_cols ? s_cols_len(doc->row[i], n_cols) : strlen(doc->row[i]) + 1;
        size_t lt = n_cols ? s_cols_len(table->row[i], n_cols) : strlen(table->row[i]) + 1;
        if (ld != lt || strncmp(doc->row[i], table->row[i], ld) != 0)
            return (long)i;
    }
    return doc->n == table->n ? -1 : (long)n;
}

static void s_expect_same(const struct rows *doc, const struct rows *table, int n_cols,
                          const char *what)
{
    long i = s_first_diff(doc, table, n_cols);
    if (i < 0)
        return;
    fail_msg("docs/metrics.md, %s table, row %ld:\n  doc:   %s\n  table: %s\n(%zu rows in the "
             "doc, %zu in the table)", what, i + 1,
             (size_t)i < doc->n ? doc->row[i] : "(none)",
             (size_t)i < table->n ? table->row[i] : "(none)", doc->n, table->n);
}

/* The PS rows, as shadow-ps --list-metrics prints them. */
static void s_ps_rows(struct rows *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    assert_non_null(mem);
    ps_service_list_metrics(mem);
    assert_int_equal(fclose(mem), 0);
    s_rows_from_text(r, text);
    free(text);
}

static void test_ps_table_in_doc(void **state)
{
    (void)state;
    struct rows doc = {0}, table = {0};
    s_doc_section(&doc, "## Parameter servers");
    s_ps_rows(&table);
    assert_true(table.n > 40);
    s_expect_same(&doc, &table, 0, "Parameter servers");
    s_rows_free(&doc);
    s_rows_free(&table);
}

/* The check itself fails on a changed, a missing and an extra row. */
static void test_check_catches_changes(void **state)
{
    (void)state;
    struct rows doc = {0}, table = {0};
    s_ps_rows(&doc);
    s_ps_rows(&table);
    assert_int_equal(s_first_diff(&doc, &table, 0), -1);
    doc.row[7][strlen(doc.row[7]) - 3] = 'X';  /* the help of row 8 */
    assert_int_equal(s_first_diff(&doc, &table, 0), 7);
    assert_int_equal(s_first_diff(&doc, &table, 5), 7);  /* help is the fifth cell */
    assert_int_equal(s_first_diff(&doc, &table, 4), -1);
    free(doc.row[--doc.n]);
    doc.row[7][strlen(doc.row[7]) - 3] = table.row[7][strlen(table.row[7]) - 3];
    assert_int_equal(s_first_diff(&doc, &table, 0), (long)doc.n);  /* one missing */
    s_rows_free(&doc);
    s_rows_free(&table);
}

static void test_doc_row_format(void **state)
{
    (void)state;
    static const char *const where[] = {"progress", "eval", "result", "stats"};
    const struct ss_stat_def d = {"rows_evicted_ttl", "shadowsync_ps_rows_evicted_total",
                                  "cause=\"ttl\"", 0, SS_STAT_COUNTER, "rows deleted", 5};
    const struct ss_stat_def e = {"sync_latency_p50_ms", NULL, NULL, 0, SS_STAT_GAUGE,
                                  "median", 0};
    char out[256];
    assert_string_equal(ss_stat_doc_row(&d, NULL, NULL, 0, out, sizeof out),
                        "| `rows_evicted_ttl` | `shadowsync_ps_rows_evicted_total{cause=\"ttl\"}` "
                        "| counter | — | rows deleted |");
    assert_string_equal(ss_stat_doc_row(&d, "rows", where, 4, out, sizeof out),
                        "| `rows_evicted_ttl` | `shadowsync_ps_rows_evicted_total{cause=\"ttl\"}` "
                        "| counter | rows | progress, result | rows deleted |");
    assert_string_equal(ss_stat_doc_row(&e, NULL, where, 4, out, sizeof out),
                        "| `sync_latency_p50_ms` | — | gauge | ms |  | median |");
    assert_string_equal(ss_stat_unit(&e), "ms");
    assert_null(ss_stat_unit(&d));
}

#ifdef HAVE_TR_STATS
/* The trainer rows, as shadow-trainer --list-metrics prints them. */
static void s_tr_rows(struct rows *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    assert_non_null(mem);
    tr_stats_list_metrics(mem);
    assert_int_equal(fclose(mem), 0);
    s_rows_from_text(r, text);
    free(text);
}

static void test_trainer_table_in_doc(void **state)
{
    (void)state;
    struct rows doc = {0}, table = {0};
    s_doc_section(&doc, "## Trainers");
    s_tr_rows(&table);
    assert_int_equal(table.n, TR_N_STATS);
    assert_true(table.n > 40);
    assert_string_equal(table.row[0], "| `rank` | — | info | — | progress, eval, result, stats "
                                      "| trainer rank |");
    s_expect_same(&doc, &table, 0, "Trainers");
    /* a help text that differs (the sixth cell) is caught */
    size_t i = TR_S_selected_on;
    char *h = strrchr(table.row[i], '(');
    assert_non_null(h);
    *h = '[';
    assert_int_equal(s_first_diff(&doc, &table, 0), (long)i);
    assert_int_equal(s_first_diff(&doc, &table, 5), -1);
    s_rows_free(&doc);
    s_rows_free(&table);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_doc_row_format),
        cmocka_unit_test(test_check_catches_changes),
        cmocka_unit_test(test_ps_table_in_doc),
#ifdef HAVE_TR_STATS
        cmocka_unit_test(test_trainer_table_in_doc),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
