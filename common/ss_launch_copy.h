/* ss_launch_copy.h - the copies between this machine and a launch's hosts
 * that share no file system with RUN_DIR (ss_launch_data.h: SHARED 0):
 *
 * - the --resume push: each such host gets the part of RUN_DIR/jobckpt its
 *   processes restore (its trainers' states; its PSs' files, the sync PSs'
 *   only when the sync rule has the sync_ps trait: ss_rundir_resume_files())
 *   as PDIR/jobckpt.resume, through a tar stream over its --exec mode
 *   (common/ss_backend.h, SS_BACKEND_PIPE); all hosts at once;
 * - the gather: each such host's run directory (its logs and launch token
 *   apart; they are here already) copied into RUN_DIR, its jobckpt/ as
 *   jobckpt.gathered and its jobckpt.resume dropped there; one retry a
 *   second later; a lost host is skipped; then the parts of the model save
 *   and of the job checkpoint joined (common/ss_rundir.h).
 *
 * Each copy's trace and its programs' messages go to LOGS/gather.log; what
 * failed is said on standard error in the launcher's words. A host command
 * reads host_stdin (the launcher's keep pipe: the remote side stops when it
 * ends) and starts in cwd there (the launcher's folder). Its programs run
 * through common/ss_launch_proc.h. Call from one thread; forks and waits
 * for its own children only. */
#ifndef SS_LAUNCH_COPY_H
#define SS_LAUNCH_COPY_H

#include "ss_launch_data.h"

/* The --resume push (see above) of the job checkpoint in d's jobckpt.
 * Returns 0 when every host has its part, or -1 after a message per host
 * that has not. */
int ss_launch_push(const struct ss_launch_data *d, const char *cwd);

/* The gather (see above) into d's run_dir, skipping the hosts that
 * outcome_path (the supervisor's outcome: "host_lost H" lines; NULL or a
 * missing file: none) names as lost. Failures are said, never returned:
 * what came home is merged all the same. */
void ss_launch_gather(const struct ss_launch_data *d, const char *cwd, const char *outcome_path);

#endif
