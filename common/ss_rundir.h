/* ss_rundir.h - a launched job's run directory once the hosts' run
 * directories are gathered into it: the parts of a model save and of a job
 * checkpoint that PSs and trainers on hosts sharing no file system wrote
 * apart, joined.
 *
 * A save (model/ or jobckpt/) is committed by one process (trainer 0, or the
 * leading trainer) renaming its folder into place; every other process
 * writes its part into NAME.new-ID (ID: the save's save_id, in MANIFEST)
 * of its own run directory. The gather (tar) brings those folders home, a
 * host's committed jobckpt/ as jobckpt.gathered. Here:
 *
 * - the model: the parts of the save that model/MANIFEST names join model/,
 *   the folders of other saves are dropped;
 * - the job checkpoint: a gathered jobckpt.gathered that is newer than
 *   jobckpt/ becomes jobckpt/ with every part of its save, but only when it is
 *   then complete (ss_super_ckpt_read()); else jobckpt/ stays as it was. A
 *   jobckpt/ committed on a host that shares RUN_DIR gets the others' parts.
 *
 * Not thread-safe; one launcher per run directory (its lock). */
#ifndef SS_RUNDIR_H
#define SS_RUNDIR_H

#include <stddef.h>

/* Join the parts of the model save in run_dir (see above). Never fails:
 * what cannot be moved stays out of model/ (the model is then incomplete,
 * which its reader says). */
void ss_rundir_merge_model(const char *run_dir);

/* Join the job checkpoint in run_dir (see above). Returns 0, or 1 when a
 * gathered job checkpoint was incomplete and so not taken, with its save_id
 * and the missing files in msg (" NAME" each). */
int ss_rundir_merge_jobckpt(const char *run_dir, char *msg, size_t msg_len);

/* One process that a host resumes: a trainer (rank) or a PS (role, its
 * shard now, the role's shard count now). */
struct ss_rundir_proc {
    const char *role;   /* "trainer", "embedding" or "sync" */
    int index;          /* rank or shard */
    int count;          /* PS: the role's shard count in this job */
};

/* The files of the job checkpoint in dir that a host needs to resume
 * procs[0..n) (a --resume push to a host that shares no file system):
 * MANIFEST; trainer-R.state per trainer; per PS its own ROLE-K.ckpt when
 * the checkpoint holds the role's shards in this job's count, else the
 * role's whole set ROLE-0 .. ROLE-(S-1).ckpt, S its count in MANIFEST (a
 * re-sharded restore reads them all: server/ps_ckpt_set.h). Into out, one
 * name a line, each once. Returns how many names (1: MANIFEST alone, nothing
 * to push). */
size_t ss_rundir_resume_files(const char *dir, const struct ss_rundir_proc *procs, size_t n,
                              char *out, size_t out_len);

#endif
