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

/* XOR the byte at offset at of path with mask (corrupting a file in place).
 * Returns 0, or -1 when the file cannot be read or written there. */
static inline int t_flip_byte(const char *path, long at, int mask)
{
    FILE *fp = fopen(path, "r+b");
    int ch, rc = -1;
    if (!fp)
        return -1;
    if (fseek(fp, at, SEEK_SET) == 0 && (ch = fgetc(fp)) != EOF && fseek(fp, at, SEEK_SET) == 0 &&
        fputc(ch ^ mask, fp) != EOF)
        rc = 0;
    return fclose(fp) == 0 ? rc : -1;
}

/* A scratch directory per test (cmocka setup/teardown state). */
struct t_fix {
    char dir[256];    /* the directory */
    char path[320];   /* dir/NAME */
    char tmp[330];    /* dir/NAME.tmp */
};

/* cmocka setup: a fresh directory tagged tag, path = dir/name. */
static inline int t_fix_setup(void **state, const char *tag, const char *name)
{
    struct t_fix *f = calloc(1, sizeof *f);
    if (!f || t_tmpdir(f->dir, sizeof f->dir, tag) != 0) {
        free(f);
        return -1;
    }
    snprintf(f->path, sizeof f->path, "%s/%s", f->dir, name);
    snprintf(f->tmp, sizeof f->tmp, "%s.tmp", f->path);
    *state = f;
    return 0;
}

/* cmocka teardown of t_fix_setup(). */
static inline int t_fix_teardown(void **state)
{
    struct t_fix *f = *state;
    t_rmtree(f->dir);
    free(f);
    return 0;
}

#endif
