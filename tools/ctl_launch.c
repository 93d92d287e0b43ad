/* ctl_launch.c - shadow-ctl ports and shadow-ctl report (see ctl_launch.h).
 *
 * ports: a launcher needs endpoints nobody else uses, on this host or (run
 * over ssh) on another; binding is the only honest test of a port, so this
 * binds. report: the job's result.json from the trainers' own result files,
 * the one place that knows its fields. It reads them, and the launcher's
 * JSON-lines files, through ss_json (libjansson): a file that is not JSON is
 * named with the line and column, never half-read. It writes result.json
 * through ss_jw (strings escaped), one line, fields in the order they have
 * always had; scripts read it back with jq. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctl_launch.h"
#include "ss_assert.h"
#include "ss_backend.h"
#include "ss_cfg.h"
#include "ss_err.h"
#include "ss_fs.h"
#include "ss_json.h"
#include "ss_launch.h"
#include "ss_launch_opts.h"
#include "ss_mem.h"
#include "ss_plan.h"
#include "ss_stats.h"
#include "ss_version.h"
#include "tr_reader.h"

#define CTL_MAX_PORTS 1024      /* most ports one call hands out */
#define CTL_MAX_TRAINERS 1024   /* most result-trainer files read */

/* ------------------------------------------------------------- ports */

/* The kernel's ephemeral range low end (outgoing connections' ports). */
static long s_ephemeral_low(void)
{
    long lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &lo, &hi) != 2)
            lo = 32768;
        fclose(f);
    }
    return lo;
}

/* Resolve host ("*" = any IPv4 address, "::" any IPv6 one) to a socket
 * address, IPv4 first; *len gets its size. */
static int s_resolve(const char *host, struct sockaddr_storage *sa, socklen_t *len)
{
    char why[256];
    if (!strcmp(host, "*"))
        host = "0.0.0.0";
    if (ss_plan_resolve(host, sa, len, why, sizeof why) == 0)
        return 0;
    fprintf(stderr, "shadow-ctl: ports: cannot resolve '%s': %s\n", host, why);
    return -1;
}

/* Bind a TCP socket to sa:port; returns the fd or -1 (errno set). */
static int s_try_bind(struct sockaddr_storage sa, socklen_t len, long port)
{
    int fd = socket(sa.ss_family, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    if (sa.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&sa)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)&sa)->sin_port = htons((uint16_t)port);
    if (bind(fd, (struct sockaddr *)&sa, len) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int s_parse_range(const char *s, long *lo, long *hi)
{
    char *end;
    *lo = strtol(s, &end, 10);
    if (*end != '-')
        return -1;
    *hi = strtol(end + 1, &end, 10);
    return *end || *lo < 1 || *hi > 65535 || *lo > *hi ? -1 : 0;
}

int ctl_ports_main(int argc, char **argv)
{
    static const struct option opts[] = {{"host", required_argument, 0, 'H'},
                                         {"range", required_argument, 0, 'r'},
                                         {"span", required_argument, 0, 's'},
                                         {0, 0, 0, 0}};
    const char *host = "127.0.0.1";
    long lo = 15000, hi = s_ephemeral_low() - 1, n = 0, span = 1;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'H')
            host = optarg;
        else if (c == 's' && (span = strtol(optarg, NULL, 10)) >= 1 && span <= 64)
            continue;
        else if (c != 'r' || s_parse_range(optarg, &lo, &hi) != 0)
            goto usage;
    }
    if (optind != argc - 1 || (n = strtol(argv[optind], NULL, 10)) < 1 || n > CTL_MAX_PORTS)
        goto usage;
    if (hi < lo)
        lo = 1024, hi = 65535;  /* an odd ephemeral range: anything bindable */
    struct sockaddr_storage sa;
    socklen_t sa_len = 0;
    if (s_resolve(host, &sa, &sa_len) != 0)
        return 1;
    if (hi - lo + 1 < span)
        goto usage;
    int *fds = ss_calloc((size_t)(n * span), sizeof *fds), rc = 0, last_errno = 0;
    long *ports = ss_calloc((size_t)n, sizeof *ports), got = 0;
    srand((unsigned)time(NULL) ^ ((unsigned)getpid() << 16));
    for (long tries = 0; got < n && tries < 200 * n + 1000; tries++) {
        long p = lo + rand() % (hi - lo + 2 - span), k;
        /* the whole span p .. p + span - 1, held until the end (a port
         * already taken by us fails too) */
        for (k = 0; k < span; k++)
            if ((fds[got * span + k] = s_try_bind(sa, sa_len, p + k)) < 0)
                break;
        if (k == span) {
            ports[got++] = p;
            continue;
        }
        last_errno = errno;
        while (k-- > 0)
            close(fds[got * span + k]);
    }
    if (got < n) {
        fprintf(stderr, "shadow-ctl: ports: could bind only %ld of %ld ports in %ld-%ld on %s "
                "(last error: %s); is %s an address of this host?\n", got, n, lo, hi, host,
                strerror(last_errno), host);
        rc = 1;
    }
    for (long i = 0; i < got; i++)
        if (rc == 0)
            printf("%ld\n", ports[i]);
    for (long i = 0; i < got * span; i++)
        close(fds[i]);
    ss_free(fds);
    ss_free(ports);
    return rc;
usage:
    fprintf(stderr, "shadow-ctl: usage: ports N [--host ADDR] [--range LO-HI] [--span K] "
            "(1 <= N <= %d, 1 <= K <= 64)\n", CTL_MAX_PORTS);
    return 2;
}

/* ------------------------------------------------------------ report */

struct report_args {
    const char *run_dir;
    const char *job;        /* job.name */
    const char *sync;       /* the sync algorithm as the launcher names it */
    const char *restarts;   /* file: one JSON object a line, or NULL */
    const char *lost;       /* file: trainers lost, {"rank":R,...} a line, or NULL */
    const char *logs;       /* printed in the summary; default RUN_DIR/logs */
    const char *wall_s;     /* as given (the launcher measured it) */
    long trainers;          /* -1: every file from rank 0 on */
    const char *resumed;    /* examples of the job checkpoint it resumed from, or NULL */
    int quiet;              /* write result.json only */
    int if_error;           /* --if-error: only when trainer 0's result names an error */
    const char *scored;     /* --eval-only/--predict: the model folder scored, or NULL */
};

/* One trainer's result-trainer-R.json: its text, copied into result.json's
 * per_trainer as it is, and the object parsed from it. */
struct tr_result {
    char *text;     /* the file's bytes, newlines dropped; NULL when missing */
    json_t *obj;    /* the parsed object; NULL when missing */
};

/* Drop the newlines of text in place (the file is one line; JSON needs none
 * between tokens and allows none inside strings). */
static void s_drop_newlines(char *text)
{
    char *w = text;
    for (const char *r = text; *r; r++)
        if (*r != '\n' && *r != '\r')
            *w++ = *r;
    *w = '\0';
}

/* The value of field key of o as JSON text into out ("null" when absent;
 * strings quoted), as the trainer wrote it. */
static const char *s_field(const json_t *o, const char *key, char *out, size_t len)
{
    ss_json_text(json_object_get(o, key), out, len);
    return out;
}

/* A number field for people: fmt ("%.6f") applied to its value; a field
 * that is not a number (null, missing) as it is written. */
static const char *s_num_field(const json_t *o, const char *key, const char *fmt, char *out,
                               size_t len)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_number(v))
        snprintf(out, len, fmt, json_number_value(v));
    else
        ss_json_text(v, out, len);
    return out;
}

/* The value of a string field without its quotes; another value as its
 * JSON text ("null"). */
static const char *s_str_field(const json_t *o, const char *key, char *out, size_t len)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_string(v))
        snprintf(out, len, "%s", json_string_value(v));
    else
        ss_json_text(v, out, len);
    return out;
}

/* 1 when s is a plain decimal number, valid as JSON ("4.250", "12"). */
static int s_is_json_number(const char *s)
{
    char *end;
    if (!s[0] || strspn(s, "0123456789.eE+-") != strlen(s) || !strchr("0123456789-", s[0]))
        return 0;
    strtod(s, &end);
    return *end == '\0';
}

static int s_parse_report_args(int argc, char **argv, struct report_args *a)
{
    static const struct option opts[] = {
        {"job", required_argument, 0, 'j'},      {"sync", required_argument, 0, 's'},
        {"trainers", required_argument, 0, 'n'}, {"wall-s", required_argument, 0, 'w'},
        {"restarts", required_argument, 0, 'r'}, {"logs", required_argument, 0, 'l'},
        {"lost", required_argument, 0, 'L'},     {"quiet", no_argument, 0, 'q'},
        {"resumed-from", required_argument, 0, 'R'}, {"scored", required_argument, 0, 'S'},
        {"if-error", no_argument, 0, 'E'},       {0, 0, 0, 0}};
    int c;
    *a = (struct report_args){.job = "", .sync = "", .wall_s = "null", .trainers = -1};
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'j': a->job = optarg; break;
        case 's': a->sync = optarg; break;
        case 'n': a->trainers = strtol(optarg, NULL, 10); break;
        case 'w': a->wall_s = optarg; break;
        case 'r': a->restarts = optarg; break;
        case 'L': a->lost = optarg; break;
        case 'l': a->logs = optarg; break;
        case 'q': a->quiet = 1; break;
        case 'E': a->if_error = a->quiet = 1; break;
        case 'R': a->resumed = optarg; break;
        case 'S': a->scored = optarg; break;
        default: return -1;
        }
    }
    if (optind != argc - 1 || a->trainers == 0 || a->trainers > CTL_MAX_TRAINERS)
        return -1;
    if (a->resumed && (!a->resumed[0] || strspn(a->resumed, "0123456789") != strlen(a->resumed)))
        return -1;
    if (strcmp(a->wall_s, "null") != 0 && !s_is_json_number(a->wall_s))
        return -1;  /* copied into result.json as it is */
    a->run_dir = argv[optind];
    return 0;
}

/* Load every trainer's result (a lost one may have none); returns the count
 * or -1 (message printed: a result missing or not JSON, naming the file). */
static long s_load_results(const struct report_args *a, struct tr_result *per, const char *lost)
{
    char path[4096], err[4600];
    long n = a->trainers > 0 ? a->trainers : CTL_MAX_TRAINERS;
    for (long r = 0; r < n; r++) {
        snprintf(path, sizeof path, "%s/result-trainer-%ld.json", a->run_dir, r);
        int rc = ss_json_load(path, &per[r].obj, &per[r].text, err, sizeof err);
        if (rc == 0) {
            s_drop_newlines(per[r].text);
            continue;
        }
        if (rc != SS_E_NOTFOUND) {
            fprintf(stderr, "shadow-ctl: report: %s\n", err);
            return -1;
        }
        if (lost[r])
            continue;
        if (a->trainers < 0 && r > 0)
            return r;  /* every file there is */
        fprintf(stderr, "shadow-ctl: report: trainer %ld wrote no result (%s)\n", r, path);
        return -1;
    }
    return n;
}

/* A launcher's file of one JSON object a line (restarts, lost trainers):
 * the lines as a JSON list body (joined by commas, each as written) into
 * *body (caller frees) and their objects into *items (caller owns:
 * json_decref()); "" and an empty array when file is NULL or missing. A
 * line that is not a JSON object is left out with a warning naming the file
 * and line (result.json stays JSON). Returns the count kept. */
static int s_jsonl_list(const char *file, char **body, json_t **items)
{
    char *line = NULL, what[4200], err[4600];
    size_t cap = 0, n = 0, out_cap = 256;
    ssize_t got;
    long line_no = 0;
    FILE *f = file ? fopen(file, "r") : NULL;
    *body = ss_calloc(1, out_cap);
    *items = json_array();
    while (f && (got = getline(&line, &cap, f)) >= 0) {
        json_t *o;
        line_no++;
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0])
            continue;
        snprintf(what, sizeof what, "%s line %ld", file, line_no);
        if (ss_json_parse(line, what, &o, err, sizeof err) != 0) {
            fprintf(stderr, "shadow-ctl: report: %s (line left out)\n", err);
            continue;
        }
        json_array_append_new(*items, o);
        size_t l = strlen(line);
        while (n + l + 2 >= out_cap)
            *body = ss_realloc(*body, out_cap *= 2);
        n += (size_t)sprintf(*body + n, "%s%s", n ? "," : "", line);
    }
    free(line);  /* getline's buffer: the C library's malloc */
    if (f)
        fclose(f);
    return (int)json_array_size(*items);
}

/* Mark lost[rank] for every entry of the lost trainers' list and keep its
 * exit status in lost_exit[rank] (-1 when not given). An entry without a
 * rank in range is not counted, with a warning (result.json lists it as
 * the launcher wrote it). */
static void s_mark_lost(const json_t *items, const char *file, char *lost, int *lost_exit)
{
    size_t i;
    const json_t *o;
    char err[4400];
    json_array_foreach(items, i, o) {
        uint64_t r = 0;
        if (ss_json_u64(o, "rank", &r, file, err, sizeof err) == 0 && r >= CTL_MAX_TRAINERS)
            snprintf(err, sizeof err, "%s: rank %llu out of range", file, (unsigned long long)r);
        if (r >= CTL_MAX_TRAINERS || !json_is_integer(json_object_get(o, "rank"))) {
            fprintf(stderr, "shadow-ctl: report: %s (entry %zu not counted as lost)\n", err, i + 1);
            continue;
        }
        const json_t *e = json_object_get(o, "exit");
        lost[r] = 1;
        lost_exit[r] = json_is_integer(e) ? (int)json_integer_value(e) : -1;
    }
}

/* The lowest rank that was not lost and wrote a result: it scored the output
 * model (trainer 0 unless it was lost); -1 when there is none. */
static long s_lead(const struct tr_result *per, long n, const char *lost)
{
    for (long r = 0; r < n; r++)
        if (!lost[r] && per[r].obj)
            return r;
    return -1;
}

/* The totals over the trainers that finished: examples and examples/s.
 * Returns 0, or -1 when a result lacks them (message printed, naming the
 * file and field). */
static int s_totals(const struct report_args *a, const struct tr_result *per, long n,
                    const char *lost, unsigned long long *examples, double *eps)
{
    char what[4200], err[4600];
    for (long r = 0; r < n; r++) {
        uint64_t ex;
        double e;
        if (lost[r] || !per[r].obj)
            continue;
        snprintf(what, sizeof what, "%s/result-trainer-%ld.json", a->run_dir, r);
        if (ss_json_u64(per[r].obj, "examples", &ex, what, err, sizeof err) != 0 ||
            ss_json_num(per[r].obj, "eps", &e, what, err, sizeof err) != 0) {
            fprintf(stderr, "shadow-ctl: report: %s\n", err);
            return -1;
        }
        *examples += ex;
        *eps += e;
    }
    return 0;
}

/* result.json: the job's figures, trainer lead's evaluation of the output
 * model, the launcher's lists and every trainer's result as written (keys
 * in the order the launcher always wrote them; scripts read it with jq).
 * by_lost: the examples of the lost trainers counted in examples, NULL when
 * no trainer was lost. */
static char *s_result_json(const struct report_args *a, const struct tr_result *per, long n,
                           const char *lost, long lead, const char *restarts,
                           const char *lost_list, unsigned long long examples,
                           const unsigned long long *by_lost, double eps)
{
    static const char *const evals[] = {"eval_ne", "eval_auc", "eval_logloss", "eval_calibration",
                                        "best_epoch", "valid_ne", "valid_auc", "valid_logloss",
                                        "selected_on", "eval_scorings", "model_saved",
                                        "model_epoch"};
    const json_t *r0 = per[lead].obj;
    size_t max = strlen(restarts) + strlen(lost_list) + (1u << 16);
    char v[256], *list;
    for (long r = 0; r < n; r++)
        max += per[r].text ? strlen(per[r].text) + 1 : 0;
    struct ss_jw w;
    ss_jw_begin(&w, max);
    ss_jw_str(&w, "job", a->job);
    ss_jw_str(&w, "sync_algorithm", a->sync);
    ss_jw_i64(&w, "trainers", n);
    ss_jw_str(&w, "output_model", s_str_field(r0, "output_model", v, sizeof v));
    for (size_t i = 0; i < sizeof evals / sizeof evals[0]; i++)
        ss_jw_raw(&w, evals[i], s_field(r0, evals[i], v, sizeof v));
    ss_jw_bool(&w, "resumed", a->resumed != NULL);
    if (a->resumed)  /* a number: checked by s_parse_report_args() */
        ss_jw_raw(&w, "resumed_from_examples", a->resumed);
    list = ss_malloc(max);
    snprintf(list, max, "[%s]", restarts);
    ss_jw_raw(&w, "ps_restarts", list);
    snprintf(list, max, "[%s]", lost_list);
    ss_jw_raw(&w, "trainers_lost", list);
    ss_jw_u64(&w, "examples", examples);
    snprintf(v, sizeof v, "%.1f", eps);
    ss_jw_raw(&w, "eps", v);
    if (by_lost)  /* named apart: they come from the lost trainers' last progress rows */
        ss_jw_u64(&w, "examples_by_lost_trainers", *by_lost);
    ss_jw_raw(&w, "wall_s", a->wall_s);  /* a number or null: checked */
    if (json_object_get(r0, "error")) {  /* the output model's save failed (issue 22) */
        char e[4096];
        ss_jw_raw(&w, "error", s_field(r0, "error", e, sizeof e));
    }
    size_t k = 0;
    list[k++] = '[';
    for (long r = 0; r < n; r++)
        if (!lost[r] && per[r].text)
            k += (size_t)snprintf(list + k, max - k, "%s%s", k > 1 ? "," : "", per[r].text);
    snprintf(list + k, max - k, "]");
    ss_jw_raw(&w, "per_trainer", list);
    ss_jw_end(&w);
    ss_free(list);
    ss_assert(!w.truncated);  /* max counts every piece */
    return w.buf;
}

static int s_write_result(const struct report_args *a, const struct tr_result *per, long n,
                          const char *lost, long lead, const char *restarts,
                          const char *lost_list, unsigned long long examples,
                          const unsigned long long *by_lost, double eps)
{
    char path[4096], err[4200 + 256];
    snprintf(path, sizeof path, "%s/result.json", a->run_dir);
    char *json =
        s_result_json(a, per, n, lost, lead, restarts, lost_list, examples, by_lost, eps);
    struct ss_fs_piece pieces[2] = {{json, strlen(json)}, {"\n", 1}};
    int rc = ss_fs_write_atomic(path, pieces, 2, err, sizeof err);
    ss_free(json);
    if (rc != 0) {
        fprintf(stderr, "shadow-ctl: report: %s\n", err);
        return 1;
    }
    return 0;
}

static const char *s_output_what(const char *kind, long lead, char *buf, size_t len)
{
    if (!strcmp(kind, "center"))
        return "the EASGD center (every trainer ends on it)";
    if (!strcmp(kind, "average"))
        return "the trainers' average (every trainer ends on it)";
    snprintf(buf, len, "trainer %ld's replica (sync none: every trainer has its own)", lead);
    return buf;
}

/* What chose the model kept: the validation split's figures, or a warning
 * that the eval figures above chose it (biased low). */
static void s_print_selection(const json_t *r0)
{
    char v[256], on[64];
    s_str_field(r0, "selected_on", on, sizeof on);
    if (strcmp(s_field(r0, "valid_ne", v, sizeof v), "null") != 0) {
        char n[64];
        int once = !strcmp(s_field(r0, "eval_scorings", n, sizeof n), "1");
        printf("   valid NE          %s   (%s: chose the model kept; the eval figures "
               "above are the test%s)\n", s_num_field(r0, "valid_ne", "%.6f", v, sizeof v),
               strcmp(on, "null") ? on : "validation split",
               once ? ", data.eval scored once, on the model kept" : "");
        printf("   valid AUC         %s\n", s_num_field(r0, "valid_auc", "%.6f", v, sizeof v));
    } else if (!strcmp(on, "data.eval")) {
        printf("   selection         on data.eval (no validation split): the eval NE is "
               "biased low; set data.valid or data.valid_fraction\n");
    }
}

static void s_print_eval(const json_t *r0)
{
    char v[256], e[64], b[64];
    const json_t *evals = json_object_get(r0, "evals");
    if (!strcmp(s_field(r0, "eval_ne", v, sizeof v), "null"))
        return;
    printf("   eval NE           %s   (1.0 = predicting the base rate; lower is better)\n",
           s_num_field(r0, "eval_ne", "%.6f", v, sizeof v));
    printf("   eval AUC          %s\n", s_num_field(r0, "eval_auc", "%.6f", v, sizeof v));
    printf("   eval logloss      %s\n", s_num_field(r0, "eval_logloss", "%.5f", v, sizeof v));
    printf("   calibration       %s\n",
           s_num_field(r0, "eval_calibration", "%.4f", v, sizeof v));
    if (json_is_integer(evals) && json_integer_value(evals) > 1)
        printf("   best epoch        %s of %s (the model kept; %s evaluations)\n",
               s_field(r0, "best_epoch", b, sizeof b), s_field(r0, "epochs_done", e, sizeof e),
               s_field(r0, "evals", v, sizeof v));
    s_print_selection(r0);
}

/* The summary of a run that only scored a saved model (--eval-only,
 * --predict): no training figures, no "output model" (nothing was saved). */
static void s_print_scored(const struct report_args *a, const json_t *r0)
{
    char v[64];
    printf("\n== ShadowSync evaluation finished in %s s\n", a->wall_s);
    printf("   model scored      %s\n", a->scored);
    printf("   rows scored       %s\n", s_field(r0, "eval_rows", v, sizeof v));
    s_print_eval(r0);
    printf("   results           %s/result.json\n", a->run_dir);
    if (a->logs)
        printf("   logs              %s\n", a->logs);
    else
        printf("   logs              %s/logs\n", a->run_dir);
}

static void s_print_summary(const struct report_args *a, const struct tr_result *per, long n,
                            const char *lost, const int *lost_exit, long lead, int n_restarts,
                            int n_lost, unsigned long long examples, double eps)
{
    char kind[64], v[4][64], what[128];
    s_str_field(per[lead].obj, "output_model", kind, sizeof kind);
    printf("\n== ShadowSync job finished in %s s (%ld trainer(s), sync %s)\n", a->wall_s, n,
           a->sync);
    printf("   examples trained  %llu\n   examples/s (sum)  %.1f\n", examples, eps);
    if (a->resumed)
        printf("   resumed           from a job checkpoint at %s examples (counted above)\n",
               a->resumed);
    printf("   output model      %s, saved in %s/model\n",
           s_output_what(kind, lead, what, sizeof what), a->run_dir);
    s_print_eval(per[lead].obj);
    for (long r = 0; r < n; r++) {
        const json_t *o = per[r].obj;
        if (lost[r] || !o)
            continue;
        printf("   trainer %ld: %s examples, %s ex/s, train NE %s", r,
               s_field(o, "examples", v[0], sizeof v[0]),
               s_num_field(o, "eps", "%.1f", v[1], sizeof v[1]),
               s_num_field(o, "train_ne", "%.6f", v[2], sizeof v[2]));
        if (!strcmp(kind, "replica") &&
            strcmp(s_num_field(o, "eval_ne", "%.6f", v[3], 64), "null"))
            printf(", eval NE %s (its replica)", v[3]);
        printf("\n");
    }
    if (n_lost > 0) {
        printf("   trainers lost     %d (", n_lost);
        for (long r = 0, k = 0; r < n; r++)
            if (lost[r])
                printf("%srank %ld (exit %d)", k++ ? ", " : "", r, lost_exit[r]);
        printf("); the others finished without %s (trainers_lost in result.json)\n",
               n_lost > 1 ? "them" : "it");
    }
    if (n_restarts > 0)
        printf("   PS restarts       %d (see ps_restarts in result.json; updates since each "
               "PS's last recovery checkpoint were lost)\n", n_restarts);
    if (!strcmp(kind, "replica") && n > 1) {
        printf("   note: with sync none the trainers' dense models differ (see each eval NE "
               "above);\n         set sync.algorithm (e.g. s-easgd) to get one model\n");
    }
    printf("   results           %s/result.json\n", a->run_dir);
    if (a->logs)
        printf("   logs              %s\n", a->logs);
    else
        printf("   logs              %s/logs\n", a->run_dir);
}

/* The examples a lost trainer had trained by its last progress row
 * (RUN_DIR/metrics-trainer-R.jsonl): its work until then reached the model
 * through the sync rule; 0 when there is no row. A line that is not JSON is
 * passed over: the trainer may have died while writing its last one. */
static unsigned long long s_lost_examples(const char *run_dir, long rank)
{
    char path[4096], err[256], *line = NULL;
    size_t cap = 0;
    uint64_t n = 0, v;
    snprintf(path, sizeof path, "%s/metrics-trainer-%ld.jsonl", run_dir, rank);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    while (getline(&line, &cap, f) >= 0) {
        json_t *o;
        if (ss_json_parse(line, "metrics row", &o, err, sizeof err) != 0)
            continue;
        if (ss_json_u64(o, "examples", &v, "metrics row", err, sizeof err) == 0)
            n = v;
        json_decref(o);
    }
    free(line);  /* getline's buffer: the C library's malloc */
    fclose(f);
    return n;
}

int ctl_report_main(int argc, char **argv)
{
    struct report_args a;
    struct tr_result per[CTL_MAX_TRAINERS] = {{0}};
    char lost[CTL_MAX_TRAINERS] = {0};
    int lost_exit[CTL_MAX_TRAINERS] = {0};
    int rc = 1, n_restarts = 0, n_lost = 0;
    char *restarts = NULL, *lost_list = NULL;
    json_t *restart_items = NULL, *lost_items = NULL;
    if (s_parse_report_args(argc, argv, &a) != 0) {
        fprintf(stderr, "shadow-ctl: usage: report RUN_DIR [--job NAME] [--sync ALGO] "
                "[--trainers N] [--wall-s S] [--restarts FILE] [--lost FILE] [--logs DIR] "
                "[--resumed-from N] [--scored MODEL_DIR] [--quiet] [--if-error]\n");
        return 2;
    }
    n_lost = s_jsonl_list(a.lost, &lost_list, &lost_items);
    s_mark_lost(lost_items, a.lost, lost, lost_exit);
    long n = s_load_results(&a, per, lost);
    if (n < 0)
        goto out;
    long lead = s_lead(per, n, lost);
    if (a.if_error && (lead != 0 || !json_object_get(per[0].obj, "error"))) {
        rc = 3;  /* trainer 0 saved its model, or wrote no result: nothing to report */
        goto out;
    }
    /* an error after the model was saved (the final RESTORE refused, say):
     * reported as any error, exit 4 so that the caller does not say unsaved;
     * exit 5 when the output model's save failed but an earlier model is in
     * the folder (model_epoch: the caller names it) */
    int saved_anyway = a.if_error && json_is_true(json_object_get(per[0].obj, "model_saved"));
    int older_kept = a.if_error && !saved_anyway &&
                     json_is_integer(json_object_get(per[0].obj, "model_epoch"));
    if (lead < 0) {
        fprintf(stderr, "shadow-ctl: report: every trainer was lost: no result to report\n");
        goto out;
    }
    unsigned long long examples = 0, by_lost = 0;
    double eps = 0;
    for (long r = 0; r < CTL_MAX_TRAINERS; r++)
        if (lost[r])  /* its work counts too (issue 22), to its last progress row */
            by_lost += s_lost_examples(a.run_dir, r);
    examples = by_lost;
    if (s_totals(&a, per, n, lost, &examples, &eps) != 0)
        goto out;
    n_restarts = s_jsonl_list(a.restarts, &restarts, &restart_items);
    rc = s_write_result(&a, per, n, lost, lead, restarts, lost_list, examples,
                        n_lost > 0 ? &by_lost : NULL, eps);
    if (rc == 0 && saved_anyway)
        rc = 4;
    else if (rc == 0 && older_kept)
        rc = 5;
    if (rc == 0 && !a.quiet && a.scored)
        s_print_scored(&a, per[lead].obj);
    else if (rc == 0 && !a.quiet)
        s_print_summary(&a, per, n, lost, lost_exit, lead, n_restarts, n_lost, examples, eps);
    if (rc == 0 && !a.quiet && !a.scored && by_lost)
        printf("   (examples trained include %llu by the lost trainer(s), to their last progress "
               "line)\n", by_lost);
out:
    ss_free(restarts);
    ss_free(lost_list);
    json_decref(restart_items);
    json_decref(lost_items);
    for (long r = 0; r < CTL_MAX_TRAINERS; r++) {
        ss_free(per[r].text);
        json_decref(per[r].obj);
    }
    return rc;
}

/* ------------------------------------------------------------ check-data */

/* Check one data key's list, each entry apart first (so that the message
 * names the entry), then the list as a whole (standard input only alone).
 * Returns 0 or 1 (message printed). */
static int s_check_data_key(const char *key, const struct ss_str_list *l, int stdin_ok)
{
    const char *pats[SS_CFG_MAX_LIST];
    char err[SS_CFG_MAX_STR + 256];
    for (size_t i = 0; i < l->n; i++) {
        pats[i] = l->v[i];
        if (tr_reader_check_inputs(&pats[i], 1, stdin_ok, err, sizeof err) != 0) {
            fprintf(stderr, "shadow-ctl: %s: cannot read %s (%s)\n", key, l->v[i], err);
            return 1;
        }
    }
    if (l->n && tr_reader_check_inputs(pats, l->n, stdin_ok, err, sizeof err) != 0) {
        fprintf(stderr, "shadow-ctl: %s: %s\n", key, err);
        return 1;
    }
    return 0;
}

int ctl_check_data_main(const struct ss_cfg *cfg, int argc, char **argv)
{
    const struct {
        const char *key;
        const struct ss_str_list *list;
        int stdin_ok;
    } keys[] = {{"data.train", &cfg->train_files, 0},
                {"data.eval", &cfg->eval_files, 1},
                {"data.valid", &cfg->valid_files, 0}};
    size_t n_keys = sizeof keys / sizeof keys[0];
    for (int a = 1; a < argc; a++) {
        size_t k = 0;
        while (k < n_keys && strcmp(argv[a], keys[k].key) != 0)
            k++;
        if (k == n_keys) {
            fprintf(stderr, "shadow-ctl: check-data: no data key '%s' (data.train, data.eval "
                    "or data.valid)\n", argv[a]);
            return 2;
        }
    }
    for (size_t k = 0; k < n_keys; k++) {
        int asked = argc < 2;
        for (int a = 1; a < argc; a++)
            asked |= strcmp(argv[a], keys[k].key) == 0;
        if (asked && s_check_data_key(keys[k].key, keys[k].list, keys[k].stdin_ok) != 0)
            return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ preflight */

/* mkdir -p path. Returns 0, or -1 with errno set (ENOTDIR: a file is there). */
static int s_mkdir_p(const char *path)
{
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s", path);
    for (char *c = p + 1; *c; c++) {
        if (*c != '/')
            continue;
        *c = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return -1;
        *c = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        return -1;
    if (stat(p, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* Remove every entry of dir named PREFIX*SUFFIX (rm -rf each, as the shell
 * glob would find them); a missing dir has none. */
static void s_remove_matching(const char *dir, const char *prefix, const char *suffix)
{
    size_t lp = strlen(prefix), ls = strlen(suffix);
    char path[4096];
    struct dirent *e;
    DIR *d = opendir(dir);
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < lp + ls || strncmp(e->d_name, prefix, lp) != 0 ||
            strcmp(e->d_name + n - ls, suffix) != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        (void)ss_fs_remove_tree(path);  /* best effort, as rm -f */
    }
    closedir(d);
}

/* The token of the launch that last used dir (its .launch-token), or "none". */
static void s_read_token(const char *dir, char *out, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/.launch-token", dir);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(out, (int)len, f))
        snprintf(out, len, "none");
    else
        out[strcspn(out, "\n")] = '\0';
    if (f)
        fclose(f);
}

/* What a launcher tells its user about a preflight that ended with rc on a
 * host reached by be at target: the meaning of each of the preflight's exit
 * statuses (above), of 127 (the shell there found no shadow-ctl) and of the
 * backend's own failure (be->lost_hint). Prints one line to stdout. */
static void s_preflight_why(int rc, const struct ss_backend *be, const char *target,
                            const char *dir, const char *job, const char *bin,
                            const char *host)
{
    switch (rc) {
    case 3: printf("cannot create the run directory %s\n", dir); return;
    case 4: printf("no job file %s there (every host needs it at the same path)\n", job); return;
    case 5:
    case 127:
        printf("no %s/shadow-ps or shadow-ctl there (--remote-bin DIR, or make install "
               "PREFIX=...)\n", bin);
        return;
    case 6: printf("cannot find free ports on %s (is it an address of that host?)\n", host); return;
    default: break;
    }
    if (rc == be->lost_rc && be->lost_hint) {
        printf(be->lost_hint, target);
        printf("\n");
    } else {
        printf("exit %d\n", rc);
    }
}

int ctl_preflight_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"bin", required_argument, 0, 'b'},   {"ckpt-dir", required_argument, 0, 'k'},
        {"ports", required_argument, 0, 'p'}, {"host", required_argument, 0, 'H'},
        {"span", required_argument, 0, 's'},  {"why", required_argument, 0, 'w'},
        {"exec", required_argument, 0, 'e'},  {"target", required_argument, 0, 't'},
        {0, 0, 0, 0}};
    const char *bin = NULL, *ck = NULL, *n_ports = NULL, *host = "127.0.0.1", *span = "1";
    const char *why = NULL, *exec = "local", *target = "";
    char path[4096], found[256];
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'b': bin = optarg; break;
        case 'k': ck = optarg; break;
        case 'p': n_ports = optarg; break;
        case 'H': host = optarg; break;
        case 's': span = optarg; break;
        case 'w': why = optarg; break;
        case 'e': exec = optarg; break;
        case 't': target = optarg; break;
        default: goto usage;
        }
    }
    if (optind != argc - 3 || !bin)
        goto usage;
    const char *dir = argv[optind], *job = argv[optind + 1], *token = argv[optind + 2];
    if (why) {
        char *end;
        long rc = strtol(why, &end, 10);
        const struct ss_backend *be = ss_backend_find(exec);
        if (!be || end == why || *end || rc < 0 || rc > 255) {
            fprintf(stderr, "shadow-ctl: preflight: --why takes an exit status (0-255) "
                    "and --exec a known mode\n");
            return 2;
        }
        s_preflight_why((int)rc, be, target, dir, job, bin, host);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    if (s_mkdir_p(dir) != 0) {
        fprintf(stderr, "shadow-ctl: preflight: cannot create %s: %s\n", dir, strerror(errno));
        return 3;
    }
    /* recovery checkpoints of an earlier launch (or of the run a resume goes
     * on from): a PS restarted in this one must not restore their rows */
    if (ck && ck[0]) {
        snprintf(path, sizeof path, "%s/recovery", ck);
        s_remove_matching(path, "embedding-", ".ckpt");
        s_remove_matching(path, "sync-", ".ckpt");
    }
    s_read_token(dir, found, sizeof found);
    printf("%s\n", found);
    s_remove_matching(dir, "result-trainer-", ".json");
    /* a run directory of its own (not the launcher's): no part of an earlier
     * launch's job checkpoint may join the parts of this launch when gathered */
    if (strcmp(found, token) != 0) {
        snprintf(path, sizeof path, "%s/jobckpt", dir);
        (void)ss_fs_remove_tree(path);
        snprintf(path, sizeof path, "%s/jobckpt.resume", dir);
        (void)ss_fs_remove_tree(path);
        s_remove_matching(dir, "jobckpt.new-", "");
    }
    if (access(job, R_OK) != 0) {
        fprintf(stderr, "shadow-ctl: preflight: no job file %s\n", job);
        return 4;
    }
    snprintf(path, sizeof path, "%s/shadow-ps", bin);
    if (access(path, X_OK) != 0) {
        fprintf(stderr, "shadow-ctl: preflight: no %s: %s\n", path, strerror(errno));
        return 5;
    }
    ss_version_print(stdout, "shadow-ps");  /* the same build as this shadow-ctl */
    if (!n_ports || !strcmp(n_ports, "0"))
        return fflush(stdout) == 0 ? 0 : 6;
    char *pargv[] = {"ports", (char *)n_ports, "--host", (char *)host, "--span", (char *)span,
                     NULL};
    fflush(stdout);
    return ctl_ports_main(6, pargv) == 0 ? 0 : 6;
usage:
    fprintf(stderr, "shadow-ctl: usage: preflight DIR JOB.yaml TOKEN --bin DIR [--ckpt-dir DIR] "
            "[--ports N [--host ADDR] [--span S]] [--why RC [--exec MODE] [--target T]]\n");
    return 2;
}

/* ------------------------------------------------------------- launch */

int ctl_launch_main(int argc, char **argv)
{
    ss_launch_opts_t *o = NULL;
    char err[4096];
    if (argc < 2) {
        fprintf(stderr, "usage: shadow-ctl launch SCRIPT [ARG]... (scripts/shadow-launch runs "
                "it; see shadow-launch --help)\n");
        return 2;
    }
    int rc = ss_launch_opts_parse(argc - 2, argv + 2, argv[1], &o, err, sizeof err);
    if (rc == SS_LAUNCH_HELP) {
        ss_launch_usage(stdout);
        return 0;
    }
    if (rc == SS_LAUNCH_VERSION) {
        ss_version_print(stdout, "shadow-launch");
        return 0;
    }
    if (rc != 0) {
        if (err[0])
            fprintf(stderr, "shadow-launch: %s\n", err);
        else
            ss_launch_usage(stderr);
        return 2;
    }
    rc = ss_launch_run_job(o, argv + 2, argc - 2);
    ss_launch_opts_destroy(&o);
    return rc;
}
