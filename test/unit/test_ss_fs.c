/* test_ss_fs.c - the file-system helpers: atomic file writes (pieces in
 * order, no temp file left, errors naming the file), a folder put in the
 * place of another in one step (the old contents gone, the new ones there;
 * with no folder in place, a rename; a failure leaves the destination as it
 * was), and rm -rf. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "t.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ss_err.h"
#include "ss_fs.h"

static int setup(void **state)
{
    return t_fix_setup(state, "fs", "file");
}

static int teardown(void **state)
{
    return t_fix_teardown(state);
}

/* Contents of path (at most len - 1 bytes) into buf; returns the length or -1. */
static long s_read(const char *path, char *buf, size_t len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return -1;
    size_t n = fread(buf, 1, len - 1, fp);
    buf[n] = 0;
    fclose(fp);
    return (long)n;
}

static void s_put(const char *dir, const char *name, const char *text)
{
    char path[600], err[256];
    struct ss_fs_piece p = {text, strlen(text)};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(ss_fs_write_atomic(path, &p, 1, err, sizeof err), 0);
}

static void test_write_atomic(void **state)
{
    struct t_fix *f = *state;
    char buf[64], err[512] = "", bad[400];
    struct ss_fs_piece p[3] = {{"ab", 2}, {"", 0}, {"cde", 3}};
    assert_int_equal(ss_fs_write_atomic(f->path, p, 3, err, sizeof err), 0);
    assert_int_equal(s_read(f->path, buf, sizeof buf), 5);
    assert_string_equal(buf, "abcde");
    assert_int_equal(access(f->tmp, F_OK), -1);
    /* a folder that does not exist: the error names the file and why */
    snprintf(bad, sizeof bad, "%s/no/such/file", f->dir);
    assert_int_equal(ss_fs_write_atomic(bad, p, 3, err, sizeof err), SS_E_IO);
    assert_non_null(strstr(err, bad));
    assert_non_null(strstr(err, "No such file or directory"));
    assert_int_equal(ss_fs_errno_rc(ENOSPC), SS_E_NOSPC);
    assert_string_equal(ss_strerror(SS_E_NOSPC), "no space left on device");
}

static void test_replace_dir(void **state)
{
    struct t_fix *f = *state;
    char dst[300], src[320], buf[64], err[512] = "", path[400];
    snprintf(dst, sizeof dst, "%s/model", f->dir);
    snprintf(src, sizeof src, "%s/model.new-1", f->dir);
    /* no folder in place yet: a rename */
    assert_int_equal(ss_mkdirs(src), 0);
    s_put(src, "a", "first");
    assert_int_equal(ss_fs_replace_dir(src, dst, err, sizeof err), 0);
    assert_int_equal(access(src, F_OK), -1);
    snprintf(path, sizeof path, "%s/a", dst);
    assert_int_equal(s_read(path, buf, sizeof buf), 5);
    /* a folder in place: exchanged, the old contents removed */
    assert_int_equal(ss_mkdirs(src), 0);
    s_put(src, "b", "second");
    assert_int_equal(ss_fs_replace_dir(src, dst, err, sizeof err), 0);
    assert_int_equal(access(src, F_OK), -1);
    assert_int_equal(access(path, F_OK), -1);  /* model/a was the old set's */
    snprintf(path, sizeof path, "%s/b", dst);
    assert_int_equal(s_read(path, buf, sizeof buf), 6);
    assert_string_equal(buf, "second");
    /* a source that does not exist: an error, model/ as it was */
    assert_int_equal(ss_fs_replace_dir(src, dst, err, sizeof err), SS_E_IO);
    assert_non_null(strstr(err, src));
    assert_int_equal(s_read(path, buf, sizeof buf), 6);
}

static void test_remove_tree(void **state)
{
    struct t_fix *f = *state;
    char top[300], sub[320];
    snprintf(top, sizeof top, "%s/t", f->dir);
    snprintf(sub, sizeof sub, "%s/t/u/v", f->dir);
    assert_int_equal(ss_mkdirs(sub), 0);
    s_put(sub, "x", "1");
    s_put(top, "y", "2");
    assert_int_equal(ss_fs_remove_tree(top), 0);
    assert_int_equal(access(top, F_OK), -1);
    assert_int_equal(ss_fs_remove_tree(top), 0);  /* missing: not an error */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_write_atomic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_tree, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
