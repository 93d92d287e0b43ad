/* ss_fs.c - small file-system helpers. */
#include "ss_fs.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

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
