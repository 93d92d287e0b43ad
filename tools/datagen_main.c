/* datagen_main.c - shadow-datagen: write Criteo-format TSV from a planted model.
 *
 *   shadow-datagen --rows N [--seed S] --out FILE [--eval-rows M --eval-out FILE]
 *
 * Writes N training rows (and M held-out rows from an independent sample
 * stream of the same model) with tr_planted, then prints a human summary on
 * stderr and one JSON line on stdout: rows, base rate and the Bayes-optimal
 * NE (the NE of the true probabilities on the written labels) per file.
 * A regular output file is written under a temporary name and renamed when
 * complete, so a failed run never leaves a plausible-looking partial file.
 * Exit status: 0 ok, 1 runtime error (cannot write), 2 usage error. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ss_err.h"
#include "ss_fs.h"
#include "ss_mem.h"
#include "ss_time.h"
#include "ss_version.h"
#include "tr_planted.h"

#define S_PROG "shadow-datagen"

/* One output file. */
struct s_out {
    const char *path;               /* target name (argv, borrowed) */
    struct ss_fs_tmp *out;          /* the temporary file while writing, or NULL (the
                                     * target is written directly: not a regular file) */
    int fd;                         /* open descriptor, or -1 */
    uint64_t rows;                  /* rows to write */
    uint32_t stream;                /* planted sample stream */
    struct tr_planted_stats st;     /* what was written */
    double seconds;                 /* time spent writing */
};

static void s_usage(FILE *f)
{
    fprintf(f,
            "usage: " S_PROG " --rows N [--seed S] --out FILE [--eval-rows M --eval-out FILE]\n"
            "\n"
            "Write Criteo-format TSV (label, I1..I13, C1..C26) sampled from a planted click\n"
            "model: Zipf categorical ids, heavy-tailed counts, missing values, and labels\n"
            "drawn from sigmoid(bias + per-id weights + field interactions + dense terms).\n"
            "\n"
            "  --rows N         training rows to write (suffixes k, M, G: 10M = 10000000)\n"
            "  --seed S         model and sample seed (default 1); same seed, same bytes\n"
            "  --out FILE       training output file\n"
            "  --eval-rows M    held-out rows (same model, independent samples)\n"
            "  --eval-out FILE  held-out output file (required with --eval-rows)\n"
            "  --help           show this help\n"
            "  --version        print the version and git revision\n"
            "\n"
            "Prints a summary on stderr and one JSON line on stdout with rows, base rate\n"
            "and the Bayes-optimal NE per file. Exit status: 0 ok, 1 runtime error,\n"
            "2 usage error.\n");
}

/* Parse a count with an optional k/M/G suffix. Returns 0 or -1. */
static int s_parse_count(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    uint64_t mult = 1;
    if (*end == 'k' || *end == 'K')
        mult = 1000ull;
    else if (*end == 'm' || *end == 'M')
        mult = 1000000ull;
    else if (*end == 'g' || *end == 'G')
        mult = 1000000000ull;
    if (mult != 1)
        end++;
    if (*end != '\0' || v > UINT64_MAX / mult)
        return -1;
    *out = (uint64_t)v * mult;
    return 0;
}

/* Parse a seed: decimal or 0x hex, any uint64. Returns 0 or -1. */
static int s_parse_seed(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = (uint64_t)v;
    return 0;
}

/* Open o->path for writing (through a temporary name if it is, or will be,
 * a regular file). Returns 0 or -1 with a message printed. */
static int s_out_open(struct s_out *o)
{
    struct stat sb;
    char err[2 * SS_FS_PATH_MAX + 64];
    bool direct = stat(o->path, &sb) == 0 && !S_ISREG(sb.st_mode);
    if (direct) {
        o->fd = open(o->path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    } else {
        o->out = ss_malloc(sizeof *o->out);
        if (ss_fs_tmp_open(o->out, o->path, SS_FS_TMP_PID, err, sizeof err) == 0)
            o->fd = o->out->fd;
    }
    if (o->fd < 0) {
        fprintf(stderr, S_PROG ": cannot open '%s' for writing: %s\n", o->path,
                strerror(errno));
        ss_free(o->out);
        o->out = NULL;
        return -1;
    }
    return 0;
}

/* Close o and, on success, move the temporary file into place (fsynced);
 * on failure remove it. Returns 0 or -1 with a message printed. */
static int s_out_close(struct s_out *o, bool ok)
{
    char err[2 * SS_FS_PATH_MAX + 64];
    int rc = 0;
    if (o->out) {
        if (ok && ss_fs_tmp_commit(o->out, err, sizeof err) != 0) {
            fprintf(stderr, S_PROG ": %s\n", err);
            rc = -1;
        }
        ss_fs_tmp_abort(o->out);  /* not committed: the temporary file goes */
        ss_free(o->out);
        o->out = NULL;
    } else if (o->fd >= 0 && close(o->fd) != 0 && ok) {
        fprintf(stderr, S_PROG ": cannot write '%s': %s\n", o->path, strerror(errno));
        rc = -1;
    }
    o->fd = -1;
    return rc;
}

/* Print s as a JSON string. */
static void s_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* Print a double as JSON (null when not finite). */
static void s_json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6f", v);
    else
        fputs("null", f);
}

static void s_json_out(FILE *f, const struct s_out *o)
{
    double p = tr_planted_base_rate(&o->st);
    fputs("{\"path\":", f);
    s_json_str(f, o->path);
    fprintf(f, ",\"rows\":%" PRIu64 ",\"positives\":%" PRIu64 ",\"bytes\":%" PRIu64
            ",\"base_rate\":", o->st.rows, o->st.positives, o->st.bytes);
    s_json_num(f, p);
    fputs(",\"bayes_logloss\":", f);
    s_json_num(f, o->st.rows ? o->st.logloss_sum / (double)o->st.rows : NAN);
    fputs(",\"bayes_ne\":", f);
    s_json_num(f, tr_planted_bayes_ne(&o->st));
    fputs(",\"seconds\":", f);
    s_json_num(f, o->seconds);
    fputc('}', f);
}

static void s_summary(const char *name, const struct s_out *o)
{
    fprintf(stderr, "  %-5s %10" PRIu64 " rows -> %s (%.1f MB), base rate %.4f, "
            "Bayes NE %.4f, %.2f M rows/s\n", name, o->st.rows, o->path,
            (double)o->st.bytes / 1e6, tr_planted_base_rate(&o->st),
            tr_planted_bayes_ne(&o->st),
            o->seconds > 0 ? (double)o->st.rows / o->seconds / 1e6 : 0.0);
}

/* Write o's rows. Returns 0 or -1 with a message printed. */
static int s_generate(const tr_planted_t *model, struct s_out *o)
{
    uint64_t t0 = ss_now_ns();
    int rc = tr_planted_write(model, o->stream, o->rows, o->fd, &o->st);
    o->seconds = (double)(ss_now_ns() - t0) * 1e-9;
    if (rc != 0) {
        fprintf(stderr, S_PROG ": cannot write '%s': %s\n", o->path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Parse argv into the outputs. Returns 0, 1 for --help, 3 for --version, or 2
 * on usage error. */
static int s_parse_args(int argc, char **argv, uint64_t *seed, struct s_out *train,
                        struct s_out *eval, bool *has_rows, bool *has_eval_rows)
{
    static const struct option opts[] = {
        {"rows", required_argument, NULL, 'r'},
        {"seed", required_argument, NULL, 's'},
        {"out", required_argument, NULL, 'o'},
        {"eval-rows", required_argument, NULL, 'R'},
        {"eval-out", required_argument, NULL, 'O'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int c;
    int idx = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, &idx)) != -1) {
        switch (c) {
        case 'r':
            if (s_parse_count(optarg, &train->rows) != 0)
                goto bad_value;
            *has_rows = true;
            break;
        case 'R':
            if (s_parse_count(optarg, &eval->rows) != 0)
                goto bad_value;
            *has_eval_rows = true;
            break;
        case 's':
            if (s_parse_seed(optarg, seed) != 0)
                goto bad_value;
            break;
        case 'o':
            train->path = optarg;
            break;
        case 'O':
            eval->path = optarg;
            break;
        case 'h':
            return 1;
        case 'V':
            return 3;
        default:
            fprintf(stderr, S_PROG ": unknown or incomplete option '%s'\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, S_PROG ": unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return 0;
bad_value:
    fprintf(stderr, S_PROG ": bad value '%s' for --%s\n", optarg, opts[idx].name);
    return 2;
}

/* Check that the options form a complete request. Returns 0 or 2. */
static int s_check_args(const struct s_out *train, const struct s_out *eval, bool has_rows,
                        bool has_eval_rows)
{
    const char *msg = NULL;
    if (!has_rows)
        msg = "--rows is required";
    else if (!train->path || !train->path[0])
        msg = "--out is required";
    else if (has_eval_rows != (eval->path != NULL))
        msg = "--eval-rows and --eval-out go together";
    else if (eval->path && !eval->path[0])
        msg = "--eval-out is empty";
    else if (eval->path && strcmp(eval->path, train->path) == 0)
        msg = "--eval-out must differ from --out";
    if (!msg)
        return 0;
    fprintf(stderr, S_PROG ": %s (see --help)\n", msg);
    return 2;
}

int main(int argc, char **argv)
{
    uint64_t seed = 1;
    struct s_out train = {.fd = -1, .stream = TR_PLANTED_STREAM_TRAIN};
    struct s_out eval = {.fd = -1, .stream = TR_PLANTED_STREAM_EVAL};
    bool has_rows = false;
    bool has_eval_rows = false;
    int rc = s_parse_args(argc, argv, &seed, &train, &eval, &has_rows, &has_eval_rows);
    if (rc == 1) {
        s_usage(stdout);
        return 0;
    }
    if (rc == 3) {
        ss_version_print(stdout, S_PROG);
        return 0;
    }
    if (rc == 0)
        rc = s_check_args(&train, &eval, has_rows, has_eval_rows);
    if (rc != 0)
        return rc;

    bool ok = s_out_open(&train) == 0 && (!eval.path || s_out_open(&eval) == 0);
    tr_planted_t *model = NULL;
    uint64_t t0 = ss_now_ns();
    if (ok) {
        model = tr_planted_new(seed);
        ok = s_generate(model, &train) == 0 && (!eval.path || s_generate(model, &eval) == 0);
    }
    ok = s_out_close(&train, ok) == 0 && ok;
    if (eval.path)
        ok = s_out_close(&eval, ok) == 0 && ok;
    double seconds = (double)(ss_now_ns() - t0) * 1e-9;
    if (!ok) {
        tr_planted_destroy(&model);
        return 1;
    }

    uint64_t rows = train.st.rows + eval.st.rows;
    fprintf(stderr, S_PROG ": seed %" PRIu64 ", planted bias %.4f, target base rate %.2f\n",
            seed, tr_planted_bias(model), TR_PLANTED_BASE_RATE);
    s_summary("train", &train);
    if (eval.path)
        s_summary("eval", &eval);
    fprintf(stderr, "  total %" PRIu64 " rows in %.2f s (model build included)\n", rows,
            seconds);
    printf("{\"seed\":%" PRIu64 ",\"train\":", seed);
    s_json_out(stdout, &train);
    fputs(",\"eval\":", stdout);
    if (eval.path)
        s_json_out(stdout, &eval);
    else
        fputs("null", stdout);
    fputs(",\"seconds\":", stdout);
    s_json_num(stdout, seconds);
    fputs(",\"rows_per_s\":", stdout);
    s_json_num(stdout, seconds > 0 ? (double)rows / seconds : NAN);
    fputs("}\n", stdout);
    tr_planted_destroy(&model);
    if (fflush(stdout) != 0) {
        fprintf(stderr, S_PROG ": cannot write to stdout: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
