/* ss_sync.c - the sync algorithm table as data: names and traits.
 *
 * Expands ss_sync.h's SS_SYNC_TABLE; the rules' functions are expanded from
 * the same rows in trainer/tr_sync.c. Static names here differ from those of
 * tr_sync.c: the toy-rule unit test compiles both files into itself. */
#include "ss_sync.h"

#include <stdio.h>
#include <string.h>

#include "ss_cfg.h"

#define SS_SYNC_NAME_OF(id, name, rule, fg, ring, sync_ps, lose) name,
#define SS_SYNC_ROW_OF(id, name, rule, fg, ring, sync_ps, lose) \
    {SS_SYNC_##id, name, #rule, fg, ring, sync_ps, lose},

const char *const ss_sync_names[] = {"none", SS_SYNC_TABLE(SS_SYNC_NAME_OF) NULL};

/* The rows by enum value less one ("none" has no row). */
static const struct ss_sync_traits s_sync_rows[] = {SS_SYNC_TABLE(SS_SYNC_ROW_OF)};

#undef SS_SYNC_NAME_OF
#undef SS_SYNC_ROW_OF

const struct ss_sync_traits *ss_sync_traits_of(int algorithm)
{
    if (algorithm <= SS_SYNC_NONE || algorithm >= SS_SYNC_N)
        return NULL;
    return &s_sync_rows[algorithm - 1];
}

int ss_sync_find(const char *name)
{
    for (int a = 0; a < SS_SYNC_N; a++)
        if (!strcmp(name, ss_sync_names[a]))
            return a;
    return -1;
}

const char *ss_sync_name(int algorithm)
{
    return algorithm >= 0 && algorithm < SS_SYNC_N ? ss_sync_names[algorithm] : "?";
}

/* Fold one group's algorithm into the job's traits; *rules counts groups
 * with a rule. */
static void s_sync_fold(int algorithm, struct ss_sync_traits *out, int *rules)
{
    const struct ss_sync_traits *t = ss_sync_traits_of(algorithm);
    if (!t)
        return;
    out->foreground |= t->foreground;
    out->ring |= t->ring;
    out->sync_ps |= t->sync_ps;
    out->lose_trainer = (*rules == 0 || out->lose_trainer) && t->lose_trainer;
    (*rules)++;
}

void ss_sync_job_traits(const struct ss_cfg *cfg, struct ss_sync_traits *out)
{
    int rules = 0;
    memset(out, 0, sizeof *out);
    if (cfg->n_sync_groups == 0) {
        s_sync_fold(cfg->sync_algorithm, out, &rules);
        out->algorithm = rules ? cfg->sync_algorithm : SS_SYNC_NONE;
        out->name = ss_sync_name(out->algorithm);
        return;
    }
    for (size_t i = 0; i < cfg->n_sync_groups; i++)
        s_sync_fold(cfg->sync_groups[i].algorithm, out, &rules);
}

const char *ss_sync_label(const struct ss_cfg *cfg, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    if (!cfg->n_sync_groups)
        snprintf(buf, len, "%s", ss_sync_name(cfg->sync_algorithm));
    for (size_t g = 0; g < cfg->n_sync_groups && k < len; g++)
        k += (size_t)snprintf(buf + k, len - k, "%s%s:%s", g ? "," : "",
                              cfg->sync_groups[g].component,
                              ss_sync_name(cfg->sync_groups[g].algorithm));
    return buf;
}

void ss_sync_traits_format(const struct ss_sync_traits *t, char *out, size_t len)
{
    snprintf(out, len, "ring=%d sync_ps=%d foreground=%d lose_trainer=%d", t->ring,
             t->sync_ps, t->foreground, t->lose_trainer);
}
