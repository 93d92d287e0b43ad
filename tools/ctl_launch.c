/* ctl_launch.c - shadow-ctl ports and shadow-ctl report (see ctl_launch.h).
 *
 * ports: a launcher needs endpoints nobody else uses, on this host or (run
 * over ssh) on another; binding is the only honest test of a port, so this
 * binds. report: the job's result.json from the trainers' own result files,
 * the one place that knows its fields (scripts read them back with a sed
 * one-liner: the file stays one flat line per object, keys never repeated at
 * the top level). */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ctl_launch.h"
#include "ss_fs.h"
#include "ss_mem.h"

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

/* Resolve host ("*" = any address) to an IPv4 socket address. */
static int s_resolve(const char *host, struct sockaddr_in *sa)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    if (!strcmp(host, "*") || !strcmp(host, "0.0.0.0")) {
        sa->sin_addr.s_addr = htonl(INADDR_ANY);
        return 0;
    }
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "shadow-ctl: ports: cannot resolve '%s': %s\n", host, gai_strerror(rc));
        return -1;
    }
    memcpy(sa, res->ai_addr, sizeof *sa);
    freeaddrinfo(res);
    return 0;
}

/* Bind a TCP socket to sa:port; returns the fd or -1 (errno set). */
static int s_try_bind(struct sockaddr_in sa, long port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    sa.sin_port = htons((uint16_t)port);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
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
    struct sockaddr_in sa;
    if (s_resolve(host, &sa) != 0)
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
            if ((fds[got * span + k] = s_try_bind(sa, p + k)) < 0)
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
    const char *scored;     /* --eval-only/--predict: the model folder scored, or NULL */
};

/* Read a whole (small) file with its newlines dropped; NULL if missing. */
static char *s_slurp_line(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = ss_malloc(cap);
    int ch;
    while ((ch = fgetc(f)) != EOF) {
        if (ch == '\n' || ch == '\r')
            continue;
        if (n + 1 >= cap)
            buf = ss_realloc(buf, cap *= 2);
        buf[n++] = (char)ch;
    }
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Copy the raw value of top-level "key" of a flat JSON object into out
 * ("null" when absent; strings keep their quotes). */
static const char *s_field(const char *json, const char *key, char *out, size_t len)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *v = strstr(json, pat), *end;
    if (!v) {
        snprintf(out, len, "null");
        return out;
    }
    v += strlen(pat);
    if (*v == '"')
        end = strchr(v + 1, '"') ? strchr(v + 1, '"') + 1 : v + strlen(v);
    else
        for (end = v; *end && *end != ',' && *end != '}'; end++)
            ;
    snprintf(out, len, "%.*s", (int)(end - v), v);
    return out;
}

/* A number field for people: fmt ("%.6f") applied to its value; a field
 * that is not a number (null, missing) as it is written. */
static const char *s_num_field(const char *json, const char *key, const char *fmt, char *out,
                               size_t len)
{
    char raw[64], *end;
    s_field(json, key, raw, sizeof raw);
    double d = strtod(raw, &end);
    if (end == raw || *end)
        snprintf(out, len, "%s", raw);
    else
        snprintf(out, len, fmt, d);
    return out;
}

/* The value of a string field without its quotes. */
static const char *s_str_field(const char *json, const char *key, char *out, size_t len)
{
    s_field(json, key, out, len);
    size_t n = strlen(out);
    if (n >= 2 && out[0] == '"') {
        memmove(out, out + 1, n - 2);
        out[n - 2] = '\0';
    }
    return out;
}

static int s_parse_report_args(int argc, char **argv, struct report_args *a)
{
    static const struct option opts[] = {
        {"job", required_argument, 0, 'j'},      {"sync", required_argument, 0, 's'},
        {"trainers", required_argument, 0, 'n'}, {"wall-s", required_argument, 0, 'w'},
        {"restarts", required_argument, 0, 'r'}, {"logs", required_argument, 0, 'l'},
        {"lost", required_argument, 0, 'L'},     {"quiet", no_argument, 0, 'q'},
        {"resumed-from", required_argument, 0, 'R'}, {"scored", required_argument, 0, 'S'},
        {0, 0, 0, 0}};
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
        case 'R': a->resumed = optarg; break;
        case 'S': a->scored = optarg; break;
        default: return -1;
        }
    }
    if (optind != argc - 1 || a->trainers == 0 || a->trainers > CTL_MAX_TRAINERS)
        return -1;
    if (a->resumed && (!a->resumed[0] || strspn(a->resumed, "0123456789") != strlen(a->resumed)))
        return -1;
    a->run_dir = argv[optind];
    return 0;
}

/* Load every trainer's result (a lost one may have none); returns the count
 * or -1 (message printed). */
static long s_load_results(const struct report_args *a, char **per, const char *lost)
{
    char path[4096];
    long n = a->trainers > 0 ? a->trainers : CTL_MAX_TRAINERS;
    for (long r = 0; r < n; r++) {
        snprintf(path, sizeof path, "%s/result-trainer-%ld.json", a->run_dir, r);
        per[r] = s_slurp_line(path);
        if (per[r] || (r < n && lost[r]))
            continue;
        if (a->trainers < 0 && r > 0)
            return r;  /* every file there is */
        fprintf(stderr, "shadow-ctl: report: trainer %ld wrote no result (%s)\n", r, path);
        return -1;
    }
    return n;
}

/* A file of one JSON object a line (restarts, lost trainers) as a JSON list
 * body (lines joined by commas); "" when the file is missing or NULL. */
static char *s_jsonl_list(const char *file, int *count)
{
    char line[4096];
    size_t cap = 256, n = 0;
    char *out = ss_calloc(1, cap);
    FILE *f = file ? fopen(file, "r") : NULL;
    *count = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0])
            continue;
        size_t l = strlen(line);
        while (n + l + 2 >= cap)
            out = ss_realloc(out, cap *= 2);
        n += (size_t)sprintf(out + n, "%s%s", n ? "," : "", line);
        (*count)++;
    }
    if (f)
        fclose(f);
    return out;
}

/* Mark lost[rank] for every entry of the lost file's list body and keep its
 * exit status in lost_exit[rank]. */
static void s_mark_lost(const char *list, char *lost, int *lost_exit)
{
    for (const char *p = list; (p = strstr(p, "\"rank\":")) != NULL; p++) {
        long r = strtol(p + 7, NULL, 10);
        const char *e = strstr(p, "\"exit\":"), *next = strstr(p + 1, "\"rank\":");
        if (r < 0 || r >= CTL_MAX_TRAINERS)
            continue;
        lost[r] = 1;
        lost_exit[r] = (e && (!next || e < next)) ? (int)strtol(e + 7, NULL, 10) : -1;
    }
}

/* The lowest rank that was not lost and wrote a result: it scored the output
 * model (trainer 0 unless it was lost); -1 when there is none. */
static long s_lead(char **per, long n, const char *lost)
{
    for (long r = 0; r < n; r++)
        if (!lost[r] && per[r])
            return r;
    return -1;
}

static int s_write_result(const struct report_args *a, char **per, long n, const char *lost,
                          long lead, const char *restarts, const char *lost_list,
                          unsigned long long examples, double eps)
{
    char path[4096], v[256], why[2 * SS_FS_PATH_MAX + 64];
    const char *r0 = per[lead];
    struct ss_fs_tmp out;
    snprintf(path, sizeof path, "%s/result.json", a->run_dir);
    FILE *f = NULL;
    if (ss_fs_tmp_open(&out, path, 0, why, sizeof why) == 0 && !(f = ss_fs_tmp_stream(&out)))
        snprintf(why, sizeof why, "cannot write %s: %s", path, strerror(errno));
    if (!f) {
        fprintf(stderr, "shadow-ctl: report: %s\n", why);
        ss_fs_tmp_abort(&out);
        return 1;
    }
    fprintf(f, "{\"job\":\"%s\",\"sync_algorithm\":\"%s\",\"trainers\":%ld,", a->job, a->sync, n);
    fprintf(f, "\"output_model\":\"%s\",", s_str_field(r0, "output_model", v, sizeof v));
    static const char *const evals[] = {"eval_ne", "eval_auc", "eval_logloss", "eval_calibration",
                                        "best_epoch", "valid_ne", "valid_auc", "valid_logloss",
                                        "selected_on", "eval_scorings"};
    for (size_t i = 0; i < sizeof evals / sizeof evals[0]; i++)
        fprintf(f, "\"%s\":%s,", evals[i], s_field(r0, evals[i], v, sizeof v));
    if (a->resumed)  /* a number: checked by the caller */
        fprintf(f, "\"resumed\":true,\"resumed_from_examples\":%s,", a->resumed);
    else
        fprintf(f, "\"resumed\":false,");
    fprintf(f, "\"ps_restarts\":[%s],\"trainers_lost\":[%s],\"examples\":%llu,\"eps\":%.1f,"
            "\"wall_s\":%s,\"per_trainer\":[", restarts, lost_list, examples, eps, a->wall_s);
    for (long r = 0, k = 0; r < n; r++)
        if (!lost[r] && per[r])
            fprintf(f, "%s%s", k++ ? "," : "", per[r]);
    fprintf(f, "]}\n");
    if (ss_fs_tmp_commit(&out, why, sizeof why) != 0) {
        fprintf(stderr, "shadow-ctl: report: %s\n", why);
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
static void s_print_selection(const char *r0)
{
    char v[256], on[64];
    s_str_field(r0, "selected_on", on, sizeof on);
    if (strcmp(s_field(r0, "valid_ne", v, sizeof v), "null") != 0) {
        printf("   valid NE          %s   (%s: chose the model kept; the eval figures "
               "above are the test)\n", s_num_field(r0, "valid_ne", "%.6f", v, sizeof v),
               strcmp(on, "null") ? on : "validation split");
        printf("   valid AUC         %s\n", s_num_field(r0, "valid_auc", "%.6f", v, sizeof v));
    } else if (!strcmp(on, "data.eval")) {
        printf("   selection         on data.eval (no validation split): the eval NE is "
               "biased low; set data.valid or data.valid_fraction\n");
    }
}

static void s_print_eval(const char *r0)
{
    char v[256], e[64], b[64];
    if (!strcmp(s_field(r0, "eval_ne", v, sizeof v), "null"))
        return;
    printf("   eval NE           %s   (1.0 = predicting the base rate; lower is better)\n",
           s_num_field(r0, "eval_ne", "%.6f", v, sizeof v));
    printf("   eval AUC          %s\n", s_num_field(r0, "eval_auc", "%.6f", v, sizeof v));
    printf("   eval logloss      %s\n", s_num_field(r0, "eval_logloss", "%.5f", v, sizeof v));
    printf("   calibration       %s\n",
           s_num_field(r0, "eval_calibration", "%.4f", v, sizeof v));
    if (strtol(s_field(r0, "evals", v, sizeof v), NULL, 10) > 1)
        printf("   best epoch        %s of %s (the model kept; %s evaluations)\n",
               s_field(r0, "best_epoch", b, sizeof b), s_field(r0, "epochs_done", e, sizeof e),
               v);
    s_print_selection(r0);
}

/* The summary of a run that only scored a saved model (--eval-only,
 * --predict): no training figures, no "output model" (nothing was saved). */
static void s_print_scored(const struct report_args *a, const char *r0)
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

static void s_print_summary(const struct report_args *a, char **per, long n, const char *lost,
                            const int *lost_exit, long lead, int n_restarts, int n_lost, unsigned long long examples,
                            double eps)
{
    char kind[64], v[4][64], what[128];
    s_str_field(per[lead], "output_model", kind, sizeof kind);
    printf("\n== ShadowSync job finished in %s s (%ld trainer(s), sync %s)\n", a->wall_s, n,
           a->sync);
    printf("   examples trained  %llu\n   examples/s (sum)  %.1f\n", examples, eps);
    if (a->resumed)
        printf("   resumed           from a job checkpoint at %s examples (counted above)\n",
               a->resumed);
    printf("   output model      %s, saved in %s/model\n",
           s_output_what(kind, lead, what, sizeof what), a->run_dir);
    s_print_eval(per[lead]);
    for (long r = 0; r < n; r++) {
        if (lost[r] || !per[r])
            continue;
        printf("   trainer %ld: %s examples, %s ex/s, train NE %s", r,
               s_field(per[r], "examples", v[0], sizeof v[0]),
               s_num_field(per[r], "eps", "%.1f", v[1], sizeof v[1]),
               s_num_field(per[r], "train_ne", "%.6f", v[2], sizeof v[2]));
        if (!strcmp(kind, "replica") &&
            strcmp(s_num_field(per[r], "eval_ne", "%.6f", v[3], 64), "null"))
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
 * through the sync rule; 0 when there is no row. */
static unsigned long long s_lost_examples(const char *run_dir, long rank)
{
    char path[4096], line[8192], v[64];
    unsigned long long n = 0;
    snprintf(path, sizeof path, "%s/metrics-trainer-%ld.jsonl", run_dir, rank);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "\"examples\":"))
            n = strtoull(s_field(line, "examples", v, sizeof v), NULL, 10);
    fclose(f);
    return n;
}

int ctl_report_main(int argc, char **argv)
{
    struct report_args a;
    char *per[CTL_MAX_TRAINERS] = {0}, v[64], lost[CTL_MAX_TRAINERS] = {0};
    int lost_exit[CTL_MAX_TRAINERS] = {0};
    int rc = 1, n_restarts = 0, n_lost = 0;
    char *restarts = NULL, *lost_list = NULL;
    if (s_parse_report_args(argc, argv, &a) != 0) {
        fprintf(stderr, "shadow-ctl: usage: report RUN_DIR [--job NAME] [--sync ALGO] "
                "[--trainers N] [--wall-s S] [--restarts FILE] [--lost FILE] [--logs DIR] "
                "[--resumed-from N] [--scored MODEL_DIR] [--quiet]\n");
        return 2;
    }
    lost_list = s_jsonl_list(a.lost, &n_lost);
    s_mark_lost(lost_list, lost, lost_exit);
    long n = s_load_results(&a, per, lost);
    if (n < 0)
        goto out;
    long lead = s_lead(per, n, lost);
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
    for (long r = 0; r < n; r++) {
        if (lost[r] || !per[r])
            continue;
        examples += strtoull(s_field(per[r], "examples", v, sizeof v), NULL, 10);
        eps += strtod(s_field(per[r], "eps", v, sizeof v), NULL);
    }
    restarts = s_jsonl_list(a.restarts, &n_restarts);
    rc = s_write_result(&a, per, n, lost, lead, restarts, lost_list, examples, eps);
    if (rc == 0 && !a.quiet && a.scored)
        s_print_scored(&a, per[lead]);
    else if (rc == 0 && !a.quiet)
        s_print_summary(&a, per, n, lost, lost_exit, lead, n_restarts, n_lost, examples, eps);
    if (rc == 0 && !a.quiet && !a.scored && by_lost)
        printf("   (examples trained include %llu by the lost trainer(s), to their last progress "
               "line)\n", by_lost);
out:
    ss_free(restarts);
    ss_free(lost_list);
    for (long r = 0; r < CTL_MAX_TRAINERS; r++)
        ss_free(per[r]);
    return rc;
}
