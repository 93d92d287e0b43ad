/* ss_hash.h - 64-bit hashing and deterministic pseudo-random numbers.
 *
 * ss_mix64 is the splitmix64/murmur3 finalizer: a bijection on uint64_t with
 * good avalanche, used to turn (table, raw value) into keys, keys into shard
 * numbers (the shard map is ss_key_shard() in ss_cluster.h) and keys into
 * initializer seeds. ss_hash_bytes hashes a buffer (FNV-1a 64 folded through
 * ss_mix64). All inline and thread-safe. */
#ifndef SS_HASH_H
#define SS_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t ss_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static inline uint64_t ss_hash_bytes(const void *data, size_t n, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return ss_mix64(h);
}

/* Key of a categorical value: table id in the top 8 bits' mix, never 0. */
static inline uint64_t ss_key_make(uint32_t table, uint64_t raw)
{
    uint64_t k = ss_mix64(raw ^ ((uint64_t)(table + 1) * 0x9e3779b97f4a7c15ull));
    return k ? k : 1;
}

/* The range [*off, *off + *len) of a dense vector of total floats that shard k
 * of n holds (the sync shards' slices of the EASGD center): equal parts, the
 * first total % n one float longer. */
static inline void ss_range_split(uint64_t total, uint64_t n, uint64_t k, uint64_t *off,
                                  uint64_t *len)
{
    uint64_t base = total / n, extra = total % n;
    *off = k * base + (k < extra ? k : extra);
    *len = base + (k < extra ? 1 : 0);
}

/* Id of the split ss_range_split() computes, recorded like SS_KEY_SHARD_MAP_ID. */
#define SS_RANGE_SPLIT_ID 1u

/* splitmix64 generator: state advances by the golden gamma. */
static inline uint64_t ss_rand_next(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ull;
    return ss_mix64(*state);
}

/* Uniform float in [0, 1). */
static inline float ss_rand_unit(uint64_t *state)
{
    return (float)(ss_rand_next(state) >> 40) * (1.0f / 16777216.0f);
}

/* Uniform double in [0, 1). */
static inline double ss_rand_unit_d(uint64_t *state)
{
    return (double)(ss_rand_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

#endif
