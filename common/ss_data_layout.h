/* ss_data_layout.h - the input layout of data.*: which column holds what.
 *
 * A job file describes its data with data.format and, for delimited files,
 * data.columns ("label", "dense*13", "categorical*26": a role per column,
 * optionally repeated), data.delimiter and data.multi_separator; libffm files
 * give data.fields. This module compiles those keys, as written, into what
 * the reader uses: the role of every column and the dense and categorical
 * counts (the derived fields of struct ss_data_cfg). ss_cfg_load() calls it
 * after the file and every --set, and names the key at fault.
 *
 * Pure functions: no I/O, no global state. */
#ifndef SS_DATA_LAYOUT_H
#define SS_DATA_LAYOUT_H

#include <stddef.h>

#include "ss_cfg.h"

/* Derive d's layout (delimiter, multi_sep, n_columns, role[], n_dense,
 * n_fields) from its written keys. Returns 0, or -1 with msg ("key K: why")
 * and *bad set to the name of the key at fault. */
int ss_data_layout_derive(struct ss_data_cfg *d, char *msg, size_t n, const char **bad);

/* Whether data.format `format` (enum ss_data_format) reads key (data.fields,
 * data.columns, data.delimiter, data.header, data.multi_separator): a key
 * set for a format that ignores it is an error, since it would silently do
 * nothing. */
int ss_data_layout_applies(int format, const char *key);

#endif
