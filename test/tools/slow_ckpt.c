/* slow_ckpt.c - an LD_PRELOAD shim for integration tests: each write() to a
 * checkpoint's temporary file (a path holding ".ckpt.tmp") first sleeps
 * SS_TEST_SLOW_CKPT_MS milliseconds, so that a PS's small shard takes as
 * long to write as a large one (test_save_progress: the trainer's save must
 * outlast its timeout on the PS's "still working" replies). Any other write
 * passes straight through. Built by the test that uses it:
 *   cc -shared -fPIC -o slow_ckpt.so test/tools/slow_ckpt.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef ssize_t write_fn(int fd, const void *buf, size_t n);

/* 1 when fd is a regular file whose path holds ".ckpt.tmp". */
static int s_is_ckpt_tmp(int fd)
{
    struct stat st;
    char link[64], path[4096];
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t k = readlink(link, path, sizeof path - 1);
    if (k <= 0)
        return 0;
    path[k] = '\0';
    return strstr(path, ".ckpt.tmp") != NULL;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    static write_fn *real;  /* libc's write(), found once (every thread finds the same) */
    write_fn *w = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (!w) {
        w = (write_fn *)dlsym(RTLD_NEXT, "write");
        __atomic_store_n(&real, w, __ATOMIC_RELEASE);
    }
    const char *ms = getenv("SS_TEST_SLOW_CKPT_MS");
    if (ms && s_is_ckpt_tmp(fd)) {
        long v = atol(ms);
        struct timespec ts = {v / 1000, (v % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return w(fd, buf, n);
}
