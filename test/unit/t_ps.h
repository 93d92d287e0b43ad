/* t_ps.h - what the unit tests of a PS service share: PUSH and LOOKUP
 * requests of a few keys, and the STATS counters read through ss_json (the
 * project reads JSON nowhere by hand). Include after <cmocka.h>. */
#ifndef T_PS_H
#define T_PS_H

#include <stdint.h>
#include <string.h>

#include "ps_service.h"
#include "ss_hash.h"
#include "ss_json.h"
#include "ss_mem.h"
#include "ss_msg_types.h"
#include "ss_net.h"

#define T_PS_KEYS_MAX 8    /* keys of a t_ps_keys request */
#define T_PS_DIM_MAX 16    /* its embedding dimension, at most */

/* A PUSH or LOOKUP of keys 100, 101, ... of table 0: the header and the
 * frames to send (header fields point into the struct: do not copy it). */
struct t_ps_keys {
    uint64_t keys[T_PS_KEYS_MAX];                  /* the keys */
    float grads[T_PS_KEYS_MAX * T_PS_DIM_MAX];     /* a PUSH's gradient rows */
    uint32_t tables[1];                            /* table 0 */
    uint32_t counts[1];                            /* n keys of it */
    Header h;                                      /* the request's header */
    struct ss_frame frames[2];                     /* keys, then (PUSH) gradients */
    size_t n_frames;                               /* 2 for a PUSH, 1 for a LOOKUP */
};

/* Fill r with a PUSH (push = 1) of gradient g, dim floats per key, or a
 * LOOKUP, of n keys (n <= T_PS_KEYS_MAX, dim <= T_PS_DIM_MAX). */
static inline void t_ps_keys(struct t_ps_keys *r, int push, size_t n, uint32_t dim, float g)
{
    assert_true(n <= T_PS_KEYS_MAX && dim <= T_PS_DIM_MAX);
    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < n; i++)
        r->keys[i] = ss_key_make(0, 100 + i);
    for (size_t i = 0; i < n * dim; i++)
        r->grads[i] = g;
    r->counts[0] = (uint32_t)n;
    r->h = (Header)HEADER__INIT;
    r->h.type = push ? MSG_TYPE__MSG_PUSH : MSG_TYPE__MSG_LOOKUP;
    r->h.n_tables = r->h.n_counts = 1;
    r->h.tables = r->tables;
    r->h.counts = r->counts;
    if (push) {
        r->h.has_dim = 1;
        r->h.dim = dim;
    }
    r->frames[0] = (struct ss_frame){r->keys, n * sizeof r->keys[0]};
    r->frames[1] = (struct ss_frame){r->grads, n * dim * sizeof(float)};
    r->n_frames = push ? 2 : 1;
}

/* 1 when the STATS JSON of svc (ps_service_stats_json()) has the count key
 * equal to want; otherwise prints the field (or why it was not read) and the
 * whole JSON, and returns 0. Any thread, as ps_service_stats_json(). */
static inline int t_stat_is(ps_service_t *svc, const char *key, uint64_t want)
{
    char *text = ps_service_stats_json(svc, 1 << 16), err[256] = "";
    json_t *obj = NULL;
    uint64_t got = 0;
    assert_non_null(text);
    int rc = ss_json_parse(text, "STATS reply", &obj, err, sizeof err);
    if (rc == 0)
        rc = ss_json_u64(obj, key, &got, "STATS reply", err, sizeof err);
    int same = rc == 0 && got == want;
    if (!same && rc == 0)
        print_message("STATS %s is %llu, want %llu; STATS: %s\n", key, (unsigned long long)got,
                      (unsigned long long)want, text);
    else if (!same)
        print_message("%s (want %s %llu); STATS: %s\n", err, key, (unsigned long long)want, text);
    json_decref(obj);
    ss_free(text);
    return same;
}

#endif
