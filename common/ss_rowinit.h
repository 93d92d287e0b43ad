/* ss_rowinit.h - the initial value of an embedding row: what a row that was
 * never stored holds.
 *
 * An embedding PS materializes a row on first touch with these values
 * (server/ps_embed.c), and a scorer without PS gives a row its model file
 * does not hold the same values (score/ss_model.c), so both answer a key
 * they never stored alike, bit for bit. The row is a function of the job
 * seed, the table, the key and the shape only: dim - first_order floats
 * uniform in [-init_scale, init_scale), each from one splitmix64 stream
 * seeded from (seed, table, key), then 0.0f for the first-order weight when
 * first_order is 1. All inline and thread-safe. */
#ifndef SS_ROWINIT_H
#define SS_ROWINIT_H

#include <stdint.h>

#include "ss_hash.h"

/* The salt of a table mixed into every key of it (also the embedding
 * shard's hash-map salt). */
static inline uint64_t ss_rowinit_table_salt(uint32_t table)
{
    return ss_mix64((uint64_t)table + 0x5851f42d4c957f2dull);
}

/* The hash of (table, key) an initial row is seeded from (the embedding
 * shard's map hashes keys the same way: it passes its hash to
 * ss_rowinit_row_hashed() instead of computing it again). */
static inline uint64_t ss_rowinit_key_hash(uint32_t table, uint64_t key)
{
    return ss_mix64(key ^ ss_rowinit_table_salt(table));
}

/* Write the initial row of the key whose ss_rowinit_key_hash() is key_hash
 * into row (dim floats, first-order weight included when first_order is 1;
 * dim > first_order). */
static inline void ss_rowinit_row_hashed(uint64_t seed, float init_scale, uint32_t dim,
                                         uint32_t first_order, uint64_t key_hash, float *row)
{
    uint64_t state = ss_mix64(seed ^ key_hash);
    uint32_t n_emb = dim - first_order;

    for (uint32_t i = 0; i < n_emb; i++)
        row[i] = init_scale * (2.0f * ss_rand_unit(&state) - 1.0f);
    if (first_order)
        row[n_emb] = 0.0f;
}

/* Write the initial row of (table, key) into row (dim floats, first-order
 * weight included when first_order is 1; dim > first_order). */
static inline void ss_rowinit_row(uint64_t seed, float init_scale, uint32_t dim,
                                  uint32_t first_order, uint32_t table, uint64_t key, float *row)
{
    ss_rowinit_row_hashed(seed, init_scale, dim, first_order, ss_rowinit_key_hash(table, key),
                          row);
}

#endif
