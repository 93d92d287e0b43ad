/* ss_time.h - clocks. All functions are thread-safe and inline. */
#ifndef SS_TIME_H
#define SS_TIME_H

#include <stdint.h>
#include <time.h>

/* Monotonic time in nanoseconds. */
static inline uint64_t ss_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Monotonic time in milliseconds. */
static inline uint64_t ss_now_ms(void)
{
    return ss_now_ns() / 1000000ull;
}

/* Wall-clock seconds since the epoch, as a double. */
static inline double ss_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the calling thread in nanoseconds. */
static inline uint64_t ss_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
