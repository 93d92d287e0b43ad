/* ss_path.h - paths and programs as the launchers (shadow-ctl launch,
 * shadow-ctl slurm) name and find them: the rules their shell scripts
 * followed, each in one place.
 *
 * - The working directory is the logical one: $PWD when it names this
 *   folder (a path through symbolic links stays so), else the physical one.
 * - A folder is named as bash's "cd DIR && pwd" names it: made absolute
 *   from a working directory, then ".", ".." and repeated slashes taken out
 *   as text (the logical path). A ".." after a component that is not a
 *   folder (a file, or nothing) makes the text fail, as cd fails on it;
 *   when the text fails or names no folder, the kernel's path (realpath:
 *   ".." physical, as cd then falls back to) names it if it is a folder.
 * - A path is tested as "test -f/-d/-x" tests it: the kernel resolves it
 *   from the working directory (".." after a symbolic link is physical).
 * - A program is found on PATH as "command -v" finds it: the first folder
 *   of PATH (an empty entry: ".") that holds it as an executable regular
 *   file.
 * - The binaries' folder: --bin DIR, else ../bin next to the script, else
 *   the script's own folder (make install puts both in PREFIX/bin), else
 *   the folder of the program on PATH.
 *
 * Not thread-safe (reads the environment and the working directory). */
#ifndef SS_PATH_H
#define SS_PATH_H

#include <stddef.h>

/* The logical working directory (see above) into out. Returns 0, or
 * SS_E_NOTFOUND with out "/" when the current folder cannot be named
 * (removed, or longer than len). */
int ss_path_cwd(char *out, size_t len);

/* Folder dir (relative to cwd, an absolute path; or absolute) named as
 * "cd DIR && pwd" names it, into out. Returns 0, SS_E_NOTFOUND when dir
 * is not a folder (or a ".." in it follows a non-folder and the kernel's
 * path names none either), SS_E_RANGE when the name does not fit in len. */
int ss_path_dir(const char *cwd, const char *dir, char *out, size_t len);

/* Whether path (relative to cwd, or absolute) passes "test -KIND": kind
 * 'f' a regular file, 'd' a folder, 'x' executable by us (access X_OK).
 * Returns 1 or 0 (0 too when the path is too long). */
int ss_path_test(const char *cwd, const char *path, int kind);

/* The first folder of PATH that holds name as an executable regular file
 * (tested from cwd), as written in PATH ("." for an empty entry), into
 * dir (NULL: only whether there is one). Returns 0, or SS_E_NOTFOUND (dir
 * then "") when none does. */
int ss_path_search(const char *cwd, const char *name, char *dir, size_t len);

/* The folder of the binaries (see above), as written (not yet named by
 * ss_path_dir()), into out: bin when it is not empty; else here/../bin,
 * then here, when prog is executable there (here: the script's folder,
 * absolute; NULL: none); else prog's folder on PATH; else "/nonexistent"
 * (its checks then fail, naming it). */
void ss_path_find_bin(const char *cwd, const char *bin, const char *here, const char *prog,
                      char *out, size_t len);

#endif
