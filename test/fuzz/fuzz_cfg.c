/* fuzz_cfg.c - libFuzzer harness: the job-file loader, ss_cfg_load().
 *
 * Input: YAML bytes, optionally followed by a NUL and up to 8 NUL-separated
 * --set overrides ("a.b=value"). The YAML goes to a temporary job file and
 * is loaded without overrides, with them, and the overrides alone on the
 * defaults. Checks: ss_cfg_load() returns 0 or SS_E_CONFIG with a message;
 * a loaded config answers ss_cfg_get() for every key (terminated, within
 * the buffer) and hashes. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_util.h"
#include "ss_cfg.h"
#include "ss_err.h"

#define S_MAX_SETS 8

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ss_cfg *s_cfg;   /* loaded config, reused */
static char s_path[600];       /* the temporary job file */
static char s_text[1 << 16];   /* a value from ss_cfg_get() */

/* Every key of a loaded config can be read back. */
static void s_read_back(const struct ss_cfg *cfg)
{
    const char *name;
    char key[256];
    for (size_t i = 0; ss_cfg_key_info(i, &name, NULL, NULL) == 0; i++) {
        memset(s_text, 'x', sizeof s_text);
        int rc = ss_cfg_get(cfg, name, s_text, sizeof s_text);
        FUZZ_CHECK(rc == 0, "ss_cfg_get(%s): %s", name, ss_errname(rc));
        FUZZ_CHECK(memchr(s_text, 0, sizeof s_text), "ss_cfg_get(%s): not terminated", name);
        snprintf(key, sizeof key, "%s.count", name);
        ss_cfg_get(cfg, key, s_text, sizeof s_text);
        snprintf(key, sizeof key, "%s.0", name);
        rc = ss_cfg_get(cfg, key, s_text, 8);
        FUZZ_CHECK(rc == SS_E_NOTFOUND || memchr(s_text, 0, 8),
                   "ss_cfg_get(%s): short buffer not terminated", key);
    }
    (void)ss_cfg_cluster_hash(cfg);
    (void)ss_cfg_row_dim(cfg);
}

static void s_load(const char *path, const char *const *sets, size_t n_sets)
{
    char err[1024] = "";
    int rc = ss_cfg_load(s_cfg, path, sets, n_sets, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == SS_E_CONFIG, "ss_cfg_load returned %s", ss_errname(rc));
    FUZZ_CHECK(rc == 0 || err[0], "ss_cfg_load failed without a message");
    if (rc == 0)
        s_read_back(s_cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *sets[S_MAX_SETS];
    size_t n_sets = 0;
    const uint8_t *nul = memchr(data, 0, size);
    size_t yaml_len = nul ? (size_t)(nul - data) : size;

    fuzz_write_file(s_path, data, yaml_len);
    s_load(s_path, NULL, 0);
    if (!nul)
        return 0;
    /* the overrides: a private NUL-terminated copy of the tail */
    size_t tail = size - yaml_len - 1;
    char *copy = malloc(tail + 1);
    FUZZ_CHECK(copy, "out of memory");
    memcpy(copy, nul + 1, tail);
    copy[tail] = '\0';
    for (char *p = copy; p < copy + tail && n_sets < S_MAX_SETS; p += strlen(p) + 1)
        sets[n_sets++] = p;
    s_load(s_path, sets, n_sets);
    s_load(NULL, sets, n_sets);
    free(copy);
    return 0;
}

/* ------------------------------------------------------------------ seeds */

static const char s_small[] =
    "job: {name: fuzz, seed: 7}\n"
    "cluster:\n"
    "  embedding: [tcp://127.0.0.1:7000, 'ipc:///tmp/x']\n"
    "  sync: []\n"
    "  trainers: [inproc://t0]\n"
    "model:\n"
    "  embedding_dim: 8\n"
    "  bottom_mlp: [16, 8]\n"
    "  first_order: false\n"
    "tables: {optimizer: adagrad, lr: 0.5, capacity_rows: 1000}\n"
    "data:\n"
    "  format: csv\n"
    "  columns: [label, dense*2, categorical*3, multi, ignore]\n"
    "  delimiter: tab\n"
    "  train: [a.csv, /abs/b*.csv]\n";

static const char s_groups[] =
    "sync:\n"
    "  algorithm: s-easgd\n"
    "  alpha: 0.3\n"
    "  groups:\n"
    "    - {component: bottom, algorithm: s-bmuf, block_momentum: 0.5}\n"
    "    - component: top\n"
    "      algorithm: fr-easgd\n"
    "      alpha: -1\n"
    "checkpoint: {dir: /tmp/ck, interval_s: 0.5}\n";

static const char s_libffm[] =
    "%YAML 1.1\n---\n"
    "base: &b {lr: 0.25}\n"
    "data: {format: libffm, fields: 4, train: x.ffm, max_bad_fraction: 1}\n"
    "tables: *b\n"
    "trainer: {workers: !!int 3, batch_size: 0x10}\n"
    "...\n";

static const char s_sets[] =
    "model: {embedding_dim: 4}\n"
    "\0model.bottom_mlp=[8, 4]"
    "\0data.format=libsvm"
    "\0cluster.embedding=tcp://h:1,tcp://h:2"
    "\0sync.groups=[{component: top, algorithm: s-ma}]"
    "\0data.train=rel/path.txt";

/* Copy a file of the repository (run from its root) as a seed. */
static void s_seed_repo_file(const char *dir, const char *name, const char *path)
{
    char buf[1 << 16];
    FILE *fp = fopen(path, "rb");
    FUZZ_CHECK(fp, "cannot open %s (run from the repository root)", path);
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    fuzz_seed(dir, name, buf, n);
}

static void s_write_seeds(const char *dir)
{
    s_seed_repo_file(dir, "local.yaml", "conf/local.yaml");
    s_seed_repo_file(dir, "avazu.yaml", "conf/avazu.yaml");
    fuzz_seed(dir, "small.yaml", s_small, sizeof s_small - 1);
    fuzz_seed(dir, "groups.yaml", s_groups, sizeof s_groups - 1);
    fuzz_seed(dir, "libffm-anchor.yaml", s_libffm, sizeof s_libffm - 1);
    fuzz_seed(dir, "sets", s_sets, sizeof s_sets - 1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    fuzz_seed_mode(s_write_seeds);
    s_cfg = calloc(1, sizeof *s_cfg);
    FUZZ_CHECK(s_cfg, "out of memory");
    snprintf(s_path, sizeof s_path, "%s/job.yaml", fuzz_tmpdir("cfg"));
    return 0;
}
