/* tr_parse.c - line parsers of every input format, and why a line is bad.
 *
 * DESIGN: the Criteo TSV parser is the hot path of the default job and
 * stays as it was (SWAR for the 8-hex-digit values, no copy); its examples
 * are appended to a tr_rows as they are. The other formats share small
 * helpers on (pointer, length) tokens; a number is copied into a short
 * NUL-terminated buffer before strtod, since a line is not terminated. A
 * parser writes the example at index rows->n and counts it only when the
 * whole line is good, so a bad line leaves rows as it was. The explanations
 * re-scan a bad line slowly, once per line worth reporting. */
#include "tr_parse.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_isa.h"
#include "ss_mem.h"

/* Longest number token accepted (dense values, labels, libsvm items). */
#define S_NUM_MAX 64

/* ---- rows ---- */

void tr_rows_init(struct tr_rows *rows, uint32_t max, uint32_t n_dense, uint32_t n_fields)
{
    ss_assert(rows && max >= 1 && n_fields >= 1);
    memset(rows, 0, sizeof *rows);
    rows->max = max;
    rows->n_dense = n_dense;
    rows->n_fields = n_fields;
    rows->labels = ss_malloc((size_t)max * sizeof(float));
    rows->dense = ss_malloc(((size_t)max * n_dense + 1) * sizeof(float));
    rows->offs = ss_malloc(((size_t)max * n_fields + 1) * sizeof(uint32_t));
    rows->cap = (size_t)max * n_fields;
    rows->keys = ss_malloc(rows->cap * sizeof(uint64_t));
    rows->weights = ss_malloc(rows->cap * sizeof(float));
    rows->scratch = ss_malloc(((size_t)n_fields + 1) * sizeof(uint32_t));
    rows->offs[0] = 0;
}

void tr_rows_fini(struct tr_rows *rows)
{
    ss_assert(rows);
    ss_free(rows->labels);
    ss_free(rows->dense);
    ss_free(rows->offs);
    ss_free(rows->keys);
    ss_free(rows->weights);
    ss_free(rows->scratch);
    ss_free(rows->tmp_keys);
    ss_free(rows->tmp_weights);
    ss_free(rows->tmp_fields);
    memset(rows, 0, sizeof *rows);
}

void tr_rows_clear(struct tr_rows *rows)
{
    ss_assert(rows && rows->offs);
    rows->n = 0;
    rows->offs[0] = 0;
}

/* Make room for need values in keys and weights. */
static void s_reserve(struct tr_rows *rows, size_t need)
{
    if (need <= rows->cap)
        return;
    size_t cap = rows->cap ? rows->cap : 16;
    while (cap < need)
        cap *= 2;
    ss_assert(cap <= UINT32_MAX);
    rows->keys = ss_realloc(rows->keys, cap * sizeof(uint64_t));
    rows->weights = ss_realloc(rows->weights, cap * sizeof(float));
    rows->cap = cap;
}

/* Append one value at *cur. */
static inline void s_put(struct tr_rows *rows, size_t *cur, uint64_t key, float weight)
{
    s_reserve(rows, *cur + 1);
    rows->keys[*cur] = key;
    rows->weights[*cur] = weight;
    ++*cur;
}

void tr_rows_add_example(struct tr_rows *rows, const struct tr_example *ex)
{
    ss_assert(rows->n < rows->max && rows->n_dense == TR_N_DENSE &&
              rows->n_fields == TR_N_SPARSE);
    uint32_t b = rows->n;
    uint32_t *offs = rows->offs + (size_t)b * TR_N_SPARSE;
    size_t base = offs[0];
    s_reserve(rows, base + TR_N_SPARSE);
    rows->labels[b] = ex->label;
    memcpy(rows->dense + (size_t)b * TR_N_DENSE, ex->dense, sizeof ex->dense);
    memcpy(rows->keys + base, ex->keys, sizeof ex->keys);
    /* through locals: a store through rows->weights could alias the struct, and
     * the pointer was loaded again for every field */
    float *w = rows->weights + base;
    for (uint32_t f = 0; f < TR_N_SPARSE; f++) {
        w[f] = 1.0f;
        offs[f + 1] = (uint32_t)(base + f + 1);
    }
    rows->n++;
}

/* ---- Criteo TSV (the hot path) ---- */

/* log(1 + v) of the small whole values most dense fields hold, filled once
 * before main() by the very expression s_parse_dense() would use, so a value
 * from the table is bit for bit the value computed (a libm log per dense
 * field was 1% of a worker's time). */
#define S_LOG_TAB 4096u
static float s_log_tab[S_LOG_TAB];

__attribute__((constructor)) static void s_log_tab_fill(void)
{
    for (uint32_t v = 0; v < S_LOG_TAB; v++)
        s_log_tab[v] = v == 0 ? 0.0f : (float)log(1.0 + (double)v);
}

/* Parse the dense field at *pp. Sets *more when a tab follows (another field
 * starts after it). Returns 0 or SS_E_PROTO. */
static inline int s_parse_dense(const char **pp, const char *end, float *out, bool *more)
{
    const char *p = *pp;
    bool neg = false;
    uint64_t v = 0;
    if (p < end && *p == '-') {
        neg = true;
        p++;
    }
    const char *digits = p;
    while (p < end && (unsigned)(*p - '0') < 10) {
        v = v < 100000000000000000ull ? v * 10 + (uint64_t)(*p - '0') : v;  /* saturates */
        p++;
    }
    if (p < end && *p != '\t')
        return SS_E_PROTO;
    if (p == digits && neg)
        return SS_E_PROTO;                  /* "-" alone */
    *out = neg ? 0.0f : v < S_LOG_TAB ? s_log_tab[v] : (float)log(1.0 + (double)v);
    *more = p < end;
    *pp = p + (p < end);
    return 0;
}

/* Parse exactly 8 lowercase hex digits from 8 bytes loaded little-endian
 * (first character in the low byte). Returns 1 and sets *raw, or 0 if a byte
 * is not one of 0-9a-f (upper case is a different string, so it is hashed).
 * SWAR: range checks on all bytes at once. */
static inline int s_hex8(uint64_t x, uint64_t *raw)
{
    const uint64_t hi = 0x8080808080808080ull;
    uint64_t digit = (x + 0x5050505050505050ull) & ~(x + 0x4646464646464646ull);
    uint64_t letter = (x + 0x1F1F1F1F1F1F1F1Full) & ~(x + 0x1919191919191919ull);
    if ((x & hi) || ((digit | letter) & hi) != hi)
        return 0;
    /* Nibble value: low 4 bits, plus 9 for letters (bit 6 set). */
    uint64_t v = (x & 0x0F0F0F0F0F0F0F0Full) + ((x >> 6) & 0x0101010101010101ull) * 9;
    v = ((v & 0x000F000F000F000Full) << 4) | ((v & 0x0F000F000F000F00ull) >> 8);
    v = ((v & 0x000000FF000000FFull) << 8) | ((v & 0x00FF000000FF0000ull) >> 16);
    *raw = ((v & 0xFFFF) << 16) | ((v >> 32) & 0xFFFF);
    return 1;
}

/* 8 bytes at s as a little-endian word. */
static inline uint64_t s_load8(const char *s)
{
    uint64_t x;
    memcpy(&x, s, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    return x;
}

/* Raw value of a categorical value of n bytes (tr_parse.h: three ranges). */
static inline uint64_t s_raw(const char *s, size_t n)
{
    uint64_t raw;
    if (n == 0)
        return TR_PARSE_MISSING_RAW;
    if (n == 8 && s_hex8(s_load8(s), &raw))
        return raw;
    return TR_PARSE_HASHED_RAW | (ss_hash_bytes(s, n, 0) >> 2);
}

/* Parse the categorical field at *pp into its key; sets *more as above. */
static inline uint64_t s_parse_cat(const char **pp, const char *end, uint32_t field, bool *more)
{
    const char *s = *pp;
    uint64_t raw = 0;
    /* Fast path: the usual 8 lowercase hex digits. */
    if (end - s >= 8 && (end - s == 8 || s[8] == '\t') && s_hex8(s_load8(s), &raw)) {
        *more = end - s > 8;
        *pp = s + 8 + *more;
        return ss_key_make(field, raw);
    }
    const char *p = memchr(s, '\t', (size_t)(end - s));
    if (!p)
        p = end;
    *more = p < end;
    *pp = p + (p < end);
    return ss_key_make(field, s_raw(s, (size_t)(p - s)));
}

/* End of the line without a trailing CR. */
static inline const char *s_end(const char *line, size_t len)
{
    const char *end = line + len;
    return len > 0 && end[-1] == '\r' ? end - 1 : end;
}

/* The 13 dense and 26 categorical fields of a Criteo line from p (after the
 * label, or the line's start without one) into ex. */
static inline int s_criteo_features(const char *p, const char *end, struct tr_example *ex)
{
    bool more = true;
    for (int j = 0; j < TR_N_DENSE; j++) {
        ex->dense[j] = 0.0f;
        if (more && s_parse_dense(&p, end, &ex->dense[j], &more) != 0)
            return SS_E_PROTO;
    }
    for (uint32_t f = 0; f < TR_N_SPARSE; f++) {
        if (more)
            ex->keys[f] = s_parse_cat(&p, end, f, &more);
        else
            ex->keys[f] = ss_key_make(f, TR_PARSE_MISSING_RAW);
    }
    return more ? SS_E_PROTO : 0;
}

/* ---- Criteo TSV, AVX-512 ---- */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define S_VEC_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,bmi,bmi2")))
#define S_VEC_CHUNKS 8u                  /* 64-byte chunks a vector-parsed line may span */
#define S_VEC_MAX (S_VEC_CHUNKS * 64u)   /* longer lines take the scalar parser */
#define S_VEC_FIELDS 104u    /* field bounds kept: 39, and room for a chunk's 64 stored whole
                              * after 38 (s_vec_scan_vbmi2) */

/* Stage 1 of a line's features p[0..len): one pass of 64-byte compares
 * finds the tabs (so the fields' bounds) and marks the bytes that are
 * neither a tab nor a digit (masked loads: nothing past len is read). */
struct s_vec_scan {
    const char *p;                  /* the line's features */
    uint32_t len;                   /* their bytes, <= S_VEC_MAX */
    uint64_t other[S_VEC_CHUNKS];   /* bit i of word c: byte 64c+i is neither tab nor digit
                                     * nor a '-' that starts a field */
    uint16_t start[S_VEC_FIELDS];   /* byte where field f starts */
    uint16_t end[S_VEC_FIELDS];     /* byte where field f ends (its tab, or len) */
    uint32_t n_fields;              /* fields present, 1..39 */
};

/* Chunk c (bytes 64c..) of the line p[0..len): sets sc->other[c] and
 * returns the chunk's tab mask. *starts: on entry bit 0 says whether the
 * chunk's byte 0 starts a field; on return, the next chunk's. Inlined into
 * both scanners (s_vec_scan_vbmi2's target includes this one's). */
S_VEC_TARGET static inline __attribute__((always_inline)) uint64_t
s_vec_chunk(const char *p, size_t len, size_t c, struct s_vec_scan *sc, uint64_t *starts)
{
    const __m512i tab = _mm512_set1_epi8('\t'), zero = _mm512_set1_epi8('0');
    const __m512i ten = _mm512_set1_epi8(10), minus = _mm512_set1_epi8('-');
    size_t rem = len - c * 64;
    __mmask64 live = rem >= 64 ? ~0ull : _bzhi_u64(~0ull, (unsigned)rem);
    __m512i v = _mm512_maskz_loadu_epi8(live, p + c * 64);
    uint64_t t = _mm512_mask_cmpeq_epi8_mask(live, v, tab);
    uint64_t d = _mm512_mask_cmplt_epu8_mask(live, _mm512_sub_epi8(v, zero), ten);
    uint64_t m = _mm512_mask_cmpeq_epi8_mask(live, v, minus);
    *starts |= t << 1;   /* the byte after a tab starts a field */
    sc->other[c] = live & ~t & ~d & ~(m & *starts);   /* a leading '-' is allowed */
    *starts = t >> 63;
    return t;
}

/* Scan p[0..len) (len <= S_VEC_MAX) and cut it into fields. Returns 0, or
 * SS_E_PROTO for more than the 39 feature fields. */
S_VEC_TARGET static int s_vec_scan(const char *p, size_t len, struct s_vec_scan *sc)
{
    uint32_t nf = 0;
    uint64_t starts = 1;   /* bit 0 of the next chunk starts a field (byte 0 does) */
    size_t c = 0;
    sc->p = p;
    sc->len = (uint32_t)len;
    sc->start[0] = 0;
    for (;; c++) {
        uint64_t t = s_vec_chunk(p, len, c, sc, &starts);
        for (; t; t = _blsr_u64(t)) {
            if (nf + 1 == TR_N_DENSE + TR_N_SPARSE)
                return SS_E_PROTO;   /* a 40th feature field */
            uint32_t at = (uint32_t)(c * 64 + _tzcnt_u64(t));
            sc->end[nf] = (uint16_t)at;
            sc->start[++nf] = (uint16_t)(at + 1);
        }
        if (len - c * 64 <= 64)   /* the last chunk */
            break;
    }
    sc->end[nf] = (uint16_t)len;
    sc->n_fields = nf + 1;
    return 0;
}

/* s_vec_scan with the tabs' places written 32 at a time: the tab mask of a
 * chunk compresses the bytes 0..63 to the places of its tabs (VPCOMPRESSB,
 * AVX512_VBMI2), widened to 16 bits and stored as the fields' ends, plus one
 * as the next fields' starts, whole (the arrays have room; the places past
 * the tabs are never read), instead of two narrow stores per tab and a
 * loop whose exit the branch predictor misses in every chunk. The same
 * fields and return code as s_vec_scan. */
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi2,bmi,bmi2"))) static int
s_vec_scan_vbmi2(const char *p, size_t len, struct s_vec_scan *sc)
{
    static const uint8_t iota[64] = {
        0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
        22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
        44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63};
    const __m512i bytes = _mm512_loadu_si512((const void *)iota), one = _mm512_set1_epi16(1);
    uint32_t nf = 0;
    uint64_t starts = 1;   /* bit 0 of the next chunk starts a field (byte 0 does) */
    size_t c = 0;
    sc->p = p;
    sc->len = (uint32_t)len;
    sc->start[0] = 0;
    for (;; c++) {
        uint64_t t = s_vec_chunk(p, len, c, sc, &starts);
        uint32_t k = (uint32_t)_mm_popcnt_u64(t);
        if (k) {
            if (nf + k >= TR_N_DENSE + TR_N_SPARSE)
                return SS_E_PROTO;   /* a 40th feature field */
            __m512i at = _mm512_maskz_compress_epi8(t, bytes);
            __m512i base = _mm512_set1_epi16((short)(c * 64));
            __m512i e = _mm512_add_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(at)), base);
            _mm512_storeu_si512((void *)(sc->end + nf), e);
            _mm512_storeu_si512((void *)(sc->start + nf + 1), _mm512_add_epi16(e, one));
            if (k > 32) {
                e = _mm512_add_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(at, 1)),
                                     base);
                _mm512_storeu_si512((void *)(sc->end + nf + 32), e);
                _mm512_storeu_si512((void *)(sc->start + nf + 33), _mm512_add_epi16(e, one));
            }
            nf += k;
        }
        if (len - c * 64 <= 64)   /* the last chunk */
            break;
    }
    sc->end[nf] = (uint16_t)len;
    sc->n_fields = nf + 1;
    return 0;
}

/* Whether the dense fields (the first n of sc) hold a byte that is neither
 * tab nor digit, other than a '-' that starts a field. */
static inline bool s_vec_dense_other(const struct s_vec_scan *sc, uint32_t n)
{
    uint32_t e = sc->end[n - 1];
    uint64_t bad = 0;
    for (uint32_t w = 0; w << 6 < e; w++)
        bad |= e >= (w + 1) << 6 ? sc->other[w] : sc->other[w] & ((1ull << (e & 63)) - 1);
    return bad != 0;
}

/* The 8 bytes of the line at s as a little-endian word, zeros past its end
 * (a masked load there: nothing past len is read). */
S_VEC_TARGET static inline uint64_t s_vec_load8(const struct s_vec_scan *sc, uint32_t s)
{
    if (s + 8 <= sc->len)
        return s_load8(sc->p + s);
    __mmask16 live = (__mmask16)_bzhi_u32(0xffffu, sc->len - s);
    return (uint64_t)_mm_cvtsi128_si64(_mm_maskz_loadu_epi8(live, sc->p + s));
}

/* The value of the n decimal digits in the low bytes of word (1 <= n <= 8):
 * SWAR, the first digit (the lowest byte) the most significant. */
static inline uint64_t s_vec_digits8(uint64_t word, uint32_t n)
{
    uint64_t x = (word - 0x3030303030303030ull) << (8 * (8 - n));
    x = x * 10 + (x >> 8);                                         /* pairs */
    x = ((x & 0x00FF00FF00FF00FFull) * (100ull << 16 | 1)) >> 16;    /* groups of 4 */
    return ((x & 0x0000FFFF0000FFFFull) * (10000ull << 32 | 1)) >> 32;
}

/* Dense field [s, e) of sc, already checked to be [-]digits: what
 * s_parse_dense() gives. Returns 0, or SS_E_PROTO for "-" alone. */
S_VEC_TARGET static inline int s_vec_dense(const struct s_vec_scan *sc, uint32_t s, uint32_t e,
                                           float *out)
{
    bool neg = s < e && sc->p[s] == '-';
    uint64_t v = 0;
    s += neg;
    if (neg) {
        *out = 0.0f;
        return s == e ? SS_E_PROTO : 0;
    }
    if (s < e && e - s <= 8) {
        v = s_vec_digits8(s_vec_load8(sc, s), e - s);
    } else {
        for (; s < e; s++)
            v = v < 100000000000000000ull ? v * 10 + (uint64_t)(sc->p[s] - '0') : v;
    }
    *out = v < S_LOG_TAB ? s_log_tab[v] : (float)log(1.0 + (double)v);
    return 0;
}

/* s_hex8() on 8 words at once: the lanes that are 8 lowercase hex digits
 * (as a mask) and their values in *raw (the same SWAR steps per lane). */
S_VEC_TARGET static inline __mmask8 s_vec_hex8(__m512i x, __m512i *raw)
{
    const __m512i hi = _mm512_set1_epi64((long long)0x8080808080808080ull);
    __m512i digit = _mm512_andnot_si512(
        _mm512_add_epi64(x, _mm512_set1_epi64(0x4646464646464646ll)),
        _mm512_add_epi64(x, _mm512_set1_epi64(0x5050505050505050ll)));
    __m512i letter = _mm512_andnot_si512(
        _mm512_add_epi64(x, _mm512_set1_epi64(0x1919191919191919ll)),
        _mm512_add_epi64(x, _mm512_set1_epi64(0x1F1F1F1F1F1F1F1Fll)));
    __mmask8 ok = _mm512_testn_epi64_mask(x, hi) &
                  _mm512_cmpeq_epi64_mask(_mm512_and_si512(_mm512_or_si512(digit, letter), hi), hi);
    __m512i n9 = _mm512_and_si512(_mm512_srli_epi64(x, 6), _mm512_set1_epi64(0x0101010101010101ll));
    __m512i v = _mm512_add_epi64(_mm512_and_si512(x, _mm512_set1_epi64(0x0F0F0F0F0F0F0F0Fll)),
                                 _mm512_add_epi64(_mm512_slli_epi64(n9, 3), n9));
    v = _mm512_or_si512(
        _mm512_slli_epi64(_mm512_and_si512(v, _mm512_set1_epi64(0x000F000F000F000Fll)), 4),
        _mm512_srli_epi64(_mm512_and_si512(v, _mm512_set1_epi64(0x0F000F000F000F00ll)), 8));
    v = _mm512_or_si512(
        _mm512_slli_epi64(_mm512_and_si512(v, _mm512_set1_epi64(0x000000FF000000FFll)), 8),
        _mm512_srli_epi64(_mm512_and_si512(v, _mm512_set1_epi64(0x00FF000000FF0000ll)), 16));
    *raw = _mm512_or_si512(_mm512_slli_epi64(_mm512_and_si512(v, _mm512_set1_epi64(0xFFFF)), 16),
                           _mm512_and_si512(_mm512_srli_epi64(v, 32), _mm512_set1_epi64(0xFFFF)));
    return ok;
}

/* ss_key_make() of 8 fields at once: salt holds (table + 1) * 0x9e3779b97f4a7c15. */
S_VEC_TARGET static inline __m512i s_vec_key(__m512i raw, __m512i salt)
{
    __m512i x = _mm512_xor_si512(raw, salt);
    x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 30));
    x = _mm512_mullo_epi64(x, _mm512_set1_epi64((long long)0xbf58476d1ce4e5b9ull));
    x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 27));
    x = _mm512_mullo_epi64(x, _mm512_set1_epi64((long long)0x94d049bb133111ebull));
    x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
    return _mm512_mask_mov_epi64(x, _mm512_cmpeq_epi64_mask(x, _mm512_setzero_si512()),
                                 _mm512_set1_epi64(1));
}

/* Stage 2 of the categorical fields, 8 at a time: their bounds as vectors,
 * the fields of exactly 8 bytes gathered from the line as words and decoded
 * (s_vec_hex8), empty and absent fields the missing value, the rest (other
 * lengths, 8 bytes that are not lowercase hex: rare) by s_raw(); then the
 * keys (s_vec_key). */
S_VEC_TARGET static void s_vec_cats(struct s_vec_scan *sc, struct tr_example *ex)
{
    const __m512i gold = _mm512_set1_epi64((long long)0x9e3779b97f4a7c15ull);
    const __m512i missing = _mm512_set1_epi64((long long)TR_PARSE_MISSING_RAW);
    __m512i salt = _mm512_mullo_epi64(_mm512_set_epi64(8, 7, 6, 5, 4, 3, 2, 1), gold);
    uint64_t raw[32];
    /* the fields' raw values first, the keys after: 4 independent chains of
     * key arithmetic (its 64-bit multiplies are slow) instead of one per
     * group behind its gather and decoding */
    for (uint32_t g = 0; g < 4; g++) {
        uint32_t i0 = TR_N_DENSE + 8 * g;
        /* absent fields (i >= n_fields) load as start = end = 0: empty */
        __mmask8 here = (__mmask8)_bzhi_u32(0xffu, sc->n_fields > i0 ? sc->n_fields - i0 : 0);
        __m512i s = _mm512_cvtepu16_epi64(_mm_maskz_loadu_epi16(here, sc->start + i0));
        __m512i n = _mm512_sub_epi64(
            _mm512_cvtepu16_epi64(_mm_maskz_loadu_epi16(here, sc->end + i0)), s);
        __mmask8 empty = _mm512_cmpeq_epi64_mask(n, _mm512_setzero_si512());
        __mmask8 eight = _mm512_cmpeq_epi64_mask(n, _mm512_set1_epi64(8));
        /* start + 8 = end <= len: the gather reads only the line */
        __m512i w = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), eight, s, sc->p, 1);
        __m512i r;
        __mmask8 ok = s_vec_hex8(w, &r) & eight;
        _mm512_storeu_si512(raw + 8 * g, _mm512_mask_mov_epi64(r, empty, missing));
        for (uint32_t rest = 0xffu & ~(uint32_t)(ok | empty); rest; rest &= rest - 1) {
            uint32_t i = i0 + (uint32_t)__builtin_ctz(rest);
            raw[i - TR_N_DENSE] = s_raw(sc->p + sc->start[i],
                                        (size_t)(sc->end[i] - sc->start[i]));
        }
    }
    __m512i step = _mm512_slli_epi64(gold, 3);
#pragma GCC unroll 4
    for (uint32_t g = 0; g < 4; g++) {
        _mm512_mask_storeu_epi64(ex->keys + 8 * g, g < 3 ? 0xff : 0x03,
                                 s_vec_key(_mm512_loadu_si512(raw + 8 * g), salt));
        salt = _mm512_add_epi64(salt, step);
    }
}

/* s_criteo_features() in two stages (s_vec_scan, then the fields from the
 * tab positions). Lines longer than S_VEC_MAX take the scalar parser. */
S_VEC_TARGET static int s_criteo_features_vec(const char *p, const char *end, int vbmi2,
                                              struct tr_example *ex)
{
    struct s_vec_scan sc;
    size_t len = (size_t)(end - p);
    if (len > S_VEC_MAX)
        return s_criteo_features(p, end, ex);
    if ((vbmi2 ? s_vec_scan_vbmi2(p, len, &sc) : s_vec_scan(p, len, &sc)) != 0)
        return SS_E_PROTO;
    uint32_t n_dense = sc.n_fields < TR_N_DENSE ? sc.n_fields : TR_N_DENSE;
    if (s_vec_dense_other(&sc, n_dense))
        return SS_E_PROTO;   /* not an integer */
    for (uint32_t j = 0; j < TR_N_DENSE; j++) {
        ex->dense[j] = 0.0f;
        if (j < n_dense && s_vec_dense(&sc, sc.start[j], sc.end[j], &ex->dense[j]) != 0)
            return SS_E_PROTO;
    }
    s_vec_cats(&sc, ex);
    return 0;
}
#endif

/* The features of a Criteo line by the parser of isa. */
static inline int s_criteo_features_isa(const char *p, const char *end, enum ss_isa isa,
                                        struct tr_example *ex)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa >= SS_ISA_AVX512)
        return s_criteo_features_vec(p, end, isa >= SS_ISA_AMX && ss_isa_has_vbmi2(), ex);
#endif
    (void)isa;
    return s_criteo_features(p, end, ex);
}

int tr_parse_criteo_isa(const char *line, size_t len, int labels, enum ss_isa isa,
                        struct tr_example *ex)
{
    ss_assert((line || len == 0) && ex);
    const char *end = s_end(line, len);
    if (ss_isa_get() == SS_ISA_PORTABLE)
        isa = SS_ISA_PORTABLE;   /* SS_ISA_AMX: the best vector parser the CPU has */
    if (!labels) {
        if (end == line)
            return SS_E_PROTO;  /* an empty line is no example */
        ex->label = 0.0f;
        return s_criteo_features_isa(line, end, isa, ex);
    }
    if (end - line < 2 || (line[0] != '0' && line[0] != '1') || line[1] != '\t')
        return SS_E_PROTO;
    ex->label = line[0] == '1' ? 1.0f : 0.0f;
    return s_criteo_features_isa(line + 2, end, isa, ex);
}

int tr_parse_criteo(const char *line, size_t len, struct tr_example *ex)
{
    return tr_parse_criteo_isa(line, len, 1, SS_ISA_AMX, ex);
}

int tr_parse_criteo_unlabeled(const char *line, size_t len, struct tr_example *ex)
{
    return tr_parse_criteo_isa(line, len, 0, SS_ISA_AMX, ex);
}

/* ---- tokens and numbers ---- */

/* Next field of a delimited line at *pp; sets *more when a delimiter
 * followed it (another field starts after it). */
static inline const char *s_field(const char **pp, const char *end, char delim, size_t *n,
                                  bool *more)
{
    const char *s = *pp, *p = memchr(s, delim, (size_t)(end - s));
    if (!p)
        p = end;
    *n = (size_t)(p - s);
    *more = p < end;
    *pp = p + (p < end);
    return s;
}

static inline bool s_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Next word (run of non-blanks) at *pp, or NULL at the end. */
static const char *s_word(const char **pp, const char *end, size_t *n)
{
    const char *p = *pp;
    while (p < end && s_blank(*p))
        p++;
    if (p == end)
        return NULL;
    const char *s = p;
    while (p < end && !s_blank(*p))
        p++;
    *n = (size_t)(p - s);
    *pp = p;
    return s;
}

/* A finite decimal number of n bytes (no blanks). Returns 0 or -1. */
static int s_number(const char *s, size_t n, double *v)
{
    char buf[S_NUM_MAX];
    char *e;
    if (n == 0 || n >= sizeof buf || isspace((unsigned char)s[0]))
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    double x = strtod(buf, &e);
    if (e != buf + n || !isfinite(x))
        return -1;
    *v = x;
    return 0;
}

/* An unsigned decimal integer below 2^62. Returns 0 or -1. */
static int s_uint(const char *s, size_t n, uint64_t *v)
{
    uint64_t x = 0;
    if (n == 0 || n > 19)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned)(s[i] - '0') >= 10)
            return -1;
        x = x * 10 + (uint64_t)(s[i] - '0');
    }
    if (x >= TR_PARSE_HASHED_RAW)
        return -1;
    *v = x;
    return 0;
}

/* A label: 1 or +1 -> 1; 0 or -1 -> 0 (any decimal spelling). */
static int s_label(const char *s, size_t n, float *out)
{
    double v;
    if (s_number(s, n, &v) < 0)
        return -1;
    if (v == 1.0) {
        *out = 1.0f;
        return 0;
    }
    if (v == 0.0 || v == -1.0) {
        *out = 0.0f;
        return 0;
    }
    return -1;
}

/* A csv dense value: log(1 + max(v, 0)); empty -> 0. */
static int s_dense(const char *s, size_t n, float *out)
{
    double v;
    if (n == 0) {
        *out = 0.0f;
        return 0;
    }
    if (s_number(s, n, &v) < 0)
        return -1;
    *out = v <= 0 ? 0.0f : (float)log(1.0 + v);
    return 0;
}

/* ---- csv ---- */

/* The values of a multi field: non-empty parts of s split on sep. */
static void s_multi(struct tr_rows *rows, size_t *cur, uint32_t f, const char *s, size_t n,
                    char sep)
{
    const char *end = s + n;
    size_t start = *cur;
    bool more = n > 0;
    while (more) {
        size_t len;
        const char *v = s_field(&s, end, sep, &len, &more);
        if (len)
            s_put(rows, cur, ss_key_make(f, s_raw(v, len)), 1.0f);
    }
    if (*cur == start)
        s_put(rows, cur, ss_key_make(f, TR_PARSE_MISSING_RAW), 1.0f);
}

static int s_parse_csv(const struct ss_data_cfg *d, const char *line, const char *end,
                       struct tr_rows *rows)
{
    uint32_t b = rows->n, F = rows->n_fields, f = 0, j = 0;
    uint32_t *offs = rows->offs + (size_t)b * F;
    float *dense = rows->dense + (size_t)b * rows->n_dense;
    size_t cur = offs[0], n;
    const char *p = line;
    bool more = true;
    rows->labels[b] = 0.0f;  /* no label column (data.labels false): 0 */
    for (uint32_t c = 0; c < d->n_columns; c++) {
        if (!more)
            return SS_E_PROTO;  /* too few fields */
        const char *s = s_field(&p, end, d->delimiter, &n, &more);
        switch (d->role[c]) {
        case SS_ROLE_LABEL:
            if (s_label(s, n, &rows->labels[b]) < 0)
                return SS_E_PROTO;
            break;
        case SS_ROLE_DENSE:
            if (s_dense(s, n, &dense[j++]) < 0)
                return SS_E_PROTO;
            break;
        case SS_ROLE_CATEGORICAL:
            s_put(rows, &cur, ss_key_make(f, s_raw(s, n)), 1.0f);
            offs[++f] = (uint32_t)cur;
            break;
        case SS_ROLE_MULTI:
            s_multi(rows, &cur, f, s, n, d->multi_sep);
            offs[++f] = (uint32_t)cur;
            break;
        default:
            break;
        }
    }
    if (more)
        return SS_E_PROTO;  /* too many fields */
    rows->n++;
    return 0;
}

/* ---- libsvm and libffm ---- */

/* Parse "idx:value" (libsvm) or "field:idx:value" (libffm, want_field) into
 * its parts. The value must fit a float: a weight that overflowed to
 * infinity ("1:1e39") would poison the model. Returns 0 or -1. */
static int s_item(const char *s, size_t n, int want_field, uint64_t *field, uint64_t *idx,
                  double *value)
{
    const char *end = s + n, *c1 = memchr(s, ':', n);
    if (!c1)
        return -1;
    if (want_field) {
        if (s_uint(s, (size_t)(c1 - s), field) < 0)
            return -1;
        s = c1 + 1;
        c1 = memchr(s, ':', (size_t)(end - s));
        if (!c1)
            return -1;
    }
    if (s_uint(s, (size_t)(c1 - s), idx) < 0)
        return -1;
    if (s_number(c1 + 1, (size_t)(end - c1 - 1), value) < 0 || fabs(*value) > FLT_MAX)
        return -1;
    return 0;
}

/* The label that starts a libsvm or libffm line into rows->labels[b]; with
 * labels off there is none (label 0), and the line must hold an item: an
 * empty line is bad in every unlabeled format. Returns 0 or -1. */
static int s_lead(int labels, const char **pp, const char *end, struct tr_rows *rows, uint32_t b)
{
    size_t n;
    const char *q = *pp, *w = s_word(labels ? pp : &q, end, &n);
    if (!labels) {
        rows->labels[b] = 0.0f;
        return w ? 0 : -1;
    }
    return w && s_label(w, n, &rows->labels[b]) == 0 ? 0 : -1;
}

static int s_parse_libsvm(const char *line, const char *end, int labels, struct tr_rows *rows)
{
    uint32_t b = rows->n;
    size_t n, start = rows->offs[b], cur = start;
    const char *p = line, *w;
    uint64_t field, idx;
    double v;
    if (s_lead(labels, &p, end, rows, b) < 0)
        return SS_E_PROTO;
    while ((w = s_word(&p, end, &n)) != NULL) {
        if (s_item(w, n, 0, &field, &idx, &v) < 0)
            return SS_E_PROTO;
        if ((float)v != 0.0f)   /* as a float: 1e-50 is 0 too */
            s_put(rows, &cur, ss_key_make(0, idx), (float)v);
    }
    if (cur == start)
        s_put(rows, &cur, ss_key_make(0, TR_PARSE_MISSING_RAW), 1.0f);
    rows->offs[b + 1] = (uint32_t)cur;
    rows->n++;
    return 0;
}

/* Append one libffm item to rows' scratch lists. */
static void s_tmp_put(struct tr_rows *rows, size_t i, uint32_t field, uint64_t key, float w)
{
    if (i == rows->tmp_cap) {
        rows->tmp_cap = rows->tmp_cap ? rows->tmp_cap * 2 : 64;
        rows->tmp_keys = ss_realloc(rows->tmp_keys, rows->tmp_cap * sizeof(uint64_t));
        rows->tmp_weights = ss_realloc(rows->tmp_weights, rows->tmp_cap * sizeof(float));
        rows->tmp_fields = ss_realloc(rows->tmp_fields, rows->tmp_cap * sizeof(uint32_t));
    }
    rows->tmp_fields[i] = field;
    rows->tmp_keys[i] = key;
    rows->tmp_weights[i] = w;
}

/* Move the n_items scratch items of example b into its fields, in line
 * order within a field (a counting sort); a field without items gets its
 * missing key. */
static void s_ffm_place(struct tr_rows *rows, uint32_t b, size_t n_items)
{
    uint32_t F = rows->n_fields, *cnt = rows->scratch, *offs = rows->offs + (size_t)b * F;
    memset(cnt, 0, F * sizeof(uint32_t));
    for (size_t i = 0; i < n_items; i++)
        cnt[rows->tmp_fields[i]]++;
    for (uint32_t f = 0; f < F; f++)
        offs[f + 1] = offs[f] + (cnt[f] ? cnt[f] : 1);
    s_reserve(rows, offs[F]);
    for (uint32_t f = 0; f < F; f++) {
        cnt[f] = offs[f];  /* now the write position */
        rows->keys[offs[f]] = ss_key_make(f, TR_PARSE_MISSING_RAW);
        rows->weights[offs[f]] = 1.0f;
    }
    for (size_t i = 0; i < n_items; i++) {
        uint32_t pos = cnt[rows->tmp_fields[i]]++;
        rows->keys[pos] = rows->tmp_keys[i];
        rows->weights[pos] = rows->tmp_weights[i];
    }
}

static int s_parse_libffm(const char *line, const char *end, int labels, struct tr_rows *rows)
{
    uint32_t b = rows->n;
    size_t n, n_items = 0;
    const char *p = line, *w;
    uint64_t field, idx;
    double v;
    if (s_lead(labels, &p, end, rows, b) < 0)
        return SS_E_PROTO;
    while ((w = s_word(&p, end, &n)) != NULL) {
        if (s_item(w, n, 1, &field, &idx, &v) < 0 || field >= rows->n_fields)
            return SS_E_PROTO;
        if ((float)v != 0.0f)
            s_tmp_put(rows, n_items++, (uint32_t)field, ss_key_make((uint32_t)field, idx),
                      (float)v);
    }
    s_ffm_place(rows, b, n_items);
    rows->n++;
    return 0;
}

int tr_parse_line(const struct ss_data_cfg *data, const char *line, size_t len,
                  struct tr_rows *rows)
{
    ss_assert(data && (line || len == 0) && rows && rows->n < rows->max);
    ss_assert(rows->n_dense == data->n_dense && rows->n_fields == data->n_fields);
    const char *end = s_end(line, len);
    switch (data->format) {
    case SS_DATA_CRITEO_TSV: {
        struct tr_example ex;
        if ((data->labels ? tr_parse_criteo(line, len, &ex)
                          : tr_parse_criteo_unlabeled(line, len, &ex)) != 0)
            return SS_E_PROTO;
        tr_rows_add_example(rows, &ex);
        return 0;
    }
    case SS_DATA_CSV: return s_parse_csv(data, line, end, rows);
    case SS_DATA_LIBSVM: return s_parse_libsvm(line, end, data->labels, rows);
    case SS_DATA_LIBFFM: return s_parse_libffm(line, end, data->labels, rows);
    default: return SS_E_PROTO;
    }
}

/* ---- headers ---- */

/* Field number col (from 0) of a delimited line, or NULL past the last. */
static const char *s_nth_field(const char *line, const char *end, char delim, uint32_t col,
                               size_t *n)
{
    const char *p = line, *s = NULL;
    bool more = true;
    for (uint32_t c = 0; c <= col; c++) {
        if (!more)
            return NULL;
        s = s_field(&p, end, delim, n, &more);
    }
    return s;
}

/* Number of fields of a line split on delim. */
static uint32_t s_count_fields(const char *line, const char *end, char delim)
{
    uint32_t n = 1;
    for (const char *p = line; p < end; p++)
        n += *p == delim;
    return n;
}

/* The column a header holds a word in: the label's (data.columns has
 * exactly one), or without labels the first dense one (ss_cfg_load refuses
 * header auto when there is none). */
static uint32_t s_label_col(const struct ss_data_cfg *d)
{
    uint32_t c = 0, want = d->labels ? SS_ROLE_LABEL : SS_ROLE_DENSE;
    while (c < d->n_columns && d->role[c] != want)
        c++;
    return c;
}

int tr_parse_is_header(const struct ss_data_cfg *data, const char *line, size_t len)
{
    ss_assert(data && (line || len == 0));
    if (data->format != SS_DATA_CSV || data->header == SS_HEADER_FALSE)
        return 0;
    if (data->header == SS_HEADER_TRUE)
        return 1;
    const char *end = s_end(line, len), *s;
    size_t n;
    float label;
    if (s_count_fields(line, end, data->delimiter) != data->n_columns)
        return 0;
    s = s_nth_field(line, end, data->delimiter, s_label_col(data), &n);
    if (!s || (data->labels ? s_label(s, n, &label) : s_dense(s, n, &label)) == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (isalpha((unsigned char)s[i]))
            return 1;
    return 0;
}

/* ---- explanations ---- */

/* Bounded message writer. */
struct s_msg {
    char *p;     /* destination */
    size_t cap;  /* its size */
    size_t len;  /* bytes written (clamped) */
};

__attribute__((format(printf, 2, 3)))
static void s_say(struct s_msg *m, const char *fmt, ...)
{
    va_list ap;
    if (m->len + 1 >= m->cap)
        return;
    va_start(ap, fmt);
    int w = vsnprintf(m->p + m->len, m->cap - m->len, fmt, ap);
    va_end(ap);
    if (w > 0)
        m->len = m->len + (size_t)w < m->cap ? m->len + (size_t)w : m->cap - 1;
}

/* Write s (n bytes) quoted, shortened to 40 bytes, non-printables as '?'. */
static void s_quote(struct s_msg *m, const char *s, size_t n)
{
    char buf[48];
    size_t k = n < 40 ? n : 40;
    for (size_t i = 0; i < k; i++)
        buf[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
    buf[k] = '\0';
    s_say(m, "'%s%s'", buf, n > k ? "..." : "");
}

/* "tab-separated", "comma-separated", ... */
static const char *s_sep_name(char c, char *buf, size_t n)
{
    switch (c) {
    case '\t': return "tab-separated";
    case ',': return "comma-separated";
    case ';': return "semicolon-separated";
    case ' ': return "space-separated";
    case '|': return "pipe-separated";
    default: snprintf(buf, n, "'%c'-separated", c); return buf;
    }
}

/* The separator among the usual ones that splits the line into the most
 * fields (ties: the first of tab, comma, semicolon, pipe, space). */
static char s_likely_sep(const char *line, const char *end, uint32_t *fields)
{
    static const char cands[] = {'\t', ',', ';', '|', ' '};
    char best = '\t';
    *fields = 0;
    for (size_t i = 0; i < sizeof cands; i++) {
        uint32_t n = s_count_fields(line, end, cands[i]);
        if (n > *fields) {
            *fields = n;
            best = cands[i];
        }
    }
    return best;
}

/* "label, 13 dense, 26 categorical" for the columns of d. */
static void s_say_layout(struct s_msg *m, const struct ss_data_cfg *d)
{
    uint32_t n[5] = {0};
    static const char *const names[5] = {"ignored", "label", "dense", "categorical", "multi"};
    const char *sep = "";
    for (uint32_t c = 0; c < d->n_columns; c++)
        n[d->role[c]]++;
    if (n[SS_ROLE_LABEL]) {
        s_say(m, "label");
        sep = ", ";
    }
    for (int r = 2; r <= 4; r++)
        if (n[r]) {
            s_say(m, "%s%u %s", sep, n[r], names[r]);
            sep = ", ";
        }
    if (n[0])
        s_say(m, ", %u %s", n[0], names[0]);
}

/* The hint for a line that does not look like the format at all. */
static void s_say_hint(struct s_msg *m, const struct ss_data_cfg *d, const char *line,
                       const char *end)
{
    const char *p = line, *w;
    size_t n;
    uint32_t fields;
    char sep = s_likely_sep(line, end, &fields), nb[8];
    int colons = 0;
    if (s_word(&p, end, &n) && (w = s_word(&p, end, &n)) != NULL)
        for (size_t i = 0; i < n; i++)
            colons += w[i] == ':';
    if (colons == 2 && d->format != SS_DATA_LIBFFM)
        s_say(m, "; the line looks like libffm (label field:index:value ...): set data.format: "
                 "libffm and data.fields");
    else if (colons == 1 && d->format != SS_DATA_LIBSVM)
        s_say(m, "; the line looks like libsvm (label index:value ...): set data.format: "
                 "libsvm");
    else if (d->format == SS_DATA_CSV && sep != d->delimiter && fields > 1)
        s_say(m, "; the line is %s: check data.delimiter", s_sep_name(sep, nb, sizeof nb));
    else if (d->format == SS_DATA_CSV)
        s_say(m, "; check data.columns (one role per column)");
    else if (fields > 1 && (d->format == SS_DATA_CRITEO_TSV || !s_blank(sep)))
        s_say(m, "; set data.format: csv with data.delimiter and data.columns, one role per "
                 "column (conf/avazu.yaml is an example)");
}

/* Wrong number of fields for criteo_tsv or csv: what was expected, what the
 * line holds, and a hint. */
static void s_explain_count(struct s_msg *m, const struct ss_data_cfg *d, const char *line,
                            const char *end, uint32_t found)
{
    uint32_t other;
    char sep = s_likely_sep(line, end, &other), nb[8], nb2[8];
    s_say(m, "expected %u %s fields (", d->n_columns, s_sep_name(d->delimiter, nb, sizeof nb));
    s_say_layout(m, d);
    if (sep != d->delimiter && other > found)
        s_say(m, "), found %u %s", other, s_sep_name(sep, nb2, sizeof nb2));
    else
        s_say(m, "), found %u", found);
    if (!d->labels && found == d->n_columns + 1)
        s_say(m, "; a label column first? set data.labels: true");
    else
        s_say_hint(m, d, line, end);
}

/* The first field of a criteo_tsv or csv line whose value is bad. */
static void s_explain_field(struct s_msg *m, const struct ss_data_cfg *d, const char *line,
                            const char *end)
{
    const char *p = line;
    bool more = true;
    float x;
    for (uint32_t c = 0; c < d->n_columns && more; c++) {
        size_t n;
        const char *s = s_field(&p, end, d->delimiter, &n, &more);
        int role = d->role[c];
        int crit = d->format == SS_DATA_CRITEO_TSV;
        bool bad_label = role == SS_ROLE_LABEL &&
                         (crit ? !(n == 1 && (s[0] == '0' || s[0] == '1'))
                               : s_label(s, n, &x) < 0);
        bool bad_dense = false;
        if (role == SS_ROLE_DENSE && crit) {
            const char *q = s;
            bool more2;
            bad_dense = s_parse_dense(&q, s + n, &x, &more2) != 0;
        } else if (role == SS_ROLE_DENSE) {
            bad_dense = s_dense(s, n, &x) < 0;
        }
        if (!bad_label && !bad_dense)
            continue;
        s_say(m, "field %u (%s): expected %s, found ", c + 1, bad_label ? "label" : "dense",
              bad_label ? (crit ? "0 or 1" : "0, 1, -1 or +1")
                        : (crit ? "an integer" : "a number"));
        s_quote(m, s, n);
        if (bad_label && c == 0 && d->format == SS_DATA_CSV && n && isalpha((unsigned char)s[0]))
            s_say(m, " (a header? data.header: true skips the first line of each file)");
        else if (bad_label && crit && n && (isdigit((unsigned char)s[0]) || s[0] == '-'))
            s_say(m, " (no label column, as in Criteo's test files? set data.labels: false)");
        return;
    }
    s_say(m, "a bad line");
}

/* Why a libsvm or libffm line is bad. */
static void s_explain_items(struct s_msg *m, const struct ss_data_cfg *d, const char *line,
                            const char *end)
{
    int ffm = d->format == SS_DATA_LIBFFM;
    const char *p = line, *w;
    size_t n;
    float x;
    uint64_t field, idx;
    double v;
    const char *q = p;
    w = s_word(&q, end, &n);
    if (!d->labels && !w) {
        s_say(m, "expected %s items (%s without labels: every token an item), found an empty "
              "line", ffm ? "field:index:value" : "index:value", ffm ? "libffm" : "libsvm");
        return;
    }
    if (d->labels && (!w || s_label(w, n, &x) < 0)) {
        s_say(m, "expected a label (0, 1, -1 or +1) first (%s: label %s ...), found ",
              ffm ? "libffm" : "libsvm", ffm ? "field:index:value" : "index:value");
        if (!w) {
            s_say(m, "an empty line");
        } else {
            s_quote(m, w, n);
            if (s_item(w, n, ffm, &field, &idx, &v) == 0) {
                s_say(m, " (no label, as in data to score? set data.labels: false)");
                return;
            }
        }
        s_say_hint(m, d, line, end);
        return;
    }
    if (d->labels)
        p = q;  /* past the label */
    for (uint32_t i = 1; (w = s_word(&p, end, &n)) != NULL; i++) {
        if (s_item(w, n, ffm, &field, &idx, &v) < 0) {
            s_say(m, "item %u ", i);
            s_quote(m, w, n);
            s_say(m, ": expected %s (%s: integer index, number value)",
                  ffm ? "field:index:value" : "index:value", ffm ? "libffm" : "libsvm");
            if (!d->labels && i == 1 && s_label(w, n, &x) == 0)
                s_say(m, "; a label first? set data.labels: true");
            else
                s_say_hint(m, d, line, end);
            return;
        }
        if (ffm && field >= d->n_fields) {
            s_say(m, "item %u ", i);
            s_quote(m, w, n);
            s_say(m, ": field %llu is not below data.fields = %u", (unsigned long long)field,
                  d->n_fields);
            return;
        }
    }
    s_say(m, "a bad line");
}

void tr_parse_explain(const struct ss_data_cfg *data, const char *line, size_t len, char *why,
                      size_t why_len)
{
    ss_assert(data && (line || len == 0) && why && why_len > 0);
    struct s_msg m = {why, why_len, 0};
    const char *end = s_end(line, len);
    struct tr_rows rows;
    why[0] = '\0';
    tr_rows_init(&rows, 1, data->n_dense, data->n_fields ? data->n_fields : 1);
    int ok = data->n_fields && tr_parse_line(data, line, len, &rows) == 0;
    tr_rows_fini(&rows);
    if (ok)
        return;
    if (data->format == SS_DATA_LIBSVM || data->format == SS_DATA_LIBFFM) {
        s_explain_items(&m, data, line, end);
        return;
    }
    uint32_t found = s_count_fields(line, end, data->delimiter);
    int crit = data->format == SS_DATA_CRITEO_TSV;
    if ((crit && (found < (data->labels ? 2u : 1u) || found > data->n_columns)) ||
        (!crit && found != data->n_columns))
        s_explain_count(&m, data, line, end, found);
    else
        s_explain_field(&m, data, line, end);
}

void tr_parse_criteo_layout(struct ss_data_cfg *data)
{
    ss_assert(data);
    memset(data, 0, sizeof *data);
    data->format = SS_DATA_CRITEO_TSV;
    data->header = SS_HEADER_AUTO;
    data->max_bad_fraction = 0.01;
    data->labels = 1;
    data->delimiter = '\t';
    data->multi_sep = '|';
    data->n_columns = TR_N_FIELDS;
    data->role[0] = SS_ROLE_LABEL;
    for (uint32_t c = 1; c < TR_N_FIELDS; c++)
        data->role[c] = c <= TR_N_DENSE ? SS_ROLE_DENSE : SS_ROLE_CATEGORICAL;
    data->n_dense = TR_N_DENSE;
    data->n_fields = TR_N_SPARSE;
}
