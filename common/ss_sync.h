/* ss_sync.h - the table of sync algorithms: each one's name and traits.
 *
 * One row per algorithm (s-x and fr-x are two rows sharing one rule). Every
 * part of the system that needs to know something about an algorithm reads
 * it here: the config (the names sync.algorithm accepts, "EASGD needs a sync
 * endpoint", the trainer-loss default), the trainer (which rule runs it,
 * trainer/tr_sync.c; foreground or shadow thread), shadow-ctl (which PSs a
 * job starts) and the launcher (`shadow-ctl sync-traits`, so that no shell
 * script restates a trait).
 *
 * DESIGN: the table is an X-macro, SS_SYNC_TABLE, expanded into the enum
 * (ss_cfg.h), the names and traits (ss_sync.c) and the rule pointers
 * (trainer/tr_sync.c), so that adding a sync rule is one new file,
 * trainer/tr_sync_RULE.c exporting `const struct tr_sync_algo tr_sync_RULE`,
 * plus one row here (docs/howto-sync-rule.md). A row's enum value is its
 * place in the table: add rows at the end. SS_SYNC_TABLE_TEST is empty in the
 * product; a unit test that compiles this table's two source files into
 * itself defines it to add a toy row (test/unit/test_tr_sync_toy.c).
 *
 * Thread: everything here is constant; any thread may call. */
#ifndef SS_SYNC_H
#define SS_SYNC_H

#include <stddef.h>

struct ss_cfg;

#ifndef SS_SYNC_TABLE_TEST
#define SS_SYNC_TABLE_TEST(X)
#endif

/* X(ID, name, rule, foreground, ring, sync_ps, lose_trainer)
 *   ID            enum constant SS_SYNC_<ID>
 *   name          what sync.algorithm says, and every report prints (no
 *                 aliases: "easgd" would not say whether s- or fr-)
 *   rule          the rule running it: trainer/tr_sync_<rule>.c's tr_sync_<rule>
 *   foreground    1: workers pause for a round (fr-*); 0: the shadow thread runs it
 *   ring          1: rounds use the ring AllReduce among trainers
 *   sync_ps       1: rounds use the sync PSs (the launcher starts them)
 *   lose_trainer  1: job.allow_trainer_loss auto lets the job go on without a
 *                 trainer that died (the ring re-forms without it) */
#define SS_SYNC_TABLE(X)                                                                   \
    X(S_EASGD,  "s-easgd",  easgd, 0, 0, 1, 1)                                             \
    X(S_MA,     "s-ma",     ma,    0, 1, 0, 1)                                             \
    X(S_BMUF,   "s-bmuf",   bmuf,  0, 1, 0, 1)                                             \
    X(FR_EASGD, "fr-easgd", easgd, 1, 0, 1, 0)                                             \
    X(FR_MA,    "fr-ma",    ma,    1, 1, 0, 0)                                             \
    X(FR_BMUF,  "fr-bmuf",  bmuf,  1, 1, 0, 0)                                             \
    SS_SYNC_TABLE_TEST(X)

#define SS_SYNC_ENUM(id, name, rule, fg, ring, sync_ps, lose) SS_SYNC_##id,

/* sync.algorithm: none, then one value per row. */
enum ss_sync_algo {
    SS_SYNC_NONE = 0,
    SS_SYNC_TABLE(SS_SYNC_ENUM)
    SS_SYNC_N              /* values in the table, none included */
};

/* One algorithm's row, as data. */
struct ss_sync_traits {
    int algorithm;        /* enum ss_sync_algo */
    const char *name;     /* "s-easgd" */
    const char *rule;     /* "easgd": the rule's file trainer/tr_sync_easgd.c */
    int foreground;       /* workers pause for a round */
    int ring;             /* rounds use the ring */
    int sync_ps;          /* rounds use the sync PSs */
    int lose_trainer;     /* may go on without a trainer that died */
};

/* Names by enum value, "none" first, NULL-terminated (the config's
 * sync.algorithm key reads them). */
extern const char *const ss_sync_names[];

/* The row of algorithm, or NULL for SS_SYNC_NONE and values outside the
 * table. The row is static: never free it. */
const struct ss_sync_traits *ss_sync_traits_of(int algorithm);

/* The algorithm a name spells ("s-ma", "none"), or -1. */
int ss_sync_find(const char *name);

/* Name of algorithm ("none" for SS_SYNC_NONE), "?" outside the table. */
const char *ss_sync_name(int algorithm);

/* What a whole job's sync needs, over its groups (sync.groups, or the one
 * sync.algorithm): ring / sync_ps / foreground when some group's algorithm
 * has the trait; lose_trainer when there is a group with a rule and every
 * such group's algorithm may lose a trainer. Groups with "none" count for
 * nothing. algorithm and name: the job's one algorithm ("none" without
 * sync); with groups SS_SYNC_NONE and NULL. rule is NULL. */
void ss_sync_job_traits(const struct ss_cfg *cfg, struct ss_sync_traits *out);

/* The job's sync as reports and the launcher name it, into buf: the
 * algorithm (sync.algorithm), or with sync.groups each group's
 * "COMPONENT:ALGO" joined by commas. Returns buf. */
const char *ss_sync_label(const struct ss_cfg *cfg, char *buf, size_t len);

/* Write t as one line "ring=R sync_ps=P foreground=F lose_trainer=L"
 * (the words `shadow-ctl sync-traits` prints for scripts) into out. */
void ss_sync_traits_format(const struct ss_sync_traits *t, char *out, size_t len);

#endif
