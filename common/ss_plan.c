/* ss_plan.c - the launch plan: hosts file, placement, endpoints (ss_plan.h).
 *
 * DESIGN: three steps a launcher takes in order, each reading what the one
 * before left: the hosts (parsed or this machine), the placement (a host
 * index per process, and how many free ports each host must find), the
 * endpoints (from the ipc folder, a base port, or the free ports found).
 * The free ports come from the hosts themselves (a launcher runs shadow-ctl
 * ports on each), which is why placement and endpoints are two calls. */
#include "ss_plan.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_mem.h"

#define S_MAX_HOSTS_BYTES (16u << 20)   /* biggest hosts file read */
#define S_ALL_ROLES ((1u << SS_CLUSTER_N_ROLES) - 1)

/* The processes of one kind: each one's host and endpoint. */
struct s_kind {
    size_t n;                          /* processes */
    size_t *host;                      /* host index of each, owned */
    char (*ep)[SS_CLUSTER_EP_MAX];     /* endpoint of each ("" while unset), owned */
};

struct ss_plan {
    struct ss_plan_host *hosts;        /* owned, n_hosts of them */
    size_t n_hosts;
    struct s_kind kind[SS_PLAN_N_KINDS];
    struct ss_plan_opts opts;          /* of ss_plan_place(); zero for a fixed plan */
    int fixed;                         /* placed by ss_plan_place_fixed(): endpoints set */
};

static const char *const s_kind_names[] = {"embedding", "sync", "trainer", "admin"};
static const char s_ipc_prefix[] = {'e', 's', 't'};

ss_plan_t *ss_plan_new(void)
{
    return ss_calloc(1, sizeof(ss_plan_t));
}

void ss_plan_destroy(ss_plan_t **self_p)
{
    ss_assert(self_p);
    ss_plan_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; i < self->n_hosts; i++)
        ss_free(self->hosts[i].ports);
    ss_free(self->hosts);
    for (int k = 0; k < SS_PLAN_N_KINDS; k++) {
        ss_free(self->kind[k].host);
        ss_free(self->kind[k].ep);
    }
    ss_free(self);
    *self_p = NULL;
}

const char *ss_plan_kind_name(int kind)
{
    return kind >= 0 && kind < SS_PLAN_N_KINDS ? s_kind_names[kind] : "?";
}

/* ------------------------------------------------------------- hosts */

/* A new host at the end of the list; zeroed. */
static struct ss_plan_host *s_add_host(ss_plan_t *self)
{
    self->hosts = ss_realloc(self->hosts, (self->n_hosts + 1) * sizeof *self->hosts);
    struct ss_plan_host *h = &self->hosts[self->n_hosts++];
    memset(h, 0, sizeof *h);
    return h;
}

void ss_plan_local_host(ss_plan_t *self)
{
    ss_assert(self && self->n_hosts == 0);
    struct ss_plan_host *h = s_add_host(self);
    snprintf(h->target, sizeof h->target, "localhost");
    snprintf(h->addr, sizeof h->addr, "127.0.0.1");
    h->roles = S_ALL_ROLES;
}

/* The role bits a hosts-file word stands for, or 0 when it names none. */
static unsigned s_role_bits(const char *w)
{
    if (!strcmp(w, "embedding"))
        return 1u << SS_CLUSTER_EMBEDDING;
    if (!strcmp(w, "sync"))
        return 1u << SS_CLUSTER_SYNC;
    if (!strcmp(w, "trainer"))
        return 1u << SS_CLUSTER_TRAINER;
    if (!strcmp(w, "ps"))
        return (1u << SS_CLUSTER_EMBEDDING) | (1u << SS_CLUSTER_SYNC);
    if (!strcmp(w, "all"))
        return S_ALL_ROLES;
    return 0;
}

/* Set h's address from text when it is an IP address ("[v6]" too).
 * Returns 1 when it was one. */
static int s_set_ip(struct ss_plan_host *h, const char *text)
{
    char a[SS_PLAN_ADDR_MAX];
    unsigned char buf[sizeof(struct in6_addr)];
    size_t len = strlen(text);
    if (len >= sizeof a)
        return 0;
    if (text[0] == '[' && len > 2 && text[len - 1] == ']')
        snprintf(a, sizeof a, "%.*s", (int)(len - 2), text + 1);
    else
        snprintf(a, sizeof a, "%s", text);
    if (inet_pton(AF_INET, a, buf) == 1)
        h->ipv6 = 0;
    else if (inet_pton(AF_INET6, a, buf) == 1)
        h->ipv6 = 1;
    else
        return 0;
    snprintf(h->addr, sizeof h->addr, "%s", a);
    return 1;
}

int ss_plan_resolve(const char *name, struct sockaddr_storage *sa, socklen_t *len, char *why,
                    size_t why_len)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    const struct addrinfo *pick = NULL;
    memset(sa, 0, sizeof *sa);
    int rc = getaddrinfo(name, NULL, &hints, &res);
    if (rc != 0) {
        snprintf(why, why_len, "%s", gai_strerror(rc));
        return -1;
    }
    for (const struct addrinfo *ai = res; ai && !pick; ai = ai->ai_next)
        if (ai->ai_family == AF_INET)
            pick = ai;
    for (const struct addrinfo *ai = res; ai && !pick; ai = ai->ai_next)
        if (ai->ai_family == AF_INET6)
            pick = ai;
    if (pick) {
        memcpy(sa, pick->ai_addr, pick->ai_addrlen);
        *len = pick->ai_addrlen;
    } else
        snprintf(why, why_len, "no IPv4 or IPv6 address");
    freeaddrinfo(res);
    return pick ? 0 : -1;
}

/* Resolve name into h's address (ss_plan_resolve()). Returns 0, or -1 with
 * the reason in why. */
static int s_resolve(struct ss_plan_host *h, const char *name, char *why, size_t len)
{
    struct sockaddr_storage sa;
    socklen_t sa_len;
    if (ss_plan_resolve(name, &sa, &sa_len, why, len) != 0)
        return -1;
    const void *a = sa.ss_family == AF_INET
                        ? (const void *)&((struct sockaddr_in *)&sa)->sin_addr
                        : (const void *)&((struct sockaddr_in6 *)&sa)->sin6_addr;
    inet_ntop(sa.ss_family, a, h->addr, sizeof h->addr);
    h->ipv6 = sa.ss_family == AF_INET6;
    return 0;
}

/* Fill h's address: addr= as given (an IP address), else HOST without its
 * user, resolved when it is a name. Returns 0, or SS_E_CONFIG with err. */
static int s_host_addr(struct ss_plan_host *h, const char *addr, const char *name, int line,
                       char *err, size_t err_len)
{
    char why[256];
    if (addr) {
        if (s_set_ip(h, addr))
            return 0;
        snprintf(err, err_len, "%s:%d: addr=%s is not an IPv4 or IPv6 address (a PS binds "
                 "it)", name, line, addr);
        return SS_E_CONFIG;
    }
    const char *at = strrchr(h->target, '@');
    const char *host = at ? at + 1 : h->target;
    if (s_set_ip(h, host))
        return 0;
    if (s_resolve(h, host, why, sizeof why) == 0)
        return 0;
    snprintf(err, err_len, "%s:%d: cannot resolve '%s' (%s); write its address as addr=IP",
             name, line, host, why);
    return SS_E_CONFIG;
}

/* Parse one hosts-file line (comment already cut) into a new host, unless
 * it is blank. Returns 0, or SS_E_CONFIG with err. */
static int s_parse_line(ss_plan_t *self, char *text, const char *name, int line, char *err,
                        size_t err_len)
{
    char *save = NULL, *w = strtok_r(text, " \t\r\v\f", &save);
    if (!w)
        return 0;
    if (strlen(w) >= SS_PLAN_NAME_MAX) {
        snprintf(err, err_len, "%s:%d: host name longer than %d bytes", name, line,
                 SS_PLAN_NAME_MAX - 1);
        return SS_E_CONFIG;
    }
    for (size_t i = 0; i < self->n_hosts; i++)
        if (!strcmp(self->hosts[i].target, w)) {
            snprintf(err, err_len, "%s:%d: host %s listed twice (list its roles on one line)",
                     name, line, w);
            return SS_E_CONFIG;
        }
    if (self->n_hosts >= SS_PLAN_MAX_HOSTS) {
        snprintf(err, err_len, "%s:%d: more than %d hosts", name, line, SS_PLAN_MAX_HOSTS);
        return SS_E_CONFIG;
    }
    struct ss_plan_host *h = s_add_host(self);
    const char *addr = NULL;
    snprintf(h->target, sizeof h->target, "%s", w);
    h->line = line;
    while ((w = strtok_r(NULL, " \t\r\v\f", &save))) {
        unsigned bits = s_role_bits(w);
        if (!strncmp(w, "addr=", 5))
            addr = w + 5;
        else if (bits)
            h->roles |= bits;
        else {
            snprintf(err, err_len, "%s:%d: unknown role '%s' (want embedding, sync, trainer, "
                     "ps, all or addr=IP)", name, line, w);
            return SS_E_CONFIG;
        }
    }
    if (!h->roles)
        h->roles = S_ALL_ROLES;
    return s_host_addr(h, addr, name, line, err, err_len);
}

int ss_plan_parse_hosts(ss_plan_t *self, const char *text, const char *name, char *err,
                        size_t err_len)
{
    ss_assert(self && text && name && self->n_hosts == 0);
    char *copy = ss_strdup(text), *p = copy;
    int rc = 0, line = 0;
    while (rc == 0 && *p) {
        char *nl = strchr(p, '\n'), *hash;
        if (nl)
            *nl = '\0';
        if ((hash = strchr(p, '#')))
            *hash = '\0';
        rc = s_parse_line(self, p, name, ++line, err, err_len);
        p = nl ? nl + 1 : p + strlen(p);
    }
    ss_free(copy);
    if (rc == 0 && self->n_hosts == 0) {
        snprintf(err, err_len, "%s lists no host", name);
        rc = SS_E_CONFIG;
    }
    return rc;
}

int ss_plan_load_hosts(ss_plan_t *self, const char *path, char *err, size_t err_len)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, err_len, "cannot read hosts file %s: %s", path, strerror(errno));
        return SS_E_IO;
    }
    size_t cap = 4096, len = 0, got;
    char *buf = ss_malloc(cap);
    while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap && cap < S_MAX_HOSTS_BYTES)
            buf = ss_realloc(buf, cap *= 2);
        else if (len + 1 == cap)
            break;
    }
    int bad = ferror(f) || !feof(f) || memchr(buf, '\0', len) != NULL;
    fclose(f);
    buf[len] = '\0';
    int rc = SS_E_IO;
    if (bad)
        snprintf(err, err_len, "cannot read hosts file %s (a read error, a NUL byte, or more "
                 "than %u bytes)", path, S_MAX_HOSTS_BYTES);
    else
        rc = ss_plan_parse_hosts(self, buf, path, err, err_len);
    ss_free(buf);
    return rc;
}

/* ------------------------------------------------------------- placement */

/* Room for n processes of kind k, endpoints unset. */
static void s_kind_init(ss_plan_t *self, int k, size_t n)
{
    struct s_kind *kd = &self->kind[k];
    ss_free(kd->host);
    ss_free(kd->ep);
    kd->n = n;
    kd->host = ss_calloc(n ? n : 1, sizeof *kd->host);
    kd->ep = ss_calloc(n ? n : 1, sizeof *kd->ep);
}

/* Place n processes of role round-robin over the hosts taking it. */
static int s_place_role(ss_plan_t *self, int role, size_t n, const char *name, char *err,
                        size_t err_len)
{
    size_t *elig = ss_calloc(self->n_hosts, sizeof *elig), n_elig = 0;
    for (size_t h = 0; h < self->n_hosts; h++)
        if (self->hosts[h].roles & (1u << role))
            elig[n_elig++] = h;
    if (n_elig == 0) {
        /* endpoints nobody serves (sync PSs without EASGD) may sit anywhere */
        if (n > 0 && (role != SS_CLUSTER_SYNC || self->opts.needs_sync_ps)) {
            ss_free(elig);
            snprintf(err, err_len, "no host in %s takes the %s role", name,
                     ss_cluster_role_name(role));
            return SS_E_CONFIG;
        }
        elig[n_elig++] = 0;
    }
    s_kind_init(self, role, n);
    for (size_t k = 0; k < n; k++)
        self->kind[role].host[k] = elig[k % n_elig];
    ss_free(elig);
    return 0;
}

int ss_plan_place(ss_plan_t *self, const struct ss_plan_opts *opts, const char *name,
                  char *err, size_t err_len)
{
    ss_assert(self && opts && self->n_hosts > 0);
    self->opts = *opts;
    self->fixed = 0;
    for (int r = 0; r < SS_CLUSTER_N_ROLES; r++) {
        int rc = s_place_role(self, r, opts->n[r], name, err, err_len);
        if (rc)
            return rc;
    }
    size_t n_tr = opts->n[SS_CLUSTER_TRAINER];
    s_kind_init(self, SS_PLAN_ADMIN, opts->admin ? n_tr : 0);
    if (opts->admin)
        memcpy(self->kind[SS_PLAN_ADMIN].host, self->kind[SS_CLUSTER_TRAINER].host,
               n_tr * sizeof(size_t));
    for (size_t h = 0; h < self->n_hosts; h++)
        self->hosts[h].n_ports = 0;
    if (opts->base_port)
        return 0;
    for (int k = 0; k < SS_PLAN_N_KINDS; k++) {
        if (opts->ipc_dir && k != SS_PLAN_ADMIN)
            continue;
        for (size_t i = 0; i < self->kind[k].n; i++)
            self->hosts[self->kind[k].host[i]].n_ports++;
    }
    return 0;
}

/* The host whose address is that of endpoint ep, or -1. */
static long s_host_by_addr(const ss_plan_t *self, const char *ep)
{
    char host[SS_CFG_MAX_STR], why[128];
    unsigned port;
    if (ss_endpoint_split(ep, host, sizeof host, &port, why, sizeof why) != 0)
        return -1;
    for (size_t h = 0; h < self->n_hosts; h++)
        if (!strcmp(self->hosts[h].addr, host))
            return (long)h;
    return -1;
}

int ss_plan_place_fixed(ss_plan_t *self, const char *const *const eps[SS_CLUSTER_N_ROLES],
                        const size_t n[SS_CLUSTER_N_ROLES], int by_addr, const char *name,
                        char *err, size_t err_len)
{
    ss_assert(self && eps && n && self->n_hosts > 0);
    memset(&self->opts, 0, sizeof self->opts);
    self->fixed = 1;
    for (int r = 0; r < SS_CLUSTER_N_ROLES; r++) {
        s_kind_init(self, r, n[r]);
        for (size_t k = 0; k < n[r]; k++) {
            long h = by_addr ? s_host_by_addr(self, eps[r][k]) : 0;
            if (h < 0) {
                snprintf(err, err_len, "--fixed-ports: endpoint %s names no host of %s (by "
                         "addr)", eps[r][k], name);
                return SS_E_CONFIG;
            }
            self->kind[r].host[k] = (size_t)h;
            snprintf(self->kind[r].ep[k], SS_CLUSTER_EP_MAX, "%s", eps[r][k]);
        }
    }
    s_kind_init(self, SS_PLAN_ADMIN, 0);
    for (size_t h = 0; h < self->n_hosts; h++)
        self->hosts[h].n_ports = 0;
    return 0;
}

/* ------------------------------------------------------------- endpoints */

int ss_plan_set_ports(ss_plan_t *self, size_t host, const unsigned *ports, size_t n)
{
    ss_assert(self && (ports || n == 0));
    if (host >= self->n_hosts)
        return SS_E_RANGE;
    struct ss_plan_host *h = &self->hosts[host];
    ss_free(h->ports);
    h->ports = ss_calloc(n ? n : 1, sizeof *h->ports);
    if (n)
        memcpy(h->ports, ports, n * sizeof *ports);
    h->n_given = n;
    return 0;
}

/* The tcp endpoint of port on host h into out. */
static void s_tcp(char *out, const struct ss_plan_host *h, unsigned port)
{
    snprintf(out, SS_CLUSTER_EP_MAX, h->ipv6 ? "tcp://[%s]:%u" : "tcp://%s:%u", h->addr, port);
}

/* The endpoint of process i of kind k, its host's next port being *next. */
static int s_endpoint(ss_plan_t *self, int k, size_t i, size_t *next, char *err,
                      size_t err_len)
{
    const struct ss_plan_opts *o = &self->opts;
    struct ss_plan_host *h = &self->hosts[self->kind[k].host[i]];
    char *out = self->kind[k].ep[i];
    if (o->ipc_dir && k != SS_PLAN_ADMIN) {
        snprintf(out, SS_CLUSTER_EP_MAX, "ipc://%s/%c%zu", o->ipc_dir, s_ipc_prefix[k], i);
        return 0;
    }
    size_t span = k < SS_CLUSTER_TRAINER && o->ps_threads > 1 ? (size_t)o->ps_threads : 1;
    if (o->base_port) {
        size_t port = o->base_port + *next;
        if (port + span - 1 > 65535) {
            snprintf(err, err_len, "base port %u: %s %zu on %s would take port %zu, past "
                     "65535", o->base_port, ss_plan_kind_name(k), i, h->target, port + span - 1);
            return SS_E_RANGE;
        }
        *next += span;
        s_tcp(out, h, (unsigned)port);
        return 0;
    }
    /* free ports: each one given starts a span of free ports */
    if (*next < h->n_given)
        s_tcp(out, h, h->ports[*next]);
    else
        out[0] = '\0';
    (*next)++;
    return 0;
}

int ss_plan_endpoints(ss_plan_t *self, char *err, size_t err_len)
{
    ss_assert(self);
    if (self->fixed)
        return 0;
    size_t *next = ss_calloc(self->n_hosts, sizeof *next);
    int rc = 0;
    for (int k = 0; k < SS_PLAN_N_KINDS && rc == 0; k++)
        for (size_t i = 0; i < self->kind[k].n && rc == 0; i++)
            rc = s_endpoint(self, k, i, &next[self->kind[k].host[i]], err, err_len);
    ss_free(next);
    return rc;
}

/* ------------------------------------------------------------- reading */

size_t ss_plan_n_hosts(const ss_plan_t *self)
{
    return self->n_hosts;
}

const struct ss_plan_host *ss_plan_host(const ss_plan_t *self, size_t i)
{
    ss_assert(i < self->n_hosts);
    return &self->hosts[i];
}

size_t ss_plan_count(const ss_plan_t *self, int kind)
{
    ss_assert(kind >= 0 && kind < SS_PLAN_N_KINDS);
    return self->kind[kind].n;
}

size_t ss_plan_host_of(const ss_plan_t *self, int kind, size_t k)
{
    ss_assert(kind >= 0 && kind < SS_PLAN_N_KINDS && k < self->kind[kind].n);
    return self->kind[kind].host[k];
}

const char *ss_plan_endpoint(const ss_plan_t *self, int kind, size_t k)
{
    ss_assert(kind >= 0 && kind < SS_PLAN_N_KINDS && k < self->kind[kind].n);
    return self->kind[kind].ep[k][0] ? self->kind[kind].ep[k] : NULL;
}
