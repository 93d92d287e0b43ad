/* ps_main.c - shadow-ps: the parameter-server daemon (embedding or sync shard).
 *
 * Threads:
 *   main       parses arguments, loads the config, builds the service, then
 *              serves as service thread 0 (svc-0 in the log; below) and takes
 *              SIGTERM/SIGINT, alone (the handler only sets s_stop; they are
 *              held from the start until the service is built, so every other
 *              thread keeps them blocked: ss_sigstart.h). Between
 *              requests, once a second, it ticks the embedding shard's clock,
 *              which runs the TTL sweep (tables.ttl_s) one stripe lock at a
 *              time, and writes the recovery checkpoints.
 *   svc-1..T-1 the other ps.threads service threads. Service thread t owns
 *              the ROUTER on its own endpoint (ss_cluster_thread_endpoint:
 *              port + t) and its socket monitor (ss_listen.h), and handles
 *              every request it reads, whole, against the shared shard: no
 *              proxy, no hand-off between threads.
 *   zap        with security.curve on or security.token_file set, the ZAP
 *              handler (ss_auth.h): admits the listed CURVE keys or peers
 *              showing the job token; owns its REP socket, reads immutable
 *              key lists (or the token), counts with atomics.
 * Locks (taken in this order, never two of one kind at once):
 *   ps_embed stripe mutex  one per stripe, held while rows of that stripe
 *                          are read, updated, evicted or expired (or copied
 *                          for a checkpoint)
 *   ps_sync mutex          held for a whole INIT/ELASTIC/PULL/checkpoint
 *   ss_peers mutex         held for one lookup or insert of a connection that
 *                          said HELLO (never with another lock)
 * Counters are per service thread (relaxed atomics), summed by STATS. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ps_service.h"
#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_cpu.h"
#include "ss_err.h"
#include "ss_fs.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_metrics.h"
#include "ss_sigstart.h"
#include "ss_version.h"

static volatile sig_atomic_t s_stop;

/* SIGTERM and SIGINT are held from before anything runs until the handler
 * is in and the service built: one that comes earlier stops the PS cleanly
 * too (ss_sigstart.h). */
SS_SIGSTART_HOLD_AT_LOAD;

static void s_on_signal(int sig)
{
    (void)sig;
    s_stop = 1;
}

static void s_usage(FILE *out)
{
    fprintf(out,
            "usage: shadow-ps -c JOB.yaml --role embedding|sync --shard K [options]\n"
            "\n"
            "Run one parameter-server shard of a ShadowSync job. Clients connect to\n"
            "cluster.embedding[K] or cluster.sync[K] of the job file (its advertised\n"
            "endpoint); it binds that address unless cluster.bind or --bind says otherwise.\n"
            "\n"
            "  -c, --config FILE    job file (YAML)\n"
            "  -r, --role ROLE      embedding: a shard of every embedding table\n"
            "                       sync: a range of the EASGD center of the dense model\n"
            "  -k, --shard K        shard index, 0-based\n"
            "  -s, --set KEY=VALUE  override a job-file key (repeatable), e.g.\n"
            "                       --set ps.threads=4\n"
            "  -b, --bind WHERE     what to bind, for this process: '*' (every interface),\n"
            "                       an interface (eth0), an IP, a host name of this machine,\n"
            "                       or a whole endpoint tcp://HOST:PORT; default cluster.bind,\n"
            "                       else the advertised host (a name is resolved and must be\n"
            "                       an address of this machine); port 0 (tcp://HOST:0): a\n"
            "                       free port the system picks, given in the ready line\n"
            "                       (\"bound at ENDPOINT\"); clients need it in the job file\n"
            "  -R, --restore DIR    load DIR/ROLE-K.ckpt before serving; when DIR was saved\n"
            "                       with another shard count, re-shard all of DIR/ROLE-*.ckpt\n"
            "      --stats-file F   at exit, write the counters of the \"stats at exit\" log line\n"
            "                       to F as one JSON object (for jq); default: beside the log\n"
            "                       when stderr is a file NAME.log (NAME.stats.json); 'none':\n"
            "                       no file\n"
            "      --bench-noop     benchmark only: answer LOOKUP/PUSH without touching rows\n"
            "      --list-metrics   print every figure the PS reports (stats, /metrics) as\n"
            "                       docs/metrics.md lists it, and exit\n"
            "  -h, --help           this text\n"
            "      --version        print the version and git revision\n"
            "\n"
            "Stops on SIGTERM, SIGINT or 'shadow-ctl -c JOB.yaml shutdown', after finishing\n"
            "the requests in flight. Logs go to stderr.\n");
}

struct ps_args {
    const char *config;       /* -c */
    int role;                 /* -r, -1 unset */
    long shard;               /* -k, -1 unset */
    const char *restore;      /* -R */
    const char *bind;         /* -b */
    int noop;                 /* --bench-noop */
    const char *stats_file;   /* --stats-file, NULL: beside the log */
    const char **sets;        /* -s values, owned array of borrowed strings */
    size_t n_sets;            /* entries in sets */
};

/* Parse argv; returns 0, 1 for --help, 3 for --version, 4 for
 * --list-metrics, or 2 on a usage error (printed). */
static int s_parse_args(int argc, char **argv, struct ps_args *a)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"role", required_argument, 0, 'r'},
        {"shard", required_argument, 0, 'k'},  {"set", required_argument, 0, 's'},
        {"restore", required_argument, 0, 'R'}, {"bench-noop", no_argument, 0, 'N'},
        {"bind", required_argument, 0, 'b'},   {"list-metrics", no_argument, 0, 'M'},
        {"help", no_argument, 0, 'h'},         {"version", no_argument, 0, 'V'},
        {"stats-file", required_argument, 0, 'S'}, {0, 0, 0, 0}};
    int c;
    char *end;
    a->role = -1;
    a->shard = -1;
    a->sets = ss_calloc((size_t)argc, sizeof *a->sets);
    while ((c = getopt_long(argc, argv, "c:r:k:s:R:b:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': a->config = optarg; break;
        case 'R': a->restore = optarg; break;
        case 'b': a->bind = optarg; break;
        case 'N': a->noop = 1; break;
        case 'S': a->stats_file = optarg; break;
        case 's': a->sets[a->n_sets++] = optarg; break;
        case 'h': return 1;
        case 'V': return 3;
        case 'M': return 4;
        case 'r':
            a->role = !strcmp(optarg, "embedding") ? PS_ROLE_EMBEDDING
                      : !strcmp(optarg, "sync")    ? PS_ROLE_SYNC
                                                   : -2;
            if (a->role == -2) {
                fprintf(stderr, "shadow-ps: --role must be embedding or sync, not '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'k':
            a->shard = strtol(optarg, &end, 10);
            if (*end || a->shard < 0 || a->shard >= SS_CFG_MAX_LIST) {
                fprintf(stderr, "shadow-ps: --shard needs a number 0..%d, not '%s'\n",
                        SS_CFG_MAX_LIST - 1, optarg);
                return 2;
            }
            break;
        default: return 2;
        }
    }
    if (!a->config || a->role < 0 || a->shard < 0) {
        fprintf(stderr, "shadow-ps: -c, --role and --shard are required (see --help)\n");
        return 2;
    }
    return 0;
}

/* Where this PS's CPU time went, one line for the log (benchmarks read it).
 * The main thread serves as service thread 0 (it keeps the process's name,
 * so ss_cpu_split() cannot tell it by "svc-"): its time counts as service
 * time, start-up and shutdown included. */
static void s_log_cpu(int serves_inline)
{
    static const char *const groups[] = {"svc-", "ZMQbg/IO"};
    double by[2], total = ss_cpu_process_s(), other;
    ss_cpu_split(groups, 2, by);
    if (serves_inline)
        by[0] = total - by[1];
    other = total - by[0] - by[1];
    /* never "-0.000": per-thread times are clock ticks, the total is not */
    if (other < 0.0005)
        other = 0.0;
    SS_LOG(SS_LOG_INFO, "cpu: %.3f s total, service threads %.3f s, ZeroMQ I/O %.3f s, "
           "main and other %.3f s", total, by[0], by[1], other);
}

/* Where the exit stats go (into path, path_len bytes): the --stats-file
 * argument; by default, beside the log when stderr is a regular file
 * NAME.log (NAME.stats.json). Returns 0, or -1 for no file. */
static int s_stats_path(const char *arg, char *path, size_t path_len)
{
    char log[4096];
    struct stat st;

    if (arg) {
        if (!strcmp(arg, "none"))
            return -1;
        return snprintf(path, path_len, "%s", arg) < (int)path_len ? 0 : -1;
    }
    ssize_t n = readlink("/proc/self/fd/2", log, sizeof log - 1);
    if (n < 5 || fstat(STDERR_FILENO, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    log[n] = '\0';
    if (strcmp(log + n - 4, ".log") != 0)
        return -1;
    log[n - 4] = '\0';
    return snprintf(path, path_len, "%s.stats.json", log) < (int)path_len ? 0 : -1;
}

/* The counters at exit, as the STATS reply has them (benchmarks read them
 * after a job, when shadow-ctl can no longer ask): a log line (cut at the
 * logger's 1 KiB) and, whole, a JSON file (see s_stats_path()). A file that
 * cannot be written is a warning, not a failure of the PS. */
static void s_log_stats(ps_service_t *svc, const char *stats_file)
{
    char *text = ps_service_stats_json(svc, 64u << 10), path[4096 + 16], err[512];
    SS_LOG(SS_LOG_INFO, "stats at exit: %s", text);
    if (s_stats_path(stats_file, path, sizeof path) == 0) {
        struct ss_fs_piece pieces[2] = {{text, strlen(text)}, {"\n", 1}};
        if (ss_fs_write_atomic(path, pieces, 2, err, sizeof err) != 0)
            SS_LOG(SS_LOG_WARN, "stats at exit not written: %s", err);
    }
    ss_free(text);
}

int main(int argc, char **argv)
{
    struct ps_args args = {0};
    struct ss_cfg *cfg = ss_calloc(1, sizeof *cfg);
    char err[1024], role_id[32];
    ps_service_t *svc;
    ss_cluster_t *cluster = NULL;
    int rc = s_parse_args(argc, argv, &args);

    if (rc == 4) {
        ps_service_list_metrics(stdout);
        rc = 0;
        goto out;
    }
    if (rc) {
        rc = ss_version_or_usage(rc, "shadow-ps", s_usage);
        goto out;
    }
    rc = 1;
    if (ss_cfg_load(cfg, args.config, args.sets, args.n_sets, err, sizeof err) != 0) {
        fprintf(stderr, "shadow-ps: %s\n", err);
        goto out;
    }
    snprintf(role_id, sizeof role_id, "%s-%ld", args.role == PS_ROLE_SYNC ? "sync" : "ps",
             args.shard);
    ss_log_init(role_id, ss_log_parse_level(cfg->log_level));
    ss_cfg_log(cfg);  /* the effective config, for the log */
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {0};
    sa.sa_handler = s_on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    struct ss_cluster_id me = {args.role, (uint32_t)args.shard};
    cluster = ss_cluster_new(cfg, &me, args.bind, err, sizeof err);
    if (!cluster) {
        SS_LOG(SS_LOG_ERROR, "%s", err);
        goto out;
    }
    struct ps_service_conf sc = {cfg, cluster, args.restore, args.noop};
    svc = ps_service_new(&sc, err, sizeof err);
    if (!svc) {
        SS_LOG(SS_LOG_ERROR, "%s", err);
        goto out;
    }
    ss_metrics_t *metrics = NULL;
    int port = ss_cluster_metrics_port(cluster);
    if (port) {
        char labels[128];
        snprintf(labels, sizeof labels, "job=\"%s\",role=\"%s\",shard=\"%ld\"", cfg->job_name,
                 ps_role_name(args.role), args.shard);
        metrics = ss_metrics_new(ss_cluster_bind_endpoint(cluster), port, labels,
                                 ps_service_metrics, svc, err, sizeof err);
        if (!metrics) {
            SS_LOG(SS_LOG_ERROR, "%s", err);
            ps_service_destroy(&svc);
            goto out;
        }
        const char *mh = ss_metrics_host(metrics);
        SS_LOG(SS_LOG_INFO, "metrics: http://%s:%d/metrics%s", strcmp(mh, "*") ? mh : "localhost",
               port, strcmp(mh, "*") ? "" : " (every interface)");
    }
    /* released only now: the threads started so far (ZeroMQ's, the ZAP
     * handler, the metrics server) keep them held, so that a signal goes to
     * this thread and ends its poll at once (it sleeps up to a second when
     * idle); one that came since the start sets s_stop now */
    ss_sigstart_release();
    rc = ps_service_run(svc, &s_stop) ? 1 : 0;
    ss_metrics_destroy(&metrics);
    s_log_cpu(1);  /* the main thread serves (service thread 0) */
    s_log_stats(svc, args.stats_file);
    ps_service_destroy(&svc);
out:
    ss_cluster_destroy(&cluster);
    ss_free(args.sets);
    ss_free(cfg);
    return rc;
}
