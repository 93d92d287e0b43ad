/* score_main.c - shadow-score: a model file's predictions for the lines of a
 * file or of standard input, with no PS.
 *
 * The trainer's reader (trainer/tr_reader.h) reads the input in batches,
 * streaming (standard input: a pipe is read as it comes, memory bounded by
 * one batch and the reader's buffer), the library scores each batch
 * (score/ss_model.h) and the predictions are written in input order, one
 * line per input line, in the text of shadow-trainer --predict
 * (trainer/tr_predict.h: "%.9g", "nan" for a bad line). Headers (csv) are
 * skipped without an output line, as there.
 *
 * Threads: the main thread alone by default. With --threads N over a file,
 * as --predict's workers: N scoring threads, thread k reading byte range k
 * of N of the file into output part k (a nameless temporary file,
 * tr_predict.h's stream mode), and the main thread copying the parts to
 * standard output in order as they grow. A thread owns its reader, its part
 * and its counts until it sets done; the model is shared read-only (its
 * scratch pool has its own lock). */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ss_err.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_model.h"
#include "ss_model_int.h"
#include "ss_time.h"
#include "ss_version.h"
#include "tr_blas.h"
#include "tr_model.h"
#include "tr_predict.h"
#include "tr_reader.h"

#define S_MAX_SETS 64
#define S_OUT_BUF (1u << 20)

static void s_usage(FILE *out)
{
    fprintf(out,
            "usage: shadow-score [options] MODEL.ssm [FILE|-]\n"
            "\n"
            "Write the click probability of each line of FILE (default and '-': standard\n"
            "input, read as it comes) to standard output, one line per input line in input\n"
            "order: \"%%.9g\" of the model's float, or \"nan\" for a line that does not\n"
            "parse; a csv header line gets no output line. The same bytes as\n"
            "shadow-trainer --predict (scripts/shadow-launch --predict) on the model the\n"
            "file was exported from (shadow-ctl export; docs/model-file.md). No PS, no\n"
            "network: the model file holds the embeddings, the dense model and the data\n"
            "layout.\n"
            "\n"
            "Options:\n"
            "  -s, --set data.KEY=VALUE  lay the lines out otherwise than the training data\n"
            "                       (repeatable; data.* keys only), e.g. data.labels=false\n"
            "                       for lines without their label column\n"
            "      --skip-bad       write nothing for a bad line (one line per example)\n"
            "  -b, --batch N        lines read and scored at once (default 256)\n"
            "  -t, --threads N      score a FILE with N threads, each a byte range of it\n"
            "                       (the output in input order all the same; parts wait\n"
            "                       in $TMPDIR, default /tmp, unlinked); standard input\n"
            "                       is read by one (default 1)\n"
            "  -q, --quiet          no summary on standard error\n"
            "  -h, --help           this text\n"
            "      --version        print the version and git revision\n"
            "\n"
            "Exit status: 0; 1 when the model file is refused (the message says why), the\n"
            "input cannot be read or the output written, or the input held no good line or\n"
            "more bad lines than data.max_bad_fraction (as --predict; the lines were\n"
            "written); 2 on usage errors.\n");
}

struct s_args {
    const char *model;              /* MODEL.ssm */
    const char *input;              /* FILE or "-" */
    const char *sets[S_MAX_SETS];   /* --set */
    size_t n_sets;
    int skip_bad;                   /* --skip-bad */
    long batch;                     /* --batch */
    long threads;                   /* --threads */
    int quiet;                      /* --quiet */
};

static int s_parse(int argc, char **argv, struct s_args *a)
{
    static const struct option opts[] = {
        {"set", required_argument, 0, 's'}, {"skip-bad", no_argument, 0, 'K'},
        {"batch", required_argument, 0, 'b'}, {"quiet", no_argument, 0, 'q'},
        {"threads", required_argument, 0, 't'},
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0}};
    int c;
    char *end;
    a->batch = 256;
    a->threads = 1;
    while ((c = getopt_long(argc, argv, "s:b:t:qh", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (a->n_sets >= S_MAX_SETS) {
                fprintf(stderr, "shadow-score: too many --set\n");
                return 2;
            }
            a->sets[a->n_sets++] = optarg;
            break;
        case 'K': a->skip_bad = 1; break;
        case 'b':
            a->batch = strtol(optarg, &end, 10);
            if (*end || a->batch < 1 || a->batch > 65536) {
                fprintf(stderr, "shadow-score: --batch %s: expected 1..65536\n", optarg);
                return 2;
            }
            break;
        case 't':
            a->threads = strtol(optarg, &end, 10);
            if (*end || a->threads < 1 || a->threads > 256) {
                fprintf(stderr, "shadow-score: --threads %s: expected 1..256\n", optarg);
                return 2;
            }
            break;
        case 'q': a->quiet = 1; break;
        case 'h': return 1;
        case 'V': return 3;
        default: return 2;
        }
    }
    if (optind >= argc || argc - optind > 2) {
        fprintf(stderr, "shadow-score: expected MODEL.ssm and at most one input file\n");
        return 2;
    }
    a->model = argv[optind];
    a->input = optind + 1 < argc ? argv[optind + 1] : TR_READER_STDIN;
    return 0;
}

/* What one run (or one part of it) scored. */
struct s_counts {
    uint64_t rows, bad, headers, lines, lines_out;
};

/* Read, score and write until the input ends. Returns 0 or an error with
 * err. */
static int s_score(const ss_model_t *m, tr_reader_t *rd, const struct s_args *a, FILE *out,
                   struct s_counts *c, char *err, size_t len)
{
    const struct ss_cfg *cfg = ss_model_cfg(m);
    struct tr_rows rows;
    struct tr_reader_stats st;
    float *probs = ss_malloc((size_t)a->batch * sizeof(float));
    uint64_t gaps_done = 0;
    int rc = 0, n;
    tr_rows_init(&rows, (uint32_t)a->batch, cfg->data.n_dense, cfg->data.n_fields);
    tr_reader_keep_gaps(rd);
    while ((n = tr_reader_read(rd, &rows, (size_t)a->batch)) > 0) {
        const uint32_t *gaps = tr_reader_gaps(rd);
        ss_model_score_rows(m, &rows, probs);
        for (int i = 0; i < n; i++)
            gaps_done += gaps[i];
        if (tr_pred_write(out, probs, gaps, (uint32_t)n, !a->skip_bad) != 0)
            break;
        c->rows += (uint64_t)n;
    }
    tr_reader_stats(rd, &st);
    if (n < 0) {
        snprintf(err, len, "reading %s: %s", a->input, tr_reader_error(rd));
        rc = SS_E_IO;
    } else if (!ferror(out) && !a->skip_bad && st.bad_lines > gaps_done) {
        (void)tr_pred_write_nan(out, st.bad_lines - gaps_done);
    }
    if (rc == 0 && (fflush(out) != 0 || ferror(out))) {
        snprintf(err, len, "cannot write the predictions to standard output: %s",
                 strerror(errno ? errno : EIO));
        rc = SS_E_IO;
    }
    c->bad = st.bad_lines;
    c->headers = st.headers;
    c->lines = st.lines;
    c->lines_out = c->rows + (a->skip_bad ? 0 : c->bad);
    tr_rows_fini(&rows);
    ss_free(probs);
    return rc;
}

/* As --predict judges its input (tr_predict.c): no example, or more bad lines
 * than data.max_bad_fraction of the lines (headers apart), is an error:
 * the lines were written (a stream cannot be taken back) and the exit
 * status says so. Returns 0 or SS_E_CONFIG with err. */
static int s_judge(const ss_model_t *m, const struct s_counts *c, char *err, size_t len)
{
    double data_lines = (double)(c->lines - c->headers);
    double limit = ss_model_cfg(m)->data.max_bad_fraction;
    if (c->rows > 0 && !(data_lines > 0 && (double)c->bad > limit * data_lines))
        return 0;
    if (c->bad == 0)
        snprintf(err, len, "no line to score: %llu line(s) in the input%s",
                 (unsigned long long)c->lines, c->lines ? ", all headers" : "");
    else
        snprintf(err, len, "%llu of %.0f lines bad, more than data.max_bad_fraction %g "
                 "(written as nan): a layout other than the model's? (--set data.*; the "
                 "summary above names the first)", (unsigned long long)c->bad, data_lines, limit);
    return SS_E_CONFIG;
}

/* The summary on standard error; first: the first bad line, or NULL. */
static void s_summary(const struct s_counts *c, double s, const struct tr_reader_bad *first)
{
    fprintf(stderr, "shadow-score: %llu predictions in %.2f s (%.0f predictions/s), %llu "
            "line(s) written\n", (unsigned long long)c->rows, s, s > 0 ? (double)c->rows / s : 0,
            (unsigned long long)c->lines_out);
    if (c->bad && first)
        fprintf(stderr, "shadow-score: %llu bad line(s); the first, at byte %llu of %s: %s\n",
                (unsigned long long)c->bad, (unsigned long long)first->offset, first->path,
                first->why);
    if (c->headers)
        fprintf(stderr, "shadow-score: %llu header line(s) skipped (no output line)\n",
                (unsigned long long)c->headers);
}

/* One scoring thread of --threads: its byte range of the file, its part of
 * the output (tr_predict.h's stream parts, copied to standard output in
 * order by the main thread). */
struct s_part {
    const ss_model_t *m;      /* shared, read-only */
    const struct s_args *a;   /* shared, read-only */
    tr_reader_t *rd;          /* its reader (part k of n) */
    FILE *out;                /* its output part */
    pthread_t tid;            /* the thread */
    int started;              /* tid is valid */
    struct s_counts c;        /* the thread's until it is done, then the main thread's */
    int rc;                   /* its result */
    char err[1024];           /* why it failed */
    atomic_int done;          /* set by the thread as it leaves (release) */
};

static void *s_part_main(void *arg)
{
    struct s_part *p = arg;
    p->rc = s_score(p->m, p->rd, p->a, p->out, &p->c, p->err, sizeof p->err);
    atomic_store_explicit(&p->done, 1, memory_order_release);
    return NULL;
}

/* Copy the parts to standard output while the threads score, in order.
 * Returns 0 or an error with err. */
static int s_pump_parts(struct s_part *parts, uint32_t n, tr_pred_out_t *po, char *err,
                        size_t len)
{
    for (;;) {
        int rc = 0, all = 1;
        size_t copied = 0;
        for (uint32_t k = 0; k < n && rc == 0; k++) {
            if (!atomic_load_explicit(&parts[k].done, memory_order_acquire))
                all = 0;
            else if (parts[k].rc == 0)
                rc = tr_pred_out_part_done(po, k, err, len);
        }
        if (rc == 0)
            rc = tr_pred_out_pump(po, &copied, err, len);
        if (rc || all)
            return rc;
        if (copied == 0)
            usleep(2000);
    }
}

/* --threads N over a file: N parts scored at once, the output in order.
 * Fills *c (summed) and *first. Returns 0 or an error with err. */
static int s_score_parts(const ss_model_t *m, const struct s_args *a, struct s_counts *c,
                         struct tr_reader_bad *first, int *have_first, char *err, size_t len)
{
    uint32_t n = (uint32_t)a->threads;
    struct s_part *parts = ss_calloc(n, sizeof *parts);
    const char *inputs[1] = {a->input}, *tmp = getenv("TMPDIR");
    const struct ss_cfg *cfg = ss_model_cfg(m);
    tr_pred_out_t *po = NULL;
    int rc = 0;
    for (uint32_t k = 0; k < n && rc == 0; k++)
        if (!(parts[k].rd = tr_reader_new(&cfg->data, inputs, 1, 0, 1, k, n, err, len)))
            rc = SS_E_IO;
    if (rc == 0 && !(po = tr_pred_out_new_stream(STDOUT_FILENO, tmp && *tmp ? tmp : "/tmp", n,
                                                 NULL, err, len)))
        rc = SS_E_IO;
    for (uint32_t k = 0; k < n && rc == 0; k++) {
        struct s_part *p = &parts[k];
        p->m = m, p->a = a, p->out = tr_pred_out_part(po, k);
        if (pthread_create(&p->tid, NULL, s_part_main, p) != 0) {
            snprintf(err, len, "cannot start scoring thread %u", k);
            atomic_store(&p->done, 1);
            rc = SS_E_NOMEM;
            break;
        }
        p->started = 1;
    }
    if (rc == 0)
        rc = s_pump_parts(parts, n, po, err, len);
    for (uint32_t k = 0; k < n; k++)
        if (parts[k].started)
            pthread_join(parts[k].tid, NULL);
    for (uint32_t k = 0; k < n && rc == 0; k++)
        if (parts[k].rc)
            rc = parts[k].rc, snprintf(err, len, "%s", parts[k].err);
    if (rc == 0)
        rc = tr_pred_out_commit(po, err, len);
    struct tr_reader_bad b;
    for (uint32_t k = 0; k < n; k++) {
        c->rows += parts[k].c.rows, c->bad += parts[k].c.bad;
        c->headers += parts[k].c.headers, c->lines += parts[k].c.lines;
        c->lines_out += parts[k].c.lines_out;
        if (parts[k].rd && tr_reader_first_bad(parts[k].rd, &b) &&
            (!*have_first || b.global < first->global))
            *first = b, *have_first = 1;
        tr_reader_destroy(&parts[k].rd);
    }
    tr_pred_out_destroy(&po);
    ss_free(parts);
    return rc;
}

int main(int argc, char **argv)
{
    struct s_args a = {0};
    struct s_counts c = {0};
    struct tr_reader_bad first;
    int have_first = 0;
    char err[2048] = "";
    ss_model_t *m = NULL;
    tr_reader_t *rd = NULL;
    char *obuf = NULL;

    tr_blas_fix_core(argv);  /* the trainer's OpenBLAS kernels: the same bits */
    tr_model_blas_no_pool(); /* OpenBLAS's idle pool thread: gone, as in the trainer */
    int rc = s_parse(argc, argv, &a);
    if (rc)
        return ss_version_or_usage(rc, "shadow-score", s_usage);
    ss_log_init("score", SS_LOG_WARN);
    uint64_t t0 = ss_now_ns();
    rc = 1;
    if (!(m = ss_model_load_opts(a.model, a.sets, a.n_sets, err, sizeof err)))
        goto out;
    if (strcmp(a.input, TR_READER_STDIN) == 0)
        a.threads = 1;  /* a pipe is not cut into parts */
    if (a.threads > 1) {
        if (s_score_parts(m, &a, &c, &first, &have_first, err, sizeof err) != 0)
            goto out;
    } else {
        const char *inputs[1] = {a.input};
        const struct ss_cfg *cfg = ss_model_cfg(m);
        if (!(rd = tr_reader_new(&cfg->data, inputs, 1, 0, 1, 0, 1, err, sizeof err)))
            goto out;
        obuf = ss_malloc(S_OUT_BUF);
        setvbuf(stdout, obuf, _IOFBF, S_OUT_BUF);
        if (s_score(m, rd, &a, stdout, &c, err, sizeof err) != 0)
            goto out;
        have_first = tr_reader_first_bad(rd, &first);
    }
    if (!a.quiet)
        s_summary(&c, (double)(ss_now_ns() - t0) / 1e9, have_first ? &first : NULL);
    if (s_judge(m, &c, err, sizeof err) != 0)
        goto out;
    rc = 0;
out:
    if (rc)
        fprintf(stderr, "shadow-score: %s\n", err);
    tr_reader_destroy(&rd);
    ss_model_free(m);
    if (obuf) {  /* stdout's buffer: close it before the buffer goes */
        fclose(stdout);
        ss_free(obuf);
    }
    return rc;
}
