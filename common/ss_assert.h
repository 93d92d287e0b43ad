/* ss_assert.h - always-on assertions for programmer errors.
 *
 * ss_assert() is compiled in every build (also with NDEBUG): it logs the
 * expression, file and line, then aborts. Use it for broken invariants and
 * NULL arguments, never for input from peers, files or config. */
#ifndef SS_ASSERT_H
#define SS_ASSERT_H

#include <stdnoreturn.h>

noreturn void ss_assert_fail(const char *expr, const char *file, int line);

#define ss_assert(expr) \
    ((expr) ? (void)0 : ss_assert_fail(#expr, __FILE__, __LINE__))

#endif
