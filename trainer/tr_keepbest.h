/* tr_keepbest.h - the leader's keep-best state and its form in the vote.
 *
 * The leader (the trainer that scores and saves the shared model) chooses
 * the model kept in the model folder from its validations. So that the
 * trainer leading after it (job.allow_trainer_loss) goes on from the same
 * history, the leader sends that state in every segment's vote barrier (a
 * float sum over the trainers, tr_train_barrier), the others sending
 * zeros: each 64-bit word travels as four 16-bit limbs, which a float sum
 * of one non-zero term and zeros leaves exact. Word 0 carries the format
 * (TR_KB_FORMAT) and the flags; a sum whose format is not TR_KB_FORMAT
 * (two senders, garbage) is refused, never read. A trainer of an older
 * build sends a vote of another length, whose pieces the ring drops as bad.
 * Pure functions, any thread. */
#ifndef TR_KEEPBEST_H
#define TR_KEEPBEST_H

#include <stddef.h>
#include <stdint.h>

#include "tr_eval.h"

#define TR_KB_FORMAT 1                 /* format of the packed state */
#define TR_KB_WORDS 12                 /* 64-bit words of the packed state */
#define TR_KB_FLOATS (TR_KB_WORDS * 4) /* floats of the packed state in the vote */

/* What chose the model kept in the model folder. */
struct tr_keepbest {
    int have_eval;                 /* best holds a validation */
    int saved;                     /* the model folder holds the kept model (its save
                                    * succeeded) */
    int kept_current;              /* the model held at the barrier is the kept one */
    uint64_t save_id;              /* the kept model's save (MANIFEST), 0: none */
    uint64_t best_epoch;           /* epochs trained by the kept model */
    uint32_t n_evals;              /* validations so far */
    uint32_t evals_since_best;     /* of them, after the best (trainer.patience) */
    struct tr_eval_result best;    /* the kept model's validation */
};

/* The state as TR_KB_WORDS 64-bit words, word 0 naming the format
 * (TR_KB_FORMAT) and the flags: the form the vote (below, in 16-bit limbs)
 * and the job checkpoint (tr_jobckpt.h) carry. */
void tr_keepbest_encode(const struct tr_keepbest *s, uint64_t w[TR_KB_WORDS]);

/* Read words w (tr_keepbest_encode's) into s. Returns 0, or SS_E_PROTO with
 * err when word 0 does not name format TR_KB_FORMAT or sets unknown flags
 * (s untouched). */
int tr_keepbest_decode(const uint64_t w[TR_KB_WORDS], struct tr_keepbest *s, char *err,
                       size_t len);

/* Write s into out (TR_KB_FLOATS floats, every one a whole number in
 * [0, 65535]). */
void tr_keepbest_pack(const struct tr_keepbest *s, float *out);

/* Read the sum of the vote's state part (TR_KB_FLOATS floats) into s.
 * Returns 1 when it carried a state, 0 when it is all zeros (no trainer
 * sent one: the leader was lost in this barrier), or SS_E_PROTO with err
 * when it is not one state of format TR_KB_FORMAT (s untouched). */
int tr_keepbest_unpack(const float *in, struct tr_keepbest *s, char *err, size_t len);

/* The state a trainer that takes over the lead goes on from: the lost
 * leader's (got; fresh: it came in the barrier just passed, so that its
 * kept_current still holds) when one was received, else its own (mine,
 * with sync none its own replica's history). Pure. */
/* Whether the sum of the vote's state part (TR_KB_FLOATS floats) holds a
 * state at all: 1 when any float is not zero (a leader sent one, readable
 * or not), 0 when all are (no trainer sent one: the leader was not in the
 * sum). A leader's state is never all zeros (word 0 names the format), so
 * this tells from the sum alone, the same on every trainer, whether the
 * leader was in it. */
int tr_keepbest_sent(const float *in);

struct tr_keepbest tr_keepbest_adopt(const struct tr_keepbest *mine,
                                     const struct tr_keepbest *got, int have_got, int fresh);

#endif
