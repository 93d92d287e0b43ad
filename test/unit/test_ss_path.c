/* test_ss_path.c - unit tests of the launchers' path rules (ss_path): the
 * logical working directory ($PWD through a symbolic link, a $PWD that is
 * not this folder), folders named as "cd DIR && pwd" names them (relative
 * and absolute, ".", "..", repeated slashes, ".." after a file or a missing
 * folder, ".." after a symbolic link: logical when the text names a
 * folder, else physical), paths tested as "test" tests them (from a given
 * folder, ".." physical), the PATH search (missing entries, empty ones,
 * folders and non-executables skipped) and the binaries' folder (--bin,
 * ../bin, the script's own folder, PATH, none). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ss_err.h"
#include "ss_path.h"
#include "t.h"

/* the scratch folder (its real path), and the PATH to put back */
static char s_dir[PATH_MAX], s_old_path[8192];

/* s_dir/rel into buf. */
static const char *s_at(const char *rel, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", s_dir, rel);
    return buf;
}

static void s_mkdir(const char *rel)
{
    char p[PATH_MAX];
    assert_int_equal(mkdir(s_at(rel, p, sizeof p), 0755), 0);
}

static void s_file(const char *rel, mode_t mode)
{
    char p[PATH_MAX];
    FILE *fp = fopen(s_at(rel, p, sizeof p), "w");
    assert_non_null(fp);
    fputs("#!/bin/sh\n", fp);
    fclose(fp);
    assert_int_equal(chmod(p, mode), 0);
}

/* ss_path_dir(s_dir, dir) must be 0 with s_dir/want ("" : s_dir itself;
 * a leading '/': want as is). */
static void s_dir_is(const char *dir, const char *want)
{
    char got[PATH_MAX], exp[PATH_MAX];
    if (want[0] == '/')
        snprintf(exp, sizeof exp, "%s", want);
    else
        snprintf(exp, sizeof exp, "%s%s%s", s_dir, want[0] ? "/" : "", want);
    assert_int_equal(ss_path_dir(s_dir, dir, got, sizeof got), 0);
    assert_string_equal(got, exp);
}

static void test_cwd(void **state)
{
    (void)state;
    char got[PATH_MAX], want[PATH_MAX];
    /* $PWD through a symbolic link names this folder: it stays so */
    assert_int_equal(chdir(s_at("real/deep", want, sizeof want)), 0);
    setenv("PWD", s_at("link", want, sizeof want), 1);
    assert_int_equal(ss_path_cwd(got, sizeof got), 0);
    assert_string_equal(got, want);
    /* a $PWD that is another folder, or relative: the physical one */
    setenv("PWD", s_dir, 1);
    ss_path_cwd(got, sizeof got);
    assert_string_equal(got, s_at("real/deep", want, sizeof want));
    setenv("PWD", "link", 1);
    ss_path_cwd(got, sizeof got);
    assert_string_equal(got, want);
    unsetenv("PWD");
    ss_path_cwd(got, sizeof got);
    assert_string_equal(got, want);
    /* too long for the buffer: "/", and it says so */
    assert_int_equal(ss_path_cwd(got, 4), SS_E_NOTFOUND);
    assert_string_equal(got, "/");
    assert_int_equal(chdir(s_dir), 0);
}

static void test_dir(void **state)
{
    (void)state;
    char got[PATH_MAX], want[PATH_MAX];
    s_dir_is("sub", "sub");
    s_dir_is(".", "");
    s_dir_is("", "");
    s_dir_is("./sub/../sub//.", "sub");
    s_dir_is("sub/..", "");
    s_dir_is(s_at("real/./deep/", want, sizeof want), "real/deep");
    s_dir_is("/", "/");
    s_dir_is("/..", "/");
    s_dir_is("/../../tmp/..", "/");
    /* a symbolic link stays in the name; ".." after it is textual (as
     * cd's $PWD), so link/.. is s_dir, not real */
    s_dir_is("link", "link");
    s_dir_is("link/..", "");
    s_dir_is("link/../sub", "sub");
    /* ... unless the text names no folder: the kernel's path (real/x) */
    s_dir_is("link/../x", "real/x");
    /* ".." after a file or after nothing: cd fails */
    assert_int_equal(ss_path_dir(s_dir, "file/..", got, sizeof got), SS_E_NOTFOUND);
    assert_int_equal(ss_path_dir(s_dir, "file/../sub", got, sizeof got), SS_E_NOTFOUND);
    assert_int_equal(ss_path_dir(s_dir, "missing/../sub", got, sizeof got), SS_E_NOTFOUND);
    /* not a folder, or not there */
    assert_int_equal(ss_path_dir(s_dir, "file", got, sizeof got), SS_E_NOTFOUND);
    assert_int_equal(ss_path_dir(s_dir, "missing", got, sizeof got), SS_E_NOTFOUND);
    /* relative to the folder given, not to ours */
    assert_int_equal(chdir("/"), 0);
    s_dir_is("sub", "sub");
    assert_int_equal(chdir(s_dir), 0);
    /* a name longer than the buffer */
    assert_int_equal(ss_path_dir(s_dir, "sub", got, 4), SS_E_RANGE);
}

static void test_test(void **state)
{
    (void)state;
    char abs[PATH_MAX];
    assert_true(ss_path_test(s_dir, "file", 'f'));
    assert_false(ss_path_test(s_dir, "file", 'd'));
    assert_false(ss_path_test(s_dir, "file", 'x'));
    assert_true(ss_path_test(s_dir, "sub", 'd'));
    assert_false(ss_path_test(s_dir, "sub", 'f'));
    assert_true(ss_path_test(s_dir, "bin/shadow-ps", 'x'));
    assert_true(ss_path_test("/", s_at("file", abs, sizeof abs), 'f'));
    assert_false(ss_path_test(s_dir, "missing", 'f'));
    /* ".." as the kernel takes it: after the link, in real/ */
    assert_true(ss_path_test(s_dir, "link/../x", 'd'));
    assert_false(ss_path_test(s_dir, "link/../sub", 'd'));
    assert_false(ss_path_test(s_dir, "file/../sub", 'd'));
    /* from the folder given */
    assert_int_equal(chdir("/"), 0);
    assert_true(ss_path_test(s_dir, "file", 'f'));
    assert_int_equal(chdir(s_dir), 0);
}

static void test_search(void **state)
{
    (void)state;
    char got[PATH_MAX], path[4 * PATH_MAX];
    /* missing folders, a folder named like the program and a file that is
     * not executable are passed over */
    snprintf(path, sizeof path, "/no/such:%s/dirprog:%s/noexec:pathdir:/no/more", s_dir, s_dir);
    setenv("PATH", path, 1);
    assert_int_equal(ss_path_search(s_dir, "shadow-ps", got, sizeof got), 0);
    assert_string_equal(got, "pathdir");   /* as written, tested from s_dir */
    assert_int_equal(ss_path_search(s_dir, "shadow-ps", NULL, 0), 0);
    assert_int_equal(ss_path_search("/", "shadow-ps", got, sizeof got), SS_E_NOTFOUND);
    assert_string_equal(got, "");
    assert_int_equal(ss_path_search(s_dir, "nope", NULL, 0), SS_E_NOTFOUND);
    /* an empty entry (leading, inner, trailing) is "." */
    static const char *const empties[] = {":/no/such", "/no/such::/no/more", "/no/such:"};
    for (size_t i = 0; i < 3; i++) {
        setenv("PATH", empties[i], 1);
        assert_int_equal(ss_path_search(s_at("pathdir", path, sizeof path), "shadow-ps", got,
                                        sizeof got), 0);
        assert_string_equal(got, ".");
    }
    unsetenv("PATH");
    assert_int_equal(ss_path_search(s_dir, "shadow-ps", got, sizeof got), SS_E_NOTFOUND);
}

static void test_find_bin(void **state)
{
    (void)state;
    char got[PATH_MAX], here[PATH_MAX], want[PATH_MAX];
    setenv("PATH", "/no/such:pathdir", 1);
    /* --bin as given, whatever is there */
    ss_path_find_bin(s_dir, "nobin", s_at("scripts", here, sizeof here), "shadow-ps", got,
                     sizeof got);
    assert_string_equal(got, "nobin");
    /* a checkout: ../bin next to the script */
    ss_path_find_bin(s_dir, "", here, "shadow-ps", got, sizeof got);
    snprintf(want, sizeof want, "%s/../bin", here);
    assert_string_equal(got, want);
    /* installed: the script's own folder */
    ss_path_find_bin(s_dir, NULL, s_at("opt/inst", here, sizeof here), "shadow-ps", got,
                     sizeof got);
    assert_string_equal(got, here);
    /* neither: PATH (from the working directory); no script: PATH too */
    ss_path_find_bin(s_dir, NULL, s_at("real/deep", here, sizeof here), "shadow-ps", got,
                     sizeof got);
    assert_string_equal(got, "pathdir");
    ss_path_find_bin(s_dir, NULL, NULL, "shadow-ps", got, sizeof got);
    assert_string_equal(got, "pathdir");
    /* nowhere */
    ss_path_find_bin(s_dir, NULL, here, "shadow-none", got, sizeof got);
    assert_string_equal(got, "/nonexistent");
}

static int s_setup(void **state)
{
    (void)state;
    char tmp[PATH_MAX], p[PATH_MAX];
    if (t_tmpdir(tmp, sizeof tmp, "path") != 0 || !realpath(tmp, s_dir))
        return -1;
    const char *old = getenv("PATH");
    snprintf(s_old_path, sizeof s_old_path, "%s", old ? old : "");
    s_mkdir("real");
    s_mkdir("real/deep");
    s_mkdir("real/x");
    s_mkdir("sub");
    s_mkdir("scripts");
    s_mkdir("bin");
    s_mkdir("opt");
    s_mkdir("opt/inst");
    s_mkdir("pathdir");
    s_mkdir("dirprog");
    s_mkdir("dirprog/shadow-ps");
    s_mkdir("noexec");
    s_file("file", 0644);
    s_file("bin/shadow-ps", 0755);
    s_file("opt/inst/shadow-ps", 0755);
    s_file("pathdir/shadow-ps", 0755);
    s_file("noexec/shadow-ps", 0644);
    if (symlink("real/deep", s_at("link", p, sizeof p)) != 0 || chdir(s_dir) != 0)
        return -1;
    setenv("PWD", s_dir, 1);
    return 0;
}

/* After every test: the PATH, $PWD and folder the tests start with. */
static int s_restore(void **state)
{
    (void)state;
    setenv("PATH", s_old_path, 1);
    setenv("PWD", s_dir, 1);
    return chdir(s_dir) == 0 ? 0 : -1;
}

/* The group's end: the scratch folder removed. */
static int s_remove(void **state)
{
    (void)state;
    setenv("PATH", s_old_path, 1);
    t_rmtree(s_dir);
    return chdir("/") == 0 ? 0 : -1;   /* out of the folder removed */
}

int main(void)
{
    /* one scratch folder for the group: the tests only read it */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_cwd, s_restore),
        cmocka_unit_test_teardown(test_dir, s_restore),
        cmocka_unit_test_teardown(test_test, s_restore),
        cmocka_unit_test_teardown(test_search, s_restore),
        cmocka_unit_test_teardown(test_find_bin, s_restore),
    };
    return cmocka_run_group_tests(tests, s_setup, s_remove);
}
