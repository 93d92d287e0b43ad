/* ps_ckpt.c - atomic checkpoint files with a checked header, see ps_ckpt.h.
 *
 * DESIGN: the writer buffers into 1 MiB, reserves the header's 80 bytes at the
 * start of the file and pwrite()s the real header at commit, when the payload
 * size and checksum are known; so a writer streams any amount of data with
 * constant memory. The checksum is an xxHash64-style chain of 64-bit words
 * (every step is a bijection of the state, so one changed word or byte always
 * changes the result) finished with ss_mix64; it runs at several GB/s. */
#include "ps_ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_fs.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"

#define S_BUF_BYTES (1u << 20)
#define S_P1 0x9e3779b185ebca87ull
#define S_P2 0xc2b2ae3d27d4eb4full
#define S_P5 0x27d4eb2f165667c5ull

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "checkpoint payloads are host-order floats: little-endian hosts only");

static const unsigned char s_magic[8] = {'S', 'S', 'C', 'K', 'P', 'T', 0, 1};

/* Incremental payload checksum: state plus up to 7 bytes not yet folded in. */
struct s_sum {
    uint64_t h;              /* chain state */
    uint64_t total;          /* bytes seen */
    unsigned char carry[8];  /* partial word */
    unsigned n_carry;        /* bytes used in carry */
};

struct ps_ckpt_writer {
    struct ss_fs_tmp out;    /* PATH.tmp, renamed over PATH at commit */
    unsigned char *buf;      /* write buffer, S_BUF_BYTES */
    size_t used;             /* bytes in buf */
    uint64_t payload;        /* payload bytes accepted */
    struct s_sum sum;        /* payload checksum so far */
    int rc;                  /* first error, sticky */
};

struct ps_ckpt_reader {
    int fd;                  /* the open file */
    char *path;              /* for log lines */
    unsigned char *buf;      /* read buffer, S_BUF_BYTES */
    size_t pos;              /* next unread byte in buf */
    size_t len;              /* valid bytes in buf */
    uint64_t payload;        /* payload bytes of the file */
    uint64_t remaining;      /* payload bytes not yet handed out */
    uint64_t want_sum;       /* payload checksum from the header */
    struct s_sum sum;        /* checksum of what was handed out */
};

/* This thread's progress listener (ps_ckpt_progress), or none. */
static _Thread_local ps_ckpt_progress_fn *s_prog_fn;
static _Thread_local void *s_prog_arg;

void ps_ckpt_progress(ps_ckpt_progress_fn *fn, void *arg)
{
    s_prog_fn = fn;
    s_prog_arg = fn ? arg : NULL;
}

static void s_progress(const char *path, uint64_t bytes, uint64_t total)
{
    if (s_prog_fn)
        s_prog_fn(s_prog_arg, path, bytes, total);
}

void ps_ckpt_progress_waiting(const char *path)
{
    s_progress(path, PS_CKPT_WAITING, PS_CKPT_WAITING);
}

/* Little-endian loads and stores, independent of alignment and host order. */
static uint64_t s_get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint32_t s_get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void s_put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void s_put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* One xxHash64-style round: a bijection of h for each word w. */
static inline uint64_t s_round(uint64_t h, uint64_t w)
{
    h += w * S_P2;
    h = (h << 31) | (h >> 33);
    return h * S_P1;
}

/* Start an empty checksum. */
static void s_sum_init(struct s_sum *s)
{
    memset(s, 0, sizeof *s);
    s->h = S_P5;
}

/* Fold n bytes into the checksum; words are read little-endian. */
static void s_sum_update(struct s_sum *s, const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = s->h;

    s->total += n;
    if (s->n_carry) {
        while (n && s->n_carry < 8) {
            s->carry[s->n_carry++] = *p++;
            n--;
        }
        if (s->n_carry < 8) {
            s->h = h;
            return;
        }
        h = s_round(h, s_get_u64(s->carry));
        s->n_carry = 0;
    }
    for (; n >= 8; n -= 8, p += 8)
        h = s_round(h, s_get_u64(p));
    memcpy(s->carry, p, n);
    s->n_carry = (unsigned)n;
    s->h = h;
}

/* Fold in the partial word and the length, then avalanche. Does not change s. */
static uint64_t s_sum_final(const struct s_sum *s)
{
    uint64_t h = s->h;
    for (unsigned i = 0; i < s->n_carry; i++) {
        h ^= s->carry[i] * S_P5;
        h = ((h << 11) | (h >> 53)) * S_P1;
    }
    return ss_mix64(h ^ s->total);
}

void ps_ckpt_path(char *out, size_t len, const char *dir, const char *role, uint32_t shard)
{
    snprintf(out, len, "%s/%s-%u.ckpt", dir, role, shard);
}

/* 1 when name is "NAME.new-" followed by 16 hex digits; *stem_len: the
 * length of "NAME.new-". */
static int s_save_folder(const char *name, size_t *stem_len)
{
    const char *p = strstr(name, ".new-");
    if (!p || p == name)
        return 0;
    p += 5;
    *stem_len = (size_t)(p - name);
    return strlen(p) == 16 && strspn(p, "0123456789abcdef") == 16;
}

int ps_ckpt_drop_other_saves(const char *committed, const char *role, uint32_t shard,
                             size_t *n_dropped, char *err, size_t len)
{
    char parent[4096], path[4096 + 300];
    const char *slash = strrchr(committed, '/');
    const char *name = slash ? slash + 1 : committed;
    size_t stem = 0;
    *n_dropped = 0;
    if (!s_save_folder(name, &stem) || (slash && (size_t)(slash - committed) >= sizeof parent)) {
        snprintf(err, len, "'%.200s' is not the folder of a save (NAME.new-ID, ID: 16 hex "
                 "digits)", committed);
        return SS_E_INVAL;
    }
    if (slash)
        snprintf(parent, sizeof parent, "%.*s", (int)(slash - committed), committed);
    else
        snprintf(parent, sizeof parent, ".");
    if (!parent[0])
        snprintf(parent, sizeof parent, "/");
    DIR *d = opendir(parent);
    if (!d) {
        snprintf(err, len, "cannot read %s: %s", parent, strerror(errno));
        return SS_E_IO;
    }
    struct dirent *e;
    size_t k;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, name) == 0 || !s_save_folder(e->d_name, &k) || k != stem ||
            strncmp(e->d_name, name, stem) != 0)
            continue;
        char folder[4096 + 260];
        snprintf(folder, sizeof folder, "%s/%s", parent, e->d_name);
        ps_ckpt_path(path, sizeof path, folder, role, shard);
        if (unlink(path) == 0)
            (*n_dropped)++;
        (void)rmdir(folder);  /* fails while other processes' parts are in it */
    }
    closedir(d);
    return 0;
}

uint64_t ps_ckpt_job_id(const char *job_name, uint64_t seed)
{
    uint64_t id = ss_hash_bytes(job_name, strlen(job_name), seed);
    return id ? id : 1;
}

uint64_t ps_ckpt_checksum(const void *data, size_t n)
{
    struct s_sum s;
    s_sum_init(&s);
    s_sum_update(&s, data, n);
    return s_sum_final(&s);
}

/* Thread-safe strerror (GNU strerror_r returns the text it chose). */
static const char *s_errstr(int err, char *buf, size_t len)
{
    return strerror_r(err, buf, len);
}

/* Mark the writer failed with errno err during what; log once. A full disk
 * (or quota) is SS_E_NOSPC, so that the reply to a CHECKPOINT names it. */
static int s_wfail(ps_ckpt_writer_t *w, const char *what, int err)
{
    char eb[96];
    if (w->rc == 0)
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: %s failed (%s): %s", w->out.path, what, w->out.tmp,
               s_errstr(err, eb, sizeof eb));
    w->rc = ss_fs_errno_rc(err);
    return w->rc;
}

/* Write out the buffer. Returns 0 or the sticky error. */
static int s_flush(ps_ckpt_writer_t *w)
{
    if (w->rc)
        return w->rc;
    int err = ss_fs_write_all(w->out.fd, w->buf, w->used);
    w->used = 0;
    if (err)
        return s_wfail(w, "write", err);
    s_progress(w->out.path, w->payload, 0);
    return 0;
}

/* Remove the temp file (unless committed) and free the writer. */
static void s_writer_free(ps_ckpt_writer_t *w)
{
    ss_fs_tmp_abort(&w->out);
    ss_free(w->buf);
    ss_free(w);
}

int ps_ckpt_begin(const char *path, ps_ckpt_writer_t **w_p)
{
    ss_assert(path && w_p);
    ps_ckpt_writer_t *w = ss_calloc(1, sizeof *w);
    char why[2 * SS_FS_PATH_MAX + 160];

    *w_p = NULL;
    int rc = ss_fs_tmp_open(&w->out, path, 0, why, sizeof why);
    if (rc) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: %s", path, why);
        s_writer_free(w);
        return rc;
    }
    /* no memory for the buffer fails this checkpoint, not the PS */
    if (!(w->buf = ss_try_malloc(S_BUF_BYTES))) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: no memory for a write buffer of %u bytes; an "
               "older file there is kept", path, (unsigned)S_BUF_BYTES);
        s_writer_free(w);
        return SS_E_NOMEM;
    }
    memset(w->buf, 0, PS_CKPT_HDR_BYTES);   /* placeholder, rewritten at commit */
    w->used = PS_CKPT_HDR_BYTES;
    s_sum_init(&w->sum);
    *w_p = w;
    return 0;
}

int ps_ckpt_write(ps_ckpt_writer_t *w, const void *data, size_t n)
{
    ss_assert(w && (data || n == 0));
    const unsigned char *p = data;
    int rc;

    if (w->rc)
        return w->rc;
    if (n == 0)
        return 0;
    s_sum_update(&w->sum, data, n);
    w->payload += n;
    while (n) {
        size_t k = S_BUF_BYTES - w->used;
        if (k > n)
            k = n;
        memcpy(w->buf + w->used, p, k);
        w->used += k;
        p += k;
        n -= k;
        if (w->used == S_BUF_BYTES && (rc = s_flush(w)) != 0)
            return rc;
    }
    return 0;
}

/* Lay out the 128 header bytes of hdr, payload count and checksums into b. */
static void s_encode_hdr(unsigned char *b, const struct ps_ckpt_hdr *hdr, uint64_t payload,
                         uint64_t sum)
{
    memset(b, 0, PS_CKPT_HDR_BYTES);
    memcpy(b, s_magic, 8);
    s_put_u32(b + 8, PS_CKPT_VERSION);
    s_put_u32(b + 12, hdr->kind);
    s_put_u32(b + 16, hdr->shard);
    for (int i = 0; i < 4; i++)
        s_put_u64(b + 24 + 8 * i, hdr->shape[i]);
    s_put_u64(b + 56, payload);
    s_put_u64(b + 64, sum);
    s_put_u64(b + 72, ss_hash_bytes(b, 72, 0));
    s_put_u32(b + 80, hdr->n_shards);
    s_put_u32(b + 84, hdr->map_id);
    s_put_u64(b + 88, hdr->job_id);
    s_put_u64(b + 96, hdr->save_id);
    s_put_u64(b + 120, ss_hash_bytes(b, 120, 0));
}

int ps_ckpt_commit(ps_ckpt_writer_t **w_p, const struct ps_ckpt_hdr *hdr)
{
    ss_assert(w_p && *w_p && hdr);
    ps_ckpt_writer_t *w = *w_p;
    unsigned char b[PS_CKPT_HDR_BYTES];
    char why[2 * SS_FS_PATH_MAX + 160];
    int err;
    int rc;

    *w_p = NULL;
    if ((rc = s_flush(w)) == 0) {
        s_encode_hdr(b, hdr, w->payload, s_sum_final(&w->sum));
        if ((err = ss_fs_pwrite_all(w->out.fd, b, sizeof b, 0)) != 0)
            rc = s_wfail(w, "header write", err);
    }
    if (rc == 0 && (rc = ss_fs_tmp_commit(&w->out, why, sizeof why)) != 0)
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: %s", w->out.path, why);
    s_writer_free(w);  /* a failure removes the temp file */
    return rc;
}

void ps_ckpt_abort(ps_ckpt_writer_t **w_p)
{
    if (!w_p || !*w_p)
        return;
    ps_ckpt_writer_t *w = *w_p;
    *w_p = NULL;
    s_writer_free(w);
}

/* Close the file and free the reader. */
static void s_reader_free(ps_ckpt_reader_t *r)
{
    if (r->fd >= 0)
        close(r->fd);
    ss_free(r->buf);
    ss_free(r->path);
    ss_free(r);
}

/* Read up to n bytes, retrying EINTR and short reads until n or EOF.
 * Returns bytes read or -errno. */
static ssize_t s_read_full(int fd, unsigned char *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, p + got, n - got);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (k == 0)
            break;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

/* Decode and check the first PS_CKPT_HDR_V1_BYTES header bytes b of r (every
 * version's): fills hdr, including its version. Returns 0 or SS_E_CORRUPT
 * (logged). */
static int s_check_hdr(ps_ckpt_reader_t *r, const unsigned char *b, uint32_t kind,
                       struct ps_ckpt_hdr *hdr)
{
    if (memcmp(b, s_magic, 8) != 0) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: bad magic, not a ShadowSync checkpoint", r->path);
        return SS_E_CORRUPT;
    }
    uint32_t version = s_get_u32(b + 8);
    if (version != 1 && version != PS_CKPT_VERSION) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: format version %u, this build reads 1 and %u",
               r->path, version, PS_CKPT_VERSION);
        return SS_E_CORRUPT;
    }
    if (s_get_u64(b + 72) != ss_hash_bytes(b, 72, 0)) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: header checksum mismatch", r->path);
        return SS_E_CORRUPT;
    }
    memset(hdr, 0, sizeof *hdr);
    hdr->version = version;
    hdr->kind = s_get_u32(b + 12);
    hdr->shard = s_get_u32(b + 16);
    for (int i = 0; i < 4; i++)
        hdr->shape[i] = s_get_u64(b + 24 + 8 * i);
    hdr->payload_bytes = s_get_u64(b + 56);
    r->want_sum = s_get_u64(b + 64);
    if (hdr->kind != kind) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: kind %u, expected %u (%s)", r->path, hdr->kind,
               kind, kind == PS_CKPT_EMBED ? "embedding" : "sync");
        return SS_E_CORRUPT;
    }
    return 0;
}

/* Decode and check the version-2 part of a header (all PS_CKPT_HDR_BYTES in
 * b). Returns 0 or SS_E_CORRUPT (logged). */
static int s_check_hdr2(ps_ckpt_reader_t *r, const unsigned char *b, struct ps_ckpt_hdr *hdr)
{
    if (s_get_u64(b + 120) != ss_hash_bytes(b, 120, 0)) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: header checksum mismatch (bytes 80..127)",
               r->path);
        return SS_E_CORRUPT;
    }
    hdr->n_shards = s_get_u32(b + 80);
    hdr->map_id = s_get_u32(b + 84);
    hdr->job_id = s_get_u64(b + 88);
    hdr->save_id = s_get_u64(b + 96);
    return 0;
}

/* Header bytes of a file of this version. */
static uint32_t s_hdr_bytes(uint32_t version)
{
    return version == 1 ? PS_CKPT_HDR_V1_BYTES : PS_CKPT_HDR_BYTES;
}

/* Check that the file size is exactly header + payload. */
static int s_check_size(ps_ckpt_reader_t *r, const struct ps_ckpt_hdr *hdr)
{
    struct stat st;
    char eb[96];

    if (fstat(r->fd, &st) != 0) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: stat failed: %s", r->path,
               s_errstr(errno, eb, sizeof eb));
        return SS_E_IO;
    }
    uint64_t size = (uint64_t)st.st_size;
    uint32_t hb = s_hdr_bytes(hdr->version);
    if (hdr->payload_bytes > UINT64_MAX - hb || size != hb + hdr->payload_bytes) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: %s: file has %llu bytes, header says %llu + %u",
               r->path, size < hb + hdr->payload_bytes ? "truncated" : "trailing bytes",
               (unsigned long long)size, (unsigned long long)hdr->payload_bytes, hb);
        return SS_E_CORRUPT;
    }
    return 0;
}

/* Read header bytes [from, to) of r into b + from. Returns 0, SS_E_IO or
 * SS_E_CORRUPT (the file ends first), logged. */
static int s_read_part(ps_ckpt_reader_t *r, unsigned char *b, size_t from, size_t to)
{
    ssize_t got = s_read_full(r->fd, b + from, to - from);
    char eb[96];

    if (got < 0) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: read failed: %s", r->path,
               s_errstr((int)-got, eb, sizeof eb));
        return SS_E_IO;
    }
    if ((size_t)got < to - from) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: truncated header (%zu of %zu bytes)", r->path,
               from + (size_t)got, to);
        return SS_E_CORRUPT;
    }
    return 0;
}

int ps_ckpt_open(const char *path, uint32_t kind, struct ps_ckpt_hdr *hdr,
                 ps_ckpt_reader_t **r_p)
{
    ss_assert(path && hdr && r_p);
    ps_ckpt_reader_t *r = ss_calloc(1, sizeof *r);
    unsigned char b[PS_CKPT_HDR_BYTES];
    char eb[96];
    int rc;

    *r_p = NULL;
    r->path = ss_strdup(path);
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: cannot open: %s", path,
               s_errstr(errno, eb, sizeof eb));
        rc = SS_E_IO;
        goto out_free;
    }
    if ((rc = s_read_part(r, b, 0, PS_CKPT_HDR_V1_BYTES)) != 0 ||
        (rc = s_check_hdr(r, b, kind, hdr)) != 0)
        goto out_free;
    if (hdr->version > 1 &&
        ((rc = s_read_part(r, b, PS_CKPT_HDR_V1_BYTES, PS_CKPT_HDR_BYTES)) != 0 ||
         (rc = s_check_hdr2(r, b, hdr)) != 0))
        goto out_free;
    if ((rc = s_check_size(r, hdr)) != 0)
        goto out_free;
    /* a RESTORE opens files online: no memory for the buffer is an error
     * the PS answers, not a reason to abort it */
    if (!(r->buf = ss_try_malloc(S_BUF_BYTES))) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: no memory for a read buffer of %u bytes", path,
               (unsigned)S_BUF_BYTES);
        rc = SS_E_NOMEM;
        goto out_free;
    }
    r->payload = r->remaining = hdr->payload_bytes;
    s_sum_init(&r->sum);
    *r_p = r;
    return 0;

out_free:
    s_reader_free(r);
    return rc;
}

/* Refill the read buffer with up to S_BUF_BYTES of the remaining payload. */
static int s_refill(ps_ckpt_reader_t *r)
{
    size_t want = r->remaining < S_BUF_BYTES ? (size_t)r->remaining : S_BUF_BYTES;
    ssize_t got = s_read_full(r->fd, r->buf, want);
    char eb[96];

    if (got < 0) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: read failed: %s", r->path,
               s_errstr((int)-got, eb, sizeof eb));
        return SS_E_IO;
    }
    if ((size_t)got < want) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: unexpected end of file (truncated)", r->path);
        return SS_E_CORRUPT;
    }
    r->pos = 0;
    r->len = (size_t)got;
    s_progress(r->path, r->payload - r->remaining + r->len, r->payload);
    return 0;
}

int ps_ckpt_read(ps_ckpt_reader_t *r, void *buf, size_t n)
{
    ss_assert(r && (buf || n == 0));
    unsigned char *p = buf;
    size_t buffered = r->len - r->pos;
    int rc;

    if (n > r->remaining + buffered) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: payload ends %llu bytes early", r->path,
               (unsigned long long)(n - r->remaining - buffered));
        return SS_E_CORRUPT;
    }
    while (n) {
        if (r->pos == r->len) {
            if ((rc = s_refill(r)) != 0)
                return rc;
            r->remaining -= r->len;
        }
        size_t k = r->len - r->pos;
        if (k > n)
            k = n;
        memcpy(p, r->buf + r->pos, k);
        s_sum_update(&r->sum, p, k);
        r->pos += k;
        p += k;
        n -= k;
    }
    return 0;
}

uint64_t ps_ckpt_remaining(const ps_ckpt_reader_t *r)
{
    return r->remaining + (r->len - r->pos);
}

int ps_ckpt_verify(ps_ckpt_reader_t *r)
{
    ss_assert(r);
    uint64_t left = ps_ckpt_remaining(r);
    if (left != 0) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: %llu payload bytes were not read", r->path,
               (unsigned long long)left);
        return SS_E_CORRUPT;
    }
    if (s_sum_final(&r->sum) != r->want_sum) {
        SS_LOG(SS_LOG_ERROR, "checkpoint %s: payload checksum mismatch (corrupt file)",
               r->path);
        return SS_E_CORRUPT;
    }
    return 0;
}

void ps_ckpt_close(ps_ckpt_reader_t **r_p)
{
    if (!r_p || !*r_p)
        return;
    s_reader_free(*r_p);
    *r_p = NULL;
}
