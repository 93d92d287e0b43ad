/* model_ab.c - this tree's dense step against another revision's tr_model.c,
 * in one process (bench/model-ab.sh builds it: the other tr_model.o with its
 * symbols renamed base_*, both on this tree's tr_gemm and BLAS).
 *
 *   model_ab [--precision fp32|bf16] [--rounds N] [--batches N] [--forward]
 *
 * The default shape (13 dense, 26 sparse, dim 16, 13-64-16, 367-64-1,
 * first-order terms) at batch 128, the same weights and 16 random batches
 * for both. Each round times forward + backward (--forward: the forward
 * alone) over the batches on one
 * model, then the other (who goes first alternates), in thread CPU time.
 * Prints, per round, ns per example of each and their ratio, then medians,
 * and whether every loss, parameter gradient and embedding gradient was
 * the same bit for bit (the exit status is 1 otherwise). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ss_hash.h"
#include "ss_mem.h"
#include "ss_time.h"
#include "tr_model.h"

#define AB_B 128u
#define AB_NB 16u

/* base_* : the other revision's functions (same signatures). */
tr_model_t *base_tr_model_new(const struct tr_model_conf *conf, char *err, size_t err_len);
void base_tr_model_destroy(tr_model_t **self_p);
tr_model_ws_t *base_tr_model_ws_new(const tr_model_t *self, uint32_t max_batch);
void base_tr_model_ws_destroy(tr_model_ws_t **ws_p);
float base_tr_model_forward(const tr_model_t *self, tr_model_ws_t *ws, const float *w, uint32_t B,
                            const float *dense, const float *emb, const float *labels,
                            float *probs_out);
void base_tr_model_backward(const tr_model_t *self, tr_model_ws_t *ws, const float *w,
                            float *grad_w, float *grad_emb);

struct side {
    tr_model_t *m;
    tr_model_ws_t *ws;
    float *grad[AB_NB];     /* each batch's gradients, kept for the comparison */
    float *gemb[AB_NB];
    float loss[AB_NB];
};

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"precision", required_argument, 0, 'p'},
                                         {"rounds", required_argument, 0, 'r'},
                                         {"batches", required_argument, 0, 'n'},
                                         {"forward", no_argument, 0, 'f'},
                                         {0, 0, 0, 0}};
    struct tr_model_conf conf = {.n_dense = 13, .n_sparse = 26, .dim = 16, .n_bottom = 2,
                                 .bottom = {64, 16}, .n_top = 2, .top = {64, 1},
                                 .first_order = 1, .precision = TR_MODEL_PREC_BF16};
    int rounds = 7, passes = 20, fwd_only = 0, c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'p')
            conf.precision = strcmp(optarg, "fp32") == 0 ? TR_MODEL_PREC_FP32 : TR_MODEL_PREC_BF16;
        else if (c == 'r')
            rounds = atoi(optarg);
        else if (c == 'n')
            passes = atoi(optarg);
        else if (c == 'f')
            fwd_only = 1;
        else
            return 2;
    }
    if (rounds < 1 || rounds > 99 || passes < 1)
        return 2;
    tr_model_blas_single_thread();
    struct side s[2];
    s[0].m = base_tr_model_new(&conf, NULL, 0);
    s[1].m = tr_model_new(&conf, NULL, 0);
    if (!s[0].m || !s[1].m)
        return 2;
    s[0].ws = base_tr_model_ws_new(s[0].m, AB_B);
    s[1].ws = tr_model_ws_new(s[1].m, AB_B);
    size_t n = tr_model_n_params(s[1].m), ne = (size_t)AB_B * conf.n_sparse * tr_model_row_dim(s[1].m);
    float *w = ss_aligned_alloc(64, n * sizeof(float));
    tr_model_init_params(s[1].m, w, 42);
    float *dense[AB_NB], *emb[AB_NB], labels[AB_B];
    uint64_t st = 9;
    for (uint32_t b = 0; b < AB_B; b++)
        labels[b] = (float)(b % 3 == 0);
    for (uint32_t k = 0; k < AB_NB; k++) {
        dense[k] = ss_malloc((size_t)AB_B * conf.n_dense * sizeof(float));
        emb[k] = ss_malloc(ne * sizeof(float));
        for (size_t i = 0; i < (size_t)AB_B * conf.n_dense; i++)
            dense[k][i] = 3.0f * ss_rand_unit(&st);
        for (size_t i = 0; i < ne; i++)
            emb[k][i] = 0.2f * ss_rand_unit(&st) - 0.1f;
        for (int j = 0; j < 2; j++) {
            s[j].grad[k] = ss_aligned_alloc(64, n * sizeof(float));
            s[j].gemb[k] = ss_malloc(ne * sizeof(float));
        }
    }
    double ns[2][100], ratio[100];
    for (int r = 0; r < rounds; r++) {
        for (int t = 0; t < 2; t++) {
            int j = (r + t) % 2;
            uint64_t t0 = ss_thread_cpu_ns();
            for (int p = 0; p < passes; p++)
                for (uint32_t k = 0; k < AB_NB; k++) {
                    if (j == 0) {
                        s[0].loss[k] = base_tr_model_forward(s[0].m, s[0].ws, w, AB_B, dense[k],
                                                             emb[k], labels, NULL);
                        if (!fwd_only)
                            base_tr_model_backward(s[0].m, s[0].ws, w, s[0].grad[k],
                                                   s[0].gemb[k]);
                    } else {
                        s[1].loss[k] = tr_model_forward(s[1].m, s[1].ws, w, AB_B, dense[k],
                                                        emb[k], labels, NULL);
                        if (!fwd_only)
                            tr_model_backward(s[1].m, s[1].ws, w, s[1].grad[k], s[1].gemb[k]);
                    }
                }
            ns[j][r] = (double)(ss_thread_cpu_ns() - t0) / ((double)passes * AB_NB * AB_B);
        }
        ratio[r] = ns[0][r] / ns[1][r];
        printf("{\"round\":%d,\"base_ns_per_example\":%.1f,\"now_ns_per_example\":%.1f,"
               "\"base_over_now\":%.3f}\n", r, ns[0][r], ns[1][r], ratio[r]);
    }
    size_t diff = 0;
    for (uint32_t k = 0; k < AB_NB; k++)  /* --forward: the losses */
        diff += memcmp(&s[0].loss[k], &s[1].loss[k], sizeof(float)) != 0 ||
                (!fwd_only && (memcmp(s[0].grad[k], s[1].grad[k], n * sizeof(float)) != 0 ||
                               memcmp(s[0].gemb[k], s[1].gemb[k], ne * sizeof(float)) != 0));
    qsort(ns[0], (size_t)rounds, sizeof(double), cmp_d);
    qsort(ns[1], (size_t)rounds, sizeof(double), cmp_d);
    qsort(ratio, (size_t)rounds, sizeof(double), cmp_d);
    printf("{\"bench\":\"model_ab\",\"precision\":\"%s\",\"rounds\":%d,"
           "\"base_ns_per_example_median\":%.1f,\"now_ns_per_example_median\":%.1f,"
           "\"ratio_median\":%.3f,\"ratio_min\":%.3f,\"ratio_max\":%.3f,"
           "\"batches_differing\":%zu}\n",
           conf.precision == TR_MODEL_PREC_FP32 ? "fp32" : "bf16", rounds, ns[0][rounds / 2],
           ns[1][rounds / 2], ratio[rounds / 2], ratio[0], ratio[rounds - 1], diff);
    return diff == 0 ? 0 : 1;
}
