/* ctl_plan.c - shadow-ctl plan (see ctl_plan.h): the job file's counts and
 * transport, the hosts file, the command line's port choice, into one
 * ss_plan, printed.
 *
 * The rules that decide ipc:// (a job wholly on this machine, on free
 * ports, cluster.transport auto, a run directory short enough for a Unix
 * socket path) and which sync PSs need a host (the sync rules' table,
 * common/ss_sync.h) live here and in ss_plan, not in the launcher. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl_launch.h"
#include "ctl_plan.h"
#include "ss_assert.h"
#include "ss_backend.h"
#include "ss_cfg.h"
#include "ss_err.h"
#include "ss_mem.h"
#include "ss_path.h"
#include "ss_plan.h"
#include "ss_sync.h"
#include "ss_version.h"

#define S_MAX_SETS 256          /* most --set options */
#define S_MAX_PORT_ARGS 4096    /* most --ports options */
#define S_IPC_PATH_MAX 107      /* longest Unix socket path (sun_path, less its NUL) */
#define S_IPC_NAME_MAX 9        /* "/e" + a shard + a ".thread" suffix: the launcher's margin */

/* The command line. */
struct plan_args {
    const char *job;                   /* the job file */
    const char *sets[S_MAX_SETS];      /* --set values */
    size_t n_sets;
    const char *hosts;                 /* --hosts FILE, or NULL */
    const char *exec;                  /* --exec: local, ssh or srun */
    int fixed;                         /* --fixed-ports */
    int complete;                      /* --complete: every endpoint must be known */
    unsigned base_port;                /* --base-port, or 0 */
    const char *ports[S_MAX_PORT_ARGS]; /* --ports H=P,P,... */
    size_t n_ports;
    int launch;                        /* --launch: the launcher's config lines too */
    int eval_only;                     /* --eval-only: only trainer 0 runs (metrics ports) */
    const char *check_data;            /* --check-data all|eval, or NULL */
};

static int s_usage(void)
{
    fprintf(stderr, "shadow-ctl: usage: plan JOB.yaml [--set KEY=VALUE]... [--hosts FILE] "
            "[--exec local|ssh|srun] [--fixed-ports] [--base-port P] [--ports H=P,P,...]... "
            "[--complete] [--launch] [--check-data all|eval]\n");
    return 2;
}

/* Parse argv into a. Returns 0, or 2 after a message. */
static int s_parse_args(int argc, char **argv, struct plan_args *a)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"set", required_argument, 0, 's'},
        {"hosts", required_argument, 0, 'H'},  {"exec", required_argument, 0, 'e'},
        {"fixed-ports", no_argument, 0, 'f'},  {"base-port", required_argument, 0, 'b'},
        {"ports", required_argument, 0, 'p'},  {"complete", no_argument, 0, 'C'},
        {"launch", no_argument, 0, 'L'},       {"check-data", required_argument, 0, 'D'},
        {"eval-only", no_argument, 0, 'E'},
        {0, 0, 0, 0}};
    int c;
    char *end;
    a->exec = "local";
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
        if (c == 'c')
            a->job = optarg;
        else if (c == 's' && a->n_sets < S_MAX_SETS)
            a->sets[a->n_sets++] = optarg;
        else if (c == 'H')
            a->hosts = optarg;
        else if (c == 'e')
            a->exec = optarg;
        else if (c == 'f')
            a->fixed = 1;
        else if (c == 'C')
            a->complete = 1;
        else if (c == 'L')
            a->launch = 1;
        else if (c == 'E')
            a->eval_only = 1;
        else if (c == 'D' && (!strcmp(optarg, "all") || !strcmp(optarg, "eval")))
            a->check_data = optarg;
        else if (c == 'b') {
            errno = 0;
            long p = strtol(optarg, &end, 10);
            if (*end || errno || p < 1024 || p > 65000) {
                fprintf(stderr, "shadow-ctl: plan: --base-port %s: want a port in "
                        "1024..65000\n", optarg);
                return 2;
            }
            a->base_port = (unsigned)p;
        } else if (c == 'p' && a->n_ports < S_MAX_PORT_ARGS)
            a->ports[a->n_ports++] = optarg;
        else
            return s_usage();
    }
    if (optind < argc && !a->job)
        a->job = argv[optind++];
    if (optind != argc || !a->job)
        return s_usage();
    if (!ss_backend_find(a->exec)) {  /* the modes' table */
        fprintf(stderr, "shadow-ctl: plan: --exec %s: want local, ssh or srun\n", a->exec);
        return 2;
    }
    return 0;
}

/* 1 when a sync rule of cfg uses the sync PSs (the sync table, ss_sync.h). */
static int s_needs_sync_ps(const struct ss_cfg *cfg)
{
    struct ss_sync_traits t;
    ss_sync_job_traits(cfg, &t);
    return t.sync_ps;
}

/* The job's run directory as an absolute path into out (a relative
 * job.run_dir is relative to the current folder, named as the shell that
 * started us names it, $PWD, when that is the same folder). Returns 0, or -1
 * when the current folder cannot be named. */
static int s_run_dir(const struct ss_cfg *cfg, char *out, size_t len)
{
    char cwd[4096];
    if (cfg->run_dir[0] == '/') {
        snprintf(out, len, "%s", cfg->run_dir);
        return 0;
    }
    if (ss_path_cwd(cwd, sizeof cwd) != 0)
        return -1;
    snprintf(out, len, "%s/%s", cwd, cfg->run_dir);
    return 0;
}

/* The ipc folder of a local job on free ports (RUN_DIR/ipc), into out, or
 * "" when it takes tcp (a note says why when the path is too long). */
static void s_ipc_dir(const struct ss_cfg *cfg, const struct plan_args *a, char *out,
                      size_t len)
{
    char run_dir[4096];
    out[0] = '\0';
    if (a->fixed || a->hosts || strcmp(a->exec, "local") ||
        cfg->cluster_transport != SS_TRANSPORT_AUTO)
        return;
    if (s_run_dir(cfg, run_dir, sizeof run_dir) == 0)
        snprintf(out, len, "%s/ipc", run_dir);
    if (out[0] && strlen(out) + S_IPC_NAME_MAX <= S_IPC_PATH_MAX)
        return;
    if (out[0])
        fprintf(stderr, "shadow-ctl: plan: note: %s is too long for ipc:// sockets (107 bytes): "
                "using tcp\n", out);
    out[0] = '\0';
}

/* --ports H=P,P,...: the free ports found on host H. Returns 0, or 2. */
static int s_set_ports(ss_plan_t *plan, const char *arg)
{
    char *end;
    errno = 0;
    unsigned long h = strtoul(arg, &end, 10);
    if (end == arg || *end != '=' || errno || h >= ss_plan_n_hosts(plan))
        goto bad;
    size_t n = 0, cap = 16;
    unsigned *ports = ss_calloc(cap, sizeof *ports);
    for (const char *p = end + 1; *p;) {
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || v < 1 || v > 65535 || (*end && *end != ',')) {
            ss_free(ports);
            goto bad;
        }
        if (n == cap)
            ports = ss_realloc(ports, (cap *= 2) * sizeof *ports);
        ports[n++] = (unsigned)v;
        p = *end ? end + 1 : end;
    }
    ss_plan_set_ports(plan, h, ports, n);
    ss_free(ports);
    return 0;
bad:
    fprintf(stderr, "shadow-ctl: plan: --ports %s: want HOST_INDEX=PORT,PORT,... (a host of "
            "the plan, ports 1..65535)\n", arg);
    return 2;
}

/* Place the processes of cfg on plan's hosts. Returns 0 or 2. */
static int s_place(ss_plan_t *plan, const struct ss_cfg *cfg, const struct plan_args *a,
                   const char *ipc_dir)
{
    char err[1024];
    const char *name = a->hosts ? a->hosts : "this machine";
    const struct ss_str_list *lists[] = {&cfg->embedding_eps, &cfg->sync_eps, &cfg->trainer_eps};
    size_t n[SS_CLUSTER_N_ROLES];
    int rc;
    for (int r = 0; r < SS_CLUSTER_N_ROLES; r++)
        n[r] = lists[r]->n;
    if (a->fixed) {
        const char *ptrs[SS_CLUSTER_N_ROLES][SS_CFG_MAX_LIST];
        const char *const *eps[SS_CLUSTER_N_ROLES];
        for (int r = 0; r < SS_CLUSTER_N_ROLES; r++) {
            for (size_t k = 0; k < n[r]; k++)
                ptrs[r][k] = lists[r]->v[k];
            eps[r] = ptrs[r];
        }
        rc = ss_plan_place_fixed(plan, eps, n, a->hosts != NULL, name, err, sizeof err);
    } else {
        struct ss_plan_opts o = {.needs_sync_ps = s_needs_sync_ps(cfg),
                                 .ps_threads = (int)cfg->ps_threads,
                                 .admin = 1,
                                 .ipc_dir = ipc_dir[0] ? ipc_dir : NULL,
                                 .base_port = a->base_port};
        memcpy(o.n, n, sizeof n);
        rc = ss_plan_place(plan, &o, name, err, sizeof err);
    }
    if (rc) {
        fprintf(stderr, "shadow-ctl: plan: %s\n", err);
        return 2;
    }
    return 0;
}

/* --complete: every process has its endpoint (a host that found fewer free
 * ports than it needs leaves some unset). Returns 0, or 2 after a message. */
static int s_check_complete(const ss_plan_t *plan)
{
    for (int k = 0; k < SS_PLAN_N_KINDS; k++)
        for (size_t i = 0; i < ss_plan_count(plan, k); i++) {
            if (ss_plan_endpoint(plan, k, i))
                continue;
            const struct ss_plan_host *h = ss_plan_host(plan, ss_plan_host_of(plan, k, i));
            fprintf(stderr, "shadow-ctl: plan: no endpoint for %s %zu: host %s needs %zu free "
                    "ports, %zu given (--ports)\n", ss_plan_kind_name(k), i, h->target,
                    h->n_ports, h->n_given);
            return 2;
        }
    return 0;
}

/* One "config KEY VALUE" line; a list's entries (one a line from
 * ss_cfg_get) joined with commas, so that a line holds one value. */
static void s_config_line(const char *key, const char *value)
{
    printf("config %s ", key);
    for (const char *c = value; *c; c++)
        putchar(*c == '\n' ? ',' : *c);
    putchar('\n');
}

/* The Prometheus port of every process (--launch, metrics.port > 0 and no
 * metrics.ports in the job): a free port found on its host after the plan's
 * own (issue 22: metrics.port + index was only assumed free), or with
 * --fixed-ports, --base-port or more processes than metrics.ports holds,
 * metrics.port + index (embedding PSs, sync PSs, trainers in order). A
 * process that does not run gets none: the sync PSs of a job whose sync
 * uses none, the trainers past 0 under --eval-only. */
struct metrics_plan {
    int mode;                            /* S_METRICS_NONE, _INDEX or _FREE */
    size_t n;                            /* processes */
    int kind[SS_CFG_MAX_LIST * 3];       /* role of each */
    size_t index[SS_CFG_MAX_LIST * 3];   /* its shard or rank */
    int runs[SS_CFG_MAX_LIST * 3];       /* 1: it runs in this launch */
    size_t extra[SS_PLAN_MAX_HOSTS];     /* free metrics ports each host must find */
    int printed;                         /* the ports below are known (printed) */
    unsigned port[SS_CFG_MAX_LIST * 3];  /* each one's port, 0: it does not run */
};
enum { S_METRICS_NONE, S_METRICS_INDEX, S_METRICS_FREE };

static void s_metrics_plan(const struct ss_cfg *cfg, const struct plan_args *a,
                           const ss_plan_t *plan, struct metrics_plan *m)
{
    size_t n_run[SS_CLUSTER_N_ROLES] = {ss_plan_count(plan, SS_CLUSTER_EMBEDDING),
                                        s_needs_sync_ps(cfg) ? ss_plan_count(plan, SS_CLUSTER_SYNC) : 0,
                                        a->eval_only ? 1 : ss_plan_count(plan, SS_CLUSTER_TRAINER)};
    memset(m, 0, sizeof *m);
    if (!a->launch || cfg->metrics_port == 0 || cfg->metrics_ports.n > 0)
        return;
    for (int r = 0; r < SS_CLUSTER_N_ROLES; r++)
        for (size_t k = 0; k < ss_plan_count(plan, r); k++, m->n++) {
            m->kind[m->n] = r;
            m->index[m->n] = k;
            m->runs[m->n] = k < n_run[r];
        }
    m->mode = S_METRICS_INDEX;
    if (a->fixed || a->base_port)
        return;
    if (m->n > SS_CFG_MAX_LIST) {
        fprintf(stderr, "shadow-ctl: plan: note: %zu processes, more than metrics.ports holds "
                "(%d): metrics.port + index as configured, not free ports\n", m->n,
                SS_CFG_MAX_LIST);
        return;
    }
    m->mode = S_METRICS_FREE;
    for (size_t i = 0; i < m->n; i++)
        m->extra[ss_plan_host_of(plan, m->kind[i], m->index[i])] += (size_t)m->runs[i];
}

/* Print each process's metrics port once they are known ("metrics ROLE K
 * PORT URL", the lines of RUN_DIR/metrics.ports; port 0 and URL "-": none),
 * then "config metrics_note TEXT", what the launcher says of them. Returns 0,
 * or 2 when a host found too few free ports. */
static int s_print_metrics(const ss_plan_t *plan, struct metrics_plan *m,
                           const struct ss_cfg *cfg)
{
    size_t used[SS_PLAN_MAX_HOSTS] = {0};
    char note[SS_CFG_MAX_LIST * 3 * 96], url[128];
    size_t k = 0;
    unsigned port[SS_CFG_MAX_LIST * 3];
    for (size_t i = 0; i < m->n; i++) {  /* every port known, or none printed */
        size_t h = ss_plan_host_of(plan, m->kind[i], m->index[i]);
        const struct ss_plan_host *ho = ss_plan_host(plan, h);
        port[i] = 0;
        if (!m->runs[i])
            continue;
        if (m->mode == S_METRICS_INDEX) {
            port[i] = (unsigned)cfg->metrics_port + (unsigned)i;
            continue;
        }
        if (ho->n_given == 0)
            return 0;  /* the preflight has not found them yet */
        if (ho->n_ports + used[h] >= ho->n_given) {
            fprintf(stderr, "shadow-ctl: plan: host %s: too few free ports for the metrics "
                    "endpoints\n", ho->target);
            return 2;
        }
        port[i] = ho->ports[ho->n_ports + used[h]++];
    }
    k = (size_t)snprintf(note, sizeof note, "metrics (%s; GET /metrics): ",
                         m->mode == S_METRICS_FREE ? "free ports" : "metrics.port + index");
    for (size_t i = 0; i < m->n; i++) {
        const struct ss_plan_host *ho =
            ss_plan_host(plan, ss_plan_host_of(plan, m->kind[i], m->index[i]));
        const char *role = ss_plan_kind_name(m->kind[i]);
        snprintf(url, sizeof url, ho->ipv6 ? "[%s]:%u" : "%s:%u", ho->addr, port[i]);
        if (port[i])
            printf("metrics %s %zu %u http://%s/metrics\n", role, m->index[i], port[i], url);
        else
            printf("metrics %s %zu 0 -\n", role, m->index[i]);
        k += (size_t)snprintf(note + k, sizeof note - k, "%s%s %zu ", i ? ", " : "", role,
                              m->index[i]);
        if (port[i])
            k += (size_t)snprintf(note + k, sizeof note - k, "%s", url);
        else if (m->kind[i] == SS_CLUSTER_SYNC)
            k += (size_t)snprintf(note + k, sizeof note - k, "none (sync %s runs no sync PS)",
                                  ss_sync_label(cfg, url, sizeof url));
        else
            k += (size_t)snprintf(note + k, sizeof note - k, "none (not run)");
        if (k >= sizeof note)
            k = sizeof note - 1;
    }
    s_config_line("metrics_note", note);
    printf("config metrics_free %d\n", m->mode == S_METRICS_FREE);
    memcpy(m->port, port, sizeof m->port);
    m->printed = 1;
    return 0;
}

/* Without CURVE any local process could send SHUTDOWN (issue 22): a local
 * job gets a secret of its own (the launcher writes RUN_DIR/admin.token),
 * for the handshake too unless the job names one. Returns 0: none, 1: the
 * admin secret, 2: the handshake's too. */
static int s_admin_token(const struct ss_cfg *cfg, const struct plan_args *a)
{
    if (strcmp(a->exec, "local") != 0 || cfg->security.curve || cfg->security.admin_token_file[0])
        return 0;
    return cfg->security.token_file[0] ? 1 : 2;
}

/* Append one entry of a YAML flow list to w (at *k, a comma before all but
 * the first): an IPv6 endpoint (tcp://[ADDR]:PORT) quoted, or its brackets
 * would read as a nested list. */
static void s_list_add(char *w, size_t len, size_t *k, int first, const char *e)
{
    int q = strchr(e, '[') != NULL;
    *k += (size_t)snprintf(w + *k, len - *k, "%s%s%s%s", first ? "" : ",", q ? "\"" : "", e,
                           q ? "\"" : "");
    if (*k >= len)
        *k = len - 1;
}

/* --launch, once every endpoint is known: the settings every process of the
 * launch gets on top of the job file, "set KEY=VALUE" lines: the endpoints
 * (the trainers' admin ones unless --eval-only, whose trainer binds none;
 * with --fixed-ports the job file's stand), the admin secret the launcher
 * writes (admin_token above) and the free metrics ports. */
static void s_print_sets(const ss_plan_t *plan, const struct ss_cfg *cfg,
                         const struct plan_args *a, const struct metrics_plan *m)
{
    static const char *const keys[SS_PLAN_N_KINDS] = {
        [SS_CLUSTER_EMBEDDING] = "cluster.embedding", [SS_CLUSTER_SYNC] = "cluster.sync",
        [SS_CLUSTER_TRAINER] = "cluster.trainers", [SS_PLAN_ADMIN] = "cluster.trainer_admin"};
    static char w[SS_CFG_MAX_LIST * 3 * 160];
    char dir[4096];
    for (int k = 0; k < SS_PLAN_N_KINDS; k++)
        for (size_t i = 0; i < ss_plan_count(plan, k); i++)
            if (!ss_plan_endpoint(plan, k, i))
                return;  /* the preflight has not found the ports yet */
    for (int kind = 0; kind < SS_PLAN_N_KINDS; kind++) {
        size_t n = ss_plan_count(plan, kind), k = 0;
        if (kind == SS_PLAN_ADMIN && (n == 0 || a->eval_only))
            continue;
        k = (size_t)snprintf(w, sizeof w, "%s=[", keys[kind]);
        for (size_t i = 0; i < n; i++)
            s_list_add(w, sizeof w, &k, i == 0, ss_plan_endpoint(plan, kind, i));
        printf("set %s]\n", w);
    }
    int token = s_admin_token(cfg, a);
    if (token && s_run_dir(cfg, dir, sizeof dir) == 0) {
        printf("set security.admin_token_file=%s/admin.token\n", dir);
        if (token == 2)
            printf("set security.token_file=%s/admin.token\n", dir);
    }
    if (m->mode == S_METRICS_FREE && m->printed && m->n > 0) {
        size_t k = (size_t)snprintf(w, sizeof w, "metrics.ports=[");
        for (size_t i = 0; i < m->n; i++)
            k += (size_t)snprintf(w + k, sizeof w - k, "%s%u", i ? "," : "", m->port[i]);
        printf("set %s]\n", w);
    }
}

/* Print the plan (see ctl_plan.h); extra: each host's metrics ports. */
static void s_print(const ss_plan_t *plan, int ipc, const size_t *extra)
{
    printf("transport %s\n", ipc ? "ipc" : "tcp");
    for (size_t h = 0; h < ss_plan_n_hosts(plan); h++) {
        const struct ss_plan_host *ho = ss_plan_host(plan, h);
        printf("host %zu %s %s %zu\n", h, ho->target, ho->addr, ho->n_ports + extra[h]);
    }
    for (int k = 0; k < SS_PLAN_N_KINDS; k++)
        for (size_t i = 0; i < ss_plan_count(plan, k); i++) {
            const char *ep = ss_plan_endpoint(plan, k, i);
            printf("%s %zu %zu %s\n", ss_plan_kind_name(k), i, ss_plan_host_of(plan, k, i),
                   ep ? ep : "-");
        }
}

/* --launch: the launcher's view of the job (see ctl_plan.h): keys as
 * ss_cfg_get() writes them, then what the launcher decides from them, decided
 * here. Returns 0, or 2 after a message. */
static int s_print_launch(const struct ss_cfg *cfg, const struct plan_args *a, int ipc)
{
    static const char *const keys[] = {
        "job.name", "cluster.embedding.count", "cluster.sync.count", "cluster.trainers.count",
        "job.max_ps_restarts", "job.allow_trainer_loss", "checkpoint.dir", "data.labels",
        "data.eval", "metrics.port"};
    char v[SS_CFG_MAX_LIST * SS_CFG_MAX_STR];
    struct ss_sync_traits t;
    if (s_run_dir(cfg, v, sizeof v) != 0) {
        fprintf(stderr, "shadow-ctl: plan: cannot name the current folder: %s\n",
                strerror(errno));
        return 2;
    }
    s_config_line("run_dir", v);
    /* what shadow-ps --version prints on every host of the job (the preflight's check) */
    printf("config version shadow-ps %s (git %s)\n", ss_version(), ss_git_rev());
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int rc = ss_cfg_get(cfg, keys[i], v, sizeof v);
        ss_assert(rc == 0);  /* keys of the table, v as large as any value */
        s_config_line(keys[i], v);
        if (!strcmp(keys[i], "data.eval"))
            printf("config eval_stdin %d\n", strcmp(v, "-") == 0);
    }
    s_config_line("algo", ss_sync_label(cfg, v, sizeof v));
    ss_sync_job_traits(cfg, &t);
    ss_sync_traits_format(&t, v, sizeof v);
    s_config_line("traits", v);
    printf("config port_span %d\n", ipc ? 1 : (int)cfg->ps_threads);
    printf("config metrics_ports_set %d\n", cfg->metrics_ports.n > 0);
    int token = s_admin_token(cfg, a);  /* (issue 22) */
    printf("config admin_token %d\nconfig handshake_token %d\n", token > 0, token == 2);
    return 0;
}

int ctl_plan_main(int argc, char **argv)
{
    struct plan_args a = {0};
    struct ss_cfg *cfg = NULL;
    ss_plan_t *plan = NULL;
    struct metrics_plan *metrics = NULL;
    char err[1024], ipc_dir[4200];
    int rc = s_parse_args(argc, argv, &a);
    if (rc)
        return rc;
    metrics = ss_calloc(1, sizeof *metrics);
    cfg = ss_calloc(1, sizeof *cfg);
    rc = 2;
    if (ss_cfg_load(cfg, a.job, a.sets, a.n_sets, err, sizeof err) != 0) {
        fprintf(stderr, "shadow-ctl: %s\n", err);
        goto out;
    }
    plan = ss_plan_new();
    if (!a.hosts)
        ss_plan_local_host(plan);
    else if (ss_plan_load_hosts(plan, a.hosts, err, sizeof err) != 0) {
        fprintf(stderr, "shadow-ctl: plan: %s\n", err);
        goto out;
    }
    s_ipc_dir(cfg, &a, ipc_dir, sizeof ipc_dir);
    if (s_place(plan, cfg, &a, ipc_dir) != 0)
        goto out;
    for (size_t i = 0; i < a.n_ports; i++)
        if (s_set_ports(plan, a.ports[i]) != 0)
            goto out;
    if (ss_plan_endpoints(plan, err, sizeof err) != 0) {
        fprintf(stderr, "shadow-ctl: plan: %s\n", err);
        goto out;
    }
    if (a.complete && s_check_complete(plan) != 0)
        goto out;
    if (a.launch && s_print_launch(cfg, &a, ipc_dir[0] != 0) != 0)
        goto out;
    s_metrics_plan(cfg, &a, plan, metrics);
    if (metrics->mode != S_METRICS_NONE && s_print_metrics(plan, metrics, cfg) != 0)
        goto out;
    /* the data files, read by the trainer's rule, before anything starts
     * (over ssh and srun they live on the other hosts) */
    if (a.check_data && !strcmp(a.exec, "local")) {
        char *keys[] = {"check-data", "data.eval", NULL};
        if (ctl_check_data_main(cfg, a.check_data[0] == 'e' ? 2 : 1, keys) != 0) {
            rc = 3;
            goto out;
        }
    }
    s_print(plan, ipc_dir[0] != 0, metrics->extra);
    if (a.launch)
        s_print_sets(plan, cfg, &a, metrics);
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    ss_plan_destroy(&plan);
    ss_free(metrics);
    ss_free(cfg);
    return rc;
}

int ctl_resolve_main(int argc, char **argv)
{
    struct sockaddr_storage sa;
    socklen_t len;
    char why[256], text[SS_PLAN_ADDR_MAX];
    const void *a;
    if (argc != 2) {
        fprintf(stderr, "shadow-ctl: usage: resolve NAME\n");
        return 2;
    }
    if (ss_plan_resolve(argv[1], &sa, &len, why, sizeof why) != 0) {
        fprintf(stderr, "shadow-ctl: resolve: %s: %s\n", argv[1], why);
        return 1;
    }
    a = sa.ss_family == AF_INET ? (const void *)&((struct sockaddr_in *)&sa)->sin_addr
                                : (const void *)&((struct sockaddr_in6 *)&sa)->sin6_addr;
    if (!inet_ntop(sa.ss_family, a, text, sizeof text))
        return 1;
    printf("%s\n", text);
    return fflush(stdout) == 0 ? 0 : 1;
}
