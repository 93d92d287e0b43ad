/* ss_cpu.c - CPU time by thread name from /proc/self/task (see ss_cpu.h). */
#include "ss_cpu.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

double ss_cpu_process_s(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0.0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* Name and CPU seconds of one task from its stat line: "tid (name) S ...",
 * utime and stime are fields 14 and 15 (the name may hold spaces and ')').
 * Returns 0 or -1. */
static int s_task(const char *tid, char *name, size_t name_len, double *cpu_s)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    char *open = strchr(line, '('), *close = strrchr(line, ')');
    unsigned long long ut, st;
    if (!open || !close || close < open ||
        sscanf(close + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
               &st) != 2)
        return -1;
    snprintf(name, name_len, "%.*s", (int)(close - open - 1), open + 1);
    *cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    return 0;
}

int ss_cpu_split(const char *const *prefixes, size_t n, double *out_s)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    for (size_t i = 0; i < n; i++)
        out_s[i] = 0.0;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char name[64];
        double s;
        if (e->d_name[0] == '.' || s_task(e->d_name, name, sizeof name, &s) != 0)
            continue;
        for (size_t i = 0; i < n; i++)
            if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) {
                out_s[i] += s;
                break;
            }
    }
    closedir(d);
    return 0;
}
