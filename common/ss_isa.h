/* ss_isa.h - the instruction set the fast kernels may use, chosen at run time.
 *
 * Kernels with a vector path (the Criteo parser; the dense math) ask
 * ss_isa_get() which path to take: the best that the CPU, the kernel and the
 * SS_ISA environment variable allow. SS_ISA (portable, avx512 or amx) is a
 * cap, never a promise: SS_ISA=amx on a CPU without AMX gives what the CPU
 * has, and SS_ISA=portable forces the portable paths everywhere (so a machine
 * with AVX-512 tests the code a machine without it runs). An unknown value is
 * ignored with a warning. Computed once, on the first call. */
#ifndef SS_ISA_H
#define SS_ISA_H

/* Instruction-set levels, each including the ones before it. */
enum ss_isa {
    SS_ISA_PORTABLE,   /* plain C (the compiler's baseline for the target) */
    SS_ISA_AVX512,     /* AVX-512 F, BW, DQ and VL, with the OS saving the ZMM state */
    SS_ISA_AMX,        /* AVX512 plus AMX-TILE and AMX-BF16, granted by the kernel */
};

/* The level kernels may use now (see the top of this file). Thread-safe and
 * cheap after the first call (one relaxed atomic load). */
enum ss_isa ss_isa_get(void);

/* The name of a level: "portable", "avx512" or "amx". */
const char *ss_isa_name(enum ss_isa isa);

#endif
