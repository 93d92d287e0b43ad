/* ss_launch.h - the launcher: runs a whole job from its checked command
 * line (ss_launch_opts.h), as scripts/shadow-launch --help describes it.
 *
 * In order: the plan (shadow-ctl plan --launch: what the launch needs of
 * the job file, every data file checked, each process's host and
 * endpoint); the run directory's lock, its stale files, launch.args and the
 * launch token; the srun checks; the preflight of every host at once
 * (through its --exec mode, common/ss_backend.h: the run directory, the
 * version, free ports) and the plan again with the ports found;
 * admin.token, metrics.ports and cluster.args; the launch data
 * (ss_launch_data.h) and the trainers' control pipes; the supervisor
 * (shadow-super --spec: common/ss_super.h, a child in a process group of
 * its own) with SIGTERM and SIGINT passed on; then the gather and the end
 * (shadow-super --gather, --finish, --failed: ss_launch_copy.h,
 * ss_launch_end.h). The exit statuses: 0, 75, 141, 1, 2 (--help).
 *
 * SIGTERM and SIGINT: from the launch data on, a SIGINT stops the job
 * ("interrupted"), a SIGTERM asks for a job checkpoint (passed on to the
 * supervisor once it runs; a second one stops the job at once); with
 * --eval-only or --predict SIGTERM stops it at once too. Not thread-safe:
 * the process's one job. */
#ifndef SS_LAUNCH_H
#define SS_LAUNCH_H

#include "ss_launch_opts.h"

/* Run the job of opts (its script: the launcher's path as it was invoked,
 * $0, which the command that resumes the job names; its folder holds
 * shadow-plot and shadow-slurm); args[0..n_args) are its arguments as given
 * (RUN_DIR/launch.args keeps them). Changes to the job's working directory.
 * Returns the launcher's exit status (never returns on some failures: it
 * exits with it). Borrows everything. */
int ss_launch_run_job(const ss_launch_opts_t *opts, char *const *args, int n_args);

#endif
