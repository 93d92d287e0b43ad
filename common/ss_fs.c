/* ss_fs.c - small file-system helpers. */
#include "ss_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ss_assert.h"
#include "ss_err.h"

int ss_mkdirs(const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return SS_E_IO;
    }
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return SS_E_IO;
        *p = '/';
    }
    return (mkdir(tmp, 0755) != 0 && errno != EEXIST) ? SS_E_IO : 0;
}

int ss_fs_errno_rc(int e)
{
    return e == ENOSPC || e == EDQUOT ? SS_E_NOSPC : SS_E_IO;
}

int ss_fs_sync_parent(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        dir[--n] = 0;  /* "a/b/" names b */
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        slash[slash == dir ? 1 : 0] = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), e = 0;
    if (fd < 0 || fsync(fd) != 0)
        e = errno;
    if (fd >= 0)
        close(fd);
    return e;
}

/* Write all of p to fd, retrying short writes and EINTR: with pwrite() at
 * offset off when off >= 0, else with write() at the file position.
 * Returns 0 or errno. */
static int s_write_all(int fd, const unsigned char *p, size_t n, off_t off)
{
    while (n) {
        ssize_t k = off < 0 ? write(fd, p, n) : pwrite(fd, p, n, off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return errno;
        p += k;
        n -= (size_t)k;
        if (off >= 0)
            off += k;
    }
    return 0;
}

int ss_fs_write_all(int fd, const void *p, size_t n)
{
    return s_write_all(fd, p, n, -1);
}

int ss_fs_pwrite_all(int fd, const void *p, size_t n, off_t off)
{
    ss_assert(off >= 0);
    return s_write_all(fd, p, n, off);
}

int ss_fs_tmp_open(struct ss_fs_tmp *t, const char *path, unsigned flags, char *err,
                   size_t err_len)
{
    ss_assert(t && path);
    t->fd = -1;
    t->f = NULL;
    t->named = 0;
    t->tmp[0] = 0;
    if (snprintf(t->path, sizeof t->path, "%s", path) >= (int)sizeof t->path) {
        snprintf(err, err_len, "cannot create a file next to %.64s...: name too long", path);
        return SS_E_IO;
    }
    if (flags & SS_FS_TMP_PID)
        snprintf(t->tmp, sizeof t->tmp, "%s.tmp-%ld", path, (long)getpid());
    else
        snprintf(t->tmp, sizeof t->tmp, "%s.tmp", path);
    t->fd = open(t->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (t->fd < 0) {
        int e = errno;
        snprintf(err, err_len, "cannot create %s (next to %s): %s", t->tmp, path, strerror(e));
        errno = e;
        return ss_fs_errno_rc(e);
    }
    t->named = 1;
    return 0;
}

FILE *ss_fs_tmp_stream(struct ss_fs_tmp *t)
{
    ss_assert(t && t->fd >= 0 && !t->f);
    t->f = fdopen(t->fd, "w");
    return t->f;
}

/* Close t's file (its stream, if any, is flushed first). Returns 0 or the
 * errno of a failed flush or close. */
static int s_tmp_close(struct ss_fs_tmp *t)
{
    int e = 0;
    errno = 0;
    if (t->f && fclose(t->f) != 0)
        e = errno ? errno : EIO;
    else if (!t->f && t->fd >= 0 && close(t->fd) != 0)
        e = errno;
    t->f = NULL;
    t->fd = -1;
    return e;
}

int ss_fs_tmp_commit(struct ss_fs_tmp *t, char *err, size_t err_len)
{
    ss_assert(t);
    int e = t->fd < 0 || !t->named ? EBADF : 0, renamed = 0;
    errno = 0;
    if (!e && t->f && (fflush(t->f) != 0 || ferror(t->f)))
        e = errno ? errno : EIO;  /* a stream that failed earlier says so here */
    if (!e && fsync(t->fd) != 0)
        e = errno;
    int ce = s_tmp_close(t);
    if (!e)
        e = ce;
    if (!e && rename(t->tmp, t->path) != 0) {
        e = errno;
        snprintf(err, err_len, "cannot rename %s to %s: %s", t->tmp, t->path, strerror(e));
        unlink(t->tmp);
        t->named = 0;
        return ss_fs_errno_rc(e);
    }
    if (!e) {
        renamed = 1;
        t->named = 0;
        e = ss_fs_sync_parent(t->path);  /* the rename's durability */
    }
    if (!e)
        return 0;
    if (!renamed)
        ss_fs_tmp_abort(t);
    snprintf(err, err_len, "cannot write %s: %s", t->path, strerror(e));
    return ss_fs_errno_rc(e);
}

void ss_fs_tmp_discard(struct ss_fs_tmp *t)
{
    if (t->named)
        unlink(t->tmp);
    t->named = 0;
}

void ss_fs_tmp_abort(struct ss_fs_tmp *t)
{
    (void)s_tmp_close(t);
    ss_fs_tmp_discard(t);
}

int ss_fs_write_atomic(const char *path, const struct ss_fs_piece *pieces, size_t n,
                       char *err, size_t err_len)
{
    struct ss_fs_tmp t;
    int rc = ss_fs_tmp_open(&t, path, 0, err, err_len), e = 0;
    if (rc)
        return rc;
    for (size_t i = 0; !e && i < n; i++)
        e = ss_fs_write_all(t.fd, pieces[i].data, pieces[i].len);
    if (e) {
        ss_fs_tmp_abort(&t);
        snprintf(err, err_len, "cannot write %s: %s", path, strerror(e));
        return ss_fs_errno_rc(e);
    }
    return ss_fs_tmp_commit(&t, err, err_len);
}

static int s_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) != 0 && errno != ENOENT ? -1 : 0;
}

int ss_fs_remove_tree(const char *dir)
{
    struct stat st;
    if (lstat(dir, &st) != 0)
        return errno == ENOENT ? 0 : SS_E_IO;
    return nftw(dir, s_rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : SS_E_IO;
}

int ss_fs_replace_dir(const char *src, const char *dst, char *err, size_t err_len)
{
    char old[4096];
    struct stat st;
    if (lstat(dst, &st) != 0) {
        if (rename(src, dst) != 0) {
            snprintf(err, err_len, "cannot rename %s to %s: %s", src, dst, strerror(errno));
            return SS_E_IO;
        }
        (void)ss_fs_sync_parent(dst);
        return 0;
    }
    if (renameat2(AT_FDCWD, src, AT_FDCWD, dst, RENAME_EXCHANGE) == 0) {
        (void)ss_fs_sync_parent(dst);
        (void)ss_fs_remove_tree(src);  /* the old contents: best effort */
        return 0;
    }
    if (errno != EINVAL && errno != ENOSYS) {
        snprintf(err, err_len, "cannot exchange %s and %s: %s", src, dst, strerror(errno));
        return SS_E_IO;
    }
    /* no RENAME_EXCHANGE on this file system: aside, then into place */
    snprintf(old, sizeof old, "%s.old", dst);
    (void)ss_fs_remove_tree(old);
    if (rename(dst, old) != 0) {
        snprintf(err, err_len, "cannot rename %s to %s: %s", dst, old, strerror(errno));
        return SS_E_IO;
    }
    if (rename(src, dst) != 0) {
        int e = errno;
        (void)rename(old, dst);  /* put the old one back */
        snprintf(err, err_len, "cannot rename %s to %s: %s", src, dst, strerror(e));
        return SS_E_IO;
    }
    (void)ss_fs_sync_parent(dst);
    (void)ss_fs_remove_tree(old);
    return 0;
}
