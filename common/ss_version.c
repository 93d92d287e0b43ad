/* ss_version.c - the version and git revision built in, and the answer to
 * --version and --help (see ss_version.h). */
#include "ss_version.h"

#ifndef SS_VERSION
#define SS_VERSION "unknown"
#endif
#ifndef SS_GIT_REV
#define SS_GIT_REV "unknown"
#endif

const char *ss_version(void)
{
    return SS_VERSION[0] ? SS_VERSION : "unknown";
}

const char *ss_git_rev(void)
{
    return SS_GIT_REV[0] ? SS_GIT_REV : "unknown";
}

void ss_version_print(FILE *out, const char *prog)
{
    fprintf(out, "%s %s (git %s)\n", prog, ss_version(), ss_git_rev());
}

int ss_version_or_usage(int parsed, const char *prog, void (*usage)(FILE *out))
{
    if (parsed == 3) {
        ss_version_print(stdout, prog);
        return 0;
    }
    usage(parsed == 1 ? stdout : stderr);
    return parsed == 1 ? 0 : 2;
}
