/* ss_stats.c - counter slots, snapshots and the one JSON/Prometheus writer. */
#include "ss_stats.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "ss_assert.h"
#include "ss_mem.h"
#include "ss_metrics.h"

#define SS_LINE 64

struct ss_ctrs {
    size_t n;                  /* counters per slot */
    size_t n_slots;            /* slots */
    size_t stride;             /* counters from one slot to the next (a whole line) */
    _Atomic uint64_t *v;       /* n_slots * stride, 64-byte aligned */
};

ss_ctrs_t *ss_ctrs_new(size_t n, size_t n_slots)
{
    ss_assert(n > 0 && n_slots > 0);
    ss_ctrs_t *self = ss_calloc(1, sizeof *self);
    size_t per_line = SS_LINE / sizeof(uint64_t);
    self->n = n;
    self->n_slots = n_slots;
    self->stride = (n + per_line - 1) / per_line * per_line;
    size_t bytes = self->stride * n_slots * sizeof(uint64_t);
    self->v = ss_aligned_alloc(SS_LINE, bytes);
    for (size_t i = 0; i < self->stride * n_slots; i++)
        atomic_init(&self->v[i], 0);
    return self;
}

void ss_ctrs_destroy(ss_ctrs_t **self_p)
{
    ss_ctrs_t *self = *self_p;
    if (!self)
        return;
    ss_free((void *)self->v);
    ss_free(self);
    *self_p = NULL;
}

_Atomic uint64_t *ss_ctrs_slot(ss_ctrs_t *self, size_t slot)
{
    ss_assert(slot < self->n_slots);
    return self->v + slot * self->stride;
}

size_t ss_ctrs_n(const ss_ctrs_t *self)
{
    return self->n;
}

size_t ss_ctrs_n_slots(const ss_ctrs_t *self)
{
    return self->n_slots;
}

void ss_ctrs_sum(const ss_ctrs_t *self, uint64_t *out)
{
    memset(out, 0, self->n * sizeof *out);
    for (size_t s = 0; s < self->n_slots; s++) {
        _Atomic uint64_t *p = self->v + s * self->stride;
        for (size_t i = 0; i < self->n; i++)
            out[i] += atomic_load_explicit(&p[i], memory_order_relaxed);
    }
}

double ss_ctrs_sum_f64(const ss_ctrs_t *self, size_t i)
{
    double sum = 0;
    ss_assert(i < self->n);
    for (size_t s = 0; s < self->n_slots; s++) {
        uint64_t b = atomic_load_explicit(&self->v[s * self->stride + i], memory_order_relaxed);
        double d;
        memcpy(&d, &b, sizeof d);
        sum += d;
    }
    return sum;
}

/* ------------------------------------------------------------ snapshots */

void ss_snap_init(struct ss_snap *s, const struct ss_stat_def *defs, size_t n, struct ss_val *v)
{
    s->defs = defs;
    s->n = n;
    s->v = v;
    memset(v, 0, n * sizeof *v);
}

static struct ss_val *s_val(struct ss_snap *s, size_t i, int type)
{
    ss_assert(i < s->n);
    s->v[i].type = type;
    return &s->v[i];
}

void ss_snap_u64(struct ss_snap *s, size_t i, uint64_t v)
{
    s_val(s, i, SS_VAL_U64)->u = v;
}

void ss_snap_i64(struct ss_snap *s, size_t i, int64_t v)
{
    s_val(s, i, SS_VAL_I64)->i = v;
}

void ss_snap_num(struct ss_snap *s, size_t i, double v)
{
    s_val(s, i, SS_VAL_NUM)->d = v;
}

void ss_snap_str(struct ss_snap *s, size_t i, const char *v)
{
    s_val(s, i, SS_VAL_STR)->s = v ? v : "";
}

void ss_snap_bool(struct ss_snap *s, size_t i, int v)
{
    s_val(s, i, SS_VAL_BOOL)->u = v ? 1 : 0;
}

void ss_snap_u64s(struct ss_snap *s, size_t first, const uint64_t *v, size_t n)
{
    for (size_t k = 0; k < n; k++)
        ss_snap_u64(s, first + k, v[k]);
}

double ss_snap_get(const struct ss_snap *s, size_t i)
{
    const struct ss_val *v = &s->v[i];
    switch (v->type) {
    case SS_VAL_U64: case SS_VAL_BOOL: return (double)v->u;
    case SS_VAL_I64: return (double)v->i;
    case SS_VAL_NUM: return v->d;
    default: return NAN;
    }
}

int ss_snap_has(const struct ss_snap *s, size_t i)
{
    return i < s->n && s->v[i].type != SS_VAL_NONE;
}

long ss_snap_find(const struct ss_snap *s, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->defs[i].key, key))
            return (long)i;
    return -1;
}

/* ------------------------------------------------------------ JSON */

void ss_json_number(char *out, size_t len, double v)
{
    if (!isfinite(v)) {
        snprintf(out, len, "null");
        return;
    }
    snprintf(out, len, "%.15g", v);
    if (strtod(out, NULL) != v)
        snprintf(out, len, "%.17g", v);
}

void ss_jw_begin(struct ss_jw *w, size_t max)
{
    memset(w, 0, sizeof *w);
    w->max = max < 64 ? 64 : max;
    w->cap = w->max < 1024 ? w->max : 1024;
    w->buf = ss_malloc(w->cap);
    w->buf[0] = '{';
    w->buf[1] = '\0';
    w->len = 1;
}

void ss_jw_fini(struct ss_jw *w)
{
    ss_free(w->buf);
    w->buf = NULL;
    w->len = w->cap = 0;
}

/* Make room for n more bytes plus the NUL and the closing brace; 0 when
 * that would pass max. */
static int s_room(struct ss_jw *w, size_t n)
{
    size_t need = w->len + n + 2;
    if (need > w->max)
        return 0;
    if (need > w->cap) {
        size_t cap = w->cap * 2 > need ? w->cap * 2 : need;
        w->cap = cap < w->max ? cap : w->max;
        w->buf = ss_realloc(w->buf, w->cap);
    }
    return 1;
}

static void s_put(struct ss_jw *w, const char *p, size_t n)
{
    memcpy(w->buf + w->len, p, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

/* Bytes of s once escaped (without quotes). */
static size_t s_escaped_len(const char *s)
{
    size_t n = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        n += c == '"' || c == '\\' || c == '\n' || c == '\t' || c == '\r' ? 2 : c < 0x20 ? 6 : 1;
    }
    return n;
}

static void s_put_escaped(struct ss_jw *w, const char *s)
{
    char u[8];
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            u[0] = '\\', u[1] = (char)c;
            s_put(w, u, 2);
        } else if (c == '\n' || c == '\t' || c == '\r') {
            u[0] = '\\', u[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
            s_put(w, u, 2);
        } else if (c < 0x20) {
            snprintf(u, sizeof u, "\\u%04x", c);
            s_put(w, u, 6);
        } else {
            s_put(w, (const char *)s, 1);
        }
    }
}

/* ,"key": then value; value_esc: escape value as a string. The whole field
 * goes in or nothing does. */
static void s_field(struct ss_jw *w, const char *key, const char *value, int quoted)
{
    size_t n = (w->fields ? 1 : 0) + s_escaped_len(key) + 3 +
               (quoted ? s_escaped_len(value) + 2 : strlen(value));
    if (w->truncated || !s_room(w, n)) {
        w->truncated = 1;
        return;
    }
    if (w->fields)
        s_put(w, ",", 1);
    s_put(w, "\"", 1);
    s_put_escaped(w, key);
    s_put(w, "\":", 2);
    if (quoted) {
        s_put(w, "\"", 1);
        s_put_escaped(w, value);
        s_put(w, "\"", 1);
    } else {
        s_put(w, value, strlen(value));
    }
    w->fields++;
}

void ss_jw_end(struct ss_jw *w)
{
    /* s_room() always leaves room for this brace and the NUL */
    ss_assert(w->len + 2 <= w->cap);
    s_put(w, "}", 1);
}

void ss_jw_u64(struct ss_jw *w, const char *key, uint64_t v)
{
    char t[32];
    snprintf(t, sizeof t, "%" PRIu64, v);
    s_field(w, key, t, 0);
}

void ss_jw_i64(struct ss_jw *w, const char *key, int64_t v)
{
    char t[32];
    snprintf(t, sizeof t, "%" PRId64, v);
    s_field(w, key, t, 0);
}

void ss_jw_num(struct ss_jw *w, const char *key, double v)
{
    char t[40];
    ss_json_number(t, sizeof t, v);
    s_field(w, key, t, 0);
}

void ss_jw_str(struct ss_jw *w, const char *key, const char *v)
{
    s_field(w, key, v ? v : "", 1);
}

void ss_jw_bool(struct ss_jw *w, const char *key, int v)
{
    s_field(w, key, v ? "true" : "false", 0);
}

void ss_jw_raw(struct ss_jw *w, const char *key, const char *json)
{
    s_field(w, key, json, 0);
}

void ss_jw_snap(struct ss_jw *w, const struct ss_snap *s)
{
    ss_jw_snap_where(w, s, ~0u);
}

char *ss_snap_json(const struct ss_snap *s, unsigned mask, size_t max, int *truncated)
{
    struct ss_jw w;
    ss_jw_begin(&w, max);
    ss_jw_snap_where(&w, s, mask);
    ss_jw_end(&w);
    if (truncated)
        *truncated = w.truncated;
    return w.buf;  /* handed over: ss_jw_fini() is not called */
}

void ss_jw_snap_where(struct ss_jw *w, const struct ss_snap *s, unsigned mask)
{
    for (size_t i = 0; i < s->n; i++) {
        if (mask != ~0u && !(s->defs[i].where & mask))
            continue;
        const struct ss_val *v = &s->v[i];
        const char *key = s->defs[i].key;
        switch (v->type) {
        case SS_VAL_U64: ss_jw_u64(w, key, v->u); break;
        case SS_VAL_I64: ss_jw_i64(w, key, v->i); break;
        case SS_VAL_NUM: ss_jw_num(w, key, v->d); break;
        case SS_VAL_STR: ss_jw_str(w, key, v->s); break;
        case SS_VAL_BOOL: ss_jw_bool(w, key, (int)v->u); break;
        default: break;
        }
    }
}

/* ------------------------------------------------------------ Prometheus */

void ss_snap_prom(const struct ss_snap *s, struct ss_mw *w)
{
    for (size_t i = 0; i < s->n; i++) {
        const struct ss_stat_def *d = &s->defs[i];
        int t = s->v[i].type;
        if (!d->prom || d->kind == SS_STAT_INFO || t == SS_VAL_NONE || t == SS_VAL_STR)
            continue;
        double v = ss_snap_get(s, i) * (d->prom_scale != 0 ? d->prom_scale : 1.0);
        if (d->kind == SS_STAT_COUNTER)
            ss_mw_counter(w, d->prom, d->help, d->labels, v);
        else
            ss_mw_gauge(w, d->prom, d->help, d->labels, v);
    }
}

const char *ss_stat_unit(const struct ss_stat_def *d)
{
    static const char *const suffix[][2] = {{"_s", "s"}, {"_ms", "ms"}, {"_us", "us"},
                                            {"_bytes", "bytes"}};
    size_t n = strlen(d->key);
    for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
        size_t k = strlen(suffix[i][0]);
        if (n > k && strcmp(d->key + n - k, suffix[i][0]) == 0)
            return suffix[i][1];
    }
    return NULL;
}

char *ss_stat_doc_row(const struct ss_stat_def *d, const char *unit,
                      const char *const *where_names, size_t n_where, char *out, size_t len)
{
    static const char *const kinds[] = {"counter", "gauge", "info"};
    char prom[256] = "—", where[256] = "";
    if (!unit)
        unit = ss_stat_unit(d);
    ss_assert(d->kind >= 0 && d->kind <= SS_STAT_INFO);
    if (d->prom)
        snprintf(prom, sizeof prom, "`%s%s%s%s`", d->prom, d->labels ? "{" : "",
                 d->labels ? d->labels : "", d->labels ? "}" : "");
    for (size_t b = 0; where_names && b < n_where; b++)
        if (d->where & (1u << b))
            snprintf(where + strlen(where), sizeof where - strlen(where), "%s%s",
                     where[0] ? ", " : "", where_names[b]);
    if (where_names)
        snprintf(where + strlen(where), sizeof where - strlen(where), " |");
    snprintf(out, len, "| `%s` | %s | %s | %s |%s%s %s |", d->key, prom, kinds[d->kind],
             unit ? unit : "—", where_names ? " " : "", where, d->help);
    return out;
}
