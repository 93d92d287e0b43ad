/* ss_isa.c - run-time choice of the instruction set (see ss_isa.h).
 *
 * DESIGN: CPUID says what the CPU has; XGETBV says whether the kernel saves
 * the AVX-512 register state; AMX's tile data must be asked for per process
 * with arch_prctl(ARCH_REQ_XCOMP_PERM) (Linux 5.16+), and a refusal means no
 * AMX. The answer is cached in one atomic int (the only mutable static here):
 * two threads racing on the first call compute the same value. */
#include "ss_isa.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ss_log.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#define S_ARCH_REQ_XCOMP_PERM 0x1023   /* arch_prctl: ask for an XSAVE feature */
#define S_XFEATURE_XTILEDATA 18        /* the AMX tile data state */

/* XCR0: the register states the OS saves. */
static unsigned long long s_xgetbv(void)
{
    unsigned int lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

/* What this CPU and kernel allow, without the environment's cap. */
static enum ss_isa s_detect(void)
{
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
        return SS_ISA_PORTABLE;
    /* XMM, YMM, opmask, ZMM0-15 upper halves, ZMM16-31 */
    if ((s_xgetbv() & 0xe6) != 0xe6)
        return SS_ISA_PORTABLE;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return SS_ISA_PORTABLE;
    const unsigned int need = bit_AVX512F | bit_AVX512DQ | bit_AVX512BW | bit_AVX512VL;
    if ((b & need) != need)
        return SS_ISA_PORTABLE;
    /* AMX-BF16 is EDX bit 22, AMX-TILE bit 24 */
    if ((d & (1u << 22)) && (d & (1u << 24)) &&
        syscall(SYS_arch_prctl, S_ARCH_REQ_XCOMP_PERM, S_XFEATURE_XTILEDATA) == 0)
        return SS_ISA_AMX;
    return SS_ISA_AVX512;
}
#else
static enum ss_isa s_detect(void)
{
    return SS_ISA_PORTABLE;
}
#endif

/* The cap SS_ISA sets, or SS_ISA_AMX (no cap) when unset or unknown. */
static enum ss_isa s_env_cap(void)
{
    const char *v = getenv("SS_ISA");
    if (!v || !*v)
        return SS_ISA_AMX;
    for (int i = SS_ISA_PORTABLE; i <= SS_ISA_AMX; i++)
        if (strcmp(v, ss_isa_name((enum ss_isa)i)) == 0)
            return (enum ss_isa)i;
    SS_LOG(SS_LOG_WARN, "SS_ISA=%s is not one of portable, avx512, amx: ignored", v);
    return SS_ISA_AMX;
}

enum ss_isa ss_isa_get(void)
{
    static _Atomic int cached = -1;
    int isa = atomic_load_explicit(&cached, memory_order_relaxed);
    if (isa < 0) {
        enum ss_isa cpu = s_detect(), cap = s_env_cap();
        isa = (int)(cpu < cap ? cpu : cap);
        atomic_store_explicit(&cached, isa, memory_order_relaxed);
    }
    return (enum ss_isa)isa;
}

const char *ss_isa_name(enum ss_isa isa)
{
    switch (isa) {
    case SS_ISA_AVX512: return "avx512";
    case SS_ISA_AMX: return "amx";
    default: return "portable";
    }
}
