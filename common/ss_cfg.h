/* ss_cfg.h - the job configuration: one YAML file, one table of keys.
 *
 * Every key is declared once in ss_cfg.c's table (name, type, default, min,
 * max, target field, whether it is cluster-relevant). ss_cfg_load() reads the
 * YAML file, applies --set overrides, checks every value and fills a
 * struct ss_cfg. Errors name file, line and key:
 *     conf/local.yaml:12: key tables.lr: value -1 is below the minimum 0
 * The result is immutable after load and may be read by any thread without
 * locks. Only this module talks to libyaml.
 *
 * Paths: relative data.train and data.eval entries written in the job file
 * are relative to the job file's folder (ss_cfg_load() prefixes that folder);
 * entries given with --set are used as given, relative to the caller's
 * working directory. The security.* key files follow the same rule. */
#ifndef SS_CFG_H
#define SS_CFG_H

#include <stddef.h>
#include <stdint.h>

#include "ss_sync.h"   /* enum ss_sync_algo: the sync algorithm table */

#define SS_CFG_MAX_LIST 64     /* most entries in any list key */
#define SS_CFG_MAX_STR 256     /* longest string value, with NUL */
#define SS_CFG_MAX_GROUPS 4    /* sync.groups entries */
#define SS_CFG_MAX_FIELDS 1024 /* most categorical fields (= embedding tables) */

enum ss_opt_kind { SS_OPT_SGD = 0, SS_OPT_ADAGRAD = 1, SS_OPT_ROWWISE_ADAGRAD = 2 };

/* model.pooling: how a field's values combine into its embedding input
 * (trainer/tr_bag.h): sum_i w_i r_i divided by 1, the count of values or
 * sqrt(sum w_i^2). */
enum ss_pooling { SS_POOL_SUM = 0, SS_POOL_MEAN = 1, SS_POOL_SQRTN = 2 };

enum ss_writeback { SS_WRITEBACK_DELTA = 0, SS_WRITEBACK_OVERWRITE = 1 };

/* job.allow_trainer_loss: auto resolves by the sync algorithm
 * (ss_cfg_trainer_loss_allowed). */
enum ss_trainer_loss { SS_LOSS_AUTO = 0, SS_LOSS_TRUE = 1, SS_LOSS_FALSE = 2 };

/* data.format: how a line of input is laid out (trainer/tr_reader.h parses). */
enum ss_data_format {
    SS_DATA_CRITEO_TSV = 0,  /* label, 13 dense, 26 categorical, tab-separated */
    SS_DATA_CSV,             /* delimited, columns and roles from data.columns */
    SS_DATA_LIBSVM,          /* label idx:value ...: one multi-valued field */
    SS_DATA_LIBFFM,          /* label field:idx:value ...: data.fields fields */
};

/* Role of one column of a criteo_tsv or csv line (data.columns). */
enum ss_data_role {
    SS_ROLE_IGNORE = 0,      /* skipped */
    SS_ROLE_LABEL,           /* the click label (exactly one column) */
    SS_ROLE_DENSE,           /* a number: log(1 + max(v, 0)), empty = 0 */
    SS_ROLE_CATEGORICAL,     /* one value: one key of its field's table */
    SS_ROLE_MULTI,           /* values split on data.multi_separator, pooled (model.pooling) */
};

/* data.header: is the first line of each csv file a header? */
enum ss_data_header { SS_HEADER_AUTO = 0, SS_HEADER_TRUE, SS_HEADER_FALSE };
/* cluster.transport: what the launcher gives processes on one host. */
enum ss_transport { SS_TRANSPORT_AUTO = 0, SS_TRANSPORT_TCP = 1 };

#define SS_DATA_MAX_COLUMNS 2048  /* most columns of a criteo_tsv or csv line */

struct ss_str_list {
    size_t n;                                  /* entries used */
    char v[SS_CFG_MAX_LIST][SS_CFG_MAX_STR];   /* the strings */
};

struct ss_int_list {
    size_t n;                                  /* entries used */
    int64_t v[SS_CFG_MAX_LIST];                /* the values */
};

/* One per-component sync group: a dense-parameter component and its rule.
 * A field the entry leaves out holds the value of its top-level key
 * (sync.alpha, sync.block_momentum, sync.block_lr) after ss_cfg_load(). */
struct ss_sync_group {
    char component[SS_CFG_MAX_STR];  /* "bottom" or "top" */
    int algorithm;                   /* enum ss_sync_algo */
    double alpha;                    /* EASGD moving rate, <0: default 0.9/N */
    double block_momentum;           /* BMUF eta, <0: default 1-1/N */
    double block_lr;                 /* BMUF zeta */
};

/* The input layout (data.format and the keys beside it). The first fields are
 * the keys as written; the rest is derived from them by ss_cfg_load(), which
 * rejects an inconsistent layout. The trainer's reader gets this sub-struct. */
struct ss_data_cfg {
    int format;                      /* data.format: enum ss_data_format */
    struct ss_str_list columns;      /* data.columns: roles as written ("dense*13") */
    char delimiter_text[8];          /* data.delimiter as written ("," or "tab") */
    int header;                      /* data.header: enum ss_data_header */
    char multi_text[8];              /* data.multi_separator as written */
    int64_t fields;                  /* data.fields: libffm field count, 0 = unset */
    double max_bad_fraction;         /* data.max_bad_fraction: most bad lines / lines */
    int labels;                      /* data.labels: 0/1, the lines hold a label (0: only
                                      * scoring with --predict; training is refused) */
    /* derived by ss_cfg_load() */
    char delimiter;                  /* csv field separator ('\t' for criteo_tsv) */
    char multi_sep;                  /* separator of a multi column's values */
    uint32_t n_columns;              /* criteo_tsv/csv: columns per line; else 0 */
    uint8_t role[SS_DATA_MAX_COLUMNS]; /* enum ss_data_role of each column */
    uint32_t n_dense;                /* dense features per example */
    uint32_t n_fields;               /* categorical fields = embedding tables */
};

/* security.*: CURVE keys and the bounds on what one peer may hold (common/ss_auth.h
 * reads the key files; the PS and the clients size their queues from it). Relative
 * paths written in the job file are made relative to its folder by ss_cfg_load(). */
struct ss_security_cfg {
    int curve;                       /* security.curve: 0/1, CURVE on every socket */
    char server_key[SS_CFG_MAX_STR]; /* security.server_key: servers' secret key file */
    char server_public[SS_CFG_MAX_STR]; /* security.server_public: servers' public key file */
    char client_key[SS_CFG_MAX_STR]; /* security.client_key: this client's secret key file */
    char authorized[SS_CFG_MAX_STR]; /* security.authorized: public keys that may connect */
    char admin_keys[SS_CFG_MAX_STR]; /* security.admin_keys: may SHUTDOWN, ...; "" = all */
    int64_t max_in_flight;           /* security.max_in_flight: per-connection queue, messages */
    int64_t max_connections;         /* security.max_connections: clients a PS takes at once */
    double max_abs_value;            /* security.max_abs_value: largest |value| a PS accepts */
    char admin_token_file[SS_CFG_MAX_STR]; /* security.admin_token_file: admin secret, "" = none */
    char token_file[SS_CFG_MAX_STR]; /* security.token_file: handshake secret (PLAIN), "" = none */
};

struct ss_cfg {
    char path[SS_CFG_MAX_STR];       /* file it was loaded from */

    /* job */
    char job_name[SS_CFG_MAX_STR];   /* job.name */
    int64_t job_seed;                /* job.seed: dense init and row init */
    int64_t max_ps_restarts;         /* job.max_ps_restarts: launcher restarts of a dead PS */
    int allow_trainer_loss;          /* job.allow_trainer_loss: enum ss_trainer_loss */
    double job_ckpt_interval_s;      /* job.checkpoint_interval_s: periodic job checkpoints,
                                      * 0 = on SIGTERM only */
    char run_dir[SS_CFG_MAX_STR];    /* job.run_dir */
    char log_level[16];              /* job.log_level: debug|info|warn|error */

    /* cluster */
    struct ss_str_list embedding_eps;  /* cluster.embedding: one endpoint per shard */
    struct ss_str_list sync_eps;       /* cluster.sync: one endpoint per sync shard */
    struct ss_str_list trainer_eps;    /* cluster.trainers: one peer endpoint per rank */
    struct ss_str_list trainer_admin_eps; /* cluster.trainer_admin: admin endpoint per rank */
    char cluster_bind[SS_CFG_MAX_STR]; /* cluster.bind: host part this host binds, "" = derive */
    int cluster_transport;             /* cluster.transport: enum ss_transport (launcher) */

    /* limits */
    int64_t max_message_bytes;       /* limits.max_message_bytes: ZMQ_MAXMSGSIZE */
    int64_t request_timeout_ms;      /* limits.request_timeout_ms: client wait for a reply */
    int64_t recovery_timeout_ms;     /* limits.recovery_timeout_ms: lookup retries, 0 = none */
    int64_t max_keys_per_request;    /* limits.max_keys_per_request */

    /* ps */
    int64_t ps_threads;              /* ps.threads: service threads per PS */
    int64_t ps_stripes;              /* ps.stripes: lock stripes of the embedding map */

    /* tables */
    int64_t n_tables;                /* tables.count; when not given: data.n_fields */
    int optimizer;                   /* tables.optimizer: enum ss_opt_kind */
    double table_lr;                 /* tables.lr */
    double table_eps;                /* tables.eps: Adagrad epsilon */
    double table_init_acc;           /* tables.initial_accumulator */
    double table_init_scale;         /* tables.init_scale: rows uniform in +-scale */
    double table_l2;                 /* tables.l2: L2 penalty on a row, applied on push */
    int64_t capacity_rows;           /* tables.capacity_rows: rows per shard, all tables */
    int64_t admit_after;             /* tables.admit_after: pushes before a key is stored */
    int64_t admit_sketch_bytes;      /* tables.admit_sketch_bytes: admission counters/shard */
    int64_t ttl_s;                   /* tables.ttl_s: delete rows untouched this long, 0 = off */
    int64_t max_memory_bytes;        /* tables.max_memory_bytes: per shard, 0 = no bound */

    /* model */
    int64_t embedding_dim;           /* model.embedding_dim */
    int first_order;                 /* model.first_order: 0/1, wide terms in the logit */
    struct ss_int_list bottom_mlp;   /* model.bottom_mlp: layer widths, last == dim */
    struct ss_int_list top_mlp;      /* model.top_mlp: layer widths, last == 1 */
    int dense_optimizer;             /* model.optimizer: sgd|adagrad */
    double dense_lr;                 /* model.lr */
    double dense_l2;                 /* model.l2: weight decay of the dense update */
    int64_t warmup_examples;         /* model.warmup_examples: dense lr ramp, per trainer */
    double adagrad_floor;            /* model.adagrad_floor: floor of the dense Adagrad's
                                      * accumulators, times its tensor's mean; 0 = off */
    int64_t adagrad_floor_examples;  /* model.adagrad_floor_examples: its fade, per
                                      * trainer; 0 = the whole run */
    double dense_average;            /* model.dense_average: Polyak tail of each epoch, 0 = off */
    int pooling;                     /* model.pooling: enum ss_pooling of every field */
    struct ss_str_list field_pooling; /* model.field_pooling: "FIELD=MODE" as written */
    uint8_t pooling_of[SS_CFG_MAX_FIELDS]; /* derived by ss_cfg_load(): each field's
                                            * enum ss_pooling (model.pooling, then
                                            * model.field_pooling's overrides) */
    int precision;                   /* model.precision: 0 fp32, 1 bf16, 2 auto (the
                                      * TR_MODEL_PREC_* values) */

    /* trainer */
    int64_t workers;                 /* trainer.workers */
    int64_t io_threads;              /* trainer.io_threads: ZeroMQ I/O threads */
    int merge_requests;              /* trainer.merge_requests: workers share one path per PS */
    int64_t round_batches;           /* trainer.round_batches: a worker's batches per round */
    int64_t batch_size;              /* trainer.batch_size */
    int64_t epochs;                  /* trainer.epochs */
    int64_t max_examples;            /* trainer.max_examples: 0 = no limit, per trainer */
    int64_t eval_every;              /* trainer.eval_every: epochs between evals, 0 = end */
    int64_t eval_every_examples;     /* trainer.eval_every_examples: per trainer, 0 = off */
    int64_t patience;                /* trainer.patience: evals without gain, 0 = never stop */
    int64_t barrier_timeout_s;       /* trainer.barrier_timeout_s */

    /* data */
    struct ss_str_list train_files;  /* data.train: files or globs; relative entries from the
                                      * job file are made relative to its folder at load */
    struct ss_str_list eval_files;   /* data.eval: files or globs (same rule) */
    struct ss_str_list valid_files;  /* data.valid: validation files or globs (same rule) */
    double valid_fraction;           /* data.valid_fraction: of data.train's lines, by hash
                                      * (trainer/tr_split.h), 0 = none */
    struct ss_data_cfg data;         /* data.*: the input layout */

    /* sync */
    int sync_algorithm;              /* sync.algorithm: enum ss_sync_algo */
    double sync_alpha;               /* sync.alpha, <0: default 0.9/N */
    double sync_block_momentum;      /* sync.block_momentum, <0: default 1-1/N */
    double sync_block_lr;            /* sync.block_lr */
    int sync_nesterov;               /* sync.nesterov: 0/1 */
    int sync_writeback;              /* sync.writeback: enum ss_writeback */
    int64_t sync_gap;                /* sync.gap: iterations between foreground syncs */
    int64_t sync_min_interval_ms;    /* sync.min_interval_ms */
    double sync_cpu_share;           /* sync.cpu_share: 0 = no limit */
    int64_t sync_timeout_ms;         /* sync.timeout_ms: allreduce round, re-seed wait */
    size_t n_sync_groups;            /* sync.groups entries used (0: one group) */
    struct ss_sync_group sync_groups[SS_CFG_MAX_GROUPS];

    /* metrics */
    double metrics_interval_s;       /* metrics.interval_s */
    int64_t metrics_port;            /* metrics.port: first Prometheus port, 0 = none */
    struct ss_int_list metrics_ports; /* metrics.ports: one per process (launcher), or none */

    /* checkpoint */
    char ckpt_dir[SS_CFG_MAX_STR];   /* checkpoint.dir, "" = RUN_DIR/ckpt */
    double ckpt_interval_s;          /* checkpoint.interval_s: recovery checkpoints, 0 = none */

    /* security */
    struct ss_security_cfg security; /* security.*: keys, per-peer bounds */
};

/* Fill cfg with every default. Never fails. */
void ss_cfg_defaults(struct ss_cfg *cfg);

/* Load path (NULL: defaults only), then apply n_sets "a.b.c=value" overrides,
 * then validate. On error returns SS_E_CONFIG and writes one line
 * "FILE:LINE: key a.b.c: what is wrong" (or "--set a.b.c=v: ...") to err.
 * Borrows path and sets; cfg is caller-allocated (it is large: heap it). */
int ss_cfg_load(struct ss_cfg *cfg, const char *path, const char *const *sets, size_t n_sets,
                char *err, size_t err_len);

/* Write the effective value of key into out: scalars as text (numbers in
 * their shortest exact form, "0.05"), enums by name, bools "true"/"false",
 * lists one entry per line without a trailing newline, sync.groups entries
 * as YAML flow mappings. "LIST.count" gives a list's length and "LIST.N" its
 * entry N (from 0). Returns 0, SS_E_NOTFOUND for an unknown key or entry, or
 * SS_E_TOOBIG if out was too small (out then holds a truncated, terminated
 * prefix). Thread-safe: cfg is only read. */
int ss_cfg_get(const struct ss_cfg *cfg, const char *key, char *out, size_t out_len);

/* Floats in one embedding row as the PSs store, serve and update it:
 * model.embedding_dim, plus 1 (the first-order weight, last) when
 * model.first_order is on. Every module that sizes rows asks here. */
uint32_t ss_cfg_row_dim(const struct ss_cfg *cfg);

/* Bytes of admission counters one of n_shards embedding shards holds:
 * tables.admit_sketch_bytes is the job's, split evenly, as each shard counts
 * its 1/n_shards share of the keys (so every shard keeps the counters per
 * key of a lone PS); at least 4096. */
int64_t ss_cfg_admit_shard_bytes(const struct ss_cfg *cfg, uint32_t n_shards);

/* Hash of the cluster-relevant keys (tables, model shape, seed, ...) and of
 * the NUMBER of entries of each cluster list, not their addresses: hosts may
 * write one process's address differently (a name here, an IP there, ports
 * a launcher picked). Peers compare it in HELLO through ss_cluster.h, which
 * adds the shard map and the server's identity. */
uint64_t ss_cfg_cluster_hash(const struct ss_cfg *cfg);

/* Log every key and its effective value at INFO. */
void ss_cfg_log(const struct ss_cfg *cfg);

/* Describe key number i (0-based, in table order) for --help output: its
 * YAML name, its default as --set text (lists comma separated) and one line
 * of help. Any out-pointer may be NULL; the strings are static. Returns 0, or
 * SS_E_NOTFOUND when i is past the last key. Thread-safe. */
int ss_cfg_key_info(size_t i, const char **name, const char **def, const char **help);

/* Names of enum values, for printing ("s-easgd", "rowwise_adagrad");
 * ss_sync_algo_name is ss_sync_name (ss_sync.h). */
const char *ss_sync_algo_name(int algo);

/* job.allow_trainer_loss resolved: 1 when the job goes on without a trainer
 * that died (the ring re-forms without it, the launcher lets the others
 * finish). auto: the job's lose_trainer trait (ss_sync_job_traits: every sync
 * group's algorithm may lose a trainer; yes for s-*, no for sync none and
 * the fr-* baselines). */
int ss_cfg_trainer_loss_allowed(const struct ss_cfg *cfg);
const char *ss_opt_name(int opt);
const char *ss_pooling_name(int mode);

#endif
