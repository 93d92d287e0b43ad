/* ss_cpu.h - where a process's CPU time went, by thread name.
 *
 * Threads name themselves (ss_log_thread() also sets the kernel's thread
 * name; ZeroMQ names its own "ZMQbg/IO/0", "ZMQbg/Reaper"). ss_cpu_split()
 * sums the CPU time of the live threads whose names start with each of a few
 * prefixes, from /proc/self/task; the process total comes from getrusage()
 * and so also holds threads that already exited. Benchmarks use it for
 * "examples per CPU-second" and the split between PSs, workers, the shadow
 * thread and I/O threads. Linux only; elsewhere every figure is 0. */
#ifndef SS_CPU_H
#define SS_CPU_H

#include <stddef.h>

/* CPU seconds (user + system) of the whole process so far. Thread-safe. */
double ss_cpu_process_s(void);

/* For each of prefixes[0..n), the CPU seconds of the live threads whose names
 * start with it (a thread counts for the first prefix it matches) into
 * out_s[i]. Returns 0, or -1 if /proc/self/task cannot be read (out_s all 0).
 * Thread-safe; borrows everything. */
int ss_cpu_split(const char *const *prefixes, size_t n, double *out_s);

#endif
