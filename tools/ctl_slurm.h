/* ctl_slurm.h - shadow-ctl slurm: run a job on the nodes of a Slurm
 * allocation, or submit one that does (scripts/shadow-slurm is its
 * wrapper; common/ss_slurm.h holds the rules). */
#ifndef CTL_SLURM_H
#define CTL_SLURM_H

/* shadow-ctl slurm --here DIR [--as NAME] -- ARGS...: shadow-slurm ARGS
 * (its usage, `shadow-slurm --help`), with DIR the folder of the scripts
 * (shadow-launch, shadow-slurm, ../bin) and NAME the script as run, for
 * messages. argv[0] is "slurm". Returns the exit status: 0, 2 on usage or
 * allocation errors; with --sbatch it becomes sbatch, otherwise
 * shadow-launch (exec), and returns only when that cannot run (126, 127). */
int ctl_slurm_main(int argc, char **argv);

#endif
