/* model_bench.c - single-thread speed of the dense model's forward + backward.
 *
 * Default shape (dim 16, 13 dense, 26 sparse, bottom 13-64-16, top 367-64-1),
 * batch 128, one BLAS thread. Prints one JSON object: examples/s of forward +
 * backward (the figure of merit, target > 150k per core; also per second of
 * the thread's CPU time, steadier on a busy machine), of forward alone, of
 * forward + backward + the Hogwild SGD step, the same with the portable C
 * interaction kernels, forward + backward with the first-order terms
 * (model.first_order: rows of 17 floats) and its ratio to without, the
 * default job's whole dense step per CPU-second (first-order terms, forward,
 * backward and the Adagrad update: what docs/scaling.md charges a worker for
 * the model), and the achieved GFLOP/s. Then "paths": the same job step on
 * each way the dense math can run here, side by side in this run (portable C
 * with OpenBLAS; OpenBLAS with the AVX2/AVX-512 kernels, today's default before
 * oneDNN; the faster engine per product size, fp32; oneDNN for every product;
 * bf16 products), each with us of CPU per example of the whole step, its ratio
 * to the portable path, and its 11 products timed alone: us per example and
 * GFLOP/s against this core's fp32 FMA peak (measured at start by s_peak_gflops:
 * 217 on issue 20's Intel core, about 112 on the AMD EPYC core of 2026-12; bf16
 * dot products can go past it; 224-242 on the Intel Xeon (AMX) core of 2026-12-02). A path
 * this CPU cannot run falls back and says so in "runs". Then "interaction": the pairwise
 * interaction's forward and backward alone (ns of CPU per example, GFLOP/s, fraction of
 * peak), as what 26 fields add to a model with the smallest MLPs.
 * Usage: model_bench [--step-only] [seconds] (--step-only: the job step alone,
 * for a profiler). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ss_hash.h"
#include "ss_isa.h"
#include "ss_mem.h"
#include "ss_time.h"
#include "tr_blas.h"
#include "tr_hogwild.h"
#include "tr_model.h"

#define BENCH_BATCH 128u
#define BENCH_N_BATCHES 16u     /* distinct input batches, cycled */
#define BENCH_MAX_OPS (3 * 2 * TR_MODEL_MAX_MLP)

/* Inputs and buffers of one run. */
struct bench {
    tr_model_t *model;          /* the model under test */
    tr_model_ws_t *ws;          /* its scratch */
    float *w;                   /* parameter arena */
    float *grad_w;              /* gradient arena */
    float *acc;                 /* Adagrad accumulators */
    float *dense;               /* [N_BATCHES x B x 13] */
    size_t n_emb;               /* floats of emb per example: 26 x row_dim */
    float *emb;                 /* [N_BATCHES x B x n_emb] */
    float *labels;              /* [N_BATCHES x B] */
    float *grad_emb;            /* [B x n_emb] */
};

/* Fill x [n] with uniform values in [lo, hi). */
static void s_fill(float *x, size_t n, float lo, float hi, uint64_t *state)
{
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * ss_rand_unit(state);
}

/* Build the default model and random inputs; portable selects the C kernels,
 * first_order the first-order terms, precision and gemm how the products run. */
static void s_setup_path(struct bench *b, uint32_t portable, uint32_t first_order,
                         uint32_t precision, uint32_t gemm)
{
    struct tr_model_conf conf = {.n_dense = 13, .n_sparse = 26, .dim = 16, .n_bottom = 2,
                                 .bottom = {64, 16}, .n_top = 2, .top = {64, 1},
                                 .portable = portable, .first_order = first_order,
                                 .precision = precision, .gemm = gemm};
    char err[128];
    uint64_t st = 12345;
    b->model = tr_model_new(&conf, err, sizeof(err));
    if (!b->model) {
        fprintf(stderr, "model_bench: %s\n", err);
        exit(1);
    }
    size_t n = tr_model_n_params(b->model), n_emb = 26u * tr_model_row_dim(b->model);
    b->n_emb = n_emb;
    b->ws = tr_model_ws_new(b->model, BENCH_BATCH);
    b->w = ss_aligned_alloc(TR_MODEL_ALIGN, sizeof(float) * n);
    b->grad_w = ss_aligned_alloc(TR_MODEL_ALIGN, sizeof(float) * n);
    b->acc = ss_calloc(n, sizeof(float));
    b->dense = ss_malloc(sizeof(float) * BENCH_N_BATCHES * BENCH_BATCH * 13);
    b->emb = ss_malloc(sizeof(float) * BENCH_N_BATCHES * BENCH_BATCH * n_emb);
    b->labels = ss_malloc(sizeof(float) * BENCH_N_BATCHES * BENCH_BATCH);
    b->grad_emb = ss_malloc(sizeof(float) * BENCH_BATCH * n_emb);
    tr_model_init_params(b->model, b->w, 7);
    s_fill(b->dense, (size_t)BENCH_N_BATCHES * BENCH_BATCH * 13, 0.0f, 3.0f, &st);
    s_fill(b->emb, (size_t)BENCH_N_BATCHES * BENCH_BATCH * n_emb, -0.1f, 0.1f, &st);
    for (size_t i = 0; i < BENCH_N_BATCHES * BENCH_BATCH; i++)
        b->labels[i] = ss_rand_unit(&st) < 0.25f ? 1.0f : 0.0f;
}

/* s_setup_path with the default products (fp32, the faster engine per size). */
static void s_setup(struct bench *b, uint32_t portable, uint32_t first_order)
{
    s_setup_path(b, portable, first_order, TR_MODEL_PREC_FP32, TR_MODEL_GEMM_AUTO);
}

/* Free what s_setup made. */
static void s_teardown(struct bench *b)
{
    ss_free(b->w);
    ss_free(b->grad_w);
    ss_free(b->acc);
    ss_free(b->dense);
    ss_free(b->emb);
    ss_free(b->labels);
    ss_free(b->grad_emb);
    tr_model_ws_destroy(&b->ws);
    tr_model_destroy(&b->model);
}

/* Run batches for about seconds: mode 0 forward, 1 forward + backward, 2 plus
 * an SGD step, 3 plus an Adagrad step (the trainer's default). Returns examples
 * per wall-clock second; *cpu_rate (if not NULL) gets examples per second of
 * this thread's CPU time (steadier on a busy box). */
static double s_run(struct bench *b, int mode, double seconds, double *cpu_rate)
{
    size_t n = tr_model_n_params(b->model), n_emb = b->n_emb;
    uint64_t c0 = ss_thread_cpu_ns();
    uint64_t t0 = ss_now_ns(), end = t0 + (uint64_t)(seconds * 1e9), t = t0;
    uint64_t batches = 0;
    volatile float sink = 0.0f;
    while (t < end) {
        for (uint32_t k = 0; k < BENCH_N_BATCHES; k++) {
            size_t e = (size_t)k * BENCH_BATCH;
            sink += tr_model_forward(b->model, b->ws, b->w, BENCH_BATCH, b->dense + e * 13,
                                     b->emb + e * n_emb, b->labels + e, NULL);
            if (mode >= 1)
                tr_model_backward(b->model, b->ws, b->w, b->grad_w, b->grad_emb);
            if (mode == 2)
                tr_hogwild_sgd(b->w, b->grad_w, n, 0.01f, 0.0f);
            else if (mode == 3)
                tr_hogwild_adagrad(b->w, b->acc, b->grad_w, n, 0.01f, 1e-8f, 0.0f);
        }
        batches += BENCH_N_BATCHES;
        t = ss_now_ns();
    }
    (void)sink;
    if (cpu_rate)
        *cpu_rate = (double)batches * BENCH_BATCH / ((double)(ss_thread_cpu_ns() - c0) * 1e-9);
    return (double)batches * BENCH_BATCH / ((double)(t - t0) * 1e-9);
}

/* The products of one batch's forward and backward: 3 per layer (the first
 * layer's input gradient is not needed). Returns how many went into ops. */
static size_t s_products(const tr_model_t *m, uint32_t B, struct tr_gemm_op *ops)
{
    size_t n = 0;
    for (uint32_t k = 0; k < tr_model_n_layers(m); k++) {
        struct tr_model_layer_info l;
        tr_model_layer(m, k, &l);
        if (l.n_in == 0)
            continue;
        ops[n++] = (struct tr_gemm_op){B, l.n_out, l.n_in, 0, 1};     /* y = x W^T */
        ops[n++] = (struct tr_gemm_op){l.n_out, l.n_in, B, 1, 0};     /* gW = dy^T x */
        if (k > 0)
            ops[n++] = (struct tr_gemm_op){B, l.n_in, l.n_out, 0, 0}; /* dx = dy W */
    }
    return n;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define BENCH_FMA(k) a##k = _mm512_fmadd_ps(a##k, x, y);

/* GFLOP/s of this thread's CPU time in a loop of independent AVX-512 FMAs (12
 * chains, enough to fill the FMA pipes): the core's fp32 peak. */
__attribute__((target("avx512f"))) static double s_peak_avx512(void)
{
    __m512 x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(1e-7f);
    __m512 a0 = _mm512_set1_ps(0.f), a1 = _mm512_set1_ps(1.f), a2 = _mm512_set1_ps(2.f);
    __m512 a3 = _mm512_set1_ps(3.f), a4 = _mm512_set1_ps(4.f), a5 = _mm512_set1_ps(5.f);
    __m512 a6 = _mm512_set1_ps(6.f), a7 = _mm512_set1_ps(7.f), a8 = _mm512_set1_ps(8.f);
    __m512 a9 = _mm512_set1_ps(9.f), a10 = _mm512_set1_ps(10.f), a11 = _mm512_set1_ps(11.f);
    double best = 0.0;
    const long n = 2000000;
    for (int r = 0; r < 5; r++) {
        uint64_t c0 = ss_thread_cpu_ns();
        for (long i = 0; i < n; i++) {
            BENCH_FMA(0) BENCH_FMA(1) BENCH_FMA(2) BENCH_FMA(3) BENCH_FMA(4) BENCH_FMA(5)
            BENCH_FMA(6) BENCH_FMA(7) BENCH_FMA(8) BENCH_FMA(9) BENCH_FMA(10) BENCH_FMA(11)
        }
        double g = n * 12.0 * 32.0 / (double)(ss_thread_cpu_ns() - c0);
        best = g > best ? g : best;
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    return best;
}
#undef BENCH_FMA
#endif

/* The core's fp32 FMA peak in GFLOP/s, measured (0 where AVX-512 is not
 * there: then no fraction of peak is printed). */
static double s_peak_gflops(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (ss_isa_get() >= SS_ISA_AVX512)
        return s_peak_avx512();
#endif
    return 0.0;
}

/* Scratch big enough for every product of ops [n] (inputs random). */
struct bench_mats {
    float *x, *y, *z;
};

static void s_mats_new(struct bench_mats *mt, const struct tr_gemm_op *ops, size_t n)
{
    size_t big = 1;
    for (size_t i = 0; i < n; i++) {
        size_t a = (size_t)ops[i].m * ops[i].k, bsz = (size_t)ops[i].k * ops[i].n;
        size_t c = (size_t)ops[i].m * ops[i].n;
        big = a > big ? a : big;
        big = bsz > big ? bsz : big;
        big = c > big ? c : big;
    }
    mt->x = ss_calloc(big, sizeof(float));
    mt->y = ss_calloc(big, sizeof(float));
    mt->z = ss_calloc(big, sizeof(float));
    uint64_t st = 3;
    s_fill(mt->x, big, -1.0f, 1.0f, &st);
    s_fill(mt->y, big, -1.0f, 1.0f, &st);
}

static void s_mats_free(struct bench_mats *mt)
{
    ss_free(mt->x);
    ss_free(mt->y);
    ss_free(mt->z);
}

/* CPU seconds of one run of op on engine e (median of 5 rounds of reps runs). */
static double s_time_op(tr_gemm_t *g, enum tr_gemm_engine e, const struct tr_gemm_op *op,
                        const struct bench_mats *mt, int reps)
{
    double t[5];
    tr_gemm_run(g, e, op, mt->x, mt->y, mt->z);    /* make the primitive */
    for (int r = 0; r < 5; r++) {
        uint64_t c0 = ss_thread_cpu_ns();
        for (int k = 0; k < reps; k++)
            tr_gemm_run(g, e, op, mt->x, mt->y, mt->z);
        t[r] = (double)(ss_thread_cpu_ns() - c0) * 1e-9 / reps;
    }
    for (int a = 0; a < 5; a++)     /* sort for the median */
        for (int b2 = a + 1; b2 < 5; b2++)
            if (t[b2] < t[a]) {
                double tmp = t[a];
                t[a] = t[b2];
                t[b2] = tmp;
            }
    return t[2];
}

/* CPU seconds of one run of each product of m on its engine (median of 5
 * rounds of reps runs each); *flops gets the products' flops. */
static double s_time_products(const tr_model_t *m, double *flops)
{
    struct tr_gemm_op ops[BENCH_MAX_OPS];
    struct bench_mats mt;
    size_t n = s_products(m, BENCH_BATCH, ops);
    s_mats_new(&mt, ops, n);
    tr_gemm_t *g = tr_gemm_new();
    double total = 0.0;
    *flops = 0.0;
    for (size_t i = 0; i < n; i++) {
        total += s_time_op(g, tr_model_engine(m, &ops[i]), &ops[i], &mt, 200);
        *flops += 2.0 * ops[i].m * ops[i].n * ops[i].k;
    }
    tr_gemm_destroy(&g);
    s_mats_free(&mt);
    return total;
}

/* Print the "shapes" array: each of the default model's 11 products of one
 * batch timed alone on every fp32 engine and on bf16, in ns of CPU per example,
 * with the engine the default model (fp32, gemm auto) gives it. */
static void s_print_shapes(const tr_model_t *m)
{
    struct tr_gemm_op ops[BENCH_MAX_OPS];
    struct bench_mats mt;
    size_t n = s_products(m, BENCH_BATCH, ops);
    s_mats_new(&mt, ops, n);
    tr_gemm_t *g = tr_gemm_new();
    printf(", \"shapes\": [");
    for (size_t i = 0; i < n; i++) {
        const struct tr_gemm_op *op = &ops[i];
        double t[TR_GEMM_N_ENGINES];
        for (int e = 0; e < TR_GEMM_N_ENGINES; e++)
            t[e] = tr_gemm_engine_ok((enum tr_gemm_engine)e)
                       ? s_time_op(g, (enum tr_gemm_engine)e, op, &mt, 200) * 1e9 / BENCH_BATCH
                       : 0.0;
        printf("%s{\"m\": %u, \"n\": %u, \"k\": %u, \"ta\": %d, \"tb\": %d, "
               "\"ns_blas\": %.1f, \"ns_dnnl_f32\": %.1f, \"ns_dnnl_bf16\": %.1f, "
               "\"runs_on\": \"%s\"}", i ? ", " : "", op->m, op->n, op->k, op->trans_a,
               op->trans_b, t[TR_GEMM_BLAS], t[TR_GEMM_DNNL_F32], t[TR_GEMM_DNNL_BF16],
               tr_gemm_engine_name(tr_model_engine(m, op)));
    }
    printf("]");
    tr_gemm_destroy(&g);
    s_mats_free(&mt);
}

/* Min CPU ns per example of one forward (*fwd) and one backward (*bwd) of a
 * batch of a model of the default shape but n_sparse fields and the
 * smallest MLPs (bottom 13-16, top 1), over rounds: what the interaction
 * adds to them is the difference between 26 fields and none. */
static void s_time_small(uint32_t n_sparse, int rounds, double *fwd, double *bwd)
{
    struct tr_model_conf conf = {.n_dense = 13, .n_sparse = n_sparse, .dim = 16, .n_bottom = 1,
                                 .bottom = {16}, .n_top = 1, .top = {1}};
    tr_model_t *m = tr_model_new(&conf, NULL, 0);
    size_t n = tr_model_n_params(m), n_emb = (size_t)n_sparse * 16;
    tr_model_ws_t *ws = tr_model_ws_new(m, BENCH_BATCH);
    float *w = ss_aligned_alloc(TR_MODEL_ALIGN, sizeof(float) * n);
    float *g = ss_aligned_alloc(TR_MODEL_ALIGN, sizeof(float) * n);
    float *dense = ss_malloc(sizeof(float) * BENCH_BATCH * 13);
    float *emb = ss_malloc(sizeof(float) * (BENCH_BATCH * n_emb + 1));
    float *gemb = ss_malloc(sizeof(float) * (BENCH_BATCH * n_emb + 1));
    float labels[BENCH_BATCH];
    uint64_t st = 99;
    tr_model_init_params(m, w, 7);
    s_fill(dense, (size_t)BENCH_BATCH * 13, 0.0f, 3.0f, &st);
    s_fill(emb, BENCH_BATCH * n_emb, -0.1f, 0.1f, &st);
    for (uint32_t b = 0; b < BENCH_BATCH; b++)
        labels[b] = (float)(b % 4 == 0);
    *fwd = *bwd = 1e30;
    for (int r = 0; r < rounds; r++) {
        uint64_t t0 = ss_thread_cpu_ns();
        tr_model_forward(m, ws, w, BENCH_BATCH, dense, emb, labels, NULL);
        uint64_t t1 = ss_thread_cpu_ns();
        tr_model_backward(m, ws, w, g, gemb);
        uint64_t t2 = ss_thread_cpu_ns();
        double f = (double)(t1 - t0) / BENCH_BATCH, b = (double)(t2 - t1) / BENCH_BATCH;
        *fwd = f < *fwd ? f : *fwd;
        *bwd = b < *bwd ? b : *bwd;
    }
    ss_free(w);
    ss_free(g);
    ss_free(dense);
    ss_free(emb);
    ss_free(gemb);
    tr_model_ws_destroy(&ws);
    tr_model_destroy(&m);
}

/* Print "interaction": the pairwise interaction's forward and backward at
 * the default shape (26 fields and the bottom output, dim 16: 351 pairs)
 * in ns of CPU per example, min of interleaved rounds, and GFLOP/s against
 * the core's peak (forward 2 x 351 x 16 flops, backward twice that). */
static void s_print_interaction(double peak)
{
    double f26 = 1e30, b26 = 1e30, f0 = 1e30, b0 = 1e30;
    for (int k = 0; k < 5; k++) {  /* interleaved: a busy machine only slows */
        double f, b;
        s_time_small(26, 60, &f, &b);
        f26 = f < f26 ? f : f26;
        b26 = b < b26 ? b : b26;
        s_time_small(0, 60, &f, &b);
        f0 = f < f0 ? f : f0;
        b0 = b < b0 ? b : b0;
    }
    double fwd = f26 - f0, bwd = b26 - b0, flops = 2.0 * 351 * 16;
    printf(", \"interaction\": {\"fwd_ns_per_example\": %.1f, \"bwd_ns_per_example\": %.1f, "
           "\"fwd_gflops\": %.1f, \"bwd_gflops\": %.1f, \"fwd_of_peak\": %.2f, "
           "\"bwd_of_peak\": %.2f}",
           fwd, bwd, flops / fwd, 2 * flops / bwd, peak > 0 ? flops / fwd / peak : 0.0,
           peak > 0 ? 2 * flops / bwd / peak : 0.0);
}

/* One way the dense math runs (the "paths" of the output). */
struct path {
    const char *name;       /* as printed */
    uint32_t portable;      /* tr_model_conf.portable */
    uint32_t precision;     /* tr_model_conf.precision */
    uint32_t gemm;          /* tr_model_conf.gemm */
};

static const struct path s_paths[] = {
    {"portable", 1, TR_MODEL_PREC_FP32, TR_MODEL_GEMM_AUTO},
    {"blas", 0, TR_MODEL_PREC_FP32, TR_MODEL_GEMM_BLAS},
    {"fp32", 0, TR_MODEL_PREC_FP32, TR_MODEL_GEMM_AUTO},
    {"dnnl_all", 0, TR_MODEL_PREC_FP32, TR_MODEL_GEMM_DNNL},
    {"bf16", 0, TR_MODEL_PREC_BF16, TR_MODEL_GEMM_AUTO},
};
#define BENCH_N_PATHS (sizeof(s_paths) / sizeof(s_paths[0]))

/* Print the "paths" array: each path's job step (first-order terms, forward,
 * backward, Adagrad) in us of CPU per example, interleaved over 3 rounds (the
 * best of each kept, a busy machine only slows), and its products alone. */
static void s_print_paths(double seconds)
{
    struct bench b[BENCH_N_PATHS];
    double best[BENCH_N_PATHS] = {0};
    for (size_t p = 0; p < BENCH_N_PATHS; p++) {
        s_setup_path(&b[p], s_paths[p].portable, 1, s_paths[p].precision, s_paths[p].gemm);
        s_run(&b[p], 3, 0.05, NULL);
    }
    for (int round = 0; round < 3; round++)
        for (size_t p = 0; p < BENCH_N_PATHS; p++) {
            double rate;
            s_run(&b[p], 3, seconds / (3.0 * BENCH_N_PATHS), &rate);
            best[p] = rate > best[p] ? rate : best[p];
        }
    double peak = s_peak_gflops();
    printf(", \"peak_gflops\": %.0f, \"paths\": [", peak);
    for (size_t p = 0; p < BENCH_N_PATHS; p++) {
        char how[160];
        double flops, t = s_time_products(b[p].model, &flops);
        double us = 1e6 / best[p];
        tr_model_describe(b[p].model, how, sizeof how);
        printf("%s{\"path\": \"%s\", \"runs\": \"%s\", \"step_us_cpu_per_example\": %.3f, "
               "\"ratio_to_portable\": %.2f, \"products_us_per_example\": %.3f, "
               "\"products_gflops\": %.1f, \"products_of_peak\": %.2f}",
               p ? ", " : "", s_paths[p].name, how, us, (1e6 / best[0]) / us,
               t * 1e6 / BENCH_BATCH, flops / t * 1e-9, peak > 0 ? flops / t * 1e-9 / peak : 0.0);
    }
    printf("]");
    s_print_interaction(peak);
    for (size_t p = 0; p < BENCH_N_PATHS; p++)
        s_teardown(&b[p]);
}

/* --step-only: the default job's step alone for about seconds (a target for
 * perf record), printed as us of CPU per example. */
static int s_step_only(double seconds)
{
    struct bench bf;
    double job_cpu;
    s_setup(&bf, 0, 1);
    s_run(&bf, 3, 0.2, NULL);
    s_run(&bf, 3, seconds, &job_cpu);
    printf("{\"bench\": \"model_step\", \"step_us_cpu_per_example\": %.3f}\n", 1e6 / job_cpu);
    s_teardown(&bf);
    return 0;
}

int main(int argc, char **argv)
{
    int step_only = argc > 1 && strcmp(argv[1], "--step-only") == 0;
    if (step_only) {
        argc--;
        argv++;
    }
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    struct bench b, bp, bf;
    char blas[256];
    tr_blas_fix_core(argv);
    tr_blas_describe(blas, sizeof blas);
    if (seconds <= 0.0)
        seconds = 2.0;
    tr_model_blas_single_thread();
    if (step_only)
        return s_step_only(seconds);
    s_setup(&b, 0, 0);
    s_setup(&bp, 1, 0);
    s_setup(&bf, 0, 1);
    double fb_cpu;
    s_run(&b, 1, 0.2, NULL);    /* warm up caches, BLAS buffers and clocks */
    double fwd = s_run(&b, 0, seconds / 4, NULL);
    double fb = s_run(&b, 1, seconds, &fb_cpu);
    double step = s_run(&b, 2, seconds / 4, NULL);
    double fb_c = s_run(&bp, 1, seconds / 4, NULL);
    double fb_fo_cpu, fb_ref_cpu;   /* interleaved, CPU time: the ratio of a busy box */
    s_run(&b, 1, seconds / 4, &fb_ref_cpu);
    double fb_fo = s_run(&bf, 1, seconds / 4, &fb_fo_cpu);
    double job_cpu;             /* the default job's step: first-order, Adagrad */
    s_run(&bf, 3, seconds / 2, &job_cpu);
    double flops = tr_model_flops_per_example(b.model);
    printf("{\"bench\": \"model\", \"dim\": 16, \"bottom\": [13, 64, 16], \"top\": [367, 64, 1], "
           "\"batch\": %u, \"threads\": 1, \"simd\": %d, \"flops_per_example\": %.0f, "
           "\"fwd_bwd_examples_per_s\": %.0f, \"fwd_bwd_examples_per_cpu_s\": %.0f, "
           "\"fwd_examples_per_s\": %.0f, "
           "\"fwd_bwd_sgd_examples_per_s\": %.0f, \"fwd_bwd_portable_examples_per_s\": %.0f, "
           "\"fwd_bwd_first_order_examples_per_s\": %.0f, "
           "\"first_order_cpu_ratio\": %.3f, \"job_step_examples_per_cpu_s\": %.0f, "
           "\"fwd_bwd_gflops\": %.2f, \"target_examples_per_s\": 150000, "
           "\"ratio_to_target\": %.2f, \"blas\": \"%s\"",
           BENCH_BATCH, tr_model_uses_simd(b.model), flops, fb, fb_cpu, fwd, step, fb_c,
           fb_fo, fb_fo_cpu / fb_ref_cpu, job_cpu, fb * flops * 1e-9, fb / 150000.0, blas);
    s_print_paths(seconds);
    s_print_shapes(b.model);
    printf("}\n");
    s_teardown(&b);
    s_teardown(&bp);
    s_teardown(&bf);
    return 0;
}
