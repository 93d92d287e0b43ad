/* ps_ckpt_set.c - find and check the files of one saved checkpoint set, see
 * ps_ckpt_set.h.
 *
 * DESIGN: only headers are read here (ps_ckpt_open checks magic, version,
 * header checksums, kind and file size), so checking a set costs S small
 * reads; the restore that streams the payloads verifies them. The folder is
 * listed once to find files left by other saves (recorded counts) or to infer
 * the count (version 1). */
#include "ps_ckpt_set.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ss_err.h"
#include "ss_log.h"
#include "ss_mem.h"

#define S_MAX_SHARDS 65536u   /* most shards a set may record (sanity bound) */
#define S_PATH 4096           /* longest path built here */

static int s_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Read and check the header of path (nothing else). Returns ps_ckpt_open's rc. */
static int s_peek(const char *path, uint32_t kind, struct ps_ckpt_hdr *hdr)
{
    ps_ckpt_reader_t *r;
    int rc = ps_ckpt_open(path, kind, hdr, &r);
    ps_ckpt_close(&r);
    return rc;
}

/* Shard index of a file name "ROLE-K.ckpt", or -1 for any other name. */
static long s_name_index(const char *name, const char *role)
{
    size_t n = strlen(role);
    if (strncmp(name, role, n) != 0 || name[n] != '-' || name[n + 1] < '0' || name[n + 1] > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long k = strtoul(name + n + 1, &end, 10);
    if (errno || strcmp(end, ".ckpt") != 0 || k >= S_MAX_SHARDS)
        return -1;
    return (long)k;
}

/* List the shard indices of dir's ROLE-K.ckpt files: present[k] = 1 for
 * k < S_MAX_SHARDS (present: S_MAX_SHARDS bytes, zeroed by the caller).
 * Returns 1 + the largest index (0 if none) or SS_E_IO (logged). */
static long s_list(const char *dir, const char *role, unsigned char *present)
{
    DIR *d = opendir(dir);
    long top = 0;
    struct dirent *e;

    if (!d) {
        SS_LOG(SS_LOG_ERROR, "checkpoint set %s: cannot list the folder: %s", dir,
               strerror(errno));
        return SS_E_IO;
    }
    while ((e = readdir(d)) != NULL) {
        long k = s_name_index(e->d_name, role);
        if (k < 0)
            continue;
        present[k] = 1;
        if (k + 1 > top)
            top = k + 1;
    }
    closedir(d);
    return top;
}

/* A zeroed flag per possible shard for s_list(), or NULL (logged) when the
 * memory cannot be had: a RESTORE opens sets online, and no memory is an
 * error it answers, not a reason to abort the PS. */
static unsigned char *s_present_new(const char *dir)
{
    unsigned char *present = ss_try_malloc(S_MAX_SHARDS);
    if (present)
        memset(present, 0, S_MAX_SHARDS);
    else
        SS_LOG(SS_LOG_ERROR, "checkpoint set %s: no memory for %u bytes to list it", dir,
               (unsigned)S_MAX_SHARDS);
    return present;
}

/* Allocate the set's arrays for n shards. */
static void s_alloc(struct ps_ckpt_set *set, uint32_t n)
{
    set->n = n;
    set->paths = ss_calloc(n, sizeof *set->paths);
    set->hdrs = ss_calloc(n, sizeof *set->hdrs);
}

void ps_ckpt_set_free(struct ps_ckpt_set *set)
{
    if (!set)
        return;
    for (uint32_t j = 0; j < set->n && set->paths; j++)
        ss_free(set->paths[j]);
    ss_free(set->paths);
    ss_free(set->hdrs);
    memset(set, 0, sizeof *set);
}

/* Log that shard j's file of a set of n is missing (recorded: n is what the
 * files say, else what the files present suggest). */
static int s_missing(const char *dir, const char *role, const char *path, uint32_t j, uint32_t n,
                     int recorded)
{
    char why[160];
    if (recorded)
        snprintf(why, sizeof why, "the set was written by a job with %u %s shards", n, role);
    else
        snprintf(why, sizeof why, "the set records no shard count (format version 1) and "
                 "files up to %s-%u.ckpt are present", role, n - 1);
    SS_LOG(SS_LOG_ERROR,
           "checkpoint set %s: %s is missing: %s, and a restore needs all of %s-0.ckpt .. "
           "%s-%u.ckpt; copy %s from where %s PS %u wrote it (its checkpoint folder), or "
           "restore into %u %s shards, where each PS needs only its own file", dir, path, why,
           role, role, n - 1, path, role, j, n, role);
    return SS_E_NOTFOUND;
}

/* Check that h (shard j's file at path) belongs to the set h0 describes. */
static int s_check_member(const char *dir, const char *path, uint32_t j,
                          const struct ps_ckpt_hdr *h, const struct ps_ckpt_hdr *h0,
                          const char *path0)
{
    if (h->version >= 2 && h->n_shards == h0->n_shards && h->shard == j &&
        h->map_id == h0->map_id && h->job_id == h0->job_id && h->save_id == h0->save_id)
        return 0;
    SS_LOG(SS_LOG_ERROR,
           "checkpoint set %s: %s does not belong with %s: it says version %u, shard %u of %u, "
           "map %u, job %016llx, save %016llx; %s says shard 0 of %u, map %u, job %016llx, "
           "save %016llx. The folder mixes files of different saves: restore from a folder "
           "that holds the files of one save only", dir, path, path0, h->version, h->shard,
           h->n_shards, h->map_id, (unsigned long long)h->job_id,
           (unsigned long long)h->save_id, path0, h0->n_shards, h0->map_id,
           (unsigned long long)h0->job_id, (unsigned long long)h0->save_id);
    return SS_E_CORRUPT;
}

/* The set of a recorded count: ROLE-0's header h0 says n_shards. */
static int s_open_recorded(const char *dir, const char *role, uint32_t kind,
                           const struct ps_ckpt_hdr *h0, struct ps_ckpt_set *set)
{
    uint32_t n = h0->n_shards;
    char path[S_PATH], path0[S_PATH];
    int rc;

    if (n > S_MAX_SHARDS) {
        SS_LOG(SS_LOG_ERROR, "checkpoint set %s: %s-0.ckpt records %u shards, more than %u",
               dir, role, n, S_MAX_SHARDS);
        return SS_E_CORRUPT;
    }
    ps_ckpt_path(path0, sizeof path0, dir, role, 0);
    s_alloc(set, n);
    for (uint32_t j = 0; j < n; j++) {
        ps_ckpt_path(path, sizeof path, dir, role, j);
        if (!s_exists(path))
            return s_missing(dir, role, path, j, n, 1);
        if ((rc = s_peek(path, kind, &set->hdrs[j])) != 0 ||
            (rc = s_check_member(dir, path, j, &set->hdrs[j], h0, path0)) != 0)
            return rc;
        set->paths[j] = ss_strdup(path);
    }
    unsigned char *present = s_present_new(dir);
    if (!present)
        return 0;   /* the set is whole: only the warning below is missed */
    long top = s_list(dir, role, present);
    for (long k = n; k < top; k++)
        if (present[k])
            SS_LOG(SS_LOG_WARN, "checkpoint set %s: %s-%ld.ckpt is not part of the set (%s-0.ckpt "
                   "records %u shards): left by an earlier save, ignored", dir, role, k, role, n);
    ss_free(present);
    return top < 0 ? (int)top : 0;
}

/* The set of files that record no count: ROLE-0 .. ROLE-(S-1) present. */
static int s_open_inferred(const char *dir, const char *role, uint32_t kind,
                           struct ps_ckpt_set *set)
{
    unsigned char *present = s_present_new(dir);
    if (!present)
        return SS_E_NOMEM;
    long top = s_list(dir, role, present);
    char path[S_PATH];
    int rc = 0;

    if (top <= 0) {
        ss_free(present);
        return top < 0 ? (int)top : SS_E_NOTFOUND;
    }
    s_alloc(set, (uint32_t)top);
    set->inferred = 1;
    for (uint32_t j = 0; j < set->n && rc == 0; j++) {
        ps_ckpt_path(path, sizeof path, dir, role, j);
        if (!present[j]) {
            rc = s_missing(dir, role, path, j, set->n, 0);
            break;
        }
        struct ps_ckpt_hdr *h = &set->hdrs[j];
        if ((rc = s_peek(path, kind, h)) != 0)
            break;
        if (h->n_shards != 0 || h->shard != j) {
            SS_LOG(SS_LOG_ERROR, "checkpoint set %s: %s says shard %u of %u, but %s-0.ckpt "
                   "records no shard count: the folder mixes files of different saves", dir,
                   path, h->shard, h->n_shards, role);
            rc = SS_E_CORRUPT;
        }
        set->paths[j] = ss_strdup(path);
    }
    ss_free(present);
    if (rc == 0)
        SS_LOG(SS_LOG_INFO, "checkpoint set %s: %s checkpoints of format version 1 record no "
               "shard count; taking %u, the files %s-0.ckpt .. %s-%u.ckpt present", dir, role,
               set->n, role, role, set->n - 1);
    return rc;
}

/* 1 if file a was modified before file b (both exist). */
static int s_older(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0)
        return 0;
    return sa.st_mtim.tv_sec < sb.st_mtim.tv_sec ||
           (sa.st_mtim.tv_sec == sb.st_mtim.tv_sec && sa.st_mtim.tv_nsec < sb.st_mtim.tv_nsec);
}

/* 1 if the own file (own, header h) may be restored alone: ROLE-0.ckpt (path0)
 * is absent, or is the own file, or records the same shard count and map
 * (another save of the same shape: per-PS recovery checkpoints, or
 * 'shadow-ctl checkpoint' calls that raced, write the files of one folder at
 * different times; each PS's own file is its latest state), or records
 * another count but is older than the own file (a leftover of an earlier job
 * in a reused folder). When a newer ROLE-0.ckpt records another count, a later
 * save with that count overwrote it and the own file is the leftover: then
 * the set of ROLE-0 is the one to restore. */
static int s_agrees_with_0(const char *own, const char *path0, uint32_t kind,
                           const struct ps_ckpt_hdr *h)
{
    struct ps_ckpt_hdr h0;
    if (h->shard == 0 || !s_exists(path0))
        return 1;
    if (s_peek(path0, kind, &h0) != 0)
        return 0;   /* the set path reads it again and reports what is wrong */
    if (h0.version >= 2 && h0.n_shards == h->n_shards && h0.map_id == h->map_id) {
        if (h0.job_id != h->job_id || h0.save_id != h->save_id)
            SS_LOG(SS_LOG_INFO, "checkpoint %s: %s is from another save of the same %u "
                   "shards; restoring the own file", own, path0, h->n_shards);
        return 1;
    }
    if (!s_older(path0, own))
        return 0;
    SS_LOG(SS_LOG_WARN, "checkpoint %s: %s is older and from another save (it records %u "
           "shards); restoring the own file alone", own, path0, h0.n_shards);
    return 1;
}

int ps_ckpt_set_open(const char *dir, const char *role, uint32_t kind, uint32_t shard,
                     uint32_t n_shards, struct ps_ckpt_set *set)
{
    char own[S_PATH], path0[S_PATH];
    struct ps_ckpt_hdr h;
    int rc;

    memset(set, 0, sizeof *set);
    ps_ckpt_path(own, sizeof own, dir, role, shard);
    ps_ckpt_path(path0, sizeof path0, dir, role, 0);
    if (s_exists(own)) {
        if ((rc = s_peek(own, kind, &h)) != 0)
            return rc;
        if (h.version >= 2 && h.n_shards == n_shards && s_agrees_with_0(own, path0, kind, &h)) {
            s_alloc(set, n_shards);
            set->own_only = 1;
            set->paths[shard] = ss_strdup(own);
            set->hdrs[shard] = h;
            return 0;
        }
    }
    if (!s_exists(path0)) {
        SS_LOG(SS_LOG_ERROR, "checkpoint set %s: no %s: the folder holds no %s checkpoints "
               "(point --restore at the folder with %s-*.ckpt, or write them first with "
               "'shadow-ctl checkpoint')", dir, path0, role, role);
        return SS_E_NOTFOUND;
    }
    if ((rc = s_peek(path0, kind, &h)) != 0)
        return rc;
    if (h.version >= 2 && h.n_shards > 0)
        rc = s_open_recorded(dir, role, kind, &h, set);
    else
        rc = s_open_inferred(dir, role, kind, set);
    if (rc != 0) {
        ps_ckpt_set_free(set);
        return rc;
    }
    if (set->inferred && set->n != n_shards) {
        SS_LOG(SS_LOG_ERROR, "checkpoint set %s: the %s checkpoints are format version 1, "
               "which records no shard count, and the %u files present do not match this "
               "job's %u %s shards: re-sharding them could drop rows unseen (a set that lost "
               "files can look whole). Restore them into %u %s shards, write a new checkpoint "
               "('shadow-ctl checkpoint', which records the count), then restore that", dir,
               role, set->n, n_shards, role, set->n, role);
        ps_ckpt_set_free(set);
        return SS_E_CONFIG;
    }
    if (set->n == n_shards) {   /* version 1 with this job's count: the own file only */
        for (uint32_t j = 0; j < set->n; j++)
            if (j != shard) {
                ss_free(set->paths[j]);
                set->paths[j] = NULL;
            }
        set->own_only = 1;
    }
    return 0;
}
