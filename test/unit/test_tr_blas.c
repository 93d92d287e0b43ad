/* test_tr_blas.c - unit tests of the OpenBLAS kernel choice (tr_blas).
 *
 * The ranking of kernel sets, and the whole mechanism on this machine: main()
 * calls tr_blas_fix_core() like shadow-trainer does, so when OpenBLAS guessed
 * weaker kernels than the CPU has, this binary was re-executed and now runs
 * the right ones. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "tr_blas.h"

/* Which kernel sets are good enough for which CPU. */
static void test_rank(void **state)
{
    (void)state;
    assert_false(tr_blas_core_ok("Prescott", "SkylakeX"));
    assert_false(tr_blas_core_ok("Prescott", "Haswell"));
    assert_false(tr_blas_core_ok("Sandybridge", "Haswell"));
    assert_false(tr_blas_core_ok("Haswell", "SkylakeX"));
    assert_false(tr_blas_core_ok("Zen", "SkylakeX"));
    assert_false(tr_blas_core_ok(NULL, "Haswell"));
    assert_true(tr_blas_core_ok("Zen", "Haswell"));
    assert_true(tr_blas_core_ok("Haswell", "Haswell"));
    assert_true(tr_blas_core_ok("SKYLAKEX", "SkylakeX"));
    assert_true(tr_blas_core_ok("Cooperlake", "SkylakeX"));
    assert_true(tr_blas_core_ok("SapphireRapids", "SkylakeX"));
    assert_true(tr_blas_core_ok("Prescott", NULL));  /* no AVX2: nothing better */
}

/* After tr_blas_fix_core() in main(), OpenBLAS runs kernels as strong as the
 * CPU allows (unless the user pinned OPENBLAS_CORETYPE or we run under
 * valgrind), and the log line says which. */
static void test_this_machine(void **state)
{
    (void)state;
    char line[256];
    const char *best = tr_blas_best_core();
    tr_blas_describe(line, sizeof line);
    assert_non_null(strstr(line, openblas_get_corename()));
    if (getenv("OPENBLAS_CORETYPE") && !getenv("SS_BLAS_REEXEC"))
        skip();  /* the user's choice wins */
    const char *pre = getenv("LD_PRELOAD");
    if (pre && strstr(pre, "vgpreload"))
        skip();
    assert_true(tr_blas_core_ok(openblas_get_corename(), best));
    if (getenv("SS_BLAS_REEXEC"))
        assert_non_null(strstr(line, "set by this program"));
}

int main(int argc, char **argv)
{
    (void)argc;
    tr_blas_fix_core(argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rank),
        cmocka_unit_test(test_this_machine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
