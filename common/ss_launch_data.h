/* ss_launch_data.h - a launch's plain data, as scripts/shadow-launch writes
 * it for shadow-super: what it knows of its hosts, their folders, the
 * placement (shadow-ctl plan), the job's --set words and the descriptors
 * it opened. No rule lives here: ss_spec.h turns the data into the
 * supervisor's processes, ss_launch_copy.h into the copies to and from the
 * hosts.
 *
 * The file: NUL-terminated words, records of a key and its values:
 *
 *   KEY VALUE   for KEY in trainers allow_loss max_ps_restarts quiet run_dir
 *               logs jobckpt keep_fd exec step_name traits eval_only
 *               predict predict_out pred_where pred_fd pred_in skip_bad
 *               resume hosts_file algo data_eval job bin rbin host_stdin
 *               n_emb n_sync (a missing one is empty; "" for none)
 *   ssh_opt O   the user's ssh options, in order
 *   set W       the words every process gets after -c JOB (--set K=V ...)
 *   host NAME TARGET CPUS PDIR CKDIR SHARED   each host, in index order:
 *               its name in messages, how --exec reaches it, the job's CPUs
 *               there (srun), the run directory and checkpoint folder of its
 *               processes, and 1 when PDIR is RUN_DIR itself (this machine
 *               or a shared file system: nothing to copy), else 0
 *   place ROLE K H   process K of ROLE (embedding, sync, trainer) on host H
 *   ctl R PATH  trainer R's control pipe (its standard input and ctl)
 *
 * Not thread-safe; one reader at a time per object. */
#ifndef SS_LAUNCH_DATA_H
#define SS_LAUNCH_DATA_H

#include <stddef.h>

#define SS_LAUNCH_MAX_PROCS 4096   /* processes of one role */

/* One host of the launch; strings point into the data's text. */
struct ss_launch_host {
    const char *name, *target, *cpus, *pdir, *ckdir;
    int shared;   /* its run directory is RUN_DIR itself */
};

/* The launch data; every string points into text (owned). */
struct ss_launch_data {
    char *text;
    const char **val;                 /* one per key, NULL when missing */
    const char **ssh_opts, **sets;
    size_t n_ssh_opts, n_sets;
    struct ss_launch_host *hosts;
    size_t n_hosts;
    int place[3][SS_LAUNCH_MAX_PROCS];   /* embedding, sync, trainer: host index, -1 none */
    const char *ctl[SS_LAUNCH_MAX_PROCS];
};

/* Read path into a new object (free with ss_launch_data_destroy()). Returns
 * it, or NULL with a message in err (a file it cannot read, a record it
 * does not know or that lacks its values). */
struct ss_launch_data *ss_launch_data_read(const char *path, char *err, size_t err_len);

/* Free d; sets *d_p to NULL; accepts NULL. */
void ss_launch_data_destroy(struct ss_launch_data **d_p);

/* The value of KEY ("" when missing or unknown); borrowed. */
const char *ss_launch_data_get(const struct ss_launch_data *d, const char *key);

/* Whether KEY has a non-empty value. */
int ss_launch_data_has(const struct ss_launch_data *d, const char *key);

/* Whether the traits value ("ring=0 sync_ps=1 ...") holds name=1. */
int ss_launch_data_trait(const struct ss_launch_data *d, const char *name);

/* The role index of "embedding" (0), "sync" (1), "trainer" (2); -1 else. */
int ss_launch_data_role(const char *role);

/* Where the processes on host h find the job checkpoint they resume from,
 * into buf: PDIR/jobckpt on a host that shares RUN_DIR, else
 * PDIR/jobckpt.resume (the part that ss_launch_push() copied there). */
const char *ss_launch_data_rdir(const struct ss_launch_data *d, size_t h, char *buf,
                                size_t len);

#endif
