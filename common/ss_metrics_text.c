/* ss_metrics_text.c - the metrics' text and histograms (ss_metrics.h): the
 * Prometheus text exposition a scrape serves, and ss_hist.
 *
 * DESIGN: apart from the HTTP server (ss_metrics.c), so that a program that
 * writes or sums these without serving them (shadow-ctl, shadow-super) does
 * not link libmicrohttpd: with --as-needed it then loads neither it nor the
 * TLS libraries it pulls in (about ten), which every start of such a
 * program paid for (the launcher runs shadow-ctl many times a job). */
#include "ss_metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ss_mem.h"

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
