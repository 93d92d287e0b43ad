/* test_tr_predict.c - unit tests of trainer/tr_predict: the parts joined in
 * order with their "nan" lines, the "%.9g" text read back as the same float,
 * and nothing left behind (no output, no temporary file) when the output is
 * not committed or cannot be created. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ss_err.h"
#include "tr_predict.h"

static char g_dir[256];

static int s_setup(void **state)
{
    snprintf(g_dir, sizeof g_dir, "%s/tr_predict_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR")
                                                                            : "/tmp");
    return mkdtemp(g_dir) ? 0 : -1;
}

/* Files left in the folder. */
static int s_count_files(void)
{
    DIR *d = opendir(g_dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static int s_teardown(void **state)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Whole text of path (caller frees). */
static char *s_slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Three parts written out of order are joined in part order; gaps become
 * "nan" lines before their row (none with keep_bad off); only the output is
 * left. */
static void test_join_in_order(void **state)
{
    char path[300], err[512] = "";
    snprintf(path, sizeof path, "%s/pred.txt", g_dir);
    tr_pred_out_t *po = tr_pred_out_new(path, 3, err, sizeof err);
    assert_non_null(po);
    assert_int_equal(s_count_files(), 3);
    const float a[2] = {0.25f, 0.5f}, b[1] = {0.125f}, c[3] = {1.0f, 0.0f, 0.75f};
    const uint32_t ga[2] = {0, 2}, gc[3] = {1, 0, 0};
    assert_int_equal(tr_pred_write(tr_pred_out_part(po, 2), c, gc, 3, 1), 0);
    assert_int_equal(tr_pred_write_nan(tr_pred_out_part(po, 2), 2), 0);
    assert_int_equal(tr_pred_write(tr_pred_out_part(po, 0), a, ga, 2, 1), 0);
    assert_int_equal(tr_pred_write(tr_pred_out_part(po, 1), b, NULL, 1, 1), 0);
    assert_int_equal(access(path, F_OK), -1);  /* nothing at path before the commit */
    assert_int_equal(tr_pred_out_commit(po, err, sizeof err), 0);
    tr_pred_out_destroy(&po);
    char *text = s_slurp(path);
    assert_string_equal(text, "0.25\nnan\nnan\n0.5\n0.125\nnan\n1\n0\n0.75\nnan\nnan\n");
    free(text);
    assert_int_equal(s_count_files(), 1);
    /* keep_bad off: the gaps write nothing; a second output replaces the first */
    po = tr_pred_out_new(path, 1, err, sizeof err);
    assert_non_null(po);
    assert_int_equal(tr_pred_write(tr_pred_out_part(po, 0), a, ga, 2, 0), 0);
    assert_int_equal(tr_pred_out_commit(po, err, sizeof err), 0);
    tr_pred_out_destroy(&po);
    text = s_slurp(path);
    assert_string_equal(text, "0.25\n0.5\n");
    free(text);
    assert_int_equal(s_count_files(), 1);
}

/* Not committed (the run failed): the temporary parts go, an existing
 * output stays as it was. */
static void test_abort_leaves_nothing(void **state)
{
    char path[300], err[512] = "";
    snprintf(path, sizeof path, "%s/pred.txt", g_dir);
    FILE *f = fopen(path, "w");
    fputs("old\n", f);
    fclose(f);
    tr_pred_out_t *po = tr_pred_out_new(path, 4, err, sizeof err);
    assert_non_null(po);
    const float p[1] = {0.5f};
    assert_int_equal(tr_pred_write(tr_pred_out_part(po, 3), p, NULL, 1, 1), 0);
    assert_int_equal(s_count_files(), 5);
    tr_pred_out_destroy(&po);
    assert_int_equal(s_count_files(), 1);
    char *text = s_slurp(path);
    assert_string_equal(text, "old\n");
    free(text);
    /* a folder that does not exist: a clear error, nothing created */
    snprintf(path, sizeof path, "%s/no/such/pred.txt", g_dir);
    assert_null(tr_pred_out_new(path, 2, err, sizeof err));
    assert_non_null(strstr(err, "cannot create"));
    assert_non_null(strstr(err, "No such file or directory"));
}

/* "%.9g" reads back as the same float: every power-of-two scale and a
 * sweep of bit patterns in (0, 1). */
static void test_round_trip(void **state)
{
    char path[300], err[512] = "";
    snprintf(path, sizeof path, "%s/rt.txt", g_dir);
    enum { N = 4096 };
    float *v = malloc(N * sizeof *v);
    for (uint32_t i = 0; i < N; i++) {
        uint32_t bits = 0x33d6bf95u + i * 0x000c1234u;  /* 1e-7 .. just below 1 */
        memcpy(&v[i], &bits, sizeof bits);
        if (!(v[i] < 1.0f))
            v[i] = nextafterf(1.0f, 0.0f);
    }
    tr_pred_out_t *po = tr_pred_out_new(path, 1, err, sizeof err);
    assert_non_null(po);
    assert_int_equal(tr_pred_write(tr_pred_out_part(po, 0), v, NULL, N, 1), 0);
    assert_int_equal(tr_pred_out_commit(po, err, sizeof err), 0);
    tr_pred_out_destroy(&po);
    FILE *f = fopen(path, "r");
    char line[64];
    for (uint32_t i = 0; i < N; i++) {
        assert_non_null(fgets(line, sizeof line, f));
        float back = strtof(line, NULL);
        if (memcmp(&back, &v[i], sizeof back) != 0)
            fail_msg("row %u: %.9g printed as %s", i, (double)v[i], line);
    }
    assert_null(fgets(line, sizeof line, f));
    fclose(f);
    free(v);
}

/* Everything readable now from fd (a pipe, non-blocking), appended to buf. */
static size_t s_drain(int fd, char *buf, size_t have, size_t cap)
{
    ssize_t r;
    while (have + 1 < cap && (r = read(fd, buf + have, cap - 1 - have)) > 0)
        have += (size_t)r;
    buf[have] = '\0';
    return have;
}

/* Stream mode: the parts are nameless from the start (no file in the
 * folder); part 0 reaches the output while its writer still writes, in
 * whole lines, part 1
 * waits for part 0 to be whole; the output is byte for byte the text the
 * file mode writes for the same calls (test_join_in_order). */
static void test_stream_in_order(void **state)
{
    char err[512] = "", out[4096];
    int p[2];
    size_t copied, have = 0;
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    tr_pred_out_t *po = tr_pred_out_new_stream(p[1], g_dir, 3, NULL, err, sizeof err);
    assert_non_null(po);
    assert_int_equal(s_count_files(), 0);
    const float a[2] = {0.25f, 0.5f}, b[1] = {0.125f}, c[3] = {1.0f, 0.0f, 0.75f};
    const uint32_t ga[2] = {0, 2}, gc[3] = {1, 0, 0};
    /* parts 1 and 2 done first: nothing can go before part 0 */
    assert_int_equal(tr_pred_write(tr_pred_out_part(po, 2), c, gc, 3, 1), 0);
    assert_int_equal(tr_pred_write_nan(tr_pred_out_part(po, 2), 2), 0);
    assert_int_equal(tr_pred_write(tr_pred_out_part(po, 1), b, NULL, 1, 1), 0);
    assert_int_equal(tr_pred_out_part_done(po, 1, err, sizeof err), 0);
    assert_int_equal(tr_pred_out_part_done(po, 2, err, sizeof err), 0);
    assert_int_equal(tr_pred_out_pump(po, &copied, err, sizeof err), 0);
    assert_int_equal(copied, 0);
    /* part 0, flushed but not done: its bytes go, part 1 still waits */
    FILE *f0 = tr_pred_out_part(po, 0);
    assert_int_equal(tr_pred_write(f0, a, ga, 1, 1), 0);
    assert_int_equal(fflush(f0), 0);
    assert_int_equal(tr_pred_out_pump(po, &copied, err, sizeof err), 0);
    assert_int_equal(copied, 5);
    have = s_drain(p[0], out, have, sizeof out);
    assert_string_equal(out, "0.25\n");
    /* a flush that ends mid-line: only the whole lines go while part 0 is
     * being written */
    assert_true(fputs("nan\nna", f0) >= 0);
    assert_int_equal(fflush(f0), 0);
    assert_int_equal(tr_pred_out_pump(po, &copied, err, sizeof err), 0);
    assert_int_equal(copied, 4);
    have = s_drain(p[0], out, have, sizeof out);
    assert_string_equal(out, "0.25\nnan\n");
    assert_true(fputs("n\n", f0) >= 0);
    assert_int_equal(tr_pred_write(f0, a + 1, NULL, 1, 1), 0);
    assert_int_equal(tr_pred_out_commit(po, err, sizeof err), 0);
    assert_int_equal(tr_pred_out_lines(po), 11);
    assert_int_equal(tr_pred_out_reader_gone(po), 0);
    tr_pred_out_destroy(&po);
    have = s_drain(p[0], out, have, sizeof out);
    assert_string_equal(out, "0.25\nnan\nnan\n0.5\n0.125\nnan\n1\n0\n0.75\nnan\nnan\n");
    assert_int_equal(s_count_files(), 0);
    close(p[0]);
    close(p[1]);
}

/* Stream mode: a reader that closes the pipe makes the pump fail with a
 * message that says so and how many lines went out; nothing is left. */
static void test_stream_reader_gone(void **state)
{
    char err[512] = "";
    int p[2];
    size_t copied;
    signal(SIGPIPE, SIG_IGN);
    assert_int_equal(pipe(p), 0);
    tr_pred_out_t *po = tr_pred_out_new_stream(p[1], g_dir, 2, NULL, err, sizeof err);
    assert_non_null(po);
    const float v[3] = {0.5f, 0.25f, 0.125f};
    assert_int_equal(tr_pred_write(tr_pred_out_part(po, 0), v, NULL, 3, 1), 0);
    assert_int_equal(tr_pred_out_part_done(po, 0, err, sizeof err), 0);
    assert_int_equal(tr_pred_out_pump(po, &copied, err, sizeof err), 0);
    assert_int_equal(copied, 15);
    close(p[0]);  /* the reader goes away */
    assert_int_equal(tr_pred_write(tr_pred_out_part(po, 1), v, NULL, 3, 1), 0);
    assert_int_equal(tr_pred_out_part_done(po, 1, err, sizeof err), 0);
    int rc = tr_pred_out_pump(po, &copied, err, sizeof err);
    assert_int_not_equal(rc, 0);
    assert_int_equal(tr_pred_out_reader_gone(po), 1);
    assert_string_equal(err, "standard output was closed by its reader after 3 prediction "
                             "line(s) (EPIPE: e.g. '| head' has read what it wanted)");
    tr_pred_out_destroy(&po);
    assert_int_equal(s_count_files(), 0);
    close(p[1]);
    /* a folder that does not exist: a clear error */
    char bad[300];
    snprintf(bad, sizeof bad, "%s/no/such", g_dir);
    assert_null(tr_pred_out_new_stream(1, bad, 2, NULL, err, sizeof err));
    assert_non_null(strstr(err, "cannot create"));
    assert_non_null(strstr(err, "No such file or directory"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_join_in_order, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_abort_leaves_nothing, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_round_trip, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_stream_in_order, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_stream_reader_gone, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
