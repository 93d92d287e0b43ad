/* ps_ckpt_set.h - the checkpoint files that one save of a job wrote into a folder.
 *
 * Every PS writes its checkpoint as DIR/ROLE-K.ckpt (ps_ckpt.h). A PS restoring
 * into the shard count the files were written with needs its own file only; a
 * PS restoring into another count (re-sharding) reads the whole set:
 * ROLE-0 .. ROLE-(S-1).ckpt, S the shard count of the job that wrote them.
 * ps_ckpt_set_open() decides which case applies and checks the set from the
 * headers alone (whoever reads a payload checks it):
 *
 * - The own file ROLE-K.ckpt is version 2 and says n_shards T (this job's
 *   count), and ROLE-0.ckpt (when K > 0 and it exists) records the same
 *   count, map, job and save: own_only, only these headers are read (a PS
 *   restarted from its recovery checkpoint, an eval with the shard count of
 *   the training job). When a newer ROLE-0.ckpt disagrees, a later save with
 *   another count overwrote it and the own file is a leftover: the set below
 *   applies. An older ROLE-0.ckpt that disagrees is the leftover (a reused
 *   folder): the own file is restored alone, with a warning.
 * - Version 2 otherwise: S is ROLE-0.ckpt's n_shards. Every ROLE-j.ckpt, j < S,
 *   must exist and say shard j, n_shards S and the map id, job id and save id
 *   of ROLE-0.ckpt. Files ROLE-j.ckpt with j >= S were left by another save (a
 *   job with more shards wrote into the same folder before): they are not part
 *   of the set and a warning names them.
 * - Version 1 (or n_shards 0): the count was not recorded. It is inferred from
 *   the files present: ROLE-0 .. ROLE-(S-1).ckpt must all be there, no gap,
 *   no file that records a count among them, and a log line says so. When S
 *   equals T the PS reads its own file as before (own_only). Otherwise the
 *   restore is refused (SS_E_CONFIG): files present cannot prove the count
 *   (a set of 4 that lost its last two files looks like a whole set of 2, and
 *   its rows even map as if it were), so re-sharding a set that does not
 *   record its count could drop rows unseen. The fix the error names: restore
 *   into S shards and write a new checkpoint ('shadow-ctl checkpoint'), which
 *   records the count.
 *
 * Refusals are logged as errors that name the file, what is wrong and how to
 * fix it. */
#ifndef PS_CKPT_SET_H
#define PS_CKPT_SET_H

#include <stdint.h>

#include "ps_ckpt.h"

struct ps_ckpt_set {
    uint32_t n;                 /* S: shards of the job that wrote the set */
    int inferred;               /* 1: S inferred from version-1 files present (then
                                 * always own_only) */
    int own_only;               /* 1: S is this job's count; only entry [shard] is set */
    char **paths;               /* n paths; paths[j] is shard j's file (owned; NULL
                                 * except [shard] with own_only) */
    struct ps_ckpt_hdr *hdrs;   /* n headers, hdrs[j] of paths[j] */
};

/* Find and check the checkpoint set for shard `shard` of a job with n_shards
 * shards of role (the file name prefix, "embedding" or "sync") in dir; kind is
 * the enum ps_ckpt_kind expected. On success fills *set; free it with
 * ps_ckpt_set_free(). Returns 0; SS_E_NOTFOUND if a file the restore needs is
 * missing; SS_E_CORRUPT if the files do not form one set or a header is bad;
 * SS_E_CONFIG for version-1 files and another count; SS_E_IO if dir or a file
 * is unreadable; SS_E_NOMEM if the memory to read it cannot be had (each
 * logged). On error *set is
 * empty. Borrows dir and role. Any thread; reads only headers. */
int ps_ckpt_set_open(const char *dir, const char *role, uint32_t kind, uint32_t shard,
                     uint32_t n_shards, struct ps_ckpt_set *set);

/* Free what set holds and zero it; accepts an empty set. */
void ps_ckpt_set_free(struct ps_ckpt_set *set);

#endif
