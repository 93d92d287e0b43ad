/* ss_isa.c - the vector instruction level of this process (see ss_isa.h).
 *
 * DESIGN: CPUID gives what the CPU has, XGETBV what the OS saves on a context
 * switch (XCR0: the opmask and ZMM state for AVX-512, the tile state for AMX),
 * and for AMX the kernel must also grant the tile data to the process
 * (arch_prctl ARCH_REQ_XCOMP_PERM, Linux 5.16+): without the grant the first
 * tile instruction kills the process with SIGILL. The answer is computed once
 * under pthread_once and never changes afterwards (the one piece of static
 * state here: written once, then read-only). */
#include "ss_isa.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ss_log.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define SS_ISA_X86 1
#else
#define SS_ISA_X86 0
#endif

#define SS_ISA_ARCH_REQ_XCOMP_PERM 0x1023   /* arch_prctl code (asm/prctl.h) */
#define SS_ISA_XFEATURE_XTILEDATA 18        /* XCR0 bit of the tile data */

/* What the first call found; read-only afterwards. */
struct ss_isa_state {
    enum ss_isa level;      /* the answer, SS_ISA capped */
    int avx2;               /* AVX2 + FMA, not capped to portable */
    int bf16;               /* native bf16 products at level */
    int avx512_bf16;        /* the CPU has AVX512_BF16 (bf16 at SS_ISA_AVX512) */
    int vbmi2;              /* the CPU has AVX512_VBMI2 (byte compress) */
};

static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static struct ss_isa_state s_state;

static const char *const s_names[] = {"portable", "avx512", "amx"};

const char *ss_isa_name(enum ss_isa isa)
{
    return (unsigned)isa < 3 ? s_names[isa] : "unknown";
}

int ss_isa_parse(const char *name, enum ss_isa *isa)
{
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, s_names[i]) == 0) {
            *isa = (enum ss_isa)i;
            return 0;
        }
    return -1;
}

#if SS_ISA_X86
/* XCR0: the state components the OS saves. */
static unsigned long long s_xcr0(void)
{
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

/* Ask the kernel for the AMX tile data. Returns 1 when granted (or already). */
static int s_amx_granted(void)
{
    return syscall(SYS_arch_prctl, SS_ISA_ARCH_REQ_XCOMP_PERM,
                   SS_ISA_XFEATURE_XTILEDATA) == 0;
}

/* Fill *st from CPUID, XCR0 and the kernel, before the SS_ISA cap. */
static void s_detect(struct ss_isa_state *st)
{
    unsigned a1, b1, c1, d1, a7, b7, c7, d7, a71 = 0, b71, c71, d71;
    if (!__get_cpuid(1, &a1, &b1, &c1, &d1) || !(c1 & (1u << 27)))  /* OSXSAVE */
        return;
    if (!__get_cpuid_count(7, 0, &a7, &b7, &c7, &d7))
        return;
    if (a7 >= 1)
        __get_cpuid_count(7, 1, &a71, &b71, &c71, &d71);
    unsigned long long xcr0 = s_xcr0();
    int ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6;
    st->avx2 = ymm && (b7 & (1u << 5)) && (c1 & (1u << 12));  /* AVX2, FMA */
    /* AVX-512 F (16), DQ (17), BW (30), VL (31) */
    unsigned need = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31);
    if (!st->avx2 || !zmm || (b7 & need) != need)
        return;
    st->level = SS_ISA_AVX512;
    st->avx512_bf16 = (a71 >> 5) & 1u;
    st->vbmi2 = (c7 >> 6) & 1u;
    st->bf16 = st->avx512_bf16;
    int tiles = (d7 & (1u << 24)) && (d7 & (1u << 22));  /* AMX-TILE, AMX-BF16 */
    if (tiles && (xcr0 & (3ull << 17)) == (3ull << 17) && s_amx_granted()) {
        st->level = SS_ISA_AMX;
        st->bf16 = 1;
    }
}
#else
static void s_detect(struct ss_isa_state *st)
{
    (void)st;
}
#endif

/* pthread_once body: detect, then apply the SS_ISA cap. */
static void s_init(void)
{
    struct ss_isa_state st = {.level = SS_ISA_PORTABLE};
    s_detect(&st);
    const char *cap_s = getenv("SS_ISA");
    enum ss_isa cap;
    if (cap_s && *cap_s && ss_isa_parse(cap_s, &cap) != 0) {
        SS_LOG(SS_LOG_WARN, "SS_ISA=%s is not one of portable, avx512, amx: ignored", cap_s);
    } else if (cap_s && *cap_s && cap <= st.level) {
        st.level = cap;
        st.avx2 = cap == SS_ISA_PORTABLE ? 0 : st.avx2;
        st.bf16 = cap == SS_ISA_AMX ? st.bf16 : cap == SS_ISA_AVX512 ? st.avx512_bf16 : 0;
    }
    s_state = st;
}

enum ss_isa ss_isa_get(void)
{
    pthread_once(&s_once, s_init);
    return s_state.level;
}

int ss_isa_has_avx2(void)
{
    pthread_once(&s_once, s_init);
    return s_state.avx2;
}

int ss_isa_has_bf16(void)
{
    pthread_once(&s_once, s_init);
    return s_state.bf16;
}

int ss_isa_has_avx512_bf16(void)
{
    pthread_once(&s_once, s_init);
    return s_state.level >= SS_ISA_AVX512 && s_state.avx512_bf16;
}

int ss_isa_has_vbmi2(void)
{
    pthread_once(&s_once, s_init);
    return s_state.level >= SS_ISA_AVX512 && s_state.vbmi2;
}
