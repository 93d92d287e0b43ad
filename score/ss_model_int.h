/* ss_model_int.h - what shadow-score uses of the library beyond ss_model.h:
 * scoring rows already parsed (the trainer's reader splits and parses the
 * input, as --predict does). Not installed. */
#ifndef SS_MODEL_INT_H
#define SS_MODEL_INT_H

#include "ss_cfg.h"
#include "ss_model.h"
#include "tr_parse.h"

/* The job config of the model (data layout and shape), borrowed. */
const struct ss_cfg *ss_model_cfg(const ss_model_t *model);

/* Score rows (parsed in the model's layout: ss_model_cfg()->data) into
 * probs[rows->n]. Thread-safe. */
void ss_model_score_rows(const ss_model_t *model, const struct tr_rows *rows, float *probs);

#endif
