/* test_ss_fs.c - the file-system helpers: whole writes (at the file
 * position and at an offset, errno on failure, every byte in order through
 * writes that signals cut short), atomic file writes (pieces in order, no
 * temp file left, errors naming the file; through ss_fs_tmp and its stream:
 * the old contents kept until the commit, and after a full disk, a size
 * limit, an abort, a discard or a failed rename), a folder put in the place of
 * another in one step (the old contents gone, the new ones there; with no
 * folder in place, a rename; a failure leaves the destination as it was),
 * and rm -rf. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "t.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "ss_err.h"
#include "ss_fs.h"

static int setup(void **state)
{
    return t_fix_setup(state, "fs", "file");
}

static int teardown(void **state)
{
    return t_fix_teardown(state);
}

/* Contents of path (at most len - 1 bytes) into buf; returns the length or -1. */
static long s_read(const char *path, char *buf, size_t len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return -1;
    size_t n = fread(buf, 1, len - 1, fp);
    buf[n] = 0;
    fclose(fp);
    return (long)n;
}

static void s_put(const char *dir, const char *name, const char *text)
{
    char path[600], err[256];
    struct ss_fs_piece p = {text, strlen(text)};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(ss_fs_write_atomic(path, &p, 1, err, sizeof err), 0);
}

/* The byte at offset i of the test pattern. */
static unsigned char s_pat(size_t i)
{
    return (unsigned char)(i * 31 + i / 251);
}

/* ss_fs_write_all() at the file position, ss_fs_pwrite_all() at an offset
 * (leaving the position), and errno for a full device and a read-only fd. */
static void test_write_all(void **state)
{
    struct t_fix *f = *state;
    size_t n = 1u << 20;
    unsigned char *buf = malloc(n), *got = malloc(n);
    assert_non_null(buf);
    assert_non_null(got);
    for (size_t i = 0; i < n; i++)
        buf[i] = s_pat(i);
    int fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ss_fs_write_all(fd, buf, n), 0);
    assert_int_equal(ss_fs_pwrite_all(fd, "hello", 5, 100), 0);
    assert_int_equal(lseek(fd, 0, SEEK_CUR), (off_t)n);
    assert_int_equal(ss_fs_write_all(fd, "!", 1), 0);
    assert_int_equal(pread(fd, got, n, 0), (ssize_t)n);
    memcpy(buf + 100, "hello", 5);
    assert_memory_equal(got, buf, n);
    assert_int_equal(pread(fd, got, 4, (off_t)n - 1), 2);
    assert_int_equal(got[1], '!');
    close(fd);

    fd = open(f->path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(ss_fs_write_all(fd, buf, 10), EBADF);
    assert_int_equal(ss_fs_pwrite_all(fd, buf, 10, 0), EBADF);
    close(fd);
    fd = open("/dev/full", O_WRONLY);
    if (fd >= 0) {  /* a full disk: ENOSPC, which ss_fs_errno_rc() names */
        assert_int_equal(ss_fs_write_all(fd, buf, 10), ENOSPC);
        close(fd);
    }
    free(buf);
    free(got);
}

static volatile sig_atomic_t s_alarms;

static void s_on_alarm(int sig)
{
    (void)sig;
    s_alarms++;
}

struct s_drain {
    int fd;              /* read end of the pipe */
    pthread_t writer;    /* the thread to interrupt */
    size_t n;            /* bytes expected */
    size_t bad_at;       /* first byte that differs from the pattern, n if none */
    size_t got;          /* bytes read */
};

/* Read the pipe slowly, checking the pattern. Before each read, while bytes
 * are still due, interrupt the writer (blocked on the full pipe) twice with
 * SIGALRM, sent to that thread alone (not to the library's threads): the
 * first cuts its write short, the second finds it blocked again with
 * nothing written (EINTR). */
static void *s_drain_main(void *arg)
{
    struct s_drain *d = arg;
    unsigned char buf[65536];
    struct timespec ms = {0, 1000000};
    d->bad_at = d->n;
    for (;;) {
        for (int i = 0; i < 2 && d->got < d->n; i++) {
            pthread_kill(d->writer, SIGALRM);
            nanosleep(&ms, NULL);
        }
        ssize_t k = read(d->fd, buf, sizeof buf);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return NULL;
        for (ssize_t i = 0; i < k; i++)
            if (buf[i] != s_pat(d->got + (size_t)i) && d->bad_at == d->n)
                d->bad_at = d->got + (size_t)i;
        d->got += (size_t)k;
    }
}

/* A blocking write into a pipe that a signal handler interrupts (no
 * SA_RESTART) returns early, with part of the bytes written or EINTR:
 * ss_fs_write_all() goes on until every byte is through, in order. */
static void test_write_all_interrupted(void **state)
{
    (void)state;
    size_t n = 4u << 20;
    unsigned char *buf = malloc(n);
    int fds[2];
    struct s_drain d = {0};
    struct sigaction sa = {0}, old_sa;
    pthread_t th;

    assert_non_null(buf);
    for (size_t i = 0; i < n; i++)
        buf[i] = s_pat(i);
    assert_int_equal(pipe(fds), 0);
    d.fd = fds[0];
    d.writer = pthread_self();
    d.n = n;
    sa.sa_handler = s_on_alarm;  /* no SA_RESTART: the write returns early */
    assert_int_equal(sigaction(SIGALRM, &sa, &old_sa), 0);
    s_alarms = 0;
    assert_int_equal(pthread_create(&th, NULL, s_drain_main, &d), 0);
    int rc = ss_fs_write_all(fds[1], buf, n);
    close(fds[1]);
    assert_int_equal(pthread_join(th, NULL), 0);  /* no signal comes after this */
    assert_int_equal(sigaction(SIGALRM, &old_sa, NULL), 0);
    close(fds[0]);
    free(buf);
    assert_int_equal(rc, 0);
    assert_true(s_alarms > 0);  /* the write was interrupted, more than once as a rule */
    assert_int_equal(d.got, n);
    assert_int_equal(d.bad_at, n);
}

static void test_write_atomic(void **state)
{
    struct t_fix *f = *state;
    char buf[64], err[512] = "", bad[400];
    struct ss_fs_piece p[3] = {{"ab", 2}, {"", 0}, {"cde", 3}};
    assert_int_equal(ss_fs_write_atomic(f->path, p, 3, err, sizeof err), 0);
    assert_int_equal(s_read(f->path, buf, sizeof buf), 5);
    assert_string_equal(buf, "abcde");
    assert_int_equal(access(f->tmp, F_OK), -1);
    /* a folder that does not exist: the error names the file and why */
    snprintf(bad, sizeof bad, "%s/no/such/file", f->dir);
    assert_int_equal(ss_fs_write_atomic(bad, p, 3, err, sizeof err), SS_E_IO);
    assert_non_null(strstr(err, bad));
    assert_non_null(strstr(err, "No such file or directory"));
    assert_int_equal(ss_fs_errno_rc(ENOSPC), SS_E_NOSPC);
    assert_string_equal(ss_strerror(SS_E_NOSPC), "no space left on device");
}

/* The old contents "old" at path, for a write that must leave them. */
static void s_put_old(const char *path)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fputs("old", fp) >= 0, 1);
    assert_int_equal(fclose(fp), 0);
}

/* An ss_fs_tmp written through its stream: path keeps its old contents and
 * the temporary file holds the new ones until the commit, which puts them
 * in place and leaves no temporary file; PATH.tmp-PID with SS_FS_TMP_PID. */
static void test_tmp_commit(void **state)
{
    struct t_fix *f = *state;
    struct ss_fs_tmp t;
    char buf[64], err[512] = "", pid_tmp[400];
    s_put_old(f->path);
    assert_int_equal(ss_fs_tmp_open(&t, f->path, 0, err, sizeof err), 0);
    assert_string_equal(t.tmp, f->tmp);
    FILE *fp = ss_fs_tmp_stream(&t);
    assert_non_null(fp);
    assert_true(fprintf(fp, "new %d\n", 42) > 0);
    assert_int_equal(fflush(fp), 0);
    assert_int_equal(s_read(f->path, buf, sizeof buf), 3);   /* not yet */
    assert_int_equal(s_read(f->tmp, buf, sizeof buf), 7);
    assert_int_equal(ss_fs_tmp_commit(&t, err, sizeof err), 0);
    assert_int_equal(s_read(f->path, buf, sizeof buf), 7);
    assert_string_equal(buf, "new 42\n");
    assert_int_equal(access(f->tmp, F_OK), -1);
    assert_int_equal(t.fd, -1);
    ss_fs_tmp_abort(&t);  /* after a commit: nothing to do */
    assert_int_equal(s_read(f->path, buf, sizeof buf), 7);

    snprintf(pid_tmp, sizeof pid_tmp, "%s.tmp-%ld", f->path, (long)getpid());
    assert_int_equal(ss_fs_tmp_open(&t, f->path, SS_FS_TMP_PID, err, sizeof err), 0);
    assert_string_equal(t.tmp, pid_tmp);
    assert_int_equal(ss_fs_write_all(t.fd, "x", 1), 0);
    assert_int_equal(access(pid_tmp, F_OK), 0);
    assert_int_equal(ss_fs_tmp_commit(&t, err, sizeof err), 0);
    assert_int_equal(access(pid_tmp, F_OK), -1);
    assert_int_equal(s_read(f->path, buf, sizeof buf), 1);
    assert_string_equal(buf, "x");
}

/* A full disk, root-safe: the temporary name is a link to /dev/full, where
 * every write fails with ENOSPC. ss_fs_write_atomic() and a stream's commit
 * both fail with SS_E_NOSPC naming the file, leave the old contents and
 * remove the temporary name (the link, never /dev/full). */
static void test_tmp_full_disk_keeps_old(void **state)
{
    struct t_fix *f = *state;
    struct ss_fs_tmp t;
    char buf[64], err[512] = "", big[8192];
    struct ss_fs_piece p = {big, sizeof big};
    if (access("/dev/full", W_OK) != 0)
        skip();
    memset(big, 'z', sizeof big);
    s_put_old(f->path);
    assert_int_equal(symlink("/dev/full", f->tmp), 0);
    assert_int_equal(ss_fs_write_atomic(f->path, &p, 1, err, sizeof err), SS_E_NOSPC);
    assert_non_null(strstr(err, f->path));
    assert_non_null(strstr(err, "No space left on device"));
    assert_int_equal(access(f->tmp, F_OK), -1);
    assert_int_equal(s_read(f->path, buf, sizeof buf), 3);
    assert_string_equal(buf, "old");

    /* the same through a stream: the buffered bytes fail at the commit's flush */
    assert_int_equal(symlink("/dev/full", f->tmp), 0);
    assert_int_equal(ss_fs_tmp_open(&t, f->path, 0, err, sizeof err), 0);
    FILE *fp = ss_fs_tmp_stream(&t);
    assert_non_null(fp);
    fputs("new", fp);
    err[0] = 0;
    assert_int_equal(ss_fs_tmp_commit(&t, err, sizeof err), SS_E_NOSPC);
    assert_non_null(strstr(err, f->path));
    assert_int_equal(access(f->tmp, F_OK), -1);
    assert_int_equal(access("/dev/full", W_OK), 0);
    assert_int_equal(s_read(f->path, buf, sizeof buf), 3);
    assert_string_equal(buf, "old");
}

/* A file size limit (RLIMIT_FSIZE, SIGXFSZ ignored: EFBIG) cuts a write in
 * the middle: the error names the file, the old contents stay and the
 * temporary file is gone. */
static void test_tmp_size_limit_keeps_old(void **state)
{
    struct t_fix *f = *state;
    char buf[64], err[512] = "";
    size_t n = 256u << 10;
    char *big = malloc(n);
    struct ss_fs_piece p = {big, n};
    struct rlimit saved, lim;
    assert_non_null(big);
    memset(big, 'y', n);
    s_put_old(f->path);
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = saved;
    lim.rlim_cur = 64 * 1024;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int rc = ss_fs_write_atomic(f->path, &p, 1, err, sizeof err);
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, old_handler);
    free(big);
    assert_int_equal(rc, SS_E_IO);
    assert_non_null(strstr(err, f->path));
    assert_non_null(strstr(err, "File too large"));
    assert_int_equal(access(f->tmp, F_OK), -1);
    assert_int_equal(s_read(f->path, buf, sizeof buf), 3);
    assert_string_equal(buf, "old");
}

/* Abort removes the temporary file; discard removes its name while the
 * stream stays open, and a commit after it fails; a rename that cannot be
 * done (a folder in the way) removes the temporary file. path is never
 * touched. */
static void test_tmp_abort_discard_rename(void **state)
{
    struct t_fix *f = *state;
    struct ss_fs_tmp t;
    char buf[64], err[512] = "", dir[400], inner[420];
    s_put_old(f->path);
    assert_int_equal(ss_fs_tmp_open(&t, f->path, 0, err, sizeof err), 0);
    assert_int_equal(ss_fs_write_all(t.fd, "new", 3), 0);
    ss_fs_tmp_abort(&t);
    assert_int_equal(access(f->tmp, F_OK), -1);
    ss_fs_tmp_abort(&t);  /* twice: harmless */

    assert_int_equal(ss_fs_tmp_open(&t, f->path, 0, err, sizeof err), 0);
    FILE *fp = ss_fs_tmp_stream(&t);
    assert_non_null(fp);
    ss_fs_tmp_discard(&t);
    assert_int_equal(access(f->tmp, F_OK), -1);
    assert_true(fputs("still writable", fp) >= 0);  /* the stream is still open */
    assert_int_equal(ss_fs_tmp_commit(&t, err, sizeof err), SS_E_IO);
    assert_int_equal(t.fd, -1);
    assert_int_equal(s_read(f->path, buf, sizeof buf), 3);
    assert_string_equal(buf, "old");

    /* a non-empty folder where the file should go: the rename fails */
    snprintf(dir, sizeof dir, "%s/d", f->dir);
    snprintf(inner, sizeof inner, "%s/inner", dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    s_put_old(inner);
    assert_int_equal(ss_fs_tmp_open(&t, dir, 0, err, sizeof err), 0);
    assert_int_equal(ss_fs_tmp_commit(&t, err, sizeof err), SS_E_IO);
    assert_non_null(strstr(err, "cannot rename"));
    assert_int_equal(access(t.tmp, F_OK), -1);
    assert_int_equal(s_read(inner, buf, sizeof buf), 3);
}

static void test_replace_dir(void **state)
{
    struct t_fix *f = *state;
    char dst[300], src[320], buf[64], err[512] = "", path[400];
    snprintf(dst, sizeof dst, "%s/model", f->dir);
    snprintf(src, sizeof src, "%s/model.new-1", f->dir);
    /* no folder in place yet: a rename */
    assert_int_equal(ss_mkdirs(src), 0);
    s_put(src, "a", "first");
    assert_int_equal(ss_fs_replace_dir(src, dst, err, sizeof err), 0);
    assert_int_equal(access(src, F_OK), -1);
    snprintf(path, sizeof path, "%s/a", dst);
    assert_int_equal(s_read(path, buf, sizeof buf), 5);
    /* a folder in place: exchanged, the old contents removed */
    assert_int_equal(ss_mkdirs(src), 0);
    s_put(src, "b", "second");
    assert_int_equal(ss_fs_replace_dir(src, dst, err, sizeof err), 0);
    assert_int_equal(access(src, F_OK), -1);
    assert_int_equal(access(path, F_OK), -1);  /* model/a was the old set's */
    snprintf(path, sizeof path, "%s/b", dst);
    assert_int_equal(s_read(path, buf, sizeof buf), 6);
    assert_string_equal(buf, "second");
    /* a source that does not exist: an error, model/ as it was */
    assert_int_equal(ss_fs_replace_dir(src, dst, err, sizeof err), SS_E_IO);
    assert_non_null(strstr(err, src));
    assert_int_equal(s_read(path, buf, sizeof buf), 6);
}

static void test_remove_tree(void **state)
{
    struct t_fix *f = *state;
    char top[300], sub[320];
    snprintf(top, sizeof top, "%s/t", f->dir);
    snprintf(sub, sizeof sub, "%s/t/u/v", f->dir);
    assert_int_equal(ss_mkdirs(sub), 0);
    s_put(sub, "x", "1");
    s_put(top, "y", "2");
    assert_int_equal(ss_fs_remove_tree(top), 0);
    assert_int_equal(access(top, F_OK), -1);
    assert_int_equal(ss_fs_remove_tree(top), 0);  /* missing: not an error */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_write_all, setup, teardown),
        cmocka_unit_test(test_write_all_interrupted),
        cmocka_unit_test_setup_teardown(test_write_atomic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tmp_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tmp_full_disk_keeps_old, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tmp_size_limit_keeps_old, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tmp_abort_discard_rename, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_tree, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
