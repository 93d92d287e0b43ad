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

/* One piece of a file written by ss_fs_write_atomic(). */
struct ss_fs_piece {
    const void *data;       /* bytes (borrowed) */
    size_t len;             /* how many */
};

/* Write the pieces, in order, to PATH.tmp, fsync it, rename it over path and
 * fsync the folder: path holds either its old contents or all the new ones.
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
