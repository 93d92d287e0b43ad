/* ss_launch_end.h - the end of a launched job that finished (the
 * supervisor's verdict was "report": common/ss_super.h): its summary,
 * RUN_DIR/result.json, written and printed by `shadow-ctl report` (a
 * scoring summary for --eval-only and --predict, which trained nothing;
 * "resumed" and from how many examples for --resume); for --predict,
 * trainer 0's lines about the predictions it wrote; for a training job, its
 * plots (scripts/shadow-plot, when gnuplot is on PATH and plots are wanted;
 * SHADOW_PLOT_BAYES=NE in the environment adds the Bayes-optimal NE); and
 * the job checkpoint of a training job removed (a --resume would train its
 * rest again).
 *
 * Output on our standard output, messages on standard error, in the
 * launcher's words. Call from one thread; forks and waits for its own
 * children only. */
#ifndef SS_LAUNCH_END_H
#define SS_LAUNCH_END_H

#include "ss_launch_data.h"

/* What the end needs besides the launch data. Strings borrowed. */
struct ss_launch_end {
    const char *job_name;      /* job.name */
    const char *wall_s;        /* the job's wall time, seconds ("12.345") */
    const char *resumed_from;  /* --resume: the examples trained before; else NULL */
    const char *plot;          /* the shadow-plot script, or NULL: no plots */
    int n_run;                 /* the trainers that ran */
};

/* The end (see above) of the job in d. Returns the launcher's exit status:
 * 0, or 1 when the report failed (after a message naming the logs). */
int ss_launch_end_report(const struct ss_launch_data *d, const struct ss_launch_end *e);

/* A job that failed because a trainer did (trainers_failed: the result
 * files are this launch's) may have failed only to save the output model (a
 * full disk), often after scoring it: trainer 0's result file names the
 * error, and `shadow-ctl report --if-error` writes result.json from it all
 * the same (nothing unless it names one); the job still fails. Says so when
 * it wrote one, and whether the model was saved all the same (an error after
 * the save: the final RESTORE refused), or the model folder holds an earlier
 * model, which epoch (the output model's save failed after an earlier
 * one's). */
void ss_launch_end_unsaved(const struct ss_launch_data *d, const char *job_name,
                           int trainers_failed);

#endif
