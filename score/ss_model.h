/* ss_model.h - score a ShadowSync model file with no PS (libshadowscore).
 *
 * A model file (.ssm) comes from `shadow-ctl export RUN_DIR/model -o FILE`
 * (docs/model-file.md). Loading it checks it whole (format version,
 * checksums, sizes, every row) and keeps it mapped read-only; scoring a
 * line parses it in the data layout the model was trained on (Criteo TSV,
 * csv, libsvm, libffm: the job's data.* keys, recorded in the file), looks
 * its categorical values up in the file's rows (a value the model never
 * stored scores with its initial row, as a PS answers it), pools them and
 * runs the trainer's forward pass. The probability is bit-identical to
 * what `shadow-trainer --predict` writes for that line, given that OpenBLAS
 * runs the same kernels (shadow-score and shadow-trainer pick them alike;
 * a program linking this library keeps its own OPENBLAS_CORETYPE).
 *
 * Thread: a loaded model is immutable; ss_model_score_line() and
 * ss_model_score_batch() may be called from any number of threads at once
 * (each call borrows scratch memory from a pool the model keeps, under a
 * mutex held only to take and give it back). ss_model_load() makes OpenBLAS
 * run each call on the calling thread (openblas_set_num_threads(1)).
 *
 * Errors: functions that can fail return 0 or a negative code (the
 * SS_E_* values of ShadowSync's ss_err.h; ss_model_strerror() names them)
 * and write a message into err when err is not NULL. */
#ifndef SS_MODEL_H
#define SS_MODEL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ss_model ss_model_t;

/* ss_model_score_line()'s answer for a line that does not parse in the
 * model's layout (its probability is then NaN). */
#define SS_MODEL_BAD_LINE 1

/* Load and check the model file at path. Returns the model, or NULL with
 * err (e.g. "model.ssm: truncated: 1000 bytes, the header says 4160").
 * Caller owns the model; free it with ss_model_free(). */
ss_model_t *ss_model_load(const char *path, char *err, size_t err_len);

/* The same, with data.* keys set after the file's (n_sets strings
 * "data.KEY=VALUE", as shadow-trainer --set takes them): lines laid out
 * otherwise than the training data, e.g. "data.labels=false" for lines
 * without their label column. Other keys are refused. */
ss_model_t *ss_model_load_opts(const char *path, const char *const *sets, size_t n_sets,
                               char *err, size_t err_len);

/* Free the model; accepts NULL. No call may be using it. */
void ss_model_free(ss_model_t *model);

/* Score one line (len bytes, no newline; a trailing CR is ignored) into
 * *prob, the click probability. Returns 0; SS_MODEL_BAD_LINE with *prob NaN
 * when the line does not parse (a header line does not either). Thread-safe. */
int ss_model_score_line(const ss_model_t *model, const char *line, size_t len, float *prob);

/* Score n lines (lines[i] of lens[i] bytes) into probs[i], NaN for a bad
 * line. Faster than n single calls (the dense layers run on up to 16 lines
 * at once). Returns how many lines were good. Thread-safe. */
size_t ss_model_score_batch(const ss_model_t *model, const char *const *lines,
                            const size_t *lens, size_t n, float *probs);

/* Embedding rows held, dense floats, the model's categorical fields and
 * dense features per line. */
size_t ss_model_rows(const ss_model_t *model);
size_t ss_model_dense_params(const ss_model_t *model);
unsigned ss_model_fields(const ss_model_t *model);
unsigned ss_model_dense_features(const ss_model_t *model);

/* A static English phrase for an error code. */
const char *ss_model_strerror(int rc);

#ifdef __cplusplus
}
#endif

#endif
