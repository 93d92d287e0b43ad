/* fuzz_util.h - what every libFuzzer harness in test/fuzz/ shares: a quiet
 * logger, a private temporary folder removed at exit, file helpers, and the
 * seed-writing mode.
 *
 * Seeds: run a harness with SS_FUZZ_SEEDS=DIR and it writes its seed corpus
 * into DIR and exits (test/fuzz/corpus/<target>/ holds the committed copy;
 * `make fuzz-seeds` rewrites it). The seeds are built by the same code the
 * harness decodes with, so they stay valid when the formats change.
 *
 * Header-only: each harness is one translation unit. Single-threaded. */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ss_log.h"

#define FUZZ_UNUSED __attribute__((unused))

/* Abort with a message: libFuzzer reports it as a crash and saves the input. */
#define FUZZ_CHECK(cond, ...)                                                  \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz check failed: %s (%s:%d): ", #cond, __FILE__, \
                    __LINE__);                                                 \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            abort();                                                           \
        }                                                                      \
    } while (0)

static char s_fuzz_dir[512];  /* the private temporary folder, "" until made */

static int s_fuzz_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void s_fuzz_cleanup(void)
{
    if (s_fuzz_dir[0])
        nftw(s_fuzz_dir, s_fuzz_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* Silence the logger: harnesses feed bad input on purpose, and a log line
 * per input would cost more than the parse. */
static FUZZ_UNUSED void fuzz_quiet(void)
{
    ss_log_level_now = SS_LOG_ERROR + 1;
}

/* A private folder for the harness's files (tmpfs /dev/shm when it is
 * writable: checkpoints fsync), removed at exit. Returns its path. */
static FUZZ_UNUSED const char *fuzz_tmpdir(const char *name)
{
    if (s_fuzz_dir[0])
        return s_fuzz_dir;
    const char *base = getenv("TMPDIR");
    if (access("/dev/shm", W_OK) == 0)
        base = "/dev/shm";
    else if (!base || !base[0])
        base = "/tmp";
    snprintf(s_fuzz_dir, sizeof s_fuzz_dir, "%s/ss-fuzz-%s.XXXXXX", base, name);
    if (!mkdtemp(s_fuzz_dir)) {
        perror(s_fuzz_dir);
        abort();
    }
    atexit(s_fuzz_cleanup);
    return s_fuzz_dir;
}

/* Replace path's contents with data[0..n). Aborts on failure (a harness
 * problem, not a finding). */
static FUZZ_UNUSED void fuzz_write_file(const char *path, const void *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    FUZZ_CHECK(fd >= 0, "cannot create %s", path);
    const char *p = data;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        FUZZ_CHECK(k > 0, "cannot write %s", path);
        p += k;
        n -= (size_t)k;
    }
    close(fd);
}

/* Seed mode: the folder to write seeds into, or NULL for a normal run. */
static FUZZ_UNUSED const char *fuzz_seed_dir(void)
{
    const char *dir = getenv("SS_FUZZ_SEEDS");
    return dir && dir[0] ? dir : NULL;
}

/* Seed mode (SS_FUZZ_SEEDS=DIR, make fuzz-seeds): write the harness's seeds
 * with write_seeds(DIR) and exit; otherwise return to fuzz. */
static FUZZ_UNUSED void fuzz_seed_mode(void (*write_seeds)(const char *dir))
{
    const char *dir = fuzz_seed_dir();
    if (!dir)
        return;
    write_seeds(dir);
    exit(0);
}

/* Write one seed file dir/seed-NAME (make fuzz-seeds replaces those, and keeps
 * the regression inputs beside them). */
static FUZZ_UNUSED void fuzz_seed(const char *dir, const char *name, const void *data, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/seed-%s", dir, name);
    fuzz_write_file(path, data, n);
}

/* The first lines (at most cap - 1 bytes) of the repository file path into
 * buf, NUL-terminated (run from the repository root). Returns the bytes read. */
static FUZZ_UNUSED size_t fuzz_read_lines(const char *path, int lines, char *buf, size_t cap)
{
    FILE *fp = fopen(path, "rb");
    FUZZ_CHECK(fp, "cannot open %s (run from the repository root)", path);
    size_t n = 0;
    while (lines-- > 0 && n + 1 < cap && fgets(buf + n, (int)(cap - n), fp))
        n += strlen(buf + n);
    fclose(fp);
    buf[n] = '\0';
    return n;
}

/* A growable byte buffer for building seeds. */
struct fuzz_buf {
    unsigned char *p;  /* bytes, malloc'ed */
    size_t n;          /* bytes used */
    size_t cap;        /* bytes allocated */
};

static FUZZ_UNUSED void fuzz_buf_add(struct fuzz_buf *b, const void *data, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        FUZZ_CHECK(b->p, "out of memory");
    }
    if (n)
        memcpy(b->p + b->n, data, n);
    b->n += n;
}

/* Write seed dir/seed-NAME: one selector byte (format or layout), then text. */
static FUZZ_UNUSED void fuzz_seed_text(const char *dir, const char *name, unsigned sel,
                                       const char *text)
{
    struct fuzz_buf b = {0};
    uint8_t s = (uint8_t)sel;
    fuzz_buf_add(&b, &s, 1);
    fuzz_buf_add(&b, text, strlen(text));
    fuzz_seed(dir, name, b.p, b.n);
    free(b.p);
}

#endif
