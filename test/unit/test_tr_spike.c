/* test_tr_spike.c - unit tests of the dense spike rule (tr_spike,
 * model.dense_skip_ratio).
 *
 * The norm on exact values; a window too short never calls a spike; a norm
 * at ratio times the median is a spike and one just below it is not, each
 * counted; a lasting rise stops being a spike; ratio 0 is off. Then threads
 * record into one window at once, as a trainer's workers do: under
 * SANITIZE=thread the run must stay silent, and every spike is counted. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>

#include "tr_spike.h"

#define RACE_THREADS 4
#define RACE_STEPS 2000

/* sqrt(3^2 + 4^2 + 12^2) = 13 */
static void test_norm(void **state)
{
    (void)state;
    const float g[3] = {3, -4, 12};
    assert_true(tr_spike_norm(g, 3) == 13.0);
    assert_true(tr_spike_norm(g, 0) == 0.0);
}

/* Fewer than TR_SPIKE_MIN norms before it: nothing is a spike. */
static void test_short_window(void **state)
{
    (void)state;
    struct tr_spike sp = {0};
    for (unsigned i = 0; i < TR_SPIKE_MIN; i++)
        assert_int_equal(tr_spike_check(&sp, i % 2 ? 1.0 : 1000.0, 2.0), 0);
    assert_int_equal(atomic_load(&sp.skipped), 0);
}

/* A window of 1s (median 1): 4.0 at ratio 4 is a spike, 3.999 is not. */
static void test_at_ratio(void **state)
{
    (void)state;
    struct tr_spike sp = {0};
    for (unsigned i = 0; i < TR_SPIKE_WINDOW; i++)
        assert_int_equal(tr_spike_check(&sp, 1.0, 4.0), 0);
    assert_int_equal(tr_spike_check(&sp, 3.999, 4.0), 0);
    assert_int_equal(atomic_load(&sp.skipped), 0);
    assert_int_equal(tr_spike_check(&sp, 4.0, 4.0), 1);
    assert_int_equal(atomic_load(&sp.skipped), 1);
    assert_int_equal(tr_spike_check(&sp, 1e30, 4.0), 1);
    assert_int_equal(atomic_load(&sp.skipped), 2);
}

/* The median, not the mean: a window of 1s and 3s (median 2 for an even
 * count) puts the bar at ratio * 2; a few huge norms do not move it. */
static void test_median(void **state)
{
    (void)state;
    struct tr_spike sp = {0};
    for (unsigned i = 0; i < TR_SPIKE_WINDOW; i++)
        tr_spike_check(&sp, i % 2 ? 1.0 : 3.0, 0.0);   /* off: records nothing */
    assert_int_equal(atomic_load(&sp.n), 0);
    for (unsigned i = 0; i < TR_SPIKE_WINDOW; i++)
        tr_spike_check(&sp, i % 2 ? 1.0 : 3.0, 100.0);
    assert_int_equal(tr_spike_check(&sp, 5.9, 3.0), 0);
    assert_int_equal(tr_spike_check(&sp, 6.1, 3.0), 1);
    struct tr_spike sq = {0};
    for (unsigned i = 0; i < TR_SPIKE_WINDOW; i++)
        tr_spike_check(&sq, i < 3 ? 1e6 : 1.0, 100.0);
    assert_int_equal(tr_spike_check(&sq, 3.0, 3.0), 1);
}

/* Norms that rise for good are spikes for at most half a window. */
static void test_lasting_rise(void **state)
{
    (void)state;
    struct tr_spike sp = {0};
    unsigned spikes = 0;
    for (unsigned i = 0; i < TR_SPIKE_WINDOW; i++)
        tr_spike_check(&sp, 1.0, 4.0);
    for (unsigned i = 0; i < 2 * TR_SPIKE_WINDOW; i++)
        spikes += (unsigned)tr_spike_check(&sp, 10.0, 4.0);
    assert_true(spikes >= 1 && spikes <= TR_SPIKE_WINDOW / 2);
    assert_int_equal(tr_spike_check(&sp, 10.0, 4.0), 0);
    assert_int_equal(atomic_load(&sp.skipped), spikes);
}

struct race {
    struct tr_spike *sp;
    unsigned id;
    unsigned spikes;
};

static void *s_racer(void *arg)
{
    struct race *r = arg;
    for (unsigned i = 0; i < RACE_STEPS; i++)   /* every 50th norm of each thread is 100 */
        r->spikes += (unsigned)tr_spike_check(r->sp, (i + r->id) % 50 ? 1.0 : 100.0, 4.0);
    return NULL;
}

/* Threads on one window: its count is the sum of what each was told. */
static void test_threads(void **state)
{
    (void)state;
    struct tr_spike sp = {0};
    pthread_t t[RACE_THREADS];
    struct race r[RACE_THREADS];
    unsigned total = 0;
    for (unsigned i = 0; i < RACE_THREADS; i++) {
        r[i] = (struct race){&sp, i, 0};
        assert_int_equal(pthread_create(&t[i], NULL, s_racer, &r[i]), 0);
    }
    for (unsigned i = 0; i < RACE_THREADS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        total += r[i].spikes;
    }
    assert_int_equal(atomic_load(&sp.n), RACE_THREADS * RACE_STEPS);
    assert_int_equal(atomic_load(&sp.skipped), total);
    assert_true(total > 0 && total <= RACE_THREADS * RACE_STEPS / 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_norm),
        cmocka_unit_test(test_short_window),
        cmocka_unit_test(test_at_ratio),
        cmocka_unit_test(test_median),
        cmocka_unit_test(test_lasting_rise),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
