/* tr_model.h - the dense part of the DLRM-style CTR model: forward, backward, init.
 *
 * Per example the model takes n_dense floats (already preprocessed) and n_sparse
 * embedding vectors of dim floats (already looked up and pooled, one per
 * categorical field):
 *
 *   bottom MLP   h = relu(W_b[nb-1] ... relu(W_b[0] dense + b) ... + b)   (dim floats)
 *   interaction  z_0 = h, z_1..z_n_sparse = the embeddings (n_vec = 1 + n_sparse);
 *                t = [h, z_i . z_j for every pair i < j]   (dim + n_pairs floats)
 *                pairs in row-major order: (0,1) (0,2) .. (0,n) (1,2) .. (n-1,n)
 *   top MLP      logit = W_t[nt-1] relu(... relu(W_t[0] t + b) ...) + b  (1 float)
 *   first order  (conf.first_order only) logit += sum_f u_f + v . dense, where u_f
 *                is field f's first-order weight (the last float of its input row)
 *                and v the n_dense linear weights; the top MLP's last bias is the
 *                global bias. This is the "wide" logistic-regression part.
 *   loss         p = sigmoid(logit), mean binary cross-entropy over the batch
 *
 * ReLU follows every bottom layer and every top layer but the last.
 *
 * Embedding input rows are row_dim = dim + first_order floats wide: the dim
 * floats of the vector, then (with first_order) the 1-dim first-order weight,
 * exactly as the embedding PSs store a row. Gradients come back in the same
 * layout.
 *
 * Parameter arena: ALL dense parameters live in one flat float array owned by
 * the caller (64-byte aligned, tr_model_n_params() floats). Layer k (bottom layers
 * first, then top) holds its weights W [n_out x n_in] row-major (y = W x) followed
 * by its bias [n_out]; layers follow each other without padding. With first_order,
 * the n_dense linear weights v follow the last top layer. The model object
 * holds only shapes and offsets, so the same model runs on any replica, snapshot
 * or gradient buffer (a gradient has the arena's layout).
 *
 * Dense layers run batched as matrix products (tr_gemm: OpenBLAS, or oneDNN where
 * ss_isa_get() is SS_ISA_AVX512 or better; call tr_model_blas_single_thread() once
 * in each thread that runs the model, so that it runs one BLAS and one oneDNN
 * thread). With conf.gemm TR_MODEL_GEMM_AUTO each product goes to the engine that
 * was faster for its size here (docs/dense-math.md): oneDNN for the large ones,
 * OpenBLAS for the small ones. conf.precision TR_MODEL_PREC_BF16 rounds the
 * inputs of the large products to bf16 (fp32 accumulation, AMX or AVX512_BF16);
 * everything else (parameters, gradients, the optimizer) stays fp32. Where the CPU
 * or SS_ISA does not allow a choice the model falls back quietly (bf16 to fp32,
 * oneDNN to OpenBLAS) and tr_model_describe() says what runs. Bias, ReLU and the
 * pairwise interaction use AVX2+FMA kernels when the CPU has them (the
 * interaction when dim is a multiple of 8 too; AVX-512 for dim 16 and 32),
 * portable C otherwise or when SS_ISA=portable.
 *
 * Thread: a tr_model_t is immutable after tr_model_new and shared by all threads.
 * A tr_model_ws_t (scratch for one batch) belongs to one thread at a time. */
#ifndef TR_MODEL_H
#define TR_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "tr_gemm.h"

#define TR_MODEL_MAX_MLP 16         /* most layers per MLP (bottom or top) */
#define TR_MODEL_MAX_WIDTH 65536u   /* widest layer */
#define TR_MODEL_MAX_DIM 4096u      /* largest embedding dim */
#define TR_MODEL_MAX_SPARSE 1024u   /* most categorical fields */
#define TR_MODEL_MAX_DENSE 4096u    /* most dense features */
#define TR_MODEL_ALIGN 64           /* required alignment of the arena, bytes */

typedef struct tr_model tr_model_t;       /* shape and offsets only, immutable, shared */
typedef struct tr_model_ws tr_model_ws_t; /* per-thread scratch for one batch */

/* Shape of the model. */
struct tr_model_conf {
    uint32_t n_dense;                   /* dense features per example (13); 0: the first
                                         * bottom layer has no input and gives relu(b),
                                         * a learned constant */
    uint32_t n_sparse;                  /* categorical fields per example (26) */
    uint32_t dim;                       /* embedding dim */
    uint32_t n_bottom;                  /* bottom MLP layers, 1..TR_MODEL_MAX_MLP */
    uint32_t bottom[TR_MODEL_MAX_MLP];  /* bottom widths, bottom[n_bottom-1] == dim */
    uint32_t n_top;                     /* top MLP layers, 1..TR_MODEL_MAX_MLP */
    uint32_t top[TR_MODEL_MAX_MLP];     /* top widths, top[n_top-1] == 1 */
    uint32_t portable;                  /* 1: portable C kernels only (tests); 0: SIMD
                                         * kernels where the CPU has them */
    uint32_t first_order;               /* 1: first-order terms in the logit (0 or 1) */
    /* How the products run, not the shape (checkpoints do not depend on them): */
    uint32_t precision;                 /* TR_MODEL_PREC_FP32 (0), _BF16 or _AUTO */
    uint32_t gemm;                      /* TR_MODEL_GEMM_AUTO (0): the faster engine per
                                         * product size; _BLAS or _DNNL: every product
                                         * on that one (tests, benchmarks) */
};

/* conf.precision: the number format of the dense layers' products. */
#define TR_MODEL_PREC_FP32 0u   /* fp32 everywhere */
#define TR_MODEL_PREC_BF16 1u   /* bf16 inputs, fp32 accumulation, where the CPU has it */
#define TR_MODEL_PREC_AUTO 2u   /* the measured choice (fp32 now: docs/dense-math.md) */

/* conf.gemm: which library runs the products. */
#define TR_MODEL_GEMM_AUTO 0u   /* oneDNN above TR_MODEL_DNNL_MIN_MACS, OpenBLAS below */
#define TR_MODEL_GEMM_BLAS 1u   /* OpenBLAS only (fp32) */
#define TR_MODEL_GEMM_DNNL 2u   /* oneDNN for every product it can run */

/* Multiply-adds from which a product runs on oneDNN under TR_MODEL_GEMM_AUTO, in
 * fp32 and in bf16 (measured on an AVX-512 core with AVX512_BF16: oneDNN is 15-20% faster
 * than OpenBLAS at 128 x 64 x 367, slower for the narrow ones; bf16 wins from
 * 128 x 16 x 64 up and loses on the 1-wide products of the last layer). */
#define TR_MODEL_DNNL_MIN_MACS (1u << 20)
#define TR_MODEL_BF16_MIN_MACS (1u << 17)

/* One layer's place in the arena (tr_model_layer). */
struct tr_model_layer_info {
    uint32_t n_in;      /* input width */
    uint32_t n_out;     /* output width */
    size_t w_off;       /* first float of W [n_out x n_in], row-major */
    size_t b_off;       /* first float of the bias [n_out] (w_off + n_out * n_in) */
    int relu;           /* 1 when a ReLU follows the layer */
};

/* Build a model of the given shape (copied). Returns the model, or NULL with an
 * explanation in err (if err is not NULL) when the shape is invalid, e.g.
 * "bottom[1] = 32 must equal dim = 16". Caller owns the result; free it with
 * tr_model_destroy(). Any thread. */
tr_model_t *tr_model_new(const struct tr_model_conf *conf, char *err, size_t err_len);

/* Free the model and set *self_p to NULL; accepts NULL and *self_p NULL. Only
 * once no thread uses it any more. */
void tr_model_destroy(tr_model_t **self_p);

/* Number of floats in the parameter arena (and in a gradient). Any thread. */
size_t tr_model_n_params(const tr_model_t *self);

/* The shape the model was built with (borrowed, valid while the model lives). */
const struct tr_model_conf *tr_model_conf(const tr_model_t *self);

/* Floats of one embedding input row: dim + first_order. Any thread. */
uint32_t tr_model_row_dim(const tr_model_t *self);

/* First float of the dense linear weights v [n_dense] in the arena, or
 * SIZE_MAX without first_order. Any thread. */
size_t tr_model_linear_off(const tr_model_t *self);

/* Floats of the top MLP's input per example: dim + n_pairs. */
uint32_t tr_model_top_in(const tr_model_t *self);

/* Number of layers: n_bottom + n_top. */
uint32_t tr_model_n_layers(const tr_model_t *self);

/* Describe layer index (0..n_layers-1, bottom layers first) into *info.
 * Returns 0, or SS_E_RANGE when index is out of range. Any thread. */
int tr_model_layer(const tr_model_t *self, uint32_t index, struct tr_model_layer_info *info);

/* Named components of the arena for per-component sync: "bottom" (the bottom MLP)
 * and "top" (the top MLP, plus the linear weights with first_order: both act on
 * the logit) cover the arena exactly, in that order. Writes the
 * first float and the count into *offset and *len. Returns 0, or SS_E_NOTFOUND
 * for another name. Any thread. */
int tr_model_component(const tr_model_t *self, const char *name, size_t *offset, size_t *len);

/* Deterministic init of the arena w (tr_model_n_params floats): weights uniform
 * in +-sqrt(6 / n_in) (He) for layers followed by a ReLU and +-sqrt(6 / (n_in +
 * n_out)) (Xavier) for the last layer, biases and linear weights 0. Each layer
 * draws from its own splitmix64 stream seeded from (seed, layer index): the same
 * seed gives the same bits on every machine. Any thread; writes w only. */
void tr_model_init_params(const tr_model_t *self, float *w, uint64_t seed);

/* Scratch for batches of up to max_batch (>= 1) examples: activations of the last
 * forward, kept for the backward. Caller owns it; free with tr_model_ws_destroy().
 * The model must outlive it. */
tr_model_ws_t *tr_model_ws_new(const tr_model_t *self, uint32_t max_batch);

/* Free the scratch and set *ws_p to NULL; accepts NULL and *ws_p NULL. */
void tr_model_ws_destroy(tr_model_ws_t **ws_p);

/* Forward for B (1..max_batch) examples: dense [B * n_dense], emb [B * n_sparse *
 * row_dim] (example-major, field-major inside), labels [B] (0/1; may be NULL, then the
 * result is 0 and no backward may follow). Writes sigmoid(logit) into probs_out [B]
 * when it is not NULL. Returns the mean binary cross-entropy, computed stably as
 * max(z, 0) - z * y + log1p(exp(-|z|)). Copies what the backward needs into ws:
 * the inputs may change after the call. w is only read; other Hogwild threads may
 * change it concurrently (by design). Thread: the owner of ws. */
float tr_model_forward(const tr_model_t *self, tr_model_ws_t *ws, const float *w, uint32_t B,
                       const float *dense, const float *emb, const float *labels,
                       float *probs_out);

/* tr_model_forward without the loss: the same probabilities and the same state
 * for the backward, bit for bit, but no log1p per example (a training worker
 * reports its loss from the probabilities). Thread: the owner of ws. */
void tr_model_forward_probs(const tr_model_t *self, tr_model_ws_t *ws, const float *w,
                            uint32_t B, const float *dense, const float *emb,
                            const float *labels, float *probs_out);

/* tr_model_forward_probs with each embedding row where it lies: rows
 * [B * n_sparse], example b's field f at rows[b * n_sparse + f] (row_dim
 * floats: the vector, then any first-order weight), read during the call
 * only (the backward does not read them). The same probabilities and state
 * for the backward, bit for bit, as tr_model_forward_probs on the rows copied
 * into emb. Thread: the owner of ws. */
void tr_model_forward_rows(const tr_model_t *self, tr_model_ws_t *ws, const float *w,
                           uint32_t B, const float *dense, const float *const *rows,
                           const float *labels, float *probs_out);

/* Scratch of C rows for tr_model_score_chunks(): dense [C * max(n_dense, 1)],
 * emb [C * n_sparse * row_dim], probs [C], labels [C] (NULL when no labels
 * are scored). Owned by the caller. */
struct tr_model_pad {
    float *dense, *emb, *labels, *probs;
};

/* Score n rows (dense [n * n_dense], emb [n * n_sparse * row_dim], labels [n]
 * or NULL) into probs_out [n] by forwards of exactly C rows (C <= the ws's
 * rows), the last chunk padded with zero rows in pad (their outputs unused).
 * Products of one row count make a row's prediction depend on the row and the
 * model alone, not on where a batch cut the input: the trainer's eval and
 * predict and the model-file scorer all score this way, so they agree bit
 * for bit. w must not change during the call: its bf16 copy for the products
 * is made once, for every chunk. No loss is computed. Thread: the owner of ws
 * and pad. */
void tr_model_score_chunks(const tr_model_t *self, tr_model_ws_t *ws, const float *w, uint32_t C,
                           uint32_t n, const float *dense, const float *emb, const float *labels,
                           float *probs_out, const struct tr_model_pad *pad);

/* tr_model_score_chunks with each embedding row where it lies: rows
 * [n * n_sparse] as tr_model_forward_rows takes them. The same
 * probabilities, bit for bit. Thread: the owner of ws and pad. */
void tr_model_score_rows(const tr_model_t *self, tr_model_ws_t *ws, const float *w, uint32_t C,
                         uint32_t n, const float *dense, const float *const *rows,
                         const float *labels, float *probs_out, const struct tr_model_pad *pad);

/* Backward of the last forward on ws (which must have had labels), with the same
 * w. Overwrites grad_w (tr_model_n_params floats, the arena's layout) with the
 * gradient of the MEAN loss w.r.t. every parameter, and grad_emb [B * n_sparse *
 * row_dim] (may be NULL when not wanted) with the gradient of the mean loss w.r.t.
 * each input embedding row (first-order weight included). Thread: the owner of
 * ws. */
void tr_model_backward(const tr_model_t *self, tr_model_ws_t *ws, const float *w, float *grad_w,
                       float *grad_emb);

/* Approximate floating-point operations per example of one forward plus backward
 * (2 per multiply-add of the dense layers and of the interaction), for reports. */
double tr_model_flops_per_example(const tr_model_t *self);

/* 1 when the model runs AVX2+FMA kernels (elementwise ones always, the
 * interaction when dim % 8 == 0), 0 when portable C only. */
int tr_model_uses_simd(const tr_model_t *self);

/* 1 when the products of the model's large layers run in bf16 (conf.precision
 * BF16 or AUTO resolved to bf16, and the CPU has bf16), 0 when in fp32. */
int tr_model_bf16(const tr_model_t *self);

/* One line saying how the dense step runs, for the log, e.g. "isa avx512, interaction
 * avx512, products fp32: dnnl-f32 from 1048576 multiply-adds, blas below". */
void tr_model_describe(const tr_model_t *self, char *buf, size_t len);

/* The engine the model runs a product of shape op on (see conf.gemm), e.g. for
 * benchmarks that time the products alone. Any thread. */
enum tr_gemm_engine tr_model_engine(const tr_model_t *self, const struct tr_gemm_op *op);

/* Products handed from oneDNN to OpenBLAS so far on ws (0 normally). */
uint64_t tr_model_ws_fallbacks(const tr_model_ws_t *ws);

/* Make OpenBLAS run every call on the calling thread only (one BLAS thread per
 * worker thread; workers are the parallelism), and oneDNN (OpenMP) in the
 * calling thread. Call at start-up, before the worker threads start, and in
 * each thread that runs the model. */
void tr_model_blas_single_thread(void);

/* tr_model_blas_single_thread(), then end the thread pool that OpenBLAS's
 * pthread build starts when it is loaded (one thread per further core, which
 * spins in sched_yield() for a while before it sleeps, and is never given
 * work here): none is started again, as no call asks for more than one
 * thread. Does nothing more with an OpenBLAS that has no such pool. Call in
 * main() before any other thread starts. Thread: the main thread. */
void tr_model_blas_no_pool(void);

#endif
