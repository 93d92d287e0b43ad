/* test_ss_stats.c - unit tests of the one metrics module (common/ss_stats):
 * counter slots summed across threads while they count (exact at the end;
 * run under TSan by make test), slots on their own cache lines, the JSON
 * writer's escaping, numbers and growth past 4 KiB, its limit (the text
 * stays valid and never passes it), a snapshot written as JSON and as
 * Prometheus text giving the same values, and per-thread latency histograms
 * (ss_metrics.h: ss_hists_new, ss_hists_sum, ss_hist_count) filled by
 * threads while a reader sums and writes them (exact at the end; under TSan
 * too), each on its own cache lines, with observations in the right bucket. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ss_mem.h"
#include "ss_metrics.h"
#include "ss_stats.h"

#define N_THREADS 4
#define N_ADDS 200000

struct adder {
    ss_ctrs_t *ctrs;     /* shared */
    size_t slot;         /* this thread's */
};

/* Count into its own slot: N_ADDS adds of 1 and of 3, a running figure set
 * each time, and a double. */
static void *s_adder(void *arg)
{
    struct adder *a = arg;
    _Atomic uint64_t *c = ss_ctrs_slot(a->ctrs, a->slot);
    for (uint64_t i = 1; i <= N_ADDS; i++) {
        ss_ctr_add(c, 0, 1);
        ss_ctr_add(c, 1, 3);
        ss_ctr_set(c, 2, i);
        ss_ctr_set_f64(c, 3, 0.5 * (double)i);
    }
    return NULL;
}

static void test_sum_across_threads(void **state)
{
    (void)state;
    ss_ctrs_t *ctrs = ss_ctrs_new(4, N_THREADS);
    pthread_t tid[N_THREADS];
    struct adder a[N_THREADS];
    uint64_t sum[4], last0 = 0;
    for (int i = 0; i < N_THREADS; i++) {
        a[i] = (struct adder){ctrs, (size_t)i};
        assert_int_equal(pthread_create(&tid[i], NULL, s_adder, &a[i]), 0);
    }
    for (int k = 0; k < 1000; k++) {  /* a reader while they count: never goes back */
        ss_ctrs_sum(ctrs, sum);
        assert_true(sum[0] >= last0);
        assert_true(sum[0] <= (uint64_t)N_THREADS * N_ADDS);
        last0 = sum[0];
    }
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(tid[i], NULL);
    ss_ctrs_sum(ctrs, sum);
    assert_int_equal(sum[0], (uint64_t)N_THREADS * N_ADDS);
    assert_int_equal(sum[1], 3ull * N_THREADS * N_ADDS);
    assert_int_equal(sum[2], (uint64_t)N_THREADS * N_ADDS);
    assert_true(ss_ctrs_sum_f64(ctrs, 3) == 0.5 * N_THREADS * N_ADDS);
    ss_ctrs_destroy(&ctrs);
    assert_null(ctrs);
    ss_ctrs_destroy(&ctrs);
}

/* Each slot starts a cache line of its own, also for 9 counters (2 lines). */
static void test_slots_padded(void **state)
{
    (void)state;
    ss_ctrs_t *ctrs = ss_ctrs_new(9, 3);
    assert_int_equal(ss_ctrs_n(ctrs), 9);
    assert_int_equal(ss_ctrs_n_slots(ctrs), 3);
    for (size_t s = 0; s < 3; s++) {
        uintptr_t p = (uintptr_t)ss_ctrs_slot(ctrs, s);
        assert_int_equal(p % 64, 0);
        if (s)
            assert_true(p - (uintptr_t)ss_ctrs_slot(ctrs, s - 1) >= 9 * sizeof(uint64_t));
        for (size_t i = 0; i < 9; i++)
            assert_int_equal(ss_ctr_get(ss_ctrs_slot(ctrs, s), i), 0);
    }
    ss_ctrs_destroy(&ctrs);
}

static void test_json_escaping(void **state)
{
    (void)state;
    struct ss_jw w;
    ss_jw_begin(&w, 4096);
    ss_jw_str(&w, "s", "a\"b\\c\nd\te\x01" "f/");
    ss_jw_str(&w, "k\"ey", "");
    ss_jw_u64(&w, "u", UINT64_MAX);
    ss_jw_i64(&w, "i", INT64_MIN);
    ss_jw_bool(&w, "t", 1);
    ss_jw_bool(&w, "f", 0);
    ss_jw_num(&w, "nan", NAN);
    ss_jw_num(&w, "inf", -INFINITY);
    ss_jw_num(&w, "x", 0.1);
    ss_jw_raw(&w, "o", "{\"a\":1}");
    ss_jw_end(&w);
    assert_string_equal(w.buf,
                        "{\"s\":\"a\\\"b\\\\c\\nd\\te\\u0001f/\",\"k\\\"ey\":\"\","
                        "\"u\":18446744073709551615,\"i\":-9223372036854775808,"
                        "\"t\":true,\"f\":false,\"nan\":null,\"inf\":null,\"x\":0.1,"
                        "\"o\":{\"a\":1}}");
    assert_int_equal(w.len, strlen(w.buf));
    assert_false(w.truncated);
    ss_jw_fini(&w);
}

/* Numbers read back exactly, in the short form where it suffices. */
static void test_json_numbers(void **state)
{
    (void)state;
    char t[40];
    double vs[] = {0, 1, -2.5, 1e300, 5e-324, 0.1 + 0.2, 1.0 / 3.0, 123456789012345678.0};
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
        ss_json_number(t, sizeof t, vs[i]);
        assert_true(strtod(t, NULL) == vs[i]);
    }
    ss_json_number(t, sizeof t, 0.25);
    assert_string_equal(t, "0.25");
    ss_json_number(t, sizeof t, NAN);
    assert_string_equal(t, "null");
}

/* Many fields: the buffer grows well past 4 KiB (the old STATS reply's
 * fixed buffer) and every field is there. */
static void test_json_grows(void **state)
{
    (void)state;
    struct ss_jw w;
    char key[32];
    ss_jw_begin(&w, 1u << 20);
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "counter_%04d", i);
        ss_jw_u64(&w, key, (uint64_t)i * 1000003u);
    }
    ss_jw_end(&w);
    assert_false(w.truncated);
    assert_true(w.len > 4096 * 4);
    assert_int_equal(w.len, strlen(w.buf));
    assert_int_equal(w.buf[0], '{');
    assert_int_equal(w.buf[w.len - 1], '}');
    assert_non_null(strstr(w.buf, "\"counter_0000\":0,"));
    assert_non_null(strstr(w.buf, "\"counter_0999\":999002997}"));
    ss_jw_fini(&w);
}

/* A limit: fields that do not fit are left out whole, the text is closed,
 * valid, and never longer than the limit. */
static void test_json_limit(void **state)
{
    (void)state;
    struct ss_jw w;
    ss_jw_begin(&w, 100);
    int i;
    for (i = 0; i < 100 && !w.truncated; i++)
        ss_jw_str(&w, "field", "0123456789");
    ss_jw_end(&w);
    assert_true(w.truncated);
    assert_true(w.len + 1 <= 100);
    assert_int_equal(w.buf[w.len - 1], '}');
    /* whole fields only: {"field":"0123456789",...} */
    size_t one = strlen("\"field\":\"0123456789\"");
    assert_int_equal(w.len, 2 + (size_t)(i - 1) * one + (size_t)(i - 2));
    ss_jw_fini(&w);
}

enum { T_A, T_B, T_C, T_D, T_E, T_F, T_N };
static const struct ss_stat_def s_defs[T_N] = {
    {"name", NULL, NULL, 0, SS_STAT_INFO, "a name", 1},
    {"requests", "x_requests_total", NULL, 0, SS_STAT_COUNTER, "requests", 1},
    {"latency_ms", "x_latency_seconds", NULL, 1e-3, SS_STAT_GAUGE, "latency", 2},
    {"evicted_ttl", "x_evicted_total", "cause=\"ttl\"", 0, SS_STAT_COUNTER, "evicted", 2},
    {"evicted_memory", "x_evicted_total", "cause=\"memory\"", 0, SS_STAT_COUNTER, "evicted", 2},
    {"ok", "x_ok", NULL, 0, SS_STAT_GAUGE, "ok", 1},
};

static void s_prom(void *arg, ss_mw_t *w)
{
    ss_snap_prom(arg, w);
}

/* The number after "key": in json. */
static double s_json_value(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    assert_non_null(p);
    return strtod(p + strlen(pat), NULL);
}

/* The value of the sample "name{labels}" in Prometheus text. */
static double s_prom_value(const char *text, const char *sample)
{
    const char *p = strstr(text, sample);
    assert_non_null(p);
    return strtod(p + strlen(sample), NULL);
}

static void test_prom_equals_json(void **state)
{
    (void)state;
    struct ss_val v[T_N];
    struct ss_snap sn;
    struct ss_jw w;
    ss_snap_init(&sn, s_defs, T_N, v);
    ss_snap_str(&sn, T_A, "shard \"0\"");
    ss_snap_u64(&sn, T_B, 123456789012345ull);
    ss_snap_num(&sn, T_C, 2.5);
    ss_snap_u64(&sn, T_D, 7);
    ss_snap_u64(&sn, T_E, 0);
    ss_snap_bool(&sn, T_F, 1);
    assert_int_equal(ss_snap_find(&sn, "latency_ms"), T_C);
    assert_int_equal(ss_snap_find(&sn, "nope"), -1);
    assert_true(ss_snap_get(&sn, T_C) == 2.5);
    ss_jw_begin(&w, 4096);
    ss_jw_snap(&w, &sn);
    ss_jw_end(&w);
    char *prom = ss_metrics_text("job=\"t\"", s_prom, &sn, NULL);
    assert_null(strstr(prom, "name"));  /* JSON only */
    assert_true(s_prom_value(prom, "x_requests_total{job=\"t\"} ") ==
                s_json_value(w.buf, "requests"));
    assert_true(s_prom_value(prom, "x_latency_seconds{job=\"t\"} ") ==
                s_json_value(w.buf, "latency_ms") * 1e-3);
    assert_true(s_prom_value(prom, "x_evicted_total{job=\"t\",cause=\"ttl\"} ") ==
                s_json_value(w.buf, "evicted_ttl"));
    assert_true(s_prom_value(prom, "x_evicted_total{job=\"t\",cause=\"memory\"} ") ==
                s_json_value(w.buf, "evicted_memory"));
    assert_true(s_prom_value(prom, "x_ok{job=\"t\"} ") == 1);
    assert_non_null(strstr(w.buf, "\"ok\":true"));
    assert_non_null(strstr(w.buf, "\"name\":\"shard \\\"0\\\"\""));
    /* one HELP/TYPE for the two samples of x_evicted_total */
    const char *h = strstr(prom, "# TYPE x_evicted_total counter\n");
    assert_non_null(h);
    assert_null(strstr(h + 1, "# TYPE x_evicted_total"));
    ss_free(prom);
    ss_jw_fini(&w);
    /* where: only the rows of mask 2 */
    ss_jw_begin(&w, 4096);
    ss_jw_snap_where(&w, &sn, 2);
    ss_jw_end(&w);
    assert_string_equal(w.buf, "{\"latency_ms\":2.5,\"evicted_ttl\":7,\"evicted_memory\":0}");
    ss_jw_fini(&w);
}

/* ------------------------------------------------------------ histograms */

#define N_OBS 50000

/* Observation i of thread t: spread over every bucket, +Inf included
 * (0 ns .. 3.3 s). */
static uint64_t s_obs_ns(size_t t, uint64_t i)
{
    return ((i * 7919 + t * 104729) % 33000) * 100000;
}

struct hist_adder {
    struct ss_hist *h;   /* this thread's */
    size_t t;            /* thread index */
};

static void *s_hist_adder(void *arg)
{
    struct hist_adder *a = arg;
    for (uint64_t i = 0; i < N_OBS; i++)
        ss_hist_add(a->h, s_obs_ns(a->t, i));
    return NULL;
}

static void s_write_hist(void *arg, ss_mw_t *w)
{
    ss_mw_hist(w, "x_wait_seconds", "test histogram", "k=\"v\"", arg);
}

/* Check one exposition of x_wait_seconds: buckets cumulative and
 * non-decreasing, 15 of them ending in +Inf, +Inf equal to _count; returns
 * _count. */
static uint64_t s_check_text(const char *text)
{
    double last = 0, inf = -1;
    int n = 0;
    for (const char *p = text; (p = strstr(p, "x_wait_seconds_bucket{")) != NULL; p++) {
        const char *v = strstr(p, "} ");
        assert_non_null(v);
        double x = strtod(v + 2, NULL);
        assert_true(x >= last);
        last = x;
        n++;
        if (strncmp(strstr(p, "le=\""), "le=\"+Inf\"", 9) == 0)
            inf = x;
    }
    assert_int_equal(n, SS_HIST_BUCKETS + 1);
    double count = s_prom_value(text, "x_wait_seconds_count{job=\"t\",k=\"v\"} ");
    assert_true(inf == count);
    assert_non_null(strstr(text, "# TYPE x_wait_seconds histogram\n"));
    return (uint64_t)count;
}

static void test_hists_across_threads(void **state)
{
    (void)state;
    struct ss_hist *hs = ss_hists_new(N_THREADS), sum;
    pthread_t tid[N_THREADS];
    struct hist_adder a[N_THREADS];
    uint64_t last = 0;
    for (int i = 0; i < N_THREADS; i++) {  /* each on lines of its own, empty */
        assert_int_equal((uintptr_t)&hs[i] % 64, 0);
        assert_int_equal(ss_hist_count(&hs[i]), 0);
    }
    for (int i = 0; i < N_THREADS; i++) {
        a[i] = (struct hist_adder){&hs[i], (size_t)i};
        assert_int_equal(pthread_create(&tid[i], NULL, s_hist_adder, &a[i]), 0);
    }
    for (int k = 0; k < 200; k++) {  /* a scrape while they add: well formed, never back */
        ss_hists_sum(hs, N_THREADS, &sum);
        char *text = ss_metrics_text("job=\"t\"", s_write_hist, &sum, NULL);
        uint64_t n = s_check_text(text);
        assert_true(n >= last && n <= (uint64_t)N_THREADS * N_OBS);
        last = n;
        ss_free(text);
    }
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(tid[i], NULL);
    /* exact at the end: the same observations added to one histogram here */
    struct ss_hist want;
    memset(&want, 0, sizeof want);
    for (size_t t = 0; t < N_THREADS; t++)
        for (uint64_t i = 0; i < N_OBS; i++)
            ss_hist_add(&want, s_obs_ns(t, i));
    memset(&sum, 0xff, sizeof sum);  /* ss_hists_sum discards what out held */
    ss_hists_sum(hs, N_THREADS, &sum);
    assert_int_equal(ss_hist_count(&sum), (uint64_t)N_THREADS * N_OBS);
    for (int i = 0; i <= SS_HIST_BUCKETS; i++) {
        assert_int_equal(atomic_load(&sum.bucket[i]), atomic_load(&want.bucket[i]));
        assert_true(atomic_load(&sum.bucket[i]) > 0);  /* every bucket was reached */
    }
    assert_int_equal(atomic_load(&sum.sum_ns), atomic_load(&want.sum_ns));
    char *text = ss_metrics_text("job=\"t\"", s_write_hist, &sum, NULL);
    assert_int_equal(s_check_text(text), (uint64_t)N_THREADS * N_OBS);
    assert_true(fabs(s_prom_value(text, "x_wait_seconds_sum{job=\"t\",k=\"v\"} ") -
                     (double)atomic_load(&want.sum_ns) * 1e-9) < 1e-6);
    ss_free(text);
    ss_free(hs);
}

/* An observation on a bound goes into that bucket (le: <=), one just past it
 * into the next, one past the last bound into +Inf. */
static void test_hist_buckets(void **state)
{
    (void)state;
    struct ss_hist *h = ss_hists_new(1);
    ss_hist_add(h, 100000);       /* 100 us: bucket 0 */
    ss_hist_add(h, 100001);       /* bucket 1 */
    ss_hist_add(h, 2500000000u);  /* 2.5 s: the last bound */
    ss_hist_add(h, 2500000001u);  /* +Inf */
    ss_hist_add(h, 0);            /* bucket 0 */
    assert_true(ss_hist_bound_s(0) == 0.0001);
    assert_true(ss_hist_bound_s(SS_HIST_BUCKETS - 1) == 2.5);
    assert_int_equal(atomic_load(&h->bucket[0]), 2);
    assert_int_equal(atomic_load(&h->bucket[1]), 1);
    assert_int_equal(atomic_load(&h->bucket[SS_HIST_BUCKETS - 1]), 1);
    assert_int_equal(atomic_load(&h->bucket[SS_HIST_BUCKETS]), 1);
    assert_int_equal(ss_hist_count(h), 5);
    assert_int_equal(atomic_load(&h->sum_ns), 100000ull + 100001 + 2500000000ull * 2 + 1);
    ss_free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_across_threads), cmocka_unit_test(test_slots_padded),
        cmocka_unit_test(test_json_escaping),      cmocka_unit_test(test_json_numbers),
        cmocka_unit_test(test_json_grows),         cmocka_unit_test(test_json_limit),
        cmocka_unit_test(test_prom_equals_json),   cmocka_unit_test(test_hists_across_threads),
        cmocka_unit_test(test_hist_buckets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
