/* tr_planted.c - a planted click model that writes Criteo-format data.
 *
 * DESIGN: everything random about the model is a hash of the seed, so no
 * per-id table is needed: the weight of id k of field f is sigma_f times an
 * approximate standard normal made from ss_mix64(salt_f ^ k) (sum of four
 * 16-bit uniforms), and its hex text is a 32-bit bijection of k. Zipf ids
 * come from a small alias table over the 4096 most frequent ids plus one
 * "tail" outcome sampled by inverting the continuous CDF of x^-s (a table
 * over a million ids would cost a cache miss per draw). Sampling one row
 * costs about 45 splitmix64 draws, 26 alias lookups (a pow for the rare tail
 * draws) and one exp; formatting is hand-written (no printf). Dense counts
 * come from 16384-entry quantile tables of a Lomax (Pareto II) law, which
 * also hold the centered log(1 + count) used by the logit. Output goes
 * through two buffers and a writer thread so that write() overlaps sampling. */
#include "tr_planted.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_mem.h"

#define S_DENSE_Q 16384                 /* quantile table entries per dense column */
#define S_DENSE_Q_BITS 14
#define S_N_PAIRS 5                     /* pairwise field interactions */
#define S_PAIR_K 16                     /* the S_PAIR_K - 1 most frequent ids interact */
#define S_CALIB_ROWS 32768              /* rows used to fit the bias */
#define S_WRITE_BUF (4u << 20)          /* output buffer of tr_planted_write */
#define S_ZIPF_HEAD 4096                /* Zipf ids sampled from a table */

/* Vocabulary per categorical field (Criteo-like spread, 3 to 1e6). */
static const uint32_t s_vocab[TR_N_SPARSE] = {
    1460, 583, 1000000, 300000, 305, 24, 12517, 633, 3, 93145, 5683, 800000, 3194,
    27, 14992, 500000, 10, 5652, 2173, 4, 700000, 18, 15, 286181, 105, 142572,
};

/* Weight scale per categorical field. */
static const double s_sigma[TR_N_SPARSE] = {
    0.30, 0.25, 0.40, 0.35, 0.20, 0.25, 0.30, 0.20, 0.20, 0.35, 0.25, 0.40, 0.25,
    0.20, 0.30, 0.35, 0.20, 0.25, 0.20, 0.20, 0.35, 0.20, 0.20, 0.30, 0.20, 0.30,
};

/* Missing rate per categorical field, in 1/256 (Criteo-like). */
static const uint8_t s_cat_miss[TR_N_SPARSE] = {
    0, 0, 8, 8, 0, 31, 0, 0, 0, 0, 0, 8, 0, 0, 0, 8, 0, 0, 113, 113, 8, 195, 0, 8, 113, 113,
};

/* Missing rate per dense column, in 1/256. */
static const uint8_t s_dense_miss[TR_N_DENSE] = {
    115, 0, 51, 51, 13, 64, 13, 0, 13, 115, 13, 197, 51,
};

/* Lomax shape and scale per dense column: count = floor(scale((1-q)^(-1/shape) - 1)). */
static const double s_dense_shape[TR_N_DENSE] = {
    1.5, 1.2, 1.2, 2.0, 1.1, 1.2, 1.3, 2.5, 1.3, 3.0, 2.0, 1.5, 1.8,
};
static const double s_dense_scale[TR_N_DENSE] = {
    2.0, 30.0, 10.0, 8.0, 3000.0, 50.0, 5.0, 20.0, 60.0, 1.0, 3.0, 1.0, 8.0,
};

#define S_DENSE_SIGMA 0.20              /* scale of the dense weights */
#define S_PAIR_SIGMA 0.50               /* scale of the interaction weights */
#define S_DECAY_IDS 30.0                /* id rank where weights start to shrink */

/* Interacting field pairs. */
static const uint8_t s_pairs[S_N_PAIRS][2] = {{0, 1}, {4, 13}, {5, 8}, {7, 16}, {2, 3}};

/* Alias table entry: keep the slot if the low 32 random bits < thr. */
struct s_alias {
    uint32_t thr;               /* acceptance threshold, scaled by 2^32 */
    uint32_t alias;             /* outcome taken otherwise */
};

/* Zipf-like sampler of one field: ids below head have probability
 * proportional to (id + 1)^-s exactly; the tail [head, vocab) follows the
 * continuous law x^-s (x = id + 1), sampled by inverting its CDF, so only
 * the head needs a (cache-resident) table. */
struct s_zipf {
    uint32_t vocab;             /* ids are 0..vocab-1 */
    uint32_t head;              /* ids with a table entry: min(vocab, S_ZIPF_HEAD) */
    double tail_a;              /* (head + 0.5)^(1-s) */
    double tail_d;              /* (vocab + 0.5)^(1-s) - tail_a */
    double total;               /* normalizer: head weights plus tail mass */
    uint32_t n_out;             /* alias outcomes: head, plus 1 if there is a tail */
    struct s_alias *alias;      /* n_out outcomes; outcome head is "the tail" */
};

struct tr_planted {
    uint64_t seed;                          /* the model's seed */
    double bias;                            /* logit bias fitted to the base rate */
    uint64_t salt[TR_N_SPARSE];             /* weight hash salt per field */
    uint32_t hex_salt[TR_N_SPARSE];         /* hex permutation salt per field */
    struct s_zipf zipf[TR_N_SPARSE];        /* Zipf sampler per field */
    float pair_w[S_N_PAIRS][S_PAIR_K * S_PAIR_K];   /* interaction weights */
    uint32_t *dense_val;                    /* [TR_N_DENSE][S_DENSE_Q] counts */
    float *dense_lv;                        /* log(1 + count) - column mean, same shape */
    double dense_w[TR_N_DENSE];             /* weight of centered log(1 + I_j) */
    double dense_miss_w[TR_N_DENSE];        /* logit term when I_j is missing */
};

/* Approximate N(0, 1) from 64 hashed bits: sum of four 16-bit uniforms. */
static inline double s_gauss(uint64_t h)
{
    uint64_t s = (h & 0xFFFF) + ((h >> 16) & 0xFFFF) + ((h >> 32) & 0xFFFF) + (h >> 48);
    return ((double)s - 131070.0) * (1.0 / 37837.2270);
}

/* Weight of id in field f (id == vocab is the missing value). */
static inline double s_cat_w(const tr_planted_t *self, uint32_t f, uint32_t id)
{
    /* rare ids carry less signal (as in real logs): their weight shrinks like
     * S_DECAY_IDS / id, so what the data can teach stays close to the truth */
    double decay = id == s_vocab[f] ? 1.0 : 1.0 / (1.0 + (double)id * (1.0 / S_DECAY_IDS));
    return s_sigma[f] * decay * s_gauss(ss_mix64(self->salt[f] ^ id));
}

/* Build the alias table of n outcomes with probabilities proportional to
 * w[0..n) (Vose's method). */
static struct s_alias *s_alias_build(const double *w, uint32_t n)
{
    struct s_alias *t = ss_malloc(n * sizeof(*t));
    double *scaled = ss_malloc(n * sizeof(*scaled));
    uint32_t *small = ss_malloc(n * sizeof(*small));
    uint32_t *large = ss_malloc(n * sizeof(*large));
    double sum = 0.0;
    for (uint32_t k = 0; k < n; k++)
        sum += w[k];
    size_t n_small = 0;
    size_t n_large = 0;
    for (uint32_t k = 0; k < n; k++) {
        scaled[k] = w[k] * (double)n / sum;
        if (scaled[k] < 1.0)
            small[n_small++] = k;
        else
            large[n_large++] = k;
    }
    while (n_small > 0 && n_large > 0) {
        uint32_t l = small[--n_small];
        uint32_t g = large[--n_large];
        t[l].thr = scaled[l] > 0.0 ? (uint32_t)(scaled[l] * 4294967296.0) : 0;
        t[l].alias = g;
        scaled[g] -= 1.0 - scaled[l];
        if (scaled[g] < 1.0)
            small[n_small++] = g;
        else
            large[n_large++] = g;
    }
    /* What is left has probability 1 up to rounding: always keep it. */
    while (n_large > 0) {
        uint32_t g = large[--n_large];
        t[g].thr = UINT32_MAX;
        t[g].alias = g;
    }
    while (n_small > 0) {
        uint32_t l = small[--n_small];
        t[l].thr = UINT32_MAX;
        t[l].alias = l;
    }
    ss_free(large);
    ss_free(small);
    ss_free(scaled);
    return t;
}

/* Set up the Zipf sampler of field f: an alias table over the head ids and
 * one extra outcome for the tail, whose mass is the integral of x^-s. */
static void s_zipf_build(struct s_zipf *z, uint32_t vocab)
{
    const double s = TR_PLANTED_ZIPF_S;
    z->vocab = vocab;
    z->head = vocab < S_ZIPF_HEAD ? vocab : S_ZIPF_HEAD;
    double *w = ss_malloc((z->head + 1) * sizeof(*w));
    z->total = 0.0;
    for (uint32_t k = 0; k < z->head; k++) {
        w[k] = exp(-s * log((double)k + 1.0));
        z->total += w[k];
    }
    w[z->head] = 0.0;
    if (z->head < vocab) {
        z->tail_a = pow((double)z->head + 0.5, 1.0 - s);
        z->tail_d = pow((double)vocab + 0.5, 1.0 - s) - z->tail_a;
        w[z->head] = z->tail_d / (1.0 - s);
        z->total += w[z->head];
    }
    z->n_out = z->head + (z->head < vocab);
    z->alias = s_alias_build(w, z->n_out);
    ss_free(w);
}

double tr_planted_zipf_prob(const tr_planted_t *self, uint32_t field, uint32_t id)
{
    ss_assert(self && field < TR_N_SPARSE);
    const struct s_zipf *z = &self->zipf[field];
    const double s = TR_PLANTED_ZIPF_S;
    if (id >= z->vocab)
        return 0.0;
    if (id < z->head)
        return exp(-s * log((double)id + 1.0)) / z->total;
    /* Tail: the integral of x^-s over [id + 0.5, id + 1.5). */
    return (pow((double)id + 1.5, 1.0 - s) - pow((double)id + 0.5, 1.0 - s)) / (1.0 - s) /
           z->total;
}

/* Draw a Zipf id of field sampler z. */
static inline uint32_t s_zipf_draw(const struct s_zipf *z, uint64_t *rng)
{
    uint64_t r = ss_rand_next(rng);
    uint32_t i = (uint32_t)(((r >> 32) * z->n_out) >> 32);
    const struct s_alias *a = &z->alias[i];
    uint32_t id = (uint32_t)r < a->thr ? i : a->alias;
    if (id < z->head)
        return id;
    /* Tail: invert the CDF of x^-s on [head + 0.5, vocab + 0.5); x is id + 1. */
    double u = ss_rand_unit_d(rng);
    double x = pow(z->tail_a + u * z->tail_d, 1.0 / (1.0 - TR_PLANTED_ZIPF_S));
    uint32_t k = (uint32_t)(x + 0.5) - 1;
    return k < z->head ? z->head : (k >= z->vocab ? z->vocab - 1 : k);
}

/* Fill the dense quantile tables and weights. */
static void s_dense_build(tr_planted_t *self)
{
    self->dense_val = ss_malloc((size_t)TR_N_DENSE * S_DENSE_Q * sizeof(uint32_t));
    self->dense_lv = ss_malloc((size_t)TR_N_DENSE * S_DENSE_Q * sizeof(float));
    for (int j = 0; j < TR_N_DENSE; j++) {
        uint32_t *val = self->dense_val + (size_t)j * S_DENSE_Q;
        float *lv = self->dense_lv + (size_t)j * S_DENSE_Q;
        double mean = 0.0;
        for (int k = 0; k < S_DENSE_Q; k++) {
            double q = ((double)k + 0.5) / S_DENSE_Q;
            double c = floor(s_dense_scale[j] * (pow(1.0 - q, -1.0 / s_dense_shape[j]) - 1.0));
            val[k] = c > 2e9 ? 2000000000u : (uint32_t)c;
            mean += log1p((double)val[k]);
        }
        mean /= S_DENSE_Q;
        for (int k = 0; k < S_DENSE_Q; k++)
            lv[k] = (float)(log1p((double)val[k]) - mean);
        uint64_t h = ss_mix64(self->seed ^ (0xD0000000ull + (uint64_t)j));
        self->dense_w[j] = S_DENSE_SIGMA * s_gauss(h);
        self->dense_miss_w[j] = S_DENSE_SIGMA * s_gauss(ss_mix64(h));
    }
}

/* Draw ids and counts into row; return the logit without the bias. */
static double s_draw(const tr_planted_t *self, uint64_t *rng, struct tr_planted_row *row)
{
    uint8_t miss[40];
    for (int i = 0; i < 5; i++) {
        uint64_t r = ss_rand_next(rng);
        for (int b = 0; b < 8; b++)
            miss[i * 8 + b] = (uint8_t)(r >> (8 * b));
    }
    double z = 0.0;
    for (uint32_t f = 0; f < TR_N_SPARSE; f++) {
        uint32_t id = miss[f] < s_cat_miss[f] ? s_vocab[f] : s_zipf_draw(&self->zipf[f], rng);
        row->ids[f] = id;
        z += s_cat_w(self, f, id);
    }
    for (int p = 0; p < S_N_PAIRS; p++) {
        uint32_t a = row->ids[s_pairs[p][0]], b = row->ids[s_pairs[p][1]];
        a = a < S_PAIR_K - 1 ? a : S_PAIR_K - 1;   /* rarer ids share one bucket */
        b = b < S_PAIR_K - 1 ? b : S_PAIR_K - 1;
        z += self->pair_w[p][a * S_PAIR_K + b];
    }
    for (int j = 0; j < TR_N_DENSE; j++) {
        if (miss[TR_N_SPARSE + j] < s_dense_miss[j]) {
            row->dense[j] = -1;
            z += self->dense_miss_w[j];
            continue;
        }
        size_t k = (size_t)j * S_DENSE_Q + (ss_rand_next(rng) >> (64 - S_DENSE_Q_BITS));
        row->dense[j] = self->dense_val[k];
        z += self->dense_w[j] * self->dense_lv[k];
    }
    return z;
}

/* Mean of sigmoid(bias + z[i]). */
static double s_mean_prob(const double *z, size_t n, double bias)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += 1.0 / (1.0 + exp(-(bias + z[i])));
    return s / (double)n;
}

/* Fit the bias by bisection so that the mean probability of a calibration
 * sample is TR_PLANTED_BASE_RATE. */
static void s_fit_bias(tr_planted_t *self)
{
    double *z = ss_malloc(S_CALIB_ROWS * sizeof(*z));
    struct tr_planted_row row;
    uint64_t rng = tr_planted_stream(self, 0xCA1Bu);
    for (size_t i = 0; i < S_CALIB_ROWS; i++)
        z[i] = s_draw(self, &rng, &row);
    double lo = -30.0;
    double hi = 30.0;
    for (int it = 0; it < 60; it++) {
        double mid = 0.5 * (lo + hi);
        if (s_mean_prob(z, S_CALIB_ROWS, mid) < TR_PLANTED_BASE_RATE)
            lo = mid;
        else
            hi = mid;
    }
    self->bias = 0.5 * (lo + hi);
    ss_free(z);
}

tr_planted_t *tr_planted_new(uint64_t seed)
{
    tr_planted_t *self = ss_calloc(1, sizeof(*self));
    self->seed = seed;
    for (uint32_t f = 0; f < TR_N_SPARSE; f++) {
        self->salt[f] = ss_mix64(seed ^ ss_mix64(0xC0FFEE00ull + f));
        self->hex_salt[f] = (uint32_t)(ss_mix64(self->salt[f]) >> 32);
        s_zipf_build(&self->zipf[f], s_vocab[f]);
    }
    for (int p = 0; p < S_N_PAIRS; p++) {
        uint64_t salt = ss_mix64(seed ^ (0xAB000000ull + (uint64_t)p));
        for (uint32_t c = 0; c < S_PAIR_K * S_PAIR_K; c++)
            self->pair_w[p][c] = (float)(S_PAIR_SIGMA * s_gauss(ss_mix64(salt ^ c)));
    }
    s_dense_build(self);
    s_fit_bias(self);
    return self;
}

void tr_planted_destroy(tr_planted_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    tr_planted_t *self = *self_p;
    for (int f = 0; f < TR_N_SPARSE; f++)
        ss_free(self->zipf[f].alias);
    ss_free(self->dense_val);
    ss_free(self->dense_lv);
    ss_free(self);
    *self_p = NULL;
}

uint32_t tr_planted_vocab(const tr_planted_t *self, uint32_t field)
{
    ss_assert(self && field < TR_N_SPARSE);
    return s_vocab[field];
}

double tr_planted_bias(const tr_planted_t *self)
{
    ss_assert(self);
    return self->bias;
}

uint32_t tr_planted_hex(const tr_planted_t *self, uint32_t field, uint32_t id)
{
    /* Each step is a bijection of uint32. */
    uint32_t x = id ^ self->hex_salt[field];
    x *= 0x9e3779b1u;
    x ^= x >> 15;
    x *= 0x85ebca77u;
    x ^= x >> 13;
    x *= 0xc2b2ae3du;
    x ^= x >> 16;
    return x;
}

uint64_t tr_planted_stream(const tr_planted_t *self, uint32_t stream)
{
    ss_assert(self);
    return ss_mix64(self->seed + 0x243f6a8885a308d3ull * ((uint64_t)stream + 1));
}

void tr_planted_sample(const tr_planted_t *self, uint64_t *rng, struct tr_planted_row *row)
{
    double logit = self->bias + s_draw(self, rng, row);
    row->prob = 1.0 / (1.0 + exp(-logit));
    row->label = ss_rand_unit_d(rng) < row->prob ? 1.0f : 0.0f;
}

/* Write v in decimal at p; return the end. */
static inline char *s_put_u64(char *p, uint64_t v)
{
    char t[20];
    int n = 0;
    do {
        t[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n > 0)
        *p++ = t[--n];
    return p;
}

/* Write v as 8 lowercase hex digits at p; return the end. SWAR: spread the
 * nibbles into bytes, add '0' or 'a' - 10 per byte, store in one go. */
static inline char *s_put_hex8(char *p, uint32_t v)
{
    uint64_t x = v;
    x = ((x & 0xFFFF0000ull) << 16) | (x & 0xFFFFull);
    x = ((x & 0x0000FF000000FF00ull) << 8) | (x & 0x000000FF000000FFull);
    x = ((x & 0x00F000F000F000F0ull) << 4) | (x & 0x000F000F000F000Full);
    /* Byte i (from the top) now holds nibble i; bytes >= 10 get 'a' - '0' - 10 more. */
    uint64_t letters = ((x + 0x0606060606060606ull) >> 4) & 0x0101010101010101ull;
    x += 0x3030303030303030ull + letters * (uint64_t)('a' - '0' - 10);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    memcpy(p, &x, 8);
    return p + 8;
}

size_t tr_planted_format(const tr_planted_t *self, const struct tr_planted_row *row, char *buf)
{
    char *p = buf;
    *p++ = row->label > 0.5f ? '1' : '0';
    for (int j = 0; j < TR_N_DENSE; j++) {
        *p++ = '\t';
        if (row->dense[j] >= 0)
            p = s_put_u64(p, (uint64_t)row->dense[j]);
    }
    for (uint32_t f = 0; f < TR_N_SPARSE; f++) {
        *p++ = '\t';
        if (row->ids[f] < s_vocab[f])
            p = s_put_hex8(p, tr_planted_hex(self, f, row->ids[f]));
    }
    *p++ = '\n';
    return (size_t)(p - buf);
}

/* write() all of buf, retrying on EINTR and short writes. */
static int s_write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return SS_E_IO;
        }
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Double-buffered writer: the sampling thread fills one buffer while a
 * writer thread write()s the other, so that kernel time (page cache copies,
 * reclaim) overlaps generation. A buffer belongs to the sampler while its
 * len is 0 and to the writer otherwise; both hand over under mu. */
struct s_writer {
    pthread_mutex_t mu;         /* guards len, next, done, err, written */
    pthread_cond_t cv;          /* signalled on every hand-over */
    int fd;                     /* output */
    char *buf[2];               /* S_WRITE_BUF bytes each */
    size_t len[2];              /* bytes handed to the writer; 0 = free */
    int next;                   /* buffer the writer takes next */
    bool done;                  /* the sampler hands over no more buffers */
    int err;                    /* errno of the first failed write, or 0 */
    uint64_t written;           /* bytes written */
    bool threaded;              /* a writer thread runs (else writes inline) */
};

/* Writer thread: write buffers in order until done; after an error, only
 * free them. */
static void *s_writer_main(void *arg)
{
    struct s_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->len[w->next] == 0 && !w->done)
            pthread_cond_wait(&w->cv, &w->mu);
        int i = w->next;
        size_t n = w->len[i];
        if (n == 0)
            break;                      /* done and drained */
        bool failed = w->err != 0;
        pthread_mutex_unlock(&w->mu);
        int rc = failed ? 0 : s_write_all(w->fd, w->buf[i], n);
        int e = errno;
        pthread_mutex_lock(&w->mu);
        if (rc != 0)
            w->err = e;
        else if (!failed)
            w->written += n;
        w->len[i] = 0;
        w->next = i ^ 1;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Hand buffer cur (len bytes) to the writer and wait until the other buffer
 * is free. Returns the first write error's errno, or 0. */
static int s_writer_flush(struct s_writer *w, int cur, size_t len)
{
    if (!w->threaded) {
        if (w->err == 0 && s_write_all(w->fd, w->buf[cur], len) != 0)
            w->err = errno;
        else if (w->err == 0)
            w->written += len;
        return w->err;
    }
    pthread_mutex_lock(&w->mu);
    w->len[cur] = len;
    pthread_cond_broadcast(&w->cv);
    while (w->len[cur ^ 1] != 0)
        pthread_cond_wait(&w->cv, &w->mu);
    int err = w->err;
    pthread_mutex_unlock(&w->mu);
    return err;
}

/* Wait for the writer to drain, stop it and free the buffers. Returns the
 * first write error's errno, or 0. */
static int s_writer_finish(struct s_writer *w, pthread_t th)
{
    if (w->threaded) {
        pthread_mutex_lock(&w->mu);
        w->done = true;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(th, NULL);
    }
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    ss_free(w->buf[0]);
    ss_free(w->buf[1]);
    return w->err;
}

int tr_planted_write(const tr_planted_t *self, uint32_t stream, uint64_t n_rows, int fd,
                     struct tr_planted_stats *st)
{
    ss_assert(self && st);
    struct s_writer w = {.fd = fd};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    w.buf[0] = ss_malloc(S_WRITE_BUF);
    w.buf[1] = ss_malloc(S_WRITE_BUF);
    pthread_t th;
    w.threaded = pthread_create(&th, NULL, s_writer_main, &w) == 0;
    int cur = 0;
    size_t len = 0;
    int err = 0;
    uint64_t rng = tr_planted_stream(self, stream);
    struct tr_planted_row row;
    for (uint64_t i = 0; i < n_rows && err == 0; i++) {
        tr_planted_sample(self, &rng, &row);
        len += tr_planted_format(self, &row, w.buf[cur] + len);
        int y = row.label > 0.5f;
        st->positives += (uint64_t)y;
        st->logloss_sum += y ? -log(row.prob) : -log1p(-row.prob);
        st->rows++;
        if (S_WRITE_BUF - len < TR_PLANTED_LINE_MAX) {
            err = s_writer_flush(&w, cur, len);
            cur ^= 1;
            len = 0;
        }
    }
    if (err == 0 && len > 0)
        s_writer_flush(&w, cur, len);
    err = s_writer_finish(&w, th);
    st->bytes += w.written;
    if (err != 0) {
        errno = err;
        return SS_E_IO;
    }
    return 0;
}

double tr_planted_base_rate(const struct tr_planted_stats *st)
{
    ss_assert(st);
    return st->rows ? (double)st->positives / (double)st->rows : NAN;
}

double tr_planted_bayes_ne(const struct tr_planted_stats *st)
{
    ss_assert(st);
    double p = tr_planted_base_rate(st);
    if (!(p > 0.0 && p < 1.0))
        return NAN;
    double h = -(p * log(p) + (1.0 - p) * log1p(-p));
    return st->logloss_sum / (double)st->rows / h;
}
