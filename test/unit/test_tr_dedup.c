/* test_tr_dedup.c - unit tests of trainer/tr_dedup: the key set that maps a
 * key to its first position, emptied in O(1), against a plain search. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ss_hash.h"
#include "tr_dedup.h"

/* Insert keys [n] into a fresh set and check every answer against the first
 * index of the same key in keys. */
static void s_check_set(struct tr_dedup *d, const uint64_t *keys, uint32_t n)
{
    tr_dedup_begin(d, n);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t want = i;
        for (uint32_t j = 0; j < i; j++)
            if (keys[j] == keys[i]) {
                want = j;
                break;
            }
        assert_int_equal(tr_dedup_insert(d, keys[i], i), want);
    }
}

/* Duplicates answer the first position; a new set forgets the old keys. */
static void test_first_position(void **state)
{
    (void)state;
    struct tr_dedup d;
    tr_dedup_init(&d);
    const uint64_t keys[] = {5, 9, 5, 0, 9, 9, UINT64_MAX, 0, 5};
    s_check_set(&d, keys, 9);
    tr_dedup_begin(&d, 4);
    assert_int_equal(tr_dedup_insert(&d, 9, 7), 7);   /* new again */
    assert_int_equal(tr_dedup_insert(&d, 5, 8), 8);
    assert_int_equal(tr_dedup_insert(&d, 9, 9), 7);
    tr_dedup_fini(&d);
}

/* Keys that share their low bits or their high bits (the hash uses the top
 * bits of key * phi) still work: probing over full sets, sets of every size
 * and the table growing while old stamps remain in its slots. */
static void test_colliding_and_growing(void **state)
{
    (void)state;
    struct tr_dedup d;
    uint64_t keys[600], st = 3;
    tr_dedup_init(&d);
    for (uint32_t n = 1; n <= 600; n = n * 3 / 2 + 1) {
        for (uint32_t i = 0; i < n; i++) {
            switch (i % 3) {
            case 0: keys[i] = (uint64_t)(i % 37) << 40; break;      /* low bits equal */
            case 1: keys[i] = (ss_rand_next(&st) % 50) | 0xff00000000000000ull; break;
            default: keys[i] = ss_rand_next(&st); break;
            }
        }
        s_check_set(&d, keys, n);
        s_check_set(&d, keys, n / 2);  /* smaller set on the larger table */
    }
    tr_dedup_fini(&d);
}

/* The stamp wrapping around empties every slot for real. */
static void test_stamp_wrap(void **state)
{
    (void)state;
    struct tr_dedup d;
    tr_dedup_init(&d);
    tr_dedup_begin(&d, 8);
    assert_int_equal(tr_dedup_insert(&d, 42, 0), 0);
    d.stamp = UINT32_MAX;  /* the next begin wraps */
    tr_dedup_begin(&d, 8);
    assert_int_equal(d.stamp, 1u);
    assert_int_equal(tr_dedup_insert(&d, 42, 3), 3);
    assert_int_equal(tr_dedup_insert(&d, 42, 4), 3);
    tr_dedup_begin(&d, 8);
    assert_int_equal(tr_dedup_insert(&d, 42, 5), 5);
    tr_dedup_fini(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_position),
        cmocka_unit_test(test_colliding_and_growing),
        cmocka_unit_test(test_stamp_wrap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
