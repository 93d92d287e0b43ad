/* ss_slurm.c - shadow-slurm's rules as pure functions (see ss_slurm.h).
 *
 * DESIGN: the texts are built in a growing buffer (s_buf); the quoting
 * follows bash's printf %q (backslashes, or $'...' for control characters)
 * so that the batch script and the --dry-run line read as they did when
 * shadow-slurm was a bash script. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_mem.h"
#include "ss_slurm.h"

/* A growing, always terminated string. */
struct s_buf {
    char *p;      /* the text (heap) */
    size_t len;   /* its length */
    size_t cap;   /* bytes allocated */
};

static void s_put(struct s_buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2 + 64;
        b->p = ss_realloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void s_puts(struct s_buf *b, const char *s)
{
    s_put(b, s, strlen(s));
}

static void s_putc(struct s_buf *b, char c)
{
    s_put(b, &c, 1);
}

static void __attribute__((format(printf, 2, 3))) s_printf(struct s_buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        s_put(b, small, (size_t)n);
        return;
    }
    char *big = ss_malloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    s_put(b, big, (size_t)n);
    ss_free(big);
}

/* The finished text (an empty one when nothing was written). */
static char *s_done(struct s_buf *b)
{
    return b->p ? b->p : ss_strdup("");
}

/* ---- quoting ---- */

/* 1 for the characters bash's printf %q puts a backslash before. */
static int s_special(unsigned char c)
{
    return c && strchr(" \t\n!\"$&'()*,;<>?[\\]^`{|}", c) != NULL;
}

/* 1 when word holds a byte that is not printable ASCII text (below 0x20,
 * or 0x7f): %q then writes $'...'. */
static int s_has_control(const char *word)
{
    for (const unsigned char *s = (const unsigned char *)word; *s; s++)
        if (*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

/* $'...' with C escapes: \n \t ..., \E for ESC, \\ and \', \ooo for other
 * control bytes. */
static void s_quote_ansi(struct s_buf *b, const char *word)
{
    static const char from[] = "\a\b\f\n\r\t\v\033\\'", to[] = "abfnrtvE\\'";
    s_puts(b, "$'");
    for (const unsigned char *s = (const unsigned char *)word; *s; s++) {
        const char *at = strchr(from, *s);
        if (at) {
            s_putc(b, '\\');
            s_putc(b, to[at - from]);
        } else if (*s < 0x20 || *s == 0x7f) {
            s_printf(b, "\\%03o", *s);
        } else {
            s_putc(b, (char)*s);
        }
    }
    s_putc(b, '\'');
}

char *ss_slurm_quote(const char *word)
{
    struct s_buf b = {0};
    if (!*word)
        return ss_strdup("''");
    if (s_has_control(word)) {
        s_quote_ansi(&b, word);
        return s_done(&b);
    }
    for (const char *s = word; *s; s++) {
        int tilde = *s == '~' && (s == word || s[-1] == ':' || s[-1] == '=');
        if (s_special((unsigned char)*s) || (*s == '#' && s == word) || tilde)
            s_putc(&b, '\\');
        s_putc(&b, *s);
    }
    return s_done(&b);
}

/* Append word quoted. */
static void s_put_quoted(struct s_buf *b, const char *word)
{
    char *q = ss_slurm_quote(word);
    s_puts(b, q);
    ss_free(q);
}

/* ---- the command line ---- */

/* Append v to the array *arr of *n entries. */
static void s_push(const char ***arr, size_t *n, const char *v)
{
    *arr = ss_realloc(*arr, (*n + 1) * sizeof **arr);
    (*arr)[(*n)++] = v;
}

static int s_fail(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int s_fail(char *err, size_t err_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    return -1;
}

/* 1 when text is a whole number from 0 to max (decimal digits only). */
static int s_count(const char *text, unsigned long max, unsigned long *out)
{
    unsigned long v = 0;
    if (!*text)
        return 0;
    for (const char *s = text; *s; s++) {
        if (*s < '0' || *s > '9' || v > (max - (unsigned long)(*s - '0')) / 10)
            return 0;
        v = v * 10 + (unsigned long)(*s - '0');
    }
    *out = v;
    return 1;
}

/* The leading --sbatch and --signal-before S. Returns the index of the
 * first other argument, or -1 with err. */
static int s_parse_lead(struct ss_slurm_args *a, int argc, char **argv, char *err, size_t len)
{
    int i = 0, signal_set = 0;
    unsigned long s;
    a->signal_before = SS_SLURM_SIGNAL_BEFORE;
    while (i < argc) {
        if (!strcmp(argv[i], "--sbatch")) {
            a->sbatch = 1;
            i++;
        } else if (!strcmp(argv[i], "--signal-before")) {
            if (i + 1 >= argc)
                return s_fail(err, len, "--signal-before needs a count of seconds");
            if (!s_count(argv[i + 1], 65535, &s))
                return s_fail(err, len, "--signal-before %s: want whole seconds, 0..65535 "
                              "(0: no early signal)", argv[i + 1]);
            a->signal_before = (int)s;
            signal_set = 1;
            i += 2;
        } else {
            break;
        }
    }
    if (signal_set && !a->sbatch)
        return s_fail(err, len, "--signal-before goes with --sbatch");
    return i;
}

/* --resume RUN_DIR [--quiet] [--bin DIR]: argv[0] is --resume. A broken
 * rule goes to a->resume_err, said once the run directory is checked. */
static int s_parse_resume(struct ss_slurm_args *a, int argc, char **argv, char *err, size_t len)
{
    static const char only[] = "--resume takes only --quiet and --bin besides the run directory";
    if (argc < 2)
        return s_fail(err, len, "--resume needs a run directory");
    a->resume = argv[1];
    a->job = "-";
    for (int i = 2; i < argc && !a->resume_err; i++) {
        const char *v = argv[i], *prev = argv[i - 1];
        if (!strcmp(v, "--quiet") || !strcmp(v, "--bin"))
            ;
        else if (!strncmp(v, "--bin=", 6))
            a->bin = v + 6;
        else if (!strcmp(v, "--dry-run") && a->sbatch)
            a->dry_run = 1;
        else if (i > 2 && !strcmp(prev, "--bin") && strcmp(v, "--dry-run"))
            a->bin = v;
        else
            a->resume_err = only;
    }
    for (int i = 2; i < argc; i++)
        s_push(&a->pass, &a->n_pass, argv[i]);
    return 0;
}

/* The options that go to shadow-launch with a value. */
static int s_launch_valued(const char *opt)
{
    static const char *const v[] = {"--eval-only", "--predict", "--out",
                                    "--base-port", "--remote-bin", "--remote-run-dir"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!strcmp(opt, v[i]))
            return 1;
    return 0;
}

/* 1 for --hosts, --exec and --ssh-opts (with or without =VALUE). */
static int s_refused(const char *opt)
{
    static const char *const v[] = {"--hosts", "--exec", "--ssh-opts"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        size_t n = strlen(v[i]);
        if (!strncmp(opt, v[i], n) && (opt[n] == '\0' || opt[n] == '='))
            return 1;
    }
    return 0;
}

/* One option of a job's command line at argv[0]: returns how many
 * arguments it took, 0 to stop (help, version), or -1 with err. */
static int s_parse_option(struct ss_slurm_args *a, int argc, char **argv, char *err, size_t len)
{
    const char *o = argv[0];
    int has = argc >= 2;
    if (!strcmp(o, "--set") || !strcmp(o, "--bin") || !strcmp(o, "--ps-nodes")) {
        if (!has)
            return s_fail(err, len, "%s needs %s", o, !strcmp(o, "--set") ? "KEY=VALUE"
                          : !strcmp(o, "--bin") ? "a folder" : "a count");
        if (!strcmp(o, "--set"))
            s_push(&a->sets, &a->n_sets, argv[1]);
        else if (!strcmp(o, "--bin"))
            a->bin = argv[1];
        else
            a->ps_nodes = argv[1];
        return 2;
    }
    if (s_launch_valued(o)) {
        if (!has)
            return s_fail(err, len, "%s needs a value", o);
        s_push(&a->pass, &a->n_pass, o);
        s_push(&a->pass, &a->n_pass, argv[1]);
        if (!strcmp(o, "--out") && !strcmp(argv[1], "-"))
            a->note_stderr = 1;  /* stdout carries the predictions alone */
        return 2;
    }
    if (s_refused(o))
        return s_fail(err, len, "%s: shadow-slurm writes the hosts file from the allocation "
                      "and runs every process with srun", o);
    a->help = !strcmp(o, "-h") || !strcmp(o, "--help");
    a->version = !strcmp(o, "--version");
    if (a->help || a->version)
        return 0;
    if (!strncmp(o, "--set=", 6))
        s_push(&a->sets, &a->n_sets, o + 6);
    else if (!strcmp(o, "--dry-run"))
        a->dry_run = 1;
    else
        s_push(&a->pass, &a->n_pass, o);
    return 1;
}

int ss_slurm_parse(struct ss_slurm_args *a, int argc, char **argv, char *err, size_t err_len)
{
    int i = s_parse_lead(a, argc, argv, err, err_len);
    if (i < 0)
        return -1;
    argv += i;
    argc -= i;
    if (a->sbatch) {
        for (i = 0; i < argc && strcmp(argv[i], "--"); i++)
            ;
        for (int j = i + 1; j < argc; j++)
            s_push(&a->sbatch_args, &a->n_sbatch_args, argv[j]);
        argc = i;
        for (int j = 0; j < argc; j++)
            s_push(&a->again, &a->n_again, argv[j]);
    }
    if (argc > 0 && !strcmp(argv[0], "--resume"))
        return s_parse_resume(a, argc, argv, err, err_len);
    for (i = 0; i < argc;) {
        int took;
        if (argv[i][0] == '-') {
            took = s_parse_option(a, argc - i, argv + i, err, err_len);
            if (took <= 0)
                return took;
        } else {
            if (a->job && *a->job)
                return s_fail(err, err_len, "one job file only (%s, %s)", a->job, argv[i]);
            a->job = argv[i];
            took = 1;
        }
        i += took;
    }
    a->usage_error = !a->job || !*a->job;
    return 0;
}

void ss_slurm_args_fini(struct ss_slurm_args *a)
{
    ss_free(a->sets);
    ss_free(a->pass);
    ss_free(a->again);
    ss_free(a->sbatch_args);
    a->sets = a->pass = a->again = a->sbatch_args = NULL;
    a->n_sets = a->n_pass = a->n_again = a->n_sbatch_args = 0;
}

/* ---- the allocation's nodes ---- */

int ss_slurm_ps_nodes(const char *text, size_t n_nodes, size_t *k, char *err, size_t err_len)
{
    unsigned long v;
    if (!s_count(text, 1000000, &v) || v < 1 || v >= n_nodes)
        return s_fail(err, err_len, "--ps-nodes %s: want 1..%ld (the allocation has %zu "
                      "node(s); the rest run the trainers)", text, (long)n_nodes - 1, n_nodes);
    *k = v;
    return 0;
}

const char *ss_slurm_roles(size_t i, size_t n_nodes, size_t ps_nodes)
{
    if (!ps_nodes)
        return "all";
    return i + ps_nodes >= n_nodes ? "ps" : "trainer";
}

char *ss_slurm_hosts_ps_nodes(const char *hosts_text)
{
    static const char tag[] = "# ps-nodes ";
    struct s_buf b = {0};
    for (const char *l = hosts_text; *l;) {
        size_t n = strcspn(l, "\n");
        if (n >= sizeof tag - 1 && !strncmp(l, tag, sizeof tag - 1)) {
            if (b.len)
                s_putc(&b, '\n');
            s_put(&b, l + sizeof tag - 1, n - (sizeof tag - 1));
        }
        l += n + (l[n] == '\n');
    }
    return s_done(&b);
}

char *ss_slurm_node_addr(const char *line)
{
    static const char key[] = "NodeAddr=";
    for (const char *w = line; *w;) {
        size_t n = strcspn(w, " \n");
        if (n >= sizeof key - 1 && !strncmp(w, key, sizeof key - 1)) {
            struct s_buf b = {0};
            s_put(&b, w + sizeof key - 1, n - (sizeof key - 1));
            return s_done(&b);
        }
        w += n + (w[n] != '\0');
    }
    return ss_strdup("");
}

char *ss_slurm_hosts_text(const char *job_id, const char *ps_nodes_text, size_t ps_nodes,
                          const char *const *nodes, const char *const *addrs, size_t n_nodes)
{
    struct s_buf b = {0};
    s_printf(&b, "# written by shadow-slurm for Slurm job %s: NODE ROLES addr=IP\n", job_id);
    if (ps_nodes_text)
        s_printf(&b, "# ps-nodes %s\n", ps_nodes_text);
    for (size_t i = 0; i < n_nodes; i++)
        s_printf(&b, "%s %s addr=%s\n", nodes[i], ss_slurm_roles(i, n_nodes, ps_nodes),
                 addrs[i]);
    return s_done(&b);
}

/* ---- the texts ---- */

/* 0 when value (what, for the message) can stand in an #SBATCH line
 * (line: the line's option); else -1 after the message. */
static int s_line_safe(const char *what, const char *value, const char *line, char *err,
                       size_t err_len)
{
    if (!s_has_control(value))
        return 0;
    char *q = ss_slurm_quote(value);
    s_fail(err, err_len, "%s %s holds a newline or another control character: it would break "
           "the line \"#SBATCH %s\" of the batch script (choose one without)", what, q, line);
    ss_free(q);
    return -1;
}

/* An "#SBATCH OPT=PRE""VALUE""POST" line. sbatch splits these lines into
 * words itself: a blank ends a word, '#' starts a comment, quotes group,
 * a backslash escapes the next byte (Slurm 22.05, checked with sbatch -vv).
 * So a value holding one of " \"'\\#" is written in double quotes with '"'
 * and '\\' escaped, and any other as it is. */
static void s_put_directive(struct s_buf *b, const char *opt, const char *pre, const char *value,
                            const char *post)
{
    const char *parts[3] = {pre, value, post};
    int quote = 0;
    for (int i = 0; i < 3; i++)
        quote |= parts[i][strcspn(parts[i], " \"'\\#")] != '\0';
    s_printf(b, "#SBATCH %s=%s", opt, quote ? "\"" : "");
    for (int i = 0; i < 3; i++)
        for (const char *c = parts[i]; *c; c++) {
            if (quote && (*c == '"' || *c == '\\'))
                s_putc(b, '\\');
            s_putc(b, *c);
        }
    s_puts(b, quote ? "\"\n" : "\n");
}

/* run_dir as --output's file name pattern must give it (caller frees):
 * sbatch replaces "%j" and the like in it and reads "%%" as '%', so each '%'
 * is doubled. A name with a backslash is taken as it is: sbatch then
 * replaces nothing in it (the file is "slurm-%j.out", literally). */
static char *s_output_dir(const char *run_dir)
{
    size_t n = strlen(run_dir), k = 0;
    char *out = ss_malloc(2 * n + 1);
    int plain = strchr(run_dir, '\\') != NULL;
    for (size_t i = 0; i < n; i++) {
        out[k++] = run_dir[i];
        if (run_dir[i] == '%' && !plain)
            out[k++] = '%';
    }
    out[k] = '\0';
    return out;
}

char *ss_slurm_sbatch_text(const char *name, const char *run_dir, int signal_before,
                           const char *cwd, const char *self, const char *const *args,
                           size_t n_args, char *err, size_t err_len)
{
    ss_assert(name && run_dir && err);
    if (s_line_safe("job.name", name, "--job-name=shadowsync-NAME", err, err_len) != 0
        || s_line_safe("the run directory", run_dir, "--output=RUN_DIR/slurm-%j.out", err,
                       err_len) != 0)
        return NULL;
    struct s_buf b = {0};
    s_puts(&b, "#!/usr/bin/env bash\n"
           "# written by shadow-slurm --sbatch: runs the job on the nodes of this allocation\n");
    s_put_directive(&b, "--job-name", "shadowsync-", name, "");
    char *out_dir = s_output_dir(run_dir);
    s_put_directive(&b, "--output", "", out_dir, "/slurm-%j.out");
    ss_free(out_dir);
    if (signal_before > 0) {
        s_printf(&b, "# SIGTERM to this script (it becomes shadow-launch: exec below) %d s\n",
                 signal_before);
        s_puts(&b, "# before the time limit: the job stops with a job checkpoint (exit 75)\n");
        s_printf(&b, "#SBATCH --signal=B:TERM@%d\n", signal_before);
    }
    s_puts(&b, "cd ");
    s_put_quoted(&b, cwd);
    s_puts(&b, " || exit 2\nexec ");
    s_put_quoted(&b, self);
    for (size_t i = 0; i < n_args; i++) {
        if (!strcmp(args[i], "--dry-run"))
            continue;
        s_putc(&b, ' ');
        s_put_quoted(&b, args[i]);
    }
    s_putc(&b, '\n');
    return s_done(&b);
}

char **ss_slurm_launch_argv(const char *launcher, const struct ss_slurm_args *a,
                            const char *bin, const char *hosts_file, const char *resume_dir)
{
    size_t n = 0, max = 10 + 2 * a->n_sets + a->n_pass;
    const char **v = ss_calloc(max, sizeof *v);
    v[n++] = launcher;
    if (resume_dir) {
        v[n++] = "--resume";
        v[n++] = resume_dir;
    } else {
        v[n++] = a->job;
        for (size_t i = 0; i < a->n_sets; i++) {
            v[n++] = "--set";
            v[n++] = a->sets[i];
        }
        v[n++] = "--bin";
        v[n++] = bin;
        v[n++] = "--hosts";
        v[n++] = hosts_file;
        v[n++] = "--exec";
        v[n++] = "srun";
    }
    for (size_t i = 0; i < a->n_pass; i++)
        v[n++] = a->pass[i];
    v[n] = NULL;
    return (char **)v;
}
