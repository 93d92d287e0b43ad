/* test_tr_parse.c - unit tests of trainer/tr_parse: every format's parser with
 * exact parsed values, header detection, the explanations of bad lines.
 *
 * Layouts come from ss_cfg_load() with --set style overrides, so the tests
 * parse exactly what a job file would configure. Real-data checks read
 * their files through t_data_file() ($SS_DATA_DIR, default ../shared/data,
 * else test/data) and fail when a file is in neither. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ss_cfg.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "tr_parse.h"
#include "t_data.h"

#define MISSING(f) ss_key_make((f), TR_PARSE_MISSING_RAW)
#define HASHED(f, str) \
    ss_key_make((f), TR_PARSE_HASHED_RAW | (ss_hash_bytes((str), strlen(str), 0) >> 2))

/* The layout of the defaults plus sets (NULL-terminated). */
static struct ss_cfg *s_layout(const char *const *sets)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    char err[512];
    size_t n = 0;
    assert_non_null(cfg);
    while (sets && sets[n])
        n++;
    if (ss_cfg_load(cfg, NULL, sets, n, err, sizeof err) != 0)
        fail_msg("ss_cfg_load: %s", err);
    return cfg;
}

/* Parse line (a C string) into a fresh rows of one example; returns the rc. */
static int s_parse(const struct ss_data_cfg *d, const char *line, struct tr_rows *rows)
{
    tr_rows_init(rows, 1, d->n_dense, d->n_fields);
    return tr_parse_line(d, line, strlen(line), rows);
}

/* Values of field f of example b: check the count, and each key and weight. */
static void s_expect_field(const struct tr_rows *r, uint32_t b, uint32_t f, size_t n,
                           const uint64_t *keys, const float *weights)
{
    size_t p = (size_t)b * r->n_fields + f, lo = r->offs[p], hi = r->offs[p + 1];
    if (hi - lo != n)
        fail_msg("field %u of example %u: %zu values, want %zu", f, b, hi - lo, n);
    for (size_t i = 0; i < n; i++) {
        if (r->keys[lo + i] != keys[i])
            fail_msg("field %u value %zu: key %#llx, want %#llx", f, i,
                     (unsigned long long)r->keys[lo + i], (unsigned long long)keys[i]);
        if (r->weights[lo + i] != weights[i])
            fail_msg("field %u value %zu: weight %.9g, want %.9g", f, i,
                     (double)r->weights[lo + i], (double)weights[i]);
    }
}

static const float s_one[8] = {1, 1, 1, 1, 1, 1, 1, 1};

/* Explanation of line under d must be want. */
static void s_expect_why(const struct ss_data_cfg *d, const char *line, const char *want)
{
    char why[512];
    tr_parse_explain(d, line, strlen(line), why, sizeof why);
    assert_string_equal(why, want);
}

/* ---- criteo_tsv through the generic entry ---- */

/* The Criteo line gives what tr_parse_criteo gives, one value of weight 1 per
 * field, and its layout is the one ss_cfg derives by default. */
static void test_criteo_rows(void **state)
{
    struct ss_cfg *cfg = s_layout(NULL);
    struct ss_data_cfg crit;
    tr_parse_criteo_layout(&crit);
    assert_int_equal(cfg->data.n_columns, crit.n_columns);
    assert_int_equal(cfg->data.n_dense, 13);
    assert_int_equal(cfg->data.n_fields, 26);
    assert_memory_equal(cfg->data.role, crit.role, crit.n_columns);
    const char *line = "1\t5\t\t-3\t\t\t\t\t\t\t\t\t\t7\t68fd1e64\t\tABC";
    struct tr_example ex;
    struct tr_rows r;
    assert_int_equal(tr_parse_criteo(line, strlen(line), &ex), 0);
    assert_int_equal(s_parse(&cfg->data, line, &r), 0);
    assert_int_equal(r.n, 1);
    assert_true(r.labels[0] == 1.0f);
    assert_memory_equal(r.dense, ex.dense, sizeof ex.dense);
    assert_true(r.dense[0] == (float)log(6.0) && r.dense[2] == 0.0f);
    assert_true(r.dense[12] == (float)log(8.0));
    for (uint32_t f = 0; f < 26; f++)
        s_expect_field(&r, 0, f, 1, &ex.keys[f], s_one);
    uint64_t k0 = ss_key_make(0, 0x68fd1e64), k2 = HASHED(2, "ABC"), k3 = MISSING(3);
    s_expect_field(&r, 0, 0, 1, &k0, s_one);
    s_expect_field(&r, 0, 2, 1, &k2, s_one);
    s_expect_field(&r, 0, 3, 1, &k3, s_one);
    assert_int_equal(tr_rows_values(&r), 26);
    tr_rows_fini(&r);
    free(cfg);
}

/* Every whole dense value the Criteo parser reads, in and past its table of
 * small values (below 4096), becomes exactly (float)log(1 + v); 0 and
 * negatives become 0. */
static void test_criteo_dense_values(void **state)
{
    static const uint64_t big[] = {4096, 4097, 65535, 1000000, 123456789012ull};
    struct tr_example ex;
    char line[256];
    for (uint64_t i = 0; i < 5000 + sizeof big / sizeof big[0]; i++) {
        uint64_t v = i < 5000 ? i : big[i - 5000];
        int n = snprintf(line, sizeof line, "0\t%llu\t-%llu\t7", (unsigned long long)v,
                         (unsigned long long)v);
        assert_int_equal(tr_parse_criteo(line, (size_t)n, &ex), 0);
        float want = v == 0 ? 0.0f : (float)log(1.0 + (double)v);
        if (ex.dense[0] != want || ex.dense[1] != 0.0f)
            fail_msg("value %llu: %.9g and %.9g, want %.9g and 0", (unsigned long long)v,
                     (double)ex.dense[0], (double)ex.dense[1], (double)want);
    }
}

/* ---- csv ---- */

static void test_csv_values(void **state)
{
    const char *sets[] = {"data.format=csv", "data.columns=label,multi,dense,dense,categorical,"
                          "ignore", NULL};
    struct ss_cfg *cfg = s_layout(sets);
    const struct ss_data_cfg *d = &cfg->data;
    struct tr_rows r;
    assert_int_equal(d->n_columns, 6);
    assert_int_equal(d->n_dense, 2);
    assert_int_equal(d->n_fields, 2);
    assert_int_equal(cfg->n_tables, 2);

    /* multi: empty parts skipped; dense decimal; empty dense 0; ignored */
    assert_int_equal(s_parse(d, "1,a|b||c,3.5,,x,whatever\r", &r), 0);
    assert_true(r.labels[0] == 1.0f);
    assert_true(r.dense[0] == (float)log(4.5));
    assert_true(r.dense[1] == 0.0f);
    uint64_t abc[3] = {HASHED(0, "a"), HASHED(0, "b"), HASHED(0, "c")}, x = HASHED(1, "x");
    s_expect_field(&r, 0, 0, 3, abc, s_one);
    s_expect_field(&r, 0, 1, 1, &x, s_one);
    tr_rows_fini(&r);

    /* labels -1/+1/decimals; 8 hex digits as in Criteo; empty multi and
     * categorical: their missing keys; integers as the Criteo parser */
    assert_int_equal(s_parse(d, "-1,,260.0,-7,68fd1e64,", &r), 0);
    assert_true(r.labels[0] == 0.0f);
    assert_true(r.dense[0] == (float)log(261.0) && r.dense[1] == 0.0f);
    uint64_t m0 = MISSING(0), hex = ss_key_make(1, 0x68fd1e64);
    s_expect_field(&r, 0, 0, 1, &m0, s_one);
    s_expect_field(&r, 0, 1, 1, &hex, s_one);
    tr_rows_fini(&r);
    assert_int_equal(s_parse(d, "+1,|,1e2,0,,", &r), 0);
    assert_true(r.labels[0] == 1.0f && r.dense[0] == (float)log(101.0));
    uint64_t m1 = MISSING(1);
    s_expect_field(&r, 0, 0, 1, &m0, s_one);  /* "|": no non-empty part */
    s_expect_field(&r, 0, 1, 1, &m1, s_one);
    tr_rows_fini(&r);
    assert_int_equal(s_parse(d, "1.0,a,1,1,b,c", &r), 0);
    tr_rows_fini(&r);

    /* bad: field count, label, dense */
    static const char *const bad[] = {
        "1,a,1,1,b",          /* 5 fields */
        "1,a,1,1,b,c,d",      /* 7 fields */
        "1,a,1,1,b,c,",       /* a trailing delimiter is a 7th field */
        "2,a,1,1,b,c",        /* label */
        "click,a,1,1,b,c",
        ",a,1,1,b,c",
        "1,a,abc,1,b,c",      /* dense */
        "1,a,nan,1,b,c",
        "1,a,1e400,1,b,c",
        "1,a, 1,1,b,c",
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (s_parse(d, bad[i], &r) != SS_E_PROTO)
            fail_msg("'%s' parsed", bad[i]);
        assert_int_equal(r.n, 0);
        tr_rows_fini(&r);
    }
    free(cfg);
}

/* The other delimiters and separators; a multi column with many values grows
 * the value arrays past their first size. */
static void test_csv_delimiters_and_growth(void **state)
{
    const char *sets[] = {"data.format=csv", "data.columns=categorical,label,multi",
                          "data.delimiter=tab", "data.multi_separator=;", NULL};
    struct ss_cfg *cfg = s_layout(sets);
    const struct ss_data_cfg *d = &cfg->data;
    struct tr_rows r;
    assert_true(d->delimiter == '\t' && d->multi_sep == ';');
    assert_int_equal(s_parse(d, "u,v\t0\tp;q", &r), 0);
    uint64_t uv = HASHED(0, "u,v"), pq[2] = {HASHED(1, "p"), HASHED(1, "q")};
    s_expect_field(&r, 0, 0, 1, &uv, s_one);
    s_expect_field(&r, 0, 1, 2, pq, s_one);
    tr_rows_fini(&r);

    char *line = malloc(20000);
    assert_non_null(line);
    int n = sprintf(line, "x\t1\t");
    for (int i = 0; i < 1000; i++)
        n += sprintf(line + n, "%s%d", i ? ";" : "", i);
    tr_rows_init(&r, 2, 0, 2);
    assert_int_equal(tr_parse_line(d, line, (size_t)n, &r), 0);
    assert_int_equal(tr_parse_line(d, line, (size_t)n, &r), 0);
    assert_int_equal(r.n, 2);
    assert_int_equal(tr_rows_values(&r), 2 * 1001);
    assert_true(r.cap >= 2002);
    assert_true(r.keys[r.offs[4] - 1] == HASHED(1, "999"));
    assert_int_equal(r.offs[2] - r.offs[1], 1000);
    free(line);
    tr_rows_fini(&r);
    free(cfg);
}

/* Every row of the CSV file csv_rel (a header, then columns) gives exactly
 * the example of the same row of the Criteo TSV file tsv_rel: same label,
 * dense floats (bit for bit) and keys. Returns the rows compared. */
static size_t s_csv_equals_tsv(const char *csv_rel, const char *columns, const char *tsv_rel)
{
    char cpath[512], tpath[512], cols[128];
    if (!t_data_file(csv_rel, cpath, sizeof cpath) || !t_data_file(tsv_rel, tpath, sizeof tpath))
        return 0;
    snprintf(cols, sizeof cols, "data.columns=%s", columns);
    const char *sets[] = {"data.format=csv", cols, NULL};
    struct ss_cfg *cfg = s_layout(sets), *crit = s_layout(NULL);
    FILE *fc = fopen(cpath, "r"), *ft = fopen(tpath, "r");
    char *lc = NULL, *lt = NULL;
    size_t cc = 0, ct = 0, rows = 0;
    ssize_t nc, nt;
    struct tr_rows a, b;
    assert_non_null(fc);
    assert_non_null(ft);
    tr_rows_init(&a, 1, 13, 26);
    tr_rows_init(&b, 1, 13, 26);
    nc = getline(&lc, &cc, fc);
    assert_true(tr_parse_is_header(&cfg->data, lc, (size_t)nc - 1));
    while ((nc = getline(&lc, &cc, fc)) > 0 && (nt = getline(&lt, &ct, ft)) > 0) {
        tr_rows_clear(&a);
        tr_rows_clear(&b);
        assert_false(tr_parse_is_header(&cfg->data, lc, (size_t)nc - 1));
        assert_int_equal(tr_parse_line(&cfg->data, lc, (size_t)nc - 1, &a), 0);
        assert_int_equal(tr_parse_line(&crit->data, lt, (size_t)nt - 1, &b), 0);
        assert_true(a.labels[0] == b.labels[0]);
        assert_memory_equal(a.dense, b.dense, 13 * sizeof(float));
        assert_memory_equal(a.keys, b.keys, 26 * sizeof(uint64_t));
        rows++;
    }
    free(lc);
    free(lt);
    fclose(fc);
    fclose(ft);
    tr_rows_fini(&a);
    tr_rows_fini(&b);
    free(cfg);
    free(crit);
    return rows;
}

/* DeepCTR's CSV (label,I1..C26 with a header; integers written "260.0") and
 * its TSV conversion; the Kaggle CSV (Id,Label,...: its first 300 rows, in
 * test/data) and the first rows of the 10k sample. Every row compared. */
static void test_csv_equals_tsv(void **state)
{
    size_t n = s_csv_equals_tsv("criteo/orig/deepctr_criteo_sample.txt",
                                "label,dense*13,categorical*26",
                                "criteo/deepctr_criteo_sample.tsv");
    assert_int_equal(n, 200);
    n = s_csv_equals_tsv("criteo/orig/kaggle2014_train_head300.csv",
                         "ignore,label,dense*13,categorical*26", "criteo/criteo_train_head10k.tsv");
    assert_int_equal(n, 300);
}

static void test_header_detection(void **state)
{
    const char *avazu[] = {"data.format=csv", "data.columns=ignore,label,categorical*22", NULL};
    struct ss_cfg *cfg = s_layout(avazu);
    struct ss_data_cfg *d = &cfg->data;
    const char *hdr = "id,click,hour,C1,banner_pos,site_id,site_domain,site_category,app_id,"
                      "app_domain,app_category,device_id,device_ip,device_model,device_type,"
                      "device_conn_type,C14,C15,C16,C17,C18,C19,C20,C21\r";
    const char *row = "1000009418151094273,0,14102100,1005,0,1fbe01fe,f3845767,28905ebd,"
                      "ecad2386,7801e8d9,07d7df22,a99f214a,ddd2926e,44956a24,1,2,15706,320,50,"
                      "1722,0,35,-1,79";
    assert_int_equal(tr_parse_is_header(d, hdr, strlen(hdr)), 1);
    assert_int_equal(tr_parse_is_header(d, row, strlen(row)), 0);
    assert_int_equal(tr_parse_is_header(d, "x,click", 7), 0);       /* 2 fields, not 24 */
    struct tr_rows r;
    assert_int_equal(s_parse(d, row, &r), 0);
    assert_true(r.labels[0] == 0.0f);
    uint64_t hour = ss_key_make(0, 0x14102100), site = ss_key_make(3, 0x1fbe01fe);
    uint64_t c20 = HASHED(20, "-1");
    s_expect_field(&r, 0, 0, 1, &hour, s_one);  /* 8 digits: read as hex, like Criteo */
    s_expect_field(&r, 0, 3, 1, &site, s_one);
    s_expect_field(&r, 0, 20, 1, &c20, s_one);
    tr_rows_fini(&r);
    d->header = SS_HEADER_TRUE;
    assert_int_equal(tr_parse_is_header(d, row, strlen(row)), 1);
    d->header = SS_HEADER_FALSE;
    assert_int_equal(tr_parse_is_header(d, hdr, strlen(hdr)), 0);
    struct ss_cfg *crit = s_layout(NULL);
    assert_int_equal(tr_parse_is_header(&crit->data, "label\tI1", 8), 0);  /* csv only */
    free(crit);
    free(cfg);
}

/* ---- data.labels false ---- */

/* A Criteo line without its label column parses to the labelled line's
 * features exactly (same dense floats, same keys), label 0; 1..39 fields,
 * the missing trailing ones empty; an empty line and 40 fields are bad. */
static void test_criteo_unlabeled(void **state)
{
    const char *sets[] = {"data.labels=false", NULL};
    struct ss_cfg *lab = s_layout(NULL), *un = s_layout(sets);
    const char *full = "1\t5\t\t-3\t\t\t\t\t\t\t\t\t\t7\t68fd1e64\t\tABC";
    const char *bare = full + 2;
    struct tr_example a, b;
    struct tr_rows ra, rb;
    assert_int_equal(un->data.n_columns, 39);
    assert_int_equal(un->data.role[0], SS_ROLE_DENSE);
    assert_int_equal(un->data.n_dense, 13);
    assert_int_equal(un->data.n_fields, 26);
    assert_int_equal(tr_parse_criteo(full, strlen(full), &a), 0);
    assert_int_equal(tr_parse_criteo_unlabeled(bare, strlen(bare), &b), 0);
    assert_true(b.label == 0.0f);
    assert_memory_equal(a.dense, b.dense, sizeof a.dense);
    assert_memory_equal(a.keys, b.keys, sizeof a.keys);
    assert_int_equal(s_parse(&lab->data, full, &ra), 0);
    assert_int_equal(s_parse(&un->data, bare, &rb), 0);
    assert_int_equal(rb.n, 1);
    assert_true(rb.labels[0] == 0.0f);
    assert_memory_equal(ra.dense, rb.dense, 13 * sizeof(float));
    assert_memory_equal(ra.keys, rb.keys, 26 * sizeof(uint64_t));
    tr_rows_fini(&ra);
    tr_rows_fini(&rb);
    /* one field: the first dense value, the rest missing */
    assert_int_equal(tr_parse_criteo_unlabeled("3", 1, &b), 0);
    assert_true(b.dense[0] == (float)log(4.0) && b.dense[1] == 0.0f);
    assert_true(b.keys[25] == MISSING(25));
    /* an empty line (also a lone CR), a non-number dense, 40 fields: bad */
    assert_int_equal(tr_parse_criteo_unlabeled("", 0, &b), SS_E_PROTO);
    assert_int_equal(tr_parse_criteo_unlabeled("\r", 1, &b), SS_E_PROTO);
    assert_int_equal(tr_parse_criteo_unlabeled("x\t1", 3, &b), SS_E_PROTO);
    char forty[128] = "";
    for (int i = 0; i < 39; i++)
        strcat(forty, "1\t");
    strcat(forty, "1");
    assert_int_equal(tr_parse_criteo_unlabeled(forty, strlen(forty), &b), SS_E_PROTO);
    assert_int_equal(tr_parse_criteo(forty, strlen(forty), &a), 0);  /* labelled: 40 is right */
    s_expect_why(&un->data, "x\t1", "field 1 (dense): expected an integer, found 'x'");
    s_expect_why(&un->data, forty, "expected 39 tab-separated fields (13 dense, 26 categorical), "
                 "found 40; a label column first? set data.labels: true");
    s_expect_why(&lab->data, "5\t1", "field 1 (label): expected 0 or 1, found '5' (no label "
                 "column, as in Criteo's test files? set data.labels: false)");
    free(lab);
    free(un);
}

/* csv without a label column: the features of the labelled layout, label 0;
 * a header is told by a word in the first dense column. */
static void test_csv_unlabeled(void **state)
{
    const char *lab_sets[] = {"data.format=csv", "data.columns=label,dense,categorical*2", NULL};
    const char *un_sets[] = {"data.format=csv", "data.columns=dense,categorical*2",
                             "data.labels=false", NULL};
    struct ss_cfg *lab = s_layout(lab_sets), *un = s_layout(un_sets);
    struct tr_rows ra, rb;
    assert_int_equal(s_parse(&lab->data, "1,12.5,ab,", &ra), 0);
    assert_int_equal(s_parse(&un->data, "12.5,ab,", &rb), 0);
    assert_true(rb.labels[0] == 0.0f && ra.labels[0] == 1.0f);
    assert_true(ra.dense[0] == rb.dense[0] && rb.dense[0] == (float)log(13.5));
    assert_memory_equal(ra.keys, rb.keys, 2 * sizeof(uint64_t));
    tr_rows_fini(&ra);
    tr_rows_fini(&rb);
    assert_int_equal(s_parse(&un->data, "1,12.5,ab,", &rb), SS_E_PROTO);  /* 4 fields */
    tr_rows_fini(&rb);
    assert_int_equal(tr_parse_is_header(&un->data, "price,site,app", 14), 1);
    assert_int_equal(tr_parse_is_header(&un->data, "3,site,app", 10), 0);
    assert_int_equal(tr_parse_is_header(&un->data, "", 0), 0);
    free(lab);
    free(un);
}

/* ---- libsvm and libffm ---- */

static void test_libsvm(void **state)
{
    const char *sets[] = {"data.format=libsvm", NULL};
    struct ss_cfg *cfg = s_layout(sets);
    const struct ss_data_cfg *d = &cfg->data;
    struct tr_rows r;
    assert_int_equal(d->n_dense, 0);
    assert_int_equal(d->n_fields, 1);
    assert_int_equal(cfg->n_tables, 1);
    assert_int_equal(s_parse(d, "+1 3:0.5  7:2\t3:1 9:0", &r), 0);
    assert_true(r.labels[0] == 1.0f);
    uint64_t k[3] = {ss_key_make(0, 3), ss_key_make(0, 7), ss_key_make(0, 3)};
    float w[3] = {0.5f, 2.0f, 1.0f};
    s_expect_field(&r, 0, 0, 3, k, w);    /* 9:0 dropped, 3 twice kept (pooled) */
    tr_rows_fini(&r);
    /* fuzz: a value that is 0 as a float is dropped like 0 */
    assert_int_equal(s_parse(d, "1 3:1e-50 7:2", &r), 0);
    s_expect_field(&r, 0, 0, 1, &k[1], &w[1]);
    tr_rows_fini(&r);
    assert_int_equal(s_parse(d, "-1", &r), 0);
    uint64_t m = MISSING(0);
    assert_true(r.labels[0] == 0.0f);
    s_expect_field(&r, 0, 0, 1, &m, s_one);
    tr_rows_fini(&r);
    static const char *const bad[] = {"1 a:1", "1 3", "1 3:x", "x 3:1", "", "1 -3:1",
                                      "1 3:1:1", "2 3:1", "1 3:inf",
                                      "1 3:1e39", "1 3:-4e38"};  /* fuzz: weight inf */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (s_parse(d, bad[i], &r) != SS_E_PROTO)
            fail_msg("'%s' parsed", bad[i]);
        tr_rows_fini(&r);
    }
    free(cfg);
}

static void test_libffm(void **state)
{
    const char *sets[] = {"data.format=libffm", "data.fields=3", NULL};
    struct ss_cfg *cfg = s_layout(sets);
    const struct ss_data_cfg *d = &cfg->data;
    struct tr_rows r;
    assert_int_equal(d->n_fields, 3);
    assert_int_equal(cfg->n_tables, 3);
    /* items sorted into their fields, line order kept inside a field; an
     * absent field gets its missing key */
    assert_int_equal(s_parse(d, "1 2:5:1 0:7:0.5 2:6:2 1:4:0", &r), 0);
    uint64_t f0 = ss_key_make(0, 7), f1 = MISSING(1);
    uint64_t f2[2] = {ss_key_make(2, 5), ss_key_make(2, 6)};
    float w0 = 0.5f, w2[2] = {1.0f, 2.0f};
    s_expect_field(&r, 0, 0, 1, &f0, &w0);
    s_expect_field(&r, 0, 1, 1, &f1, s_one);
    s_expect_field(&r, 0, 2, 2, f2, w2);
    tr_rows_fini(&r);
    static const char *const bad[] = {"1 3:1:1", "1 0:1", "1 0:1:x", "1 a:1:1", "y 0:1:1",
                                      "1 0:1:1e39"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (s_parse(d, bad[i], &r) != SS_E_PROTO)
            fail_msg("'%s' parsed", bad[i]);
        tr_rows_fini(&r);
    }
    free(cfg);
}

/* rows a and b (one example each, same shape) hold the same features:
 * dense floats, CSR offsets, keys and weights, bit for bit. */
static void s_same_features(const struct tr_rows *a, const struct tr_rows *b)
{
    assert_int_equal(a->n, 1);
    assert_int_equal(b->n, 1);
    assert_memory_equal(a->dense, b->dense, a->n_dense * sizeof(float));
    assert_memory_equal(a->offs, b->offs, (a->n_fields + 1) * sizeof(uint32_t));
    assert_memory_equal(a->keys, b->keys, tr_rows_values(a) * sizeof(uint64_t));
    assert_memory_equal(a->weights, b->weights, tr_rows_values(a) * sizeof(float));
}

/* libsvm and libffm with data.labels false: a line is the labelled line
 * without its first token, and gives the same features (label 0); an empty
 * line, and a line that still starts with a label, are bad and explained. */
static void test_libsvm_libffm_unlabeled(void **state)
{
    const char *svm_lab[] = {"data.format=libsvm", NULL};
    const char *svm_un[] = {"data.format=libsvm", "data.labels=false", NULL};
    const char *ffm_lab[] = {"data.format=libffm", "data.fields=3", NULL};
    const char *ffm_un[] = {"data.format=libffm", "data.fields=3", "data.labels=false", NULL};
    struct ss_cfg *sl = s_layout(svm_lab), *su = s_layout(svm_un);
    struct ss_cfg *fl = s_layout(ffm_lab), *fu = s_layout(ffm_un);
    struct tr_rows ra, rb;
    assert_int_equal(su->data.labels, 0);
    assert_int_equal(s_parse(&sl->data, "+1 3:0.5  7:2\t3:1 9:0", &ra), 0);
    assert_int_equal(s_parse(&su->data, "3:0.5  7:2\t3:1 9:0", &rb), 0);
    assert_true(ra.labels[0] == 1.0f && rb.labels[0] == 0.0f);
    s_same_features(&ra, &rb);
    assert_int_equal(tr_rows_values(&rb), 3);
    tr_rows_fini(&ra);
    tr_rows_fini(&rb);
    /* only zero-weight items: the field's missing key, as "1 9:0" */
    assert_int_equal(s_parse(&sl->data, "1 9:0", &ra), 0);
    assert_int_equal(s_parse(&su->data, " 9:0\r", &rb), 0);
    s_same_features(&ra, &rb);
    uint64_t m = MISSING(0);
    s_expect_field(&rb, 0, 0, 1, &m, s_one);
    tr_rows_fini(&ra);
    tr_rows_fini(&rb);
    assert_int_equal(s_parse(&fl->data, "0 2:5:1 0:7:0.5 2:6:2 1:4:0", &ra), 0);
    assert_int_equal(s_parse(&fu->data, "2:5:1 0:7:0.5 2:6:2 1:4:0", &rb), 0);
    s_same_features(&ra, &rb);
    tr_rows_fini(&ra);
    tr_rows_fini(&rb);
    static const char *const bad_svm[] = {"", "  \t", "\r", "1 3:1", "3:1 x", "3:1 1"};
    for (size_t i = 0; i < sizeof bad_svm / sizeof bad_svm[0]; i++) {
        if (s_parse(&su->data, bad_svm[i], &rb) != SS_E_PROTO)
            fail_msg("unlabeled libsvm '%s' parsed", bad_svm[i]);
        tr_rows_fini(&rb);
    }
    static const char *const bad_ffm[] = {"", "1 0:1:1", "3:1:1", "0:1"};
    for (size_t i = 0; i < sizeof bad_ffm / sizeof bad_ffm[0]; i++) {
        if (s_parse(&fu->data, bad_ffm[i], &rb) != SS_E_PROTO)
            fail_msg("unlabeled libffm '%s' parsed", bad_ffm[i]);
        tr_rows_fini(&rb);
    }
    s_expect_why(&su->data, "", "expected index:value items (libsvm without labels: every token "
                 "an item), found an empty line");
    s_expect_why(&su->data, "1 3:1", "item 1 '1': expected index:value (libsvm: integer index, "
                 "number value); a label first? set data.labels: true");
    s_expect_why(&fu->data, "0:1:1 3:1:1", "item 2 '3:1:1': field 3 is not below data.fields = 3");
    s_expect_why(&sl->data, "3:1 7:2", "expected a label (0, 1, -1 or +1) first (libsvm: label "
                 "index:value ...), found '3:1' (no label, as in data to score? set "
                 "data.labels: false)");
    s_expect_why(&fl->data, "0:7:1", "expected a label (0, 1, -1 or +1) first (libffm: label "
                 "field:index:value ...), found '0:7:1' (no label, as in data to score? set "
                 "data.labels: false)");
    free(sl);
    free(su);
    free(fl);
    free(fu);
}

/* The xlearn libffm sample: every line parses with 18 fields; the first
 * line's values exactly. */
static void test_libffm_real_file(void **state)
{
    char path[512];
    if (!t_data_file("criteo_libffm/xlearn_small_train.txt", path, sizeof path))
        return;
    const char *sets[] = {"data.format=libffm", "data.fields=18", NULL};
    struct ss_cfg *cfg = s_layout(sets);
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0, rows = 0, pos = 0;
    ssize_t n;
    struct tr_rows r;
    assert_non_null(f);
    tr_rows_init(&r, 1, 0, 18);
    while ((n = getline(&line, &cap, f)) > 0) {
        tr_rows_clear(&r);
        assert_int_equal(tr_parse_line(&cfg->data, line, (size_t)n - 1, &r), 0);
        pos += r.labels[0] == 1.0f;
        if (rows++ == 0) {
            /* 1 0:0:0.3651 2:1163:0.3651 ... 17:2434:0.50000 16:7755:0.50000 */
            uint64_t k0 = ss_key_make(0, 0), k1 = MISSING(1), k2 = ss_key_make(2, 1163);
            uint64_t k16 = ss_key_make(16, 7755), k17 = ss_key_make(17, 2434);
            float w = 0.3651f, h = 0.5f;
            assert_true(r.labels[0] == 1.0f);
            s_expect_field(&r, 0, 0, 1, &k0, &w);
            s_expect_field(&r, 0, 1, 1, &k1, s_one);
            s_expect_field(&r, 0, 2, 1, &k2, &w);
            s_expect_field(&r, 0, 16, 1, &k16, &h);
            s_expect_field(&r, 0, 17, 1, &k17, &h);
        }
    }
    assert_int_equal(rows, 200);
    assert_int_equal(pos, 48);
    free(line);
    fclose(f);
    tr_rows_fini(&r);
    free(cfg);
}

/* ---- explanations ---- */

static void test_explain(void **state)
{
    struct ss_cfg *crit = s_layout(NULL);
    const char *avazu[] = {"data.format=csv", "data.columns=ignore,label,categorical*22", NULL};
    const char *ffm[] = {"data.format=libffm", "data.fields=3", NULL};
    const char *svm[] = {"data.format=libsvm", NULL};
    struct ss_cfg *av = s_layout(avazu), *lf = s_layout(ffm), *ls = s_layout(svm);
    char row[256] = "10000169349117863715,0,14102100,1005,0,1fbe01fe,f3845767,28905ebd,"
                    "ecad2386,7801e8d9,07d7df22,a99f214a,96809ac8,711ee120,1,0,15704,320,50,"
                    "1722,0,35,100084,79";

    s_expect_why(&crit->data, row,
                 "expected 40 tab-separated fields (label, 13 dense, 26 categorical), found 24 "
                 "comma-separated; set data.format: csv with data.delimiter and data.columns, "
                 "one role per column (conf/avazu.yaml is an example)");
    s_expect_why(&crit->data, "1 0:0:0.3651 2:1163:0.3651",
                 "expected 40 tab-separated fields (label, 13 dense, 26 categorical), found 3 "
                 "space-separated; the line looks like libffm (label field:index:value ...): "
                 "set data.format: libffm and data.fields");
    s_expect_why(&crit->data, "x\t1", "field 1 (label): expected 0 or 1, found 'x'");
    s_expect_why(&crit->data, "1\t2\t3.5", "field 3 (dense): expected an integer, found '3.5'");
    s_expect_why(&crit->data, "1\t2", "");                       /* a good line */
    s_expect_why(&av->data, "id,click,hour",
                 "expected 24 comma-separated fields (label, 22 categorical, 1 ignored), found 3"
                 "; check data.columns (one role per column)");
    row[21] = '7';                                               /* the label */
    s_expect_why(&av->data, row, "field 2 (label): expected 0, 1, -1 or +1, found '7'");
    s_expect_why(&av->data, "1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18;19;20;21;22;23;24",
                 "expected 24 comma-separated fields (label, 22 categorical, 1 ignored), found "
                 "24 semicolon-separated; the line is semicolon-separated: check "
                 "data.delimiter");
    s_expect_why(&lf->data, "1 0:1:1 3:1:1",
                 "item 2 '3:1:1': field 3 is not below data.fields = 3");
    s_expect_why(&lf->data, "1 0:1",
                 "item 1 '0:1': expected field:index:value (libffm: integer index, number "
                 "value); the line looks like libsvm (label index:value ...): set data.format: "
                 "libsvm");
    s_expect_why(&ls->data, "click 1:1",
                 "expected a label (0, 1, -1 or +1) first (libsvm: label index:value ...), "
                 "found 'click'");
    free(crit);
    free(av);
    free(lf);
    free(ls);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_criteo_rows),
        cmocka_unit_test(test_criteo_dense_values),
        cmocka_unit_test(test_csv_values),
        cmocka_unit_test(test_csv_delimiters_and_growth),
        cmocka_unit_test(test_csv_equals_tsv),
        cmocka_unit_test(test_header_detection),
        cmocka_unit_test(test_criteo_unlabeled),
        cmocka_unit_test(test_csv_unlabeled),
        cmocka_unit_test(test_libsvm),
        cmocka_unit_test(test_libffm),
        cmocka_unit_test(test_libsvm_libffm_unlabeled),
        cmocka_unit_test(test_libffm_real_file),
        cmocka_unit_test(test_explain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
