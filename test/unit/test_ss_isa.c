/* test_ss_isa.c - unit tests of common/ss_isa: the SS_ISA cap and the names.
 *
 * ss_isa_get() computes its answer once per process, so each setting of
 * SS_ISA is tried in a forked child that reports the level as its exit
 * status. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ss_isa.h"
#include "ss_log.h"

/* ss_isa_get() in a child with SS_ISA = value (NULL: unset). */
static int s_level_with(const char *value)
{
    pid_t pid = fork();
    int status;
    assert_true(pid >= 0);
    if (pid == 0) {
        if (value)
            setenv("SS_ISA", value, 1);
        else
            unsetenv("SS_ISA");
        _exit((int)ss_isa_get());
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* SS_ISA caps the level and never raises it; an unknown value is no cap. */
static void test_cap(void **state)
{
    (void)state;
    int best = s_level_with(NULL);
    print_message("this machine: %s\n", ss_isa_name((enum ss_isa)best));
    assert_true(best >= SS_ISA_PORTABLE && best <= SS_ISA_AMX);
    assert_int_equal(s_level_with("portable"), SS_ISA_PORTABLE);
    assert_int_equal(s_level_with("avx512"), best < SS_ISA_AVX512 ? best : SS_ISA_AVX512);
    assert_int_equal(s_level_with("amx"), best);
    assert_int_equal(s_level_with("bogus"), best);
    assert_int_equal(s_level_with(""), best);
}

/* The same answer on every call, and the names of the levels. */
static void test_names_stable(void **state)
{
    (void)state;
    enum ss_isa a = ss_isa_get();
    assert_int_equal(ss_isa_get(), a);
    assert_string_equal(ss_isa_name(SS_ISA_PORTABLE), "portable");
    assert_string_equal(ss_isa_name(SS_ISA_AVX512), "avx512");
    assert_string_equal(ss_isa_name(SS_ISA_AMX), "amx");
}

int main(void)
{
    ss_log_init("test", SS_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_names_stable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
