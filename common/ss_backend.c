/* ss_backend.c - the --exec modes' command lines (see ss_backend.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "ss_backend.h"
#include "ss_mem.h"

/* A growing NULL-terminated array of owned strings. */
struct words {
    char **v;
    size_t n, cap;
};

static void s_add(struct words *w, const char *s)
{
    if (w->n + 2 > w->cap) {
        w->cap = w->cap ? 2 * w->cap : 16;
        w->v = ss_realloc(w->v, w->cap * sizeof *w->v);
    }
    w->v[w->n++] = ss_strdup(s);
    w->v[w->n] = NULL;
}

/* "--KEY=%s" with a */
static void s_addf(struct words *w, const char *fmt, const char *a)
{
    char buf[1024];
    snprintf(buf, sizeof buf, fmt, a);
    s_add(w, buf);
}

/* A growing string. */
struct text {
    char *s;
    size_t n, cap;
};

static void s_cat(struct text *t, const char *s)
{
    size_t l = strlen(s);
    if (t->n + l + 1 > t->cap) {
        while (t->n + l + 1 > t->cap)
            t->cap = t->cap ? 2 * t->cap : 256;
        t->s = ss_realloc(t->s, t->cap);
    }
    memcpy(t->s + t->n, s, l + 1);
    t->n += l;
}

/* word quoted for sh (and bash): 'word', each ' as '\'' */
static void s_quote(struct text *t, const char *word)
{
    char c[2] = {0, 0};
    s_cat(t, "'");
    for (const char *p = word; *p; p++) {
        if (*p == '\'') {
            s_cat(t, "'\\''");
            continue;
        }
        c[0] = *p;
        s_cat(t, c);
    }
    s_cat(t, "'");
}

/* argv as one sh command line of quoted words */
static void s_quote_argv(struct text *t, char *const *argv)
{
    for (size_t i = 0; argv[i]; i++) {
        if (i)
            s_cat(t, " ");
        s_quote(t, argv[i]);
    }
}

/* The remote TERM wrapper (ss_backend.h): argv runs in the background with
 * /dev/null as its input; a watcher reads the wrapper's input (fd 3) with
 * the builtin, passes "TERM" lines on as SIGTERM, and stops the program when
 * the input ends; the watcher is reaped before the exit, so that no process
 * is left behind (under srun a leftover, even a zombie, kept the step alive
 * for 1-3 s more: slurmstepd waits for its process group). */
static char *s_term_wrapper(const char *cwd, char *const *argv)
{
    struct text t = {0};
    s_cat(&t, "cd ");
    s_quote(&t, cwd && *cwd ? cwd : "/");
    s_cat(&t, " 2>/dev/null || cd /; exec 3<&0; ");
    s_quote_argv(&t, argv);
    s_cat(&t, " </dev/null & p=$!; "
          "{ while read -r l <&3; do [ \"$l\" = TERM ] && kill -TERM $p; done; "
          "kill -TERM $p; sleep 2; kill -KILL $p; } >/dev/null 2>&1 & w=$!; "
          "exec 3<&-; wait $p; rc=$?; kill $w 2>/dev/null; wait $w; exit $rc");
    return t.s;
}

/* The command that the remote modes hand their host: the wrapper (RUN) or
 * the quoted words (PIPE). */
static char *s_remote_cmd(const struct ss_backend_where *w, enum ss_backend_mode mode,
                          char *const *argv)
{
    struct text t = {0};
    if (mode == SS_BACKEND_RUN)
        return s_term_wrapper(w->cwd, argv);
    s_quote_argv(&t, argv);
    return t.s;
}

static void s_local(const struct ss_backend_where *w, enum ss_backend_mode mode,
                    char *const *argv, struct words *out)
{
    (void)w;
    (void)mode;
    for (size_t i = 0; argv[i]; i++)
        s_add(out, argv[i]);
}

static void s_ssh(const struct ss_backend_where *w, enum ss_backend_mode mode,
                  char *const *argv, struct words *out)
{
    static const char *const ours[] = {"-T", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=5",
                                       "-o", "ServerAliveCountMax=3", "-o", "ConnectTimeout=10"};
    char *cmd = s_remote_cmd(w, mode, argv);
    s_add(out, "ssh");
    for (size_t i = 0; i < w->n_ssh_opts; i++)
        s_add(out, w->ssh_opts[i]);
    for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
        s_add(out, ours[i]);
    s_add(out, w->target ? w->target : "");
    s_add(out, cmd);
    ss_free(cmd);
}

/* --quiet: no srun chatter in the logs; a watched step ends the others'
 * when it fails (--kill-on-bad-exit); bash: the wrapper is bash's too */
static void s_srun(const struct ss_backend_where *w, enum ss_backend_mode mode,
                   char *const *argv, struct words *out)
{
    char *cmd = s_remote_cmd(w, mode, argv);
    const char *t = w->target ? w->target : "";
    char cpus[32];
    s_add(out, "srun");
    s_add(out, "--overlap");
    s_add(out, "--nodes=1");
    s_add(out, "--ntasks=1");
    s_addf(out, "--nodelist=%s", t);
    snprintf(cpus, sizeof cpus, "--cpus-per-task=%d", w->cpus > 0 ? w->cpus : 1);
    s_add(out, cpus);
    if (mode == SS_BACKEND_RUN)
        s_add(out, "--kill-on-bad-exit=1");
    s_add(out, "--quiet");
    s_addf(out, "--job-name=%s", w->step_name ? w->step_name : "shadow-launch");
    s_add(out, "--");
    s_add(out, "bash");
    s_add(out, "-c");
    s_add(out, cmd);
    ss_free(cmd);
}

static const struct row {
    struct ss_backend b;
    void (*build)(const struct ss_backend_where *, enum ss_backend_mode, char *const *,
                  struct words *);
} s_rows[] = {
    {{"local", 0, -1, 2000, NULL}, s_local},
    {{"ssh", 1, 255, 2000, "ssh failed (ssh -o BatchMode=yes %s must log in without a password)"},
     s_ssh},
    {{"srun", 1, -1, 3000, NULL}, s_srun},
};

const struct ss_backend *ss_backend_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof s_rows / sizeof s_rows[0]; i++)
        if (strcmp(name, s_rows[i].b.name) == 0)
            return &s_rows[i].b;
    return NULL;
}

char **ss_backend_argv(const struct ss_backend *b, const struct ss_backend_where *w,
                       enum ss_backend_mode mode, char *const *argv)
{
    const struct row *r = (const struct row *)b;  /* b is the first member of its row */
    struct words out = {0};
    r->build(w, mode, argv, &out);
    return out.v;
}

void ss_backend_argv_free(char ***argv_p)
{
    if (!argv_p || !*argv_p)
        return;
    for (char **p = *argv_p; *p; p++)
        ss_free(*p);
    ss_free(*argv_p);
    *argv_p = NULL;
}

int ss_backend_slurm_cpus(const char *cpn, int *cpus, size_t max, size_t *n, char *err,
                          size_t err_len)
{
    const char *p = cpn;
    *n = 0;
    while (p && *p) {
        char *end;
        long c, times = 1;
        errno = 0;
        c = strtol(p, &end, 10);
        if (end == p || errno || c < 1 || c > 1000000)
            goto bad;
        if (strncmp(end, "(x", 2) == 0) {
            const char *q = end + 2;
            times = strtol(q, &end, 10);
            if (end == q || times < 1 || times > 100000 || *end != ')')
                goto bad;
            end++;
        }
        if (*end && *end != ',')
            goto bad;
        for (long i = 0; i < times; i++) {
            if (*n >= max)
                goto bad;
            cpus[(*n)++] = (int)c;
        }
        p = *end ? end + 1 : end;
    }
    return 0;
bad:
    snprintf(err, err_len, "SLURM_JOB_CPUS_PER_NODE '%s': want counts as N or N(xM), "
             "comma-separated (at most %zu nodes)", cpn ? cpn : "", max);
    return -1;
}

int ss_backend_exit_status(int wstatus)
{
    return WIFEXITED(wstatus)     ? WEXITSTATUS(wstatus)
           : WIFSIGNALED(wstatus) ? 128 + WTERMSIG(wstatus)
                                  : 1;
}
