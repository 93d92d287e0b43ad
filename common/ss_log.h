/* ss_log.h - the process logger.
 *
 * One line per call, written with a single write() to stderr:
 *   2026-11-29T22:41:07.123Z ps-2/svc-0 INFO ready on tcp://127.0.0.1:5555
 * SS_LOG() skips formatting below the current level. The role-id is set once
 * at start by main; each thread names itself with ss_log_thread(). The level
 * and role are the only mutable globals besides the stop flag. */
#ifndef SS_LOG_H
#define SS_LOG_H

enum ss_log_level { SS_LOG_DEBUG = 0, SS_LOG_INFO, SS_LOG_WARN, SS_LOG_ERROR };

extern int ss_log_level_now;

/* Set the role-id shown on every line ("ps-2", "trainer-0"). Main thread,
 * before other threads start. Copies role. */
void ss_log_init(const char *role, int level);

/* Name the calling thread ("main", "svc-1", "worker-0") in log lines and, but
 * for the main thread, in the kernel (first 15 characters). Copies name. */
void ss_log_thread(const char *name);

/* Parse "debug|info|warn|error"; returns the level or -1. */
int ss_log_parse_level(const char *s);

void ss_log_write(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define SS_LOG(level, ...)                                              \
    do {                                                                \
        if ((level) >= ss_log_level_now)                                \
            ss_log_write((level), __FILE__, __LINE__, __VA_ARGS__);     \
    } while (0)

/* A line another process reads (the launcher's supervisor, ss_super.h:
 * a PS's "ready:" and "restoring:", a trainer's "working:" and ring lines):
 * written whatever job.log_level says, else a job with log_level warn or
 * error never starts (no "ready:" line) or misreads its processes. */
#define SS_LOG_ALWAYS(level, ...) ss_log_write((level), __FILE__, __LINE__, __VA_ARGS__)

#endif
