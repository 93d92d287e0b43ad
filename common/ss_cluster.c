/* ss_cluster.c - cluster membership: endpoints parsed once, the bind address
 * derived and resolved, the shard map, the HELLO hash.
 *
 * DESIGN: an endpoint is split once into scheme, host and port (s_parse).
 * Whether an address belongs to this machine is asked of the kernel: a TCP
 * socket bound to it with port 0 (never listening, never sending) succeeds
 * exactly when it is local (all of 127/8, any interface address), which
 * getifaddrs() alone does not tell for 127.0.0.2 and the like. */
#include "ss_cluster.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_log.h"
#include "ss_mem.h"

#define S_EP_MAX SS_CLUSTER_EP_MAX      /* an endpoint with a host and a port */
#define S_IPC_PATH_MAX 107               /* longest Unix socket path (sun_path, less its NUL) */
#define S_PROBE_KEYS 64                  /* keys whose shards go into the hash */
#define S_BIND_RUNS 5                    /* runs of ports a PS with port 0 tries */

/* One endpoint, split. */
struct s_ep {
    char text[S_EP_MAX];         /* as written */
    int tcp;                     /* tcp:// (ipc and inproc bind and connect as written) */
    char host[SS_CFG_MAX_STR];   /* tcp: host, IPv6 brackets removed */
    unsigned port;               /* tcp: 1..65535 */
};

struct ss_cluster {
    size_t n[SS_CLUSTER_N_ROLES];          /* processes of each role */
    struct s_ep *eps[SS_CLUSTER_N_ROLES];  /* their advertised endpoints, owned */
    int has_me;                            /* built with an identity */
    struct ss_cluster_id me;               /* this process */
    char bind_ep[S_EP_MAX];                /* where it binds */
    int bind_ipv6;                         /* bind_ep holds an IPv6 address */
    size_t n_admin;                        /* cluster.trainer_admin: 0 or n[TRAINER] */
    struct s_ep *admin;                    /* the trainers' admin endpoints, owned */
    char admin_bind_ep[S_EP_MAX];          /* a trainer: where its admin socket binds */
    int admin_ipv6;                        /* admin_bind_ep holds an IPv6 address */
    uint64_t cfg_hash;                     /* ss_cfg_cluster_hash() */
    uint64_t map_hash;                     /* the shard map's values on probe keys */
    int64_t metrics_port;                  /* metrics.port */
    size_t n_mports;                       /* metrics.ports entries: 0 or every process */
    int64_t mports[SS_CFG_MAX_LIST];       /* metrics.ports */
    int ps_threads;                        /* ps.threads: endpoints per PS */
    _Atomic uint32_t next_slot;            /* ss_cluster_next_slot(): the one mutable field */
};

const char ss_cluster_no_bind[] = "(binds nothing)";

static const char *const s_role_names[] = {"embedding", "sync", "trainer"};
static const char *const s_role_keys[] = {"cluster.embedding", "cluster.sync",
                                          "cluster.trainers"};

const char *ss_cluster_role_name(int role)
{
    return role >= 0 && role < SS_CLUSTER_N_ROLES ? s_role_names[role] : "?";
}

const char *ss_cluster_role_key(int role)
{
    return role >= 0 && role < SS_CLUSTER_N_ROLES ? s_role_keys[role] : "?";
}

/* Split text into ep. Returns 0, or -1 with what is wrong in why. */
static int s_parse(const char *text, struct s_ep *ep, char *why, size_t len)
{
    memset(ep, 0, sizeof *ep);
    snprintf(ep->text, sizeof ep->text, "%s", text);
    if (!strncmp(text, "ipc://", 6) || !strncmp(text, "inproc://", 9))
        return 0;
    if (strncmp(text, "tcp://", 6) != 0) {
        snprintf(why, len, "expected tcp://HOST:PORT, ipc://PATH or inproc://NAME");
        return -1;
    }
    const char *h = text + 6, *colon;
    size_t hlen;
    if (*h == '[') {  /* [IPv6]:port */
        const char *close = strchr(h, ']');
        if (!close || close[1] != ':') {
            snprintf(why, len, "an IPv6 address is written tcp://[ADDR]:PORT");
            return -1;
        }
        h++;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(h, ':');
        hlen = colon ? (size_t)(colon - h) : 0;
    }
    if (!colon || hlen == 0) {
        snprintf(why, len, "expected tcp://HOST:PORT (a host and a port)");
        return -1;
    }
    char *end;
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (!colon[1] || *end || errno || port < 1 || port > 65535 || colon[1] == '-' ||
        colon[1] == '+') {
        snprintf(why, len, "port '%s' is not a number 1..65535", colon + 1);
        return -1;
    }
    if (hlen >= sizeof ep->host) {
        snprintf(why, len, "host name too long");
        return -1;
    }
    memcpy(ep->host, h, hlen);
    ep->tcp = 1;
    ep->port = (unsigned)port;
    return 0;
}

/* s_parse for a whole endpoint given to bind at (--bind, cluster.bind): there
 * port 0 is allowed too ("tcp://127.0.0.1:0": the system picks a free port,
 * and the PS reports the one it got in its ready line). */
static int s_parse_bind(const char *text, struct s_ep *ep, char *why, size_t len)
{
    size_t n = strlen(text);
    char one[S_EP_MAX];
    if (strncmp(text, "tcp://", 6) != 0 || n < 8 || strcmp(text + n - 2, ":0") != 0 ||
        n >= sizeof one)
        return s_parse(text, ep, why, len);
    snprintf(one, sizeof one, "%.*s:1", (int)(n - 2), text);
    if (s_parse(one, ep, why, len) != 0)
        return -1;
    snprintf(ep->text, sizeof ep->text, "%s", text);
    ep->port = 0;
    return 0;
}

int ss_endpoint_split(const char *endpoint, char *host, size_t host_len, unsigned *port,
                      char *err, size_t err_len)
{
    struct s_ep ep;
    if (strlen(endpoint) >= sizeof ep.text) {
        snprintf(err, err_len, "endpoint too long");
        return SS_E_CONFIG;
    }
    if (s_parse(endpoint, &ep, err, err_len) != 0)
        return SS_E_CONFIG;
    if (!ep.tcp || strlen(ep.host) >= host_len) {
        snprintf(err, err_len, ep.tcp ? "host name too long" : "not a tcp:// endpoint");
        return SS_E_CONFIG;
    }
    snprintf(host, host_len, "%s", ep.host);
    *port = ep.port;
    return 0;
}

/* 1 when addr is an address of this machine: the kernel lets a socket bind
 * it (port 0: nothing listens, nothing is sent). */
static int s_is_local(const struct sockaddr *addr, socklen_t addr_len)
{
    struct sockaddr_storage ss;
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    memcpy(&ss, addr, addr_len);
    if (ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)&ss)->sin6_port = 0;
    int rc = bind(fd, (struct sockaddr *)&ss, addr_len);
    int local = rc == 0 || errno != EADDRNOTAVAIL;
    close(fd);
    return local;
}

/* Write "tcp://ADDR:port" (brackets for IPv6) into out. */
static void s_tcp_ep(char *out, size_t len, const char *addr, int ipv6, unsigned port)
{
    snprintf(out, len, ipv6 ? "tcp://[%s]:%u" : "tcp://%s:%u", addr, port);
}

/* The first address of ai's list in family that belongs to this machine,
 * as text into out ("" if none); the first of any kind into first. */
static void s_pick_local(const struct addrinfo *res, int family, char *out, char *first)
{
    for (const struct addrinfo *ai = res; ai && !out[0]; ai = ai->ai_next) {
        if (ai->ai_family != family)
            continue;
        const void *a = family == AF_INET
                            ? (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr
                            : (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
        char text[INET6_ADDRSTRLEN];
        inet_ntop(family, a, text, sizeof text);
        if (!first[0])
            snprintf(first, INET6_ADDRSTRLEN, "%s", text);
        if (s_is_local(ai->ai_addr, ai->ai_addrlen))
            snprintf(out, INET6_ADDRSTRLEN, "%s", text);
    }
}

/* Resolve host name (written in what) to its first address of this machine,
 * IPv4 first, and make the bind endpoint of it. Returns 0 or SS_E_CONFIG
 * with err. */
static int s_bind_name(char *out, int *ipv6, const char *name, unsigned port, const char *what,
                       char *err, size_t len)
{
    struct addrinfo hints = {0}, *res = NULL;
    char addr[INET6_ADDRSTRLEN] = "", first[INET6_ADDRSTRLEN] = "";
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(name, NULL, &hints, &res);
    if (rc != 0) {
        snprintf(err, len, "cannot resolve host %s in %s: %s", name, what, gai_strerror(rc));
        return SS_E_CONFIG;
    }
    s_pick_local(res, AF_INET, addr, first);
    if (!addr[0]) {
        s_pick_local(res, AF_INET6, addr, first);
        *ipv6 = addr[0] != '\0';
    }
    freeaddrinfo(res);
    if (!addr[0]) {
        snprintf(err, len, "host %s (%s) resolves to %s, which is not an address of this "
                 "machine; start this process on %s or set --bind (e.g. --bind '*')", name, what,
                 first[0] ? first : "no address", name);
        return SS_E_CONFIG;
    }
    s_tcp_ep(out, S_EP_MAX, addr, *ipv6, port);
    return 0;
}

/* Bind endpoint from a host part h and port. ifname: an interface name is
 * allowed (given by the user for binding, not an advertised host). */
static int s_bind_host(char *out, int *ipv6, const char *h, unsigned port, int ifname,
                       const char *what, char *err, size_t len)
{
    struct in6_addr a6;
    struct in_addr a4;
    if (!strcmp(h, "*") || inet_pton(AF_INET, h, &a4) == 1 ||
        (ifname && if_nametoindex(h) != 0)) {
        s_tcp_ep(out, S_EP_MAX, h, 0, port);
        return 0;
    }
    if (inet_pton(AF_INET6, h, &a6) == 1) {
        *ipv6 = 1;
        s_tcp_ep(out, S_EP_MAX, h, 1, port);
        return 0;
    }
    return s_bind_name(out, ipv6, h, port, what, err, len);
}

/* Choose and resolve the bind endpoint (out, *ipv6) of this process's
 * advertised endpoint adv, written in list key (see ss_cluster.h). A whole
 * endpoint in --bind or cluster.bind gives the host part only when adv is
 * not the process's main endpoint (admin: keeps its own port). */
static int s_derive_bind(ss_cluster_t *self, const struct s_ep *adv, const char *key,
                         const char *bind, const char *cfg_bind, char *out, int *ipv6,
                         char *err, size_t len)
{
    int main_ep = adv == &self->eps[self->me.role][self->me.index];
    char what[S_EP_MAX + 64];
    const char *spec = bind && bind[0] ? bind : cfg_bind[0] ? cfg_bind : NULL;
    const char *from = bind && bind[0] ? "--bind" : "cluster.bind";
    if (!spec) {
        snprintf(out, S_EP_MAX, "%s", adv->text);
        if (!adv->tcp)
            return 0;
        snprintf(what, sizeof what, "%s[%u] (%s)", key, self->me.index, adv->text);
        return s_bind_host(out, ipv6, adv->host, adv->port, 0, what, err, len);
    }
    if (strstr(spec, "://")) {  /* a whole endpoint */
        struct s_ep ep;
        char why[128];
        if (s_parse_bind(spec, &ep, why, sizeof why) != 0) {
            snprintf(err, len, "%s %s: %s", from, spec, why);
            return SS_E_CONFIG;
        }
        if (ep.tcp && ep.port == 0 && main_ep && self->me.role == SS_CLUSTER_TRAINER) {
            snprintf(err, len, "%s %s: port 0 (a port the system picks) is for a PS, which "
                     "reports the port it got; a trainer's ring peers need its port in "
                     "advance", from, spec);
            return SS_E_CONFIG;
        }
        snprintf(what, sizeof what, "%s %s", from, spec);
        if (!main_ep && ep.tcp && adv->tcp)  /* its host, the admin endpoint's port */
            return s_bind_host(out, ipv6, ep.host, adv->port, 1, what, err, len);
        if (!main_ep) {
            snprintf(out, S_EP_MAX, "%s", adv->text);
            return 0;
        }
        snprintf(out, S_EP_MAX, "%s", spec);
        return ep.tcp ? s_bind_host(out, ipv6, ep.host, ep.port, 1, what, err, len) : 0;
    }
    if (!adv->tcp) {
        snprintf(err, len, "%s %s: a host part applies to tcp endpoints, and %s[%u] is %s; give "
                 "a whole endpoint", from, spec, key, self->me.index, adv->text);
        return SS_E_CONFIG;
    }
    snprintf(what, sizeof what, "%s %s", from, spec);
    return s_bind_host(out, ipv6, spec, adv->port, 1, what, err, len);
}

/* cluster.trainer_admin: none, or one endpoint per trainer. */
static int s_load_admin(ss_cluster_t *self, const struct ss_str_list *list, char *err,
                        size_t len)
{
    char why[128];
    if (list->n == 0)
        return 0;
    if (list->n != self->n[SS_CLUSTER_TRAINER]) {
        snprintf(err, len, "cluster.trainer_admin has %zu endpoint(s) and cluster.trainers %zu: "
                 "give one per trainer, or none", list->n, self->n[SS_CLUSTER_TRAINER]);
        return SS_E_CONFIG;
    }
    self->n_admin = list->n;
    self->admin = ss_calloc(list->n, sizeof *self->admin);
    for (size_t i = 0; i < list->n; i++)
        if (s_parse(list->v[i], &self->admin[i], why, sizeof why) != 0 ||
            (self->admin[i].tcp && !strcmp(self->admin[i].host, "*"))) {
            snprintf(err, len, "cluster.trainer_admin[%zu] (%s): %s", i, list->v[i],
                     self->admin[i].tcp ? "'*' is not an address clients can connect to" : why);
            return SS_E_CONFIG;
        }
    return 0;
}

/* Parse role's list of cfg into self. */
static int s_load_role(ss_cluster_t *self, int role, const struct ss_str_list *list, char *err,
                       size_t len)
{
    char why[128];
    self->n[role] = list->n;
    self->eps[role] = ss_calloc(list->n ? list->n : 1, sizeof *self->eps[role]);
    for (size_t i = 0; i < list->n; i++) {
        struct s_ep *ep = &self->eps[role][i];
        if (s_parse(list->v[i], ep, why, sizeof why) != 0) {
            snprintf(err, len, "%s[%zu] (%s): %s", s_role_keys[role], i, list->v[i], why);
            return SS_E_CONFIG;
        }
        if (ep->tcp && !strcmp(ep->host, "*")) {
            snprintf(err, len, "%s[%zu] (%s): '*' is not an address peers can connect to; "
                     "write the host name or address they reach this process at, and bind "
                     "every interface with cluster.bind: '*' or --bind '*'", s_role_keys[role],
                     i, list->v[i]);
            return SS_E_CONFIG;
        }
    }
    return 0;
}

/* Decimal digits of v. */
static size_t s_digits(unsigned v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* Endpoint of service thread t of a PS whose endpoint is text (advertised or
 * bound): thread 0 uses text itself, thread t > 0 the tcp port + t, or the
 * ipc path (inproc name) + ".t". Into out (S_EP_MAX). */
static void s_thread_ep(const char *text, int t, char *out, size_t len)
{
    struct s_ep ep;
    char why[128];
    if (t == 0 || s_parse(text, &ep, why, sizeof why) != 0) {
        snprintf(out, len, "%s", text);
        return;
    }
    if (!ep.tcp) {
        snprintf(out, len, "%s.%d", text, t);
        return;
    }
    const char *colon = strrchr(text, ':');
    snprintf(out, len, "%.*s:%u", (int)(colon - text), text, ep.port + (unsigned)t);
}

/* 1 when ep (index i of role) is a PS's endpoint, which takes ps.threads
 * endpoints (ports, paths). */
static int s_is_ps(int role)
{
    return role == SS_CLUSTER_EMBEDDING || role == SS_CLUSTER_SYNC;
}

/* An ipc path must fit a Unix socket address (with the ".t" of the last
 * service thread for a PS): ZeroMQ's own error names no entry. */
static int s_check_ipc(const ss_cluster_t *self, int role, size_t i, char *err, size_t len)
{
    const struct s_ep *ep = &self->eps[role][i];
    if (strncmp(ep->text, "ipc://", 6) != 0)
        return 0;
    size_t n = strlen(ep->text + 6);
    if (s_is_ps(role) && self->ps_threads > 1)
        n += 1 + s_digits((unsigned)self->ps_threads - 1);
    if (n <= S_IPC_PATH_MAX)
        return 0;
    snprintf(err, len, "%s[%zu] (%s): an ipc path is at most %d bytes (a Unix socket; with "
             "ps.threads %d a PS's threads add '.N'), this one needs %zu: use a shorter path",
             s_role_keys[role], i, ep->text, S_IPC_PATH_MAX, self->ps_threads, n);
    return SS_E_CONFIG;
}

/* Ports [*lo, *hi] endpoint i of role takes on its host (a PS: one per
 * service thread). */
static void s_port_span(const ss_cluster_t *self, int role, size_t i, unsigned *lo, unsigned *hi)
{
    *lo = self->eps[role][i].port;
    *hi = *lo + (s_is_ps(role) ? (unsigned)self->ps_threads - 1 : 0);
}

/* With ps.threads > 1 a PS at tcp port P takes P .. P + threads - 1: no
 * other endpoint of the job may sit in that span on the same host (as
 * written), and the span must end at 65535 at most. */
static int s_check_ports(const ss_cluster_t *self, int role, size_t i, char *err, size_t len)
{
    const struct s_ep *a = &self->eps[role][i];
    unsigned lo, hi, blo, bhi;
    if (!a->tcp || self->ps_threads <= 1 || !s_is_ps(role))
        return 0;
    s_port_span(self, role, i, &lo, &hi);
    if (hi > 65535) {
        snprintf(err, len, "%s[%zu] (%s): with ps.threads %d it takes ports %u..%u, past 65535",
                 s_role_keys[role], i, a->text, self->ps_threads, lo, hi);
        return SS_E_CONFIG;
    }
    for (int r = 0; r < SS_CLUSTER_N_ROLES; r++)
        for (size_t j = 0; j < self->n[r]; j++) {
            const struct s_ep *b = &self->eps[r][j];
            if ((r == role && j == i) || !b->tcp || strcmp(a->host, b->host) != 0)
                continue;
            s_port_span(self, r, j, &blo, &bhi);
            if (blo > hi || bhi < lo)
                continue;
            snprintf(err, len, "%s[%zu] (%s) takes ports %u..%u (one per service thread, "
                     "ps.threads %d), and %s[%zu] (%s) uses port(s) %u..%u of them: space "
                     "the PSs' ports ps.threads apart", s_role_keys[role], i, a->text, lo, hi,
                     self->ps_threads, s_role_keys[r], j, b->text, blo, bhi);
            return SS_E_CONFIG;
        }
    return 0;
}

/* Every endpoint fits what the PSs' service threads derive from it. */
static int s_check_spans(const ss_cluster_t *self, char *err, size_t len)
{
    for (int r = 0; r < SS_CLUSTER_N_ROLES; r++)
        for (size_t i = 0; i < self->n[r]; i++)
            if (s_check_ipc(self, r, i, err, len) != 0 || s_check_ports(self, r, i, err, len))
                return SS_E_CONFIG;
    return 0;
}

/* The shard map's values on fixed keys, for the HELLO hash: two builds
 * with different maps (or shard counts) do not talk. */
static uint64_t s_map_hash(uint32_t n_shards)
{
    uint32_t v[S_PROBE_KEYS];
    for (uint32_t i = 0; i < S_PROBE_KEYS; i++)
        v[i] = ss_key_shard(ss_mix64(i + 1), n_shards ? n_shards : 1);
    return ss_hash_bytes(v, sizeof v, n_shards);
}

/* me's index must exist: "--shard 3: the job has 2 embedding PSs". */
static int s_check_me(const ss_cluster_t *self, const struct ss_cluster_id *me, char *err,
                      size_t len)
{
    if (me->role < 0 || me->role >= SS_CLUSTER_N_ROLES) {
        snprintf(err, len, "unknown role %d", me->role);
        return SS_E_CONFIG;
    }
    size_t n = self->n[me->role];
    if (me->index < n)
        return 0;
    snprintf(err, len, "%s %u: the job has %zu %s%s%s (%s)",
             me->role == SS_CLUSTER_TRAINER ? "--rank" : "--shard", me->index, n,
             s_role_names[me->role], me->role == SS_CLUSTER_TRAINER ? "" : " PS",
             n == 1 ? "" : "s", s_role_keys[me->role]);
    return SS_E_CONFIG;
}

/* metrics.ports: none (then metrics.port + index must stay a port), or one
 * port per process of the job (a launcher writes it), each distinct unless 0.
 * Call after metrics_port is set. Returns 0, or SS_E_CONFIG with err. */
static int s_load_metrics_ports(ss_cluster_t *self, const struct ss_int_list *l, char *err,
                                size_t err_len)
{
    size_t total = self->n[0] + self->n[1] + self->n[2];
    if (l->n == 0 && self->metrics_port > 0 && self->metrics_port + (int64_t)total - 1 > 65535) {
        snprintf(err, err_len, "metrics.port %" PRId64 ": its %zu processes would take ports "
                 "past 65535", self->metrics_port, total);
        return SS_E_CONFIG;
    }
    if (l->n == 0)
        return 0;
    if (l->n != total) {
        snprintf(err, err_len, "metrics.ports has %zu entries, the job has %zu processes (%zu "
                 "embedding, %zu sync, %zu trainers): one port each, or none", l->n, total,
                 self->n[0], self->n[1], self->n[2]);
        return SS_E_CONFIG;
    }
    for (size_t i = 0; i < l->n; i++)
        for (size_t j = 0; j < i; j++)
            if (l->v[i] != 0 && l->v[i] == l->v[j]) {
                snprintf(err, err_len, "metrics.ports: port %" PRId64 " given twice (entries "
                         "%zu and %zu)", l->v[i], j, i);
                return SS_E_CONFIG;
            }
    memcpy(self->mports, l->v, l->n * sizeof l->v[0]);
    self->n_mports = l->n;
    return 0;
}

ss_cluster_t *ss_cluster_new(const struct ss_cfg *cfg, const struct ss_cluster_id *me,
                             const char *bind, char *err, size_t err_len)
{
    ss_assert(cfg && err);
    ss_cluster_t *self = ss_calloc(1, sizeof *self);
    const struct ss_str_list *lists[SS_CLUSTER_N_ROLES] = {&cfg->embedding_eps, &cfg->sync_eps,
                                                           &cfg->trainer_eps};
    for (int r = 0; r < SS_CLUSTER_N_ROLES; r++)
        if (s_load_role(self, r, lists[r], err, err_len) != 0)
            goto fail;
    if (self->n[SS_CLUSTER_EMBEDDING] == 0 || self->n[SS_CLUSTER_TRAINER] == 0) {
        snprintf(err, err_len, "%s needs at least one endpoint",
                 self->n[SS_CLUSTER_EMBEDDING] ? "cluster.trainers" : "cluster.embedding");
        goto fail;
    }
    self->ps_threads = (int)cfg->ps_threads;
    if (s_load_admin(self, &cfg->trainer_admin_eps, err, err_len) != 0 ||
        s_check_spans(self, err, err_len) != 0)
        goto fail;
    self->cfg_hash = ss_cfg_cluster_hash(cfg);
    self->map_hash = s_map_hash((uint32_t)self->n[SS_CLUSTER_EMBEDDING]);
    self->metrics_port = cfg->metrics_port;
    if (s_load_metrics_ports(self, &cfg->metrics_ports, err, err_len) != 0)
        goto fail;
    if (me) {
        if (s_check_me(self, me, err, err_len) != 0)
            goto fail;
        self->me = *me;
        self->has_me = 1;
        if (bind != ss_cluster_no_bind &&
            s_derive_bind(self, &self->eps[me->role][me->index], ss_cluster_role_key(me->role),
                          bind, cfg->cluster_bind, self->bind_ep, &self->bind_ipv6, err,
                          err_len) != 0)
            goto fail;
        if (bind != ss_cluster_no_bind && me->role == SS_CLUSTER_TRAINER && self->n_admin &&
            s_derive_bind(self, &self->admin[me->index], "cluster.trainer_admin", bind,
                          cfg->cluster_bind, self->admin_bind_ep, &self->admin_ipv6, err,
                          err_len) != 0)
            goto fail;
    }
    return self;
fail:
    ss_cluster_destroy(&self);
    return NULL;
}

void ss_cluster_destroy(ss_cluster_t **self_p)
{
    ss_cluster_t *self = *self_p;
    if (!self)
        return;
    for (int r = 0; r < SS_CLUSTER_N_ROLES; r++)
        ss_free(self->eps[r]);
    ss_free(self->admin);
    ss_free(self);
    *self_p = NULL;
}

size_t ss_cluster_count(const ss_cluster_t *self, int role)
{
    ss_assert(self && role >= 0 && role < SS_CLUSTER_N_ROLES);
    return self->n[role];
}

const char *ss_cluster_endpoint(const ss_cluster_t *self, int role, size_t index)
{
    ss_assert(self && role >= 0 && role < SS_CLUSTER_N_ROLES && index < self->n[role]);
    return self->eps[role][index].text;
}

/* Resolve ep's host (a TCP endpoint by name), so that a name that never
 * resolves is an error now: ZeroMQ's connect accepts it and retries forever.
 * what names the list entry ("cluster.embedding[1]"). */
static int s_check_resolves(const struct s_ep *ep, const char *what, char *err, size_t err_len)
{
    struct addrinfo hints = {0}, *res = NULL;
    struct in6_addr a6;
    if (!ep->tcp || inet_pton(AF_INET6, ep->host, &a6) == 1)
        return 0;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(ep->host, NULL, &hints, &res);
    if (rc != 0) {
        snprintf(err, err_len, "cannot resolve host %s in %s (%s): %s", ep->host, what,
                 ep->text, gai_strerror(rc));
        return SS_E_CONFIG;
    }
    freeaddrinfo(res);
    return 0;
}

int ss_cluster_check_peer(const ss_cluster_t *self, int role, size_t index, char *err,
                          size_t err_len)
{
    ss_assert(self && role >= 0 && role < SS_CLUSTER_N_ROLES && index < self->n[role]);
    char what[64];
    snprintf(what, sizeof what, "%s[%zu]", s_role_keys[role], index);
    return s_check_resolves(&self->eps[role][index], what, err, err_len);
}

const struct ss_cluster_id *ss_cluster_me(const ss_cluster_t *self)
{
    return self->has_me ? &self->me : NULL;
}

const char *ss_cluster_bind_endpoint(const ss_cluster_t *self)
{
    return self->bind_ep[0] ? self->bind_ep : NULL;
}

/* What to do about a failed bind of ep (errno e), after the system's words. */
static void s_bind_hint(const char *ep, int e, char *out, size_t len)
{
    struct s_ep b;
    char why[64];
    int tcp = s_parse(ep, &b, why, sizeof why) == 0 && b.tcp;
    out[0] = '\0';
    if (e == EADDRINUSE && tcp)
        snprintf(out, len, ": another process (another job?) uses port %u; pick free ports or "
                 "stop it", b.port);
    else if (e == EADDRINUSE)
        snprintf(out, len, ": another process uses it; stop it or pick another endpoint");
    else if (e == EACCES && tcp && b.port < 1024)
        snprintf(out, len, ": ports below 1024 need root; pick a port from 1024 up");
    else if (e == EADDRNOTAVAIL && tcp)
        snprintf(out, len, ": %s is not an address of this machine; start this process on "
                 "the host that has it or set --bind (e.g. --bind '*')", b.host);
    else if (e == ENODEV && tcp)
        snprintf(out, len, ": %s is neither an interface nor an address of this machine "
                 "(ZeroMQ binds no host names); set --bind to '*', an interface or an IP",
                 b.host);
}

/* Bind sock at ep (advertised as adv). Returns 0 or SS_E_NET with err. */
static int s_bind_at(void *sock, const char *ep, int ipv6, const char *adv, char *err,
                     size_t err_len)
{
    int one = 1;
    if (ipv6 && zmq_setsockopt(sock, ZMQ_IPV6, &one, sizeof one) != 0) {
        snprintf(err, err_len, "cannot bind %s: ZMQ_IPV6: %s", ep, zmq_strerror(zmq_errno()));
        return SS_E_NET;
    }
    if (zmq_bind(sock, ep) == 0)
        return 0;
    int e = zmq_errno();
    char hint[512];
    char as[S_EP_MAX + 32] = "";
    s_bind_hint(ep, e, hint, sizeof hint);
    if (strcmp(adv, ep) != 0)
        snprintf(as, sizeof as, " (advertised as %s)", adv);
    snprintf(err, err_len, "cannot bind %s%s: %s%s", ep, as, zmq_strerror(e), hint);
    return SS_E_NET;
}

int ss_cluster_bind(const ss_cluster_t *self, void *sock, char *err, size_t err_len)
{
    ss_assert(self && sock);
    if (!self->bind_ep[0]) {
        snprintf(err, err_len, "this process binds nothing (%s)",
                 self->has_me ? "built with ss_cluster_no_bind" : "no identity");
        return SS_E_CONFIG;
    }
    return s_bind_at(sock, self->bind_ep, self->bind_ipv6,
                     ss_cluster_endpoint(self, self->me.role, self->me.index), err, err_len);
}

int ss_cluster_ps_threads(const ss_cluster_t *self)
{
    return self->ps_threads;
}

const char *ss_cluster_thread_endpoint(const ss_cluster_t *self, int role, size_t index, int t,
                                       char *out, size_t len)
{
    ss_assert(self && s_is_ps(role) && index < self->n[role] && t >= 0 &&
              t < self->ps_threads && out);
    s_thread_ep(self->eps[role][index].text, t, out, len);
    return out;
}

uint32_t ss_cluster_next_slot(const ss_cluster_t *self)
{
    ss_assert(self);
    /* the counter is the one field that changes after ss_cluster_new() */
    uint32_t k = atomic_fetch_add(&((ss_cluster_t *)self)->next_slot, 1);
    uint32_t rank = self->has_me ? self->me.index : 0;
    return rank + k * (uint32_t)(self->n[SS_CLUSTER_TRAINER] ? self->n[SS_CLUSTER_TRAINER] : 1);
}

const char *ss_cluster_ps_endpoint(const ss_cluster_t *self, int role, size_t index,
                                   uint32_t slot, char *out, size_t len)
{
    return ss_cluster_thread_endpoint(self, role, index, (int)(slot % (uint32_t)self->ps_threads),
                                      out, len);
}

const char *ss_cluster_thread_bind_endpoint(const ss_cluster_t *self, int t, char *out,
                                            size_t len)
{
    ss_assert(self && t >= 0 && t < self->ps_threads && out);
    if (!self->bind_ep[0])
        return NULL;
    s_thread_ep(self->bind_ep, t, out, len);
    return out;
}

/* 1 when this process binds a tcp port 0 (the system picks the port). */
static int s_binds_port0(const ss_cluster_t *self)
{
    size_t n = strlen(self->bind_ep);
    return !strncmp(self->bind_ep, "tcp://", 6) && n > 2 && !strcmp(self->bind_ep + n - 2, ":0");
}

/* The endpoint sock is bound at (ZMQ_LAST_ENDPOINT) into out. Returns 0 or
 * SS_E_NET with err. */
static int s_last_endpoint(void *sock, char *out, size_t len, char *err, size_t err_len)
{
    size_t n = len;
    if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, out, &n) != 0) {
        snprintf(err, err_len, "cannot read the bound endpoint: %s", zmq_strerror(zmq_errno()));
        return SS_E_NET;
    }
    return 0;
}

int ss_cluster_bind_thread(const ss_cluster_t *self, void *sock, int t, const char *bound0,
                           char *bound, size_t bound_len, char *err, size_t err_len)
{
    char ep[S_EP_MAX], adv[S_EP_MAX];
    int port0;
    ss_assert(self && sock);
    if (!self->bind_ep[0] || !s_is_ps(self->me.role)) {
        snprintf(err, err_len, "this process binds no PS endpoint (%s)",
                 !self->has_me ? "no identity" : self->bind_ep[0] ? "not a PS"
                                                                  : "built with ss_cluster_no_bind");
        return SS_E_CONFIG;
    }
    ss_assert(t >= 0 && t < self->ps_threads && bound && (t == 0 || bound0));
    port0 = s_binds_port0(self);
    s_thread_ep(port0 && t > 0 ? bound0 : self->bind_ep, t, ep, sizeof ep);
    ss_cluster_thread_endpoint(self, self->me.role, self->me.index, t, adv, sizeof adv);
    int rc = s_bind_at(sock, ep, self->bind_ipv6, adv, err, err_len);
    if (rc == 0 && port0 && t == 0)
        return s_last_endpoint(sock, bound, bound_len, err, err_len);
    if (rc == 0)
        snprintf(bound, bound_len, "%s", ep);
    return rc;
}

/* Unbind socks[0..n) from the endpoints in bound (the run bound so far). */
static void s_unbind_run(void **socks, int n, char **bound)
{
    for (int t = 0; t < n; t++)
        if (zmq_unbind(socks[t], bound[t]) != 0)
            SS_LOG(SS_LOG_WARN, "cannot unbind %s: %s", bound[t], zmq_strerror(zmq_errno()));
}

/* Bind one run: thread 0 at ep0, threads t > 0 at what thread 0 got + t.
 * Returns 0, or SS_E_NET with err and *bound_n the sockets bound (to unbind). */
static int s_bind_run_once(const ss_cluster_t *self, void **socks, int n, const char *ep0,
                           char **bound, size_t bound_len, int *bound_n, char *err,
                           size_t err_len)
{
    char adv[S_EP_MAX];
    *bound_n = 0;
    ss_cluster_thread_endpoint(self, self->me.role, self->me.index, 0, adv, sizeof adv);
    int rc = s_bind_at(socks[0], ep0, self->bind_ipv6, adv, err, err_len);
    if (rc == 0)
        rc = s_last_endpoint(socks[0], bound[0], bound_len, err, err_len);
    if (rc)
        return rc;
    *bound_n = 1;
    for (int t = 1; t < n; t++) {
        rc = ss_cluster_bind_thread(self, socks[t], t, bound[0], bound[t], bound_len, err,
                                    err_len);
        if (rc)
            return rc;
        *bound_n = t + 1;
    }
    return 0;
}

int ss_cluster_bind_run(const ss_cluster_t *self, void **socks, int n, unsigned first_port,
                        char **bound, size_t bound_len, char *err, size_t err_len)
{
    char ep0[S_EP_MAX], last[1024] = "";
    int rc = 0, bound_n = 0;
    ss_assert(self && socks && bound && n >= 1);
    if (!self->bind_ep[0] || !s_is_ps(self->me.role) || !s_binds_port0(self)) {
        for (int t = 0; t < n && rc == 0; t++)
            rc = ss_cluster_bind_thread(self, socks[t], t, t ? bound[0] : NULL, bound[t],
                                        bound_len, err, err_len);
        return rc;
    }
    ss_assert(n == self->ps_threads && first_port <= 65535);
    size_t stem = strlen(self->bind_ep) - 1;  /* up to the 0 of ":0" */
    for (int run = 1; run <= S_BIND_RUNS; run++) {
        if (run == 1 && first_port > 0)
            snprintf(ep0, sizeof ep0, "%.*s%u", (int)stem, self->bind_ep, first_port);
        else
            snprintf(ep0, sizeof ep0, "%s", self->bind_ep);
        rc = s_bind_run_once(self, socks, n, ep0, bound, bound_len, &bound_n, last,
                             sizeof last);
        if (rc == 0)
            return 0;
        if (bound_n == 0 && strcmp(ep0, self->bind_ep) == 0) {
            snprintf(err, err_len, "%s", last);  /* the system's port: no other run helps */
            return rc;
        }
        SS_LOG(SS_LOG_WARN, "the run of %d service threads' ports from %s failed (try %d of "
               "%d): %s; %s", n, bound_n ? bound[0] : ep0, run, S_BIND_RUNS, last,
               run < S_BIND_RUNS ? "trying again from a new port 0" : "giving up");
        s_unbind_run(socks, bound_n, bound);
    }
    snprintf(err, err_len, "cannot bind a run of %d free ports for the service threads "
             "(port 0: the system's port P for thread 0, P+1.. for the others) in %d tries; "
             "the last: %s", n, S_BIND_RUNS, last);
    return SS_E_NET;
}

const char *ss_cluster_admin_endpoint(const ss_cluster_t *self, size_t rank)
{
    ss_assert(self);
    return rank < self->n_admin ? self->admin[rank].text : NULL;
}

const char *ss_cluster_admin_bind_endpoint(const ss_cluster_t *self)
{
    return self->admin_bind_ep[0] ? self->admin_bind_ep : NULL;
}

int ss_cluster_admin_bind(const ss_cluster_t *self, void *sock, char *err, size_t err_len)
{
    ss_assert(self && sock);
    if (!self->admin_bind_ep[0]) {
        snprintf(err, err_len, "this process has no admin endpoint (cluster.trainer_admin)");
        return SS_E_CONFIG;
    }
    return s_bind_at(sock, self->admin_bind_ep, self->admin_ipv6,
                     self->admin[self->me.index].text, err, err_len);
}

int ss_cluster_check_admin(const ss_cluster_t *self, size_t rank, char *err, size_t err_len)
{
    ss_assert(self && rank < self->n_admin);
    char what[64];
    snprintf(what, sizeof what, "cluster.trainer_admin[%zu]", rank);
    return s_check_resolves(&self->admin[rank], what, err, err_len);
}

int ss_endpoint_is_ipv6(const char *endpoint)
{
    struct s_ep ep;
    struct in6_addr a6;
    char why[128];
    return s_parse(endpoint, &ep, why, sizeof why) == 0 && ep.tcp &&
           inet_pton(AF_INET6, ep.host, &a6) == 1;
}

uint32_t ss_cluster_shard_of(const ss_cluster_t *self, uint64_t key)
{
    return ss_key_shard(key, (uint32_t)self->n[SS_CLUSTER_EMBEDDING]);
}

uint64_t ss_cluster_hello_hash(const ss_cluster_t *self, int role, size_t index)
{
    uint64_t id[3] = {self->map_hash, (uint64_t)role, (uint64_t)index};
    ss_assert(role >= 0 && role < SS_CLUSTER_N_ROLES);
    return ss_hash_bytes(id, sizeof id, self->cfg_hash);
}

int ss_cluster_metrics_port(const ss_cluster_t *self)
{
    if (!self->has_me || (self->metrics_port <= 0 && self->n_mports == 0))
        return 0;
    size_t off = self->me.index;
    for (int r = 0; r < self->me.role; r++)
        off += self->n[r];
    if (self->n_mports)
        return (int)self->mports[off];
    return (int)(self->metrics_port + (int64_t)off);
}

int64_t ss_cluster_zmq_sockets(const ss_cluster_t *self, int64_t n_threads)
{
    int64_t per = (int64_t)(self->n[SS_CLUSTER_EMBEDDING] + self->n[SS_CLUSTER_SYNC]) + 2;
    return n_threads * per + 64;
}

int ss_cluster_zmq_setup(const ss_cluster_t *self, void *zctx, int64_t n_threads, char *err,
                         size_t err_len)
{
    int64_t want = ss_cluster_zmq_sockets(self, n_threads);
    if (want > INT32_MAX)
        want = INT32_MAX;
    int have = zmq_ctx_get(zctx, ZMQ_MAX_SOCKETS);
    if (have >= 0 && want <= have)
        return 0;
    if (zmq_ctx_set(zctx, ZMQ_MAX_SOCKETS, (int)want) != 0) {
        snprintf(err, err_len, "cannot raise ZeroMQ's socket limit to %lld (%zu embedding and "
                 "%zu sync PSs, %lld threads): %s", (long long)want,
                 self->n[SS_CLUSTER_EMBEDDING], self->n[SS_CLUSTER_SYNC], (long long)n_threads,
                 zmq_strerror(zmq_errno()));
        return SS_E_NET;
    }
    return 0;
}
