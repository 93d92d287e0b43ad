/* ss_data_layout.c - compile data.* into column roles (see ss_data_layout.h). */
#include "ss_data_layout.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ss_cfg_int.h"  /* ss_cfg_why(), ss_cfg_parse_i64() */

static const char *const s_role_names[] = {"ignore", "label", "dense", "categorical", "multi",
                                           NULL};

/* Criteo's layout: the default of data.columns; with data.labels false the
 * same without its first column (Criteo's own test files). */
static const char *const s_criteo_columns[] = {"label", "dense*13", "categorical*26"};

/* Append entry idx of data.columns ("ROLE" or "ROLE*N") to d. Returns 0, or
 * -1 with msg naming the entry. */
static int s_data_role(struct ss_data_cfg *d, size_t idx, const char *text, char *msg,
                       size_t n)
{
    char key[64], name[32];
    const char *star = strchr(text, '*');
    size_t len = star ? (size_t)(star - text) : strlen(text);
    int64_t count = 1;
    int role = 0;

    snprintf(key, sizeof key, "data.columns.%zu", idx);
    snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), text);
    while (s_role_names[role] && strcmp(s_role_names[role], name) != 0)
        role++;
    if (!s_role_names[role] || len >= sizeof name)
        return ss_cfg_why(msg, n, key, "unknown role '%.64s' (expected label, dense, "
                          "categorical, multi or ignore, optionally followed by *N)", text);
    if (star && (ss_cfg_parse_i64(star + 1, &count) < 0 || count < 1))
        return ss_cfg_why(msg, n, key, "expected ROLE*N with N a positive integer, got '%.64s'",
                          text);
    if (count > SS_DATA_MAX_COLUMNS - (int64_t)d->n_columns)
        return ss_cfg_why(msg, n, "data.columns", "more than %d columns", SS_DATA_MAX_COLUMNS);
    for (int64_t i = 0; i < count; i++) {
        d->role[d->n_columns++] = (uint8_t)role;
        d->n_dense += role == SS_ROLE_DENSE;
        d->n_fields += role == SS_ROLE_CATEGORICAL || role == SS_ROLE_MULTI;
    }
    return 0;
}

/* Compile data.columns (Criteo's layout when empty) into d's roles and
 * counts; exactly one label column, none with data.labels false. Returns 0
 * or -1 with msg. */
static int s_data_columns(struct ss_data_cfg *d, char *msg, size_t n)
{
    size_t n_given = d->columns.n, labels = 0, first = d->labels ? 0 : 1;

    d->n_columns = d->n_dense = d->n_fields = 0;
    for (size_t i = n_given ? 0 : first; i < (n_given ? n_given : 3); i++)
        if (s_data_role(d, i, n_given ? d->columns.v[i] : s_criteo_columns[i], msg, n) < 0)
            return -1;
    for (uint32_t c = 0; c < d->n_columns; c++)
        labels += d->role[c] == SS_ROLE_LABEL;
    if (!d->labels && labels)
        return ss_cfg_why(msg, n, "data.columns", "has a label column, but data.labels is "
                          "false (the lines hold no label): make that column 'ignore' or drop "
                          "it, or set data.labels: true");
    if (d->labels && labels != 1)
        return ss_cfg_why(msg, n, "data.columns", "needs exactly one label column, has %zu%s",
                          labels, labels ? "" : " (data without labels, to be scored with "
                          "--predict: set data.labels: false)");
    if (d->n_fields == 0)
        return ss_cfg_why(msg, n, "data.columns", "needs at least one categorical or multi "
                          "column (one embedding table each)");
    if (d->n_fields > 1024)
        return ss_cfg_why(msg, n, "data.columns", "%u categorical and multi columns, at most 1024",
                          d->n_fields);
    return 0;
}

/* One separator character from text: a single byte, or "tab". */
static int s_data_sep(const char *key, const char *text, char *out, char *msg, size_t n)
{
    if (strcmp(text, "tab") == 0 || strcmp(text, "\\t") == 0)
        text = "\t";
    if (strlen(text) != 1 || text[0] == '\n' || text[0] == '\r')
        return ss_cfg_why(msg, n, key, "expected one character (or tab), got '%.64s'", text);
    *out = text[0];
    return 0;
}

/* Which data.* keys each format reads besides data.format: a key set to
 * another value than its default for a format that ignores it is an error
 * (it would silently do nothing). */
int ss_data_layout_applies(int format, const char *key)
{
    int delimited = format == SS_DATA_CSV;

    if (strcmp(key, "data.fields") == 0)
        return format == SS_DATA_LIBFFM;
    if (strcmp(key, "data.columns") == 0)
        return delimited || format == SS_DATA_CRITEO_TSV;
    return delimited;  /* delimiter, header, multi_separator */
}

/* Derive d's layout from its keys (see struct ss_data_cfg). Returns 0, or -1
 * with msg and *bad set to the key at fault. Pure: no origin needed. */
int ss_data_layout_derive(struct ss_data_cfg *d, char *msg, size_t n, const char **bad)
{
    *bad = "data.columns";
    d->delimiter = '\t';
    d->multi_sep = '|';
    d->n_columns = d->n_dense = d->n_fields = 0;
    if (d->format == SS_DATA_LIBSVM) {
        d->n_fields = 1;
        return 0;
    }
    if (d->format == SS_DATA_LIBFFM) {
        *bad = "data.format";  /* where the user chose libffm */
        d->n_fields = (uint32_t)d->fields;
        if (d->fields == 0)
            return ss_cfg_why(msg, n, "data.fields", "data.format libffm needs the number of "
                              "fields (field ids 0..N-1, one embedding table each)");
        return 0;
    }
    if (d->format == SS_DATA_CRITEO_TSV && d->columns.n)
        return ss_cfg_why(msg, n, "data.columns", "criteo_tsv is always label, dense*13, "
                          "categorical*26; for another layout set data.format: csv (with "
                          "data.delimiter: tab for tabs)");
    if (s_data_columns(d, msg, n) < 0)
        return -1;
    if (d->format == SS_DATA_CRITEO_TSV)
        return 0;
    *bad = "data.delimiter";
    if (s_data_sep("data.delimiter", d->delimiter_text, &d->delimiter, msg, n) < 0)
        return -1;
    *bad = "data.multi_separator";
    if (s_data_sep("data.multi_separator", d->multi_text, &d->multi_sep, msg, n) < 0)
        return -1;
    if (d->multi_sep == d->delimiter)
        return ss_cfg_why(msg, n, "data.multi_separator", "'%c' is also data.delimiter",
                          d->multi_sep);
    *bad = "data.labels";  /* where the file turned labels off (data.header may be unset) */
    if (!d->labels && !d->n_dense && d->header == SS_HEADER_AUTO)
        return ss_cfg_why(msg, n, "data.header", "auto tells a header by a word in its label "
                          "or first dense column, and these data.columns have neither "
                          "(data.labels false): set data.header: true or false");
    return 0;
}

