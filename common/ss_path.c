/* ss_path.c - the launchers' working directory, folder names, path tests,
 * PATH search and binaries' folder (see ss_path.h).
 *
 * DESIGN: naming and testing differ on purpose, as in the shell scripts
 * these rules come from: a folder's name is the logical text cd keeps in
 * $PWD, a test asks the kernel. They differ only for ".." after a symbolic
 * link. */
#include "ss_path.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ss_assert.h"
#include "ss_err.h"

#define S_PATH 4096

static int s_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int ss_path_cwd(char *out, size_t len)
{
    ss_assert(out && len > 1);
    const char *pwd = getenv("PWD");
    struct stat a, b;
    if (pwd && pwd[0] == '/' && strlen(pwd) < len && stat(pwd, &a) == 0 && stat(".", &b) == 0
        && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
        snprintf(out, len, "%s", pwd);
        return 0;
    }
    if (getcwd(out, len))
        return 0;
    snprintf(out, len, "/");
    return SS_E_NOTFOUND;
}

/* path (absolute) or cwd/path into out. Returns 0, or -1 when too long. */
static int s_join(const char *cwd, const char *path, char *out, size_t len)
{
    int n = path[0] == '/' ? snprintf(out, len, "%s", path)
                           : snprintf(out, len, "%s/%s", cwd, path);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* The absolute path with its ".", ".." and repeated slashes taken out as
 * text, in place (cd's logical path). Returns 0, or -1 when what comes
 * before a ".." is not a folder (cd fails there). */
static int s_lexical(char *path)
{
    char *out = path + 1, *in = path + 1;
    while (*in) {
        size_t n = strcspn(in, "/");
        if (n == 2 && in[0] == '.' && in[1] == '.') {
            char keep = *out;
            *out = '\0';
            int dir = s_is_dir(path);
            *out = keep;
            if (!dir)
                return -1;
            while (out > path + 1 && out[-1] != '/')
                out--;   /* the last component */
            if (out > path + 1)
                out--;   /* and the slash before it */
        } else if (n > 0 && !(n == 1 && in[0] == '.')) {
            if (out > path + 1)
                *out++ = '/';
            memmove(out, in, n);
            out += n;
        }
        in += n + (in[n] == '/');
    }
    *out = '\0';
    return 0;
}

int ss_path_dir(const char *cwd, const char *dir, char *out, size_t len)
{
    ss_assert(cwd && dir && out && len > 0);
    char full[S_PATH], text[S_PATH], real[PATH_MAX];
    if (s_join(cwd, dir, full, sizeof full) != 0)
        return SS_E_RANGE;
    memcpy(text, full, sizeof text);
    const char *name = s_lexical(text) == 0 && s_is_dir(text) ? text : NULL;
    if (!name && s_is_dir(full) && realpath(full, real))
        name = real;
    if (!name)
        return SS_E_NOTFOUND;
    if (strlen(name) >= len)
        return SS_E_RANGE;
    snprintf(out, len, "%s", name);
    return 0;
}

int ss_path_test(const char *cwd, const char *path, int kind)
{
    ss_assert(cwd && path);
    char full[S_PATH];
    struct stat st;
    if (s_join(cwd, path, full, sizeof full) != 0)
        return 0;
    if (kind == 'x')
        return access(full, X_OK) == 0;
    if (stat(full, &st) != 0)
        return 0;
    return kind == 'd' ? S_ISDIR(st.st_mode) : kind == 'f' && S_ISREG(st.st_mode);
}

int ss_path_search(const char *cwd, const char *name, char *dir, size_t len)
{
    ss_assert(cwd && name && (!dir || len > 0));
    char path[S_PATH];
    for (const char *p = getenv("PATH"); p;) {
        size_t n = strcspn(p, ":");
        int w = n ? snprintf(path, sizeof path, "%.*s/%s", (int)n, p, name)
                  : snprintf(path, sizeof path, "./%s", name);
        if (w > 0 && (size_t)w < sizeof path && ss_path_test(cwd, path, 'f')
            && ss_path_test(cwd, path, 'x')) {
            if (dir)
                snprintf(dir, len, "%.*s", n ? (int)n : 1, n ? p : ".");
            return 0;
        }
        p = p[n] ? p + n + 1 : NULL;
    }
    if (dir)
        dir[0] = '\0';
    return SS_E_NOTFOUND;
}

void ss_path_find_bin(const char *cwd, const char *bin, const char *here, const char *prog,
                      char *out, size_t len)
{
    ss_assert(cwd && prog && out && len > 0);
    char path[S_PATH];
    if (bin && bin[0]) {
        snprintf(out, len, "%s", bin);
        return;
    }
    /* a checkout's ../bin, else the script's own folder (make install) */
    for (int up = 1; here && up >= 0; up--) {
        snprintf(path, sizeof path, "%s%s/%s", here, up ? "/../bin" : "", prog);
        if (ss_path_test(cwd, path, 'x')) {
            snprintf(out, len, "%s%s", here, up ? "/../bin" : "");
            return;
        }
    }
    if (ss_path_search(cwd, prog, out, len) != 0)
        snprintf(out, len, "/nonexistent");
}
