/* ss_cfg_int.h - PRIVATE to common/ss_cfg.c and common/ss_cfg_yaml.c.
 *
 * The configuration module is one job in two files: ss_cfg.c holds the key
 * table, the value parsers, --set, the cross-key checks and the output;
 * ss_cfg_yaml.c walks a YAML file (or a YAML --set value) with libyaml's
 * event API and feeds each value to those parsers. This header is what the
 * two share: the loader state, the key-table entry, and the helpers the walk
 * calls back into. ss_data_layout.c, which compiles the data.* keys for
 * ss_cfg.c, includes it too for ss_cfg_why() and ss_cfg_parse_i64(), so that
 * its messages and integers read as the rest of the config's. Nothing else
 * includes it; the public API is ss_cfg.h.
 *
 * Thread: a loader belongs to one ss_cfg_load() call on one thread. */
#ifndef SS_CFG_INT_H
#define SS_CFG_INT_H

#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "ss_cfg.h"

#define SS_CFG_NAME_MAX 128  /* longest dotted key name we look up */
#define SS_CFG_MSG_MAX 512   /* one error message, before the FILE:LINE prefix */

/* What a key holds and how its field is laid out. */
enum ss_cfg_type {
    SS_CFG_T_INT,     /* int64_t */
    SS_CFG_T_DBL,     /* double */
    SS_CFG_T_BOOL,    /* int, 0 or 1 */
    SS_CFG_T_STR,     /* char[size] */
    SS_CFG_T_ENUM,    /* int index into names[], or the name itself with S_TEXT */
    SS_CFG_T_STRS,    /* struct ss_str_list */
    SS_CFG_T_INTS,    /* struct ss_int_list */
    SS_CFG_T_GROUPS,  /* sync.groups: n_sync_groups and sync_groups[] */
};

/* One configuration key (an entry of ss_cfg.c's key tables). */
struct ss_cfg_key {
    const char *name;          /* YAML name, dotted ("tables.lr") */
    enum ss_cfg_type type;     /* what it holds */
    unsigned flags;            /* S_CLUSTER, S_MINX, ... (ss_cfg.c) */
    size_t off;                /* offsetof() the target field */
    size_t size;               /* sizeof() the target field */
    const char *def;           /* default as --set text; lists comma separated */
    int64_t imin, imax;        /* SS_CFG_T_INT, SS_CFG_T_INTS entries: allowed range */
    double dmin, dmax;         /* SS_CFG_T_DBL: allowed range */
    size_t nmin, nmax;         /* SS_CFG_T_STRS, SS_CFG_T_INTS: allowed entry count */
    const char *const *names;  /* SS_CFG_T_ENUM: names by value, NULL-terminated */
    const char *inherit;       /* sync.groups fields: top-level key giving the default */
    const char *help;          /* one line of help */
};

/* Where a key's value came from, for the cross-key error messages. */
enum ss_cfg_how { SS_CFG_FROM_DEFAULT = 0, SS_CFG_FROM_FILE, SS_CFG_FROM_SET };

struct ss_cfg_origin {
    enum ss_cfg_how how;  /* default, file or --set */
    size_t line;          /* SS_CFG_FROM_FILE: line of the key */
    const char *set;      /* SS_CFG_FROM_SET: the borrowed --set text */
};

/* A dotted path already seen in the file, to catch duplicate keys. */
struct ss_cfg_seen {
    char *name;   /* owned */
    size_t line;  /* where it was first */
};

/* State of one ss_cfg_load() call. Allocated with room for one orig[] entry
 * per key of the key table (ss_cfg.c knows how many). */
struct ss_cfg_loader {
    struct ss_cfg *cfg;                      /* being filled */
    const char *file;                        /* path for messages, NULL without a file */
    const char *set;                         /* --set being applied, NULL while in the file */
    char *err;                               /* caller's message buffer */
    size_t err_len;                          /* its size */
    yaml_parser_t parser;                    /* valid while ss_cfg_yaml.c reads */
    yaml_event_t ev;                         /* the one live event */
    struct ss_cfg_seen *seen;                /* paths seen in the file */
    size_t n_seen, cap_seen;                 /* entries used, allocated */
    unsigned group_given[SS_CFG_MAX_GROUPS]; /* per sync.groups entry: fields it sets,
                                              * one bit per group key (ss_cfg_group_key) */
    struct ss_cfg_origin orig[];             /* per key, by ss_cfg_key_index() */
};

/* ------------------------------------------------ ss_cfg.c, for the walk */

/* Write "key KEY: fmt..." into msg (n bytes; the text is cut to fit).
 * Returns -1, for the caller to pass on as its own result. */
int ss_cfg_why(char *msg, size_t n, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Parse s as a decimal integer that fits int64_t, with nothing before or
 * after it (a leading space or trailing text is an error). Returns 0 with
 * *v, or -1. */
int ss_cfg_parse_i64(const char *s, int64_t *v);

/* Fail at line of the file, or at the current --set: writes "WHERE: msg" to
 * the caller's buffer. Returns SS_E_CONFIG. */
int ss_cfg_fail(struct ss_cfg_loader *ld, size_t line, const char *msg);

/* As ss_cfg_fail, with the message "key KEY: fmt...". */
int ss_cfg_failf(struct ss_cfg_loader *ld, size_t line, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Fail with "key NAME: unknown key", plus the closest known name if any. */
int ss_cfg_fail_unknown(struct ss_cfg_loader *ld, size_t line, const char *name);

/* The key named name (dotted), or NULL. */
const struct ss_cfg_key *ss_cfg_find_key(const char *name);

/* Index of k (from ss_cfg_find_key) in the key table: its slot of ld->orig. */
size_t ss_cfg_key_index(const struct ss_cfg_key *k);

/* Whether name is a section: the dotted prefix of some key. */
int ss_cfg_is_section(const char *name);

/* Look up field fname of a sync.groups entry. Returns its index (its bit in
 * group_given) and sets *gk, or returns -1 with pick holding the closest
 * field name when one is close enough, "" when none is. */
int ss_cfg_group_key(const char *fname, const struct ss_cfg_key **gk, char *pick, size_t n);

/* What k takes, for "expected ..." messages ("an integer", "one of a, b"). */
void ss_cfg_expected(const struct ss_cfg_key *k, char *out, size_t n);

/* Parse scalar text into field (k's target) under the name key. Returns 0,
 * or -1 with "key KEY: why" in msg. */
int ss_cfg_parse_scalar(const struct ss_cfg_key *k, const char *key, const char *text,
                        void *field, char *msg, size_t n);

/* Parse entry idx of list key k from text into field. 0, or -1 with msg. */
int ss_cfg_parse_entry(const struct ss_cfg_key *k, size_t idx, const char *text, void *field,
                       char *msg, size_t n);

/* Check that list key k may hold count entries. 0, or -1 with msg. */
int ss_cfg_check_count(const struct ss_cfg_key *k, size_t count, char *msg, size_t n);

/* Empty list key k's field. */
void ss_cfg_list_clear(const struct ss_cfg_key *k, void *field);

/* Apply k's value written as --set text to cfg. 0, or -1 with msg. */
int ss_cfg_apply_text(const struct ss_cfg_key *k, const char *text, struct ss_cfg *cfg,
                      char *msg, size_t n);

/* ------------------------------------------------ ss_cfg_yaml.c, the walk */

/* Read the YAML file at path into ld->cfg, checking each value as it is
 * read. Returns 0, or SS_E_CONFIG with the message in ld->err. Frees all
 * libyaml state before it returns; ld->seen stays for ss_cfg_load to free. */
int ss_cfg_yaml_load_file(struct ss_cfg_loader *ld, const char *path);

/* Apply a --set value for list or group key k, written in YAML ("[a, b]").
 * Returns 0, or SS_E_CONFIG with the message in ld->err. */
int ss_cfg_yaml_set(struct ss_cfg_loader *ld, const struct ss_cfg_key *k, const char *text);

#endif
