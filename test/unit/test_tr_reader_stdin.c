/* test_tr_reader_stdin.c - unit tests of tr_reader on standard input ("-"):
 * a pipe written by another thread in small pieces, lines split across
 * writes, is read whole by part 0 of 1, 2 and 3 parts and by no other part,
 * in order, with bad lines counted and their gaps kept; "-" beside another
 * file and "-" as training data (tr_reader_total_bytes) are refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ss_cfg.h"
#include "ss_err.h"
#include "tr_parse.h"
#include "tr_reader.h"

#define N_LINES 500

static char g_text[N_LINES * 400];   /* a line is under 300 bytes */
static size_t g_len;
static float g_dense0[N_LINES];   /* I1 of each good line, as the parser gives it */
static int g_good;                /* good lines */

/* Criteo lines with dense value I1 = line number; every 50th line bad. */
static void s_make_text(void)
{
    g_len = 0;
    g_good = 0;
    for (int i = 0; i < N_LINES; i++) {
        if (i % 50 == 49) {
            g_len += (size_t)snprintf(g_text + g_len, sizeof g_text - g_len, "bad %d\n", i);
            continue;
        }
        g_len += (size_t)snprintf(g_text + g_len, sizeof g_text - g_len, "%d\t%d", i % 2, i);
        for (int j = 1; j < 13; j++)
            g_len += (size_t)snprintf(g_text + g_len, sizeof g_text - g_len, "\t%d", j);
        for (int j = 0; j < 26; j++)
            g_len += (size_t)snprintf(g_text + g_len, sizeof g_text - g_len, "\t%08x", i + j);
        struct tr_example ex;
        const char *start = memrchr(g_text, '\n', g_len);
        start = start ? start + 1 : g_text;
        assert_int_equal(tr_parse_criteo(start, (size_t)(g_text + g_len - start), &ex), 0);
        g_dense0[g_good++] = ex.dense[0];
        g_text[g_len++] = '\n';
    }
}

/* Write g_text to the pipe in pieces of 37 bytes, then close it. */
static void *s_writer(void *arg)
{
    int fd = *(int *)arg;
    for (size_t at = 0; at < g_len;) {
        size_t n = g_len - at < 37 ? g_len - at : 37;
        ssize_t k = write(fd, g_text + at, n);
        if (k <= 0)
            break;
        at += (size_t)k;
    }
    close(fd);
    return NULL;
}

/* Read "-" as part `part` of n_parts with a pipe on standard input; returns
 * the examples read, checking their order (I1 = the line number). */
static int s_read_parts(uint32_t part, uint32_t n_parts, uint64_t *bad)
{
    int p[2], saved = dup(STDIN_FILENO);
    assert_int_equal(pipe(p), 0);
    assert_int_equal(dup2(p[0], STDIN_FILENO), STDIN_FILENO);
    close(p[0]);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, s_writer, &p[1]), 0);
    const char *pats[] = {TR_READER_STDIN};
    char err[512];
    tr_reader_t *rd = tr_reader_new(NULL, pats, 1, 0, 1, part, n_parts, err, sizeof err);
    assert_non_null(rd);
    tr_reader_keep_gaps(rd);
    struct tr_rows rows;
    tr_rows_init(&rows, 64, TR_N_DENSE, TR_N_SPARSE);
    int n, total = 0;
    uint64_t gaps = 0;
    while ((n = tr_reader_read(rd, &rows, 64)) > 0) {
        for (int i = 0; i < n; i++) {
            assert_true(total + i < g_good);
            assert_true(rows.dense[i * TR_N_DENSE] == g_dense0[total + i]);  /* in order */
            gaps += tr_reader_gaps(rd)[i];
        }
        total += n;
    }
    assert_int_equal(n, 0);
    struct tr_reader_stats st;
    tr_reader_stats(rd, &st);
    *bad = st.bad_lines;
    if (part == 0)  /* line 499, the last, is bad: after the last row, in no gap */
        assert_int_equal(gaps + 1, st.bad_lines);
    tr_rows_fini(&rows);
    tr_reader_destroy(&rd);
    if (part != 0) {  /* nobody reads the pipe: drain it for the writer */
        char buf[4096];
        while (read(STDIN_FILENO, buf, sizeof buf) > 0)
            ;
    }
    pthread_join(t, NULL);
    dup2(saved, STDIN_FILENO);
    close(saved);
    return total;
}

static void test_stdin_whole_in_part0(void **state)
{
    (void)state;
    s_make_text();
    uint64_t bad;
    for (uint32_t n_parts = 1; n_parts <= 3; n_parts++) {
        assert_int_equal(s_read_parts(0, n_parts, &bad), N_LINES - N_LINES / 50);
        assert_int_equal(bad, N_LINES / 50);
        for (uint32_t k = 1; k < n_parts; k++) {
            assert_int_equal(s_read_parts(k, n_parts, &bad), 0);
            assert_int_equal(bad, 0);
        }
    }
}

static void test_stdin_refusals(void **state)
{
    (void)state;
    char err[512];
    const char *two[] = {TR_READER_STDIN, "/etc/hostname"};
    assert_null(tr_reader_new(NULL, two, 2, 0, 1, 0, 1, err, sizeof err));
    assert_non_null(strstr(err, "standard input ('-') must be the only input file"));
    const char *one[] = {TR_READER_STDIN};
    assert_int_equal(tr_reader_total_bytes(one, 1, err, sizeof err), SS_E_INVAL);
    assert_non_null(strstr(err, "not trained on"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stdin_whole_in_part0),
        cmocka_unit_test(test_stdin_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
