/* t.h - helpers shared by the unit tests: scratch directories. */
#ifndef T_H
#define T_H

#include <arpa/inet.h>
#include <ftw.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The whole of path in a malloc'd buffer (its length in *len), or NULL
 * when it cannot be read. */
static inline unsigned char *t_slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    unsigned char *buf = NULL;
    long n;
    if (fp && fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0 && fseek(fp, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, fp) == (size_t)n)
        *len = (size_t)n;
    else {
        free(buf);
        buf = NULL;
    }
    if (fp)
        fclose(fp);
    return buf;
}

/* Write len bytes of buf over path. Returns 0, or -1. */
static inline int t_spill(const char *path, const void *buf, size_t len)
{
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return -1;
    int ok = fwrite(buf, 1, len, fp) == len;
    return fclose(fp) == 0 && ok ? 0 : -1;
}

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

/* Exact float equality in a cmocka test, printing both values. */
#define ASSERT_FEQ(got, want)                                                         \
    do {                                                                              \
        float g_ = (got), w_ = (want);                                                \
        if (g_ != w_)                                                                 \
            fail_msg("%s = %.9g, expected %.9g", #got, (double)g_, (double)w_);       \
    } while (0)

/* A TCP port on 127.0.0.1 that nobody holds right now, below the ephemeral
 * range (32768+: a port the kernel hands out could be taken by another
 * rank's outgoing connection before a ring binds it), never the same twice
 * in one process. Returns 0 when none is found. */
static inline int t_port(void)
{
    static unsigned long long state;
    static int used[512], n_used;
    if (!state)
        state = (unsigned long long)getpid() * 7919u + 1;
    for (int tries = 0; tries < 100000; tries++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        int port = 15000 + (int)((state >> 33) % 17000), dup = 0;
        for (int i = 0; i < n_used; i++)
            dup |= used[i] == port;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0)
            return 0;
        int ok = !dup && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
        close(fd);
        if (ok) {
            if (n_used < 512)
                used[n_used++] = port;
            return port;
        }
    }
    return 0;
}

#endif
