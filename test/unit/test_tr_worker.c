/* test_tr_worker.c - unit tests of the worker's pure parts (tr_worker).
 *
 * The dense learning-rate warm-up (model.warmup_examples) against its formula:
 * lr * min(1, (examples_done + n) / warmup), and model.adagrad_floor's fade
 * (model.adagrad_floor_examples), on values exact in float. The loop
 * itself needs parameter servers and is covered by test/integration. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "ss_cfg.h"
#include "tr_worker.h"
#include "t.h"

/* model.adagrad_floor_examples: gamma whole when 0, else a line down to 0. */
static void test_floor_fade(void **state)
{
    (void)state;
    ASSERT_FEQ(tr_worker_floor_gamma(0.25, 0, 0), 0.25f);
    ASSERT_FEQ(tr_worker_floor_gamma(0.25, 0, 1u << 30), 0.25f);
    ASSERT_FEQ(tr_worker_floor_gamma(0.25, 1024, 0), 0.25f);
    ASSERT_FEQ(tr_worker_floor_gamma(0.25, 1024, 256), 0.1875f);
    ASSERT_FEQ(tr_worker_floor_gamma(0.25, 1024, 768), 0.0625f);
    ASSERT_FEQ(tr_worker_floor_gamma(0.25, 1024, 1024), 0.0f);
    ASSERT_FEQ(tr_worker_floor_gamma(0.25, 1024, 5000), 0.0f);
    ASSERT_FEQ(tr_worker_floor_gamma(0.0, 1024, 0), 0.0f);
}

/* Off (0): always lr. */
static void test_warmup_off(void **state)
{
    (void)state;
    ASSERT_FEQ(tr_worker_dense_lr(0.05, 0, 0, 128), 0.05f);
    ASSERT_FEQ(tr_worker_dense_lr(0.05, 0, 1000000, 1), 0.05f);
}

/* Linear from near 0: the first batch of 128 of a 1024-example warm-up gets
 * lr / 8, the batch ending at 512 gets lr / 2, from 1024 on lr itself. */
static void test_warmup_ramp(void **state)
{
    (void)state;
    ASSERT_FEQ(tr_worker_dense_lr(0.5, 1024, 0, 128), 0.0625f);
    ASSERT_FEQ(tr_worker_dense_lr(0.5, 1024, 384, 128), 0.25f);
    ASSERT_FEQ(tr_worker_dense_lr(0.5, 1024, 896, 128), 0.5f);    /* ends exactly there */
    ASSERT_FEQ(tr_worker_dense_lr(0.5, 1024, 1024, 128), 0.5f);
    ASSERT_FEQ(tr_worker_dense_lr(0.5, 1024, 1u << 30, 1), 0.5f);  /* never above lr */
    ASSERT_FEQ(tr_worker_dense_lr(0.5, 1024, 1020, 128), 0.5f);   /* a batch across the end */
    /* monotone, and a batch of one example still moves */
    float prev = 0.0f;
    for (uint64_t done = 0; done < 1100; done += 7) {
        float lr = tr_worker_dense_lr(0.5, 1024, done, 1);
        if (!(lr > prev || lr == 0.5f))
            fail_msg("lr %.9g after %llu examples is not above %.9g", (double)lr,
                     (unsigned long long)done, (double)prev);
        prev = lr;
    }
    ASSERT_FEQ(tr_worker_dense_lr(0.5, 1024, 0, 1), 0.5f / 1024.0f);
}

/* Scoring reads TR_WORKER_SCORE_BATCH rows at a time where the limits leave
 * room for a round of every worker's batch (half of each limit, at
 * TR_WORKER_SCORE_VALUES values per field), fewer where they do not
 * (halved), and never fewer than trainer.batch_size. */
static void test_score_batch(void **state)
{
    (void)state;
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    assert_non_null(cfg);
    ss_cfg_defaults(cfg);
    cfg->data.n_fields = 26;
    cfg->workers = 2;
    cfg->batch_size = 128;   /* the default limits: the whole scoring batch */
    assert_int_equal(tr_worker_score_batch(cfg), TR_WORKER_SCORE_BATCH);
    cfg->batch_size = 3000;   /* larger than the scoring batch: kept */
    assert_int_equal(tr_worker_score_batch(cfg), 3000);
    cfg->batch_size = 100;
    /* keys: 2 workers x 26 fields x the values allowed a row; 256 rows fit
     * in half the limit, 512 do not */
    uint64_t per_row = 2ull * 26 * TR_WORKER_SCORE_VALUES;
    cfg->max_keys_per_request = (int64_t)(2 * 256 * per_row);
    assert_int_equal(tr_worker_score_batch(cfg), 256);
    /* a limit that leaves no room above batch_size: batch_size */
    cfg->max_keys_per_request = 1000;
    assert_int_equal(tr_worker_score_batch(cfg), 100);
    cfg->max_keys_per_request = 1 << 26;
    /* the reply: those keys' rows of row_dim floats, under half the limit */
    uint64_t row_bytes = per_row * ss_cfg_row_dim(cfg) * sizeof(float);
    cfg->max_message_bytes = (int64_t)(2 * (512 * row_bytes + 4096));
    assert_int_equal(tr_worker_score_batch(cfg), 512);
    free(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_floor_fade),
        cmocka_unit_test(test_warmup_off),
        cmocka_unit_test(test_warmup_ramp),
        cmocka_unit_test(test_score_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
