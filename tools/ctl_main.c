/* ctl_main.c - shadow-ctl: talk to a running ShadowSync cluster.
 *
 * Threads: one per target, all at once (a dead process costs one timeout,
 * not one per target); each connects a DEALER, says HELLO (protocol version
 * and config hash), sends the request and writes its lines into its own
 * buffer; the main thread prints the buffers in target order: one line per
 * target for people, or one JSON object per line with --json. Targets are
 * the PSs and, for ping, stats and config get --live, the trainers' admin
 * endpoints (cluster.trainer_admin, trainer/tr_admin.h). "all" leaves out
 * the sync PSs when the job's sync rules never start them (no EASGD), and
 * the trainers when the job gives them no admin endpoint. `config get`
 * (without --live) reads the job file only: scripts use it so that they
 * never parse YAML themselves. `keygen NAME` writes a CURVE key pair and
 * needs no job file; nor do `ports` and `report` (ctl_launch.c, for
 * launchers); `plan` (ctl_plan.c, for launchers too) loads its own. With
 * security.curve on, every connection uses security.client_key (an operator
 * may pass --set security.client_key=...). */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl_export.h"
#include "ctl_launch.h"
#include "ctl_plan.h"
#include "ctl_slurm.h"
#include "ss_auth.h"
#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_json.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_net.h"
#include "ss_stats.h"
#include "ss_sync.h"
#include "ss_time.h"
#include "ss_version.h"
#include "tr_admin.h"

static void s_usage(FILE *out)
{
    fprintf(out,
            "usage: shadow-ctl -c JOB.yaml [options] COMMAND\n"
            "       shadow-ctl keygen NAME\n"
            "       shadow-ctl ports N [--host ADDR] [--range LO-HI] [--span K]\n"
            "       shadow-ctl report RUN_DIR [--job NAME] [--sync ALGO] [--trainers N]\n"
            "                         [--wall-s S] [--restarts FILE] [--lost FILE]\n"
            "                         [--resumed-from EXAMPLES] [--scored MODEL_DIR]\n"
            "                         [--logs DIR] [--quiet] [--if-error]\n"
            "       shadow-ctl preflight DIR JOB.yaml TOKEN --bin DIR [--ckpt-dir DIR]\n"
            "                            [--ports N [--host ADDR] [--span K]]\n"
            "                            [--why RC [--exec MODE] [--target T]]\n"
            "       shadow-ctl export MODEL_DIR -o FILE [-c JOB.yaml] [--set K=V]\n"
            "       shadow-ctl sync-traits [ALGO]\n"
            "       shadow-ctl plan JOB.yaml [--set K=V]... [--hosts FILE] [--exec MODE]\n"
            "                       [--fixed-ports] [--base-port P] [--ports H=P,P,...]...\n"
            "                       [--complete] [--launch] [--check-data all|eval]\n"
            "       shadow-ctl resolve NAME\n"
            "       shadow-ctl launch SCRIPT [ARG]...\n"
            "       shadow-ctl slurm --here DIR [--as NAME] -- ARGS  (what scripts/shadow-slurm runs)\n"
            "\n"
            "Commands:\n"
            "  ping                 check that each PS and trainer answers (and speaks our\n"
            "                       protocol)\n"
            "  stats                each PS's requests, rows, bytes, memory; each trainer's\n"
            "                       examples, throughput, NE, sync figures (docs/metrics.md)\n"
            "  checkpoint           ask each PS to write its checkpoint (atomically)\n"
            "  shutdown             ask each PS to finish in-flight requests and exit\n"
            "  config get KEY       print the effective value of KEY (lists: one per line;\n"
            "                       KEY.count: list length) from the job file and --set\n"
            "  config get --live KEY\n"
            "                       ask each running PS and trainer the value it runs with\n"
            "  keygen NAME          write a CURVE key pair: NAME.key (secret, mode 0600) and\n"
            "                       NAME.pub (public); see security.* in the job file\n"
            "  ports N              print N TCP ports free on ADDR (default 127.0.0.1), one a\n"
            "                       line; needs no job file (scripts/shadow-launch uses it);\n"
            "                       --span K: each port starts K free ports in a row (a PS\n"
            "                       with ps.threads K takes them)\n"
            "  report RUN_DIR       write RUN_DIR/result.json from the trainers'\n"
            "                       result-trainer-R.json files and print the job summary\n"
            "                       (--restarts/--lost: the launcher's JSON-lines files of\n"
            "                       PS restarts and lost trainers; --resumed-from: the\n"
            "                       examples of the job checkpoint a resumed job went on\n"
            "                       from; --scored: a run that only scored that saved model,\n"
            "                       --eval-only or --predict, gets a scoring summary;\n"
            "                       --if-error: only when trainer 0's result names an\n"
            "                       error, else exit 3; 4 when that error came after\n"
            "                       the model was saved, 5 when the model's save failed\n"
            "                       and the folder holds an earlier one: model_epoch)\n"
            "  preflight DIR ...    a launcher's check of one host before it starts anything\n"
            "                       there: run directory, old files, job file, version,\n"
            "                       free ports (tools/ctl_launch.h)\n"
            "  check-data [KEY...]  check that the input files of data.train, data.eval and\n"
            "                       data.valid (or the KEYs given) are there, by the\n"
            "                       trainer's rule (globs, lists, '-'): scripts/shadow-launch\n"
            "                       runs it before any process starts\n"
            "  sync-traits [ALGO]   print what ALGO needs, as words for scripts: \"ring=1\n"
            "                       sync_ps=0 foreground=0 lose_trainer=1\"; without ALGO\n"
            "                       every row of the sync table (common/ss_sync.h); with -c\n"
            "                       JOB.yaml and no ALGO, the job's (over its sync groups)\n"
            "  plan JOB.yaml        print where a launcher runs each process and its endpoint\n"
            "                       (hosts file, placement, ipc/tcp, ports: ctl_plan.h;\n"
            "                       scripts/shadow-launch uses it; --launch: what it needs\n"
            "                       of the job file too)\n"
            "  resolve NAME         the address a hosts file's HOST resolves to (IPv4 first,\n"
            "                       then IPv6), as the plan resolves it\n"
            "  launch SCRIPT ...    the launcher: what scripts/shadow-launch runs (SCRIPT: its\n"
            "                       path), with its arguments (shadow-launch --help)\n"
            "  export MODEL_DIR     write the saved model (RUN_DIR/model) into one file that\n"
            "                       shadow-score scores with no PS (export --help,\n"
            "                       docs/model-file.md)\n"
            "\n"
            "Options:\n"
            "  -c, --config FILE    job file (YAML)\n"
            "  -r, --run RUN_DIR    the job file and endpoints a launch used (RUN_DIR/\n"
            "                       cluster.args, written by scripts/shadow-launch)\n"
            "  -s, --set KEY=VALUE  override a job-file key (repeatable)\n"
            "  -t, --target T       embedding:K, sync:K, trainer:K, embedding, sync, trainer\n"
            "                       or all (default: the embedding PSs, the sync PSs if the\n"
            "                       job uses EASGD, and the trainers for ping, stats and\n"
            "                       config get --live when they have admin endpoints)\n"
            "  -j, --json           one JSON object per target, for scripts\n"
            "  -T, --timeout-ms MS  wait per request (default limits.request_timeout_ms)\n"
            "  -h, --help           this text\n"
            "      --version        print the version and git revision\n"
            "\n"
            "Exit status: 0 when every target answered OK, 1 otherwise, 2 on usage errors.\n");
}

struct ctl_args {
    const char *config;     /* -c */
    const char *target;     /* -t */
    int json;               /* -j */
    long timeout_ms;        /* -T, 0 = from config */
    const char **sets;      /* -s values */
    size_t n_sets;          /* count */
    int live;               /* --live: config get asks the running PSs */
    const char *live_key;   /* config get --live KEY: sent in the request's text */
    uint64_t save_id;       /* checkpoint: one id for every PS of this call (ps_ckpt.h) */
};

/* One process to talk to. */
struct ctl_target {
    const char *role;       /* "embedding", "sync" or "trainer" */
    size_t shard;           /* index */
    const char *endpoint;   /* advertised endpoint (ss_cluster.h) */
    uint64_t hello_hash;    /* what this process expects in HELLO */
    char unreachable[512];  /* why its host cannot be resolved, "" if it can */
};

/* 1 if the job's sync rules start the sync PSs (the sync_ps trait: EASGD). */
static int s_uses_sync_ps(const struct ss_cfg *cfg)
{
    struct ss_sync_traits t;
    ss_sync_job_traits(cfg, &t);
    return t.sync_ps;
}

/* sync-traits [ALGO]: print ALGO's traits ("ring=1 sync_ps=0 foreground=0
 * lose_trainer=1"), or every row of the sync table (ss_sync.h) without
 * ALGO. No job file. Returns the exit status. */
static int s_sync_traits_main(int argc, char **argv)
{
    char line[128];
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr, "shadow-ctl: usage: sync-traits [ALGO], or -c JOB.yaml sync-traits\n");
        return 2;
    }
    if (argc == 2) {
        int a = ss_sync_find(argv[1]);
        if (a < 0) {
            fprintf(stderr, "shadow-ctl: sync-traits: no sync algorithm '%s' (shadow-ctl "
                    "sync-traits lists them)\n", argv[1]);
            return 1;
        }
        struct ss_sync_traits none = {0};
        const struct ss_sync_traits *t = ss_sync_traits_of(a);
        ss_sync_traits_format(t ? t : &none, line, sizeof line);
        printf("%s\n", line);
        return 0;
    }
    for (int a = SS_SYNC_NONE + 1; ss_sync_traits_of(a); a++) {
        const struct ss_sync_traits *t = ss_sync_traits_of(a);
        ss_sync_traits_format(t, line, sizeof line);
        printf("name=%s rule=%s %s\n", t->name, t->rule, line);
    }
    return 0;
}

/* 1 when a trainer's admin endpoint serves request type (ss_msg_types.h). */
static int s_trainer_serves(int type)
{
    return tr_admin_serves(type);
}

/* Add process i of role to out[*n]. */
static void s_add_target(const ss_cluster_t *cl, int role, size_t i, struct ctl_target *out,
                         int *n)
{
    struct ctl_target *t = &out[(*n)++];
    int tr = role == SS_CLUSTER_TRAINER;
    *t = (struct ctl_target){ss_cluster_role_name(role), i,
                             tr ? ss_cluster_admin_endpoint(cl, i) : ss_cluster_endpoint(cl, role, i),
                             ss_cluster_hello_hash(cl, role, i), ""};
    if (tr)
        ss_cluster_check_admin(cl, i, t->unreachable, sizeof t->unreachable);
    else
        ss_cluster_check_peer(cl, role, i, t->unreachable, sizeof t->unreachable);
}

/* Select targets for request type from "all", "embedding", "sync:1",
 * "trainer:0", ...; returns the count, or -1 with why for a bad spec. */
static int s_targets(const struct ss_cfg *cfg, const ss_cluster_t *cl, const char *spec,
                     int type, struct ctl_target *out, char *why, size_t why_len)
{
    int n = 0;
    const char *colon = strchr(spec, ':');
    size_t role_len = colon ? (size_t)(colon - spec) : strlen(spec);
    long want = -1;
    snprintf(why, why_len, "bad --target %s (see --help)", spec);
    if (colon) {
        char *end;
        want = strtol(colon + 1, &end, 10);
        if (*end || want < 0)
            return -1;
    }
    int all = !strcmp(spec, "all");
    int has_admin = ss_cluster_admin_endpoint(cl, 0) != NULL;
    int on[SS_CLUSTER_N_ROLES] = {
        all || (role_len && !strncmp(spec, "embedding", role_len)),
        (all && s_uses_sync_ps(cfg)) || (!all && role_len && !strncmp(spec, "sync", role_len)),
        (all && has_admin && s_trainer_serves(type)) ||
            (!all && role_len && !strncmp(spec, "trainer", role_len))};
    if (!on[0] && !on[1] && !on[2])
        return -1;
    if (on[2] && !all && !has_admin) {
        snprintf(why, why_len, "the trainers of this job have no admin endpoint: set "
                 "cluster.trainer_admin (scripts/shadow-launch does; use --run RUN_DIR)");
        return -1;
    }
    if (on[2] && !all && !s_trainer_serves(type)) {
        snprintf(why, why_len, "trainers answer ping, stats and config get --live only");
        return -1;
    }
    for (int role = 0; role < SS_CLUSTER_N_ROLES; role++)
        for (size_t i = 0; on[role] && i < ss_cluster_count(cl, role); i++)
            if (want < 0 || (size_t)want == i)
                s_add_target(cl, role, i, out, &n);
    return n ? n : -1;
}

/* Edit distance of a and b, capped at 3 (enough to suggest a command). */
static int s_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    int row[32], prev;
    if (la > 30 || lb > 30)
        return 3;
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        prev = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int cur = row[j];
            int best = prev + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            prev = cur;
        }
    }
    return row[lb] < 3 ? row[lb] : 3;
}

/* Every command of shadow-ctl, in --help's order: the one list that the
 * dispatch of the launcher's commands (main: own options, no job file) and
 * the "did you mean" of an unknown command read. */
static const struct {
    const char *name;
    int (*own_main)(int argc, char **argv);  /* its own options, no -c JOB.yaml; or NULL */
} s_cmds[] = {
    {"ping", NULL},        {"stats", NULL},     {"checkpoint", NULL},
    {"shutdown", NULL},    {"config", NULL},    {"check-data", NULL},
    {"keygen", NULL},      {"ports", ctl_ports_main},
    {"report", ctl_report_main},                {"preflight", ctl_preflight_main},
    {"plan", ctl_plan_main},                    {"export", ctl_export_main},
    {"sync-traits", s_sync_traits_main},         {"resolve", ctl_resolve_main},
    {"launch", ctl_launch_main},
    {"slurm", ctl_slurm_main},
};
#define S_N_CMDS (sizeof s_cmds / sizeof s_cmds[0])

/* Say that cmd is not a command, naming the closest one when it is close,
 * else every one (s_cmds). */
static void s_unknown_command(const char *cmd)
{
    const char *best = NULL;
    int best_d = 3;
    for (size_t i = 0; i < S_N_CMDS; i++) {
        int d = s_distance(cmd, s_cmds[i].name);
        if (d < best_d || (!strncmp(cmd, s_cmds[i].name, strlen(cmd)) && strlen(cmd) >= 2 && !best))
            best_d = d, best = s_cmds[i].name;
    }
    if (best) {
        fprintf(stderr, "shadow-ctl: unknown command '%s': did you mean '%s'? (see --help)\n",
                cmd, best);
        return;
    }
    fprintf(stderr, "shadow-ctl: unknown command '%s' (commands:", cmd);
    for (size_t i = 0; i < S_N_CMDS; i++)
        fprintf(stderr, "%s %s", i ? "," : "", s_cmds[i].name);
    fprintf(stderr, "; see --help)\n");
}

static int s_command_type(const char *cmd)
{
    if (!strcmp(cmd, "ping")) return MSG_TYPE__MSG_PING;
    if (!strcmp(cmd, "stats")) return MSG_TYPE__MSG_STATS;
    if (!strcmp(cmd, "checkpoint")) return MSG_TYPE__MSG_CHECKPOINT;
    if (!strcmp(cmd, "shutdown")) return MSG_TYPE__MSG_SHUTDOWN;
    return -1;
}

/* Print a STATS JSON object as "key value" lines for people, in the
 * reply's order (values as JSON text: strings quoted). A reply that is not
 * a JSON object is said so, with where it breaks. */
static void s_print_stats_human(FILE *out, const char *json)
{
    char err[512], v[4096];
    const char *key;
    json_t *o, *val;
    if (ss_json_parse(json, "STATS reply", &o, err, sizeof err) != 0) {
        fprintf(out, "    (%s)\n", err);
        return;
    }
    json_object_foreach(o, key, val) {
        if (ss_json_text(val, v, sizeof v) != 0)
            snprintf(v, sizeof v, "(longer than %zu bytes)", sizeof v);
        fprintf(out, "    %-20s %s\n", key, v);
    }
    json_decref(o);
}

/* Run one request against one target; writes the result to out. Returns 0 or rc. */
static int s_run_one(void *zctx, const struct ss_cfg *cfg, const struct ss_curve *curve,
                     const struct ctl_target *t, int type, const struct ctl_args *a, FILE *out)
{
    struct ss_conn_opts opts = {
        .max_message_bytes = cfg->max_message_bytes,
        .timeout_ms = a->timeout_ms ? a->timeout_ms : cfg->request_timeout_ms,
        .curve = curve,
        .max_in_flight = cfg->security.max_in_flight,
    };
    char err[1024] = "";
    struct ss_msg reply = {0};
    uint64_t t0 = ss_now_ns();
    ss_conn_t *conn = t->unreachable[0] ? NULL : ss_conn_new(zctx, t->endpoint, &opts);
    int rc = conn ? ss_conn_hello(conn, t->hello_hash, err, sizeof err) : SS_E_NET;
    if (t->unreachable[0])
        snprintf(err, sizeof err, "%s", t->unreachable);
    if (rc == 0) {
        Header h = HEADER__INIT;
        char token[SS_ADMIN_TOKEN_MAX] = "";
        h.type = (MsgType)type;
        h.text = (char *)a->live_key;  /* CONFIG: the key */
        rc = ss_admin_token_read(cfg->security.admin_token_file, token, err, sizeof err);
        h.admin_token = token[0] ? token : NULL;
        if (type == MSG_TYPE__MSG_CHECKPOINT) {  /* the files of one call form one set */
            h.has_save_id = 1;
            h.save_id = a->save_id;
            /* a large shard: the PS says it is at it, each word restarts the timeout */
            h.has_progress_ms = 1;
            h.progress_ms = (uint32_t)(opts.timeout_ms / 2);
        }
        if (rc == 0)
            rc = ss_conn_call(conn, &h, NULL, 0, -1, &reply, err, sizeof err);
    }
    double ms = (double)(ss_now_ns() - t0) / 1e6;
    const char *text = (rc == 0 && reply.hdr->text) ? reply.hdr->text : "";
    if (a->json) {
        struct ss_jw w;
        char name[64];
        snprintf(name, sizeof name, "%s:%zu", t->role, t->shard);
        ss_jw_begin(&w, strlen(text) + 4096);
        ss_jw_str(&w, "target", name);
        ss_jw_str(&w, "endpoint", t->endpoint);
        ss_jw_bool(&w, "ok", rc == 0);
        ss_jw_num(&w, "ms", ms);
        if (rc)
            ss_jw_str(&w, "error", err[0] ? err : ss_strerror(rc));
        else if (type == MSG_TYPE__MSG_STATS)
            ss_jw_raw(&w, "stats", text[0] ? text : "{}");
        else
            ss_jw_str(&w, "reply", text);
        ss_jw_end(&w);
        fprintf(out, "%s\n", w.buf);
        ss_jw_fini(&w);
    } else if (rc) {
        fprintf(out, "%s:%zu  %-24s FAILED  %s\n", t->role, t->shard, t->endpoint,
               err[0] ? err : ss_strerror(rc));
    } else {
        fprintf(out, "%s:%zu  %-24s ok  %.2f ms  %s\n", t->role, t->shard, t->endpoint, ms,
               type == MSG_TYPE__MSG_STATS ? "" : text);
        if (type == MSG_TYPE__MSG_STATS)
            s_print_stats_human(out, text);
    }
    if (rc == 0 || rc == SS_E_PEER)
        ss_msg_close(&reply);
    ss_conn_destroy(&conn);
    return rc;
}

static int s_parse_args(int argc, char **argv, struct ctl_args *a)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"set", required_argument, 0, 's'},
        {"target", required_argument, 0, 't'}, {"json", no_argument, 0, 'j'},
        {"timeout-ms", required_argument, 0, 'T'}, {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},      {"live", no_argument, 0, 'L'},
        {0, 0, 0, 0}};
    int c;
    a->target = "all";
    a->sets = ss_calloc((size_t)argc, sizeof *a->sets);
    while ((c = getopt_long(argc, argv, "c:s:t:jT:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': a->config = optarg; break;
        case 's': a->sets[a->n_sets++] = optarg; break;
        case 't': a->target = optarg; break;
        case 'j': a->json = 1; break;
        case 'T': a->timeout_ms = strtol(optarg, NULL, 10); break;
        case 'h': return 1;
        case 'V': return 3;
        case 'L': a->live = 1; break;
        default: return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "shadow-ctl: no command given (see --help)\n");
        return 2;
    }
    return 0;
}

/* --run RUN_DIR: put the arguments of RUN_DIR/cluster.args (one a line:
 * -c JOB and the launch's --set options) in front of the others. Returns
 * the new argv, argv itself without --run, or NULL when the file cannot be
 * read; *n_owned: how many of the new argv's strings (from [1] on) and the
 * array itself are owned (free with s_free_run_args), 0 for argv. *run_dir:
 * RUN_DIR (borrowed from argv), or NULL without --run. */
static char **s_run_args(int *argc, char **argv, int *n_owned, const char **run_dir)
{
    int at = -1;
    const char *dir = NULL;
    for (int i = 1; i < *argc && at < 0; i++) {
        if ((!strcmp(argv[i], "--run") || !strcmp(argv[i], "-r")) && i + 1 < *argc)
            at = i, dir = argv[i + 1];
        else if (!strncmp(argv[i], "--run=", 6))
            at = i, dir = argv[i] + 6;
    }
    *n_owned = 0;
    *run_dir = dir;
    if (at < 0)
        return argv;
    char path[4096], line[SS_CFG_MAX_STR * SS_CFG_MAX_LIST];
    snprintf(path, sizeof path, "%s/cluster.args", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "shadow-ctl: --run %s: cannot read %s: %s (was the job started with "
                "scripts/shadow-launch?)\n", dir, path, strerror(errno));
        return NULL;
    }
    int skip = strncmp(argv[at], "--run=", 6) ? 2 : 1, n = 1;
    char **out = ss_calloc((size_t)*argc + 512, sizeof *out);
    out[0] = argv[0];
    while (n < 510 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        out[n++] = ss_strdup(line);
    }
    fclose(f);
    *n_owned = n;
    for (int i = 1; i < *argc; i++)
        if (i < at || i >= at + skip)
            out[n++] = argv[i];
    *argc = n;
    return out;
}

/* 1 when the launch of run_dir has ended: shadow-launch writes result.json
 * last and removes it when it starts a job (no need to wait for timeouts). */
static int s_run_finished(const char *run_dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/result.json", run_dir);
    return access(path, F_OK) == 0;
}

static void s_free_run_args(char **argv, int n_owned)
{
    if (n_owned == 0)
        return;
    for (int i = 1; i < n_owned; i++)
        ss_free(argv[i]);
    ss_free(argv);
}

static int s_keygen(int argc, char **argv)
{
    char err[1024];
    if (argc != 2) {
        fprintf(stderr, "shadow-ctl: usage: keygen NAME (writes NAME.key and NAME.pub)\n");
        return 2;
    }
    if (ss_curve_keygen(argv[1], err, sizeof err) != 0) {
        fprintf(stderr, "shadow-ctl: keygen: %s\n", err);
        return 1;
    }
    printf("wrote %s.key (secret, mode 0600) and %s.pub (public)\n", argv[1], argv[1]);
    return 0;
}

/* One target's probe, run on its own thread. */
struct ctl_job {
    void *zctx;                   /* shared (thread-safe) */
    const struct ss_cfg *cfg;     /* borrowed */
    const struct ss_curve *curve; /* borrowed */
    const struct ctl_target *t;   /* borrowed */
    const struct ctl_args *a;     /* borrowed */
    int type;                     /* request */
    char *text;                   /* what it printed (open_memstream), owned */
    size_t len;                   /* bytes of text */
    int rc;                       /* s_run_one's result */
    int threaded;                 /* ran on its own thread: join it */
};

static void *s_job_main(void *arg)
{
    struct ctl_job *j = arg;
    FILE *out = open_memstream(&j->text, &j->len);
    j->rc = out ? s_run_one(j->zctx, j->cfg, j->curve, j->t, j->type, j->a, out) : SS_E_NOMEM;
    if (out)
        fclose(out);
    return NULL;
}

/* Send the command to every target at once (CURVE keys from the job file);
 * print the answers in target order. */
static int s_run_all(const struct ss_cfg *cfg, const struct ctl_target *targets, int n, int type,
                     const struct ctl_args *a)
{
    struct ss_curve curve;
    struct ctl_job jobs[3 * SS_CFG_MAX_LIST];
    pthread_t tid[3 * SS_CFG_MAX_LIST];
    char err[1024];
    int rc = 0;
    if (ss_curve_load(&curve, &cfg->security, SS_CURVE_CLIENT, err, sizeof err) != 0) {
        fprintf(stderr, "shadow-ctl: %s\n", err);
        return 2;
    }
    void *zctx = zmq_ctx_new();
    for (int i = 0; i < n; i++) {
        jobs[i] = (struct ctl_job){zctx, cfg, &curve, &targets[i], a, type, NULL, 0, 0, 0};
        jobs[i].threaded = pthread_create(&tid[i], NULL, s_job_main, &jobs[i]) == 0;
        if (!jobs[i].threaded)
            s_job_main(&jobs[i]);  /* no thread: run it here */
    }
    for (int i = 0; i < n; i++) {
        if (jobs[i].threaded)
            pthread_join(tid[i], NULL);
        if (jobs[i].text)
            fputs(jobs[i].text, stdout);
        free(jobs[i].text);
        rc |= jobs[i].rc != 0;
    }
    zmq_ctx_term(zctx);
    ss_curve_wipe(&curve);
    return rc;
}

static int s_config_get(const struct ss_cfg *cfg, int argc, char **argv)
{
    char out[SS_CFG_MAX_LIST * SS_CFG_MAX_STR];
    if (argc != 3 || strcmp(argv[1], "get") != 0) {
        fprintf(stderr, "shadow-ctl: usage: config get KEY\n");
        return 2;
    }
    if (ss_cfg_get(cfg, argv[2], out, sizeof out) != 0) {
        fprintf(stderr, "shadow-ctl: no config key '%s' (see conf/local.yaml)\n", argv[2]);
        return 1;
    }
    if (out[0])
        printf("%s\n", out);
    return 0;
}

int main(int argc, char **argv)
{
    /* The launcher's commands take their own options and no job file. */
    for (size_t i = 0; argc > 1 && i < S_N_CMDS; i++)
        if (s_cmds[i].own_main && !strcmp(argv[1], s_cmds[i].name))
            return s_cmds[i].own_main(argc - 1, argv + 1);
    int n_owned;
    const char *run_dir;
    argv = s_run_args(&argc, argv, &n_owned, &run_dir);
    if (!argv)
        return 2;
    struct ctl_args a = {0};
    struct ss_cfg *cfg = ss_calloc(1, sizeof *cfg);
    struct ctl_target targets[3 * SS_CFG_MAX_LIST];
    ss_cluster_t *cluster = NULL;
    char err[1024];
    int rc = s_parse_args(argc, argv, &a);

    ss_log_init("ctl", SS_LOG_WARN);
    if (rc) {
        rc = ss_version_or_usage(rc, "shadow-ctl", s_usage);
        goto out;
    }
    if (!strcmp(argv[optind], "keygen")) {
        rc = s_keygen(argc - optind, argv + optind);
        goto out;
    }
    if (!a.config) {
        fprintf(stderr, "shadow-ctl: -c JOB.yaml is required\n");
        rc = 2;
        goto out;
    }
    if (ss_cfg_load(cfg, a.config, a.sets, a.n_sets, err, sizeof err) != 0) {
        fprintf(stderr, "shadow-ctl: %s\n", err);
        rc = 2;
        goto out;
    }
    char **cmd = argv + optind;
    int n_cmd = argc - optind;
    int type;
    if (!strcmp(cmd[0], "config") && a.live && n_cmd == 3 && !strcmp(cmd[1], "get")) {
        type = MSG_TYPE__MSG_CONFIG;  /* config get --live KEY: the running PSs */
        a.live_key = cmd[2];
        n_cmd = 1;
    } else if (!strcmp(cmd[0], "config")) {
        rc = s_config_get(cfg, n_cmd, cmd);
        goto out;
    } else if (!strcmp(cmd[0], "check-data")) {
        rc = ctl_check_data_main(cfg, n_cmd, cmd);
        goto out;
    } else if (!strcmp(cmd[0], "sync-traits")) {
        struct ss_sync_traits t;  /* the job's, over its sync groups */
        char line[128];
        if (n_cmd != 1) {
            fprintf(stderr, "shadow-ctl: sync-traits with -c JOB.yaml prints the job's and "
                    "takes no ALGO, got '%s' (see --help)\n", cmd[1]);
            rc = 2;
            goto out;
        }
        ss_sync_job_traits(cfg, &t);
        ss_sync_traits_format(&t, line, sizeof line);
        printf("%s\n", line);
        goto out;
    } else {
        type = s_command_type(cmd[0]);
    }
    if (!(cluster = ss_cluster_new(cfg, NULL, NULL, err, sizeof err))) {
        fprintf(stderr, "shadow-ctl: %s\n", err);
        rc = 2;
        goto out;
    }
    if (type < 0) {
        s_unknown_command(cmd[0]);
        rc = 2;
        goto out;
    }
    if (n_cmd != 1) {
        fprintf(stderr, "shadow-ctl: %s takes no arguments, got '%s' (see --help)\n", cmd[0],
                cmd[1]);
        rc = 2;
        goto out;
    }
    if (run_dir && s_run_finished(run_dir)) {
        fprintf(stderr, "shadow-ctl: the job of %s is not running: it finished (%s/result.json "
                "holds its results)\n", run_dir, run_dir);
        rc = 1;
        goto out;
    }
    int n = s_targets(cfg, cluster, a.target, type, targets, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "shadow-ctl: %s\n", err);
        rc = 2;
        goto out;
    }
    a.save_id = ss_mix64(ss_now_ns() ^ ((uint64_t)getpid() << 32)) | 1;
    rc = s_run_all(cfg, targets, n, type, &a);
out:
    ss_cluster_destroy(&cluster);
    s_free_run_args(argv, n_owned);
    ss_free(a.sets);
    ss_free(cfg);
    return rc;
}
