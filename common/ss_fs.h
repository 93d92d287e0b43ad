/* ss_fs.h - small file-system helpers. Thread-safe. */
#ifndef SS_FS_H
#define SS_FS_H

/* mkdir -p: create path and its missing parents (mode 0755). Returns 0 or
 * SS_E_IO with errno set. Borrows path. */
int ss_mkdirs(const char *path);

#endif
