/* ss_stats.h - the one metrics module: counters declared once, per-thread
 * counter slots, a snapshot, and one writer for every output.
 *
 * A process declares its figures once, in a table of struct ss_stat_def
 * (usually built by an X-macro): the JSON field name, the Prometheus name
 * and labels, the kind (counter, gauge, or info: JSON only) and one line of
 * help. Every output reads a snapshot of that table (struct ss_snap):
 *   - JSON fields (STATS replies, the trainer's JSONL rows and result.json)
 *     through the bounded JSON writer ss_jw (it grows its buffer up to a
 *     limit and never writes past it);
 *   - Prometheus samples through ss_snap_prom() (ss_metrics.h's writer);
 *   - the values a progress line prints through ss_snap_num().
 * So a figure has one name per output, declared in one row, and the same
 * value everywhere (Prometheus may scale it: milliseconds to seconds).
 *
 * Counters that threads bump live in ss_ctrs_t: one slot per thread, each
 * padded to a cache line, written with relaxed atomics by its own thread
 * (never shared on the hot path: no contention), summed by the reader
 * (memcached thread_stats). */
#ifndef SS_STATS_H
#define SS_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------ definitions */

enum ss_stat_kind {
    SS_STAT_COUNTER = 0,  /* monotonic: Prometheus counter (name ends in _total) */
    SS_STAT_GAUGE = 1,    /* a level: Prometheus gauge */
    SS_STAT_INFO = 2,     /* JSON only (names, flags, sizes of the run) */
};

/* One figure of a process. Tables are static const arrays. */
struct ss_stat_def {
    const char *key;      /* JSON field name: stable, scripts read it */
    const char *prom;     /* Prometheus metric name, or NULL for JSON only */
    const char *labels;   /* extra Prometheus labels ("cause=\"ttl\""), or NULL */
    double prom_scale;    /* Prometheus value = value * prom_scale; 0 means 1 */
    int kind;             /* enum ss_stat_kind */
    const char *help;     /* one line, no newline */
    unsigned where;       /* the process's own bits: which outputs show it
                           * (ss_jw_snap_where); 0 when it does not need any */
};

/* The unit of d's value as its key's suffix says it ("_s": "s", "_ms",
 * "_us", "_bytes"), else NULL (a count, a name, a ratio, or a key that does
 * not say). */
const char *ss_stat_unit(const struct ss_stat_def *d);

/* d as one row of a markdown table of docs/metrics.md, in out (len bytes;
 * cut to fit): "| `key` | `prometheus_name{labels}` | kind | unit | where |
 * help |", with "—" for no Prometheus name or no unit. unit: the table's
 * unit for d, or NULL for ss_stat_unit(d). The where column is
 * there when where_names is not NULL: the names of d->where's bits
 * (where_names[b] for bit b, n_where of them), comma-separated. Returns out. */
char *ss_stat_doc_row(const struct ss_stat_def *d, const char *unit,
                      const char *const *where_names, size_t n_where, char *out, size_t len);

/* ------------------------------------------------------------ per-thread counters */

typedef struct ss_ctrs ss_ctrs_t;

/* n_slots slots (one per thread) of n counters each, zeroed; each slot
 * starts on its own 64-byte line. Caller owns; ss_ctrs_destroy(). */
ss_ctrs_t *ss_ctrs_new(size_t n, size_t n_slots);

/* Free; sets *self_p to NULL; accepts NULL. */
void ss_ctrs_destroy(ss_ctrs_t **self_p);

/* The counters of slot (< n_slots): an array of n. Valid while self lives.
 * Write it with the functions below; one thread owns a slot. */
_Atomic uint64_t *ss_ctrs_slot(ss_ctrs_t *self, size_t slot);

/* Counters per slot, slots. */
size_t ss_ctrs_n(const ss_ctrs_t *self);
size_t ss_ctrs_n_slots(const ss_ctrs_t *self);

/* out[i] = the sum over slots of counter i (n values), relaxed loads: a
 * figure may be one update behind a thread that is writing. Any thread. */
void ss_ctrs_sum(const ss_ctrs_t *self, uint64_t *out);

/* The sum over slots of counter i holding doubles (ss_ctr_set_f64). */
double ss_ctrs_sum_f64(const ss_ctrs_t *self, size_t i);

/* Add n to counter i of slot; returns the value before. Relaxed: cheap and
 * uncontended when the slot is the caller's own; safe from any thread. */
static inline uint64_t ss_ctr_add(_Atomic uint64_t *slot, size_t i, uint64_t n)
{
    return atomic_fetch_add_explicit(&slot[i], n, memory_order_relaxed);
}

/* Set counter i of slot to v (an absolute figure its one writer keeps). */
static inline void ss_ctr_set(_Atomic uint64_t *slot, size_t i, uint64_t v)
{
    atomic_store_explicit(&slot[i], v, memory_order_relaxed);
}

/* Set counter i of slot to the double d (its bits; sum with ss_ctrs_sum_f64). */
static inline void ss_ctr_set_f64(_Atomic uint64_t *slot, size_t i, double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    atomic_store_explicit(&slot[i], b, memory_order_relaxed);
}

/* Read counter i of one slot (relaxed). */
static inline uint64_t ss_ctr_get(_Atomic uint64_t *slot, size_t i)
{
    return atomic_load_explicit(&slot[i], memory_order_relaxed);
}

/* ------------------------------------------------------------ snapshots */

enum ss_val_type { SS_VAL_NONE = 0, SS_VAL_U64, SS_VAL_I64, SS_VAL_NUM, SS_VAL_STR, SS_VAL_BOOL };

/* One value of a snapshot. */
struct ss_val {
    int type;             /* enum ss_val_type; NONE: not in this snapshot */
    union {
        uint64_t u;       /* SS_VAL_U64, SS_VAL_BOOL */
        int64_t i;        /* SS_VAL_I64 */
        double d;         /* SS_VAL_NUM (NaN and infinities are written as null) */
        const char *s;    /* SS_VAL_STR: borrowed, must outlive the writers' calls */
    };
};

/* The figures of a process at one moment: defs[i] has value v[i]. */
struct ss_snap {
    const struct ss_stat_def *defs;  /* borrowed table */
    size_t n;                        /* entries of defs and v */
    struct ss_val *v;                /* caller's storage, n entries */
};

/* Start an empty snapshot of table defs (n rows) in storage v (n entries). */
void ss_snap_init(struct ss_snap *s, const struct ss_stat_def *defs, size_t n,
                  struct ss_val *v);

/* Set value i (< n). */
void ss_snap_u64(struct ss_snap *s, size_t i, uint64_t v);
void ss_snap_i64(struct ss_snap *s, size_t i, int64_t v);
void ss_snap_num(struct ss_snap *s, size_t i, double v);
void ss_snap_str(struct ss_snap *s, size_t i, const char *v);
void ss_snap_bool(struct ss_snap *s, size_t i, int v);

/* Set values first..first+n-1 from counter sums. */
void ss_snap_u64s(struct ss_snap *s, size_t first, const uint64_t *v, size_t n);

/* Value i as a number (strings: NaN; absent: NaN). */
double ss_snap_get(const struct ss_snap *s, size_t i);

/* 1 when value i is set. */
int ss_snap_has(const struct ss_snap *s, size_t i);

/* Index of the row whose JSON key is key, or -1. */
long ss_snap_find(const struct ss_snap *s, const char *key);

/* ------------------------------------------------------------ the JSON writer */

/* A JSON object under construction in a buffer that grows up to max bytes.
 * A write that would pass max is dropped and marks the writer truncated:
 * the text stays valid JSON up to the last whole field (ss_jw_end() still
 * closes it). Caller-allocated; ss_jw_fini() frees the buffer. */
struct ss_jw {
    char *buf;            /* text, NUL-terminated, owned */
    size_t len;           /* bytes used (without the NUL) */
    size_t cap;           /* bytes allocated */
    size_t max;           /* most bytes the text may take, NUL included */
    int fields;           /* fields written in the open object */
    int truncated;        /* a field did not fit in max */
};

/* Start "{" with room for max bytes (at least 64). */
void ss_jw_begin(struct ss_jw *w, size_t max);

/* Close the object ("}"). Room for it is always kept. */
void ss_jw_end(struct ss_jw *w);

/* Free the buffer. */
void ss_jw_fini(struct ss_jw *w);

/* Fields: "key":value. Strings are escaped (quotes, backslashes, control
 * characters); non-finite numbers become null. */
void ss_jw_u64(struct ss_jw *w, const char *key, uint64_t v);
void ss_jw_i64(struct ss_jw *w, const char *key, int64_t v);
void ss_jw_num(struct ss_jw *w, const char *key, double v);
void ss_jw_str(struct ss_jw *w, const char *key, const char *v);
void ss_jw_bool(struct ss_jw *w, const char *key, int v);

/* A field whose value is already JSON text (copied as is). */
void ss_jw_raw(struct ss_jw *w, const char *key, const char *json);

/* Every value set in s, in table order. */
void ss_jw_snap(struct ss_jw *w, const struct ss_snap *s);

/* The values set in s whose row's where has a bit of mask, in table order. */
void ss_jw_snap_where(struct ss_jw *w, const struct ss_snap *s, unsigned mask);

/* The fields of s in mask (~0u: all) as one JSON object, at most max bytes
 * (past it, whole fields are dropped and *truncated is set when given).
 * Returns the text (caller frees with ss_free()). */
char *ss_snap_json(const struct ss_snap *s, unsigned mask, size_t max, int *truncated);

/* Format v as JSON does here: the shortest of %.15g/%.17g that reads back
 * as v, "null" when not finite. out: at least 32 bytes. */
void ss_json_number(char *out, size_t len, double v);

/* ------------------------------------------------------------ Prometheus */

struct ss_mw;

/* Every numeric value of s whose row has a Prometheus name, as a counter or
 * gauge sample (booleans as 0/1, scaled by prom_scale). HELP and TYPE come
 * once per name: keep rows of one name together in the table. */
void ss_snap_prom(const struct ss_snap *s, struct ss_mw *w);

#endif
