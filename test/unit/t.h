/* t.h - helpers shared by the unit tests: scratch directories. */
#ifndef T_H
#define T_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static int t_rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

/* Make a fresh directory $TMPDIR/ss_<tag>_XXXXXX (default /tmp) into dir.
 * Returns 0, or -1 when it cannot be made. */
static inline int t_tmpdir(char *dir, size_t len, const char *tag)
{
    const char *base = getenv("TMPDIR");
    snprintf(dir, len, "%s/ss_%s_XXXXXX", base && *base ? base : "/tmp", tag);
    return mkdtemp(dir) ? 0 : -1;
}

/* Remove dir and everything below it (made writable first). */
static inline void t_rmtree(const char *dir)
{
    chmod(dir, 0755);
    nftw(dir, t_rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

#endif
