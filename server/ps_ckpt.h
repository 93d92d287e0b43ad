/* ps_ckpt.h - the checkpoint file format shared by the embedding and sync shards.
 *
 * A checkpoint is one file: a header (128 bytes; 80 in version-1 files), then
 * the payload.
 *
 *   offset  size  field
 *   0       8     magic "SSCKPT\0\1"
 *   8       4     format version: 2 (PS_CKPT_VERSION); 1 in older files
 *   12      4     kind (enum ps_ckpt_kind)
 *   16      4     shard number
 *   20      4     flags (written 0, ignored by readers)
 *   24      32    shape[4]: kind-specific (embed: n_tables, dim, optimizer + 256 *
 *                 first_order, n_rows; sync: offset, len, rounds, 0)
 *   56      8     payload byte count
 *   64      8     64-bit checksum of the payload (ps_ckpt_checksum)
 *   72      8     64-bit checksum of bytes 0..71 of the header
 *   --- version 2 only; a version-1 file's payload starts at 80 ---
 *   80      4     n_shards: shards of the writer's role in the job that wrote
 *                 it (0 = not recorded)
 *   84      4     map id: how that job split keys (embedding: SS_KEY_SHARD_MAP_ID)
 *                 or the dense vector (sync: SS_RANGE_SPLIT_ID) over its shards
 *   88      8     job id: names the job that wrote it (0 = not recorded)
 *   96      8     save id: the same in every file of one save (0 = none, as for
 *                 the recovery checkpoints each PS writes on its own timer)
 *   104     16    reserved (written 0, ignored by readers)
 *   120     8     64-bit checksum of bytes 0..119 of the header
 *
 * Version 1 files are still read: their n_shards, map id, job id and save id
 * read as 0 ("not recorded"). The shape fields of both versions are the same.
 *
 * Header integers are little-endian. The payload is written as the caller hands
 * it over (floats in host order; ShadowSync runs on little-endian hosts).
 *
 * Writing is atomic: the bytes go to PATH.tmp, which is flushed, fsync'ed and
 * renamed over PATH, then the directory is fsync'ed. Any failure (open, a write
 * on a full disk, fsync, rename) removes PATH.tmp, leaves an older PATH as it
 * was and returns SS_E_IO with a log line naming the path. Only one writer may
 * target a given PATH at a time (they would share PATH.tmp).
 *
 * Reading checks magic, version, header checksum(s), kind and the file size
 * against the payload count on open; ps_ckpt_verify() checks the payload
 * checksum once every byte was read. Every failure is SS_E_CORRUPT (bad or
 * truncated file) or SS_E_IO (cannot open/read) with a log line saying what and
 * naming the path.
 *
 * Writers and readers are single-thread objects; different ones may be used
 * from different threads at once.
 *
 * Names: a PS writes its checkpoint as DIR/ROLE-K.ckpt (ps_ckpt_path()); the
 * files one save of a job writes into DIR form a set (ps_ckpt_set.h). */
#ifndef PS_CKPT_H
#define PS_CKPT_H

#include <stddef.h>
#include <stdint.h>

#define PS_CKPT_VERSION 2u         /* the version this build writes */
#define PS_CKPT_HDR_BYTES 128u     /* header bytes of what this build writes */
#define PS_CKPT_HDR_V1_BYTES 80u   /* header bytes of a version-1 file */

enum ps_ckpt_kind { PS_CKPT_EMBED = 1, PS_CKPT_SYNC = 2 };

/* What a header says besides magic and checksums. */
struct ps_ckpt_hdr {
    uint32_t kind;            /* enum ps_ckpt_kind */
    uint32_t shard;           /* shard number of the server that wrote it */
    uint64_t shape[4];        /* kind-specific shape fields, see above */
    uint64_t payload_bytes;   /* payload size; set by the writer at commit, by open */
    uint32_t version;         /* format version; set by open, ignored by commit */
    uint32_t n_shards;        /* shards of the writer's role in its job; 0 = not recorded */
    uint32_t map_id;          /* how keys/ranges were split over them; 0 = not recorded */
    uint64_t job_id;          /* the writing job (ps_ckpt_job_id()); 0 = not recorded */
    uint64_t save_id;         /* one save over all PSs; 0 = none */
};

/* Who writes a checkpoint: what the version-2 header records about it
 * (ps_embed_checkpoint() and ps_sync_checkpoint() add their map id). */
struct ps_ckpt_who {
    uint32_t shard;           /* this PS's shard number */
    uint32_t n_shards;        /* shards of its role in the job; 0 = not recorded */
    uint64_t job_id;          /* ps_ckpt_job_id() of the job; 0 = not recorded */
    uint64_t save_id;         /* the same on every PS for one save; 0 = none */
};

/* File name prefixes: a PS of a role writes DIR/ROLE-K.ckpt. */
#define PS_CKPT_NAME_EMBED "embedding"
#define PS_CKPT_NAME_SYNC "sync"

typedef struct ps_ckpt_writer ps_ckpt_writer_t;
typedef struct ps_ckpt_reader ps_ckpt_reader_t;

/* Progress of the files this thread writes and reads (a CHECKPOINT or a
 * RESTORE that a client waits for): fn(arg, path, bytes, total) after each
 * buffer (1 MiB) a writer writes out or a reader reads in, bytes being the
 * payload of path so far, total its payload when known (a reader), else 0.
 * Per thread: the thread that serves the request sets it around the work
 * and clears it (fn NULL); files of other threads are not reported. fn runs
 * on this thread, inside the write or read. */
typedef void ps_ckpt_progress_fn(void *arg, const char *path, uint64_t bytes, uint64_t total);
void ps_ckpt_progress(ps_ckpt_progress_fn *fn, void *arg);
/* This thread waits for another checkpoint or restore of the shard (the
 * service's one-at-a-time lock) before it writes or reads path: this
 * thread's listener, if any, is called with bytes and total
 * PS_CKPT_WAITING, so that a client waiting for it hears the PS is at it. */
#define PS_CKPT_WAITING UINT64_MAX
void ps_ckpt_progress_waiting(const char *path);

/* Start writing a checkpoint for path: creates PATH.tmp (truncating a stale one).
 * On success *w_p is the writer; finish it with ps_ckpt_commit() or
 * ps_ckpt_abort(). Returns 0, SS_E_NOSPC (disk full or quota), SS_E_IO or
 * SS_E_NOMEM (no memory for its buffer) (logged; *w_p set to NULL). Borrows
 * path. */
int ps_ckpt_begin(const char *path, ps_ckpt_writer_t **w_p);

/* Append n payload bytes (buffered). Returns 0, SS_E_NOSPC or SS_E_IO; after an error every
 * later write fails too and commit removes the temp file. Borrows data. */
int ps_ckpt_write(ps_ckpt_writer_t *w, const void *data, size_t n);

/* Finish: write a version-2 header from hdr (payload_bytes and version are
 * ignored: the writer counts the payload), fsync, rename PATH.tmp over PATH,
 * fsync the directory. Always frees the writer and sets *w_p to NULL; on
 * failure the temp file is removed.
 * Returns 0, SS_E_NOSPC or SS_E_IO (logged). */
int ps_ckpt_commit(ps_ckpt_writer_t **w_p, const struct ps_ckpt_hdr *hdr);

/* Give up: close and remove PATH.tmp, free the writer, set *w_p to NULL.
 * Accepts NULL and *w_p == NULL. PATH is left as it was. */
void ps_ckpt_abort(ps_ckpt_writer_t **w_p);

/* Open path and check magic, version (1 or 2), header checksum(s), that the
 * kind equals kind and that the file holds exactly the header plus
 * payload_bytes. Fills *hdr (a version-1 file leaves n_shards, map_id, job_id
 * and save_id 0). On success *r_p is the reader (free with ps_ckpt_close()).
 * Returns 0, SS_E_IO (missing/unreadable), SS_E_CORRUPT or SS_E_NOMEM (no
 * memory for its read buffer) (logged, naming path and the failed check); on
 * error *r_p is NULL. Borrows path. */
int ps_ckpt_open(const char *path, uint32_t kind, struct ps_ckpt_hdr *hdr,
                 ps_ckpt_reader_t **r_p);

/* Read exactly n payload bytes into buf. Returns 0, SS_E_CORRUPT if fewer than
 * n payload bytes remain, or SS_E_IO on a read error (both logged). */
int ps_ckpt_read(ps_ckpt_reader_t *r, void *buf, size_t n);

/* Payload bytes not yet read. */
uint64_t ps_ckpt_remaining(const ps_ckpt_reader_t *r);

/* Check that the whole payload was read and its checksum matches the header.
 * Returns 0 or SS_E_CORRUPT (logged). */
int ps_ckpt_verify(ps_ckpt_reader_t *r);

/* Close the file and free the reader; sets *r_p to NULL, accepts NULL. */
void ps_ckpt_close(ps_ckpt_reader_t **r_p);

/* Write "DIR/ROLE-K.ckpt" into out (len bytes, truncated if longer). */
void ps_ckpt_path(char *out, size_t len, const char *dir, const char *role, uint32_t shard);

/* After the save whose folder is DIR/NAME.new-ID was committed: remove this
 * PS's file ROLE-K.ckpt from every other folder DIR/NAME.new-* (ID: 16 hex
 * digits), and each such folder once it is empty. Those hold parts of earlier
 * saves (or of failed ones) on a host that shares no file system with the
 * leading trainer's: the commit there swapped in only its own host's folder.
 * committed itself is never touched, nor any other file. *n_dropped: the
 * files removed. Returns 0, SS_E_INVAL (committed is not NAME.new-ID: err
 * says so) or SS_E_IO (DIR cannot be read: err). Thread: any; the caller
 * keeps checkpoint writes of this PS out meanwhile. */
int ps_ckpt_drop_other_saves(const char *committed, const char *role, uint32_t shard,
                             size_t *n_dropped, char *err, size_t len);

/* The job id written into headers: a nonzero hash of the job name and seed. */
uint64_t ps_ckpt_job_id(const char *job_name, uint64_t seed);

/* The checksum used for payloads, over one buffer (the writer and reader compute
 * the same value incrementally over any split of the bytes). Thread-safe. */
uint64_t ps_ckpt_checksum(const void *data, size_t n);

#endif
