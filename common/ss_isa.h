/* ss_isa.h - which vector instructions this process may use, decided once.
 *
 * The dense step (trainer/tr_model, tr_gemm), the Criteo parser and the PS row
 * work pick their kernels from one answer: the best of three levels that the CPU has, that the
 * kernel lets the process use, and that the SS_ISA environment variable allows.
 *
 *   SS_ISA_PORTABLE  plain C (and whatever OpenBLAS picks for itself)
 *   SS_ISA_AVX512    AVX-512 F, BW, VL and DQ with the ZMM state saved by the OS
 *   SS_ISA_AMX       AVX512 plus AMX-TILE and AMX-BF16, with the tile data
 *                    granted to this process (arch_prctl ARCH_REQ_XCOMP_PERM)
 *
 * SS_ISA=portable|avx512|amx caps the level (a CPU without AMX or AVX-512 is
 * tested on one that has them); it never raises it. An unknown value is
 * ignored with one warning (SS_LOG) naming it. Linux x86-64 only; elsewhere
 * the level is SS_ISA_PORTABLE. */
#ifndef SS_ISA_H
#define SS_ISA_H

enum ss_isa {
    SS_ISA_PORTABLE = 0,    /* no AVX-512 (AVX2 may still be there: ss_isa_has_avx2) */
    SS_ISA_AVX512 = 1,      /* AVX-512 F/BW/VL/DQ */
    SS_ISA_AMX = 2,         /* AVX-512 and AMX tiles with bf16 */
};

/* The level this process runs at: the best the CPU, the kernel and SS_ISA
 * allow. Computed on the first call (which asks the kernel for the AMX tile
 * state when the CPU has AMX), then constant. Thread-safe. */
enum ss_isa ss_isa_get(void);

/* 1 when the CPU has AVX2 and FMA and SS_ISA is not "portable", else 0.
 * Thread-safe. */
int ss_isa_has_avx2(void);

/* 1 when products in bf16 run natively at the current level: AMX-BF16 at
 * SS_ISA_AMX, AVX512_BF16 at SS_ISA_AVX512; else 0. Thread-safe. */
int ss_isa_has_bf16(void);

/* 1 when the AVX512_BF16 instructions (the conversions VCVTNE(2)PS2BF16 and
 * VDPBF16PS) may be used: the CPU has them and the level is SS_ISA_AVX512 or
 * above; else 0. Thread-safe. */
int ss_isa_has_avx512_bf16(void);

/* 1 when AVX512_VBMI2 (the byte compress VPCOMPRESSB) may be used: the CPU
 * has it and the level is SS_ISA_AVX512 or above; else 0. Thread-safe. */
int ss_isa_has_vbmi2(void);

/* "portable", "avx512" or "amx" (static strings). */
const char *ss_isa_name(enum ss_isa isa);

/* Parse a name of ss_isa_name into *isa. Returns 0, or -1 for another string. */
int ss_isa_parse(const char *name, enum ss_isa *isa);

#endif
