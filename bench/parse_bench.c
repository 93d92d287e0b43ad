/* parse_bench.c - the Criteo line parsers side by side, JSON on stdout.
 *
 *   parse_bench [--file PATH] [--reps N]
 *
 * Reads the file's lines (default test/data/criteo/criteo_train_head10k.tsv,
 * run from the repository root) into memory, then parses every line N times
 * (default 20) with the scalar reference parser, the AVX-512 one and the
 * best vector one (tr_parse_criteo_isa at SS_ISA_PORTABLE, SS_ISA_AVX512 and
 * SS_ISA_AMX: the tabs' places by VPCOMPRESSB where the CPU has
 * AVX512_VBMI2), in turn pass by pass so that a busy machine slows all alike.
 * Reports thread CPU ns per line of each, the ratios to the scalar one,
 * which parser tr_parse_criteo() takes here (ss_isa_get(); SS_ISA caps it),
 * whether the CPU has VBMI2, and how many lines a vector parser parsed
 * differently from the scalar one (must be 0; the exit status is 1
 * otherwise). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ss_isa.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_time.h"
#include "tr_parse.h"

/* The file's lines: one buffer, offsets of each line's start. */
struct s_lines {
    char *buf;        /* the file, '\n' kept between lines */
    size_t *start;    /* n + 1 offsets; line i is start[i] .. start[i+1] - 1 */
    size_t n;         /* lines */
};

static int s_read(const char *path, struct s_lines *l)
{
    FILE *f = fopen(path, "rb");
    long size;
    if (!f || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
        fprintf(stderr, "parse_bench: cannot read %s\n", path);
        if (f)
            fclose(f);
        return -1;
    }
    l->buf = ss_malloc((size_t)size + 1);
    size_t got = fread(l->buf, 1, (size_t)size, f);
    fclose(f);
    l->n = 0;
    l->start = ss_malloc((got + 2) * sizeof *l->start);
    for (size_t i = 0; i < got; i++)
        if (i == 0 || l->buf[i - 1] == '\n')
            l->start[l->n++] = i;
    l->start[l->n] = got + (got && l->buf[got - 1] != '\n');
    return l->n ? 0 : -1;
}

/* Parse every line once with isa; returns thread CPU ns, counts good lines
 * into *good and folds the examples into *sum (so nothing is optimized away). */
static uint64_t s_pass(const struct s_lines *l, enum ss_isa isa, size_t *good, uint64_t *sum)
{
    struct tr_example ex;
    uint64_t t0 = ss_thread_cpu_ns();
    for (size_t i = 0; i < l->n; i++) {
        size_t len = l->start[i + 1] - l->start[i] - 1;
        if (tr_parse_criteo_isa(l->buf + l->start[i], len, 1, isa, &ex) == 0) {
            (*good)++;
            *sum += ex.keys[0] ^ ex.keys[25];
        }
    }
    return ss_thread_cpu_ns() - t0;
}

/* Lines a vector parser parses differently from the scalar one (rc, or the
 * example's bytes). */
static size_t s_diff(const struct s_lines *l)
{
    size_t bad = 0;
    for (size_t i = 0; i < l->n; i++)
        for (enum ss_isa isa = SS_ISA_AVX512; isa <= SS_ISA_AMX; isa++) {
            struct tr_example a, b;
            size_t len = l->start[i + 1] - l->start[i] - 1;
            memset(&a, 0, sizeof a);
            memset(&b, 0, sizeof b);
            int ra = tr_parse_criteo_isa(l->buf + l->start[i], len, 1, SS_ISA_PORTABLE, &a);
            int rb = tr_parse_criteo_isa(l->buf + l->start[i], len, 1, isa, &b);
            bad += ra != rb || (ra == 0 && memcmp(&a, &b, sizeof a) != 0);
        }
    return bad;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"file", required_argument, 0, 'f'}, {"reps", required_argument, 0, 'r'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *path = "test/data/criteo/criteo_train_head10k.tsv";
    long reps = 20;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'f') {
            path = optarg;
        } else if (c == 'r') {
            reps = atol(optarg);
        } else {
            fprintf(stderr, "usage: parse_bench [--file PATH] [--reps N]\n");
            return c == 'h' ? 0 : 2;
        }
    }
    struct s_lines l;
    ss_log_init("bench", SS_LOG_WARN);
    if (reps < 1 || s_read(path, &l) != 0)
        return 2;
    static const enum ss_isa paths[3] = {SS_ISA_PORTABLE, SS_ISA_AVX512, SS_ISA_AMX};
    uint64_t ns[3] = {0, 0, 0}, sum = 0;
    size_t good[3] = {0, 0, 0};
    for (long r = 0; r < reps; r++)
        for (int k = 0; k < 3; k++) {   /* rotate who goes first */
            int which = (int)((r + k) % 3);
            ns[which] += s_pass(&l, paths[which], &good[which], &sum);
        }
    enum ss_isa isa = ss_isa_get();
    double lines = (double)l.n * (double)reps;
    size_t diff = s_diff(&l);
    printf("{\"bench\":\"parse\",\"file\":\"%s\",\"lines\":%zu,\"reps\":%ld,\"good_lines\":%zu,"
           "\"isa\":\"%s\",\"vbmi2\":%d,\"scalar_ns_per_line\":%.1f,\"vector_ns_per_line\":%.1f,"
           "\"best_ns_per_line\":%.1f,\"ratio_scalar_vs_vector\":%.3f,"
           "\"ratio_scalar_vs_best\":%.3f,\"lines_differing\":%zu,\"checksum\":%llu}\n",
           path, l.n, reps, good[0] / (size_t)reps, ss_isa_name(isa), ss_isa_has_vbmi2(),
           (double)ns[0] / lines, (double)ns[1] / lines, (double)ns[2] / lines,
           (double)ns[0] / (double)ns[1], (double)ns[0] / (double)ns[2], diff,
           (unsigned long long)(sum & 0xffff));
    ss_free(l.buf);
    ss_free(l.start);
    return diff == 0 ? 0 : 1;
}
