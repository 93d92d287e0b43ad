/* tr_blas.h - make OpenBLAS use this CPU's vector units.
 *
 * OpenBLAS built with DYNAMIC_ARCH picks its kernels from the CPU model number
 * when the library is loaded. A model it does not know (a new Xeon, or a
 * virtual machine that hides the model) falls back to "Prescott", SSE3
 * kernels that run the trainer's matrix products 2.5x slower than the AVX-512
 * ones on the same core. OpenBLAS reads OPENBLAS_CORETYPE only at load time,
 * so the fix has to happen before main() uses it: tr_blas_fix_core() sets the
 * variable from the CPU's feature flags and re-executes the program once.
 *
 * Not done when the user set OPENBLAS_CORETYPE (theirs wins), when
 * SS_BLAS_KEEP_CORE is set, or under valgrind (the re-executed program would
 * leave the tool). */
#ifndef TR_BLAS_H
#define TR_BLAS_H

#include <stddef.h>

/* Call first thing in main(), before any thread starts. If OpenBLAS runs
 * weaker kernels than the CPU supports, re-executes its own file with argv
 * and OPENBLAS_CORETYPE set (does not return on success). Returns otherwise;
 * a failed re-exec only costs speed (tr_blas_describe() says so). */
void tr_blas_fix_core(char **argv);

/* One line for the log: the OpenBLAS build, the kernels in use and why, e.g.
 * "OpenBLAS 0.3.21 kernels SkylakeX (set by shadow-trainer: detected Prescott)". */
void tr_blas_describe(char *buf, size_t len);

/* The best OPENBLAS_CORETYPE for this CPU's features ("SkylakeX", "Haswell")
 * or NULL when it has no AVX2. */
const char *tr_blas_best_core(void);

/* 1 if the kernels OpenBLAS uses now are at least as strong as best (NULL:
 * always 1). */
int tr_blas_core_ok(const char *corename, const char *best);

#endif
