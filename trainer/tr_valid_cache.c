/* tr_valid_cache.c - the validation lines kept in memory between scorings.
 *
 * DESIGN: a part is one growing buffer of records, each a struct s_rec (the
 * line's file, offset and length) followed by the line's bytes, unaligned
 * (records are copied out with memcpy). The buffer doubles from 64 KiB up
 * to the part's bound; going over the bound frees it and marks the part
 * dropped for good (the input does not shrink between scorings). A replay
 * walks the buffer with a position the reader keeps, so the cache holds no
 * per-reader state. */
#include "tr_valid_cache.h"

#include <stdio.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_log.h"
#include "ss_mem.h"

/* What a part holds. */
enum { S_PART_EMPTY = 0, S_PART_FULL = 1, S_PART_DROPPED = 2 };

/* The place of one kept line; its bytes follow it. */
struct s_rec {
    uint64_t off;       /* offset of the line in its file */
    uint32_t file;      /* index of the file in the reader's expanded list */
    uint32_t len;       /* bytes of the line, newline excluded */
};

/* One part: the kept lines of one reader's pass. */
struct s_part {
    int state;          /* S_PART_* */
    uint64_t print;     /* print of the reader that filled it (or is filling it) */
    char *buf;          /* s_rec, line bytes, s_rec, ... */
    size_t len;         /* bytes used */
    size_t cap;         /* bytes allocated */
    uint64_t headers;   /* headers the filling pass skipped */
    uint64_t held_out;  /* lines of the other side it skipped */
};

struct tr_valid_cache {
    uint32_t n_parts;       /* parts */
    size_t part_max;        /* bytes one part may hold */
    char what[32];          /* the input, for the log */
    struct s_part *parts;   /* [n_parts] */
};

tr_valid_cache_t *tr_valid_cache_new(uint32_t n_parts, size_t max_bytes, const char *what)
{
    ss_assert(n_parts > 0 && what);
    tr_valid_cache_t *self = ss_calloc(1, sizeof *self);
    self->n_parts = n_parts;
    self->part_max = max_bytes / n_parts;
    snprintf(self->what, sizeof self->what, "%s", what);
    self->parts = ss_calloc(n_parts, sizeof *self->parts);
    return self;
}

void tr_valid_cache_destroy(tr_valid_cache_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    tr_valid_cache_t *self = *self_p;
    for (uint32_t i = 0; i < self->n_parts; i++)
        ss_free(self->parts[i].buf);
    ss_free(self->parts);
    ss_free(self);
    *self_p = NULL;
}

uint32_t tr_valid_cache_parts(const tr_valid_cache_t *self)
{
    ss_assert(self);
    return self->n_parts;
}

size_t tr_valid_cache_bytes(const tr_valid_cache_t *self)
{
    ss_assert(self);
    size_t n = 0;
    for (uint32_t i = 0; i < self->n_parts; i++)
        n += self->parts[i].cap;
    return n;
}

/* Part i, checked. */
static struct s_part *s_part(const tr_valid_cache_t *self, uint32_t i)
{
    ss_assert(self && i < self->n_parts);
    return &self->parts[i];
}

/* Free a part's lines and give it state. */
static void s_clear(struct s_part *p, int state)
{
    ss_free(p->buf);
    p->buf = NULL;
    p->len = p->cap = 0;
    p->headers = p->held_out = 0;
    p->state = state;
}

enum tr_valid_cache_use tr_valid_cache_begin(tr_valid_cache_t *self, uint32_t part,
                                             uint64_t print)
{
    struct s_part *p = s_part(self, part);
    if (p->state != S_PART_EMPTY && p->print != print)  /* other files: start again */
        s_clear(p, S_PART_EMPTY);
    if (p->state == S_PART_FULL)
        return TR_VALID_CACHE_REPLAY;
    if (p->state == S_PART_DROPPED)
        return TR_VALID_CACHE_NONE;
    p->len = 0;  /* what an unfinished pass left */
    p->print = print;
    return TR_VALID_CACHE_FILL;
}

int tr_valid_cache_append(tr_valid_cache_t *self, uint32_t part, uint32_t file, uint64_t off,
                          const char *line, size_t len)
{
    struct s_part *p = s_part(self, part);
    ss_assert(p->state == S_PART_EMPTY && (line || len == 0));
    struct s_rec r = {off, file, (uint32_t)len};
    size_t need = p->len + sizeof r + len;
    if (len > UINT32_MAX || need > self->part_max) {
        SS_LOG(SS_LOG_INFO, "validation lines of part %u of %s: over %zu bytes, not kept in "
               "memory (TR_VALID_CACHE_BYTES); each scoring reads the files again", part,
               self->what, self->part_max);
        s_clear(p, S_PART_DROPPED);
        return SS_E_RANGE;
    }
    if (need > p->cap) {
        size_t cap = p->cap ? p->cap : 64u << 10;
        while (cap < need)
            cap *= 2;
        p->cap = cap < self->part_max ? cap : self->part_max;
        p->buf = ss_realloc(p->buf, p->cap);
    }
    memcpy(p->buf + p->len, &r, sizeof r);
    if (len)
        memcpy(p->buf + p->len + sizeof r, line, len);
    p->len = need;
    return 0;
}

void tr_valid_cache_finish(tr_valid_cache_t *self, uint32_t part, uint64_t headers,
                           uint64_t held_out)
{
    struct s_part *p = s_part(self, part);
    ss_assert(p->state == S_PART_EMPTY);
    p->headers = headers;
    p->held_out = held_out;
    p->state = S_PART_FULL;
}

void tr_valid_cache_abandon(tr_valid_cache_t *self, uint32_t part)
{
    struct s_part *p = s_part(self, part);
    if (p->state == S_PART_EMPTY)
        s_clear(p, S_PART_EMPTY);
}

int tr_valid_cache_peek(const tr_valid_cache_t *self, uint32_t part, size_t pos,
                        uint32_t *file, uint64_t *off)
{
    const struct s_part *p = s_part(self, part);
    struct s_rec r;
    ss_assert(p->state == S_PART_FULL && file && off);
    if (pos >= p->len)
        return 0;
    memcpy(&r, p->buf + pos, sizeof r);
    *file = r.file;
    *off = r.off;
    return 1;
}

int tr_valid_cache_line(const tr_valid_cache_t *self, uint32_t part, size_t *pos,
                        struct tr_valid_cache_line *out)
{
    const struct s_part *p = s_part(self, part);
    struct s_rec r;
    ss_assert(p->state == S_PART_FULL && pos && out);
    if (*pos >= p->len)
        return 0;
    memcpy(&r, p->buf + *pos, sizeof r);
    out->bytes = p->buf + *pos + sizeof r;
    out->len = r.len;
    out->file = r.file;
    out->off = r.off;
    *pos += sizeof r + r.len;
    return 1;
}

double tr_valid_cache_progress(const tr_valid_cache_t *self, uint32_t part, size_t pos)
{
    const struct s_part *p = s_part(self, part);
    if (p->len == 0 || pos >= p->len)
        return 1.0;
    return (double)pos / (double)p->len;
}

void tr_valid_cache_skipped(const tr_valid_cache_t *self, uint32_t part, uint64_t *headers,
                            uint64_t *held_out)
{
    const struct s_part *p = s_part(self, part);
    ss_assert(headers && held_out);
    *headers = p->headers;
    *held_out = p->held_out;
}
