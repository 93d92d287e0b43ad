/* test_ss_launch_copy.c - unit tests of the copies between a launch and its
 * hosts (ss_launch_copy), through the local --exec mode with a host whose
 * run directory is not RUN_DIR: the --resume push sends a host its
 * trainers' states and its PSs' files (the sync PSs' only with the sync_ps
 * trait) into jobckpt.resume, tracing it in gather.log; the gather brings a
 * host's run directory home (its logs and launch token apart, its jobckpt/
 * as a gathered job checkpoint that joins RUN_DIR/jobckpt, its
 * jobckpt.resume dropped), skips a lost host and says which host failed;
 * bad launch data is an error naming it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ss_launch_copy.h"
#include "ss_launch_data.h"
#include "t.h"
#include "t_words.h"

static char s_dir[256];
static struct t_words s_w; /* the launch data being written */

/* Write text to s_dir/rel, making its folders. */
static void s_put(const char *rel, const char *text)
{
    char path[512], cmd[600];
    snprintf(path, sizeof path, "%s/%s", s_dir, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    assert_int_equal(system(cmd), 0);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static int s_exists(const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", s_dir, rel);
    return access(path, F_OK) == 0;
}

/* The launch data: RUN_DIR s_dir/run; host 0 shares it, host 1 runs in
 * s_dir/h1 (embedding shard 1 of 2, the sync shard, trainer 1). */
static struct ss_launch_data *s_data_load(const char *traits)
{
    char run[300], logs[320], jobckpt[320], h1[300], path[300], err[256];
    snprintf(run, sizeof run, "%s/run", s_dir);
    snprintf(logs, sizeof logs, "%s/logs", run);
    snprintf(jobckpt, sizeof jobckpt, "%s/jobckpt", run);
    snprintf(h1, sizeof h1, "%s/h1", s_dir);
    mkdir(run, 0755);
    mkdir(logs, 0755);
    mkdir(h1, 0755);
    s_w.len = 0;
    t_words_add(&s_w, "exec", "local", "run_dir", run, "logs", logs, "jobckpt", jobckpt, "traits",
                traits, "n_emb", "2", "n_sync", "1", "trainers", "2", "host_stdin", "/dev/null",
                "host", "h0", "h0", "1", run, "/c0", "1", "host", "h1", "h1", "1", h1, "/c1", "0",
                "place", "embedding", "0", "0", "place", "embedding", "1", "1", "place", "sync",
                "0", "1", "place", "trainer", "0", "0", "place", "trainer", "1", "1", NULL);
    snprintf(path, sizeof path, "%s/data", s_dir);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(s_w.buf, 1, s_w.len, fp), s_w.len);
    fclose(fp);
    struct ss_launch_data *d = ss_launch_data_read(path, err, sizeof err);
    assert_non_null(d);
    return d;
}

static int s_setup(void **state)
{
    (void)state;
    return t_tmpdir(s_dir, sizeof s_dir, "lcopy");
}

static int s_teardown(void **state)
{
    (void)state;
    t_rmtree(s_dir);
    return 0;
}

static void s_jobckpt(void)
{
    s_put("run/jobckpt/MANIFEST", "save_id N\ntrainers 2\nembedding_shards 2\nsync_shards 1\n");
    s_put("run/jobckpt/trainer-0.state", "t0");
    s_put("run/jobckpt/trainer-1.state", "t1");
    s_put("run/jobckpt/embedding-0.ckpt", "e0");
    s_put("run/jobckpt/embedding-1.ckpt", "e1");
    s_put("run/jobckpt/sync-0.ckpt", "s0");
}

static void test_push(void **state)
{
    (void)state;
    char rdir[512];
    s_jobckpt();
    struct ss_launch_data *d = s_data_load("ring=1 sync_ps=0");
    assert_string_equal(ss_launch_data_rdir(d, 1, rdir, sizeof rdir) + strlen(s_dir),
                        "/h1/jobckpt.resume");
    assert_int_equal(ss_launch_push(d, "/"), 0);
    assert_true(s_exists("h1/jobckpt.resume/MANIFEST"));
    assert_true(s_exists("h1/jobckpt.resume/trainer-1.state"));
    assert_true(s_exists("h1/jobckpt.resume/embedding-1.ckpt"));
    assert_false(s_exists("h1/jobckpt.resume/trainer-0.state"));
    assert_false(s_exists("h1/jobckpt.resume/embedding-0.ckpt"));
    assert_false(s_exists("h1/jobckpt.resume/sync-0.ckpt"));   /* no sync PS runs */
    assert_false(s_exists("run/jobckpt.resume"));               /* host 0 shares RUN_DIR */
    assert_true(s_exists("run/logs/gather.log"));
    ss_launch_data_destroy(&d);
    /* with the sync PSs: the sync shard's file too */
    d = s_data_load("sync_ps=1");
    assert_int_equal(ss_launch_push(d, "/"), 0);
    assert_true(s_exists("h1/jobckpt.resume/sync-0.ckpt"));
    ss_launch_data_destroy(&d);
}

static void test_push_fails(void **state)
{
    (void)state;
    s_put("run/jobckpt/MANIFEST", "save_id N\ntrainers 2\nembedding_shards 2\nsync_shards 1\n");
    /* trainer-1.state is missing: tar fails here */
    struct ss_launch_data *d = s_data_load("");
    assert_int_equal(ss_launch_push(d, "/"), -1);
    ss_launch_data_destroy(&d);
}

static void test_gather(void **state)
{
    (void)state;
    char outcome[512];
    struct ss_launch_data *d = s_data_load("");
    s_put("h1/result-trainer-1.json", "{}");
    s_put("h1/logs/trainer-1.log", "theirs");
    s_put("h1/.launch-token", "x");
    s_put("h1/jobckpt.resume/MANIFEST", "pushed");
    /* host 1 committed the job checkpoint; host 0's parts are here */
    s_put("h1/jobckpt/MANIFEST", "save_id M\ntrainers 2\nembedding_shards 2\nsync_shards 0\n");
    s_put("h1/jobckpt/trainer-1.state", "t1");
    s_put("h1/jobckpt/embedding-1.ckpt", "e1");
    snprintf(outcome, sizeof outcome, "%s/outcome", s_dir);
    /* host 1 lost: not gathered */
    s_put("outcome", "rc 1\nhost_lost 1\n");
    ss_launch_gather(d, "/", outcome);
    assert_false(s_exists("run/result-trainer-1.json"));
    s_put("run/jobckpt.new-M/trainer-0.state", "t0");
    s_put("run/jobckpt.new-M/embedding-0.ckpt", "e0");
    s_put("outcome", "rc 0\n");
    ss_launch_gather(d, "/", outcome);
    assert_true(s_exists("run/result-trainer-1.json"));
    assert_false(s_exists("run/logs/trainer-1.log"));
    assert_false(s_exists("run/.launch-token"));
    assert_false(s_exists("h1/jobckpt.resume"));
    assert_false(s_exists("run/jobckpt.resume"));
    assert_false(s_exists("run/jobckpt.gathered"));
    assert_true(s_exists("run/jobckpt/trainer-0.state"));
    assert_true(s_exists("run/jobckpt/trainer-1.state"));
    assert_true(s_exists("run/jobckpt/embedding-1.ckpt"));
    ss_launch_data_destroy(&d);
}

static void test_bad_data(void **state)
{
    (void)state;
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/data", s_dir);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fwrite("host\0h\0t\0" "1\0/p\0/c\0maybe\0", 1, 23, fp);
    fclose(fp);
    assert_null(ss_launch_data_read(path, err, sizeof err));
    assert_non_null(strstr(err, "host h: SHARED is maybe"));
    snprintf(path, sizeof path, "%s/none", s_dir);
    assert_null(ss_launch_data_read(path, err, sizeof err));
    assert_non_null(strstr(err, "cannot read"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_push, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_push_fails, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_gather, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_bad_data, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
