/* test_tr_worker.c - unit tests of the worker's pure parts (tr_worker).
 *
 * The dense learning-rate warm-up (model.warmup_examples) against its formula:
 * lr * min(1, (examples_done + n) / warmup), and the decay over the run
 * (model.lr_decay): lr * (1 - decay * progress), on values exact in float. The
 * loop itself needs parameter servers and is covered by test/integration. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tr_worker.h"
#include "t.h"

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

/* Off (0): lr at every point of the run, and past either end. */
static void test_decay_off(void **state)
{
    (void)state;
    ASSERT_FEQ((float)tr_worker_decayed_lr(0.05, 0, 0), 0.05f);
    ASSERT_FEQ((float)tr_worker_decayed_lr(0.05, 0, 0.5), 0.05f);
    ASSERT_FEQ((float)tr_worker_decayed_lr(0.05, 0, 1), 0.05f);
    ASSERT_FEQ((float)tr_worker_decayed_lr(0.05, 0, 7), 0.05f);
}

/* A straight line from lr at the start to (1 - decay) * lr at the end of the
 * last epoch: with 2 epochs, decay 0.5 and lr 0.5, epoch 1 starts at 0.5,
 * ends at 0.375 (progress 0.5), and epoch 2 ends at 0.25; progress outside
 * [0, 1] (read-ahead past the end) is clamped. */
static void test_decay_line(void **state)
{
    (void)state;
    ASSERT_FEQ((float)tr_worker_decayed_lr(0.5, 0.5, 0), 0.5f);
    ASSERT_FEQ((float)tr_worker_decayed_lr(0.5, 0.5, 0.25), 0.4375f);
    ASSERT_FEQ((float)tr_worker_decayed_lr(0.5, 0.5, 0.5), 0.375f);
    ASSERT_FEQ((float)tr_worker_decayed_lr(0.5, 0.5, 1), 0.25f);
    ASSERT_FEQ((float)tr_worker_decayed_lr(0.5, 0.5, 1.25), 0.25f);
    ASSERT_FEQ((float)tr_worker_decayed_lr(0.5, 0.5, -0.5), 0.5f);
    ASSERT_FEQ((float)tr_worker_decayed_lr(0.5, 1, 1), 0.0f);  /* decay 1 ends at 0 */
    /* with the warm-up on top: the first batch of a 1024-example warm-up at
     * progress 0.5 gets the decayed rate / 8 */
    ASSERT_FEQ(tr_worker_dense_lr(tr_worker_decayed_lr(0.5, 0.5, 0.5), 1024, 0, 128),
               0.046875f);
    /* strictly falling along the run */
    double prev = 1.0;
    for (int i = 0; i <= 100; i++) {
        double lr = tr_worker_decayed_lr(0.5, 0.75, i / 100.0);
        if (!(lr < prev))
            fail_msg("lr %.9g at progress %d%% is not below %.9g", lr, i, prev);
        prev = lr;
    }
    ASSERT_FEQ((float)prev, 0.125f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warmup_off),
        cmocka_unit_test(test_warmup_ramp),
        cmocka_unit_test(test_decay_off),
        cmocka_unit_test(test_decay_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
