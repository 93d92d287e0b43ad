/* ps_ckpt.h - the checkpoint file format shared by the embedding and sync shards.
 *
 * A checkpoint is one file: an 80-byte header, then the payload.
 *
 *   offset  size  field
 *   0       8     magic "SSCKPT\0\1"
 *   8       4     format version (PS_CKPT_VERSION)
 *   12      4     kind (enum ps_ckpt_kind)
 *   16      4     shard number
 *   20      4     flags (written 0, ignored by version-1 readers)
 *   24      32    shape[4]: kind-specific (embed: n_tables, dim, optimizer + 256 *
 *                 first_order, n_rows; sync: offset, len, rounds, 0)
 *   56      8     payload byte count
 *   64      8     64-bit checksum of the payload (ps_ckpt_checksum)
 *   72      8     64-bit checksum of bytes 0..71 of the header
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
 * Reading checks magic, version, header checksum, kind and the file size against
 * the payload count on open; ps_ckpt_verify() checks the payload checksum once
 * every byte was read. Every failure is SS_E_CORRUPT (bad or truncated file) or
 * SS_E_IO (cannot open/read) with a log line saying what and naming the path.
 *
 * Writers and readers are single-thread objects; different ones may be used
 * from different threads at once. */
#ifndef PS_CKPT_H
#define PS_CKPT_H

#include <stddef.h>
#include <stdint.h>

#define PS_CKPT_VERSION 1u
#define PS_CKPT_HDR_BYTES 80u

enum ps_ckpt_kind { PS_CKPT_EMBED = 1, PS_CKPT_SYNC = 2 };

/* What a header says besides magic, version and checksums. */
struct ps_ckpt_hdr {
    uint32_t kind;            /* enum ps_ckpt_kind */
    uint32_t shard;           /* shard number of the server that wrote it */
    uint64_t shape[4];        /* kind-specific shape fields, see above */
    uint64_t payload_bytes;   /* payload size; set by the writer at commit, by open */
};

typedef struct ps_ckpt_writer ps_ckpt_writer_t;
typedef struct ps_ckpt_reader ps_ckpt_reader_t;

/* Start writing a checkpoint for path: creates PATH.tmp (truncating a stale one).
 * On success *w_p is the writer; finish it with ps_ckpt_commit() or
 * ps_ckpt_abort(). Returns 0 or SS_E_IO (logged; *w_p set to NULL). Borrows path. */
int ps_ckpt_begin(const char *path, ps_ckpt_writer_t **w_p);

/* Append n payload bytes (buffered). Returns 0 or SS_E_IO; after an error every
 * later write fails too and commit removes the temp file. Borrows data. */
int ps_ckpt_write(ps_ckpt_writer_t *w, const void *data, size_t n);

/* Finish: write the header from hdr (payload_bytes is ignored: the writer counts
 * it), fsync, rename PATH.tmp over PATH, fsync the directory. Always frees the
 * writer and sets *w_p to NULL; on failure the temp file is removed.
 * Returns 0 or SS_E_IO (logged). */
int ps_ckpt_commit(ps_ckpt_writer_t **w_p, const struct ps_ckpt_hdr *hdr);

/* Give up: close and remove PATH.tmp, free the writer, set *w_p to NULL.
 * Accepts NULL and *w_p == NULL. PATH is left as it was. */
void ps_ckpt_abort(ps_ckpt_writer_t **w_p);

/* Open path and check magic, version, header checksum, that the kind equals
 * kind and that the file holds exactly the header plus payload_bytes. Fills
 * *hdr. On success *r_p is the reader (free with ps_ckpt_close()).
 * Returns 0, SS_E_IO (missing/unreadable) or SS_E_CORRUPT (logged, naming path
 * and the failed check); on error *r_p is NULL. Borrows path. */
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

/* The checksum used for payloads, over one buffer (the writer and reader compute
 * the same value incrementally over any split of the bytes). Thread-safe. */
uint64_t ps_ckpt_checksum(const void *data, size_t n);

#endif
