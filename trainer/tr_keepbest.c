/* tr_keepbest.c - the leader's keep-best state and its form in the vote
 * (tr_keepbest.h). */
#include "tr_keepbest.h"

#include <stdio.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_err.h"

static uint64_t s_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double s_double(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

void tr_keepbest_encode(const struct tr_keepbest *s, uint64_t w[TR_KB_WORDS])
{
    ss_assert(s && w);
    const struct tr_eval_result *b = &s->best;
    uint64_t v[TR_KB_WORDS] = {
        TR_KB_FORMAT | (uint64_t)(s->have_eval != 0) << 8 | (uint64_t)(s->saved != 0) << 9 |
            (uint64_t)(s->kept_current != 0) << 10,
        s->save_id, s->best_epoch, (uint64_t)s->n_evals | (uint64_t)s->evals_since_best << 32,
        b->rows, b->positives, s_bits(b->logloss), s_bits(b->ne), s_bits(b->auc),
        s_bits(b->calibration), s_bits(b->base_rate), s_bits(b->mean_pred)};
    memcpy(w, v, sizeof v);
}

int tr_keepbest_decode(const uint64_t w[TR_KB_WORDS], struct tr_keepbest *s, char *err,
                       size_t len)
{
    ss_assert(w && s);
    if ((w[0] & 0xFF) != TR_KB_FORMAT || (w[0] >> 11) != 0) {
        snprintf(err, len, "format word %#llx, expected format %d", (unsigned long long)w[0],
                 TR_KB_FORMAT);
        return SS_E_PROTO;
    }
    s->have_eval = (w[0] >> 8) & 1;
    s->saved = (w[0] >> 9) & 1;
    s->kept_current = (w[0] >> 10) & 1;
    s->save_id = w[1];
    s->best_epoch = w[2];
    s->n_evals = (uint32_t)w[3];
    s->evals_since_best = (uint32_t)(w[3] >> 32);
    s->best = (struct tr_eval_result){w[4], w[5], s_double(w[6]), s_double(w[7]),
                                      s_double(w[8]), s_double(w[9]), s_double(w[10]),
                                      s_double(w[11])};
    return 0;
}

void tr_keepbest_pack(const struct tr_keepbest *s, float *out)
{
    ss_assert(s && out);
    uint64_t w[TR_KB_WORDS];
    tr_keepbest_encode(s, w);
    for (int i = 0; i < TR_KB_WORDS; i++)
        for (int k = 0; k < 4; k++)
            out[i * 4 + k] = (float)((w[i] >> (16 * k)) & 0xFFFF);
}

int tr_keepbest_unpack(const float *in, struct tr_keepbest *s, char *err, size_t len)
{
    ss_assert(in && s);
    uint64_t w[TR_KB_WORDS] = {0}, any = 0;
    char why[160];
    for (int i = 0; i < TR_KB_WORDS; i++)
        for (int k = 0; k < 4; k++) {
            float f = in[i * 4 + k];
            if (!(f >= 0.0f && f <= 65535.0f) || f != (float)(uint32_t)f) {
                snprintf(err, len, "keep-best state in the vote: float %d is %g, not a 16-bit "
                         "limb (a trainer of another format?)", i * 4 + k, (double)f);
                return SS_E_PROTO;
            }
            w[i] |= (uint64_t)(uint32_t)f << (16 * k);
            any |= (uint32_t)f;
        }
    if (!any)
        return 0;
    if (tr_keepbest_decode(w, s, why, sizeof why) != 0) {
        snprintf(err, len, "keep-best state in the vote: %s from one trainer (two leaders, or "
                 "a trainer of another format)", why);
        return SS_E_PROTO;
    }
    return 1;
}

int tr_keepbest_sent(const float *in)
{
    ss_assert(in);
    for (int i = 0; i < TR_KB_FLOATS; i++)
        if (in[i] != 0.0f)
            return 1;
    return 0;
}

struct tr_keepbest tr_keepbest_adopt(const struct tr_keepbest *mine,
                                     const struct tr_keepbest *got, int have_got, int fresh)
{
    ss_assert(mine && got);
    if (!have_got)
        return *mine;
    struct tr_keepbest s = *got;
    s.kept_current = got->kept_current && fresh;  /* trained since, or not known */
    if (mine->n_evals > s.n_evals)
        s.n_evals = mine->n_evals;
    return s;
}
