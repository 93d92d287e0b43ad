/* test_tr_warmup.c - unit tests of the warm-up's end by a share of the first
 * pass (model.warmup_share, tr_worker_warmup_lr).
 *
 * The dense rate of a batch is lr * min(1, max((examples_done + n) /
 * warmup_examples, first_pass_at / warmup_share)): the ramp ends at whichever
 * of the two comes first. Values exact in float. The examples-only ramp
 * (share 0) is test_tr_worker's. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tr_worker.h"
#include "t.h"

/* Share 0 is the examples-only ramp at every place in the pass; warm-up 0 is
 * off whatever the share. */
static void test_share_off(void **state)
{
    (void)state;
    for (uint64_t done = 0; done < 1200; done += 64) {
        ASSERT_FEQ(tr_worker_warmup_lr(0.5, 1024, 0, done, 128, 0.9),
                   tr_worker_dense_lr(0.5, 1024, done, 128));
        ASSERT_FEQ(tr_worker_warmup_lr(0.5, 1024, 0, done, 128, 0.0),
                   tr_worker_dense_lr(0.5, 1024, done, 128));
    }
    ASSERT_FEQ(tr_worker_warmup_lr(0.5, 0, 0.5, 0, 128, 0.01), 0.5f);
    ASSERT_FEQ(tr_worker_warmup_lr(0.5, 0, 0, 0, 128, 0), 0.5f);
}

/* A small pass: with 4,096 warm-up examples and share 0.25, the first pass's
 * place leads. At 1/16 of the pass the rate is lr / 4 (the examples alone
 * would give 128 / 4096 = lr / 32), at 1/8 lr / 2, and from 1/4 of the pass
 * on lr itself, long before 4,096 examples. */
static void test_share_ends_first(void **state)
{
    (void)state;
    ASSERT_FEQ(tr_worker_warmup_lr(0.5, 4096, 0.25, 0, 128, 0.0625), 0.125f);
    ASSERT_FEQ(tr_worker_warmup_lr(0.5, 4096, 0.25, 256, 128, 0.125), 0.25f);
    ASSERT_FEQ(tr_worker_warmup_lr(0.5, 4096, 0.25, 512, 128, 0.25), 0.5f);
    ASSERT_FEQ(tr_worker_warmup_lr(0.5, 4096, 0.25, 512, 128, 0.5), 0.5f);
    ASSERT_FEQ(tr_worker_warmup_lr(0.5, 4096, 1.0, 0, 128, 1.0), 0.5f);  /* pass 2 */
    /* monotone along a pass, never above lr */
    float prev = 0.0f;
    for (int i = 0; i <= 64; i++) {
        float lr = tr_worker_warmup_lr(0.5, 4096, 0.25, (uint64_t)i * 16, 16, i / 64.0);
        if (!(lr >= prev && lr <= 0.5f))
            fail_msg("lr %.9g at 1/64 * %d of the pass after %.9g", (double)lr, i,
                     (double)prev);
        prev = lr;
    }
    ASSERT_FEQ(prev, 0.5f);
}

/* A large pass: the examples lead and the share changes nothing. With 1,024
 * warm-up examples and share 0.5, at 1% of the pass the ramp is the
 * examples' (the batch ending at 512 gets lr / 2, from 1,024 on lr). */
static void test_examples_end_first(void **state)
{
    (void)state;
    ASSERT_FEQ(tr_worker_warmup_lr(0.5, 1024, 0.5, 384, 128, 0.00390625), 0.25f);
    ASSERT_FEQ(tr_worker_warmup_lr(0.5, 1024, 0.5, 896, 128, 0.0078125), 0.5f);
    ASSERT_FEQ(tr_worker_warmup_lr(0.5, 1024, 0.5, 0, 128, 0.0078125), 0.0625f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_share_off),
        cmocka_unit_test(test_share_ends_first),
        cmocka_unit_test(test_examples_end_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
