/* tr_spike.c - the dense spike rule: a batch norm against the median of the
 * trainer's recent ones. */
#include "tr_spike.h"

#include <math.h>
#include <stdlib.h>

#include "ss_assert.h"

double tr_spike_norm(const float *g, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)g[i] * g[i];
    return sqrt(s);
}

static int s_cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

int tr_spike_check(struct tr_spike *self, double norm, double ratio)
{
    float v[TR_SPIKE_WINDOW];
    size_t have = 0;
    int spike = 0;

    ss_assert(self);
    if (ratio <= 0)
        return 0;
    uint64_t k = atomic_fetch_add_explicit(&self->n, 1, memory_order_relaxed);
    for (size_t i = 0; i < TR_SPIKE_WINDOW; i++) {
        float x = atomic_load_explicit(&self->norm[i], memory_order_relaxed);
        if (x > 0)
            v[have++] = x;
    }
    if (have >= TR_SPIKE_MIN) {
        qsort(v, have, sizeof v[0], s_cmp_float);
        double med = have % 2 ? v[have / 2] : 0.5 * ((double)v[have / 2 - 1] + v[have / 2]);
        spike = norm >= ratio * med;
    }
    atomic_store_explicit(&self->norm[k % TR_SPIKE_WINDOW], (float)norm, memory_order_relaxed);
    if (spike)
        atomic_fetch_add_explicit(&self->skipped, 1, memory_order_relaxed);
    return spike;
}
