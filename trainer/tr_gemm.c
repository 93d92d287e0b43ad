/* tr_gemm.c - matrix products on OpenBLAS or oneDNN matmul, fp32 or bf16 (see tr_gemm.h).
 *
 * DESIGN: a oneDNN matmul primitive is made for one shape (JIT code for the sizes,
 * strides and data types) and costs tens of microseconds to make even when
 * oneDNN's own cache has it, so each context keeps the primitives of the shapes it
 * ran (a dense step has 3 per layer, and a batch size or two) with their memory
 * objects; each call only points the memory objects at the caller's arrays and
 * executes. The transposes are strides of the memory descriptors, never copies.
 * For bf16 the inputs are rounded into the context's scratch (a few percent of the
 * product's time at the trainer's shapes) and oneDNN accumulates in fp32. The
 * scratchpad oneDNN needs (packed copies of A or B) is the context's, grown to
 * the largest primitive's need, instead of a malloc per run. A shape
 * oneDNN refuses is remembered as refused and runs on OpenBLAS from then on. */
#include "tr_gemm.h"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_isa.h"
#include "ss_mem.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TR_GEMM_HAVE_AVX512 1
#define TR_GEMM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#else
#define TR_GEMM_HAVE_AVX512 0
#endif

#define TR_GEMM_CACHE 48    /* primitives kept per context */
#define TR_GEMM_KEPT 8      /* kept operands' bf16 copies per context (more: not kept) */

/* One cached primitive. */
struct s_prim {
    struct tr_gemm_op op;       /* its shape */
    enum tr_gemm_engine engine; /* TR_GEMM_DNNL_F32 or TR_GEMM_DNNL_BF16 */
    int state;                  /* 0: empty slot, 1: ready, -1: refused (runs on BLAS) */
    dnnl_primitive_t prim;      /* the matmul (state 1) */
    dnnl_memory_t mem[4];       /* A, B, C and the scratchpad, no buffers of their own */
    size_t scratch_bytes;       /* the scratchpad the matmul needs (0: none) */
};

/* The bf16 copy of a kept operand (tr_gemm_run_kept). */
struct s_kept {
    const float *src;           /* the floats it is a copy of */
    size_t n;                   /* how many */
    uint16_t *bf;               /* the copy */
    size_t cap;                 /* elements bf holds */
};

struct tr_gemm {
    dnnl_engine_t engine;               /* oneDNN CPU engine, made on first use */
    dnnl_stream_t stream;               /* its stream */
    int dnnl_broken;                    /* 1: the engine could not be made: BLAS only */
    struct s_prim cache[TR_GEMM_CACHE]; /* the shapes run so far */
    uint32_t next;                      /* slot the next new shape replaces */
    uint16_t *a16;                      /* bf16 copy of A */
    uint16_t *b16;                      /* bf16 copy of B */
    void *scratch;                      /* oneDNN scratchpad, shared by the primitives */
    size_t scratch_cap;                 /* bytes scratch holds */
    size_t a16_cap;                     /* elements a16 holds */
    size_t b16_cap;                     /* elements b16 holds */
    uint64_t fallbacks;                 /* oneDNN products run on OpenBLAS */
    struct s_kept kept[TR_GEMM_KEPT];   /* the kept operands' copies (bf and cap stay
                                         * allocated after tr_gemm_forget) */
    uint32_t n_kept;                    /* copies valid since tr_gemm_forget */
};

static const char *const s_engine_names[TR_GEMM_N_ENGINES] = {"blas", "dnnl-f32",
                                                              "dnnl-bf16"};

const char *tr_gemm_engine_name(enum tr_gemm_engine engine)
{
    return (unsigned)engine < TR_GEMM_N_ENGINES ? s_engine_names[engine] : "unknown";
}

int tr_gemm_engine_ok(enum tr_gemm_engine engine)
{
    switch (engine) {
    case TR_GEMM_BLAS:
        return 1;
    case TR_GEMM_DNNL_F32:
        return ss_isa_get() >= SS_ISA_AVX512;
    case TR_GEMM_DNNL_BF16:
        return ss_isa_get() >= SS_ISA_AVX512 && ss_isa_has_bf16();
    }
    return 0;
}

tr_gemm_t *tr_gemm_new(void)
{
    return ss_calloc(1, sizeof(tr_gemm_t));
}

/* Free one cached primitive and empty its slot. */
static void s_prim_free(struct s_prim *p)
{
    if (p->state == 1) {
        for (int i = 0; i < 4; i++)
            dnnl_memory_destroy(p->mem[i]);
        dnnl_primitive_destroy(p->prim);
    }
    memset(p, 0, sizeof *p);
}

void tr_gemm_destroy(tr_gemm_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    tr_gemm_t *self = *self_p;
    for (int i = 0; i < TR_GEMM_CACHE; i++)
        s_prim_free(&self->cache[i]);
    if (self->stream)
        dnnl_stream_destroy(self->stream);
    if (self->engine)
        dnnl_engine_destroy(self->engine);
    ss_free(self->a16);
    ss_free(self->b16);
    for (int i = 0; i < TR_GEMM_KEPT; i++)
        ss_free(self->kept[i].bf);
    ss_free(self->scratch);
    ss_free(self);
    *self_p = NULL;
}

uint64_t tr_gemm_fallbacks(const tr_gemm_t *self)
{
    ss_assert(self);
    return self->fallbacks;
}

/* ---- fp32 -> bf16 ------------------------------------------------------------------ */

/* One float rounded to bf16, nearest even; a NaN stays a (quiet) NaN. */
static uint16_t s_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#if TR_GEMM_HAVE_AVX512
/* s_bf16 over 16 lanes at a time; the tail in C. */
TR_GEMM_AVX512 static void s_to_bf16_avx512(uint16_t *dst, const float *src, size_t n)
{
    const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff);
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i quiet = _mm512_set1_epi32(0x40);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i u = _mm512_loadu_si512((const void *)(src + i));
        __m512i hi = _mm512_srli_epi32(u, 16);
        __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(hi, one)));
        r = _mm512_srli_epi32(r, 16);
        __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
        r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, quiet));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(r));
    }
    for (; i < n; i++)
        dst[i] = s_bf16(src[i]);
}

/* s_bf16 over 32 lanes at a time with VCVTNE2PS2BF16 (AVX512_BF16), which rounds
 * to nearest even and quiets a NaN as s_bf16 does, but takes a denormal input
 * as zero. So a block of 32 with a nonzero denormal (exponent 0, fraction not
 * 0; rare in a product's inputs) goes through s_to_bf16_avx512 instead: the
 * result is s_bf16's bit for bit. One instruction per 32 values against about
 * ten per 16. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void
s_to_bf16_cvt(uint16_t *dst, const float *src, size_t n)
{
    const __m512i expo = _mm512_set1_epi32(0x7f800000), frac = _mm512_set1_epi32(0x007fffff);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i lo = _mm512_loadu_si512((const void *)(src + i));
        __m512i hi = _mm512_loadu_si512((const void *)(src + i + 16));
        __mmask16 dlo = _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(lo, expo), lo, frac);
        __mmask16 dhi = _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(hi, expo), hi, frac);
        if (__builtin_expect((dlo | dhi) != 0, 0)) {
            s_to_bf16_avx512(dst + i, src + i, 32);
            continue;
        }
        __m512bh r = _mm512_cvtne2ps_pbh(_mm512_castsi512_ps(hi), _mm512_castsi512_ps(lo));
        _mm512_storeu_si512((void *)(dst + i), (__m512i)r);
    }
    s_to_bf16_avx512(dst + i, src + i, n - i);
}
#endif

void tr_gemm_to_bf16(uint16_t *dst, const float *src, size_t n)
{
#if TR_GEMM_HAVE_AVX512
    if (ss_isa_has_avx512_bf16()) {
        s_to_bf16_cvt(dst, src, n);
        return;
    }
    if (ss_isa_get() >= SS_ISA_AVX512) {
        s_to_bf16_avx512(dst, src, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i] = s_bf16(src[i]);
}

/* Grow *buf to hold n bf16 values (contents not kept). */
static uint16_t *s_reserve(uint16_t **buf, size_t *cap, size_t n)
{
    if (n > *cap) {
        ss_free(*buf);
        *cap = n + n / 4;
        *buf = ss_aligned_alloc(64, *cap * sizeof(uint16_t));
    }
    return *buf;
}

/* src [n] in bf16: a kept copy when keep (made now if it is new and there is
 * room), else rounded into *scratch. */
static const uint16_t *s_bf16_of(tr_gemm_t *self, const float *src, size_t n, int keep,
                                 uint16_t **scratch, size_t *cap)
{
    if (keep) {
        for (uint32_t i = 0; i < self->n_kept; i++)
            if (self->kept[i].src == src && self->kept[i].n == n)
                return self->kept[i].bf;
        if (self->n_kept < TR_GEMM_KEPT) {
            struct s_kept *k = &self->kept[self->n_kept++];
            s_reserve(&k->bf, &k->cap, n);
            tr_gemm_to_bf16(k->bf, src, n);
            k->src = src;
            k->n = n;
            return k->bf;
        }
    }
    uint16_t *bf = s_reserve(scratch, cap, n);
    tr_gemm_to_bf16(bf, src, n);
    return bf;
}

void tr_gemm_forget(tr_gemm_t *self)
{
    ss_assert(self);
    self->n_kept = 0;
}

/* ---- oneDNN ------------------------------------------------------------------------ */

/* Make the oneDNN engine and stream once; cap oneDNN's ISA at ours (SS_ISA=avx512
 * on an AMX machine keeps it off the tiles). Returns 0, or -1 (BLAS from then on). */
static int s_dnnl_start(tr_gemm_t *self)
{
    if (self->engine)
        return 0;
    if (self->dnnl_broken)
        return -1;
    /* process-wide and only before oneDNN's first primitive; later calls fail
     * harmlessly with the same cap */
    (void)dnnl_set_max_cpu_isa(ss_isa_get() >= SS_ISA_AMX ? dnnl_cpu_isa_all
                                                          : dnnl_cpu_isa_avx512_core_bf16);
    /* no VTune hook for the JIT code: it dlopen()s a profiler library on the first
     * primitive, which ThreadSanitizer's library list does not survive */
    (void)dnnl_set_jit_profiling_flags(0);
    if (dnnl_engine_create(&self->engine, dnnl_cpu, 0) != dnnl_success) {
        self->engine = NULL;
        self->dnnl_broken = 1;
        return -1;
    }
    if (dnnl_stream_create(&self->stream, self->engine, dnnl_stream_default_flags) !=
        dnnl_success) {
        dnnl_engine_destroy(self->engine);
        self->engine = NULL;
        self->stream = NULL;
        self->dnnl_broken = 1;
        return -1;
    }
    return 0;
}

/* Make the memory objects of p for the descriptors mds (A, B, C, scratchpad).
 * Returns 0, or -1 with none left. */
static int s_prim_mems(tr_gemm_t *self, struct s_prim *p, const dnnl_memory_desc_t **mds)
{
    for (int i = 0; i < 4; i++)
        if (dnnl_memory_create(&p->mem[i], mds[i], self->engine, DNNL_MEMORY_NONE) !=
            dnnl_success) {
            while (i-- > 0)
                dnnl_memory_destroy(p->mem[i]);
            return -1;
        }
    return 0;
}

/* Make the matmul of p->op in p->engine's data type into p, with a scratchpad
 * the caller gives (oneDNN would otherwise allocate one on every run). Returns 0
 * or -1. */
static int s_prim_make(tr_gemm_t *self, struct s_prim *p)
{
    const struct tr_gemm_op *op = &p->op;
    dnnl_data_type_t dt = p->engine == TR_GEMM_DNNL_BF16 ? dnnl_bf16 : dnnl_f32;
    dnnl_dims_t da = {op->m, op->k}, db = {op->k, op->n}, dc = {op->m, op->n};
    dnnl_dims_t sa = {op->trans_a ? 1 : op->k, op->trans_a ? op->m : 1};
    dnnl_dims_t sb = {op->trans_b ? 1 : op->n, op->trans_b ? op->k : 1};
    dnnl_memory_desc_t a, b, c;
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    int rc = -1;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success) {
        attr = NULL;
        goto out;
    }
    if (dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) !=
            dnnl_success ||
        dnnl_memory_desc_init_by_strides(&a, 2, da, dt, sa) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&b, 2, db, dt, sb) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&c, 2, dc, dnnl_f32, dnnl_ab) != dnnl_success ||
        dnnl_matmul_desc_init(&md, &a, &b, NULL, &c) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &md, attr, self->engine, NULL) != dnnl_success) {
        pd = NULL;
        goto out;
    }
    const dnnl_memory_desc_t *mds[4] = {&a, &b, &c,
                                        dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md,
                                                                     0)};
    if (!mds[3] || dnnl_primitive_create(&p->prim, pd) != dnnl_success)
        goto out;
    if (s_prim_mems(self, p, mds) != 0) {
        dnnl_primitive_destroy(p->prim);
        goto out;
    }
    p->scratch_bytes = dnnl_memory_desc_get_size(mds[3]);
    rc = 0;
out:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* The cached primitive of (engine, op), made now when new; NULL when oneDNN
 * cannot run it (remembered). */
static struct s_prim *s_prim_get(tr_gemm_t *self, enum tr_gemm_engine engine,
                                 const struct tr_gemm_op *op)
{
    for (int i = 0; i < TR_GEMM_CACHE; i++) {
        struct s_prim *p = &self->cache[i];
        if (p->state && p->engine == engine && memcmp(&p->op, op, sizeof *op) == 0)
            return p->state == 1 ? p : NULL;
    }
    if (s_dnnl_start(self) != 0)
        return NULL;
    struct s_prim *p = &self->cache[self->next];
    self->next = (self->next + 1) % TR_GEMM_CACHE;
    s_prim_free(p);
    p->op = *op;
    p->engine = engine;
    p->state = s_prim_make(self, p) == 0 ? 1 : -1;
    return p->state == 1 ? p : NULL;
}

/* Run op on p with A and B at a and b (fp32 or bf16 as p was made) into c.
 * Returns 0 or -1. */
static int s_dnnl_exec(tr_gemm_t *self, struct s_prim *p, const void *a, const void *b,
                       float *c)
{
    if (p->scratch_bytes > self->scratch_cap) {
        ss_free(self->scratch);
        self->scratch_cap = p->scratch_bytes;
        self->scratch = ss_aligned_alloc(64, self->scratch_cap);
    }
    const void *ptr[4] = {a, b, c, self->scratch};
    for (int i = 0; i < 4; i++)
        if (dnnl_memory_set_data_handle(p->mem[i], (void *)ptr[i]) != dnnl_success)
            return -1;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, p->mem[0]}, {DNNL_ARG_WEIGHTS, p->mem[1]},
                               {DNNL_ARG_DST, p->mem[2]}, {DNNL_ARG_SCRATCHPAD, p->mem[3]}};
    return dnnl_primitive_execute(p->prim, self->stream, p->scratch_bytes ? 4 : 3, args) ==
                   dnnl_success ? 0 : -1;
}

/* op on OpenBLAS. */
static void s_blas(const struct tr_gemm_op *op, const float *a, const float *b, float *c)
{
    cblas_sgemm(CblasRowMajor, op->trans_a ? CblasTrans : CblasNoTrans,
                op->trans_b ? CblasTrans : CblasNoTrans, (int)op->m, (int)op->n, (int)op->k,
                1.0f, a, op->trans_a ? (int)op->m : (int)op->k, b,
                op->trans_b ? (int)op->k : (int)op->n, 0.0f, c, (int)op->n);
}

/* op on oneDNN in engine's type. Returns 0, or -1 when it did not run. */
static int s_dnnl(tr_gemm_t *self, enum tr_gemm_engine engine, const struct tr_gemm_op *op,
                  const float *a, const float *b, float *c, unsigned keep)
{
    omp_set_num_threads(1);     /* this thread's oneDNN runs no OpenMP team */
    struct s_prim *p = s_prim_get(self, engine, op);
    if (!p)
        return -1;
    if (engine == TR_GEMM_DNNL_F32)
        return s_dnnl_exec(self, p, a, b, c);
    size_t na = (size_t)op->m * op->k, nb = (size_t)op->k * op->n;
    const uint16_t *a16 = s_bf16_of(self, a, na, keep & TR_GEMM_KEEP_A, &self->a16,
                                    &self->a16_cap);
    const uint16_t *b16 = s_bf16_of(self, b, nb, keep & TR_GEMM_KEEP_B, &self->b16,
                                    &self->b16_cap);
    return s_dnnl_exec(self, p, a16, b16, c);
}

void tr_gemm_run(tr_gemm_t *self, enum tr_gemm_engine engine, const struct tr_gemm_op *op,
                 const float *a, const float *b, float *c)
{
    tr_gemm_run_kept(self, engine, op, a, b, c, 0);
}

void tr_gemm_run_kept(tr_gemm_t *self, enum tr_gemm_engine engine, const struct tr_gemm_op *op,
                      const float *a, const float *b, float *c, unsigned keep)
{
    ss_assert(self && op && a && b && c && op->k >= 1);
    if (op->m == 0 || op->n == 0)
        return;
    if (engine != TR_GEMM_BLAS) {
        if (tr_gemm_engine_ok(engine) && s_dnnl(self, engine, op, a, b, c, keep) == 0)
            return;
        self->fallbacks++;
    }
    s_blas(op, a, b, c);
}
