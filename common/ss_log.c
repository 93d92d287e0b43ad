/* ss_log.c - timestamped single-write log lines, see ss_log.h. */
#include "ss_log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ss_assert.h"

int ss_log_level_now = SS_LOG_INFO;
static char s_role[32] = "shadow";
static _Thread_local char s_thread[24] = "main";

static const char *s_level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

void ss_log_init(const char *role, int level)
{
    snprintf(s_role, sizeof s_role, "%s", role);
    ss_log_level_now = level;
}

void ss_log_thread(const char *name)
{
    snprintf(s_thread, sizeof s_thread, "%s", name);
    /* the kernel's name too (top -H, perf, ss_cpu_split()), but never the
     * main thread's: that one is the process name that ps and pgrep show */
    if (gettid() != getpid()) {
        char kname[16];
        snprintf(kname, sizeof kname, "%s", name);
        pthread_setname_np(pthread_self(), kname);
    }
}

int ss_log_parse_level(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, s_level_names[i]) == 0)
            return i;
    return -1;
}

void ss_log_write(int level, const char *file, int line, const char *fmt, ...)
{
    char buf[1024];
    struct timespec ts;
    struct tm tm;
    size_t n;
    va_list ap;

    (void)file;
    (void)line;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(buf + n, sizeof buf - n, ".%03ldZ %s/%s %s ", ts.tv_nsec / 1000000,
                          s_role, s_thread, s_level_names[level & 3]);
    va_start(ap, fmt);
    int w = vsnprintf(buf + n, sizeof buf - n, fmt, ap);
    va_end(ap);
    n = (w < 0) ? n : (n + (size_t)w >= sizeof buf - 1 ? sizeof buf - 2 : n + (size_t)w);
    buf[n++] = '\n';
    ssize_t rc = write(STDERR_FILENO, buf, n);
    (void)rc;
}

void ss_assert_fail(const char *expr, const char *file, int line)
{
    ss_log_write(SS_LOG_ERROR, file, line, "assertion failed: %s (%s:%d)", expr, file, line);
    abort();
}
