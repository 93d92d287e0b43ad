/* ss_plan.h - the launch plan of a job: which host runs each process, and
 * each process's endpoint.
 *
 * A launcher (shadow-ctl plan, for scripts/shadow-launch) builds one plan:
 * the hosts (a hosts file, or this machine alone), every embedding PS, sync
 * PS and trainer placed on one of them (round-robin over the hosts that take
 * the role, in file order; or on the host its fixed endpoint names), then
 * each one's endpoint: ipc:// under a folder for a job wholly on this
 * machine, ports from a base on each host, or free ports a launcher found on
 * each host (shadow-ctl ports there). IPv4 and IPv6 addresses both work: an
 * IPv6 endpoint is written tcp://[ADDR]:PORT (ss_cluster.h reads it).
 *
 * Hosts file: one host a line, "HOST [ROLE...] [addr=ADDR]"; '#' starts a
 * comment; ROLE is embedding, sync, trainer, ps (embedding and sync) or all
 * (the default). HOST is how the launcher reaches it ([user@]name); ADDR is
 * the address the endpoints use (default: HOST without its user, resolved
 * when not an IP address, IPv4 first). Errors name the file and line.
 *
 * Not thread-safe: one thread builds and reads a plan. */
#ifndef SS_PLAN_H
#define SS_PLAN_H

#include <stddef.h>
#include <sys/socket.h>

#include "ss_cluster.h"

#define SS_PLAN_MAX_HOSTS 4096   /* most hosts in a hosts file */
#define SS_PLAN_NAME_MAX 256     /* longest HOST of a hosts file line */
#define SS_PLAN_ADDR_MAX 64      /* longest address (IPv6 text with room) */
#define SS_PLAN_ADMIN 3          /* pseudo-role: the trainers' admin endpoints */
#define SS_PLAN_N_KINDS 4        /* SS_CLUSTER_EMBEDDING .. SS_CLUSTER_TRAINER, SS_PLAN_ADMIN */

/* One host of the plan. */
struct ss_plan_host {
    char target[SS_PLAN_NAME_MAX]; /* how the launcher reaches it: [user@]name */
    char addr[SS_PLAN_ADDR_MAX];   /* address of its endpoints, IPv6 without brackets */
    int ipv6;                      /* addr is an IPv6 address */
    unsigned roles;                /* bit (1 << role) per role it takes */
    int line;                      /* its line in the hosts file (0: none) */
    size_t n_ports;                /* free ports its processes need (ss_plan_place()) */
    unsigned *ports;               /* the free ports found there (ss_plan_set_ports()), owned */
    size_t n_given;                /* entries of ports */
};

/* What a plan places: counts and how endpoints are chosen. */
struct ss_plan_opts {
    size_t n[SS_CLUSTER_N_ROLES];  /* embedding PSs, sync PSs, trainers */
    int needs_sync_ps;             /* the sync rules use the sync PSs: they need a host */
    int ps_threads;                /* ps.threads: a tcp PS takes that many ports in a row */
    int admin;                     /* give every trainer an admin endpoint */
    const char *ipc_dir;           /* non-NULL: ipc:// endpoints in this folder */
    unsigned base_port;            /* > 0: ports base_port, +1, ... on each host */
};

typedef struct ss_plan ss_plan_t;

/* An empty plan. Caller owns it: ss_plan_destroy(). */
ss_plan_t *ss_plan_new(void);

/* Free; sets *self_p to NULL, accepts NULL. */
void ss_plan_destroy(ss_plan_t **self_p);

/* Read the hosts of text (a hosts file's bytes, NUL-terminated); name is
 * what errors call it ("hosts:3: unknown role 'gpu' (...)"). Host names are
 * resolved here (getaddrinfo; may block). Returns 0, or SS_E_CONFIG with one
 * line in err naming name and the line. Call once, on an empty plan. */
int ss_plan_parse_hosts(ss_plan_t *self, const char *text, const char *name, char *err,
                        size_t err_len);

/* ss_plan_parse_hosts() on the file at path (named so in errors). Returns 0,
 * SS_E_IO when it cannot be read, or SS_E_CONFIG, with err. */
int ss_plan_load_hosts(ss_plan_t *self, const char *path, char *err, size_t err_len);

/* This machine alone: host "localhost" at 127.0.0.1 taking every role.
 * Call on an empty plan. */
void ss_plan_local_host(ss_plan_t *self);

/* Place every process of opts round-robin over the hosts that take its role
 * (trainers' admin endpoints go with their trainers), and count each host's
 * free ports (ss_plan_host.n_ports: one per tcp endpoint there, none when
 * opts has ipc_dir or base_port). Sync PSs nobody serves (!needs_sync_ps)
 * may sit on host 0. Returns 0, or SS_E_CONFIG with err "no host in NAME
 * takes the trainer role". Keeps opts' values, not the pointer's target:
 * ipc_dir must live as long as self. */
int ss_plan_place(ss_plan_t *self, const struct ss_plan_opts *opts, const char *name,
                  char *err, size_t err_len);

/* Place every process on the host whose address its endpoint eps[role][k]
 * names (--fixed-ports: the job file's endpoints, taken as they are; with a
 * single host and no hosts file, all on it). n[role] entries per role; no
 * admin endpoints (the job file's stand). Returns 0, or SS_E_CONFIG with err
 * "endpoint E names no host of NAME (by addr)". */
int ss_plan_place_fixed(ss_plan_t *self, const char *const *const eps[SS_CLUSTER_N_ROLES],
                        const size_t n[SS_CLUSTER_N_ROLES], int by_addr, const char *name,
                        char *err, size_t err_len);

/* The free ports found on host (shadow-ctl ports there; each starts
 * ps_threads free ones): copied. Returns 0, or SS_E_RANGE when host is not
 * a host of the plan. */
int ss_plan_set_ports(ss_plan_t *self, size_t host, const unsigned *ports, size_t n);

/* Give every placed process its endpoint (after ss_plan_place()): ipc
 * (e0.., s0.., t0.. in ipc_dir), base port, or the free ports set on its
 * host, in the order embedding PSs, sync PSs, trainers, then the trainers'
 * admin endpoints. Without enough free ports set on a host the endpoints
 * stay unset (ss_plan_endpoint() gives NULL): a first call tells a launcher
 * how many to find. Returns 0, or SS_E_RANGE with err when a base port runs
 * past 65535. */
int ss_plan_endpoints(ss_plan_t *self, char *err, size_t err_len);

/* Hosts of the plan, and host i (i < ss_plan_n_hosts()). */
/* Resolve name to one address for a launcher: its first IPv4 address, else
 * its first IPv6 one (into *sa, *len). Returns 0, or -1 with the reason
 * (the resolver's, or "no IPv4 or IPv6 address") in why. */
int ss_plan_resolve(const char *name, struct sockaddr_storage *sa, socklen_t *len, char *why,
                    size_t why_len);

size_t ss_plan_n_hosts(const ss_plan_t *self);
const struct ss_plan_host *ss_plan_host(const ss_plan_t *self, size_t i);

/* Processes of kind (a role, or SS_PLAN_ADMIN) placed. */
size_t ss_plan_count(const ss_plan_t *self, int kind);

/* Host index of process k of kind. */
size_t ss_plan_host_of(const ss_plan_t *self, int kind, size_t k);

/* Endpoint of process k of kind, or NULL while unset. Valid while self
 * lives. */
const char *ss_plan_endpoint(const ss_plan_t *self, int kind, size_t k);

/* "embedding", "sync", "trainer" or "admin". */
const char *ss_plan_kind_name(int kind);

#endif
