/* ss_cfg.c - the job configuration: key table, value parsers, --set, checks.
 *
 * DESIGN: every key is declared once in s_keys[] (redis static_configs): its
 * YAML name, type, default, limits, target field, whether it is cluster-
 * relevant, and a help line. Defaults are written as --set text and applied
 * through the same parser as overrides, so a default can never break its
 * own limits. The YAML file is walked by ss_cfg_yaml.c, which looks each
 * dotted name up here and checks each value with the parsers here as it is
 * read, so an error names its own line; what the two files share is in the
 * private ss_cfg_int.h. The cross-key checks run last, after the file and
 * the --set overrides. */
#include "ss_cfg.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_cfg_int.h"
#include "ss_data_layout.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"

/* Room for the text of any value: a full string list, one entry per line. */
#define S_VALUE_MAX (SS_CFG_MAX_LIST * (SS_CFG_MAX_STR + 4) + 64)

enum {
    S_CLUSTER = 1 << 0,   /* part of ss_cfg_cluster_hash() */
    S_MINX = 1 << 1,      /* dmin itself is not allowed */
    S_MAXX = 1 << 2,      /* dmax itself is not allowed */
    S_NEG1 = 1 << 3,      /* -1 is also allowed: "use the N-dependent default" */
    S_POW2 = 1 << 4,      /* must be a power of two */
    S_ENDPOINT = 1 << 5,  /* must start with tcp://, ipc:// or inproc://; hashed by count */
    S_TEXT = 1 << 6,      /* SS_CFG_T_ENUM stored as its name in a char[] */
};

static const char *const s_level_names[] = {"debug", "info", "warn", "error", NULL};
static const char *const s_opt_names[] = {"sgd", "adagrad", "rowwise_adagrad", NULL};
static const char *const s_dense_opt_names[] = {"sgd", "adagrad", NULL};
/* sync.algorithm's names and help come from the sync table (ss_sync.h) */
#define S_SYNC_HELP(id, name, rule, fg, ring, sync_ps, lose) ", " name
static const char *const s_writeback_names[] = {"delta", "overwrite", NULL};
static const char *const s_loss_names[] = {"auto", "true", "false", NULL};
static const char *const s_component_names[] = {"bottom", "top", NULL};
static const char *const s_format_names[] = {"criteo_tsv", "csv", "libsvm", "libffm", NULL};
static const char *const s_header_names[] = {"auto", "true", "false", NULL};
static const char *const s_transport_names[] = {"auto", "tcp", NULL};
static const char *const s_pooling_names[] = {"sum", "mean", "sqrtn", NULL};
static const char *const s_precision_names[] = {"fp32", "bf16", "auto", NULL};

#define S_FIELD(st, f) .off = offsetof(struct st, f), .size = sizeof(((struct st *)0)->f)
#define S_P2(n) (INT64_C(1) << (n))

#define K_INT(nm, f, d, lo, hi, fl, h)                                                   \
    {.name = nm, .type = SS_CFG_T_INT, .flags = fl, S_FIELD(ss_cfg, f), .def = d,        \
     .imin = lo, .imax = hi, .help = h}
#define K_DBL(nm, f, d, lo, hi, fl, h)                                                   \
    {.name = nm, .type = SS_CFG_T_DBL, .flags = fl, S_FIELD(ss_cfg, f), .def = d,        \
     .dmin = lo, .dmax = hi, .help = h}
#define K_BOOL(nm, f, d, h) \
    {.name = nm, .type = SS_CFG_T_BOOL, S_FIELD(ss_cfg, f), .def = d, .help = h}
#define K_STR(nm, f, d, h) \
    {.name = nm, .type = SS_CFG_T_STR, S_FIELD(ss_cfg, f), .def = d, .help = h}
#define K_ENUM(nm, f, d, nms, fl, h)                                                     \
    {.name = nm, .type = SS_CFG_T_ENUM, .flags = fl, S_FIELD(ss_cfg, f), .def = d,       \
     .names = nms, .help = h}
#define K_STRS(nm, f, d, n0, n1, fl, h)                                                  \
    {.name = nm, .type = SS_CFG_T_STRS, .flags = fl, S_FIELD(ss_cfg, f), .def = d,       \
     .nmin = n0, .nmax = n1, .help = h}
#define K_INTS(nm, f, d, lo, hi, n0, n1, fl, h)                                          \
    {.name = nm, .type = SS_CFG_T_INTS, .flags = fl, S_FIELD(ss_cfg, f), .def = d,       \
     .imin = lo, .imax = hi, .nmin = n0, .nmax = n1, .help = h}

/* Every key, in the order of conf/local.yaml. */
static const struct ss_cfg_key s_keys[] = {
    K_STR("job.name", job_name, "local", "job name, shown in logs and metrics"),
    K_INT("job.seed", job_seed, "42", 0, S_P2(62), S_CLUSTER,
          "seed of the dense and embedding-row initializers, 0..2^62"),
    K_STR("job.run_dir", run_dir, "run/local", "folder for logs, metrics and checkpoints"),
    K_ENUM("job.log_level", log_level, "info", s_level_names, S_TEXT,
           "least severe log level written: debug, info, warn or error"),
    K_INT("job.max_ps_restarts", max_ps_restarts, "3", 0, 1000, 0,
          "times the launcher restarts a dead PS from its latest checkpoint, 0..1000"),
    K_ENUM("job.allow_trainer_loss", allow_trainer_loss, "auto", s_loss_names, 0,
           "go on without a trainer that died: auto (yes for s-easgd, s-ma, s-bmuf), true "
           "or false"),
    K_DBL("job.checkpoint_interval_s", job_ckpt_interval_s, "0", 0, 86400, 0,
          "seconds between periodic job checkpoints (RUN_DIR/jobckpt, training goes on), "
          "0 = only on SIGTERM, [0, 86400]"),

    K_STRS("cluster.embedding", embedding_eps, "tcp://127.0.0.1:5555,tcp://127.0.0.1:5556", 1,
           SS_CFG_MAX_LIST, S_ENDPOINT | S_CLUSTER, "embedding PS endpoints, one per shard"),
    K_STRS("cluster.sync", sync_eps, "tcp://127.0.0.1:5560", 0, SS_CFG_MAX_LIST,
           S_ENDPOINT | S_CLUSTER, "sync PS endpoints holding the EASGD center, one per shard"),
    K_STRS("cluster.trainers", trainer_eps, "tcp://127.0.0.1:5570,tcp://127.0.0.1:5571", 1,
           SS_CFG_MAX_LIST, S_ENDPOINT | S_CLUSTER,
           "trainer peer endpoints for allreduce, one per rank"),
    K_STRS("cluster.trainer_admin", trainer_admin_eps, "", 0, SS_CFG_MAX_LIST, S_ENDPOINT,
           "trainer admin endpoints (shadow-ctl ping, stats, config get --live), one per "
           "rank, or none; scripts/shadow-launch picks free ports"),
    K_STR("cluster.bind", cluster_bind, "",
          "what this host's processes bind: '*', an interface or an IP; '' = the address "
          "their endpoint advertises (a host name resolved to an address of this host)"),
    K_ENUM("cluster.transport", cluster_transport, "auto", s_transport_names, 0,
           "what scripts/shadow-launch gives processes that share a host: auto (ipc:// "
           "endpoints when the whole job runs on one host) or tcp"),

    K_INT("limits.max_message_bytes", max_message_bytes, "67108864", 4096, S_P2(31), 0,
          "largest message accepted, bytes, 4096..2^31"),
    K_INT("limits.request_timeout_ms", request_timeout_ms, "10000", 10, 600000, 0,
          "how long a client waits for a reply, ms, 10..600000"),
    K_INT("limits.max_keys_per_request", max_keys_per_request, "1048576", 1, S_P2(26), 0,
          "most keys in one lookup or update request, 1..2^26"),
    K_INT("limits.recovery_timeout_ms", recovery_timeout_ms, "60000", 0, 3600000, 0,
          "how long a trainer retries lookups to a PS that stopped answering, ms, 0 = never"),

    K_INT("ps.threads", ps_threads, "1", 1, 64, 0, "service threads per PS, 1..64"),
    K_INT("ps.stripes", ps_stripes, "64", 1, 4096, S_POW2,
          "lock stripes of the embedding map, a power of two in 1..4096"),

    K_INT("tables.count", n_tables, "26", 1, 1024, S_CLUSTER,
          "number of embedding tables (categorical fields), 1..1024"),
    K_ENUM("tables.optimizer", optimizer, "rowwise_adagrad", s_opt_names, S_CLUSTER,
           "embedding optimizer: sgd, adagrad or rowwise_adagrad"),
    K_DBL("tables.lr", table_lr, "0.1", 0, 100, S_MINX, "embedding learning rate, (0, 100]"),
    K_DBL("tables.eps", table_eps, "1e-8", 0, 1, S_MINX, "Adagrad epsilon, (0, 1]"),
    K_DBL("tables.initial_accumulator", table_init_acc, "1e-3", 0, 1e6, 0,
          "Adagrad accumulator of a new row, [0, 1e6]"),
    K_DBL("tables.init_scale", table_init_scale, "0.01", 0, 1, 0,
          "new rows are uniform in +-init_scale, [0, 1] (0: all-zero rows)"),
    K_DBL("tables.l2", table_l2, "0", 0, 100, 0,
          "L2 penalty of embedding rows, applied when a push touches a row, [0, 100]"),
    K_INT("tables.capacity_rows", capacity_rows, "10000000", 1, S_P2(40), 0,
          "rows per embedding shard, all tables together, 1..2^40"),
    K_INT("tables.admit_after", admit_after, "3", 0, 255, 0,
          "pushes a key needs before it gets a stored row, 0..255; 0 and 1 = at first touch"),
    K_INT("tables.admit_sketch_bytes", admit_sketch_bytes, "8388608", 4096, S_P2(36), 0,
          "memory of the admission counters of the job, split evenly over the embedding "
          "shards (each counts its share of the keys; 4096 a shard at least), bytes, 4096..2^36"),
    K_INT("tables.ttl_s", ttl_s, "0", 0, S_P2(31), 0,
          "delete embedding rows untouched for this many seconds, 0 = never"),
    K_INT("tables.max_memory_bytes", max_memory_bytes, "0", 0, S_P2(46), 0,
          "bytes an embedding shard may use, least recently used rows evicted, 0 = no bound"),

    K_INT("model.embedding_dim", embedding_dim, "16", 1, 1024, S_CLUSTER,
          "embedding width, 1..1024"),
    {.name = "model.first_order", .type = SS_CFG_T_BOOL, .flags = S_CLUSTER,
     S_FIELD(ss_cfg, first_order), .def = "true",
     .help = "first-order terms: a weight per categorical value (rows of embedding_dim + 1 "
             "floats) and a linear term on the dense features"},
    K_INTS("model.bottom_mlp", bottom_mlp, "64,16", 1, 65536, 1, 16, S_CLUSTER,
           "bottom MLP layer widths; the last equals model.embedding_dim"),
    K_INTS("model.top_mlp", top_mlp, "64,1", 1, 65536, 1, 16, S_CLUSTER,
           "top MLP layer widths; the last is 1 (the logit)"),
    K_ENUM("model.optimizer", dense_optimizer, "adagrad", s_dense_opt_names, 0,
           "dense optimizer: sgd or adagrad"),
    K_DBL("model.lr", dense_lr, "0.05", 0, 100, S_MINX, "dense learning rate, (0, 100]"),
    K_DBL("model.l2", dense_l2, "0", 0, 100, 0,
          "L2 weight decay of the dense parameters, in each worker update, [0, 100]"),
    K_INT("model.warmup_examples", warmup_examples, "2000", 0, S_P2(62), 0,
          "dense lr ramps linearly from 0 over this many examples per trainer, 0 = off"),
    K_DBL("model.adagrad_floor", adagrad_floor, "0.1", 0, 100, 0,
          "dense Adagrad: each weight's denominator is at least the root of this times "
          "the mean accumulator of its tensor (layer weights, bias), [0, 100]; 0 = off"),
    K_INT("model.adagrad_floor_examples", adagrad_floor_examples, "4000", 0, S_P2(62), 0,
          "model.adagrad_floor fades linearly to 0 over this many examples per trainer, "
          "0 = the whole run"),
    K_DBL("model.dense_average", dense_average, "0.25", 0, 1, S_MAXX,
          "score and keep the average of the dense model over the last this fraction of "
          "each epoch (Polyak; every trainer's, with sync on), [0, 1); 0 = off"),
    K_ENUM("model.pooling", pooling, "sum", s_pooling_names, 0,
           "how a field's weighted values combine into its embedding input: sum, mean "
           "(divided by their count) or sqrtn (by the root of the sum of squared weights)"),
    K_STRS("model.field_pooling", field_pooling, "", 0, SS_CFG_MAX_LIST, 0,
           "per-field exceptions to model.pooling: FIELD=MODE entries, fields numbered from 0 "
           "in table order (libffm: the field id)"),
    K_ENUM("model.precision", precision, "auto", s_precision_names, 0,
           "number format of the dense layers' products: fp32, bf16 (rounded inputs, fp32 "
           "sums, where the CPU has bf16) or auto (bf16 where the CPU has it, else fp32)"),

    K_INT("trainer.workers", workers, "2", 1, 64, 0, "Hogwild worker threads per trainer, 1..64"),
    K_INT("trainer.io_threads", io_threads, "0", 0, 64, 0,
          "ZeroMQ I/O threads per trainer (its workers' sockets share them), 0..64, "
          "0 = auto: one per 4 workers, at least 1"),
    K_BOOL("trainer.merge_requests", merge_requests, "true",
           "the workers of a trainer share one path to each PS, whose requests merge their "
           "batches (one per PS per round: docs/requests.md); false: a path per worker"),
    K_INT("trainer.round_batches", round_batches, "1", 1, 8, 0,
          "batches of each worker a round of requests carries at most, 1..8 (a worker keeps "
          "this many + 1 looked up ahead and may miss its own last this many pushes)"),
    K_INT("trainer.batch_size", batch_size, "128", 1, 65536, 0,
          "examples per worker batch, 1..65536"),
    K_INT("trainer.epochs", epochs, "2", 1, 1000, 0, "passes over data.train, 1..1000"),
    K_INT("trainer.max_examples", max_examples, "0", 0, S_P2(62), 0,
          "stop after this many examples per trainer, 0 = all"),
    K_INT("trainer.eval_every", eval_every, "1", 0, 1000, 0,
          "score the validation split (data.valid, data.valid_fraction; else data.eval) "
          "every this many epochs and keep the best model, 0 = at the end"),
    K_INT("trainer.eval_every_examples", eval_every_examples, "0", 0, S_P2(62), 0,
          "score it every this many examples per trainer instead, 0 = off"),
    K_INT("trainer.patience", patience, "0", 0, 1000, 0,
          "stop after this many evals without a better NE (validation, else eval), "
          "0 = never"),
    K_INT("trainer.barrier_timeout_s", barrier_timeout_s, "600", 1, 86400, 0,
          "longest wait for the other trainers at the end of a segment, s, 1..86400"),

    K_STRS("data.train", train_files, "", 0, SS_CFG_MAX_LIST, 0,
           "training files or globs; relative to the job file's folder when written there"),
    K_STRS("data.eval", eval_files, "", 0, SS_CFG_MAX_LIST, 0,
           "held-out evaluation files or globs; relative as data.train"),
    K_STRS("data.valid", valid_files, "", 0, SS_CFG_MAX_LIST, 0,
           "validation files or globs: keep-best and patience read them, data.eval is "
           "scored on the kept model; relative as data.train"),
    K_DBL("data.valid_fraction", valid_fraction, "0", 0, 0.5, 0,
          "set this fraction of data.train's lines aside by a hash of the line as the "
          "validation split instead of data.valid, [0, 0.5]; 0 = none"),
    K_ENUM("data.format", data.format, "criteo_tsv", s_format_names, S_CLUSTER,
           "input format: criteo_tsv, csv, libsvm or libffm"),
    K_STRS("data.columns", data.columns, "", 0, SS_CFG_MAX_LIST, S_CLUSTER,
           "criteo_tsv/csv: each column's role: label, dense, categorical, multi or ignore; "
           "ROLE*N repeats; empty = label, dense*13, categorical*26"),
    K_STR("data.delimiter", data.delimiter_text, ",",
          "csv: the field separator, one character or tab"),
    K_ENUM("data.header", data.header, "auto", s_header_names, 0,
           "csv: the first line of each file is a header: auto, true or false"),
    K_STR("data.multi_separator", data.multi_text, "|",
          "separator of the values of a multi column, one character"),
    K_INT("data.fields", data.fields, "0", 0, 1024, S_CLUSTER,
          "libffm: number of fields (ids 0..N-1), one embedding table each; 0 = unset"),
    K_BOOL("data.labels", data.labels, "true",
           "the lines hold a label; false: criteo_tsv without its first column, csv "
           "without a label column, libsvm/libffm lines whose first token is an item "
           "(prediction only: training and --eval-only refuse it)"),
    K_DBL("data.max_bad_fraction", data.max_bad_fraction, "0.01", 0, 1, 0,
          "most bad lines per line read before a run fails, [0, 1]"),

    K_ENUM("sync.algorithm", sync_algorithm, "s-ma", ss_sync_names, 0,
           "dense sync: none" SS_SYNC_TABLE(S_SYNC_HELP) " (the table: common/ss_sync.h)"),
    K_DBL("sync.alpha", sync_alpha, "-1", 0, 1, S_MINX | S_NEG1,
          "EASGD moving rate, (0, 1], -1 = 0.9/N"),
    K_DBL("sync.block_momentum", sync_block_momentum, "-1", 0, 1, S_MAXX | S_NEG1,
          "BMUF block momentum, [0, 1), -1 = 1-1/N"),
    K_DBL("sync.block_lr", sync_block_lr, "1.0", 0, 10, S_MINX,
          "BMUF block learning rate, (0, 10]"),
    K_BOOL("sync.nesterov", sync_nesterov, "true", "BMUF Nesterov-style update"),
    K_ENUM("sync.writeback", sync_writeback, "delta", s_writeback_names, 0,
           "shadow write-back: delta (keep concurrent updates) or overwrite"),
    K_INT("sync.gap", sync_gap, "10", 1, 1000000000, 0,
          "foreground algorithms: iterations between syncs, 1..1e9"),
    K_INT("sync.min_interval_ms", sync_min_interval_ms, "0", 0, 3600000, 0,
          "shadow algorithms: least time between rounds, ms, 0..3600000"),
    K_DBL("sync.cpu_share", sync_cpu_share, "0.02", 0, 1, 0,
          "shadow algorithms: most CPU of one core the shadow thread uses, [0, 1], 0 = no limit"),
    K_INT("sync.timeout_ms", sync_timeout_ms, "5000", 10, 600000, 0,
          "allreduce round timeout (x2: an empty sync PS's wait for replicas), ms, 10..600000"),
    {.name = "sync.groups", .type = SS_CFG_T_GROUPS, .def = "",
     .help = "per-component sync rules: [{component: bottom|top, algorithm: ...}]"},

    K_DBL("metrics.interval_s", metrics_interval_s, "2.0", 0.1, 3600, 0,
          "seconds between metrics lines, [0.1, 3600]"),
    K_INT("metrics.port", metrics_port, "0", 0, 65535, 0,
          "first port of the Prometheus endpoints (one per process), 0 = none"),
    K_INTS("metrics.ports", metrics_ports, "", 0, 65535, 0, SS_CFG_MAX_LIST, 0,
           "each process's Prometheus port (embedding, sync, trainers; 0 = none), or none "
           "for metrics.port's rule; scripts/shadow-launch picks free ones"),

    K_STR("checkpoint.dir", ckpt_dir, "", "checkpoint folder, empty = RUN_DIR/ckpt"),
    K_DBL("checkpoint.interval_s", ckpt_interval_s, "30", 0, 86400, 0,
          "seconds between a PS's recovery checkpoints, 0 = none, [0, 86400]"),

    /* security: CURVE keys (common/ss_auth.h) and per-peer bounds */
    K_BOOL("security.curve", security.curve, "false",
           "encrypt and authenticate every socket with ZeroMQ CURVE (keys below)"),
    K_STR("security.server_key", security.server_key, "",
          "secret key file of the servers (PSs, trainers' allreduce), from shadow-ctl keygen"),
    K_STR("security.server_public", security.server_public, "",
          "public key file of the servers; clients without security.server_key need it"),
    K_STR("security.client_key", security.client_key, "",
          "secret key file this process connects with (trainers, shadow-ctl)"),
    K_STR("security.authorized", security.authorized, "",
          "file of the client public keys allowed to connect, one per line"),
    K_STR("security.admin_keys", security.admin_keys, "",
          "file of the public keys allowed SHUTDOWN, CHECKPOINT and INIT; empty = every key"),
    K_INT("security.max_in_flight", security.max_in_flight, "8", 1, 1024, 0,
          "requests (and replies) queued per connection, 1..1024; replies beyond are dropped"),
    K_INT("security.max_connections", security.max_connections, "4096", 1, S_P2(20), 0,
          "client connections a PS takes at once (its open-file limit), 1..2^20"),
    K_STR("security.admin_token_file", security.admin_token_file, "",
          "file of a secret that SHUTDOWN, CHECKPOINT and INIT must carry; empty = none"),
    K_DBL("security.max_abs_value", security.max_abs_value, "1e8", 0, 3.4e38, S_MINX,
          "largest magnitude a PS accepts in a gradient, INIT or ELASTIC, (0, 3.4e38]"),
    K_STR("security.token_file", security.token_file, "",
          "file of a secret every connection must show at its handshake (ZeroMQ PLAIN) "
          "when security.curve is off; empty = none"),
};

#define S_N_KEYS (sizeof s_keys / sizeof s_keys[0])

/* The fields of one sync.groups entry, checked like top-level keys. */
static const struct ss_cfg_key s_group_keys[] = {
    {.name = "component", .type = SS_CFG_T_ENUM, .flags = S_TEXT, S_FIELD(ss_sync_group, component),
     .names = s_component_names, .help = "bottom or top (required)"},
    {.name = "algorithm", .type = SS_CFG_T_ENUM, S_FIELD(ss_sync_group, algorithm),
     .names = ss_sync_names, .help = "as sync.algorithm (required)"},
    {.name = "alpha", .type = SS_CFG_T_DBL, .flags = S_MINX | S_NEG1, S_FIELD(ss_sync_group, alpha),
     .dmin = 0, .dmax = 1, .inherit = "sync.alpha",
     .help = "as sync.alpha; default: the value of sync.alpha"},
    {.name = "block_momentum", .type = SS_CFG_T_DBL, .flags = S_MAXX | S_NEG1,
     S_FIELD(ss_sync_group, block_momentum), .dmin = 0, .dmax = 1,
     .inherit = "sync.block_momentum",
     .help = "as sync.block_momentum; default: the value of sync.block_momentum"},
    {.name = "block_lr", .type = SS_CFG_T_DBL, .flags = S_MINX, S_FIELD(ss_sync_group, block_lr),
     .dmin = 0, .dmax = 10, .inherit = "sync.block_lr",
     .help = "as sync.block_lr; default: the value of sync.block_lr"},
};

#define S_N_GROUP_KEYS (sizeof s_group_keys / sizeof s_group_keys[0])

/* ---------------------------------------------------------------- helpers */

/* Format "key KEY: ..." into msg (as ss_cfg_why, with a va_list). */
static void s_vwhy(char *msg, size_t n, const char *key, const char *fmt, va_list ap)
{
    int w = snprintf(msg, n, "key %s: ", key);

    if (w >= 0 && (size_t)w < n)
        vsnprintf(msg + w, n - (size_t)w, fmt, ap);
}

int ss_cfg_why(char *msg, size_t n, const char *key, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    s_vwhy(msg, n, key, fmt, ap);
    va_end(ap);
    return -1;
}

/* Shortest "%g" text of v that reads back as exactly v ("0.05", "1e-08"),
 * without an exponent for whole parts below 1e17 ("100", not "1e+02"). */
static void s_fmt_dbl(double v, char *out, size_t n)
{
    int prec = 1;

    while (prec < 17) {
        snprintf(out, n, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            break;
        prec++;
    }
    if (fabs(v) >= 1 && fabs(v) < 1e17) {
        int digits = (int)floor(log10(fabs(v))) + 1;
        if (digits > prec)
            prec = digits;
    }
    snprintf(out, n, "%.*g", prec, v);
}

/* Output buffer that measures what did not fit (curl dynbuf-like). */
struct s_buf {
    char *p;     /* destination */
    size_t cap;  /* its size */
    size_t len;  /* bytes wanted so far; > cap - 1 means truncated */
};

static void s_putf(struct s_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void s_putf(struct s_buf *b, const char *fmt, ...)
{
    size_t room = b->len < b->cap ? b->cap - b->len : 0;
    va_list ap;

    va_start(ap, fmt);
    int w = vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (w > 0)
        b->len += (size_t)w;
}

const struct ss_cfg_key *ss_cfg_find_key(const char *name)
{
    for (size_t i = 0; i < S_N_KEYS; i++)
        if (strcmp(s_keys[i].name, name) == 0)
            return &s_keys[i];
    return NULL;
}

/* Whether name is a section, a strict dotted prefix of some key ("tables"). */
int ss_cfg_is_section(const char *name)
{
    size_t n = strlen(name);

    for (size_t i = 0; i < S_N_KEYS; i++)
        if (strncmp(s_keys[i].name, name, n) == 0 && s_keys[i].name[n] == '.')
            return 1;
    return 0;
}

/* Levenshtein distance, case-insensitive, on at most SS_CFG_NAME_MAX bytes. */
static size_t s_distance(const char *a, const char *b)
{
    size_t na = strnlen(a, SS_CFG_NAME_MAX), nb = strnlen(b, SS_CFG_NAME_MAX);
    size_t row[SS_CFG_NAME_MAX + 1];

    for (size_t j = 0; j <= nb; j++)
        row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j];
            size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            size_t best = diag + cost;
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

/* Offer cand as the suggestion for name if it is the closest so far. */
static void s_consider(const char *name, const char *cand, size_t *best, char *out, size_t n)
{
    size_t d = s_distance(name, cand);

    if (d < *best) {
        *best = d;
        snprintf(out, n, "%s", cand);
    }
}

/* Whether a suggestion at edit distance d from name is worth showing. */
static int s_close_enough(size_t d, const char *name)
{
    return d <= 2 && 2 * d < strlen(name);
}

/* Suggest the closest known name with as many dotted parts as name: a key or
 * a section. Writes " (did you mean X?)" to out, or "" if nothing is close. */
static void s_suggest(const char *name, char *out, size_t n)
{
    size_t parts = 1, best = SIZE_MAX;
    char cand[SS_CFG_NAME_MAX], pick[SS_CFG_NAME_MAX] = "";

    for (const char *p = name; *p; p++)
        parts += *p == '.';
    for (size_t i = 0; i < S_N_KEYS; i++) {
        const char *k = s_keys[i].name;
        size_t seen = 0, len = 0;
        while (k[len] && !(k[len] == '.' && ++seen == parts))
            len++;
        if (seen + 1 < parts && !k[len])
            continue;  /* key has fewer parts than name */
        snprintf(cand, sizeof cand, "%.*s", (int)len, k);
        s_consider(name, cand, &best, pick, sizeof pick);
    }
    if (s_close_enough(best, name))
        snprintf(out, n, " (did you mean %s?)", pick);
    else if (n)
        out[0] = '\0';
}

size_t ss_cfg_key_index(const struct ss_cfg_key *k)
{
    return (size_t)(k - s_keys);
}

int ss_cfg_group_key(const char *fname, const struct ss_cfg_key **gk, char *pick, size_t n)
{
    size_t best = SIZE_MAX;

    for (size_t j = 0; j < S_N_GROUP_KEYS; j++) {
        if (strcmp(s_group_keys[j].name, fname) == 0) {
            *gk = &s_group_keys[j];
            return (int)j;
        }
    }
    if (n)
        pick[0] = '\0';
    for (size_t c = 0; c < S_N_GROUP_KEYS; c++)
        s_consider(fname, s_group_keys[c].name, &best, pick, n);
    if (!s_close_enough(best, fname) && n)
        pick[0] = '\0';
    return -1;
}

/* Text for "expected ..." in messages: "an integer", "one of a, b". */
void ss_cfg_expected(const struct ss_cfg_key *k, char *out, size_t n)
{
    struct s_buf b = {out, n, 0};

    switch (k->type) {
    case SS_CFG_T_INT: s_putf(&b, "an integer"); break;
    case SS_CFG_T_DBL: s_putf(&b, "a number"); break;
    case SS_CFG_T_BOOL: s_putf(&b, "a boolean (true/false/yes/no/on/off/1/0)"); break;
    case SS_CFG_T_STR: s_putf(&b, "a string"); break;
    case SS_CFG_T_STRS: s_putf(&b, "a list of strings"); break;
    case SS_CFG_T_INTS: s_putf(&b, "a list of integers"); break;
    case SS_CFG_T_GROUPS: s_putf(&b, "a list of mappings"); break;
    case SS_CFG_T_ENUM:
        s_putf(&b, "one of");
        for (size_t i = 0; k->names[i]; i++)
            s_putf(&b, "%s %s", i ? "," : "", k->names[i]);
        break;
    }
}

/* ------------------------------------------------------- value checkers */

int ss_cfg_parse_i64(const char *s, int64_t *v)
{
    char *end;

    if (!*s || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || *end)
        return -1;
    *v = x;
    return 0;
}

static int s_parse_dbl(const char *s, double *v)
{
    char *end;

    if (!*s || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || *end || !isfinite(x))
        return -1;
    *v = x;
    return 0;
}

static int s_parse_bool(const char *s, int *v)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};

    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *v = 1;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *v = 0;
            return 0;
        }
    }
    return -1;
}

/* Check an integer against k's limits; key names it in msg. */
static int s_check_int(const struct ss_cfg_key *k, const char *key, int64_t v, char *msg, size_t n)
{
    if (v < k->imin)
        return ss_cfg_why(msg, n, key, "value %" PRId64 " is below the minimum %" PRId64, v,
                          k->imin);
    if (v > k->imax)
        return ss_cfg_why(msg, n, key, "value %" PRId64 " is above the maximum %" PRId64, v,
                          k->imax);
    if ((k->flags & S_POW2) && (v & (v - 1)) != 0)
        return ss_cfg_why(msg, n, key, "value %" PRId64 " is not a power of two", v);
    return 0;
}

/* Check a double against k's limits (exclusive ends, -1 allowed). */
static int s_check_dbl(const struct ss_cfg_key *k, const char *key, double v, char *msg, size_t n)
{
    char vs[32], lo[32], hi[32];
    const char *alt = (k->flags & S_NEG1) ? " (or -1 for the default)" : "";

    if ((k->flags & S_NEG1) && v == -1.0)
        return 0;
    s_fmt_dbl(v, vs, sizeof vs);
    s_fmt_dbl(k->dmin, lo, sizeof lo);
    s_fmt_dbl(k->dmax, hi, sizeof hi);
    if (v < k->dmin)
        return ss_cfg_why(msg, n, key, "value %s is below the minimum %s%s", vs, lo, alt);
    if (v == k->dmin && (k->flags & S_MINX))
        return ss_cfg_why(msg, n, key, "value %s must be above %s%s", vs, lo, alt);
    if (v > k->dmax)
        return ss_cfg_why(msg, n, key, "value %s is above the maximum %s%s", vs, hi, alt);
    if (v == k->dmax && (k->flags & S_MAXX))
        return ss_cfg_why(msg, n, key, "value %s must be below %s%s", vs, hi, alt);
    return 0;
}

static int s_check_endpoint(const char *key, const char *s, char *msg, size_t n)
{
    static const char *const schemes[] = {"tcp://", "ipc://", "inproc://"};

    for (size_t i = 0; i < 3; i++) {
        size_t len = strlen(schemes[i]);
        if (strncmp(s, schemes[i], len) == 0 && s[len])
            return 0;
    }
    return ss_cfg_why(msg, n, key, "expected an endpoint starting with tcp://, ipc:// or "
                      "inproc://, got '%.64s'", s);
}

/* Parse text as scalar key k (shown as key) into field. 0 or -1 with msg;
 * every text that does not parse as k's type breaks out of the switch to the
 * one "expected ..., got ..." message. */
int ss_cfg_parse_scalar(const struct ss_cfg_key *k, const char *key, const char *text,
                        void *field, char *msg, size_t n)
{
    char exp[160];
    int64_t i;
    double d;
    int b;

    ss_cfg_expected(k, exp, sizeof exp);
    switch (k->type) {
    case SS_CFG_T_INT:
        if (ss_cfg_parse_i64(text, &i) < 0)
            break;
        if (s_check_int(k, key, i, msg, n) < 0)
            return -1;
        *(int64_t *)field = i;
        return 0;
    case SS_CFG_T_DBL:
        if (s_parse_dbl(text, &d) < 0)
            break;
        if (s_check_dbl(k, key, d, msg, n) < 0)
            return -1;
        *(double *)field = d;
        return 0;
    case SS_CFG_T_BOOL:
        if (s_parse_bool(text, &b) < 0)
            break;
        *(int *)field = b;
        return 0;
    case SS_CFG_T_STR:
        if (strlen(text) >= k->size)
            return ss_cfg_why(msg, n, key, "value is too long (%zu bytes, at most %zu)",
                              strlen(text), k->size - 1);
        memcpy(field, text, strlen(text) + 1);
        return 0;
    case SS_CFG_T_ENUM:
        for (int v = 0; k->names[v]; v++) {
            if (strcmp(text, k->names[v]) != 0)
                continue;
            if (k->flags & S_TEXT)
                snprintf(field, k->size, "%s", k->names[v]);
            else
                *(int *)field = v;
            return 0;
        }
        break;
    default:
        break;
    }
    return ss_cfg_why(msg, n, key, "expected %s, got '%.64s'", exp, text);
}

/* Parse text as entry idx of list key k into the list at field. */
int ss_cfg_parse_entry(const struct ss_cfg_key *k, size_t idx, const char *text, void *field,
                       char *msg, size_t n)
{
    char key[SS_CFG_NAME_MAX + 24];
    int64_t v;

    snprintf(key, sizeof key, "%s.%zu", k->name, idx);
    if (idx >= k->nmax)
        return ss_cfg_why(msg, n, k->name, "has more than %zu entries", k->nmax);
    if (k->type == SS_CFG_T_INTS) {
        struct ss_int_list *l = field;
        if (ss_cfg_parse_i64(text, &v) < 0)
            return ss_cfg_why(msg, n, key, "expected an integer, got '%.64s'", text);
        if (s_check_int(k, key, v, msg, n) < 0)
            return -1;
        l->v[idx] = v;
        l->n = idx + 1;
        return 0;
    }
    struct ss_str_list *l = field;
    if (!*text)
        return ss_cfg_why(msg, n, key, "empty entry");
    if (strlen(text) >= SS_CFG_MAX_STR)
        return ss_cfg_why(msg, n, key, "value is too long (%zu bytes, at most %d)", strlen(text),
                          SS_CFG_MAX_STR - 1);
    if ((k->flags & S_ENDPOINT) && s_check_endpoint(key, text, msg, n) < 0)
        return -1;
    memcpy(l->v[idx], text, strlen(text) + 1);
    l->n = idx + 1;
    return 0;
}

/* Check the entry count of list key k once it is complete. */
int ss_cfg_check_count(const struct ss_cfg_key *k, size_t count, char *msg, size_t n)
{
    if (count < k->nmin)
        return ss_cfg_why(msg, n, k->name, "needs at least %zu %s", k->nmin,
                          k->nmin == 1 ? "entry" : "entries");
    return 0;
}

static char *s_trim(char *s)
{
    size_t n = strlen(s);

    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    while (isspace((unsigned char)*s))
        s++;
    return s;
}

/* Empty list key k's list at field. */
void ss_cfg_list_clear(const struct ss_cfg_key *k, void *field)
{
    if (k->type == SS_CFG_T_INTS)
        ((struct ss_int_list *)field)->n = 0;
    else
        ((struct ss_str_list *)field)->n = 0;
}

/* Apply comma-separated text ("a, b,c"; "" = empty) to list key k. */
static int s_apply_csv(const struct ss_cfg_key *k, const char *text, void *field, char *msg,
                       size_t n)
{
    char *copy = ss_strdup(text), *p = copy;
    size_t idx = 0;
    int rc = 0;

    ss_cfg_list_clear(k, field);
    if (*s_trim(copy)) {
        for (;;) {
            char *comma = strchr(p, ',');
            if (comma)
                *comma = '\0';
            rc = ss_cfg_parse_entry(k, idx++, s_trim(p), field, msg, n);
            if (rc < 0 || !comma)
                break;
            p = comma + 1;
        }
    }
    if (rc == 0)
        rc = ss_cfg_check_count(k, idx, msg, n);
    ss_free(copy);
    return rc;
}

/* Apply --set style text to key k of cfg: scalars, comma lists, "" groups. */
int ss_cfg_apply_text(const struct ss_cfg_key *k, const char *text, struct ss_cfg *cfg,
                      char *msg, size_t n)
{
    void *field = (char *)cfg + k->off;

    switch (k->type) {
    case SS_CFG_T_STRS:
    case SS_CFG_T_INTS:
        return s_apply_csv(k, text, field, msg, n);
    case SS_CFG_T_GROUPS:
        if (*text)
            return ss_cfg_why(msg, n, k->name, "expected a list of mappings, got '%.64s'", text);
        cfg->n_sync_groups = 0;
        return 0;
    default:
        return ss_cfg_parse_scalar(k, k->name, text, field, msg, n);
    }
}

/* ------------------------------------------------------------ public */

static void s_data_defaults(struct ss_cfg *cfg);

void ss_cfg_defaults(struct ss_cfg *cfg)
{
    char msg[SS_CFG_MSG_MAX];

    ss_assert(cfg);
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < S_N_KEYS; i++) {
        int rc = ss_cfg_apply_text(&s_keys[i], s_keys[i].def, cfg, msg, sizeof msg);
        ss_assert(rc == 0);
    }
    s_data_defaults(cfg);
}

int ss_cfg_trainer_loss_allowed(const struct ss_cfg *cfg)
{
    struct ss_sync_traits t;
    if (cfg->allow_trainer_loss != SS_LOSS_AUTO)
        return cfg->allow_trainer_loss == SS_LOSS_TRUE;
    ss_sync_job_traits(cfg, &t);
    return t.lose_trainer;
}

const char *ss_sync_algo_name(int algo)
{
    return ss_sync_name(algo);
}

const char *ss_opt_name(int opt)
{
    return opt >= 0 && opt <= SS_OPT_ROWWISE_ADAGRAD ? s_opt_names[opt] : "?";
}

const char *ss_pooling_name(int mode)
{
    return mode >= 0 && mode <= SS_POOL_SQRTN ? s_pooling_names[mode] : "?";
}

int ss_cfg_key_info(size_t i, const char **name, const char **def, const char **help)
{
    if (i >= S_N_KEYS)
        return SS_E_NOTFOUND;
    if (name)
        *name = s_keys[i].name;
    if (def)
        *def = s_keys[i].def;
    if (help)
        *help = s_keys[i].help;
    return 0;
}

/* --------------------------------------------------------- error output */

/* Write "WHERE: msg" to the caller's buffer; WHERE from o. SS_E_CONFIG. */
static int s_fail_at(struct ss_cfg_loader *ld, const struct ss_cfg_origin *o, const char *msg)
{
    if (o->how == SS_CFG_FROM_SET)
        snprintf(ld->err, ld->err_len, "--set %s: %s", o->set, msg);
    else if (o->how == SS_CFG_FROM_FILE && ld->file)
        snprintf(ld->err, ld->err_len, "%s:%zu: %s", ld->file, o->line, msg);
    else
        snprintf(ld->err, ld->err_len, "%s: %s", ld->file ? ld->file : "(defaults)", msg);
    return SS_E_CONFIG;
}

/* Fail at line of the file, or at the current --set. */
int ss_cfg_fail(struct ss_cfg_loader *ld, size_t line, const char *msg)
{
    struct ss_cfg_origin o = {ld->set ? SS_CFG_FROM_SET : SS_CFG_FROM_FILE, line, ld->set};

    return s_fail_at(ld, &o, msg);
}

/* Fail with "key KEY: fmt..." at line. */
int ss_cfg_failf(struct ss_cfg_loader *ld, size_t line, const char *key, const char *fmt, ...)
{
    char msg[SS_CFG_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    s_vwhy(msg, sizeof msg, key, fmt, ap);
    va_end(ap);
    return ss_cfg_fail(ld, line, msg);
}

int ss_cfg_fail_unknown(struct ss_cfg_loader *ld, size_t line, const char *name)
{
    char hint[SS_CFG_NAME_MAX + 24];

    s_suggest(name, hint, sizeof hint);
    return ss_cfg_failf(ld, line, name, "unknown key%s", hint);
}

/* Apply one "a.b.c=value" override. */
static int s_apply_set(struct ss_cfg_loader *ld, const char *set)
{
    char name[SS_CFG_NAME_MAX], msg[SS_CFG_MSG_MAX];
    const char *eq = strchr(set, '=');
    const struct ss_cfg_key *k;
    int rc = 0;

    ld->set = set;
    if (!eq)
        return ss_cfg_fail(ld, 0, "expected key=value");
    if ((size_t)(eq - set) >= sizeof name)
        return ss_cfg_failf(ld, 0, "(too long)", "unknown key");
    snprintf(name, sizeof name, "%.*s", (int)(eq - set), set);
    char *key = s_trim(name);
    if (!(k = ss_cfg_find_key(key)) && ss_cfg_is_section(key))
        return ss_cfg_failf(ld, 0, key, "is a section; set one of its keys (%s.NAME)", key);
    if (!k)
        return ss_cfg_fail_unknown(ld, 0, key);
    char *copy = ss_strdup(eq + 1), *value = s_trim(copy);
    int list = k->type == SS_CFG_T_STRS || k->type == SS_CFG_T_INTS;
    if ((list && value[0] == '[') || (k->type == SS_CFG_T_GROUPS && value[0]))
        rc = ss_cfg_yaml_set(ld, k, value);
    else if (ss_cfg_apply_text(k, value, ld->cfg, msg, sizeof msg) < 0)
        rc = ss_cfg_fail(ld, 0, msg);
    ss_free(copy);
    if (rc == 0)
        ld->orig[k - s_keys] = (struct ss_cfg_origin){SS_CFG_FROM_SET, 0, set};
    return rc;
}

/* ------------------------------------------------------- cross-key checks */

static size_t s_index(const char *name)
{
    const struct ss_cfg_key *k = ss_cfg_find_key(name);

    ss_assert(k);
    return (size_t)(k - s_keys);
}

/* Fail naming key idx, where its value came from. */
static int s_fail_key(struct ss_cfg_loader *ld, size_t idx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int s_fail_key(struct ss_cfg_loader *ld, size_t idx, const char *fmt, ...)
{
    char msg[SS_CFG_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    s_vwhy(msg, sizeof msg, s_keys[idx].name, fmt, ap);
    va_end(ap);
    return s_fail_at(ld, &ld->orig[idx], msg);
}

/* Give every sync.groups field an entry does not set the value of the
 * top-level key it inherits (sync.alpha, ...), after the file and every
 * --set, so the order of keys and overrides does not matter. */
static void s_inherit_groups(struct ss_cfg_loader *ld)
{
    struct ss_cfg *c = ld->cfg;

    for (size_t i = 0; i < c->n_sync_groups; i++)
        for (size_t j = 0; j < S_N_GROUP_KEYS; j++) {
            const struct ss_cfg_key *gk = &s_group_keys[j];
            if (!gk->inherit || (ld->group_given[i] & (1u << j)))
                continue;
            const struct ss_cfg_key *top = ss_cfg_find_key(gk->inherit);
            ss_assert(top && top->size == gk->size && top->type == gk->type);
            memcpy((char *)&c->sync_groups[i] + gk->off, (const char *)c + top->off, gk->size);
        }
}

/* Least tables.max_memory_bytes accepted (a bound per PS): 256 KiB per lock
 * stripe (slabs and slots of the widest rows), plus this shard's part of the
 * admission sketch when it is used (the job's split over the shards). */
static int64_t s_min_memory(const struct ss_cfg *c)
{
    return c->ps_stripes * 262144 +
           (c->admit_after >= 2
                ? ss_cfg_admit_shard_bytes(c, (uint32_t)c->embedding_eps.n)
                : 0);
}

/* Checks between keys, after the file and every --set. */
static int s_check_cross(struct ss_cfg_loader *ld)
{
    const struct ss_cfg *c = ld->cfg;
    size_t kb = s_index("model.bottom_mlp"), kd = s_index("model.embedding_dim");
    int64_t last = c->bottom_mlp.v[c->bottom_mlp.n - 1];
    struct ss_sync_traits sync;

    if (last != c->embedding_dim && ld->orig[kd].how > ld->orig[kb].how)
        return s_fail_key(ld, kd, "value %" PRId64 " differs from the last model.bottom_mlp "
                          "layer %" PRId64, c->embedding_dim, last);
    if (last != c->embedding_dim)
        return s_fail_key(ld, kb, "last layer %" PRId64 " must equal model.embedding_dim %"
                          PRId64, last, c->embedding_dim);
    last = c->top_mlp.v[c->top_mlp.n - 1];
    if (last != 1)
        return s_fail_key(ld, s_index("model.top_mlp"), "last layer %" PRId64 " must be 1",
                          last);
    if (c->max_memory_bytes && c->max_memory_bytes < s_min_memory(c))
        return s_fail_key(ld, s_index("tables.max_memory_bytes"),
                          "value %" PRId64 " is below the minimum %" PRId64 " (256 KiB for each "
                          "of the %" PRId64 " ps.stripes%s); 0 turns the bound off",
                          c->max_memory_bytes, s_min_memory(c), c->ps_stripes,
                          c->admit_after >= 2 ? ", plus this shard's part of tables.admit_sketch_bytes" : "");
    ss_sync_job_traits(c, &sync);
    if (sync.sync_ps && c->sync_eps.n == 0)
        return s_fail_key(ld, s_index("cluster.sync"),
                          "EASGD needs at least one sync endpoint");
    if (c->valid_fraction > 0 && c->valid_files.n > 0)
        return s_fail_key(ld, s_index("data.valid_fraction"),
                          "set one validation split: data.valid (files) or "
                          "data.valid_fraction (of data.train), not both");
    return 0;
}

/* ------------------------------------------------- data layout (data.*) */

/* Whether data.* key name holds another value than its default (a job file
 * may list every key with its default, as conf/local.yaml does). */
static int s_data_given(const struct ss_cfg_loader *ld, const char *name)
{
    const struct ss_cfg_key *k = ss_cfg_find_key(name);
    char got[SS_CFG_MSG_MAX];

    ss_assert(k);
    if (ss_cfg_get(ld->cfg, name, got, sizeof got) != 0)
        return 1;
    return k->type == SS_CFG_T_STRS ? got[0] != '\0' : strcmp(got, k->def) != 0;
}

/* Check and derive the data layout; a data.* key the format ignores, set to
 * another value than its default, is an error; tables.count follows the
 * layout (one table per categorical field) and, when given, must agree. */
static int s_check_data(struct ss_cfg_loader *ld)
{
    static const char *const own[] = {"data.columns", "data.delimiter", "data.header",
                                      "data.multi_separator", "data.fields"};
    struct ss_cfg *c = ld->cfg;
    struct ss_data_cfg *d = &c->data;
    char msg[SS_CFG_MSG_MAX];
    const char *bad;
    size_t kt = s_index("tables.count");

    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (s_data_given(ld, own[i]) && !ss_data_layout_applies(d->format, own[i]))
            return s_fail_key(ld, s_index(own[i]), "does not apply to data.format %s",
                              s_format_names[d->format]);
    if (ss_data_layout_derive(d, msg, sizeof msg, &bad) < 0)
        return s_fail_at(ld, &ld->orig[s_index(bad)], msg);
    if (ld->orig[kt].how != SS_CFG_FROM_DEFAULT && c->n_tables != (int64_t)d->n_fields)
        return s_fail_key(ld, kt, "%" PRId64 " tables, but data.format %s has %u categorical "
                          "field%s (one table each): leave tables.count out, or change the "
                          "data layout", c->n_tables, s_format_names[d->format], d->n_fields,
                          d->n_fields == 1 ? "" : "s");
    c->n_tables = d->n_fields;
    return 0;
}

/* Parse model.field_pooling entry idx, text "FIELD=MODE", for n_fields
 * fields ('=', not ':', so that a YAML flow list [0=mean] needs no quotes).
 * Returns 0 with *field and *mode, or -1 with msg ("key K: why"). */
static int s_pooling_entry(const char *text, size_t idx, uint32_t n_fields, uint32_t *field,
                           int *mode, char *msg, size_t n)
{
    const char *key = "model.field_pooling", *eq = strchr(text, '=');
    char *end = NULL;
    unsigned long f = 0;
    int m = 0;

    errno = 0;
    if (eq && isdigit((unsigned char)text[0]))
        f = strtoul(text, &end, 10);
    if (!eq || end != eq || errno)
        return ss_cfg_why(msg, n, key, "entry %zu '%.64s': expected FIELD=MODE, a field number "
                          "and sum, mean or sqrtn (0=mean)", idx, text);
    while (s_pooling_names[m] && strcmp(s_pooling_names[m], eq + 1) != 0)
        m++;
    if (!s_pooling_names[m])
        return ss_cfg_why(msg, n, key, "entry %zu '%.64s': unknown mode '%.32s' (expected "
                          "sum, mean or sqrtn)", idx, text, eq + 1);
    if (f >= n_fields)
        return ss_cfg_why(msg, n, key, "entry %zu '%.64s': no field %lu; the data layout has "
                          "%u categorical field%s, numbered 0..%u", idx, text, f, n_fields,
                          n_fields == 1 ? "" : "s", n_fields - 1);
    *field = (uint32_t)f;
    *mode = m;
    return 0;
}

/* Derive each field's pooling: model.pooling, then the model.field_pooling
 * overrides (after s_check_data: the field count comes from the layout). A
 * field named twice is an error. */
static int s_check_pooling(struct ss_cfg_loader *ld)
{
    struct ss_cfg *c = ld->cfg;
    const struct ss_str_list *l = &c->field_pooling;
    size_t kf = s_index("model.field_pooling");
    uint32_t n_fields = c->data.n_fields, seen[SS_CFG_MAX_LIST];
    char msg[SS_CFG_MSG_MAX];

    ss_assert(n_fields <= SS_CFG_MAX_FIELDS && l->n <= SS_CFG_MAX_LIST);
    memset(c->pooling_of, c->pooling, sizeof c->pooling_of);
    for (size_t i = 0; i < l->n; i++) {
        uint32_t f = 0;
        int mode = 0;
        if (s_pooling_entry(l->v[i], i, n_fields, &f, &mode, msg, sizeof msg) < 0)
            return s_fail_at(ld, &ld->orig[kf], msg);
        for (size_t j = 0; j < i; j++)
            if (seen[j] == f)
                return s_fail_key(ld, kf, "field %u is given twice (entries %zu and %zu)", f,
                                  j, i);
        seen[i] = f;
        c->pooling_of[f] = (uint8_t)mode;
    }
    return 0;
}

/* Put the job file's folder (the file's name up to slash, its last '/') in
 * front of path v of key idx, a char[SS_CFG_MAX_STR]. Returns 0, or
 * SS_E_CONFIG naming the key when the joined path does not fit. */
static int s_rebase(struct ss_cfg_loader *ld, size_t idx, const char *slash, char *v)
{
    char joined[SS_CFG_MAX_STR];
    int w = snprintf(joined, sizeof joined, "%.*s/%s", (int)(slash - ld->file), ld->file, v);

    if (w < 0 || (size_t)w >= sizeof joined)
        return s_fail_key(ld, idx, "'%s' relative to the job file's folder is longer than %d "
                          "bytes", v, SS_CFG_MAX_STR - 1);
    memcpy(v, joined, (size_t)w + 1);
    return 0;
}

/* Make the relative entries of list key name that came from the job file
 * relative to the job file's folder (entries from --set stay as given). */
static int s_resolve_list(struct ss_cfg_loader *ld, const char *name)
{
    size_t idx = s_index(name);
    struct ss_str_list *l = (struct ss_str_list *)((char *)ld->cfg + s_keys[idx].off);
    const char *slash = ld->file ? strrchr(ld->file, '/') : NULL;

    if (ld->orig[idx].how != SS_CFG_FROM_FILE || !slash)
        return 0;
    for (size_t i = 0; i < l->n; i++) {
        int rc = l->v[i][0] == '/' ? 0 : s_rebase(ld, idx, slash, l->v[i]);
        if (rc)
            return rc;
    }
    return 0;
}

/* The derived layout of the default data.* keys (Criteo TSV), so that
 * ss_cfg_defaults() alone gives a usable config. */
static void s_data_defaults(struct ss_cfg *cfg)
{
    char msg[SS_CFG_MSG_MAX];
    const char *bad;
    int rc = ss_data_layout_derive(&cfg->data, msg, sizeof msg, &bad);

    ss_assert(rc == 0);
    cfg->n_tables = cfg->data.n_fields;
    memset(cfg->pooling_of, cfg->pooling, sizeof cfg->pooling_of);
}

/* Make the relative path of string key name, when it came from the job file,
 * relative to the job file's folder (as s_resolve_list does for each entry). */
static int s_resolve_str(struct ss_cfg_loader *ld, const char *name)
{
    size_t idx = s_index(name);
    char *v = (char *)ld->cfg + s_keys[idx].off;
    const char *slash = ld->file ? strrchr(ld->file, '/') : NULL;

    ss_assert(s_keys[idx].type == SS_CFG_T_STR && s_keys[idx].size == SS_CFG_MAX_STR);
    if (ld->orig[idx].how != SS_CFG_FROM_FILE || !slash || !v[0] || v[0] == '/')
        return 0;
    return s_rebase(ld, idx, slash, v);
}

/* The security.* key files, relative to the job file like the data files. */
static int s_resolve_security(struct ss_cfg_loader *ld)
{
    static const char *const files[] = {"security.server_key", "security.server_public",
                                        "security.client_key", "security.authorized",
                                        "security.admin_keys", "security.admin_token_file",
                                        "security.token_file"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        int rc = s_resolve_str(ld, files[i]);
        if (rc)
            return rc;
    }
    return 0;
}

static int s_resolve_paths(struct ss_cfg_loader *ld)
{
    int rc = s_resolve_list(ld, "data.train");

    rc = rc ? rc : s_resolve_list(ld, "data.eval");
    rc = rc ? rc : s_resolve_list(ld, "data.valid");
    return rc ? rc : s_resolve_security(ld);
}

int ss_cfg_load(struct ss_cfg *cfg, const char *path, const char *const *sets, size_t n_sets,
                char *err, size_t err_len)
{
    struct ss_cfg_loader *ld;
    int rc = 0;

    ss_assert(cfg && (sets || n_sets == 0) && (err || err_len == 0));
    if (err_len)
        err[0] = '\0';
    ss_cfg_defaults(cfg);
    ld = ss_calloc(1, sizeof *ld + S_N_KEYS * sizeof ld->orig[0]);
    ld->cfg = cfg;
    ld->file = path;
    ld->err = err;
    ld->err_len = err_len;
    if (path && strlen(path) >= sizeof cfg->path) {
        rc = ss_cfg_fail(ld, 0, "path is too long");
        goto out_free;
    }
    if (path) {
        snprintf(cfg->path, sizeof cfg->path, "%s", path);
        if ((rc = ss_cfg_yaml_load_file(ld, path)) != 0)
            goto out_free;
    }
    for (size_t i = 0; i < n_sets && rc == 0; i++)
        rc = s_apply_set(ld, sets[i]);
    ld->set = NULL;
    if (rc == 0)
        s_inherit_groups(ld);
    if (rc == 0)
        rc = s_check_cross(ld);
    if (rc == 0)
        rc = s_check_data(ld);
    if (rc == 0)
        rc = s_check_pooling(ld);
    if (rc == 0)
        rc = s_resolve_paths(ld);
out_free:
    for (size_t i = 0; i < ld->n_seen; i++)
        ss_free(ld->seen[i].name);
    ss_free(ld->seen);
    ss_free(ld);
    return rc;
}

/* ------------------------------------------------------------- output */

/* Write entry i of list or group key k. */
static void s_put_entry(struct s_buf *b, const struct ss_cfg *cfg, const struct ss_cfg_key *k,
                        size_t i)
{
    const void *field = (const char *)cfg + k->off;
    char a[32], m[32], l[32];

    if (k->type == SS_CFG_T_STRS) {
        s_putf(b, "%s", ((const struct ss_str_list *)field)->v[i]);
    } else if (k->type == SS_CFG_T_INTS) {
        s_putf(b, "%" PRId64, ((const struct ss_int_list *)field)->v[i]);
    } else {
        const struct ss_sync_group *g = &cfg->sync_groups[i];
        s_fmt_dbl(g->alpha, a, sizeof a);
        s_fmt_dbl(g->block_momentum, m, sizeof m);
        s_fmt_dbl(g->block_lr, l, sizeof l);
        s_putf(b, "{component: %s, algorithm: %s, alpha: %s, block_momentum: %s, block_lr: %s}",
               g->component, ss_sync_algo_name(g->algorithm), a, m, l);
    }
}

/* Number of entries of list or group key k. */
static size_t s_count(const struct ss_cfg *cfg, const struct ss_cfg_key *k)
{
    const void *field = (const char *)cfg + k->off;

    if (k->type == SS_CFG_T_STRS)
        return ((const struct ss_str_list *)field)->n;
    if (k->type == SS_CFG_T_INTS)
        return ((const struct ss_int_list *)field)->n;
    return cfg->n_sync_groups;
}

/* Write the value of k; list entries separated by sep, inside [ ] if brackets. */
static void s_put_value(struct s_buf *b, const struct ss_cfg *cfg, const struct ss_cfg_key *k,
                        const char *sep, int brackets)
{
    const void *field = (const char *)cfg + k->off;
    char d[32];

    switch (k->type) {
    case SS_CFG_T_INT: s_putf(b, "%" PRId64, *(const int64_t *)field); break;
    case SS_CFG_T_BOOL: s_putf(b, "%s", *(const int *)field ? "true" : "false"); break;
    case SS_CFG_T_STR: s_putf(b, "%s", (const char *)field); break;
    case SS_CFG_T_DBL:
        s_fmt_dbl(*(const double *)field, d, sizeof d);
        s_putf(b, "%s", d);
        break;
    case SS_CFG_T_ENUM:
        if (k->flags & S_TEXT)
            s_putf(b, "%s", (const char *)field);
        else
            s_putf(b, "%s", k->names[*(const int *)field]);
        break;
    default:
        s_putf(b, "%s", brackets ? "[" : "");
        for (size_t i = 0; i < s_count(cfg, k); i++) {
            s_putf(b, "%s", i ? sep : "");
            s_put_entry(b, cfg, k, i);
        }
        s_putf(b, "%s", brackets ? "]" : "");
        break;
    }
}

int ss_cfg_get(const struct ss_cfg *cfg, const char *key, char *out, size_t out_len)
{
    struct s_buf b = {out, out_len, 0};
    char name[SS_CFG_NAME_MAX];
    const struct ss_cfg_key *k;
    const char *dot = strrchr(key, '.');

    ss_assert(cfg && key && (out || out_len == 0));
    if (out_len)
        out[0] = '\0';
    if ((k = ss_cfg_find_key(key)) != NULL) {
        s_put_value(&b, cfg, k, "\n", 0);
    } else {
        if (!dot || (size_t)(dot - key) >= sizeof name)
            return SS_E_NOTFOUND;
        snprintf(name, sizeof name, "%.*s", (int)(dot - key), key);
        k = ss_cfg_find_key(name);
        if (!k || (k->type != SS_CFG_T_STRS && k->type != SS_CFG_T_INTS &&
                   k->type != SS_CFG_T_GROUPS))
            return SS_E_NOTFOUND;
        if (strcmp(dot + 1, "count") == 0) {
            s_putf(&b, "%zu", s_count(cfg, k));
        } else {
            char *end;
            if (!isdigit((unsigned char)dot[1]))
                return SS_E_NOTFOUND;
            errno = 0;
            unsigned long long i = strtoull(dot + 1, &end, 10);
            if (errno || *end || i >= s_count(cfg, k))
                return SS_E_NOTFOUND;
            s_put_entry(&b, cfg, k, (size_t)i);
        }
    }
    return b.len < out_len ? 0 : SS_E_TOOBIG;
}

uint32_t ss_cfg_row_dim(const struct ss_cfg *cfg)
{
    ss_assert(cfg);
    return (uint32_t)cfg->embedding_dim + (cfg->first_order ? 1u : 0u);
}

int64_t ss_cfg_admit_shard_bytes(const struct ss_cfg *cfg, uint32_t n_shards)
{
    ss_assert(cfg);
    int64_t b = cfg->admit_sketch_bytes / (n_shards ? n_shards : 1);
    return b < 4096 ? 4096 : b;
}

uint64_t ss_cfg_cluster_hash(const struct ss_cfg *cfg)
{
    struct s_buf b = {ss_malloc(S_VALUE_MAX), S_VALUE_MAX, 0};
    uint64_t h = 0;

    ss_assert(cfg);
    for (size_t i = 0; i < S_N_KEYS; i++) {
        if (!(s_keys[i].flags & S_CLUSTER))
            continue;
        b.len = 0;
        s_putf(&b, "%s=", s_keys[i].name);
        if (s_keys[i].flags & S_ENDPOINT)  /* the shape, not how a host writes addresses */
            s_putf(&b, "%zu entries", s_count(cfg, &s_keys[i]));
        else
            s_put_value(&b, cfg, &s_keys[i], "\n", 0);
        s_putf(&b, "\n");
        ss_assert(b.len < b.cap);
        h = ss_hash_bytes(b.p, b.len, h);
    }
    ss_free(b.p);
    return h;
}

void ss_cfg_log(const struct ss_cfg *cfg)
{
    struct s_buf b = {ss_malloc(S_VALUE_MAX), S_VALUE_MAX, 0};

    ss_assert(cfg);
    SS_LOG(SS_LOG_INFO, "config from %s", cfg->path[0] ? cfg->path : "(defaults)");
    for (size_t i = 0; i < S_N_KEYS; i++) {
        b.len = 0;
        s_put_value(&b, cfg, &s_keys[i], ", ", 1);
        SS_LOG(SS_LOG_INFO, "config %s=%s", s_keys[i].name, b.p);
    }
    ss_free(b.p);
}
