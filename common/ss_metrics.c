/* ss_metrics.c - Prometheus text exposition served by libmicrohttpd. */
#include "ss_metrics.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ss_log.h"
#include "ss_mem.h"

struct ss_metrics {
    struct MHD_Daemon *daemon;   /* owns the HTTP thread */
    ss_metrics_fn fn;            /* scrape callback */
    void *arg;                   /* its argument */
    char labels[256];            /* constant labels */
    _Atomic uint64_t scrapes;    /* served */
    char host[256];              /* the address it listens on, "*" = every interface */
};

/* The text being built for one scrape: grows as needed. */
struct ss_mw {
    char *buf;                   /* text, owned until handed to the response */
    size_t len, cap;             /* used, allocated */
    const char *labels;          /* constant labels */
    char last[128];              /* name of the last HELP/TYPE written */
};

static const double s_bounds[SS_HIST_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
    0.025,  0.05,    0.1,    0.25,  0.5,    1.0,   2.5};

double ss_hist_bound_s(int i)
{
    return s_bounds[i];
}

void ss_hist_add(struct ss_hist *h, uint64_t ns)
{
    double s = (double)ns * 1e-9;
    int i = 0;
    while (i < SS_HIST_BUCKETS && s > s_bounds[i])
        i++;
    atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

void ss_hist_merge(struct ss_hist *dst, const struct ss_hist *src)
{
    for (int i = 0; i <= SS_HIST_BUCKETS; i++)
        atomic_fetch_add_explicit(&dst->bucket[i],
                                  atomic_load_explicit(&src->bucket[i], memory_order_relaxed),
                                  memory_order_relaxed);
    atomic_fetch_add_explicit(&dst->sum_ns, atomic_load_explicit(&src->sum_ns,
                                                                 memory_order_relaxed),
                              memory_order_relaxed);
}

/* ss_hists_new() lays histograms side by side: each must fill whole lines */
_Static_assert(sizeof(struct ss_hist) % 64 == 0, "struct ss_hist is not a multiple of 64 bytes");

uint64_t ss_hist_count(const struct ss_hist *h)
{
    uint64_t n = 0;
    for (int i = 0; i <= SS_HIST_BUCKETS; i++)
        n += atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
    return n;
}

void ss_hist_get(const struct ss_hist *h, uint64_t *out)
{
    for (int i = 0; i <= SS_HIST_BUCKETS; i++)
        out[i] = atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
    out[SS_HIST_BUCKETS + 1] = atomic_load_explicit(&h->sum_ns, memory_order_relaxed);
}

void ss_hist_set(struct ss_hist *h, const uint64_t *in)
{
    for (int i = 0; i <= SS_HIST_BUCKETS; i++)
        atomic_store_explicit(&h->bucket[i], in[i], memory_order_relaxed);
    atomic_store_explicit(&h->sum_ns, in[SS_HIST_BUCKETS + 1], memory_order_relaxed);
}

struct ss_hist *ss_hists_new(size_t n)
{
    size_t bytes = (n ? n : 1) * sizeof(struct ss_hist);
    struct ss_hist *h = ss_aligned_alloc(64, bytes);
    memset(h, 0, bytes);  /* zeroed memory is an empty histogram */
    return h;
}

void ss_hists_sum(const struct ss_hist *h, size_t n, struct ss_hist *out)
{
    for (int i = 0; i <= SS_HIST_BUCKETS; i++)
        atomic_store_explicit(&out->bucket[i], 0, memory_order_relaxed);
    atomic_store_explicit(&out->sum_ns, 0, memory_order_relaxed);
    for (size_t k = 0; k < n; k++)
        ss_hist_merge(out, &h[k]);
}

static void s_printf(ss_mw_t *w, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(w->buf + w->len, w->cap - w->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < w->cap - w->len) {
            w->len += (size_t)n;
            return;
        }
        w->cap = w->cap * 2 + (size_t)(n > 0 ? n : 0);
        w->buf = ss_realloc(w->buf, w->cap);
    }
}

/* HELP and TYPE once per run of samples of one name. */
static void s_head(ss_mw_t *w, const char *name, const char *help, const char *type)
{
    if (strcmp(w->last, name) == 0)
        return;
    snprintf(w->last, sizeof w->last, "%s", name);
    s_printf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{constant labels[,labels][,extra]} value */
static void s_sample(ss_mw_t *w, const char *name, const char *suffix, const char *labels,
                     const char *extra, double v)
{
    s_printf(w, "%s%s{%s%s%s%s%s} %.17g\n", name, suffix, w->labels,
             labels && labels[0] ? "," : "", labels ? labels : "",
             extra && extra[0] ? "," : "", extra ? extra : "", v);
}

void ss_mw_counter(ss_mw_t *w, const char *name, const char *help, const char *labels,
                   double value)
{
    s_head(w, name, help, "counter");
    s_sample(w, name, "", labels, NULL, value);
}

void ss_mw_gauge(ss_mw_t *w, const char *name, const char *help, const char *labels,
                 double value)
{
    s_head(w, name, help, "gauge");
    s_sample(w, name, "", labels, NULL, value);
}

void ss_mw_hist(ss_mw_t *w, const char *name, const char *help, const char *labels,
                const struct ss_hist *h)
{
    uint64_t cum = 0;
    char le[48];
    s_head(w, name, help, "histogram");
    for (int i = 0; i <= SS_HIST_BUCKETS; i++) {
        cum += atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
        if (i < SS_HIST_BUCKETS)
            snprintf(le, sizeof le, "le=\"%g\"", s_bounds[i]);
        else
            snprintf(le, sizeof le, "le=\"+Inf\"");
        s_sample(w, name, "_bucket", labels, le, (double)cum);
    }
    s_sample(w, name, "_sum", labels, NULL,
             (double)atomic_load_explicit(&h->sum_ns, memory_order_relaxed) * 1e-9);
    s_sample(w, name, "_count", labels, NULL, (double)cum);
}

char *ss_metrics_text(const char *labels, ss_metrics_fn fn, void *arg, size_t *len)
{
    ss_mw_t w = {.cap = 8192, .labels = labels ? labels : ""};
    w.buf = ss_malloc(w.cap);
    w.buf[0] = '\0';
    fn(arg, &w);
    if (len)
        *len = w.len;
    return w.buf;
}

static enum MHD_Result s_answer(void *cls, struct MHD_Connection *conn, const char *url,
                                const char *method, const char *version,
                                const char *upload_data, size_t *upload_data_size,
                                void **con_cls)
{
    ss_metrics_t *self = cls;
    struct MHD_Response *resp;
    enum MHD_Result ret;
    (void)version, (void)upload_data, (void)upload_data_size, (void)con_cls;
    if (strcmp(method, "GET") != 0 || strcmp(url, "/metrics") != 0) {
        static const char nf[] = "not found: GET /metrics\n";
        resp = MHD_create_response_from_buffer(sizeof nf - 1, (void *)nf,
                                               MHD_RESPMEM_PERSISTENT);
        ret = MHD_queue_response(conn, MHD_HTTP_NOT_FOUND, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    size_t len;
    char *text = ss_metrics_text(self->labels, self->fn, self->arg, &len);
    atomic_fetch_add(&self->scrapes, 1);
    resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_COPY);
    ss_free(text);
    MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
    ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* The host part of a ZeroMQ bind endpoint into host (tcp://HOST:PORT, IPv6
 * without its brackets): "*" for every interface; "127.0.0.1" when there is
 * none (NULL, ipc://, inproc://: a local process). */
static void s_bind_host(const char *ep, char *host, size_t len)
{
    snprintf(host, len, "127.0.0.1");
    if (!ep || strncmp(ep, "tcp://", 6) != 0)
        return;
    const char *h = ep + 6, *end = strrchr(h, ':');
    if (!end || end == h)
        return;
    if (*h == '[' && end[-1] == ']')
        h++, end--;
    snprintf(host, len, "%.*s", (int)(end - h), h);
}

/* Start libmicrohttpd on host:port ("*": every interface). Returns the
 * daemon or NULL with errno set where it tells why. */
static struct MHD_Daemon *s_start(ss_metrics_t *self, const char *host, int port)
{
    /* 16 clients that each send a byte every 3 s once held every one of 16
     * slots for good (10 s idle timeout): a client now gets 2 s of silence,
     * and there are slots for 32 per address, 128 in all */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
                             .ai_socktype = SOCK_STREAM}, *ai = NULL;
    char serv[16];
    snprintf(serv, sizeof serv, "%d", port);
    if (strcmp(host, "*") != 0) {
        int grc = getaddrinfo(host, serv, &hints, &ai);
        if (grc != 0) {
            errno = grc == EAI_SYSTEM ? errno : EADDRNOTAVAIL;
            return NULL;
        }
        if (ai->ai_family == AF_INET6)
            flags |= MHD_USE_IPv6;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, s_answer, self, MHD_OPTION_CONNECTION_LIMIT, 128u,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, 32u, MHD_OPTION_CONNECTION_TIMEOUT, 2u,
        ai ? MHD_OPTION_SOCK_ADDR : MHD_OPTION_END, ai ? ai->ai_addr : NULL, MHD_OPTION_END);
    if (ai)
        freeaddrinfo(ai);
    return d;
}

ss_metrics_t *ss_metrics_new(const char *bind_endpoint, int port, const char *labels,
                             ss_metrics_fn fn, void *arg, char *err, size_t err_len)
{
    ss_metrics_t *self = ss_calloc(1, sizeof *self);
    char host[256];
    self->fn = fn;
    self->arg = arg;
    snprintf(self->labels, sizeof self->labels, "%s", labels ? labels : "");
    s_bind_host(bind_endpoint, host, sizeof host);
    errno = 0;
    self->daemon = s_start(self, host, port);
    if (!self->daemon) {
        snprintf(err, err_len, "cannot serve metrics on port %d (address %s): %s (this "
                 "process's port from metrics.port or metrics.ports must be free; "
                 "scripts/shadow-launch picks free ones; 0 = none)", port, host,
                 errno ? strerror(errno) : "start failed");
        ss_free(self);
        return NULL;
    }
    snprintf(self->host, sizeof self->host, "%s", host);
    return self;
}

const char *ss_metrics_host(const ss_metrics_t *self)
{
    return self->host;
}

void ss_metrics_destroy(ss_metrics_t **self_p)
{
    ss_metrics_t *self = *self_p;
    if (!self)
        return;
    MHD_stop_daemon(self->daemon);
    ss_free(self);
    *self_p = NULL;
}

uint64_t ss_metrics_scrapes(const ss_metrics_t *self)
{
    return atomic_load(&((ss_metrics_t *)self)->scrapes);
}
