/* ss_spec.h - the spec shadow-super runs a job from (tools/super_main.c
 * reads it), built from a launch's plain data.
 *
 * The launcher (scripts/shadow-launch) knows its hosts, their folders and
 * the placement (shadow-ctl plan), the job's --set words and the descriptors
 * it opened; here are the rules that turn them into processes:
 *
 * - which PSs run (every embedding shard; the sync shards when the sync rule
 *   has the sync_ps trait) and each one's command lines: its start (from the
 *   model of --eval-only RUN_DIR, from the job checkpoint of --resume, else
 *   empty), its restarts (empty, from its recovery checkpoint, from the job
 *   checkpoint resumed), its checkpoint's age and its shutdown (sent from its
 *   own host when the --exec mode is remote, else one for all of them from
 *   here: common/ss_backend.h);
 * - which trainers run (trainer 0 alone for --eval-only) and their command
 *   lines (--eval-only, --predict, --skip-bad, --resume);
 * - the job's flags and the lines printed once the PSs are ready.
 *
 * The data: a file of NUL-terminated words, records of a key and its
 * values (every value plain, no rule): see ss_launch_data.h. The spec: the
 * same form, as tools/super_main.c documents it. Each process's log is
 * created empty. Not thread-safe. */
#ifndef SS_SPEC_H
#define SS_SPEC_H

#include <stddef.h>

#include "ss_launch_data.h"

/* The trainers the launch d runs: trainer 0 alone for --eval-only (it
 * scores), else every one. */
int ss_spec_n_run(const struct ss_launch_data *d);

/* Read the launch data in in_path (common/ss_launch_data.h has its
 * records) and write the spec to out_path; sets *n_trainers to the trainers
 * it runs (1 for --eval-only). A process resumes from its host's job
 * checkpoint (ss_launch_data_rdir()). Returns 0, or -1 with a message in err
 * (a record it does not know, a process on no host, a file it cannot
 * write). */
int ss_spec_build(const char *in_path, const char *out_path, int *n_trainers, char *err,
                  size_t err_len);

#endif
