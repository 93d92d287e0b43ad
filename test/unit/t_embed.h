/* t_embed.h - what the unit tests of an embedding shard (ps_embed) share:
 * two shards fed the same requests by two paths must end with the same
 * rows. Include after <cmocka.h>. */
#ifndef T_EMBED_H
#define T_EMBED_H

#include <stdint.h>
#include <stdlib.h>

#include "ps_embed.h"

/* Check that shards a and b hold the same row, with its optimizer state, bit
 * for bit, for each key of n_req requests of n_keys keys each at keys (key i
 * of a request in table i / per), or that neither stores it; then that a's
 * invariants hold (ps_embed_verify). */
static inline void t_embed_rows_equal(ps_embed_t *a, ps_embed_t *b, const uint64_t *keys,
                                      size_t n_req, size_t n_keys, size_t per)
{
    size_t len = ps_embed_row_floats(a);
    float *xa = malloc(len * sizeof *xa), *xb = malloc(len * sizeof *xb);
    assert_non_null(xa);
    assert_non_null(xb);
    assert_int_equal(len, ps_embed_row_floats(b));
    for (size_t i = 0; i < n_req * n_keys; i++) {
        uint32_t t = (uint32_t)(i % n_keys / per);
        int rca = ps_embed_read_row(a, t, keys[i], xa);
        assert_int_equal(rca, ps_embed_read_row(b, t, keys[i], xb));
        if (rca == 0)
            assert_memory_equal(xa, xb, len * sizeof *xa);
    }
    free(xa);
    free(xb);
    assert_int_equal(ps_embed_verify(a), 0);
}

#endif
