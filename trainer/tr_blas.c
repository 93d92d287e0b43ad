/* tr_blas.c - pick OpenBLAS kernels from the CPU's features (see tr_blas.h). */
#include "tr_blas.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define S_REEXEC_ENV "SS_BLAS_REEXEC"  /* set in the re-executed program */

/* Kernel sets from weakest to strongest that matter here; anything not
 * listed (Prescott, Core2, Nehalem, Atom, ...) has no AVX2 kernels. */
static const char *s_rank[] = {"Sandybridge", "Haswell", "Zen", "SkylakeX", "Cooperlake",
                               "SapphireRapids"};

static int s_rank_of(const char *name)
{
    for (size_t i = 0; name && i < sizeof s_rank / sizeof s_rank[0]; i++)
        if (strcasecmp(name, s_rank[i]) == 0)
            return (int)i + 1;
    return 0;
}

const char *tr_blas_best_core(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
    return NULL;
}

int tr_blas_core_ok(const char *corename, const char *best)
{
    if (!best)
        return 1;
    int have = s_rank_of(corename), want = s_rank_of(best);
    /* Zen's kernels are AVX2 ones: as good as Haswell's, not as SkylakeX's */
    if (have == s_rank_of("Zen"))
        have = s_rank_of("Haswell");
    return have >= want;
}

static int s_under_valgrind(void)
{
    const char *pre = getenv("LD_PRELOAD");
    return pre && (strstr(pre, "vgpreload") || strstr(pre, "valgrind"));
}

void tr_blas_fix_core(char **argv)
{
    const char *best = tr_blas_best_core();
    if (getenv("OPENBLAS_CORETYPE") || getenv("SS_BLAS_KEEP_CORE") || getenv(S_REEXEC_ENV) ||
        s_under_valgrind() || tr_blas_core_ok(openblas_get_corename(), best))
        return;
    setenv("OPENBLAS_CORETYPE", best, 1);
    setenv(S_REEXEC_ENV, openblas_get_corename(), 1);
    /* exec the file itself, not /proc/self/exe: the process keeps its name
     * (ps, pgrep and perf show "shadow-trainer", not "exe") */
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0 || (size_t)n >= sizeof path - 1)
        snprintf(path, sizeof path, "/proc/self/exe");
    else
        path[n] = '\0';
    fflush(NULL);
    execv(path, argv);
    /* still here: run on as we are; tr_blas_describe() reports the kernels */
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(S_REEXEC_ENV);
}

/* "OpenBLAS 0.3.21" from the build string "OpenBLAS 0.3.21 NO_LAPACKE ..." */
static void s_version(char *out, size_t len)
{
    const char *cfg = openblas_get_config();
    size_t n = strcspn(cfg, " ");
    n += cfg[n] ? 1 + strcspn(cfg + n + 1, " ") : 0;
    snprintf(out, len, "%.*s", (int)n, cfg);
}

void tr_blas_describe(char *buf, size_t len)
{
    const char *core = openblas_get_corename(), *was = getenv(S_REEXEC_ENV);
    const char *best = tr_blas_best_core();
    char ver[64];
    s_version(ver, sizeof ver);
    if (was)
        snprintf(buf, len, "%s kernels %s (set by this program: OpenBLAS detected %s)", ver,
                 core, was);
    else if (!tr_blas_core_ok(core, best))
        snprintf(buf, len, "%s kernels %s, weaker than this CPU supports (set "
                 "OPENBLAS_CORETYPE=%s for about 2x faster matrix products)", ver, core, best);
    else
        snprintf(buf, len, "%s kernels %s", ver, core);
}
