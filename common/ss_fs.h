/* ss_fs.h - small file-system helpers. Thread-safe.
 *
 * Errors that say where they happen: every helper that writes a file by
 * name names the file and the cause in err, and a full disk (ENOSPC, EDQUOT)
 * is SS_E_NOSPC ("no space left on device"), never a bare I/O error. The
 * whole-write helpers on a descriptor return the errno for the caller to
 * name its file with. */
#ifndef SS_FS_H
#define SS_FS_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* mkdir -p: create path and its missing parents (mode 0755). Returns 0 or
 * SS_E_IO with errno set. Borrows path. */
int ss_mkdirs(const char *path);

/* The SS_E_* code for errno value e: SS_E_NOSPC for ENOSPC and EDQUOT,
 * SS_E_IO otherwise. */
int ss_fs_errno_rc(int e);

/* Write all n bytes of p to fd at its file position, retrying short writes
 * and EINTR. Returns 0 or errno. Borrows p. */
int ss_fs_write_all(int fd, const void *p, size_t n);

/* As ss_fs_write_all(), with pwrite() at offset off (>= 0) of fd; the file
 * position stays where it was. Returns 0 or errno. Borrows p. */
int ss_fs_pwrite_all(int fd, const void *p, size_t n, off_t off);

#define SS_FS_PATH_MAX 4096  /* longest path an ss_fs_tmp takes */

/* A file written under a temporary name in its own folder and put in place
 * by one rename: whoever opens path sees its old contents or all the new
 * ones, never a part, also after a crash. The one atomic file write of the
 * tree; ss_fs_write_atomic() is it for bytes in memory.
 *
 *   ss_fs_tmp_open()    create PATH.tmp (or PATH.tmp-PID), truncating a stale one
 *   write to fd, or to the stream of ss_fs_tmp_stream()
 *   ss_fs_tmp_commit()  flush, fsync, close, rename over path, fsync the folder
 *   ss_fs_tmp_abort()   or: close and remove the temporary file
 *
 * Caller-allocated; the fields are read-only outside ss_fs.c. Every error
 * names the file and the cause ("no space left on device" is SS_E_NOSPC),
 * and a failed write leaves path as it was and no temporary file behind.
 * Thread: one thread at a time per object. */
struct ss_fs_tmp {
    char path[SS_FS_PATH_MAX];       /* the final name */
    char tmp[SS_FS_PATH_MAX + 32];   /* the temporary name beside it */
    int fd;                          /* the temporary file, open for writing; -1: closed */
    FILE *f;                         /* a stream over fd (ss_fs_tmp_stream), or NULL */
    int named;                       /* tmp exists under its name (to remove on failure) */
};

/* ss_fs_tmp_open() flags. */
#define SS_FS_TMP_PID 1u  /* name it PATH.tmp-PID (writers in several processes may
                           * target path at once); else PATH.tmp (one writer per path,
                           * whose next write truncates what a crash left) */

/* Create t's temporary file for path (flags: SS_FS_TMP_*), empty. Returns 0,
 * or SS_E_NOSPC / SS_E_IO with err "cannot create TMP (next to PATH): why"
 * and nothing to undo (an abort is harmless). Borrows path. */
int ss_fs_tmp_open(struct ss_fs_tmp *t, const char *path, unsigned flags, char *err,
                   size_t err_len);

/* A stdio stream over t's file (fully buffered by stdio; setvbuf may follow
 * before any write). Owned by t: committing or aborting closes it. Returns
 * NULL with errno set when it cannot be made. */
FILE *ss_fs_tmp_stream(struct ss_fs_tmp *t);

/* Put the written file in place: flush the stream, fsync, close, rename it
 * over path, fsync the folder. t is closed in every case; on failure before
 * the rename the temporary file is removed and path is untouched. Returns
 * 0, or SS_E_NOSPC / SS_E_IO with err "cannot write PATH: why" (or "cannot
 * rename TMP to PATH: why"). */
int ss_fs_tmp_commit(struct ss_fs_tmp *t, char *err, size_t err_len);

/* Remove the temporary file's name now and leave what is open open (a
 * writer on another thread may still hold the stream); a later commit
 * fails, an abort closes. */
void ss_fs_tmp_discard(struct ss_fs_tmp *t);

/* Give up: close the file and remove it. Harmless after a failed open, a
 * commit or another abort. */
void ss_fs_tmp_abort(struct ss_fs_tmp *t);

/* One piece of a file written by ss_fs_write_atomic(). */
struct ss_fs_piece {
    const void *data;       /* bytes (borrowed) */
    size_t len;             /* how many */
};

/* Write the pieces, in order, to PATH.tmp, fsync it, rename it over path and
 * fsync the folder (an ss_fs_tmp): path holds either its old contents or all
 * the new ones.
 * On failure PATH.tmp is removed and err says "cannot write PATH: why"
 * (e.g. "no space left on device"). Returns 0, SS_E_NOSPC or SS_E_IO.
 * Borrows everything. */
int ss_fs_write_atomic(const char *path, const struct ss_fs_piece *pieces, size_t n,
                       char *err, size_t err_len);

/* fsync the folder that holds path (its last component's parent), so that a
 * rename or a new file there is durable. Returns 0 or errno. Borrows path. */
int ss_fs_sync_parent(const char *path);

/* Put folder src in the place of folder dst in one step: with dst present,
 * the two are exchanged atomically (renameat2 RENAME_EXCHANGE; where the file
 * system lacks it, dst is renamed to DST.old and src to dst, a window in
 * which dst is missing) and the old contents, now at src (or DST.old), are
 * removed; without dst, src is renamed to dst. The parent folder is fsynced.
 * Returns 0 or SS_E_IO with err naming the folders; on failure dst is left as
 * it was. Borrows src and dst. */
int ss_fs_replace_dir(const char *src, const char *dst, char *err, size_t err_len);

/* Remove folder dir and everything below it (rm -rf; symbolic links are
 * removed, not followed). A missing dir is not an error. Returns 0 or SS_E_IO
 * with errno set. */
int ss_fs_remove_tree(const char *dir);

#endif
