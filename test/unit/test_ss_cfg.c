/* test_ss_cfg.c - unit tests of the configuration loader (common/ss_cfg.c).
 *
 * Each test writes its YAML to a fresh temp file and checks the exact
 * values, or the exact error line "FILE:LINE: key NAME: reason". Run from
 * the repository root (the last tests load conf/local.yaml). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ss_cfg.h"
#include "ss_err.h"
#include "ss_log.h"

#define ERR_MAX 1024

/* Write text to a new temp file; its path goes to path. */
static void s_write_tmp(const char *text, char *path, size_t n)
{
    const char *dir = getenv("TMPDIR");
    size_t len = strlen(text);

    snprintf(path, n, "%s/ss_cfg_test_XXXXXX.yaml", dir && *dir ? dir : "/tmp");
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

/* Load YAML text (through a temp file) plus sets into cfg; the temp file's
 * path goes to path. Returns ss_cfg_load's code; err holds its message. */
static int s_load(struct ss_cfg *cfg, const char *yaml, const char *const *sets, size_t n_sets,
                  char *path, char *err)
{
    s_write_tmp(yaml, path, 256);
    int rc = ss_cfg_load(cfg, path, sets, n_sets, err, ERR_MAX);
    unlink(path);
    return rc;
}

/* Load yaml and expect SS_E_CONFIG with the message PATH + tail. */
static void s_expect_error(const char *yaml, const char *tail)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char path[256], err[ERR_MAX], want[ERR_MAX];

    assert_non_null(cfg);
    int rc = s_load(cfg, yaml, NULL, 0, path, err);
    snprintf(want, sizeof want, "%s%s", path, tail);
    assert_string_equal(err, want);
    assert_int_equal(rc, SS_E_CONFIG);
    free(cfg);
}

/* Apply sets to the defaults and expect SS_E_CONFIG with message want. */
static void s_expect_set_error(const char *const *sets, size_t n_sets, const char *want)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char err[ERR_MAX];

    assert_non_null(cfg);
    int rc = ss_cfg_load(cfg, NULL, sets, n_sets, err, sizeof err);
    assert_string_equal(err, want);
    assert_int_equal(rc, SS_E_CONFIG);
    free(cfg);
}

/* ss_cfg_get() of key must give want. */
static void s_expect_get(const struct ss_cfg *cfg, const char *key, const char *want)
{
    char out[4096];

    assert_int_equal(ss_cfg_get(cfg, key, out, sizeof out), 0);
    assert_string_equal(out, want);
}

static void test_defaults(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg), *dflt = calloc(1, sizeof *dflt);
    char err[ERR_MAX] = "junk";

    assert_int_equal(ss_cfg_load(cfg, NULL, NULL, 0, err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_string_equal(cfg->path, "");
    assert_string_equal(cfg->job_name, "local");
    assert_int_equal(cfg->job_seed, 42);
    assert_string_equal(cfg->run_dir, "run/local");
    assert_string_equal(cfg->log_level, "info");
    assert_int_equal(cfg->embedding_eps.n, 2);
    assert_string_equal(cfg->embedding_eps.v[0], "tcp://127.0.0.1:5555");
    assert_string_equal(cfg->embedding_eps.v[1], "tcp://127.0.0.1:5556");
    assert_int_equal(cfg->sync_eps.n, 1);
    assert_string_equal(cfg->sync_eps.v[0], "tcp://127.0.0.1:5560");
    assert_int_equal(cfg->trainer_eps.n, 2);
    assert_string_equal(cfg->trainer_eps.v[0], "tcp://127.0.0.1:5570");
    assert_string_equal(cfg->trainer_eps.v[1], "tcp://127.0.0.1:5571");
    assert_int_equal(cfg->max_message_bytes, 67108864);
    assert_int_equal(cfg->request_timeout_ms, 10000);
    assert_int_equal(cfg->max_keys_per_request, 1048576);
    assert_int_equal(cfg->ps_threads, 1);
    assert_int_equal(cfg->ps_stripes, 64);
    assert_int_equal(cfg->n_tables, 26);
    assert_int_equal(cfg->optimizer, SS_OPT_ROWWISE_ADAGRAD);
    assert_true(cfg->table_lr == 0.1);
    assert_true(cfg->table_eps == 1e-8);
    assert_true(cfg->table_init_acc == 1e-3);
    assert_true(cfg->table_init_scale == 0.01);
    assert_true(cfg->table_l2 == 0.0);
    assert_int_equal(cfg->capacity_rows, 10000000);
    assert_int_equal(cfg->admit_after, 3);
    assert_int_equal(cfg->admit_sketch_bytes, 8388608);
    assert_int_equal(cfg->ttl_s, 0);
    assert_int_equal(cfg->max_memory_bytes, 0);
    assert_int_equal(cfg->embedding_dim, 16);
    assert_int_equal(cfg->first_order, 1);
    assert_int_equal(ss_cfg_row_dim(cfg), 17);
    assert_int_equal(cfg->bottom_mlp.n, 2);
    assert_int_equal(cfg->bottom_mlp.v[0], 64);
    assert_int_equal(cfg->bottom_mlp.v[1], 16);
    assert_int_equal(cfg->top_mlp.n, 2);
    assert_int_equal(cfg->top_mlp.v[0], 64);
    assert_int_equal(cfg->top_mlp.v[1], 1);
    assert_int_equal(cfg->dense_optimizer, SS_OPT_ADAGRAD);
    assert_true(cfg->dense_lr == 0.05);
    assert_true(cfg->dense_l2 == 0.0);
    assert_int_equal(cfg->warmup_examples, 2000);
    assert_int_equal(cfg->workers, 2);
    assert_int_equal(cfg->batch_size, 128);
    assert_int_equal(cfg->epochs, 2);
    assert_int_equal(cfg->eval_every, 1);
    assert_int_equal(cfg->patience, 0);
    assert_true(cfg->sync_cpu_share == 0.02);
    assert_int_equal(cfg->max_examples, 0);
    assert_int_equal(cfg->train_files.n, 0);
    assert_int_equal(cfg->eval_files.n, 0);
    assert_int_equal(cfg->sync_algorithm, SS_SYNC_S_MA);
    assert_true(cfg->sync_alpha == -1.0);
    assert_true(cfg->sync_block_momentum == -1.0);
    assert_true(cfg->sync_block_lr == 1.0);
    assert_int_equal(cfg->sync_nesterov, 1);
    assert_int_equal(cfg->sync_writeback, SS_WRITEBACK_DELTA);
    assert_int_equal(cfg->sync_gap, 10);
    assert_int_equal(cfg->sync_min_interval_ms, 0);
    assert_int_equal(cfg->sync_timeout_ms, 5000);
    assert_int_equal(cfg->n_sync_groups, 0);
    assert_true(cfg->metrics_interval_s == 2.0);
    assert_string_equal(cfg->ckpt_dir, "");

    ss_cfg_defaults(dflt);
    assert_memory_equal(cfg, dflt, sizeof *cfg);
    free(dflt);
    free(cfg);
}

static void test_load_values(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char path[256], err[ERR_MAX];
    const char *yaml =
        "# a comment\n"
        "job:\n"
        "  name: \"demo job\"\n"
        "  seed: 7\n"
        "  log_level: debug\n"
        "tables:\n"
        "  lr: 0.125\n"
        "  optimizer: adagrad\n"
        "  capacity_rows: 1099511627776\n"
        "model:\n"
        "  embedding_dim: 8\n"
        "  bottom_mlp: [32, 8]\n"
        "  optimizer: sgd\n"
        "ps: {threads: 4, stripes: 1024}\n"
        "sync:\n"
        "  algorithm: fr-bmuf\n"
        "  nesterov: off\n"
        "  alpha: 0.5\n"
        "  block_momentum: 0\n"
        "  writeback: overwrite\n"
        "  gap: 1000000000\n"
        "checkpoint: {dir: ckpt/here}\n"
        "data: {format: csv, columns: [label, categorical*3]}\n"
        "tables.count: 3\n";

    assert_int_equal(s_load(cfg, yaml, NULL, 0, path, err), 0);
    assert_string_equal(err, "");
    assert_string_equal(cfg->path, path);
    assert_string_equal(cfg->job_name, "demo job");
    assert_int_equal(cfg->job_seed, 7);
    assert_string_equal(cfg->log_level, "debug");
    assert_true(cfg->table_lr == 0.125);
    assert_int_equal(cfg->optimizer, SS_OPT_ADAGRAD);
    assert_int_equal(cfg->capacity_rows, INT64_C(1) << 40);
    assert_int_equal(cfg->embedding_dim, 8);
    assert_int_equal(cfg->bottom_mlp.n, 2);
    assert_int_equal(cfg->bottom_mlp.v[0], 32);
    assert_int_equal(cfg->bottom_mlp.v[1], 8);
    assert_int_equal(cfg->dense_optimizer, SS_OPT_SGD);
    assert_int_equal(cfg->ps_threads, 4);
    assert_int_equal(cfg->ps_stripes, 1024);
    assert_int_equal(cfg->sync_algorithm, SS_SYNC_FR_BMUF);
    assert_int_equal(cfg->sync_nesterov, 0);
    assert_true(cfg->sync_alpha == 0.5);
    assert_true(cfg->sync_block_momentum == 0.0);
    assert_int_equal(cfg->sync_writeback, SS_WRITEBACK_OVERWRITE);
    assert_int_equal(cfg->sync_gap, 1000000000);
    assert_string_equal(cfg->ckpt_dir, "ckpt/here");
    assert_int_equal(cfg->n_tables, 3);
    /* untouched keys keep their defaults */
    assert_string_equal(cfg->run_dir, "run/local");
    assert_int_equal(cfg->workers, 2);

    /* an empty file and a lone "---" give the defaults */
    assert_int_equal(s_load(cfg, "", NULL, 0, path, err), 0);
    assert_int_equal(cfg->job_seed, 42);
    assert_int_equal(s_load(cfg, "---\n", NULL, 0, path, err), 0);
    assert_int_equal(cfg->n_tables, 26);
    free(cfg);
}

static void test_lists_flow_and_block(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char path[256], err[ERR_MAX];
    const char *yaml =
        "cluster:\n"
        "  embedding:\n"
        "    - tcp://10.0.0.1:7000\n"
        "    - ipc:///tmp/ps1\n"
        "    - inproc://ps2\n"
        "  sync: []\n"
        "  trainers: [tcp://h1:1, 'tcp://h2:2']\n"
        "model:\n"
        "  top_mlp:\n"
        "  - 128\n"
        "  - 32\n"
        "  - 1\n"
        "data:\n"
        "  train: [a.tsv, \"b c.tsv\"]\n"
        "  eval:\n";

    assert_int_equal(s_load(cfg, yaml, NULL, 0, path, err), 0);
    assert_string_equal(err, "");
    assert_int_equal(cfg->embedding_eps.n, 3);
    assert_string_equal(cfg->embedding_eps.v[0], "tcp://10.0.0.1:7000");
    assert_string_equal(cfg->embedding_eps.v[1], "ipc:///tmp/ps1");
    assert_string_equal(cfg->embedding_eps.v[2], "inproc://ps2");
    assert_int_equal(cfg->sync_eps.n, 0);
    assert_int_equal(cfg->trainer_eps.n, 2);
    assert_string_equal(cfg->trainer_eps.v[1], "tcp://h2:2");
    assert_int_equal(cfg->top_mlp.n, 3);
    assert_int_equal(cfg->top_mlp.v[0], 128);
    assert_int_equal(cfg->top_mlp.v[1], 32);
    assert_int_equal(cfg->top_mlp.v[2], 1);
    /* relative data paths from the file: relative to the file's folder */
    char want[512];
    const char *slash = strrchr(path, '/');
    assert_int_equal(cfg->train_files.n, 2);
    snprintf(want, sizeof want, "%.*s/a.tsv", (int)(slash - path), path);
    assert_string_equal(cfg->train_files.v[0], want);
    snprintf(want, sizeof want, "%.*s/b c.tsv", (int)(slash - path), path);
    assert_string_equal(cfg->train_files.v[1], want);
    assert_int_equal(cfg->eval_files.n, 0);
    free(cfg);
}

static void test_sync_groups(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char path[256], err[ERR_MAX];
    const char *block =
        "sync:\n"
        "  algorithm: s-ma\n"
        "  groups:\n"
        "    - component: top\n"
        "      algorithm: fr-bmuf\n"
        "      block_momentum: 0.75\n"
        "      block_lr: 2.5\n"
        "    - component: bottom\n"
        "      algorithm: s-easgd\n"
        "      alpha: 0.3\n";
    const char *flow =
        "sync:\n"
        "  groups: [{component: bottom, algorithm: s-easgd, alpha: 0.3},\n"
        "           {component: top, algorithm: s-bmuf}]\n";

    assert_int_equal(s_load(cfg, block, NULL, 0, path, err), 0);
    assert_string_equal(err, "");
    assert_int_equal(cfg->sync_algorithm, SS_SYNC_S_MA);
    assert_int_equal(cfg->n_sync_groups, 2);
    assert_string_equal(cfg->sync_groups[0].component, "top");
    assert_int_equal(cfg->sync_groups[0].algorithm, SS_SYNC_FR_BMUF);
    assert_true(cfg->sync_groups[0].alpha == -1.0);
    assert_true(cfg->sync_groups[0].block_momentum == 0.75);
    assert_true(cfg->sync_groups[0].block_lr == 2.5);
    assert_string_equal(cfg->sync_groups[1].component, "bottom");
    assert_int_equal(cfg->sync_groups[1].algorithm, SS_SYNC_S_EASGD);
    assert_true(cfg->sync_groups[1].alpha == 0.3);
    assert_true(cfg->sync_groups[1].block_momentum == -1.0);
    assert_true(cfg->sync_groups[1].block_lr == 1.0);

    assert_int_equal(s_load(cfg, flow, NULL, 0, path, err), 0);
    assert_string_equal(err, "");
    assert_int_equal(cfg->n_sync_groups, 2);
    assert_string_equal(cfg->sync_groups[0].component, "bottom");
    assert_int_equal(cfg->sync_groups[0].algorithm, SS_SYNC_S_EASGD);
    assert_true(cfg->sync_groups[0].alpha == 0.3);
    assert_string_equal(cfg->sync_groups[1].component, "top");
    assert_int_equal(cfg->sync_groups[1].algorithm, SS_SYNC_S_BMUF);
    assert_true(cfg->sync_groups[1].alpha == -1.0);
    s_expect_get(cfg, "sync.groups.count", "2");
    s_expect_get(cfg, "sync.groups.1",
                 "{component: top, algorithm: s-bmuf, alpha: -1, block_momentum: -1, "
                 "block_lr: 1}");
    free(cfg);
}

/* job.allow_trainer_loss: auto follows the sync rules (shadow ones only:
 * true); true and false are taken as written. */
static void test_allow_trainer_loss(void **state)
{
    static const struct {
        const char *yaml;
        int want;
    } cases[] = {
        {"sync:\n  algorithm: s-ma\n", 1},
        {"sync:\n  algorithm: s-bmuf\n", 1},
        {"sync:\n  algorithm: s-easgd\n", 1},
        {"sync:\n  algorithm: none\n", 0},
        {"sync:\n  algorithm: fr-ma\n", 0},
        {"sync:\n  algorithm: fr-easgd\n", 0},
        {"sync:\n  groups: [{component: bottom, algorithm: s-easgd},\n"
         "           {component: top, algorithm: s-ma}]\n", 1},
        {"sync:\n  groups: [{component: bottom, algorithm: fr-ma},\n"
         "           {component: top, algorithm: fr-ma}]\n", 0},
        {"job:\n  allow_trainer_loss: false\nsync:\n  algorithm: s-ma\n", 0},
        {"job:\n  allow_trainer_loss: true\nsync:\n  algorithm: fr-ma\n", 1},
        {"job:\n  allow_trainer_loss: true\nsync:\n  algorithm: none\n", 1},
    };
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char path[256], err[ERR_MAX];
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(s_load(cfg, cases[i].yaml, NULL, 0, path, err), 0);
        if (ss_cfg_trainer_loss_allowed(cfg) != cases[i].want)
            fail_msg("case %zu (%s): allowed %d, want %d", i, cases[i].yaml,
                     ss_cfg_trainer_loss_allowed(cfg), cases[i].want);
    }
    assert_int_equal(s_load(cfg, "", NULL, 0, path, err), 0);
    s_expect_get(cfg, "job.allow_trainer_loss", "auto");
    s_expect_error("job:\n  allow_trainer_loss: maybe\n",
                   ":2: key job.allow_trainer_loss: expected one of auto, true, false, got "
                   "'maybe'");
    free(cfg);
}

/* Regression: a sync.groups entry without alpha, block_momentum or block_lr
 * took the built-in default instead of sync.alpha, ... The value inherited
 * is the final one, whatever the order of keys in the file and --set. */
static void test_issue_groups_inherit_globals(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char path[256], err[ERR_MAX];
    const char *yaml =
        "sync:\n"
        "  groups:\n"
        "    - component: bottom\n"
        "      algorithm: s-easgd\n"
        "    - component: top\n"
        "      algorithm: s-bmuf\n"
        "      alpha: 0.5\n"
        "      block_lr: 3\n"
        "  alpha: 0.2\n"
        "  block_momentum: 0.6\n"
        "  block_lr: 2\n";
    const char *sets[] = {"sync.block_momentum=0.7"};

    assert_non_null(cfg);
    assert_int_equal(s_load(cfg, yaml, sets, 1, path, err), 0);
    assert_string_equal(err, "");
    assert_int_equal(cfg->n_sync_groups, 2);
    assert_true(cfg->sync_groups[0].alpha == 0.2);
    assert_true(cfg->sync_groups[0].block_momentum == 0.7);
    assert_true(cfg->sync_groups[0].block_lr == 2.0);
    assert_true(cfg->sync_groups[1].alpha == 0.5);
    assert_true(cfg->sync_groups[1].block_momentum == 0.7);
    assert_true(cfg->sync_groups[1].block_lr == 3.0);
    s_expect_get(cfg, "sync.groups.0",
                 "{component: bottom, algorithm: s-easgd, alpha: 0.2, block_momentum: 0.7, "
                 "block_lr: 2}");

    /* groups given by --set after the file inherit the file's values too */
    const char *set_groups[] = {"sync.groups=[{component: top, algorithm: s-ma}]"};
    assert_int_equal(s_load(cfg, yaml, set_groups, 1, path, err), 0);
    assert_int_equal(cfg->n_sync_groups, 1);
    assert_true(cfg->sync_groups[0].alpha == 0.2);
    assert_true(cfg->sync_groups[0].block_momentum == 0.6);
    assert_true(cfg->sync_groups[0].block_lr == 2.0);
    free(cfg);
}

static void test_error_unknown_key(void **state)
{
    s_expect_error("tables:\n  lr: 0.1\n  lrr: 0.2\n",
                   ":3: key tables.lrr: unknown key (did you mean tables.lr?)");
    s_expect_error("job:\n  seed: 1\ntabels:\n  lr: 1\n",
                   ":3: key tabels: unknown key (did you mean tables?)");
    s_expect_error("# nothing close\nzzzzzz: 1\n", ":2: key zzzzzz: unknown key");
    s_expect_error("model:\n  embeding_dim: 8\n",
                   ":2: key model.embeding_dim: unknown key (did you mean model.embedding_dim?)");
    s_expect_error("tables: 3\n", ":1: key tables: expected a mapping of keys, got a scalar");
}

static void test_error_type(void **state)
{
    s_expect_error("ps:\n  threads: abc\n",
                   ":2: key ps.threads: expected an integer, got 'abc'");
    s_expect_error("ps:\n  threads: 2.5\n",
                   ":2: key ps.threads: expected an integer, got '2.5'");
    s_expect_error("job:\n  name: x\n\n\ntables:\n  lr: fast\n",
                   ":6: key tables.lr: expected a number, got 'fast'");
    s_expect_error("sync:\n  nesterov: maybe\n",
                   ":2: key sync.nesterov: expected a boolean (true/false/yes/no/on/off/1/0), "
                   "got 'maybe'");
    s_expect_error("ps:\n  threads: [1, 2]\n",
                   ":2: key ps.threads: expected an integer, got a list");
    s_expect_error("tables:\n  lr:\n    x: 1\n",
                   ":3: key tables.lr: expected a number, got a mapping");
    s_expect_error("cluster:\n  embedding: tcp://a:1\n",
                   ":2: key cluster.embedding: expected a list of strings, got 'tcp://a:1'");
    s_expect_error("job:\n  name: &n x\n  run_dir: *n\n",
                   ":3: key job.run_dir: expected a string, got an alias (anchors and aliases "
                   "are not supported)");
    s_expect_error("- a\n- b\n", ":1: the top level must be a mapping of keys");
}

static void test_error_range(void **state)
{
    s_expect_error("ps:\n  threads: 0\n", ":2: key ps.threads: value 0 is below the minimum 1");
    s_expect_error("ps:\n  threads: 65\n",
                   ":2: key ps.threads: value 65 is above the maximum 64");
    s_expect_error("ps:\n  stripes: 100\n", ":2: key ps.stripes: value 100 is not a power of two");
    s_expect_error("tables:\n  lr: 0\n", ":2: key tables.lr: value 0 must be above 0");
    s_expect_error("tables:\n  lr: 100.5\n",
                   ":2: key tables.lr: value 100.5 is above the maximum 100");
    s_expect_error("metrics:\n  interval_s: 0.05\n",
                   ":2: key metrics.interval_s: value 0.05 is below the minimum 0.1");
    s_expect_error("sync:\n  alpha: 1.5\n",
                   ":2: key sync.alpha: value 1.5 is above the maximum 1 (or -1 for the "
                   "default)");
    s_expect_error("sync:\n  block_momentum: 1\n",
                   ":2: key sync.block_momentum: value 1 must be below 1 (or -1 for the "
                   "default)");
    s_expect_error("job:\n  seed: 4611686018427387905\n",
                   ":2: key job.seed: value 4611686018427387905 is above the maximum "
                   "4611686018427387904");
}

static void test_error_enum(void **state)
{
    s_expect_error("tables:\n  optimizer: adam\n",
                   ":2: key tables.optimizer: expected one of sgd, adagrad, rowwise_adagrad, "
                   "got 'adam'");
    s_expect_error("model:\n  optimizer: rowwise_adagrad\n",
                   ":2: key model.optimizer: expected one of sgd, adagrad, "
                   "got 'rowwise_adagrad'");
    s_expect_error("sync:\n  algorithm: easgd\n",
                   ":2: key sync.algorithm: expected one of none, s-easgd, s-ma, s-bmuf, "
                   "fr-easgd, fr-ma, fr-bmuf, got 'easgd'");
}

static void test_error_syntax_and_file(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char path[512], err[ERR_MAX], want[ERR_MAX];
    const char *dir = getenv("TMPDIR");

    s_expect_error("job:\n  name: a\n seed: 1\n",
                   ":3: did not find expected key (while parsing a block mapping)");
    s_expect_error("job:\n  seed: 1\n  name: x: y\n",
                   ":3: mapping values are not allowed in this context");
    s_expect_error("job:\n  seed: 1\n---\njob:\n  seed: 2\n",
                   ":3: only one YAML document is allowed");
    s_expect_error("ps:\n  threads: 2\n  threads: 3\n",
                   ":3: key ps.threads: duplicate key (first on line 2)");
    s_expect_error("ps:\n  threads: 2\njob:\n  seed: 1\nps:\n  stripes: 4\n",
                   ":5: key ps: duplicate key (first on line 1)");
    s_expect_error("tables.lr: 0.5\ntables:\n  lr: 0.2\n",
                   ":3: key tables.lr: duplicate key (first on line 1)");

    snprintf(path, sizeof path, "%s/ss_cfg_missing_%ld/x.yaml", dir && *dir ? dir : "/tmp",
             (long)getpid());
    assert_int_equal(ss_cfg_load(cfg, path, NULL, 0, err, sizeof err), SS_E_CONFIG);
    snprintf(want, sizeof want, "cannot open %s: No such file or directory", path);
    assert_string_equal(err, want);
    free(cfg);
}

static void test_error_lists(void **state)
{
    s_expect_error("cluster:\n  embedding:\n    - tcp://a:1\n    - http://b:2\n",
                   ":4: key cluster.embedding.1: expected an endpoint starting with tcp://, "
                   "ipc:// or inproc://, got 'http://b:2'");
    s_expect_error("cluster:\n  embedding: []\n",
                   ":2: key cluster.embedding: needs at least 1 entry");
    s_expect_error("model:\n  top_mlp: [64, x, 1]\n",
                   ":2: key model.top_mlp.1: expected an integer, got 'x'");
    s_expect_error("model:\n  top_mlp: [64, 0, 1]\n",
                   ":2: key model.top_mlp.1: value 0 is below the minimum 1");
    s_expect_error("model:\n  bottom_mlp: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, "
                   "16, 17]\n",
                   ":2: key model.bottom_mlp: has more than 16 entries");
    s_expect_error("data:\n  train:\n    - [a, b]\n",
                   ":3: key data.train: entry 0: expected a scalar, got a list");
}

static void test_error_groups(void **state)
{
    s_expect_error("sync:\n  groups:\n    - component: top\n      algorithm: s-ma\n"
                   "    - component: top\n      algorithm: s-bmuf\n",
                   ":5: key sync.groups: component top appears twice (entries 0, 1)");
    s_expect_error("sync:\n  groups:\n    - component: top\n      algorithm: s-ma\n"
                   "      alpah: 0.5\n",
                   ":5: key sync.groups.0.alpah: unknown key (did you mean alpha?)");
    s_expect_error("sync:\n  groups: [{component: top}]\n",
                   ":2: key sync.groups.0: needs an algorithm");
    s_expect_error("sync:\n  groups: [{algorithm: s-ma}]\n",
                   ":2: key sync.groups.0: needs a component (bottom or top)");
    s_expect_error("sync:\n  groups:\n  - component: middle\n    algorithm: s-ma\n",
                   ":3: key sync.groups.0.component: expected one of bottom, top, got 'middle'");
    s_expect_error("sync:\n  groups:\n  - component: top\n    algorithm: s-ma\n    alpha: 2\n",
                   ":5: key sync.groups.0.alpha: value 2 is above the maximum 1 (or -1 for the "
                   "default)");
    s_expect_error("sync:\n  groups: [top]\n",
                   ":2: key sync.groups: entry 0: expected a mapping, got a scalar");
}

static void test_error_cross_keys(void **state)
{
    const char *easgd[] = {"cluster.sync=", "sync.algorithm=s-easgd"};
    const char *dim[] = {"model.embedding_dim=8"};

    s_expect_error("model:\n  bottom_mlp: [64, 32]\n",
                   ":2: key model.bottom_mlp: last layer 32 must equal model.embedding_dim 16");
    s_expect_error("model:\n  embedding_dim: 8\n",
                   ":2: key model.embedding_dim: value 8 differs from the last model.bottom_mlp "
                   "layer 16");
    s_expect_error("model:\n\n  top_mlp: [64, 2]\n",
                   ":3: key model.top_mlp: last layer 2 must be 1");
    s_expect_error("sync:\n  groups: [{component: top, algorithm: fr-easgd}]\ncluster:\n"
                   "  sync: []\n",
                   ":4: key cluster.sync: EASGD needs at least one sync endpoint");
    s_expect_set_error(easgd, 2,
                       "--set cluster.sync=: key cluster.sync: EASGD needs at least one sync "
                       "endpoint");
    s_expect_set_error(dim, 1,
                       "--set model.embedding_dim=8: key model.embedding_dim: value 8 differs "
                       "from the last model.bottom_mlp layer 16");
}

/* The data layout (data.*): defaults, derived counts, tables.count following
 * it, the errors a wrong layout gives at load time. */
static void test_data_layout(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char path[256], err[ERR_MAX];
    const char *avazu[] = {"data.format=csv", "data.columns=ignore, label, categorical*22"};
    const char *ffm[] = {"data.format=libffm", "data.fields=39", "data.delimiter=,"};

    ss_cfg_defaults(cfg);
    assert_int_equal(cfg->data.format, SS_DATA_CRITEO_TSV);
    assert_int_equal(cfg->data.n_columns, 40);
    assert_int_equal(cfg->data.n_dense, 13);
    assert_int_equal(cfg->data.n_fields, 26);
    assert_int_equal(cfg->n_tables, 26);
    assert_true(cfg->data.max_bad_fraction == 0.01);
    assert_int_equal(ss_cfg_load(cfg, NULL, avazu, 2, err, sizeof err), 0);
    assert_int_equal(cfg->data.n_columns, 24);
    assert_int_equal(cfg->data.n_dense, 0);
    assert_int_equal(cfg->data.n_fields, 22);
    assert_int_equal(cfg->n_tables, 22);
    assert_int_equal(cfg->data.role[0], SS_ROLE_IGNORE);
    assert_int_equal(cfg->data.role[1], SS_ROLE_LABEL);
    assert_int_equal(cfg->data.role[23], SS_ROLE_CATEGORICAL);
    assert_true(cfg->data.delimiter == ',' && cfg->data.multi_sep == '|');
    assert_int_equal(ss_cfg_load(cfg, NULL, ffm, 2, err, sizeof err), 0);
    assert_int_equal(cfg->n_tables, 39);
    assert_int_equal(cfg->data.n_dense, 0);
    assert_int_equal(s_load(cfg, "data:\n  format: csv\n  columns: [label, multi*2, dense]\n"
                            "  delimiter: tab\n  multi_separator: ';'\ntables:\n  count: 2\n",
                            NULL, 0, path, err), 0);
    assert_true(cfg->data.delimiter == '\t' && cfg->data.multi_sep == ';');
    assert_int_equal(cfg->data.role[2], SS_ROLE_MULTI);
    assert_int_equal(cfg->n_tables, 2);
    free(cfg);

    /* the run-time "table 22 does not exist" is now a load-time error */
    s_expect_error("tables:\n  count: 22\n",
                   ":2: key tables.count: 22 tables, but data.format criteo_tsv has 26 "
                   "categorical fields (one table each): leave tables.count out, or change the "
                   "data layout");
    s_expect_error("data:\n  format: csv\n  columns: [label, cat]\n",
                   ":3: key data.columns.1: unknown role 'cat' (expected label, dense, "
                   "categorical, multi or ignore, optionally followed by *N)");
    s_expect_error("data:\n  format: csv\n  columns: [label, dense*x]\n",
                   ":3: key data.columns.1: expected ROLE*N with N a positive integer, got "
                   "'dense*x'");
    s_expect_error("data:\n  format: csv\n  columns: [label, label, categorical]\n",
                   ":3: key data.columns: needs exactly one label column, has 2");
    s_expect_error("data:\n  format: csv\n  columns: [label, dense]\n",
                   ":3: key data.columns: needs at least one categorical or multi column (one "
                   "embedding table each)");
    s_expect_error("data:\n  format: csv\n  columns: [label, categorical*1025]\n",
                   ":3: key data.columns: 1025 categorical and multi columns, at most 1024");
    s_expect_error("data:\n  format: csv\n  delimiter: '||'\n",
                   ":3: key data.delimiter: expected one character (or tab), got '||'");
    s_expect_error("data:\n  format: csv\n  multi_separator: ','\n",
                   ":3: key data.multi_separator: ',' is also data.delimiter");
    s_expect_error("data:\n  format: libffm\n",
                   ":2: key data.fields: data.format libffm needs the number of fields (field "
                   "ids 0..N-1, one embedding table each)");
    s_expect_error("data:\n  delimiter: ';'\n",
                   ":2: key data.delimiter: does not apply to data.format criteo_tsv");
    s_expect_error("data:\n  format: csv\n  fields: 3\n",
                   ":3: key data.fields: does not apply to data.format csv");
    s_expect_error("data:\n  columns: [label, categorical]\n",
                   ":2: key data.columns: criteo_tsv is always label, dense*13, categorical*26; "
                   "for another layout set data.format: csv (with data.delimiter: tab for tabs)");
    /* data.labels false: every format may drop its label (libsvm and libffm:
     * the lines start with an item); a csv label column, and header auto
     * without a column to tell a header by, are refused */
    {
        struct ss_cfg *un = calloc(1, sizeof *un);
        const char *svm[] = {"data.format=libsvm", "data.labels=false"};
        const char *ffm3[] = {"data.format=libffm", "data.fields=3", "data.labels=false"};
        assert_non_null(un);
        assert_int_equal(ss_cfg_load(un, NULL, svm, 2, err, sizeof err), 0);
        assert_int_equal(un->data.labels, 0);
        assert_int_equal(un->data.n_fields, 1);
        assert_int_equal(ss_cfg_load(un, NULL, ffm3, 3, err, sizeof err), 0);
        assert_int_equal(un->data.labels, 0);
        assert_int_equal(un->n_tables, 3);
        free(un);
    }
    s_expect_error("data:\n  format: csv\n  labels: false\n  columns: [label, categorical]\n",
                   ":4: key data.columns: has a label column, but data.labels is false (the lines "
                   "hold no label): make that column 'ignore' or drop it, or set data.labels: "
                   "true");
    s_expect_error("data:\n  format: csv\n  columns: [dense, categorical]\n",
                   ":3: key data.columns: needs exactly one label column, has 0 (data without "
                   "labels, to be scored with --predict: set data.labels: false)");
    s_expect_error("data:\n  format: csv\n  labels: false\n  columns: [categorical*2]\n",
                   ":3: key data.header: auto tells a header by a word in its label or first "
                   "dense column, and these data.columns have neither (data.labels false): set "
                   "data.header: true or false");
    s_expect_error("data:\n  max_bad_fraction: 1.5\n",
                   ":2: key data.max_bad_fraction: value 1.5 is above the maximum 1");
}

/* model.pooling sets every field's pooling; model.field_pooling's FIELD=MODE
 * entries override single fields (numbered as the layout's tables); bad
 * entries name the entry and say what is expected. */
static void test_pooling(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char path[256], err[ERR_MAX];
    const char *mean[] = {"model.pooling=mean"};
    const char *ffm[] = {"data.format=libffm", "data.fields=27", "model.pooling=sqrtn",
                         "model.field_pooling=0=mean, 26=sum"};

    ss_cfg_defaults(cfg);
    assert_int_equal(cfg->pooling, SS_POOL_SUM);
    for (int f = 0; f < SS_CFG_MAX_FIELDS; f++)
        assert_int_equal(cfg->pooling_of[f], SS_POOL_SUM);
    s_expect_get(cfg, "model.pooling", "sum");
    s_expect_get(cfg, "model.field_pooling", "");
    assert_int_equal(ss_cfg_load(cfg, NULL, mean, 1, err, sizeof err), 0);
    assert_int_equal(cfg->pooling, SS_POOL_MEAN);
    assert_int_equal(cfg->pooling_of[0], SS_POOL_MEAN);
    assert_int_equal(cfg->pooling_of[25], SS_POOL_MEAN);
    assert_int_equal(ss_cfg_load(cfg, NULL, ffm, 4, err, sizeof err), 0);
    assert_int_equal(cfg->pooling_of[0], SS_POOL_MEAN);
    assert_int_equal(cfg->pooling_of[1], SS_POOL_SQRTN);
    assert_int_equal(cfg->pooling_of[25], SS_POOL_SQRTN);
    assert_int_equal(cfg->pooling_of[26], SS_POOL_SUM);
    s_expect_get(cfg, "model.field_pooling", "0=mean\n26=sum");
    assert_int_equal(s_load(cfg, "model:\n  field_pooling: [3=sqrtn]\n", NULL, 0, path, err), 0);
    assert_int_equal(cfg->pooling_of[2], SS_POOL_SUM);
    assert_int_equal(cfg->pooling_of[3], SS_POOL_SQRTN);
    assert_string_equal(ss_pooling_name(SS_POOL_SQRTN), "sqrtn");
    free(cfg);

    s_expect_error("model:\n  pooling: avg\n",
                   ":2: key model.pooling: expected one of sum, mean, sqrtn, got 'avg'");
    s_expect_error("model:\n  field_pooling: [0=avg]\n",
                   ":2: key model.field_pooling: entry 0 '0=avg': unknown mode 'avg' (expected "
                   "sum, mean or sqrtn)");
    s_expect_error("model:\n  field_pooling: [1=sum, mean]\n",
                   ":2: key model.field_pooling: entry 1 'mean': expected FIELD=MODE, a field "
                   "number and sum, mean or sqrtn (0=mean)");
    s_expect_error("model:\n  field_pooling: [x1=sum]\n",
                   ":2: key model.field_pooling: entry 0 'x1=sum': expected FIELD=MODE, a field "
                   "number and sum, mean or sqrtn (0=mean)");
    s_expect_error("model:\n  field_pooling: [26=mean]\n",
                   ":2: key model.field_pooling: entry 0 '26=mean': no field 26; the data "
                   "layout has 26 categorical fields, numbered 0..25");
    s_expect_error("model:\n  field_pooling:\n    - 2=mean\n    - 2=sqrtn\n",
                   ":2: key model.field_pooling: field 2 is given twice (entries 0 and 1)");
}

/* Relative data paths written in a job file are relative to its folder;
 * absolute ones and those given with --set stay as they are. */
static void test_data_paths(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char path[256], err[ERR_MAX], want[300];
    const char *set[] = {"data.eval=rel/e.tsv,/abs/f.tsv"};

    assert_int_equal(s_load(cfg, "data:\n  train: [t.tsv, ../up/*.tsv, /abs/x.tsv]\n"
                            "  eval: [e.tsv]\n", set, 1, path, err), 0);
    const char *slash = strrchr(path, '/');
    snprintf(want, sizeof want, "%.*s/t.tsv", (int)(slash - path), path);
    assert_string_equal(cfg->train_files.v[0], want);
    snprintf(want, sizeof want, "%.*s/../up/*.tsv", (int)(slash - path), path);
    assert_string_equal(cfg->train_files.v[1], want);
    assert_string_equal(cfg->train_files.v[2], "/abs/x.tsv");
    assert_int_equal(cfg->eval_files.n, 2);
    assert_string_equal(cfg->eval_files.v[0], "rel/e.tsv");     /* --set: as given */
    assert_string_equal(cfg->eval_files.v[1], "/abs/f.tsv");
    free(cfg);
}

/* security.* key files follow the data paths' rule: relative to the job
 * file's folder when written there, as given with --set; "" stays unset. */
static void test_security_paths(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char path[256], err[ERR_MAX], want[300];
    const char *set[] = {"security.client_key=ops.key"};

    assert_int_equal(s_load(cfg, "security:\n  curve: true\n  server_key: keys/s.key\n"
                            "  authorized: /etc/ss/authorized\n  client_key: t.key\n"
                            "  max_in_flight: 4\n", set, 1, path, err), 0);
    const char *slash = strrchr(path, '/');
    assert_int_equal(cfg->security.curve, 1);
    snprintf(want, sizeof want, "%.*s/keys/s.key", (int)(slash - path), path);
    assert_string_equal(cfg->security.server_key, want);
    assert_string_equal(cfg->security.authorized, "/etc/ss/authorized");
    assert_string_equal(cfg->security.client_key, "ops.key");  /* --set: as given */
    assert_string_equal(cfg->security.server_public, "");
    assert_string_equal(cfg->security.admin_keys, "");
    assert_int_equal(cfg->security.max_in_flight, 4);
    assert_int_equal(cfg->security.max_connections, 4096);
    assert_int_not_equal(s_load(cfg, "security:\n  max_in_flight: 0\n", NULL, 0, path, err), 0);
    assert_non_null(strstr(err, "security.max_in_flight"));
    free(cfg);
}

static void test_overrides(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char path[256], err[ERR_MAX];
    const char *sets[] = {
        "tables.lr=0.25",
        " ps.threads = 8 ",
        "job.seed=1",
        "job.seed=2",
        "sync.nesterov=no",
        "sync.algorithm=s-bmuf",
        "cluster.embedding=tcp://x:1, tcp://y:2,ipc://z",
        "model.bottom_mlp=[128, 64, 8]",
        "model.embedding_dim=8",
        "data.train=",
        "data.eval=[e1.tsv, e2.tsv]",
        "sync.groups=[{component: bottom, algorithm: fr-ma, block_lr: 0.5}]",
        "job.name=from the command line",
    };
    const char *yaml = "tables:\n  lr: 0.1\nps:\n  threads: 4\ndata:\n  train: [t.tsv]\n";

    assert_int_equal(s_load(cfg, yaml, sets, sizeof sets / sizeof sets[0], path, err), 0);
    assert_string_equal(err, "");
    assert_true(cfg->table_lr == 0.25);
    assert_int_equal(cfg->ps_threads, 8);
    assert_int_equal(cfg->job_seed, 2);
    assert_int_equal(cfg->sync_nesterov, 0);
    assert_int_equal(cfg->sync_algorithm, SS_SYNC_S_BMUF);
    assert_int_equal(cfg->embedding_eps.n, 3);
    assert_string_equal(cfg->embedding_eps.v[0], "tcp://x:1");
    assert_string_equal(cfg->embedding_eps.v[1], "tcp://y:2");
    assert_string_equal(cfg->embedding_eps.v[2], "ipc://z");
    assert_int_equal(cfg->bottom_mlp.n, 3);
    assert_int_equal(cfg->bottom_mlp.v[0], 128);
    assert_int_equal(cfg->bottom_mlp.v[2], 8);
    assert_int_equal(cfg->embedding_dim, 8);
    assert_int_equal(cfg->train_files.n, 0);
    assert_int_equal(cfg->eval_files.n, 2);
    assert_string_equal(cfg->eval_files.v[1], "e2.tsv");
    assert_int_equal(cfg->n_sync_groups, 1);
    assert_string_equal(cfg->sync_groups[0].component, "bottom");
    assert_int_equal(cfg->sync_groups[0].algorithm, SS_SYNC_FR_MA);
    assert_true(cfg->sync_groups[0].block_lr == 0.5);
    assert_string_equal(cfg->job_name, "from the command line");
    free(cfg);
}

static void test_override_errors(void **state)
{
    const char *s1[] = {"ps.threads=abc"};
    const char *s2[] = {"tables.lrr=1"};
    const char *s3[] = {"tables.lr"};
    const char *s4[] = {"cluster.embedding=tcp://a:1,foo"};
    const char *s5[] = {"model.top_mlp=[64, 1"};
    const char *s6[] = {"tables=1"};
    const char *s7[] = {"ps.threads=2", "tables.lr=0"};
    const char *s8[] = {"sync.groups=[{component: top, algorithm: s-ma, alpah: 1}]"};
    const char *s9[] = {"cluster.embedding=tcp://a:1,,tcp://b:2"};

    s_expect_set_error(s1, 1, "--set ps.threads=abc: key ps.threads: expected an integer, "
                              "got 'abc'");
    s_expect_set_error(s2, 1, "--set tables.lrr=1: key tables.lrr: unknown key (did you mean "
                              "tables.lr?)");
    s_expect_set_error(s3, 1, "--set tables.lr: expected key=value");
    s_expect_set_error(s4, 1, "--set cluster.embedding=tcp://a:1,foo: key cluster.embedding.1: "
                              "expected an endpoint starting with tcp://, ipc:// or inproc://, "
                              "got 'foo'");
    s_expect_set_error(s5, 1, "--set model.top_mlp=[64, 1: did not find expected ',' or ']' "
                              "(while parsing a flow sequence)");
    s_expect_set_error(s6, 1, "--set tables=1: key tables: is a section; set one of its keys "
                              "(tables.NAME)");
    s_expect_set_error(s7, 2, "--set tables.lr=0: key tables.lr: value 0 must be above 0");
    s_expect_set_error(s8, 1, "--set sync.groups=[{component: top, algorithm: s-ma, alpah: 1}]: "
                              "key sync.groups.0.alpah: unknown key (did you mean alpha?)");
    s_expect_set_error(s9, 1, "--set cluster.embedding=tcp://a:1,,tcp://b:2: "
                              "key cluster.embedding.1: empty entry");
}

static void test_get(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char out[64];

    ss_cfg_defaults(cfg);
    s_expect_get(cfg, "tables.lr", "0.1");
    s_expect_get(cfg, "tables.eps", "1e-08");
    s_expect_get(cfg, "tables.initial_accumulator", "0.001");
    s_expect_get(cfg, "sync.alpha", "-1");
    s_expect_get(cfg, "metrics.interval_s", "2");
    s_expect_get(cfg, "job.seed", "42");
    s_expect_get(cfg, "job.name", "local");
    s_expect_get(cfg, "job.log_level", "info");
    s_expect_get(cfg, "checkpoint.dir", "");
    s_expect_get(cfg, "sync.nesterov", "true");
    s_expect_get(cfg, "tables.optimizer", "rowwise_adagrad");
    s_expect_get(cfg, "sync.writeback", "delta");
    s_expect_get(cfg, "cluster.embedding", "tcp://127.0.0.1:5555\ntcp://127.0.0.1:5556");
    s_expect_get(cfg, "cluster.embedding.count", "2");
    s_expect_get(cfg, "cluster.embedding.0", "tcp://127.0.0.1:5555");
    s_expect_get(cfg, "cluster.embedding.1", "tcp://127.0.0.1:5556");
    s_expect_get(cfg, "model.bottom_mlp", "64\n16");
    s_expect_get(cfg, "model.top_mlp.1", "1");
    s_expect_get(cfg, "data.train", "");
    s_expect_get(cfg, "data.train.count", "0");
    s_expect_get(cfg, "sync.groups", "");
    s_expect_get(cfg, "sync.groups.count", "0");

    assert_int_equal(ss_cfg_get(cfg, "cluster.embedding.2", out, sizeof out), SS_E_NOTFOUND);
    assert_int_equal(ss_cfg_get(cfg, "cluster.embedding.x", out, sizeof out), SS_E_NOTFOUND);
    assert_int_equal(ss_cfg_get(cfg, "job.name.count", out, sizeof out), SS_E_NOTFOUND);
    assert_int_equal(ss_cfg_get(cfg, "tables", out, sizeof out), SS_E_NOTFOUND);
    assert_int_equal(ss_cfg_get(cfg, "nope", out, sizeof out), SS_E_NOTFOUND);
    assert_int_equal(ss_cfg_get(cfg, "tables.lr", out, 3), SS_E_TOOBIG);
    assert_string_equal(out, "0.");

    cfg->table_lr = 0.1 + 0.2;  /* needs all 17 digits to read back */
    s_expect_get(cfg, "tables.lr", "0.30000000000000004");
    cfg->table_lr = 100;
    s_expect_get(cfg, "tables.lr", "100");
    cfg->table_lr = 1.5e6;
    s_expect_get(cfg, "tables.lr", "1500000");
    cfg->table_lr = 123.25;
    s_expect_get(cfg, "tables.lr", "123.25");
    cfg->table_lr = 1e20;
    s_expect_get(cfg, "tables.lr", "1e+20");
    free(cfg);
}

static void test_cluster_hash(void **state)
{
    struct ss_cfg *base = calloc(1, sizeof *base), *cfg = calloc(1, sizeof *cfg);
    char err[ERR_MAX];
    /* the addresses are not the shape: hosts may write them differently (a
     * name or an IP, ports a launcher picked), as long as the counts agree */
    const char *non_cluster[] = {"tables.lr=0.2", "ps.threads=7", "sync.algorithm=s-ma",
                                 "data.train=x.tsv", "job.name=other", "tables.l2=0.1",
                                 "model.l2=0.1", "model.warmup_examples=0",
                                 "cluster.embedding=tcp://ps-a:7000,tcp://10.1.2.3:7001",
                                 "cluster.sync=tcp://localhost:5561",
                                 "cluster.trainers=tcp://[::1]:1,ipc://tr-1",
                                 "cluster.bind=*"};
    /* a shard or trainer more or less is */
    const char *cluster[] = {"job.seed=43",
                             "cluster.embedding=tcp://127.0.0.1:5555",
                             "cluster.embedding=tcp://a:1,tcp://a:2,tcp://a:3",
                             "cluster.sync=tcp://127.0.0.1:5561,tcp://127.0.0.1:5562",
                             "cluster.trainers=tcp://127.0.0.1:5570",
                             "data.format=libsvm",
                             "tables.optimizer=adagrad",
                             "model.top_mlp=32,1",
                             "model.first_order=false"};

    ss_cfg_defaults(base);
    uint64_t h0 = ss_cfg_cluster_hash(base);
    assert_int_equal(ss_cfg_cluster_hash(base), h0);
    for (size_t i = 0; i < sizeof non_cluster / sizeof non_cluster[0]; i++) {
        assert_int_equal(ss_cfg_load(cfg, NULL, &non_cluster[i], 1, err, sizeof err), 0);
        assert_int_equal(ss_cfg_cluster_hash(cfg), h0);
    }
    for (size_t i = 0; i < sizeof cluster / sizeof cluster[0]; i++) {
        assert_int_equal(ss_cfg_load(cfg, NULL, &cluster[i], 1, err, sizeof err), 0);
        assert_int_not_equal(ss_cfg_cluster_hash(cfg), h0);
    }
    /* embedding_dim needs the bottom MLP to follow */
    const char *dim[] = {"model.embedding_dim=8", "model.bottom_mlp=64,8"};
    assert_int_equal(ss_cfg_load(cfg, NULL, dim, 2, err, sizeof err), 0);
    assert_int_not_equal(ss_cfg_cluster_hash(cfg), h0);
    free(cfg);
    free(base);
}

/* The row width every module sizes rows with: embedding_dim, plus 1 with
 * first-order weights; the new keys' ranges. */
static void test_row_dim_and_new_keys(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char err[ERR_MAX];
    const char *off[] = {"model.first_order=off"};
    const char *dim8[] = {"model.embedding_dim=8", "model.bottom_mlp=64,8",
                          "model.first_order=yes", "model.l2=0.5", "tables.l2=1e-4",
                          "model.warmup_examples=0"};

    assert_int_equal(ss_cfg_load(cfg, NULL, off, 1, err, sizeof err), 0);
    assert_int_equal(ss_cfg_row_dim(cfg), 16);
    assert_int_equal(ss_cfg_load(cfg, NULL, dim8, 6, err, sizeof err), 0);
    assert_int_equal(ss_cfg_row_dim(cfg), 9);
    assert_true(cfg->dense_l2 == 0.5);
    assert_true(cfg->table_l2 == 1e-4);
    assert_int_equal(cfg->warmup_examples, 0);
    s_expect_error("model:\n  l2: -1\n", ":2: key model.l2: value -1 is below the minimum 0");
    s_expect_error("tables:\n  l2: 101\n",
                   ":2: key tables.l2: value 101 is above the maximum 100");
    s_expect_error("model:\n  warmup_examples: -5\n",
                   ":2: key model.warmup_examples: value -5 is below the minimum 0");
    s_expect_error("model:\n  lr_decay: 0.5\n", ":2: key model.lr_decay: unknown key");
    s_expect_error("model:\n  first_order: maybe\n",
                   ":2: key model.first_order: expected a boolean "
                   "(true/false/yes/no/on/off/1/0), got 'maybe'");
    free(cfg);
}

/* The bounded-memory keys: ranges, and a bound too small for the stripes
 * (and the admission sketch) named with where it came from. */
static void test_bounded_memory_keys(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char err[ERR_MAX];
    const char *ok[] = {"tables.admit_after=2", "tables.admit_sketch_bytes=4096",
                        "tables.ttl_s=3600", "tables.max_memory_bytes=268435456"};
    const char *small[] = {"ps.stripes=4", "tables.admit_after=0", "tables.max_memory_bytes=1048575"};

    assert_int_equal(ss_cfg_load(cfg, NULL, ok, 4, err, sizeof err), 0);
    assert_int_equal(cfg->admit_after, 2);
    assert_int_equal(cfg->admit_sketch_bytes, 4096);
    assert_int_equal(cfg->ttl_s, 3600);
    assert_int_equal(cfg->max_memory_bytes, INT64_C(268435456));
    s_expect_error("tables:\n  admit_after: 256\n",
                   ":2: key tables.admit_after: value 256 is above the maximum 255");
    s_expect_error("tables:\n  admit_sketch_bytes: 100\n",
                   ":2: key tables.admit_sketch_bytes: value 100 is below the minimum 4096");
    s_expect_error("tables:\n  ttl_s: -1\n",
                   ":2: key tables.ttl_s: value -1 is below the minimum 0");
    s_expect_error("tables:\n  admit_after: 0\n  max_memory_bytes: 1000000\n",
                   ":3: key tables.max_memory_bytes: value 1000000 is below the minimum 16777216 "
                   "(256 KiB for each of the 64 ps.stripes); 0 turns the bound off");
    /* the default 2 embedding shards: each holds half of the 8 MiB sketch */
    s_expect_error("tables:\n  admit_after: 3\n  max_memory_bytes: 16777216\n",
                   ":3: key tables.max_memory_bytes: value 16777216 is below the minimum "
                   "20971520 (256 KiB for each of the 64 ps.stripes, plus "
                   "this shard's part of tables.admit_sketch_bytes); 0 turns the bound off");
    /* 4 embedding shards: each holds a quarter of the 8 MiB sketch */
    s_expect_error("cluster:\n  embedding: [tcp://127.0.0.1:5001, tcp://127.0.0.1:5002, "
                   "tcp://127.0.0.1:5003, tcp://127.0.0.1:5004]\n"
                   "tables:\n  admit_after: 3\n  max_memory_bytes: 16777216\n",
                   ":5: key tables.max_memory_bytes: value 16777216 is below the minimum "
                   "18874368 (256 KiB for each of the 64 ps.stripes, plus "
                   "this shard's part of tables.admit_sketch_bytes); 0 turns the bound off");
    s_expect_set_error(small, 3,
                       "--set tables.max_memory_bytes=1048575: key tables.max_memory_bytes: "
                       "value 1048575 is below the minimum 1048576 (256 KiB for each of the 4 "
                       "ps.stripes); 0 turns the bound off");
    free(cfg);
}

static void test_local_yaml(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg), *dflt = calloc(1, sizeof *dflt);
    char err[ERR_MAX], got[4096], want[4096];
    const char *name;

    assert_int_equal(ss_cfg_load(cfg, "conf/local.yaml", NULL, 0, err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_string_equal(cfg->path, "conf/local.yaml");
    assert_int_equal(cfg->embedding_eps.n, 2);
    assert_int_equal(cfg->sync_eps.n, 1);
    assert_int_equal(cfg->trainer_eps.n, 2);
    assert_int_equal(cfg->workers, 2);
    assert_int_equal(cfg->train_files.n, 0);  /* names no data: works anywhere */
    assert_int_equal(cfg->eval_files.n, 0);

    /* every key in the file states its default */
    ss_cfg_defaults(dflt);
    for (size_t i = 0; ss_cfg_key_info(i, &name, NULL, NULL) == 0; i++) {
        assert_int_equal(ss_cfg_get(cfg, name, got, sizeof got), 0);
        assert_int_equal(ss_cfg_get(dflt, name, want, sizeof want), 0);
        assert_string_equal(got, want);
    }
    assert_int_equal(ss_cfg_cluster_hash(cfg), ss_cfg_cluster_hash(dflt));
    free(dflt);
    free(cfg);
}

static void test_key_info_and_names(void **state)
{
    const char *name, *def, *help;
    size_t n = 0;

    while (ss_cfg_key_info(n, &name, &def, &help) == 0) {
        const char *other, *odef, *ohelp;
        assert_non_null(strchr(name, '.'));
        assert_true(strlen(help) > 10);
        for (size_t i = 0; i < n; i++) {  /* every name once */
            assert_int_equal(ss_cfg_key_info(i, &other, &odef, &ohelp), 0);
            assert_string_not_equal(other, name);
        }
        n++;
    }
    assert_true(n >= 42);
    assert_int_equal(ss_cfg_key_info(0, &name, &def, &help), 0);
    assert_string_equal(name, "job.name");
    assert_string_equal(def, "local");
    assert_int_equal(ss_cfg_key_info(n, &name, NULL, NULL), SS_E_NOTFOUND);

    assert_string_equal(ss_sync_algo_name(SS_SYNC_FR_BMUF), "fr-bmuf");
    assert_string_equal(ss_sync_algo_name(SS_SYNC_S_EASGD), "s-easgd");
    assert_string_equal(ss_sync_algo_name(99), "?");
    assert_string_equal(ss_opt_name(SS_OPT_ROWWISE_ADAGRAD), "rowwise_adagrad");
    assert_string_equal(ss_opt_name(-1), "?");
}

/* ss_cfg_log writes one "config KEY=VALUE" line per key to stderr. */
static void test_log(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char path[256], buf[16384];
    const char *sets[] = {"tables.lr=0.125"};
    int saved = dup(STDERR_FILENO), old_level = ss_log_level_now;

    ss_cfg_load(cfg, NULL, sets, 1, NULL, 0);
    s_write_tmp("", path, sizeof path);
    FILE *fp = fopen(path, "w+");
    assert_non_null(fp);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fileno(fp), STDERR_FILENO), STDERR_FILENO);
    ss_log_level_now = SS_LOG_INFO;
    ss_cfg_log(cfg);
    ss_log_level_now = old_level;
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    rewind(fp);
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    unlink(path);
    assert_non_null(strstr(buf, " INFO config tables.lr=0.125\n"));
    assert_non_null(strstr(buf, " INFO config cluster.embedding=[tcp://127.0.0.1:5555, "
                                "tcp://127.0.0.1:5556]\n"));
    assert_non_null(strstr(buf, " INFO config sync.nesterov=true\n"));
    size_t lines = 0, keys = 0;
    const char *name, *def, *help;
    for (char *p = buf; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    while (ss_cfg_key_info(keys, &name, &def, &help) == 0)
        keys++;
    assert_int_equal(lines, keys + 1);  /* "config from" + one line per key */
    free(cfg);
}

struct reader_arg {
    const struct ss_cfg *cfg;  /* shared, read-only */
    uint64_t want;             /* expected cluster hash */
    int ok;                    /* result */
};

static void *s_reader(void *p)
{
    struct reader_arg *a = p;
    char out[256];

    a->ok = 1;
    for (int i = 0; i < 200; i++) {
        a->ok &= ss_cfg_cluster_hash(a->cfg) == a->want;
        a->ok &= ss_cfg_get(a->cfg, "cluster.embedding.1", out, sizeof out) == 0 &&
                 strcmp(out, "tcp://127.0.0.1:5556") == 0;
    }
    return NULL;
}

/* The loaded config is read by many threads without locks. */
static void test_concurrent_readers(void **state)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    struct reader_arg args[4];
    pthread_t tids[4];

    ss_cfg_defaults(cfg);
    uint64_t want = ss_cfg_cluster_hash(cfg);
    for (int i = 0; i < 4; i++) {
        args[i] = (struct reader_arg){cfg, want, 0};
        assert_int_equal(pthread_create(&tids[i], NULL, s_reader, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(tids[i], NULL), 0);
        assert_int_equal(args[i].ok, 1);
    }
    free(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_load_values),
        cmocka_unit_test(test_lists_flow_and_block),
        cmocka_unit_test(test_sync_groups),
        cmocka_unit_test(test_allow_trainer_loss),
        cmocka_unit_test(test_issue_groups_inherit_globals),
        cmocka_unit_test(test_error_unknown_key),
        cmocka_unit_test(test_error_type),
        cmocka_unit_test(test_error_range),
        cmocka_unit_test(test_error_enum),
        cmocka_unit_test(test_error_syntax_and_file),
        cmocka_unit_test(test_error_lists),
        cmocka_unit_test(test_error_groups),
        cmocka_unit_test(test_error_cross_keys),
        cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_override_errors),
        cmocka_unit_test(test_get),
        cmocka_unit_test(test_cluster_hash),
        cmocka_unit_test(test_row_dim_and_new_keys),
        cmocka_unit_test(test_bounded_memory_keys),
        cmocka_unit_test(test_local_yaml),
        cmocka_unit_test(test_data_layout),
        cmocka_unit_test(test_pooling),
        cmocka_unit_test(test_data_paths),
        cmocka_unit_test(test_security_paths),
        cmocka_unit_test(test_key_info_and_names),
        cmocka_unit_test(test_log),
        cmocka_unit_test(test_concurrent_readers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
