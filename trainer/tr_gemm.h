/* tr_gemm.h - the dense step's matrix products on OpenBLAS or oneDNN, in fp32 or bf16.
 *
 * One product is C [m x n] = op(A) op(B), row-major with tight leading dimensions,
 * fp32 in and out. An engine runs it:
 *
 *   TR_GEMM_BLAS       cblas_sgemm (OpenBLAS): any CPU, fp32
 *   TR_GEMM_DNNL_F32   a oneDNN matmul in fp32 (AVX-512 kernels)
 *   TR_GEMM_DNNL_BF16  a oneDNN matmul with A and B rounded to bf16 (round to nearest
 *                      even) and fp32 accumulation and output: AMX tiles where
 *                      ss_isa_get() is SS_ISA_AMX, AVX512_BF16 dot products otherwise
 *
 * Which engine a product gets is the caller's choice (tr_model: by shape and
 * model.precision); tr_gemm_engine_ok() says which ones this process can run. A
 * oneDNN engine that cannot run a product (no primitive for it, or oneDNN not usable
 * at this ISA level) runs it on OpenBLAS instead, quietly, and counts it
 * (tr_gemm_fallbacks). oneDNN runs one thread per caller: every call of this module
 * sets the calling thread's OpenMP thread count to 1.
 *
 * Thread: a tr_gemm_t (its oneDNN engine, stream, primitives and bf16 scratch)
 * belongs to one thread at a time; different threads use different ones. */
#ifndef TR_GEMM_H
#define TR_GEMM_H

#include <stddef.h>
#include <stdint.h>

typedef struct tr_gemm tr_gemm_t;

/* The engines (see above). */
enum tr_gemm_engine {
    TR_GEMM_BLAS = 0,
    TR_GEMM_DNNL_F32 = 1,
    TR_GEMM_DNNL_BF16 = 2,
};
#define TR_GEMM_N_ENGINES 3

/* One product's shape: C [m x n] = op(A) op(B). */
struct tr_gemm_op {
    uint32_t m;         /* rows of C */
    uint32_t n;         /* columns of C */
    uint32_t k;         /* the inner dimension, >= 1 */
    int trans_a;        /* 0: A stored [m x k]; 1: A stored [k x m] (op = transpose) */
    int trans_b;        /* 0: B stored [k x n]; 1: B stored [n x k] (op = transpose) */
};

/* A context with no primitives yet (they are made on first use of each shape).
 * Caller owns it; free with tr_gemm_destroy(). Any thread. */
tr_gemm_t *tr_gemm_new(void);

/* Free the context and set *self_p to NULL; accepts NULL and *self_p NULL. */
void tr_gemm_destroy(tr_gemm_t **self_p);

/* C = op(A) op(B) on engine (see the file comment for fallbacks). a, b and c must
 * not overlap; c is overwritten (m x n floats). Thread: the context's owner. */
void tr_gemm_run(tr_gemm_t *self, enum tr_gemm_engine engine, const struct tr_gemm_op *op,
                 const float *a, const float *b, float *c);

/* Operand flags of tr_gemm_run_kept. */
#define TR_GEMM_KEEP_A 1u
#define TR_GEMM_KEEP_B 2u

/* tr_gemm_run, where the operands flagged in keep (TR_GEMM_KEEP_A, _B) stay
 * unchanged until the next tr_gemm_forget(): on the bf16 engine such an
 * operand is rounded once, by the first product that takes it kept, and
 * later kept products that take the same floats (the same address and
 * count, as A or as B) use that copy. The results are those of
 * tr_gemm_run. A layer's input is an operand of its forward product and of
 * its weight gradient's. Thread: the context's owner. */
void tr_gemm_run_kept(tr_gemm_t *self, enum tr_gemm_engine engine, const struct tr_gemm_op *op,
                      const float *a, const float *b, float *c, unsigned keep);

/* Drop the kept operands' copies (their memory stays for the next ones):
 * call it before the kept operands change. Thread: the context's owner. */
void tr_gemm_forget(tr_gemm_t *self);

/* Products a oneDNN engine handed to OpenBLAS so far (0 when all ran where asked). */
uint64_t tr_gemm_fallbacks(const tr_gemm_t *self);

/* 1 when this process can run engine: OpenBLAS always; oneDNN fp32 from
 * SS_ISA_AVX512 up; bf16 where ss_isa_has_bf16(). Thread-safe. */
int tr_gemm_engine_ok(enum tr_gemm_engine engine);

/* "blas", "dnnl-f32" or "dnnl-bf16". */
const char *tr_gemm_engine_name(enum tr_gemm_engine engine);

/* dst [n] = src rounded to bf16 (nearest even; NaN stays NaN). Any thread. */
void tr_gemm_to_bf16(uint16_t *dst, const float *src, size_t n);

/* The float a bf16 value stands for (exact). */
static inline float tr_gemm_bf16_to_float(uint16_t h)
{
    union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)h << 16};
    return v.f;
}

#endif
