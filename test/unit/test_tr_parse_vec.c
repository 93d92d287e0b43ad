/* test_tr_parse_vec.c - the AVX-512 Criteo parser against the scalar
 * reference (tr_parse_criteo_isa): the same return code for every line and,
 * for good lines, the same example bit for bit.
 *
 * Lines: every line of the Criteo samples ($SS_DATA_DIR, default
 * ../shared/data, else test/data; a file in neither fails the test),
 * each also without its label and cut at every length; hand-made edge
 * cases; and seeded random mutations of real lines (tabs, digits, hex case,
 * signs, CRs, long lines). With SS_ISA=portable, or on a CPU without
 * AVX-512, both sides are the scalar parser and the test still runs. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ss_err.h"
#include "ss_hash.h"
#include "ss_isa.h"
#include "tr_parse.h"
#include "t_data.h"

#define S_MAX_LINE 4096   /* longest sample line kept */

/* Fill the stack below the caller with a pattern, so that a vector parser
 * reading a field bound it never wrote reads that, not the bound the
 * previous parse of the same line left at the same place. */
static __attribute__((noinline)) void s_poison_stack(void)
{
    volatile unsigned char buf[16384];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(0x5a + i);
}

/* The scalar parser against each vector one (SS_ISA_AVX512: the base scan;
 * SS_ISA_AMX: the best, VPCOMPRESSB's where the CPU has AVX512_VBMI2) on line
 * (len bytes) with and without labels; fail on any difference. Returns the
 * labelled rc. */
static int s_same(const char *line, size_t len)
{
    int rc_l = 0;
    for (int labels = 1; labels >= 0; labels--)
        for (enum ss_isa isa = SS_ISA_AVX512; isa <= SS_ISA_AMX; isa++) {
            struct tr_example a, b;
            memset(&a, 0x55, sizeof a);
            memset(&b, 0xaa, sizeof b);
            int ra = tr_parse_criteo_isa(line, len, labels, SS_ISA_PORTABLE, &a);
            s_poison_stack();
            int rb = tr_parse_criteo_isa(line, len, labels, isa, &b);
            if (ra != rb)
                fail_msg("labels %d, %s: scalar rc %d, vector rc %d on '%.*s'", labels,
                         ss_isa_name(isa), ra, rb, (int)(len < 200 ? len : 200), line);
            if (ra == 0 && memcmp(&a, &b, sizeof a) != 0) {
                for (int j = 0; j < TR_N_DENSE; j++)
                    if (memcmp(&a.dense[j], &b.dense[j], sizeof(float)) != 0)
                        fail_msg("dense %d: scalar %.9g, vector %.9g", j, (double)a.dense[j],
                                 (double)b.dense[j]);
                for (int f = 0; f < TR_N_SPARSE; f++)
                    if (a.keys[f] != b.keys[f])
                        fail_msg("key %d: scalar %#llx, vector %#llx", f,
                                 (unsigned long long)a.keys[f], (unsigned long long)b.keys[f]);
                fail_msg("labels %d: scalar %g, vector %g", labels, (double)a.label,
                         (double)b.label);
            }
            if (labels)
                rc_l = ra;
        }
    return rc_l;
}

/* Every line of rel through s_same; returns the lines and adds the good
 * ones to *good. */
static size_t s_file(const char *rel, size_t *good)
{
    char path[512], line[S_MAX_LINE];
    const char *p = t_data_file(rel, path, sizeof path);
    size_t n = 0;
    if (!p)
        return 0;
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f)) {
        size_t len = strcspn(line, "\n");
        *good += s_same(line, len) == 0;
        n++;
    }
    fclose(f);
    return n;
}

/* The Criteo samples, line by line: identical, and almost every line good. */
static void test_samples(void **state)
{
    (void)state;
    static const char *const files[] = {"criteo/criteo_train_head10k.tsv",
                                        "criteo/deepctr_criteo_sample.tsv"};
    print_message("parser under test: %s\n", ss_isa_name(ss_isa_get()));
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        size_t good = 0, n = s_file(files[i], &good);
        print_message("%s: %zu lines, %zu good, all identical\n", files[i], n, good);
        assert_true(n > 0 && good * 100 >= n * 99);
    }
}

/* Hand-made edge cases: both parsers agree, and the rc is the one wanted. */
static void test_edges(void **state)
{
    (void)state;
    char many[128], longl[1200];
    /* 40 feature fields: one too many */
    size_t n = (size_t)snprintf(many, sizeof many, "1");
    for (int i = 0; i < 39; i++)
        n += (size_t)snprintf(many + n, sizeof many - n, "\t");
    assert_int_equal(s_same(many, n), 0);         /* 39 empty features: good */
    many[n++] = '\t';
    assert_int_equal(s_same(many, n), SS_E_PROTO);  /* 40 */
    /* 38 tabs in the first 64 bytes (more than 32 in one chunk: the compress
     * scan's second half), every other field one byte: where each field starts
     * and ends matters */
    n = (size_t)snprintf(many, sizeof many, "1\t");
    for (int i = 0; i < 39; i++)
        n += (size_t)snprintf(many + n, sizeof many - n, "%s%s", i % 2 ? "" : i < 13 ? "7" : "a",
                              i < 38 ? "\t" : "");
    assert_true(n <= 64);
    assert_int_equal(s_same(many, n), 0);
    /* without the label: good unlabelled (s_same compares both modes; as a
     * labelled line its label "7" is bad) */
    assert_int_equal(s_same(many + 2, n - 2), SS_E_PROTO);
    /* a line past the vector parser's 512 bytes */
    n = (size_t)snprintf(longl, sizeof longl, "0\t1\t2");
    for (int i = 0; i < 37; i++)
        n += (size_t)snprintf(longl + n, sizeof longl - n, "\t%030d", i);
    assert_true(n > 512);
    assert_int_equal(s_same(longl, n), 0);
    static const char *const cases[] = {
        "", "1", "0\t", "2\t1", "1\t-", "1\t-5", "1\t--5", "1\t5-", "1\t+5", "1\t 5",
        "1\t99999999999999999999999", "1\t4095\t4096\t100000", "1\t\t\t\t\t\t\t\t\t\t\t\t\t\t68fd1e64",
        "1\t\t\t\t\t\t\t\t\t\t\t\t\t\t68FD1E64", "1\t\t\t\t\t\t\t\t\t\t\t\t\t\t68fd1e6",
        "1\t\t\t\t\t\t\t\t\t\t\t\t\t\t68fd1e64a", "1\t\t\t\t\t\t\t\t\t\t\t\t\t\tg8fd1e64",
        "1\t\t\t\t\t\t\t\t\t\t\t\t\t\t68fd1e64\r", "1\t3\r", "\r", "0\t\r\r",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        s_same(cases[i], strlen(cases[i]));
    assert_int_equal(s_same("1\t--5", 5), SS_E_PROTO);
    assert_int_equal(s_same("1\t4095\t4096\t100000", 18), 0);
}

/* One seeded mutation of line into out; returns its length. */
static size_t s_mutate(const char *line, size_t len, uint64_t *rng, char *out, size_t cap)
{
    static const char alphabet[] = "\t\t\t0123456789abcdefABCDEF-+ \r\n\0z";
    size_t n = len < cap ? len : cap;
    memcpy(out, line, n);
    int edits = 1 + (int)(ss_rand_next(rng) % 4);
    for (int e = 0; e < edits && n > 0; e++) {
        size_t at = (size_t)(ss_rand_next(rng) % n);
        char c = alphabet[ss_rand_next(rng) % (sizeof alphabet - 1)];
        switch (ss_rand_next(rng) % 4) {
        case 0: out[at] = c; break;                              /* replace */
        case 1:                                                  /* delete */
            memmove(out + at, out + at + 1, n - at - 1);
            n--;
            break;
        case 2:                                                  /* insert */
            if (n < cap) {
                memmove(out + at + 1, out + at, n - at);
                out[at] = c;
                n++;
            }
            break;
        default: n = at; break;                                  /* cut */
        }
    }
    return n;
}

/* Random mutations of the sample's first 500 lines, 40 each. */
static void test_mutations(void **state)
{
    (void)state;
    char path[512], line[S_MAX_LINE], out[S_MAX_LINE];
    const char *p = t_data_file("criteo/criteo_train_head10k.tsv", path, sizeof path);
    uint64_t rng = 12345;
    size_t tried = 0, good = 0;
    if (!p)
        return;
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    for (int i = 0; i < 500 && fgets(line, sizeof line, f); i++) {
        size_t len = strcspn(line, "\n");
        for (size_t cut = 0; cut <= len; cut += 7)   /* every 7th prefix */
            s_same(line, cut);
        for (int k = 0; k < 40; k++, tried++)
            good += s_same(out, s_mutate(line, len, &rng, out, sizeof out)) == 0;
    }
    fclose(f);
    print_message("%zu mutated lines, %zu good, all identical\n", tried, good);
    assert_true(good > 0 && good < tried);   /* both kinds were exercised */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_samples),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
