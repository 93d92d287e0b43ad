/* t_words.h - a launch-data file's words (NUL-terminated, one after the
 * other: common/ss_launch_data.h) built up in memory, for the unit tests
 * that write one. Include after <cmocka.h>. */
#ifndef T_WORDS_H
#define T_WORDS_H

#include <stdarg.h>
#include <string.h>

struct t_words {
    char buf[16384];
    size_t len;
};

/* Append the words first, ... (a NULL ends them), each with its NUL. */
static inline void t_words_add(struct t_words *w, const char *first, ...)
{
    va_list ap;
    va_start(ap, first);
    for (const char *s = first; s; s = va_arg(ap, const char *)) {
        size_t n = strlen(s) + 1;
        assert_true(w->len + n <= sizeof w->buf);
        memcpy(w->buf + w->len, s, n);
        w->len += n;
    }
    va_end(ap);
}

#endif
