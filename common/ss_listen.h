/* ss_listen.h - a server socket's connections: the open-file limit, counts
 * of open, refused and failed connections, and log lines about them.
 *
 * Every client connection costs a file descriptor; when the process runs out
 * of them the kernel refuses new ones and ZeroMQ only says so to a socket
 * monitor. This module owns that monitor: the owner thread of the watched
 * socket polls ss_listen_socket() with its other sockets and calls
 * ss_listen_drain() when it is readable. It logs a warning when the open
 * connections reach 90% of what the limit allows, every refused connection
 * (rate limited) and failed handshakes (wrong keys, a client without CURVE,
 * garbage), and keeps counters that any thread may read. (ZMQ_MAX_SOCKETS
 * counts sockets, not connections: it is not the limit that matters here.) */
#ifndef SS_LISTEN_H
#define SS_LISTEN_H

#include <stddef.h>
#include <stdint.h>

typedef struct ss_listen ss_listen_t;

/* Counters of one watched socket. */
struct ss_listen_stats {
    int64_t open;               /* connections open now */
    uint64_t accepted;          /* connections accepted */
    uint64_t accept_failed;     /* connections refused: accept failed (the fd limit), or shut
                                 * beyond security.max_connections */
    uint64_t handshake_failed;  /* handshakes that failed: keys, mechanism, garbage */
    int64_t capacity;           /* connections the open-file limit leaves room for */
};

/* Watch sock (a server socket of zctx, bound or about to be; what names it
 * in log lines, "PS"). max_connections: the connections it should take at
 * once; the open-file limit is raised to fit them where the hard limit
 * allows (a warning otherwise). Returns NULL with err when the monitor
 * cannot be set up. Caller owns; destroy before closing sock.
 * Thread: the owner of sock, which alone calls the functions below but
 * ss_listen_get_stats(). */
ss_listen_t *ss_listen_new(void *zctx, void *sock, const char *what, int64_t max_connections,
                           char *err, size_t err_len);

/* Stop the monitor and free; accepts NULL. Thread: sock's owner. */
void ss_listen_destroy(ss_listen_t **self_p);

/* The monitor's PAIR socket, to poll for ZMQ_POLLIN. */
void *ss_listen_socket(ss_listen_t *self);

/* Read the pending monitor events (at most a few hundred per call), update
 * the counters and log what needs it. Never blocks. */
void ss_listen_drain(ss_listen_t *self);

/* Read every monitor event waiting now, however many (ss_listen_admit()
 * starts with it: a connection beyond security.max_connections is then
 * shut down before anything is answered on it, also when the owner thread
 * was busy serving a burst while it came in). Never blocks. */
void ss_listen_catch_up(ss_listen_t *self);

/* Whether the connection on descriptor fd (the ZMQ_SRCFD of a message read
 * from sock) is one this socket takes: 0 when it was shut beyond
 * security.max_connections, 1 otherwise. Call it before answering a
 * connection's first request (HELLO). Reads every monitor event waiting
 * (ss_listen_catch_up), and when none of them is fd's ACCEPTED yet, waits
 * for it (at most 200 ms): with more than one ZeroMQ I/O thread a
 * connection's first message can be read before the thread that accepted
 * it reports it, so the bound is applied in the order ZeroMQ accepted
 * the connections whatever the I/O threads' timing. fd < 0 (not known):
 * reads the events waiting and returns 1; so does a connection gone
 * already, after the wait. */
int ss_listen_admit(ss_listen_t *self, int fd);

/* Copy the counters. Any thread. */
void ss_listen_get_stats(const ss_listen_t *self, struct ss_listen_stats *st);

/* Raise the soft open-file limit (RLIMIT_NOFILE) to want, or to the hard
 * limit when that is lower. Returns the soft limit in force afterwards
 * (-1: unknown). Any thread. */
int64_t ss_fd_limit_raise(int64_t want);

/* File descriptors this process has open now (from /proc), or -1. */
int64_t ss_fd_count(void);

#endif
