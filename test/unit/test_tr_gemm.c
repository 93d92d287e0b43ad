/* test_tr_gemm.c - unit tests of the matrix product engines (tr_gemm) and ss_isa.
 *
 * Every engine against a double-precision reference written here (plain loops)
 * on the trainer's shapes and on edge sizes, each transpose combination.
 * Tolerances, per element of C with s = sum_k |a_ik b_kj|:
 *   fp32 engines (OpenBLAS, oneDNN f32): |c - ref| <= 1e-5 s (fp32 sums of up to
 *     367 terms: a few units of 2^-24 s each);
 *   bf16: against the reference of the bf16-rounded inputs, 1e-5 s (oneDNN sums
 *     in fp32), and against the unrounded reference at most 8e-3 s (two roundings
 *     of 2^-9 each) but, on inputs that bf16 cannot hold, more than 1e-4 s
 *     somewhere: proof that the products really ran in bf16.
 * Where an engine cannot run here (no AVX-512, no bf16, SS_ISA capping it) the
 * product runs on OpenBLAS with fp32 results and is counted as a fallback; the
 * tests check exactly that instead. Plus: the bf16 rounding (nearest even, NaN,
 * infinities, the vector path against the scalar definition), the SS_ISA names,
 * and two threads running their own contexts at once (ThreadSanitizer). */
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

#include "ss_hash.h"
#include "ss_isa.h"
#include "ss_mem.h"
#include "tr_gemm.h"
#include "tr_model.h"

#define TOL_F32 1e-5    /* fp32 sums: error / sum |a b| */
#define TOL_BF16 8e-3   /* bf16 inputs: error against the unrounded reference */

/* The trainer's default products at batch 128 (m, n, k, trans_a, trans_b), then
 * edge sizes: 1-wide, odd, a single inner term. */
static const struct tr_gemm_op s_ops[] = {
    {128, 64, 13, 0, 1}, {64, 13, 128, 1, 0},                         /* bottom 0 */
    {128, 16, 64, 0, 1}, {16, 64, 128, 1, 0}, {128, 64, 16, 0, 0},    /* bottom 1 */
    {128, 64, 367, 0, 1}, {64, 367, 128, 1, 0}, {128, 367, 64, 0, 0}, /* top 0 */
    {128, 1, 64, 0, 1}, {1, 64, 128, 1, 0}, {128, 64, 1, 0, 0},       /* top 1 */
    {1, 1, 1, 0, 0}, {17, 33, 5, 1, 1}, {3, 29, 70, 0, 1}, {31, 7, 9, 1, 0},
};

/* The scalar definition of the bf16 rounding, written here again. */
static uint16_t s_ref_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    uint32_t lsb = (u >> 16) & 1u;
    return (uint16_t)((u + 0x7fffu + lsb) >> 16);
}

/* f rounded to bf16 and back. */
static float s_round_bf16(float f)
{
    return tr_gemm_bf16_to_float(s_ref_bf16(f));
}

/* Element (i, j) of op(X) for X stored [rows x cols] (trans: stored transposed). */
static double s_at(const float *x, int trans, uint32_t ld, uint32_t i, uint32_t j, int bf16)
{
    float v = trans ? x[(size_t)j * ld + i] : x[(size_t)i * ld + j];
    return bf16 ? s_round_bf16(v) : v;
}

/* ref [m x n] = op(A) op(B) in double (inputs rounded to bf16 when bf16) and
 * abs [m x n] = sum_k |a_ik b_kj|. */
static void s_ref(const struct tr_gemm_op *op, const float *a, const float *b, int bf16,
                  double *ref, double *abs_sum)
{
    uint32_t lda = op->trans_a ? op->m : op->k, ldb = op->trans_b ? op->k : op->n;
    for (uint32_t i = 0; i < op->m; i++)
        for (uint32_t j = 0; j < op->n; j++) {
            double s = 0.0, t = 0.0;
            for (uint32_t k = 0; k < op->k; k++) {
                double p = s_at(a, op->trans_a, lda, i, k, bf16) *
                           s_at(b, op->trans_b, ldb, k, j, bf16);
                s += p;
                t += fabs(p);
            }
            ref[(size_t)i * op->n + j] = s;
            abs_sum[(size_t)i * op->n + j] = t;
        }
}

/* Largest |c - ref| / abs over the elements (abs 0 counts as 1). */
static double s_worst(const float *c, const double *ref, const double *abs_sum, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(c[i] - ref[i]) / (abs_sum[i] > 0 ? abs_sum[i] : 1.0);
        worst = e > worst ? e : worst;
    }
    return worst;
}

/* Random A, B and an output poisoned with NaN for op. */
struct case_ {
    float *a, *b, *c;       /* inputs, output */
    double *ref, *abs_sum;  /* reference, sum of |terms| */
    double *ref16, *abs16;  /* the same on bf16-rounded inputs */
    size_t n_c;             /* m * n */
};

static void s_case_new(struct case_ *t, const struct tr_gemm_op *op, uint64_t seed)
{
    uint64_t st = seed;
    size_t na = (size_t)op->m * op->k, nb = (size_t)op->k * op->n;
    t->n_c = (size_t)op->m * op->n;
    t->a = ss_malloc(sizeof(float) * na);
    t->b = ss_malloc(sizeof(float) * nb);
    t->c = ss_malloc(sizeof(float) * t->n_c);
    for (size_t i = 0; i < na; i++)     /* full 24-bit mantissas: bf16 must round */
        t->a[i] = 2.0f * ss_rand_unit(&st) - 1.0f;
    for (size_t i = 0; i < nb; i++)
        t->b[i] = 0.5f * ss_rand_unit(&st) - 0.25f;
    memset(t->c, 0xff, sizeof(float) * t->n_c);
    t->ref = ss_malloc(sizeof(double) * t->n_c);
    t->abs_sum = ss_malloc(sizeof(double) * t->n_c);
    t->ref16 = ss_malloc(sizeof(double) * t->n_c);
    t->abs16 = ss_malloc(sizeof(double) * t->n_c);
    s_ref(op, t->a, t->b, 0, t->ref, t->abs_sum);
    s_ref(op, t->a, t->b, 1, t->ref16, t->abs16);
}

static void s_case_free(struct case_ *t)
{
    ss_free(t->a);
    ss_free(t->b);
    ss_free(t->c);
    ss_free(t->ref);
    ss_free(t->abs_sum);
    ss_free(t->ref16);
    ss_free(t->abs16);
}

/* One engine on every shape: fp32 engines within TOL_F32 of the reference; bf16
 * within TOL_F32 of the rounded-input reference and visibly off the unrounded
 * one; an engine that cannot run here gives fp32 results and counts fallbacks. */
static void s_check_engine(enum tr_gemm_engine engine)
{
    tr_gemm_t *g = tr_gemm_new();
    int ok = tr_gemm_engine_ok(engine);
    int bf16 = ok && engine == TR_GEMM_DNNL_BF16;
    size_t n_ops = sizeof(s_ops) / sizeof(s_ops[0]);
    double far_worst = 0.0;
    print_message("engine %s: %s here\n", tr_gemm_engine_name(engine),
                  ok ? "runs" : "falls back to blas");
    for (size_t i = 0; i < n_ops; i++) {
        const struct tr_gemm_op *op = &s_ops[i];
        struct case_ t;
        s_case_new(&t, op, 100 + i);
        for (int rep = 0; rep < 2; rep++) {     /* the second run uses the cached primitive */
            memset(t.c, 0xff, sizeof(float) * t.n_c);
            tr_gemm_run(g, engine, op, t.a, t.b, t.c);
            double w = bf16 ? s_worst(t.c, t.ref16, t.abs16, t.n_c)
                            : s_worst(t.c, t.ref, t.abs_sum, t.n_c);
            if (w > TOL_F32)
                print_message("%s %ux%ux%u ta%d tb%d: worst %.3g\n",
                              tr_gemm_engine_name(engine), op->m, op->n, op->k, op->trans_a,
                              op->trans_b, w);
            assert_true(w <= TOL_F32);
            double far = s_worst(t.c, t.ref, t.abs_sum, t.n_c);
            assert_true(far <= (bf16 ? TOL_BF16 : TOL_F32));
            far_worst = far > far_worst ? far : far_worst;
        }
        s_case_free(&t);
    }
    if (bf16)   /* the rounding is visible: not an fp32 product under another name */
        assert_true(far_worst > 1e-4);
    if (engine == TR_GEMM_BLAS || ok)
        assert_int_equal(tr_gemm_fallbacks(g), 0);
    else
        assert_int_equal(tr_gemm_fallbacks(g), 2 * n_ops);
    tr_gemm_destroy(&g);
    assert_null(g);
    tr_gemm_destroy(&g);    /* NULL is fine */
}

static void test_blas(void **state)
{
    (void)state;
    s_check_engine(TR_GEMM_BLAS);
}

static void test_dnnl_f32(void **state)
{
    (void)state;
    s_check_engine(TR_GEMM_DNNL_F32);
}

static void test_dnnl_bf16(void **state)
{
    (void)state;
    s_check_engine(TR_GEMM_DNNL_BF16);
}

/* Kept operands (tr_gemm_run_kept): a layer's shape, x [B x k] the forward's A
 * and the weight gradient's B. Each product equals tr_gemm_run's on the same
 * inputs bit for bit, also after x changes between tr_gemm_forget calls (a
 * stale bf16 copy of x would give the old products), and when the copies
 * run out (more kept operands than the context keeps). On every engine
 * (without bf16, keep changes nothing). */
static float s_rand(uint64_t i)
{
    return (float)(ss_mix64(i) >> 40) / 8388608.0f - 1.0f;   /* [-1, 1), 24 bits */
}

static void test_kept_operands(void **state)
{
    (void)state;
    enum { B = 64, K = 96, N = 48 };
    float *x = ss_calloc((size_t)B * K + 16, sizeof(float)), *w = ss_malloc(sizeof(float) * N * K);
    float *dy = ss_malloc(sizeof(float) * B * N), *c1 = ss_malloc(sizeof(float) * B * K);
    float *c2 = ss_malloc(sizeof(float) * B * K);
    const struct tr_gemm_op fwd = {.m = B, .n = N, .k = K, .trans_a = 0, .trans_b = 1};
    const struct tr_gemm_op gw = {.m = N, .n = K, .k = B, .trans_a = 1, .trans_b = 0};
    for (int e = 0; e < TR_GEMM_N_ENGINES; e++) {
        tr_gemm_t *kept = tr_gemm_new(), *plain = tr_gemm_new();
        for (int step = 0; step < 3; step++) {
            for (size_t i = 0; i < (size_t)B * K; i++)
                x[i] = s_rand(step * 7919 + i);
            for (size_t i = 0; i < (size_t)N * K; i++)
                w[i] = s_rand(100003 + i);
            for (size_t i = 0; i < (size_t)B * N; i++)
                dy[i] = s_rand(200003 + step * 31 + i);
            tr_gemm_forget(kept);
            for (int extra = 0; extra < (step == 2 ? 10 : 0); extra++)  /* fill the copies */
                tr_gemm_run_kept(kept, (enum tr_gemm_engine)e, &fwd, x + extra, w, c1,
                                 TR_GEMM_KEEP_A);
            tr_gemm_run_kept(kept, (enum tr_gemm_engine)e, &fwd, x, w, c1, TR_GEMM_KEEP_A);
            tr_gemm_run(plain, (enum tr_gemm_engine)e, &fwd, x, w, c2);
            assert_memory_equal(c1, c2, sizeof(float) * B * N);
            tr_gemm_run_kept(kept, (enum tr_gemm_engine)e, &gw, dy, x, c1, TR_GEMM_KEEP_B);
            tr_gemm_run(plain, (enum tr_gemm_engine)e, &gw, dy, x, c2);
            assert_memory_equal(c1, c2, sizeof(float) * N * K);
        }
        tr_gemm_destroy(&kept);
        tr_gemm_destroy(&plain);
    }
    ss_free(x);
    ss_free(w);
    ss_free(dy);
    ss_free(c1);
    ss_free(c2);
}

/* Which engines run follows the ISA level: oneDNN from AVX-512 up, bf16 where
 * ss_isa_has_bf16(); SS_ISA=portable turns every oneDNN engine off. */
static void test_engines_follow_isa(void **state)
{
    (void)state;
    enum ss_isa isa = ss_isa_get();
    print_message("isa %s, avx2 %d, bf16 %d\n", ss_isa_name(isa), ss_isa_has_avx2(),
                  ss_isa_has_bf16());
    assert_true(tr_gemm_engine_ok(TR_GEMM_BLAS));
    assert_int_equal(tr_gemm_engine_ok(TR_GEMM_DNNL_F32), isa >= SS_ISA_AVX512);
    assert_int_equal(tr_gemm_engine_ok(TR_GEMM_DNNL_BF16),
                     isa >= SS_ISA_AVX512 && ss_isa_has_bf16());
    assert_true(isa != SS_ISA_AMX || ss_isa_has_bf16());
    const char *cap = getenv("SS_ISA");
    if (cap && strcmp(cap, "portable") == 0) {
        assert_int_equal(isa, SS_ISA_PORTABLE);
        assert_false(ss_isa_has_avx2());
        assert_false(ss_isa_has_bf16());
    }
    if (cap && strcmp(cap, "avx512") == 0)
        assert_true(isa <= SS_ISA_AVX512);
    assert_int_equal(ss_isa_get(), isa);    /* constant */
}

/* The names round-trip; an unknown one is refused. */
static void test_isa_names(void **state)
{
    (void)state;
    for (int i = SS_ISA_PORTABLE; i <= SS_ISA_AMX; i++) {
        enum ss_isa back = SS_ISA_AMX;
        assert_int_equal(ss_isa_parse(ss_isa_name((enum ss_isa)i), &back), 0);
        assert_int_equal(back, i);
    }
    enum ss_isa x = SS_ISA_AVX512;
    assert_int_equal(ss_isa_parse("avx2", &x), -1);
    assert_int_equal(ss_isa_parse(NULL, &x), -1);
    assert_int_equal(x, SS_ISA_AVX512);
    assert_string_equal(ss_isa_name((enum ss_isa)7), "unknown");
    assert_string_equal(tr_gemm_engine_name(TR_GEMM_DNNL_BF16), "dnnl-bf16");
}

/* bf16 rounding: values by hand (ties to even, carries into the exponent, signs,
 * infinities, NaN), then 10,007 random floats of every magnitude through the
 * vector path against the scalar definition. */
static void test_to_bf16(void **state)
{
    (void)state;
    static const struct {
        uint32_t in;
        uint16_t out;
    } cases[] = {
        {0x3f800000u, 0x3f80}, /* 1.0 */
        {0x3f808000u, 0x3f80}, /* 1 + 2^-8: a tie, to even (down) */
        {0x3f818000u, 0x3f82}, /* a tie, to even (up) */
        {0x3f808001u, 0x3f81}, /* above the tie */
        {0x3f807fffu, 0x3f80}, /* below the tie */
        {0x3fffffffu, 0x4000}, /* carries into the exponent */
        {0xbf808001u, 0xbf81}, /* negative */
        {0x80000000u, 0x8000}, /* -0 */
        {0x7f800000u, 0x7f80}, /* +inf */
        {0xff800000u, 0xff80}, /* -inf */
        {0x7f7fffffu, 0x7f80}, /* the largest float rounds to inf */
        {0x00000001u, 0x0000}, /* the smallest denormal */
    };
    size_t nc = sizeof(cases) / sizeof(cases[0]);
    float in[32];
    uint16_t out[32];
    for (size_t i = 0; i < nc; i++)
        memcpy(&in[i], &cases[i].in, sizeof(float));
    tr_gemm_to_bf16(out, in, nc);
    for (size_t i = 0; i < nc; i++) {
        if (out[i] != cases[i].out)
            print_message("0x%08x -> 0x%04x, want 0x%04x\n", cases[i].in, out[i],
                          cases[i].out);
        assert_int_equal(out[i], cases[i].out);
    }
    uint32_t nan = 0x7fa00001u;     /* a signalling NaN stays a NaN (made quiet) */
    memcpy(&in[0], &nan, sizeof(float));
    tr_gemm_to_bf16(out, in, 1);
    assert_true(isnan(tr_gemm_bf16_to_float(out[0])));
    size_t n = 10007;
    float *x = ss_malloc(sizeof(float) * n);
    uint16_t *y = ss_malloc(sizeof(uint16_t) * n);
    uint64_t st = 5;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)ss_mix64(st + i);
        memcpy(&x[i], &u, sizeof(float));
    }
    tr_gemm_to_bf16(y, x, n);
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i]))
            assert_int_equal(y[i], s_ref_bf16(x[i]));
        else
            assert_true(isnan(tr_gemm_bf16_to_float(y[i])));
    ss_free(x);
    ss_free(y);
}

/* Denormal inputs: the AVX512_BF16 conversion takes them as zero, so a block
 * holding one must still round as the definition does (0x007fffff carries up
 * to the least normal bf16, 0x80400001 stays a negative denormal). One
 * denormal at every place of 96 values, among normal ones; and every
 * length up to 70 (the tails after whole blocks). */
static void test_to_bf16_denormals(void **state)
{
    (void)state;
    static const uint32_t den[] = {0x007fffffu, 0x80400001u, 0x00008000u, 0x00018000u};
    float x[96];
    uint16_t y[96];
    for (size_t d = 0; d < sizeof(den) / sizeof(den[0]); d++)
        for (size_t at = 0; at < 96; at++) {
            for (size_t i = 0; i < 96; i++)
                x[i] = 1.0f + (float)i / 64.0f;
            memcpy(&x[at], &den[d], sizeof(float));
            tr_gemm_to_bf16(y, x, 96);
            for (size_t i = 0; i < 96; i++)
                assert_int_equal(y[i], s_ref_bf16(x[i]));
        }
    assert_int_equal(s_ref_bf16(x[0]), 0x3f80);
    for (size_t n = 0; n <= 70; n++) {
        for (size_t i = 0; i < 96; i++) {
            uint32_t u = (uint32_t)ss_mix64(n * 131 + i);
            memcpy(&x[i], &u, sizeof(float));
            y[i] = 0xdead;
        }
        tr_gemm_to_bf16(y, x, n);
        for (size_t i = 0; i < n; i++)
            if (!isnan(x[i]))
                assert_int_equal(y[i], s_ref_bf16(x[i]));
        assert_int_equal(y[n], 0xdead);  /* nothing written past n */
    }
}

/* Many shapes through one context: more than its cache holds, so primitives are
 * replaced; every result stays right. */
static void test_cache_turnover(void **state)
{
    (void)state;
    enum tr_gemm_engine e = tr_gemm_engine_ok(TR_GEMM_DNNL_F32) ? TR_GEMM_DNNL_F32
                                                                : TR_GEMM_BLAS;
    tr_gemm_t *g = tr_gemm_new();
    for (uint32_t pass = 0; pass < 2; pass++)
        for (uint32_t m = 1; m <= 60; m++) {
            struct tr_gemm_op op = {m, 5, 3, (int)(m % 2), 0};
            struct case_ t;
            s_case_new(&t, &op, m);
            tr_gemm_run(g, e, &op, t.a, t.b, t.c);
            assert_true(s_worst(t.c, t.ref, t.abs_sum, t.n_c) <= TOL_F32);
            s_case_free(&t);
        }
    assert_int_equal(tr_gemm_fallbacks(g), 0);
    tr_gemm_destroy(&g);
}

/* A thread running the top layer's forward product 50 times on its own context. */
static void *s_thread(void *arg)
{
    enum tr_gemm_engine e = *(enum tr_gemm_engine *)arg;
    struct tr_gemm_op op = s_ops[5];
    struct case_ t;
    s_case_new(&t, &op, 77);
    tr_model_blas_single_thread();
    tr_gemm_t *g = tr_gemm_new();
    double worst = 0.0;
    for (int i = 0; i < 50; i++) {
        tr_gemm_run(g, e, &op, t.a, t.b, t.c);
        double w = s_worst(t.c, e == TR_GEMM_DNNL_BF16 ? t.ref16 : t.ref,
                           e == TR_GEMM_DNNL_BF16 ? t.abs16 : t.abs_sum, t.n_c);
        worst = w > worst ? w : worst;
    }
    tr_gemm_destroy(&g);
    s_case_free(&t);
    return worst <= TOL_F32 ? arg : NULL;
}

/* Two threads with their own contexts at once, on the best engine here. */
static void test_two_threads(void **state)
{
    (void)state;
    enum tr_gemm_engine e = tr_gemm_engine_ok(TR_GEMM_DNNL_BF16)  ? TR_GEMM_DNNL_BF16
                            : tr_gemm_engine_ok(TR_GEMM_DNNL_F32) ? TR_GEMM_DNNL_F32
                                                                  : TR_GEMM_BLAS;
    pthread_t th[2];
    void *ret[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, s_thread, &e), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_join(th[i], &ret[i]), 0);
        assert_ptr_equal(ret[i], &e);
    }
}

int main(void)
{
    tr_model_blas_single_thread();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isa_names),
        cmocka_unit_test(test_engines_follow_isa),
        cmocka_unit_test(test_to_bf16),
        cmocka_unit_test(test_to_bf16_denormals),
        cmocka_unit_test(test_kept_operands),
        cmocka_unit_test(test_blas),
        cmocka_unit_test(test_dnnl_f32),
        cmocka_unit_test(test_dnnl_bf16),
        cmocka_unit_test(test_cache_turnover),
        cmocka_unit_test(test_two_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
