/* dedup_bench.c - a worker's per-batch key de-duplication (tr_dedup_batch)
 * against a simple reference, JSON on stdout.
 *
 *   dedup_bench [--file PATH] [--batch B] [--shards S] [--reps N]
 *
 * Reads the file's Criteo lines (default
 * test/data/criteo/criteo_train_head10k.tsv, run from the repository root),
 * parses them (tr_parse_criteo) into batches of B examples (default 128) of
 * 26 single-valued fields, then groups every batch N times (default 20) for
 * S shards (default 2) with tr_dedup_batch and with the reference, in turn
 * pass by pass so that a busy machine slows both alike. The reference is the
 * same field-major walk with a branch on whether each key is new (the
 * client's grouping before tr_dedup_batch, and the plainest form of it).
 * Reports thread CPU ns per key of each, their ratio, the share of unique
 * keys, and how many batches the two grouped differently (must be 0; the
 * exit status is 1 otherwise). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ss_cluster.h"
#include "ss_mem.h"
#include "ss_time.h"
#include "tr_dedup.h"
#include "tr_parse.h"

/* One grouping's output. */
struct s_out {
    struct tr_dedup_part parts[16];
    uint32_t *pos_shard, *pos_index;
};

static void s_out_init(struct s_out *o, uint32_t S, size_t n, uint32_t F)
{
    for (uint32_t s = 0; s < S; s++) {
        o->parts[s].keys = ss_malloc(n * sizeof(uint64_t));
        o->parts[s].tables = ss_malloc(F * sizeof(uint32_t));
        o->parts[s].counts = ss_malloc(F * sizeof(uint32_t));
    }
    o->pos_shard = ss_malloc(n * sizeof(uint32_t));
    o->pos_index = ss_malloc(n * sizeof(uint32_t));
}

/* The reference: branch on each key's novelty, a group opened at its first
 * key. */
__attribute__((noipa)) static void s_reference(struct tr_dedup *d, const uint64_t *keys, const uint32_t *offs,
                        uint32_t B, uint32_t F, struct s_out *o, uint32_t S)
{
    for (uint32_t s = 0; s < S; s++)
        o->parts[s].n_keys = o->parts[s].n_groups = 0;
    for (uint32_t f = 0; f < F; f++) {
        size_t n = 0;
        for (uint32_t b = 0; b < B; b++)
            n += offs[(size_t)b * F + f + 1] - offs[(size_t)b * F + f];
        tr_dedup_begin(d, n);
        for (uint32_t b = 0; b < B; b++) {
            size_t p = (size_t)b * F + f;
            for (uint32_t i = offs[p]; i < offs[p + 1]; i++) {
                uint32_t first = tr_dedup_insert(d, keys[i], i);  /* the same set */
                if (first != i) {
                    o->pos_shard[i] = o->pos_shard[first];
                    o->pos_index[i] = o->pos_index[first];
                    continue;
                }
                uint32_t s = S > 1 ? ss_key_shard(keys[i], S) : 0;
                struct tr_dedup_part *pt = &o->parts[s];
                if (pt->n_groups == 0 || pt->tables[pt->n_groups - 1] != f) {
                    pt->tables[pt->n_groups] = f;
                    pt->counts[pt->n_groups++] = 0;
                }
                pt->counts[pt->n_groups - 1]++;
                pt->keys[pt->n_keys] = keys[i];
                o->pos_shard[i] = s;
                o->pos_index[i] = (uint32_t)pt->n_keys++;
            }
        }
    }
}

/* 1 when a and b grouped n values alike. */
static int s_same(const struct s_out *a, const struct s_out *b, uint32_t S, size_t n)
{
    for (uint32_t s = 0; s < S; s++) {
        const struct tr_dedup_part *x = &a->parts[s], *y = &b->parts[s];
        if (x->n_keys != y->n_keys || x->n_groups != y->n_groups ||
            memcmp(x->keys, y->keys, x->n_keys * sizeof(uint64_t)) ||
            memcmp(x->tables, y->tables, x->n_groups * sizeof(uint32_t)) ||
            memcmp(x->counts, y->counts, x->n_groups * sizeof(uint32_t)))
            return 0;
    }
    return !memcmp(a->pos_shard, b->pos_shard, n * sizeof(uint32_t)) &&
           !memcmp(a->pos_index, b->pos_index, n * sizeof(uint32_t));
}

int main(int argc, char **argv)
{
    const char *path = "test/data/criteo/criteo_train_head10k.tsv";
    uint32_t B = 128, S = 2, F = TR_N_SPARSE;
    int reps = 20, c;
    while ((c = getopt_long(argc, argv, "f:b:s:r:",
                            (const struct option[]){{"file", 1, 0, 'f'},
                                                    {"batch", 1, 0, 'b'},
                                                    {"shards", 1, 0, 's'},
                                                    {"reps", 1, 0, 'r'},
                                                    {0, 0, 0, 0}},
                            NULL)) != -1) {
        if (c == 'f')
            path = optarg;
        else if (c == 'b')
            B = (uint32_t)atoi(optarg);
        else if (c == 's')
            S = (uint32_t)atoi(optarg);
        else if (c == 'r')
            reps = atoi(optarg);
        else
            return 2;
    }
    if (B < 1 || S < 1 || S > 16 || reps < 1) {
        fprintf(stderr, "dedup_bench: --batch >= 1, --shards 1..16, --reps >= 1\n");
        return 2;
    }
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "dedup_bench: cannot read %s\n", path);
        return 2;
    }
    size_t cap = 1024, n_ex = 0;
    uint64_t *keys = ss_malloc(cap * F * sizeof(uint64_t));
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t len;
    struct tr_example ex;
    while ((len = getline(&line, &line_cap, fp)) > 0) {
        if (line[len - 1] == '\n')
            len--;
        if (tr_parse_criteo(line, (size_t)len, &ex) != 0)
            continue;
        if (n_ex == cap) {
            cap *= 2;
            keys = ss_realloc(keys, cap * F * sizeof(uint64_t));
        }
        memcpy(keys + n_ex * F, ex.keys, F * sizeof(uint64_t));
        n_ex++;
    }
    free(line);
    fclose(fp);
    size_t n_batches = n_ex / B;
    if (n_batches == 0) {
        fprintf(stderr, "dedup_bench: fewer than %u lines in %s\n", B, path);
        return 2;
    }
    size_t n_vals = (size_t)B * F;
    uint32_t *offs = ss_malloc((n_vals + 1) * sizeof(uint32_t));
    for (size_t i = 0; i <= n_vals; i++)
        offs[i] = (uint32_t)i;
    struct s_out a, r;
    s_out_init(&a, S, n_vals, F);
    s_out_init(&r, S, n_vals, F);
    struct tr_dedup da, dr;
    tr_dedup_init(&da);
    tr_dedup_init(&dr);
    uint64_t ns_a = 0, ns_r = 0, unique = 0, differ = 0;
    for (int rep = 0; rep < reps; rep++) {
        for (int which = 0; which < 2; which++) {
            uint64_t t0 = ss_thread_cpu_ns();
            for (size_t bt = 0; bt < n_batches; bt++) {
                const uint64_t *k = keys + bt * n_vals;
                if (which == 0)
                    tr_dedup_batch(&da, k, offs, B, F, a.parts, S, a.pos_shard, a.pos_index);
                else
                    s_reference(&dr, k, offs, B, F, &r, S);
            }
            uint64_t t = ss_thread_cpu_ns() - t0;
            *(which == 0 ? &ns_a : &ns_r) += t;
        }
    }
    for (size_t bt = 0; bt < n_batches; bt++) {  /* checked apart from the timing */
        const uint64_t *k = keys + bt * n_vals;
        tr_dedup_batch(&da, k, offs, B, F, a.parts, S, a.pos_shard, a.pos_index);
        s_reference(&dr, k, offs, B, F, &r, S);
        differ += !s_same(&a, &r, S, n_vals);
        for (uint32_t s = 0; s < S; s++)
            unique += a.parts[s].n_keys;
    }
    double n_keys = (double)n_batches * (double)n_vals * reps;
    printf("{\"bench\":\"dedup\",\"batch\":%u,\"shards\":%u,\"batches\":%zu,\"reps\":%d,"
           "\"unique_share\":%.3f,\"ns_per_key\":%.2f,\"reference_ns_per_key\":%.2f,"
           "\"speedup\":%.2f,\"batches_differing\":%llu}\n",
           B, S, n_batches, reps, (double)unique / ((double)n_batches * (double)n_vals),
           (double)ns_a / n_keys, (double)ns_r / n_keys, (double)ns_r / (double)ns_a,
           (unsigned long long)differ);
    return differ ? 1 : 0;
}
