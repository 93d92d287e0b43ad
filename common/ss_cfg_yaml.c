/* ss_cfg_yaml.c - the YAML side of ss_cfg_load(): walk a job file, or a
 * YAML --set value, with libyaml's event API (see ss_cfg_int.h).
 *
 * The walk holds exactly one live event (ld->ev) and deletes it before
 * fetching the next one, so every exit path frees it with one
 * yaml_event_delete(). Nested mappings build dotted names ("tables.lr") that
 * are looked up in ss_cfg.c's key table; each value is checked as it is read,
 * by ss_cfg.c's parsers, so an error names its own line. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "ss_cfg_int.h"
#include "ss_err.h"
#include "ss_mem.h"

static size_t s_line(const yaml_event_t *ev)
{
    return ev->start_mark.line + 1;
}

static const char *s_text(const yaml_event_t *ev)
{
    return (const char *)ev->data.scalar.value;
}

/* "a list", "a mapping", ... for the current event, in "got ..." messages. */
static const char *s_got(const yaml_event_t *ev)
{
    switch (ev->type) {
    case YAML_SEQUENCE_START_EVENT: return "a list";
    case YAML_MAPPING_START_EVENT: return "a mapping";
    case YAML_ALIAS_EVENT: return "an alias (anchors and aliases are not supported)";
    default: return "nothing";
    }
}

/* Report libyaml's own error. */
static int s_yaml_error(struct ss_cfg_loader *ld)
{
    const yaml_parser_t *p = &ld->parser;
    char msg[SS_CFG_MSG_MAX];

    if (p->error == YAML_MEMORY_ERROR)
        snprintf(msg, sizeof msg, "out of memory parsing YAML");
    else if (p->context)
        snprintf(msg, sizeof msg, "%s (%s)", p->problem ? p->problem : "YAML error", p->context);
    else
        snprintf(msg, sizeof msg, "%s", p->problem ? p->problem : "YAML error");
    return ss_cfg_fail(ld, p->problem_mark.line + 1, msg);
}

/* Replace the current event with the next one. */
static int s_next(struct ss_cfg_loader *ld)
{
    yaml_event_delete(&ld->ev);
    if (!yaml_parser_parse(&ld->parser, &ld->ev))
        return s_yaml_error(ld);
    return 0;
}

/* Whether the current event is a plain empty or null scalar ("key:"). */
static int s_is_null(const yaml_event_t *ev)
{
    const char *s = s_text(ev);

    return ev->type == YAML_SCALAR_EVENT && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           (!*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0);
}

/* Read a sequence of scalars (current event: SEQUENCE_START) into list k. */
static int s_read_list(struct ss_cfg_loader *ld, const struct ss_cfg_key *k, size_t line)
{
    void *field = (char *)ld->cfg + k->off;
    char msg[SS_CFG_MSG_MAX];
    size_t idx = 0;
    int rc;

    ss_cfg_list_clear(k, field);
    for (;;) {
        if ((rc = s_next(ld)) != 0)
            return rc;
        if (ld->ev.type == YAML_SEQUENCE_END_EVENT)
            break;
        if (ld->ev.type != YAML_SCALAR_EVENT)
            return ss_cfg_failf(ld, s_line(&ld->ev), k->name,
                                "entry %zu: expected a scalar, got %s", idx, s_got(&ld->ev));
        if (ss_cfg_parse_entry(k, idx++, s_text(&ld->ev), field, msg, sizeof msg) < 0)
            return ss_cfg_fail(ld, s_line(&ld->ev), msg);
    }
    if (ss_cfg_check_count(k, idx, msg, sizeof msg) < 0)
        return ss_cfg_fail(ld, line, msg);
    return 0;
}

/* Read one field of sync.groups entry idx (current event: its name) into g;
 * have collects the fields seen, one bit per group key (ss_cfg_group_key). */
static int s_read_group_field(struct ss_cfg_loader *ld, size_t idx, struct ss_sync_group *g,
                              unsigned *have)
{
    char msg[SS_CFG_MSG_MAX], key[SS_CFG_NAME_MAX + 40], pick[SS_CFG_NAME_MAX];
    const char *fname = s_text(&ld->ev);
    const struct ss_cfg_key *gk;
    size_t line = s_line(&ld->ev);
    int j, rc;

    snprintf(key, sizeof key, "sync.groups.%zu.%.*s", idx, SS_CFG_NAME_MAX, fname);
    if ((j = ss_cfg_group_key(fname, &gk, pick, sizeof pick)) < 0) {
        if (*pick)
            return ss_cfg_failf(ld, line, key, "unknown key (did you mean %s?)", pick);
        return ss_cfg_failf(ld, line, key, "unknown key");
    }
    if (*have & (1u << j))
        return ss_cfg_failf(ld, line, key, "duplicate key");
    *have |= 1u << j;
    if ((rc = s_next(ld)) != 0)
        return rc;
    if (ld->ev.type != YAML_SCALAR_EVENT) {
        ss_cfg_expected(gk, msg, sizeof msg);
        return ss_cfg_failf(ld, s_line(&ld->ev), key, "expected %s, got %s", msg,
                            s_got(&ld->ev));
    }
    if (ss_cfg_parse_scalar(gk, key, s_text(&ld->ev), (char *)g + gk->off, msg, sizeof msg) < 0)
        return ss_cfg_fail(ld, s_line(&ld->ev), msg);
    return 0;
}

/* Read sync.groups entry idx (current event: MAPPING_START) into g; *given
 * gets the fields the entry sets, one bit per group key (the
 * others inherit their top-level key's value at the end of the load). */
static int s_read_group(struct ss_cfg_loader *ld, size_t idx, struct ss_sync_group *g,
                        unsigned *given)
{
    char key[SS_CFG_NAME_MAX];
    size_t start = s_line(&ld->ev);
    unsigned have = 0;
    int rc;

    snprintf(key, sizeof key, "sync.groups.%zu", idx);
    memset(g, 0, sizeof *g);
    for (;;) {
        if ((rc = s_next(ld)) != 0)
            return rc;
        if (ld->ev.type == YAML_MAPPING_END_EVENT)
            break;
        if (ld->ev.type != YAML_SCALAR_EVENT)
            return ss_cfg_failf(ld, s_line(&ld->ev), key, "keys must be plain names");
        if ((rc = s_read_group_field(ld, idx, g, &have)) != 0)
            return rc;
    }
    if (!(have & 1u))
        return ss_cfg_failf(ld, start, key, "needs a component (bottom or top)");
    if (!(have & 2u))
        return ss_cfg_failf(ld, start, key, "needs an algorithm");
    *given = have;
    return 0;
}

/* Read sync.groups (current event: SEQUENCE_START). */
static int s_read_groups(struct ss_cfg_loader *ld, const struct ss_cfg_key *k)
{
    struct ss_sync_group g[SS_CFG_MAX_GROUPS];
    unsigned given[SS_CFG_MAX_GROUPS];
    size_t n = 0;
    int rc;

    for (;;) {
        if ((rc = s_next(ld)) != 0)
            return rc;
        if (ld->ev.type == YAML_SEQUENCE_END_EVENT)
            break;
        size_t line = s_line(&ld->ev);
        if (ld->ev.type != YAML_MAPPING_START_EVENT)
            return ss_cfg_failf(ld, line, k->name, "entry %zu: expected a mapping, got %s", n,
                                ld->ev.type == YAML_SCALAR_EVENT ? "a scalar" : s_got(&ld->ev));
        if (n == SS_CFG_MAX_GROUPS)
            return ss_cfg_failf(ld, line, k->name, "has more than %d entries", SS_CFG_MAX_GROUPS);
        if ((rc = s_read_group(ld, n, &g[n], &given[n])) != 0)
            return rc;
        for (size_t i = 0; i < n; i++)
            if (strcmp(g[i].component, g[n].component) == 0)
                return ss_cfg_failf(ld, line, k->name,
                                    "component %s appears twice (entries %zu, %zu)",
                                    g[n].component, i, n);
        n++;
    }
    memcpy(ld->cfg->sync_groups, g, n * sizeof g[0]);
    memcpy(ld->group_given, given, n * sizeof given[0]);
    ld->cfg->n_sync_groups = n;
    return 0;
}

/* Read the value of key k (current event: its first event). */
static int s_read_value(struct ss_cfg_loader *ld, const struct ss_cfg_key *k, size_t key_line)
{
    const yaml_event_t *ev = &ld->ev;
    int is_list =
        k->type == SS_CFG_T_STRS || k->type == SS_CFG_T_INTS || k->type == SS_CFG_T_GROUPS;
    char msg[SS_CFG_MSG_MAX];

    if (ev->type == YAML_SEQUENCE_START_EVENT && k->type == SS_CFG_T_GROUPS)
        return s_read_groups(ld, k);
    if (ev->type == YAML_SEQUENCE_START_EVENT && is_list)
        return s_read_list(ld, k, key_line);
    if (ev->type == YAML_SCALAR_EVENT && is_list && s_is_null(ev)) {
        if (ss_cfg_apply_text(k, "", ld->cfg, msg, sizeof msg) < 0)
            return ss_cfg_fail(ld, s_line(ev), msg);
        return 0;
    }
    ss_cfg_expected(k, msg, sizeof msg);
    if (ev->type != YAML_SCALAR_EVENT)
        return ss_cfg_failf(ld, s_line(ev), k->name, "expected %s, got %s", msg, s_got(ev));
    if (is_list)
        return ss_cfg_failf(ld, s_line(ev), k->name, "expected %s, got '%.64s'", msg, s_text(ev));
    if (ss_cfg_parse_scalar(k, k->name, s_text(ev), (char *)ld->cfg + k->off, msg, sizeof msg) < 0)
        return ss_cfg_fail(ld, s_line(ev), msg);
    return 0;
}

/* Record name as seen at line; a second sighting is a duplicate key. */
static int s_mark_seen(struct ss_cfg_loader *ld, const char *name, size_t line)
{
    for (size_t i = 0; i < ld->n_seen; i++)
        if (strcmp(ld->seen[i].name, name) == 0)
            return ss_cfg_failf(ld, line, name, "duplicate key (first on line %zu)",
                                ld->seen[i].line);
    if (ld->n_seen == ld->cap_seen) {
        ld->cap_seen = ld->cap_seen ? 2 * ld->cap_seen : 32;
        ld->seen = ss_realloc(ld->seen, ld->cap_seen * sizeof ld->seen[0]);
    }
    ld->seen[ld->n_seen].name = ss_strdup(name);
    ld->seen[ld->n_seen++].line = line;
    return 0;
}

/* Walk a mapping (current event: MAPPING_START) whose keys sit under prefix. */
static int s_walk_map(struct ss_cfg_loader *ld, const char *prefix)
{
    char name[SS_CFG_NAME_MAX];
    int rc;

    for (;;) {
        if ((rc = s_next(ld)) != 0)
            return rc;
        if (ld->ev.type == YAML_MAPPING_END_EVENT)
            return 0;
        size_t line = s_line(&ld->ev);
        if (ld->ev.type != YAML_SCALAR_EVENT && !*prefix)
            return ss_cfg_fail(ld, line, "keys must be plain names");
        if (ld->ev.type != YAML_SCALAR_EVENT)
            return ss_cfg_failf(ld, line, prefix, "keys must be plain names");
        int w = snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "",
                         s_text(&ld->ev));
        if (w < 0 || (size_t)w >= sizeof name)
            return ss_cfg_failf(ld, line, name, "unknown key");
        if ((rc = s_mark_seen(ld, name, line)) != 0 || (rc = s_next(ld)) != 0)
            return rc;
        const struct ss_cfg_key *k = ss_cfg_find_key(name);
        if (k) {
            if ((rc = s_read_value(ld, k, line)) != 0)
                return rc;
            ld->orig[ss_cfg_key_index(k)] = (struct ss_cfg_origin){SS_CFG_FROM_FILE, line, NULL};
        } else if (ss_cfg_is_section(name)) {
            if (ld->ev.type != YAML_MAPPING_START_EVENT)
                return ss_cfg_failf(ld, line, name, "expected a mapping of keys, got %s",
                                    ld->ev.type == YAML_SCALAR_EVENT ? "a scalar" : s_got(&ld->ev));
            if ((rc = s_walk_map(ld, name)) != 0)
                return rc;
        } else {
            return ss_cfg_fail_unknown(ld, line, name);
        }
    }
}

/* Start parsing (input already set): STREAM_START, then DOCUMENT_START or
 * STREAM_END. Sets *empty when the stream has no document. */
static int s_doc_begin(struct ss_cfg_loader *ld, int *empty)
{
    int rc;

    if ((rc = s_next(ld)) != 0 || (rc = s_next(ld)) != 0)
        return rc;
    *empty = ld->ev.type == YAML_STREAM_END_EVENT;
    if (*empty)
        return 0;
    return s_next(ld);  /* the document's root node */
}

/* After the root node: DOCUMENT_END, then the stream must end. */
static int s_doc_end(struct ss_cfg_loader *ld)
{
    int rc;

    if ((rc = s_next(ld)) != 0 || (rc = s_next(ld)) != 0)
        return rc;
    if (ld->ev.type != YAML_STREAM_END_EVENT)
        return ss_cfg_fail(ld, s_line(&ld->ev), "only one YAML document is allowed");
    return 0;
}

static void s_yaml_close(struct ss_cfg_loader *ld)
{
    yaml_event_delete(&ld->ev);
    yaml_parser_delete(&ld->parser);
}

int ss_cfg_yaml_load_file(struct ss_cfg_loader *ld, const char *path)
{
    FILE *fp = fopen(path, "rb");
    int rc, empty;

    if (!fp) {
        snprintf(ld->err, ld->err_len, "cannot open %s: %s", path, strerror(errno));
        return SS_E_CONFIG;
    }
    if (!yaml_parser_initialize(&ld->parser)) {
        snprintf(ld->err, ld->err_len, "%s: cannot initialize the YAML parser", path);
        rc = SS_E_CONFIG;
        goto out_close_file;
    }
    yaml_parser_set_input_file(&ld->parser, fp);
    if ((rc = s_doc_begin(ld, &empty)) != 0 || empty)
        goto out_close_yaml;
    if (ld->ev.type == YAML_MAPPING_START_EVENT)
        rc = s_walk_map(ld, "");
    else if (!s_is_null(&ld->ev))
        rc = ss_cfg_fail(ld, s_line(&ld->ev), "the top level must be a mapping of keys");
    if (rc == 0)
        rc = s_doc_end(ld);
out_close_yaml:
    s_yaml_close(ld);
out_close_file:
    fclose(fp);
    return rc;
}

/* Apply a --set value for list or group key k, written in YAML ("[a, b]"). */
int ss_cfg_yaml_set(struct ss_cfg_loader *ld, const struct ss_cfg_key *k, const char *text)
{
    char msg[SS_CFG_MSG_MAX];
    int rc, empty;

    if (!yaml_parser_initialize(&ld->parser))
        return ss_cfg_fail(ld, 0, "cannot initialize the YAML parser");
    yaml_parser_set_input_string(&ld->parser, (const unsigned char *)text, strlen(text));
    if ((rc = s_doc_begin(ld, &empty)) != 0)
        goto out_close_yaml;
    if (empty) {
        if (ss_cfg_apply_text(k, "", ld->cfg, msg, sizeof msg) < 0)
            rc = ss_cfg_fail(ld, 0, msg);
        goto out_close_yaml;
    }
    if ((rc = s_read_value(ld, k, 0)) == 0)
        rc = s_doc_end(ld);
out_close_yaml:
    s_yaml_close(ld);
    return rc;
}
