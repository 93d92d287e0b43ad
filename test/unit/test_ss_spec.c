/* test_ss_spec.c - unit tests of the supervisor's spec built from a
 * launch's data (ss_spec): a local job's PSs are shut down all at once from
 * here, a remote one's each from its host; the sync PSs run only with the
 * sync_ps trait; a remote trainer reads its control pipe; --eval-only runs
 * trainer 0 alone, from the model (or ckpt/ of an older run directory);
 * --resume starts every process from its host's job checkpoint; bad data is
 * an error naming it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ss_spec.h"
#include "t.h"
#include "t_words.h"

static char s_dir[256];

static struct t_words s_w; /* the launch data being written */

/* The common part of a job: 2 embedding shards, a sync shard, 2 trainers on
 * 2 hosts, with exec and traits. */
static void s_base(const char *exec, const char *traits)
{
    char logs[512];
    s_w.len = 0;
    snprintf(logs, sizeof logs, "%s/logs", s_dir);
    mkdir(logs, 0755);
    t_words_add(&s_w, "trainers", "2", "exec", exec, "traits", traits, "logs", logs, "run_dir",
                "/run", "job", "/j.yaml", "bin", "/b", "rbin", "/rb", "host_stdin", "/keep",
                "n_emb", "2", "n_sync", "1", "algo", "ma", "set", "--set", "set",
                "cluster.embedding=[a,b]", "host", "h0", "u@h0", "1", "/p0", "/c0", "1", "host",
                "h1", "u@h1", "1", "/p1", "/c1", "0", "place", "embedding", "0", "0", "place",
                "embedding", "1", "1", "place", "sync", "0", "1", "place", "trainer", "0", "0",
                "place", "trainer", "1", "1", NULL);
}

/* The spec built from s_w.buf: its words joined by '|' into out. Returns the
 * build's status. */
static int s_build(char *out, size_t len, int *n_tr)
{
    char in[512], spec[512], err[512];
    snprintf(in, sizeof in, "%s/data", s_dir);
    snprintf(spec, sizeof spec, "%s/spec", s_dir);
    FILE *f = fopen(in, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(s_w.buf, 1, s_w.len, f), s_w.len);
    fclose(f);
    int rc = ss_spec_build(in, spec, n_tr, err, sizeof err);
    if (rc != 0) {
        snprintf(out, len, "%s", err);
        return rc;
    }
    f = fopen(spec, "rb");
    assert_non_null(f);
    size_t n = fread(out, 1, len - 1, f);
    fclose(f);
    out[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (out[i] == '\0')
            out[i] = '|';
    return 0;
}

static int s_count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

static char s_spec[65536];

static void test_local_job(void **state)
{
    int n_tr = 0;
    s_base("local", "ring=0 sync_ps=1 lose_trainer=1");
    assert_int_equal(s_build(s_spec, sizeof s_spec, &n_tr), 0);
    assert_int_equal(n_tr, 2);
    assert_non_null(strstr(s_spec, "|job|lose_trainer|1|"));
    assert_non_null(strstr(s_spec, "|job|die_with_super|1|shutdown_all|10|/b/shadow-ctl|-c|"
                                   "/j.yaml|--set|cluster.embedding=[a,b]|--timeout-ms|3000|"
                                   "--target|all|shutdown|"));
    assert_int_equal(s_count(s_spec, "|argv|shutdown|"), 0);
    /* 3 PSs: the sync one runs (sync_ps), each with its variants */
    assert_non_null(strstr(s_spec, "|ps|sync|0|1|"));
    assert_int_equal(s_count(s_spec, "|argv|recovery|"), 3);
    assert_int_equal(s_count(s_spec, "|argv|resume|"), 0);
    assert_non_null(strstr(s_spec, "|argv|start|11|/rb/shadow-ps|-c|/j.yaml|--role|embedding|"
                                   "--shard|1|--set|cluster.embedding=[a,b]|--set|"
                                   "job.run_dir=/p1|argv|empty|"));
    assert_non_null(strstr(s_spec, "|--restore|/c1/recovery|argv|age|5|sh|-c|"));
    assert_non_null(strstr(s_spec, "|age|/c1/recovery/sync-0.ckpt|"));
    assert_non_null(strstr(s_spec, "|ready|shadow-launch: 3 PS(s) ready; starting 2 trainer(s) "
                                   "[sync: ma]; run dir /run|"));
    /* trainers: the keep pipe as stdin, no control pipe */
    assert_non_null(strstr(s_spec, "|trainer|1|1|"));
    assert_non_null(strstr(s_spec, "/logs/trainer-1.log|/keep|-|-|argv|start|9|/rb/shadow-trainer|"
                                   "-c|/j.yaml|--rank|1|--set|cluster.embedding=[a,b]|--set|"
                                   "job.run_dir=/p1|"));
    /* each log is there, empty */
    char log[512];
    struct stat st;
    snprintf(log, sizeof log, "%s/logs/ps-sync-0.log", s_dir);
    assert_int_equal(stat(log, &st), 0);
    assert_int_equal(st.st_size, 0);
    /* no sync_ps trait: no sync PS, 2 PSs */
    s_base("local", "ring=1 sync_ps=0 lose_trainer=0");
    assert_int_equal(s_build(s_spec, sizeof s_spec, &n_tr), 0);
    assert_null(strstr(s_spec, "|ps|sync|"));
    assert_non_null(strstr(s_spec, "|job|lose_trainer|0|"));
    assert_non_null(strstr(s_spec, "shadow-launch: 2 PS(s) ready;"));
}

static void test_remote_job(void **state)
{
    int n_tr = 0;
    s_base("ssh", "sync_ps=1");
    t_words_add(&s_w, "ssh_opt", "-F", "ssh_opt", "cfg", "hosts_file", "/hosts", "ctl", "1",
                "/k/ctl-1", NULL);
    assert_int_equal(s_build(s_spec, sizeof s_spec, &n_tr), 0);
    assert_null(strstr(s_spec, "shutdown_all"));
    assert_null(strstr(s_spec, "die_with_super"));
    assert_non_null(strstr(s_spec, "|ssh_opt|-F|ssh_opt|cfg|"));
    assert_non_null(strstr(s_spec, "|job|named_hosts|1|host|h0|u@h0|1|host|h1|u@h1|1|"));
    /* each PS shut down from its own host */
    assert_int_equal(s_count(s_spec, "|argv|shutdown|"), 3);
    assert_non_null(strstr(s_spec, "|argv|shutdown|10|/rb/shadow-ctl|-c|/j.yaml|--set|"
                                   "cluster.embedding=[a,b]|--timeout-ms|3000|--target|"
                                   "embedding:1|shutdown|"));
    assert_non_null(strstr(s_spec, "ready on 2 host(s) [ssh];"));
    /* trainer 1 reads its control pipe; trainer 0 has none */
    assert_non_null(strstr(s_spec, "/trainer-1.log|/k/ctl-1|-|/k/ctl-1|"));
    assert_non_null(strstr(s_spec, "/trainer-0.log|/keep|-|-|"));
}

static void test_eval_only_and_resume(void **state)
{
    int n_tr = 0;
    char ev[512], man[512];
    snprintf(ev, sizeof ev, "%s/ev", s_dir);
    /* an older run directory (no model/MANIFEST): ckpt/ */
    s_base("local", "sync_ps=0");
    t_words_add(&s_w, "eval_only", ev, "predict", "1", "predict_out", "-", "pred_where",
                "standard output", "skip_bad", "1", "pred_fd", "7", "pred_in", "8", "data_eval",
                "e.txt", NULL);
    assert_int_equal(s_build(s_spec, sizeof s_spec, &n_tr), 0);
    assert_int_equal(n_tr, 1);
    assert_null(strstr(s_spec, "|trainer|1|"));
    assert_non_null(strstr(s_spec, "/ckpt|argv|empty|"));
    assert_non_null(strstr(s_spec, "|job|eval_only|1|job|predict_stdout|1|"));
    assert_non_null(strstr(s_spec, "/trainer-0.log|/dev/fd/8|7|-|"));
    assert_non_null(strstr(s_spec, "|--eval-only|--model|"));
    assert_non_null(strstr(s_spec, "/model|--predict|-|--skip-bad|"));
    assert_non_null(strstr(s_spec, "/model; trainer 0 scores e.txt into standard output; run dir"));
    /* with model/MANIFEST: the model */
    snprintf(man, sizeof man, "%s/model", ev);
    mkdir(ev, 0755);
    mkdir(man, 0755);
    snprintf(man, sizeof man, "%s/model/MANIFEST", ev);
    fclose(fopen(man, "w"));
    assert_int_equal(s_build(s_spec, sizeof s_spec, &n_tr), 0);
    assert_non_null(strstr(s_spec, "/model|argv|empty|"));
    /* --resume: from each host's job checkpoint */
    s_base("local", "sync_ps=1");
    t_words_add(&s_w, "resume", "/old", NULL);
    assert_int_equal(s_build(s_spec, sizeof s_spec, &n_tr), 0);
    assert_non_null(strstr(s_spec, "|job|resumed|1|"));
    assert_non_null(strstr(s_spec, "job.run_dir=/p1|--restore|/p1/jobckpt.resume|argv|empty|"));
    assert_int_equal(s_count(s_spec, "|argv|resume|"), 3);
    assert_non_null(strstr(s_spec, "job.run_dir=/p1|--resume|/p1/jobckpt.resume|"));
}

static void test_bad_data(void **state)
{
    int n_tr = 0;
    s_base("local", "");
    t_words_add(&s_w, "colour", "red", NULL);
    assert_int_equal(s_build(s_spec, sizeof s_spec, &n_tr), -1);
    assert_non_null(strstr(s_spec, "unknown record 'colour'"));
    s_base("local", "");
    t_words_add(&s_w, "place", "trainer", "1", "5", NULL);  /* a host the data does not name */
    assert_int_equal(s_build(s_spec, sizeof s_spec, &n_tr), -1);
    assert_non_null(strstr(s_spec, "trainer 1 is on no host"));
    s_base("rsh", "");
    assert_int_equal(s_build(s_spec, sizeof s_spec, &n_tr), -1);
    s_base("local", "");
    t_words_add(&s_w, "host", "h2", NULL);  /* cut short */
    assert_int_equal(s_build(s_spec, sizeof s_spec, &n_tr), -1);
    assert_non_null(strstr(s_spec, "lacks its values"));
}

static int s_setup(void **state)
{
    (void)state;
    return t_tmpdir(s_dir, sizeof s_dir, "spec");
}

static int s_teardown(void **state)
{
    (void)state;
    t_rmtree(s_dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_local_job, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_remote_job, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_eval_only_and_resume, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_bad_data, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
