/* tr_parse.h - one line of input into one example: Criteo TSV, CSV, libsvm, libffm.
 *
 * The layout comes from the job file (struct ss_data_cfg, data.* keys). An
 * example is a label, n_dense floats and n_fields categorical fields; each
 * field holds one or more values, each a 64-bit key ss_key_make(field, raw)
 * with a weight. The model pools a field: its embedding input is the
 * weighted sum of its values' rows, divided as model.pooling says
 * (tr_bag.h).
 *
 * Formats (data.format):
 *   criteo_tsv  label, I1..I13, C1..C26, tab-separated (40 fields). Empty
 *               fields are missing values; lines with 2..39 fields read the
 *               missing trailing fields as empty (some copies strip trailing
 *               tabs). Every field has one value of weight 1. With
 *               data.labels false the label column is absent (39 fields,
 *               as in Criteo's test files) and every label reads as 0.
 *   csv         the columns of data.columns, separated by data.delimiter
 *               (no quoting: a field cannot hold the delimiter); a line must
 *               have exactly that many fields. Roles: label, dense,
 *               categorical (one value), multi (values separated by
 *               data.multi_separator, each of weight 1; empty parts are
 *               skipped), ignore. A header line is recognized by
 *               tr_parse_is_header().
 *   libsvm      label idx:value ..., separated by spaces or tabs: ONE field
 *               (table 0) holding every item; idx (an unsigned integer) is
 *               the raw value itself and value (a number within float
 *               range) the item's weight, so with first-order terms the
 *               model holds a logistic regression on the items, sum_i
 *               u_idx * value. Items of value 0 (as a float) are dropped.
 *   libffm      label field:idx:value ...: field f (0 <= f < data.fields)
 *               is table f; its items, in line order, are the field's
 *               values, weighted by value (0 dropped).
 *   libsvm and libffm with data.labels false: the line without its label,
 *               every token an item (the first token is idx:value or
 *               field:idx:value, never a label: "1 3:1" is bad); the line
 *               gives exactly the features of the labelled line, label 0.
 *               A line without any token (empty or blank) is bad, as in
 *               every unlabeled format.
 * Values:
 *   - label (data.labels true; false: no label in any format, and every
 *     example's label is 0): criteo_tsv "0" or "1"; the others 0, 1, -1 (= 0) or +1 (= 1),
 *     also written as a decimal number ("1.0").
 *   - dense: criteo_tsv an integer v; csv any decimal number v; both become
 *     log(1 + max(v, 0)) as float (the same float for "260" and "260.0");
 *     empty -> 0. NaN and infinities are bad lines.
 *   - categorical: raw comes from the value's bytes in one of three disjoint
 *     ranges, so that two different strings never share a raw value (up to
 *     62-bit hash collisions) and the empty value has a raw value no string
 *     can reach:
 *       exactly 8 lowercase hex digits (Criteo): the number, in [0, 2^32);
 *       any other nonempty string (other lengths, upper case, "0a" vs "a"):
 *         TR_PARSE_HASHED_RAW | (ss_hash_bytes(value, len, 0) >> 2),
 *         in [2^62, 2^63);
 *       the empty value: TR_PARSE_MISSING_RAW.
 *     For a fixed table ss_key_make is a bijection of raw (key 0 is folded
 *     into 1; no field's empty key is 1, test_tr_reader checks), so distinct
 *     strings give distinct keys within a field and no string gives the
 *     empty field's key. A field with no value at all (an empty csv field, a
 *     libffm field absent from the line, a libsvm line without items) holds
 *     one value: its missing key, weight 1.
 *   - a trailing CR is ignored in every format.
 *
 * Thread: every function here is thread-safe; a struct tr_rows belongs to
 * one thread at a time. */
#ifndef TR_PARSE_H
#define TR_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "ss_cfg.h"
#include "ss_isa.h"

/* The Criteo TSV layout (data.format criteo_tsv). */
#define TR_N_DENSE 13
#define TR_N_SPARSE 26
#define TR_N_FIELDS (1 + TR_N_DENSE + TR_N_SPARSE)

/* Raw value that stands for an empty categorical field: outside both value
 * ranges (8 hex digits: below 2^32; hashed: [2^62, 2^63)). */
#define TR_PARSE_MISSING_RAW 0xFFFFFFFFFFFFFFFFull

/* Bit set in the raw value of every hashed (not 8-lowercase-hex) value. */
#define TR_PARSE_HASHED_RAW (1ull << 62)

/* One parsed Criteo TSV example. */
struct tr_example {
    float label;                    /* 0.0f or 1.0f */
    float dense[TR_N_DENSE];        /* log(1 + max(I_j, 0)); 0 when missing */
    uint64_t keys[TR_N_SPARSE];     /* ss_key_make(field, raw value) */
};

/* A batch of examples of any layout, ready for the model: labels and dense
 * features packed, categorical values in CSR form. Caller-allocated; fields
 * are read directly, written only through this module. */
struct tr_rows {
    uint32_t n;            /* examples held */
    uint32_t max;          /* capacity in examples */
    uint32_t n_dense;      /* dense floats per example */
    uint32_t n_fields;     /* categorical fields per example */
    float *labels;         /* [max] */
    float *dense;          /* [max * n_dense], example-major */
    uint32_t *offs;        /* [max * n_fields + 1]: field f of example b holds the values
                            * offs[b * n_fields + f] .. offs[b * n_fields + f + 1] - 1 */
    uint64_t *keys;        /* [cap] each value's key */
    float *weights;        /* [cap] each value's weight */
    size_t cap;            /* values allocated; grows as needed */
    uint32_t *scratch;     /* [n_fields + 1] libffm counting sort */
    uint64_t *tmp_keys;    /* [tmp_cap] libffm items before sorting */
    float *tmp_weights;    /* [tmp_cap] */
    uint32_t *tmp_fields;  /* [tmp_cap] */
    size_t tmp_cap;        /* libffm scratch capacity */
};

/* Size rows for up to max (>= 1) examples of n_dense dense features and
 * n_fields (>= 1) fields; rows is empty after. Free with tr_rows_fini(). */
void tr_rows_init(struct tr_rows *rows, uint32_t max, uint32_t n_dense, uint32_t n_fields);

/* Free what tr_rows_init allocated; accepts a zeroed struct. */
void tr_rows_fini(struct tr_rows *rows);

/* Empty rows (n = 0). */
void tr_rows_clear(struct tr_rows *rows);

/* Values held by the first n examples. */
static inline size_t tr_rows_values(const struct tr_rows *rows)
{
    return rows->offs[(size_t)rows->n * rows->n_fields];
}

/* Append one Criteo example (label, 13 dense, 26 keys of weight 1) to rows,
 * which must have n < max, n_dense 13 and n_fields 26. */
void tr_rows_add_example(struct tr_rows *rows, const struct tr_example *ex);

/* Parse one Criteo TSV line (len bytes, no newline) into ex. Returns 0, or
 * SS_E_PROTO for a bad line (ex is then unspecified). */
int tr_parse_criteo(const char *line, size_t len, struct tr_example *ex);

/* The same for a Criteo line without its label column (13 dense, 26
 * categorical: Criteo's test files; data.labels false): 1..39 fields, the
 * missing trailing ones empty; an empty line is bad. ex->label is 0. */
int tr_parse_criteo_unlabeled(const char *line, size_t len, struct tr_example *ex);

/* tr_parse_criteo (labels 1) or tr_parse_criteo_unlabeled (labels 0) by the
 * parser of one instruction set, for tests, fuzzing and benchmarks: isa
 * SS_ISA_PORTABLE is the scalar reference parser, SS_ISA_AVX512 the AVX-512
 * one (a tab scan of the whole line, then 8 categorical fields at a time),
 * and SS_ISA_AMX the best vector parser the CPU has: the AVX-512 one with
 * the tabs' places written by VPCOMPRESSB where it has AVX512_VBMI2
 * (ss_isa_has_vbmi2). Where ss_isa_get() is SS_ISA_PORTABLE every isa is
 * the scalar parser, so that it is safe on any CPU. All give the same return
 * code, and on success the same example bit for bit; the two functions above
 * take the best vector parser unless ss_isa_get() is SS_ISA_PORTABLE (the
 * environment variable SS_ISA=portable forces the scalar one). Lines longer
 * than 512 bytes always take the scalar parser. */
int tr_parse_criteo_isa(const char *line, size_t len, int labels, enum ss_isa isa,
                        struct tr_example *ex);

/* Parse one line of data's format and append it to rows (n < max; rows'
 * shape must be data's n_dense and n_fields). Returns 0, or SS_E_PROTO for
 * a bad line (rows unchanged). */
int tr_parse_line(const struct ss_data_cfg *data, const char *line, size_t len,
                  struct tr_rows *rows);

/* Whether line, the first line of a file, is a csv header to skip: always
 * with data.header true, never with false or another format; with auto
 * when it does not parse, has the layout's column count and its label
 * field holds a letter ("click", "Label"). */
int tr_parse_is_header(const struct ss_data_cfg *data, const char *line, size_t len);

/* Write why line is bad into why: what was expected and what was found,
 * e.g. "expected 40 tab-separated fields (label, 13 dense, 26 categorical),
 * found 24 comma-separated; set data.format: csv, data.columns ...", or
 * "field 3 (dense): expected a number, found 'abc'". For a line that parses,
 * writes "". Slow; call it once per bad line worth reporting. */
void tr_parse_explain(const struct ss_data_cfg *data, const char *line, size_t len, char *why,
                      size_t why_len);

/* The layout of data.format criteo_tsv, as ss_cfg_load() derives it. */
void tr_parse_criteo_layout(struct ss_data_cfg *data);

#endif
