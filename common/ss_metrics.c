/* ss_metrics.c - Prometheus text exposition served by libmicrohttpd (the
 * text itself and the histograms: ss_metrics_text.c).
 *
 * DESIGN: libmicrohttpd is loaded with dlopen() by the first server a
 * process starts, not linked: it pulls in about ten TLS libraries, which
 * every start of a daemon loaded and relocated whether or not it served
 * metrics (about 2 ms of CPU per process; a job starts one per PS and per
 * trainer, issue 19). The header gives the types; each server holds the
 * library's calls it makes. */
#include "ss_metrics.h"

#include <dlfcn.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include "ss_log.h"
#include "ss_mem.h"

#define S_MHD_SONAME "libmicrohttpd.so.12"   /* its ABI since 0.9.x */

/* The libmicrohttpd calls a server makes, from dlsym(). */
struct s_mhd {
    void *lib;                                              /* dlopen() handle */
    __typeof__(MHD_start_daemon) *start_daemon;
    __typeof__(MHD_stop_daemon) *stop_daemon;
    __typeof__(MHD_create_response_from_buffer) *create_response_from_buffer;
    __typeof__(MHD_add_response_header) *add_response_header;
    __typeof__(MHD_queue_response) *queue_response;
    __typeof__(MHD_destroy_response) *destroy_response;
};

struct ss_metrics {
    struct s_mhd mhd;            /* the library's calls */
    struct MHD_Daemon *daemon;   /* owns the HTTP thread */
    ss_metrics_fn fn;            /* scrape callback */
    void *arg;                   /* its argument */
    char labels[256];            /* constant labels */
    _Atomic uint64_t scrapes;    /* served */
    char host[256];              /* the address it listens on, "*" = every interface */
};

static enum MHD_Result s_answer(void *cls, struct MHD_Connection *conn, const char *url,
                                const char *method, const char *version,
                                const char *upload_data, size_t *upload_data_size,
                                void **con_cls)
{
    ss_metrics_t *self = cls;
    const struct s_mhd *m = &self->mhd;
    struct MHD_Response *resp;
    enum MHD_Result ret;
    (void)version, (void)upload_data, (void)upload_data_size, (void)con_cls;
    if (strcmp(method, "GET") != 0 || strcmp(url, "/metrics") != 0) {
        static const char nf[] = "not found: GET /metrics\n";
        resp = m->create_response_from_buffer(sizeof nf - 1, (void *)nf,
                                              MHD_RESPMEM_PERSISTENT);
        ret = m->queue_response(conn, MHD_HTTP_NOT_FOUND, resp);
        m->destroy_response(resp);
        return ret;
    }
    size_t len;
    char *text = ss_metrics_text(self->labels, self->fn, self->arg, &len);
    atomic_fetch_add(&self->scrapes, 1);
    resp = m->create_response_from_buffer(len, text, MHD_RESPMEM_MUST_COPY);
    ss_free(text);
    m->add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
    ret = m->queue_response(conn, MHD_HTTP_OK, resp);
    m->destroy_response(resp);
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
    struct MHD_Daemon *d = self->mhd.start_daemon(
        flags, (uint16_t)port, NULL, NULL, s_answer, self, MHD_OPTION_CONNECTION_LIMIT, 128u,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, 32u, MHD_OPTION_CONNECTION_TIMEOUT, 2u,
        ai ? MHD_OPTION_SOCK_ADDR : MHD_OPTION_END, ai ? ai->ai_addr : NULL, MHD_OPTION_END);
    if (ai)
        freeaddrinfo(ai);
    return d;
}

/* Load libmicrohttpd and look up its calls into m. Kept loaded for good
 * (RTLD_NODELETE: its TLS libraries do not unload cleanly). Returns 0, or -1
 * with err. */
static int s_mhd_load(struct s_mhd *m, char *err, size_t err_len)
{
    m->lib = dlopen(S_MHD_SONAME, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!m->lib) {
        snprintf(err, err_len, "cannot serve metrics: cannot load %s: %s (install "
                 "libmicrohttpd: scripts/install-deps.sh)", S_MHD_SONAME, dlerror());
        return -1;
    }
    m->start_daemon = dlsym(m->lib, "MHD_start_daemon");
    m->stop_daemon = dlsym(m->lib, "MHD_stop_daemon");
    m->create_response_from_buffer = dlsym(m->lib, "MHD_create_response_from_buffer");
    m->add_response_header = dlsym(m->lib, "MHD_add_response_header");
    m->queue_response = dlsym(m->lib, "MHD_queue_response");
    m->destroy_response = dlsym(m->lib, "MHD_destroy_response");
    if (!m->start_daemon || !m->stop_daemon || !m->create_response_from_buffer ||
        !m->add_response_header || !m->queue_response || !m->destroy_response) {
        snprintf(err, err_len, "cannot serve metrics: %s lacks a call it needs", S_MHD_SONAME);
        dlclose(m->lib);
        return -1;
    }
    return 0;
}

ss_metrics_t *ss_metrics_new(const char *bind_endpoint, int port, const char *labels,
                             ss_metrics_fn fn, void *arg, char *err, size_t err_len)
{
    ss_metrics_t *self = ss_calloc(1, sizeof *self);
    char host[256];
    if (s_mhd_load(&self->mhd, err, err_len) != 0) {
        ss_free(self);
        return NULL;
    }
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
        dlclose(self->mhd.lib);
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
    self->mhd.stop_daemon(self->daemon);
    dlclose(self->mhd.lib);
    ss_free(self);
    *self_p = NULL;
}

uint64_t ss_metrics_scrapes(const ss_metrics_t *self)
{
    return atomic_load(&((ss_metrics_t *)self)->scrapes);
}
