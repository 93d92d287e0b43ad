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
#include <cmocka.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_floor_fade),
        cmocka_unit_test(test_warmup_off),
        cmocka_unit_test(test_warmup_ramp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
