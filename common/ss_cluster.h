/* ss_cluster.h - cluster membership: roles, addresses, shard map, identity.
 *
 * One object per process, built once from the loaded job config (after
 * dmlc/ps-lite's postoffice). It knows every process of the job by role and
 * index (embedding PS k, sync PS k, trainer r), each one's ADVERTISED
 * endpoint (cluster.embedding / cluster.sync / cluster.trainers: what peers
 * connect to; tcp host names are allowed and resolved when connecting), this
 * process's own identity and BIND endpoint, the shard map (key -> embedding
 * shard) and the hash peers compare in HELLO. Runtime modules ask it for an
 * endpoint to bind, endpoints to connect to and the count of shards; nothing
 * else parses endpoints.
 *
 * Bind address of this process (tcp endpoints; ipc:// and inproc:// bind as
 * written). The first of these that is set decides:
 *   1. --bind X (the daemon's command line): a full endpoint "tcp://H:P"
 *      bound as given, or a host part H bound with the advertised port;
 *   2. cluster.bind: a host part H for every process that reads this config
 *      (pass it per host with --set cluster.bind=H);
 *   3. the advertised host itself.
 * A host part H is "*" (every interface), an IP address (bound exactly), an
 * interface name such as "eth0" (1 and 2 only), or a host name: resolved
 * with getaddrinfo, and bound at its first address (IPv4 first) that belongs
 * to this machine; a name that resolves to no address of this machine is an
 * error ("start this process on H or set --bind"). ZeroMQ itself only binds
 * interfaces and addresses, never host names.
 *
 * HELLO hash: what must agree for peers to work together, not how each host
 * writes the addresses (a host name on one host, an IP on another, or ports
 * picked by a launcher): ss_cfg_cluster_hash() (tables, model shape, the
 * NUMBER of entries of each cluster list, ...), the shard map's values, and
 * the identity of the server the client talks to, so that a client whose
 * list names another PS at that place is refused at HELLO.
 *
 * Immutable after ss_cluster_new(): any thread may call the functions that
 * take a const object. */
#ifndef SS_CLUSTER_H
#define SS_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "ss_cfg.h"
#include "ss_hash.h"

/* Room for any endpoint the cluster gives out (a host, a port, a suffix). */
#define SS_CLUSTER_EP_MAX (SS_CFG_MAX_STR + 16)

/* Roles of the processes of a job; values are stable (log and metric names,
 * ps_role of server/ps_service.h). */
enum ss_cluster_role {
    SS_CLUSTER_EMBEDDING = 0,  /* embedding PS: a shard of every table (cluster.embedding) */
    SS_CLUSTER_SYNC = 1,       /* sync PS: a range of the EASGD center (cluster.sync) */
    SS_CLUSTER_TRAINER = 2,    /* trainer: its allreduce peer endpoint (cluster.trainers) */
};
#define SS_CLUSTER_N_ROLES 3

/* Who a process is: its role and index in that role's list. */
struct ss_cluster_id {
    int role;          /* enum ss_cluster_role */
    uint32_t index;    /* shard (PSs) or rank (trainers), 0-based */
};

typedef struct ss_cluster ss_cluster_t;

/* Shard that owns key among n_shards embedding PSs: the shard map. A power
 * of two takes a mask, the same value as the modulo without a 64-bit
 * division (every key of every request goes through here, on the trainer
 * and again on the PS: hot paths call this with ss_cluster_count()). */
static inline uint32_t ss_key_shard(uint64_t key, uint32_t n_shards)
{
    uint64_t h = ss_mix64(key ^ 0x5bd1e9955bd1e995ull);
    if ((n_shards & (n_shards - 1)) == 0)
        return (uint32_t)(h & (n_shards - 1));
    return (uint32_t)(h % n_shards);
}

/* Id of the map ss_key_shard() computes, recorded in checkpoints (ps_ckpt.h)
 * so that a restore into another shard count can move rows: bump it whenever
 * ss_key_shard() would map any key to another shard. */
#define SS_KEY_SHARD_MAP_ID 1u

/* Pass as ss_cluster_new()'s bind (this very pointer) for a process that has
 * an identity but binds nothing (shadow-trainer --eval-only): no bind address
 * is derived, ss_cluster_bind_endpoint() is NULL. */
extern const char ss_cluster_no_bind[];

/* Build the membership from cfg (loaded by ss_cfg_load()). Every endpoint
 * is checked (tcp://HOST:PORT with a port 1..65535, ipc://PATH,
 * inproc://NAME; "*" is not an address peers can connect to). me: this
 * process (its index must exist), or NULL for a client only (shadow-ctl,
 * tools): then nothing is bound. bind: the --bind value, or NULL/"" (see the
 * top for how the bind endpoint is chosen; it is resolved here, so a bad or
 * foreign address fails now). Returns NULL with one line in err naming the
 * key, the entry and what to do. Borrows cfg for the call only; caller owns
 * the result: ss_cluster_destroy(). */
ss_cluster_t *ss_cluster_new(const struct ss_cfg *cfg, const struct ss_cluster_id *me,
                             const char *bind, char *err, size_t err_len);

/* Free; sets *self_p to NULL, accepts NULL. */
void ss_cluster_destroy(ss_cluster_t **self_p);

/* Processes of role in the job (embedding shards, sync shards, trainers). */
size_t ss_cluster_count(const ss_cluster_t *self, int role);

/* Advertised endpoint of process index of role, as written in the job
 * (index < ss_cluster_count()). Valid while self lives. */
const char *ss_cluster_endpoint(const ss_cluster_t *self, int role, size_t index);

/* Check that a client here can reach the advertised endpoint of process
 * index of role: a tcp host name resolves (ZeroMQ resolves names itself
 * when connecting, but says nothing when it cannot: the connection just
 * never comes up). Returns 0, or SS_E_CONFIG with err "cannot resolve host
 * NAME in cluster.embedding[1] (tcp://NAME:PORT): <reason>". May block on
 * the system resolver. */
int ss_cluster_check_peer(const ss_cluster_t *self, int role, size_t index, char *err,
                          size_t err_len);

/* This process's identity, or NULL when built without one. */
const struct ss_cluster_id *ss_cluster_me(const ss_cluster_t *self);

/* The endpoint this process binds ("tcp://127.0.0.1:5555", or with the host
 * '*' for every interface), or NULL when built without an identity or with
 * ss_cluster_no_bind. Valid while self lives. */
const char *ss_cluster_bind_endpoint(const ss_cluster_t *self);

/* Bind sock (a ZeroMQ socket of the caller's thread) at this process's bind
 * endpoint (ZMQ_IPV6 set for an IPv6 address). Returns 0, or SS_E_NET with err
 * saying what failed and what to do: "cannot bind tcp://10.0.0.1:5555
 * (advertised as tcp://h:5555): Address already in use: another process
 * (another job?) uses port 5555; pick free ports or stop it", a port below
 * 1024 without root, an address that is not this machine's; SS_E_CONFIG
 * when this process binds nothing (no identity, or ss_cluster_no_bind). */
int ss_cluster_bind(const ss_cluster_t *self, void *sock, char *err, size_t err_len);

/* Service threads of every PS (ps.threads). Each one serves a socket of its
 * own on an endpoint of its own, derived from the PS's (see below), so that
 * the thread that reads a request answers it: no hand-off between threads. */
int ss_cluster_ps_threads(const ss_cluster_t *self);

/* The endpoint of service thread t (0 <= t < ps.threads) of PS index of role
 * (embedding or sync): thread 0 listens on the advertised endpoint itself,
 * thread t on the tcp port + t, or on the ipc path (inproc name) + ".t". So a
 * PS at tcp://h:7000 with 4 threads takes ports 7000..7003 (ss_cluster_new()
 * refuses a job whose endpoints overlap so, or whose ipc paths do not fit a
 * Unix socket). Written into out (len bytes); returns out. Any thread. */
const char *ss_cluster_thread_endpoint(const ss_cluster_t *self, int role, size_t index, int t,
                                       char *out, size_t len);

/* A slot for one client connection of this process, for
 * ss_cluster_ps_endpoint(): rank + k x trainers for its k-th call (0 for a
 * process without identity), so that the trainers' and their workers'
 * connections spread over the PSs' service threads. Any thread (an atomic
 * counter: the one thing the object changes after ss_cluster_new()). */
uint32_t ss_cluster_next_slot(const ss_cluster_t *self);

/* The endpoint a client connection with slot should use for PS index of
 * role: that of service thread slot mod ps.threads. Into out; returns out.
 * Any client that uses the advertised endpoint itself (shadow-ctl) is served
 * by thread 0. */
const char *ss_cluster_ps_endpoint(const ss_cluster_t *self, int role, size_t index,
                                   uint32_t slot, char *out, size_t len);

/* Service thread t's bind endpoint of this PS, derived from
 * ss_cluster_bind_endpoint() as above, into out; NULL when it binds nothing. */
const char *ss_cluster_thread_bind_endpoint(const ss_cluster_t *self, int t, char *out,
                                            size_t len);

/* Bind sock (of the caller's thread) at service thread t's bind endpoint of
 * this PS (derived from the bind endpoint as above; t = 0: the one
 * ss_cluster_bind() uses), and write the endpoint it is bound at into bound
 * (bound_len bytes). A bind endpoint with port 0 (--bind tcp://H:0, for tests
 * and tools that start a PS on a port nobody picked in advance): thread 0
 * gets a free port from the system, bound says which, and thread t > 0 binds
 * that port + t, so bound0 (what thread 0 got) is required for t > 0. Threads
 * bind in order, 0 first. Returns 0, or SS_E_NET with err as
 * ss_cluster_bind(); SS_E_CONFIG when this process is no PS or binds nothing. */
int ss_cluster_bind_thread(const ss_cluster_t *self, void *sock, int t, const char *bound0,
                           char *bound, size_t bound_len, char *err, size_t err_len);

/* Bind socks[0..n) (service threads 0..n-1 of this PS, n = ps.threads, all
 * sockets of the caller's thread) as ss_cluster_bind_thread() does, thread
 * 0 first, writing where socket t is bound into bound[t] (bound_len bytes
 * each). With port 0 a port P+t may be in use (another process's connection
 * from the ephemeral range): then every socket of the run is unbound and the
 * run tried again from a new port 0, up to 5 tries, each failed one logged.
 * first_port > 0 (a seam for tests): the first try starts at that port
 * instead of the system's. Returns 0, or SS_E_NET with err naming the last
 * try's port, SS_E_CONFIG as ss_cluster_bind_thread(). */
int ss_cluster_bind_run(const ss_cluster_t *self, void **socks, int n, unsigned first_port,
                        char **bound, size_t bound_len, char *err, size_t err_len);

/* The admin endpoint of trainer rank (cluster.trainer_admin: where it
 * answers shadow-ctl), or NULL when the job gives none. Valid while self
 * lives. */
const char *ss_cluster_admin_endpoint(const ss_cluster_t *self, size_t rank);

/* A trainer's admin bind endpoint: derived like its main one (--bind,
 * cluster.bind or the advertised host; a whole endpoint in --bind gives the
 * host, the port stays the admin endpoint's), or NULL when there is none. */
const char *ss_cluster_admin_bind_endpoint(const ss_cluster_t *self);

/* Bind sock at this trainer's admin endpoint. Returns 0, SS_E_CONFIG when it
 * has none, or SS_E_NET with err as ss_cluster_bind(). */
int ss_cluster_admin_bind(const ss_cluster_t *self, void *sock, char *err, size_t err_len);

/* ss_cluster_check_peer() for trainer rank's admin endpoint (it must exist). */
int ss_cluster_check_admin(const ss_cluster_t *self, size_t rank, char *err, size_t err_len);

/* 1 when endpoint is tcp:// at an IPv6 address (tcp://[ADDR]:PORT): a
 * socket that connects or binds there needs ZMQ_IPV6 (ss_net.h and the
 * allreduce set it; ss_cluster_bind() does). 0 otherwise. Any thread. */
int ss_endpoint_is_ipv6(const char *endpoint);

/* Split a tcp:// endpoint into its host (an IPv6 address without its
 * brackets) and port, as ss_cluster_new() reads it. Returns 0, or
 * SS_E_CONFIG with what is wrong in err (not tcp://, no port, ...). Any
 * thread. */
int ss_endpoint_split(const char *endpoint, char *host, size_t host_len, unsigned *port,
                      char *err, size_t err_len);

/* Embedding shard of key: ss_key_shard(key, embedding shards). */
uint32_t ss_cluster_shard_of(const ss_cluster_t *self, uint64_t key);

/* The HELLO hash of the server process index of role (see the top): a client
 * sends it to that server, the server expects its own. */
uint64_t ss_cluster_hello_hash(const ss_cluster_t *self, int role, size_t index);

/* This process's Prometheus port. metrics.ports, when given (one entry per
 * process, in the order below; scripts/shadow-launch fills it with free
 * ports), decides: this process's entry, 0 = none. Otherwise metrics.port >
 * 0 is the base: the embedding PSs take metrics.port + shard, the sync PSs
 * the next ports, then the trainers by rank (ss_cluster_new() refuses a base
 * that runs past 65535, and a metrics.ports of another length). 0 when
 * metrics are off or there is no identity. */
int ss_cluster_metrics_port(const ss_cluster_t *self);

/* ZeroMQ sockets a process needs when n_threads of its threads each connect
 * to every PS and to a ring neighbour (plus room for servers, monitors and
 * ZAP): n_threads * (embedding + sync + 2) + 64. */
int64_t ss_cluster_zmq_sockets(const ss_cluster_t *self, int64_t n_threads);

/* Raise zctx's ZMQ_MAX_SOCKETS (ZeroMQ's default 1023) to
 * ss_cluster_zmq_sockets(n_threads) when below it. Call before the first
 * socket of zctx. Returns 0, or SS_E_NET with err. */
int ss_cluster_zmq_setup(const ss_cluster_t *self, void *zctx, int64_t n_threads, char *err,
                         size_t err_len);

/* "embedding", "sync" or "trainer". */
const char *ss_cluster_role_name(int role);

/* The config key of role's list: "cluster.embedding", "cluster.sync",
 * "cluster.trainers". */
const char *ss_cluster_role_key(int role);

#endif
