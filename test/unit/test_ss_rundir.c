/* test_ss_rundir.c - unit tests of joining the parts of saves in a run
 * directory gathered from hosts that share no file system (ss_rundir): the
 * model's parts of its own save join model/, another save's are dropped; a
 * gathered job checkpoint newer than jobckpt/ replaces it with every host's
 * part, and only when complete (else the old one stays, the missing files
 * named); a jobckpt/ committed on a host that shares the run directory gets
 * the other hosts' parts; the files a --resume push sends a host (its own,
 * or a re-sharded role's whole set). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ss_rundir.h"
#include "ss_super.h"
#include "t.h"

static char s_dir[256];

/* Write text to s_dir/rel, making its folder. */
static void s_put(const char *rel, const char *text)
{
    char path[512], d[512];
    snprintf(path, sizeof path, "%s/%s", s_dir, rel);
    snprintf(d, sizeof d, "%s", path);
    *strrchr(d, '/') = '\0';
    mkdir(d, 0755);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* The first line of s_dir/rel, or "" when it is not there. */
static const char *s_get(const char *rel)
{
    static char buf[256];
    char path[512];
    snprintf(path, sizeof path, "%s/%s", s_dir, rel);
    buf[0] = '\0';
    FILE *fp = fopen(path, "r");
    if (fp) {
        if (!fgets(buf, sizeof buf, fp))
            buf[0] = '\0';
        fclose(fp);
    }
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

static int s_exists(const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", s_dir, rel);
    return access(path, F_OK) == 0;
}

static int s_setup(void **state)
{
    (void)state;
    return t_tmpdir(s_dir, sizeof s_dir, "rundir");
}

static int s_teardown(void **state)
{
    (void)state;
    t_rmtree(s_dir);
    return 0;
}

static void test_model_parts(void **state)
{
    (void)state;
    s_put("model/MANIFEST", "save_id A\n");
    s_put("model/embedding-0.ckpt", "a0");
    s_put("model.new-A/embedding-1.ckpt", "a1");   /* its own save's part: joins */
    s_put("model.new-A/notes.txt", "x");           /* not a .ckpt: stays out */
    s_put("model.new-B/embedding-2.ckpt", "b2");   /* another save's: dropped */
    ss_rundir_merge_model(s_dir);
    assert_string_equal(s_get("model/embedding-1.ckpt"), "a1");
    assert_string_equal(s_get("model/embedding-0.ckpt"), "a0");
    assert_false(s_exists("model/embedding-2.ckpt"));
    assert_false(s_exists("model/notes.txt"));
    assert_false(s_exists("model.new-A"));
    assert_false(s_exists("model.new-B"));
}

/* A job checkpoint of save id N: MANIFEST (2 trainers, 1 embedding shard)
 * and trainer 0's state committed on its host, gathered. */
static void s_gathered(const char *id)
{
    char m[128];
    snprintf(m, sizeof m, "save_id %s\nexamples 77\ntrainers 2\nembedding_shards 1\n"
             "sync_shards 0\n", id);
    s_put("jobckpt.gathered/MANIFEST", m);
    s_put("jobckpt.gathered/trainer-0.state", "t0");
}

static void test_jobckpt_complete(void **state)
{
    (void)state;
    char msg[512];
    s_put("jobckpt/MANIFEST", "save_id OLD\ntrainers 0\n");
    s_gathered("N");
    s_put("jobckpt.new-N/trainer-1.state", "t1");
    s_put("jobckpt.new-N/embedding-0.ckpt", "e0");
    s_put("jobckpt.new-X/trainer-1.state", "stale");
    assert_int_equal(ss_rundir_merge_jobckpt(s_dir, msg, sizeof msg), 0);
    assert_string_equal(s_get("jobckpt/MANIFEST"), "save_id N");
    assert_string_equal(s_get("jobckpt/trainer-0.state"), "t0");
    assert_string_equal(s_get("jobckpt/trainer-1.state"), "t1");
    assert_string_equal(s_get("jobckpt/embedding-0.ckpt"), "e0");
    assert_false(s_exists("jobckpt.gathered"));
    assert_false(s_exists("jobckpt.new-N"));
    assert_false(s_exists("jobckpt.new-X"));
}

static void test_jobckpt_incomplete_kept(void **state)
{
    (void)state;
    char msg[512];
    s_put("jobckpt/MANIFEST", "save_id OLD\ntrainers 0\n");
    s_gathered("N");
    s_put("jobckpt.new-N/trainer-1.state", "t1");   /* the PS's part never came */
    assert_int_equal(ss_rundir_merge_jobckpt(s_dir, msg, sizeof msg), 1);
    assert_non_null(strstr(msg, "N lacks embedding-0.ckpt"));
    assert_string_equal(s_get("jobckpt/MANIFEST"), "save_id OLD");
    assert_false(s_exists("jobckpt/trainer-0.state"));
    assert_false(s_exists("jobckpt.gathered"));
    assert_false(s_exists("jobckpt.new-N"));
}

static void test_jobckpt_same_id_not_taken(void **state)
{
    (void)state;
    char msg[512];
    /* what jobckpt/ already is (an older launch's, pushed for --resume) */
    s_put("jobckpt/MANIFEST", "save_id N\nexamples 5\n");
    s_gathered("N");
    assert_int_equal(ss_rundir_merge_jobckpt(s_dir, msg, sizeof msg), 0);
    assert_string_equal(s_get("jobckpt/MANIFEST"), "save_id N");
    char v[32];
    char path[512];
    snprintf(path, sizeof path, "%s/jobckpt", s_dir);
    ss_super_manifest(path, "examples", v, sizeof v);
    assert_string_equal(v, "5");
    assert_false(s_exists("jobckpt.gathered"));
}

static void test_jobckpt_shared_host(void **state)
{
    (void)state;
    char msg[512];
    /* trainer 0's host shares the run directory: jobckpt/ is here */
    s_put("jobckpt/MANIFEST", "save_id N\ntrainers 2\nembedding_shards 1\nsync_shards 0\n");
    s_put("jobckpt/trainer-0.state", "t0");
    s_put("jobckpt.new-N/trainer-1.state", "t1");
    s_put("jobckpt.new-N/embedding-0.ckpt", "e0");
    assert_int_equal(ss_rundir_merge_jobckpt(s_dir, msg, sizeof msg), 0);
    assert_string_equal(s_get("jobckpt/trainer-1.state"), "t1");
    assert_string_equal(s_get("jobckpt/embedding-0.ckpt"), "e0");
    assert_false(s_exists("jobckpt.new-N"));
}

static void test_resume_files(void **state)
{
    (void)state;
    char out[512], dir[512];
    snprintf(dir, sizeof dir, "%s/jobckpt", s_dir);
    s_put("jobckpt/MANIFEST", "save_id N\ntrainers 2\nembedding_shards 2\nsync_shards 1\n");
    /* a host with trainer 1 and embedding shard 1 of 2 (the count saved): its own files */
    struct ss_rundir_proc a[] = {{"trainer", 1, 0}, {"embedding", 1, 2}};
    assert_int_equal(ss_rundir_resume_files(dir, a, 2, out, sizeof out), 3);
    assert_string_equal(out, "MANIFEST\ntrainer-1.state\nembedding-1.ckpt\n");
    /* the job now has 4 embedding shards: each PS re-shards from the whole saved set,
     * listed once for the two shards on this host */
    struct ss_rundir_proc b[] = {{"embedding", 0, 4}, {"embedding", 2, 4}, {"sync", 0, 1}};
    assert_int_equal(ss_rundir_resume_files(dir, b, 3, out, sizeof out), 4);
    assert_string_equal(out, "MANIFEST\nembedding-0.ckpt\nembedding-1.ckpt\nsync-0.ckpt\n");
    /* nothing of this host's in it: MANIFEST alone */
    assert_int_equal(ss_rundir_resume_files(dir, NULL, 0, out, sizeof out), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_model_parts, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_jobckpt_complete, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_jobckpt_incomplete_kept, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_jobckpt_same_id_not_taken, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_jobckpt_shared_host, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_resume_files, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
