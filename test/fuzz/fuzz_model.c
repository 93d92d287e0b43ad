/* fuzz_model.c - libFuzzer harness: the model file loader (trainer/tr_mfile.c)
 * behind shadow-score and libshadowscore's ss_model_load().
 *
 * Input: a flags byte, then the model file's bytes, loaded from memory with
 * tr_mfile_load_mem(). A fuzzer cannot forge 64-bit checksums, so flags can
 * make the harness repair fields after mutating, to reach the code behind
 * them (the config text, the counts, the records):
 *   bit 0: set the file size field (16..23) to the input's size
 *   bit 1: set the payload checksum (the last 8 bytes) to the payload's
 *   bit 2: set the header checksum (120..127) to bytes 0..119's
 *   bit 3: load with the setting data.labels=false after the file's text
 * Checks: a refusal has a message; an accepted file's size is what its
 * counts say, its config gives its row width and table count, and every
 * record is found by tr_mfile_row() at its own place. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_util.h"
#include "ss_cfg.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "tr_mfile.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Repair what flags ask for in the file image f (n bytes). */
static void s_repair(uint8_t *f, size_t n, unsigned flags)
{
    if (n < TR_MFILE_HDR_BYTES + 8)
        return;
    if (flags & 1) {
        uint64_t v = n;
        memcpy(f + 16, &v, 8);
    }
    if (flags & 2) {
        struct tr_mfile_sum s;
        tr_mfile_sum_init(&s);
        tr_mfile_sum_add(&s, f + TR_MFILE_HDR_BYTES, n - TR_MFILE_HDR_BYTES - 8);
        uint64_t v = tr_mfile_sum_final(&s);
        memcpy(f + n - 8, &v, 8);
    }
    if (flags & 4) {
        uint64_t v = ss_hash_bytes(f, 120, 0x55);
        memcpy(f + 120, &v, 8);
    }
}

/* A small valid model file (criteo layout, 4-float rows, tiny MLPs) with
 * n_rows rows, into b. */
static void s_model(struct fuzz_buf *b, uint32_t n_rows)
{
    static const char *const sets[] = {"model.embedding_dim=4", "model.bottom_mlp=[4]",
                                       "model.top_mlp=[2, 1]", "model.first_order=false"};
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char err[1024], text[TR_MFILE_MAX_TEXT], path[700];
    FUZZ_CHECK(ss_cfg_load(cfg, NULL, sets, 4, err, sizeof err) == 0, "%s", err);
    int tn = tr_mfile_cfg_text(cfg, text, sizeof text);
    struct tr_model_conf mc;
    tr_mfile_model_conf(cfg, &mc);
    uint64_t n_params = 16;  /* tr_mfile does not check it against the shape; ss_model does */
    struct tr_mfile_info info = {n_params, n_rows, 4, 26, 1, tr_mfile_shape_hash(&mc),
                                 (uint64_t)tn};
    snprintf(path, sizeof path, "%s/seed.ssm", fuzz_tmpdir("model"));
    tr_mfile_writer_t *w = tr_mfile_writer_new(path, &info, text, (size_t)tn, err, sizeof err);
    FUZZ_CHECK(w, "%s", err);
    for (uint64_t i = 0; i < n_params; i++) {
        float v = (float)i / 64;
        FUZZ_CHECK(tr_mfile_write_dense(w, &v, 1, err, sizeof err) == 0, "%s", err);
    }
    for (uint32_t r = 0; r < n_rows; r++) {
        float row[4] = {(float)r, 0.5f, -0.25f, 1};
        FUZZ_CHECK(tr_mfile_write_row(w, r % 26, ss_mix64(r), row, err, sizeof err) == 0,
                   "%s", err);
    }
    FUZZ_CHECK(tr_mfile_writer_commit(&w, err, sizeof err) == 0, "%s", err);
    FILE *f = fopen(path, "rb");
    FUZZ_CHECK(f, "cannot read %s", path);
    unsigned char chunk[4096];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
        fuzz_buf_add(b, chunk, k);
    fclose(f);
    free(cfg);
}

static void s_write_seeds(const char *dir)
{
    static const unsigned flags[] = {0, 7, 15};
    for (uint32_t rows = 0; rows <= 3; rows += 3)
        for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
            struct fuzz_buf b = {0};
            unsigned char fl = (unsigned char)flags[i];
            char name[64];
            fuzz_buf_add(&b, &fl, 1);
            s_model(&b, rows);
            snprintf(name, sizeof name, "rows%u-flags%u", rows, flags[i]);
            fuzz_seed(dir, name, b.p, b.n);
            free(b.p);
        }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    fuzz_seed_mode(s_write_seeds);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned flags = data[0];
    size_t n = size - 1;
    uint8_t *f = malloc(n ? n : 1);
    memcpy(f, data + 1, n);
    s_repair(f, n, flags);
    char err[1024] = "";
    const char *sets[] = {"data.labels=false"};
    tr_mfile_t *m = tr_mfile_load_mem(f, n, "fuzz.ssm", sets, (flags & 8) ? 1 : 0, err,
                                      sizeof err);
    if (!m) {
        FUZZ_CHECK(err[0], "a refusal without a message");
        free(f);
        return 0;
    }
    const struct tr_mfile_info *in = tr_mfile_info(m);
    FUZZ_CHECK(tr_mfile_bytes(in) == n, "accepted %zu bytes, counts say %llu", n,
               (unsigned long long)tr_mfile_bytes(in));
    const struct ss_cfg *cfg = tr_mfile_cfg(m);
    FUZZ_CHECK(ss_cfg_row_dim(cfg) == in->row_dim && (uint64_t)cfg->n_tables == in->n_tables,
               "the config disagrees with the header");
    size_t rec = TR_MFILE_REC_HEAD + 4 * (size_t)in->row_dim;
    const uint8_t *recs = f + n - 8 - in->n_rows * rec;
    for (uint64_t r = 0; r < in->n_rows; r++) {
        uint64_t key;
        uint32_t table;
        memcpy(&key, recs + r * rec, 8);
        memcpy(&table, recs + r * rec + 8, 4);
        FUZZ_CHECK((const uint8_t *)tr_mfile_row(m, table, key) == recs + r * rec + 16,
                   "row %llu not found at its place", (unsigned long long)r);
    }
    tr_mfile_destroy(&m);
    free(f);
    return 0;
}
