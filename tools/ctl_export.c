/* ctl_export.c - shadow-ctl export: a saved model set into one model file.
 *
 * DESIGN: every check that reads only headers runs before the output is
 * created (MANIFEST, dense.bin whole, each PS file's header: shard, save,
 * shape, size), so a set with a part missing or from another save writes
 * nothing. The rows are then copied file by file, a batch of records at a
 * time (memory: one batch, not the model), and each file's payload checksum
 * is checked once it was read through; a mismatch there removes the
 * half-written output (tr_mfile_writer_abort). */
#include "ctl_export.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ps_ckpt.h"
#include "ss_cfg.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_version.h"
#include "tr_mfile.h"
#include "tr_model_shape.h"

#define S_PATH 4096
#define S_MAX_SETS 512
#define S_BATCH 4096u   /* records read at once */
#define S_DENSE_MAGIC "SSDENSE1"

static void s_usage(FILE *out)
{
    fprintf(out,
            "usage: shadow-ctl export MODEL_DIR -o FILE [-c JOB.yaml] [--set KEY=VALUE ...]\n"
            "                         [--max-bytes N]\n"
            "\n"
            "Write the model saved in MODEL_DIR (RUN_DIR/model: dense.bin, every\n"
            "embedding-K.ckpt, MANIFEST) into FILE, one file that shadow-score and the\n"
            "libshadowscore library score with no PS (docs/model-file.md): the dense model,\n"
            "every stored embedding row, the data layout and model shape, a format version\n"
            "and a checksum. The set is checked whole first; nothing is written when a part\n"
            "is missing, from another save or corrupted (the message names it).\n"
            "\n"
            "Options:\n"
            "  -o, --out FILE       the model file (written whole or not at all)\n"
            "  -c, --config FILE    the job file the model was trained with (default: the\n"
            "                       one in MODEL_DIR/../cluster.args, written by\n"
            "                       scripts/shadow-launch, with its --set options)\n"
            "  -s, --set KEY=VALUE  override a job-file key (repeatable)\n"
            "      --max-bytes N    refuse a model file larger than N bytes (default: this\n"
            "                       host's memory: a scorer maps the whole file)\n"
            "  -h, --help           this text\n"
            "      --version        print the version and git revision\n");
}

struct s_args {
    const char *dir;                /* MODEL_DIR */
    const char *out;                /* -o */
    const char *config;             /* -c */
    const char *sets[S_MAX_SETS];   /* --set values */
    size_t n_sets;
    uint64_t max_bytes;             /* --max-bytes, 0 = physical memory */
    char *owned[S_MAX_SETS];        /* strings read from cluster.args */
    size_t n_owned;
};

/* What MANIFEST says. */
struct s_manifest {
    uint64_t save_id;
    char dense[256];
    uint32_t n_emb;
    uint32_t n_sync;
};

static int s_parse(int argc, char **argv, struct s_args *a)
{
    static const struct option opts[] = {
        {"out", required_argument, 0, 'o'}, {"config", required_argument, 0, 'c'},
        {"set", required_argument, 0, 's'}, {"max-bytes", required_argument, 0, 'm'},
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0}};
    int c;
    char *end;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:c:s:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': a->out = optarg; break;
        case 'c': a->config = optarg; break;
        case 's':
            if (a->n_sets >= S_MAX_SETS / 2)
                return 2;
            a->sets[a->n_sets++] = optarg;
            break;
        case 'm':
            errno = 0;
            a->max_bytes = strtoull(optarg, &end, 10);
            if (errno || *end || a->max_bytes == 0) {
                fprintf(stderr, "shadow-ctl export: --max-bytes %s: expected a positive "
                        "integer\n", optarg);
                return 2;
            }
            break;
        case 'h': return 1;
        case 'V': return 3;
        default: return 2;
        }
    }
    if (optind + 1 != argc || !a->out) {
        fprintf(stderr, "shadow-ctl export: expected MODEL_DIR and -o FILE\n");
        return 2;
    }
    a->dir = argv[optind];
    return 0;
}

/* No -c: the job file and --set options of MODEL_DIR/../cluster.args. */
static int s_cluster_args(struct s_args *a, char *err, size_t len)
{
    char path[S_PATH], line[SS_CFG_MAX_STR * SS_CFG_MAX_LIST];
    snprintf(path, sizeof path, "%s/../cluster.args", a->dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, len, "no job file: give -c JOB.yaml (the job the model was trained "
                 "with), or export RUN_DIR/model of a run of scripts/shadow-launch (%s: %s)",
                 path, strerror(errno));
        return SS_E_CONFIG;
    }
    char *prev = NULL;
    size_t user = a->n_sets;
    const char *keep[S_MAX_SETS];
    memcpy(keep, a->sets, user * sizeof *keep);
    a->n_sets = 0;
    while (fgets(line, sizeof line, f) && a->n_owned < S_MAX_SETS) {
        line[strcspn(line, "\n")] = '\0';
        char *s = a->owned[a->n_owned++] = ss_strdup(line);
        if (prev && !strcmp(prev, "-c"))
            a->config = s;
        else if (prev && !strcmp(prev, "--set") && a->n_sets < S_MAX_SETS / 2)
            a->sets[a->n_sets++] = s;
        prev = s;
    }
    fclose(f);
    for (size_t i = 0; i < user; i++)  /* the command line's --set win */
        a->sets[a->n_sets++] = keep[i];
    if (!a->config) {
        snprintf(err, len, "%s names no job file (-c): give -c JOB.yaml", path);
        return SS_E_CONFIG;
    }
    return 0;
}

static int s_read_manifest(const char *dir, struct s_manifest *m, char *err, size_t len)
{
    char path[S_PATH], line[512], key[64], val[300];
    int seen = 0;
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, len, "%s: %s (not a complete model set: the save did not finish, or "
                 "this is not RUN_DIR/model)", path, strerror(errno));
        return SS_E_NOTFOUND;
    }
    memset(m, 0, sizeof *m);
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%63s %299s", key, val) != 2)
            continue;
        if (!strcmp(key, "shadowsync-model"))
            seen |= strcmp(val, "1") == 0;
        else if (!strcmp(key, "save_id"))
            m->save_id = strtoull(val, NULL, 16), seen |= 2;
        else if (!strcmp(key, "dense"))
            snprintf(m->dense, sizeof m->dense, "%s", val), seen |= 4;
        else if (!strcmp(key, "embedding_shards"))
            m->n_emb = (uint32_t)strtoul(val, NULL, 10), seen |= 8;
        else if (!strcmp(key, "sync_shards"))
            m->n_sync = (uint32_t)strtoul(val, NULL, 10);
    }
    fclose(f);
    if (seen != 15 || strchr(m->dense, '/') || m->n_emb == 0 || m->n_emb > SS_CFG_MAX_LIST ||
        m->n_sync > SS_CFG_MAX_LIST) {
        snprintf(err, len, "%s is not a model set's MANIFEST (shadowsync-model 1, save_id, "
                 "dense, embedding_shards)", path);
        return SS_E_CORRUPT;
    }
    return 0;
}

/* Read and check dir/dense.bin (the trainer's format, tr_modelset.c) into a
 * new array of n_params floats. */
static float *s_read_dense(const char *dir, const struct s_manifest *man, uint64_t n_params,
                           uint64_t shape_hash, char *err, size_t len)
{
    char path[S_PATH];
    struct { char magic[8]; uint64_t n_params, shape_hash, checksum; } h;
    snprintf(path, sizeof path, "%s/%s", dir, man->dense);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, len, "the dense model %s: %s (the model set is incomplete)", path,
                 strerror(errno));
        return NULL;
    }
    float *v = ss_malloc(n_params * sizeof(float) + 1);
    const char *bad = NULL;
    if (fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, S_DENSE_MAGIC, 8) != 0)
        bad = "not a ShadowSync dense model";
    else if (h.n_params != n_params || h.shape_hash != shape_hash)
        bad = "another model shape than the job's (wrong -c JOB.yaml or --set?)";
    else if (fread(v, sizeof(float), n_params, f) != n_params || fgetc(f) != EOF)
        bad = "truncated or with bytes after its floats";
    else if (ss_hash_bytes(v, n_params * sizeof(float), 0) != h.checksum)
        bad = "corrupted (checksum)";
    fclose(f);
    if (bad) {
        snprintf(err, len, "the dense model %s is %s", path, bad);
        ss_free(v);
        return NULL;
    }
    return v;
}

/* Floats a PS stores per row: the weights, then the optimizer's state. */
static uint32_t s_row_floats(const struct ss_cfg *cfg, uint32_t row_dim)
{
    if (cfg->optimizer == SS_OPT_ADAGRAD)
        return 2 * row_dim;
    if (cfg->optimizer == SS_OPT_ROWWISE_ADAGRAD)
        return row_dim + 1 + (cfg->first_order ? 1u : 0u);
    return row_dim;
}

/* Check the header of PS file ROLE-K.ckpt of the set; *rows: its rows. */
static int s_check_part(const char *dir, const char *role, uint32_t kind, uint32_t k,
                        const struct s_manifest *man, uint32_t n, const struct ss_cfg *cfg,
                        uint64_t *rows, char *err, size_t len)
{
    char path[S_PATH];
    struct ps_ckpt_hdr h;
    ps_ckpt_reader_t *r = NULL;
    ps_ckpt_path(path, sizeof path, dir, role, k);
    if (access(path, F_OK) != 0) {
        snprintf(err, len, "%s is missing: the model set is incomplete (MANIFEST names %u "
                 "%s shards)", path, n, role);
        return SS_E_NOTFOUND;
    }
    int rc = ps_ckpt_open(path, kind, &h, &r);
    ps_ckpt_close(&r);
    if (rc) {
        snprintf(err, len, "%s is corrupted or unreadable (%s; see the line above)", path,
                 ss_strerror(rc));
        return rc;
    }
    uint32_t rd = ss_cfg_row_dim(cfg);
    uint64_t opt = (uint64_t)cfg->optimizer + (cfg->first_order ? 256u : 0u);
    const char *bad = NULL;
    if (h.shard != k || (h.n_shards && h.n_shards != n))
        bad = "written by another shard or for another shard count";
    else if (h.save_id != man->save_id)
        bad = "of another save than MANIFEST's (a leftover)";
    else if (kind == PS_CKPT_EMBED &&
             (h.shape[0] != (uint64_t)cfg->n_tables || h.shape[1] != rd || h.shape[2] != opt ||
              h.payload_bytes != h.shape[3] * (16 + 4ull * s_row_floats(cfg, rd))))
        bad = "of another shape than the job's (tables, dim, optimizer)";
    if (bad) {
        snprintf(err, len, "%s is %s", path, bad);
        return SS_E_CORRUPT;
    }
    *rows = kind == PS_CKPT_EMBED ? h.shape[3] : 0;
    return 0;
}

/* Copy the rows of embedding-K.ckpt into w, checking its checksum. */
static int s_copy_rows(const char *dir, uint32_t k, const struct ss_cfg *cfg,
                       tr_mfile_writer_t *w, char *err, size_t len)
{
    char path[S_PATH];
    struct ps_ckpt_hdr h;
    ps_ckpt_reader_t *r = NULL;
    ps_ckpt_path(path, sizeof path, dir, PS_CKPT_NAME_EMBED, k);
    int rc = ps_ckpt_open(path, PS_CKPT_EMBED, &h, &r);
    uint32_t rd = ss_cfg_row_dim(cfg);
    size_t rec = 16 + 4 * (size_t)s_row_floats(cfg, rd);
    unsigned char *buf = ss_malloc(S_BATCH * rec);
    int wrc = 0;  /* a failed write: err says why */
    for (uint64_t left = rc ? 0 : h.shape[3]; left && rc == 0 && wrc == 0;) {
        size_t n = left < S_BATCH ? (size_t)left : S_BATCH;
        if ((rc = ps_ckpt_read(r, buf, n * rec)) != 0)
            break;
        for (size_t i = 0; i < n && wrc == 0; i++) {
            uint64_t key;
            uint32_t table;
            float row[TR_MODEL_MAX_DIM + 1];
            memcpy(&key, buf + i * rec, 8);
            memcpy(&table, buf + i * rec + 8, 4);
            memcpy(row, buf + i * rec + 16, rd * sizeof(float));
            wrc = tr_mfile_write_row(w, table, key, row, err, len);
        }
        left -= n;
    }
    if (rc == 0 && wrc == 0)
        rc = ps_ckpt_verify(r);
    if (rc)
        snprintf(err, len, "%s is corrupted or unreadable (%s; see the line above): nothing "
                 "was exported", path, ss_strerror(rc));
    ps_ckpt_close(&r);
    ss_free(buf);
    return rc ? rc : wrc;
}

/* The bytes a scorer needs for a file of b bytes and n rows: the file (mapped)
 * and its row index (2 to 4 slots of 4 bytes a row). */
static uint64_t s_scorer_bytes(uint64_t b, uint64_t n)
{
    return b + 16 * n;
}

static uint64_t s_host_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : UINT64_MAX;
}

/* Everything after the arguments: check, then write. */
static int s_export(struct s_args *a, char *err, size_t len)
{
    struct ss_cfg *cfg = ss_calloc(1, sizeof *cfg);
    struct s_manifest man;
    struct tr_model_conf mc;
    struct tr_model_shape shape = {0};
    tr_mfile_writer_t *w = NULL;
    float *dense = NULL;
    char text[TR_MFILE_MAX_TEXT], why[1024];
    uint64_t n_rows = 0, rows;
    int rc = a->config ? 0 : s_cluster_args(a, err, len);
    if (rc == 0 && ss_cfg_load(cfg, a->config, a->sets, a->n_sets, why, sizeof why) != 0)
        snprintf(err, len, "%s", why), rc = SS_E_CONFIG;
    if (rc == 0)
        rc = s_read_manifest(a->dir, &man, err, len);
    if (rc == 0 && (tr_mfile_model_conf(cfg, &mc) != 0 ||
                    tr_model_shape_of(&mc, &shape, why, sizeof why) != 0))
        snprintf(err, len, "the job's model shape: %s", why), rc = SS_E_CONFIG;
    if (rc == 0 && !(dense = s_read_dense(a->dir, &man, shape.n_params,
                                          tr_mfile_shape_hash(&mc), err, len)))
        rc = SS_E_CORRUPT;
    for (uint32_t k = 0; rc == 0 && k < man.n_emb; k++) {
        rc = s_check_part(a->dir, PS_CKPT_NAME_EMBED, PS_CKPT_EMBED, k, &man, man.n_emb, cfg,
                          &rows, err, len);
        n_rows += rows;
    }
    for (uint32_t k = 0; rc == 0 && k < man.n_sync; k++)
        rc = s_check_part(a->dir, PS_CKPT_NAME_SYNC, PS_CKPT_SYNC, k, &man, man.n_sync, cfg,
                          &rows, err, len);
    int tn = rc ? 0 : tr_mfile_cfg_text(cfg, text, sizeof text);
    if (tn < 0)
        snprintf(err, len, "the job's config text is too long"), rc = SS_E_TOOBIG;
    struct tr_mfile_info info = {shape.n_params, n_rows,
                                 ss_cfg_row_dim(cfg), (uint32_t)cfg->n_tables, man.save_id,
                                 tr_mfile_shape_hash(&mc), (uint64_t)tn};
    uint64_t bytes = tr_mfile_bytes(&info), need = s_scorer_bytes(bytes, n_rows);
    uint64_t limit = a->max_bytes ? a->max_bytes : s_host_bytes();
    if (rc == 0 && (n_rows >= UINT32_MAX || need > limit)) {
        snprintf(err, len, "the model is too large for one file a scorer can load: %" PRIu64
                 " rows, a file of %" PRIu64 " bytes (%.2f GiB) and %" PRIu64 " bytes to score "
                 "it, over the limit of %" PRIu64 " bytes (%s); sharded export (one file per "
                 "key range, scored together) is not built", n_rows, bytes,
                 (double)bytes / (1 << 30), need, limit,
                 a->max_bytes ? "--max-bytes" : "this host's memory");
        rc = SS_E_TOOBIG;
    }
    if (rc == 0 && !(w = tr_mfile_writer_new(a->out, &info, text, (size_t)tn, err, len)))
        rc = SS_E_IO;
    if (rc == 0)
        rc = tr_mfile_write_dense(w, dense, info.n_params, err, len);
    for (uint32_t k = 0; rc == 0 && k < man.n_emb; k++)
        rc = s_copy_rows(a->dir, k, cfg, w, err, len);
    if (rc == 0)
        rc = tr_mfile_writer_commit(&w, err, len);
    tr_mfile_writer_abort(&w);
    if (rc == 0)
        printf("exported %s to %s: %" PRIu64 " dense floats, %" PRIu64 " rows of %u floats "
               "in %u tables, %" PRIu64 " bytes (save %016" PRIx64 ")\n", a->dir, a->out,
               info.n_params, n_rows, info.row_dim, info.n_tables, bytes, man.save_id);
    ss_free(dense);
    ss_free(cfg);
    return rc;
}

int ctl_export_main(int argc, char **argv)
{
    struct s_args *a = ss_calloc(1, sizeof *a);
    char err[2048] = "";
    int rc = s_parse(argc, argv, a);
    ss_log_init("ctl", SS_LOG_WARN);
    if (rc)
        rc = ss_version_or_usage(rc, "shadow-ctl export", s_usage);
    else if (s_export(a, err, sizeof err) != 0) {
        fprintf(stderr, "shadow-ctl export: %s\n", err);
        rc = 1;
    }
    for (size_t i = 0; i < a->n_owned; i++)
        ss_free(a->owned[i]);
    ss_free(a);
    return rc;
}
