/* fuzz_parse_vec.c - libFuzzer harness: the AVX-512 Criteo parsers (the base
 * one, and VPCOMPRESSB's where the CPU has AVX512_VBMI2) against the scalar
 * reference (tr_parse_criteo_isa in tr_parse.h).
 *
 * Input: text. It is parsed as one line, and split at '\n' into lines, each
 * with and without labels, by both parsers. Checks: the same return code,
 * and for a good line the same example bit for bit (label, every dense
 * float's bits, every key); the parsers read nothing past the line (the
 * text is a private heap copy of exactly its length, so AddressSanitizer
 * catches a read beyond it). Where ss_isa_get() allows no AVX-512 (another
 * CPU, or SS_ISA=portable) both sides are the scalar parser: the harness
 * then only checks that it does not crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "ss_isa.h"
#include "tr_parse.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The scalar parser against each vector one (SS_ISA_AVX512: the base scan;
 * SS_ISA_AMX: the best, VPCOMPRESSB's where the CPU has AVX512_VBMI2) on one
 * line, both label modes. */
static void s_compare(const char *line, size_t len)
{
    for (int labels = 0; labels <= 1; labels++)
        for (enum ss_isa isa = SS_ISA_AVX512; isa <= SS_ISA_AMX; isa++) {
            struct tr_example a, b;
            memset(&a, 0, sizeof a);
            memset(&b, 0, sizeof b);
            int ra = tr_parse_criteo_isa(line, len, labels, SS_ISA_PORTABLE, &a);
            int rb = tr_parse_criteo_isa(line, len, labels, isa, &b);
            FUZZ_CHECK(ra == rb, "labels %d, %s: scalar rc %d, vector rc %d", labels,
                       ss_isa_name(isa), ra, rb);
            if (ra != 0)
                continue;
            FUZZ_CHECK(memcmp(&a.label, &b.label, sizeof a.label) == 0, "labels differ");
            for (int j = 0; j < TR_N_DENSE; j++)
                FUZZ_CHECK(memcmp(&a.dense[j], &b.dense[j], sizeof(float)) == 0,
                           "dense %d: scalar %.9g, vector %.9g", j, (double)a.dense[j],
                           (double)b.dense[j]);
            for (int f = 0; f < TR_N_SPARSE; f++)
                FUZZ_CHECK(a.keys[f] == b.keys[f], "key %d: scalar %#llx, vector %#llx", f,
                           (unsigned long long)a.keys[f], (unsigned long long)b.keys[f]);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy of exactly size bytes: a read past the line is caught */
    char *text = malloc(size ? size : 1);
    FUZZ_CHECK(text, "out of memory");
    memcpy(text, data, size);
    s_compare(text, size);
    for (size_t at = 0; at < size;) {
        const char *nl = memchr(text + at, '\n', size - at);
        size_t n = nl ? (size_t)(nl - (text + at)) : size - at;
        char *line = malloc(n ? n : 1);
        FUZZ_CHECK(line, "out of memory");
        memcpy(line, text + at, n);
        s_compare(line, n);
        free(line);
        at += n + 1;
    }
    free(text);
    return 0;
}

/* ------------------------------------------------------------------ seeds */

/* The first lines of a repository sample (run from its root). */
static void s_seed_file(const char *dir, const char *name, const char *path, int lines)
{
    char buf[8192];
    size_t n = fuzz_read_lines(path, lines, buf, sizeof buf);
    fuzz_seed(dir, name, buf, n);
}

static void s_write_seeds(const char *dir)
{
    static const char many[] = "1\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t"
                               "\t\t\t\t\t\t\t\n";
    s_seed_file(dir, "criteo", "test/data/criteo/criteo_train_head10k.tsv", 4);
    s_seed_file(dir, "deepctr", "test/data/criteo/deepctr_criteo_sample.tsv", 2);
    static const char *const texts[][2] = {
        {"short", "1\t5\t\t-3\n0\t\t\t\t\t\t\t\t\t\t\t\t\t\t68fd1e64\r\n"},
        {"hex", "0\t\t\t\t\t\t\t\t\t\t\t\t\t\t68FD1E64\t68fd1e6\tg8fd1e64\t68fd1e64a\t\n"},
        {"dense", "1\t-\t--5\t4095\t4096\t99999999999999999999999\t+1\t 2\n"},
        {"fields", many},
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        fuzz_seed(dir, texts[i][0], texts[i][1], strlen(texts[i][1]));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    fuzz_seed_mode(s_write_seeds);
    if (ss_isa_get() < SS_ISA_AVX512)
        fprintf(stderr, "fuzz_parse_vec: no AVX-512 here (or SS_ISA caps it): both sides "
                        "are the scalar parser\n");
    return 0;
}
