/* test_ss_launch_opts.c - unit tests of the launcher's command line
 * (ss_launch_opts): the values a job gets (paths made absolute, the --exec
 * mode's default, the binaries found next to the script), every usage
 * error in the launcher's words, --help and --version, --resume from
 * RUN_DIR/launch.args, --predict's --out, and the words written back. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ss_err.h"
#include "ss_launch_opts.h"
#include "t.h"

static char s_dir[256], s_scripts[300], s_err[4096];

/* Write text into s_dir/name (mode: its permissions). */
static void s_file(const char *name, const char *text, mode_t mode)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", s_dir, name);
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
    assert_int_equal(chmod(p, mode), 0);
}

static void s_mkdir(const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", s_dir, name);
    assert_int_equal(mkdir(p, 0755), 0);
}

/* Parse the NULL-terminated arguments; *o_p gets the object on success. */
static int s_parse(ss_launch_opts_t **o_p, ...)
{
    char *argv[64];
    int argc = 0;
    va_list ap;
    va_start(ap, o_p);
    for (char *a; (a = va_arg(ap, char *)) != NULL;)
        argv[argc++] = a;
    va_end(ap);
    return ss_launch_opts_parse(argc, argv, s_scripts, o_p, s_err, sizeof s_err);
}

/* The error of the arguments (a usage error) must be want. */
#define ERR(want, ...)                                                  \
    do {                                                                \
        ss_launch_opts_t *o_ = NULL;                                    \
        assert_int_equal(s_parse(&o_, __VA_ARGS__, NULL), SS_E_INVAL);  \
        assert_null(o_);                                                \
        assert_string_equal(s_err, want);                               \
    } while (0)

static const char *s_at(const char *rel, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", s_dir, rel);
    return buf;
}

static void test_values(void **state)
{
    (void)state;
    ss_launch_opts_t *o = NULL;
    char want[512];
    assert_int_equal(s_parse(&o, "job.yaml", "--set", "a.b=1", "--set=c=2", "--quiet",
                             "--ssh-opts", " -F cfg\t-o X=1 \nignored", "--base-port", "7000",
                             NULL), SS_LAUNCH_RUN);
    assert_non_null(o);
    assert_string_equal(ss_launch_opts_get(o, "job"), s_at("job.yaml", want, sizeof want));
    assert_string_equal(ss_launch_opts_get(o, "cwd"), s_dir);
    assert_string_equal(ss_launch_opts_get(o, "exec"), "local");
    assert_string_equal(ss_launch_opts_get(o, "bin"), s_at("bin", want, sizeof want));
    assert_string_equal(ss_launch_opts_get(o, "rbin"), want);
    assert_string_equal(ss_launch_opts_get(o, "remote_bin"), want);
    assert_string_equal(ss_launch_opts_get(o, "quiet"), "1");
    assert_string_equal(ss_launch_opts_get(o, "no_plots"), "0");
    assert_string_equal(ss_launch_opts_get(o, "predict"), "0");
    assert_string_equal(ss_launch_opts_get(o, "base_port"), "7000");
    assert_string_equal(ss_launch_opts_get(o, "resume"), "");
    assert_string_equal(ss_launch_opts_get(o, "script"), s_scripts);
    assert_string_equal(ss_launch_opts_get(o, "here"), s_at("scripts", want, sizeof want));
    assert_null(ss_launch_opts_get(o, "no-such-key"));
    size_t n;
    char *const *w = ss_launch_opts_sets(o, &n);
    assert_int_equal(n, 2);
    assert_string_equal(w[0], "a.b=1");
    assert_string_equal(w[1], "c=2");
    w = ss_launch_opts_ssh_opts(o, &n);
    assert_int_equal(n, 4);
    assert_string_equal(w[0], "-F");
    assert_string_equal(w[3], "X=1");
    ss_launch_opts_destroy(&o);
    assert_null(o);
    ss_launch_opts_destroy(&o);
    /* a job in a subfolder, "." and ".." taken lexically; --hosts: ssh,
     * the remote binaries where the processes run */
    assert_int_equal(s_parse(&o, "./sub/../sub/job2.yaml", "--hosts", "hosts", "--remote-bin",
                             "/opt/ss", "--bin", "bin/../bin", NULL), SS_LAUNCH_RUN);
    assert_string_equal(ss_launch_opts_get(o, "job"), s_at("sub/job2.yaml", want, sizeof want));
    assert_string_equal(ss_launch_opts_get(o, "exec"), "ssh");
    assert_string_equal(ss_launch_opts_get(o, "bin"), s_at("bin", want, sizeof want));
    assert_string_equal(ss_launch_opts_get(o, "rbin"), "/opt/ss");
    ss_launch_opts_destroy(&o);
}

static void test_usage_errors(void **state)
{
    (void)state;
    ERR("--set needs a value (see --help)", "job.yaml", "--set");
    ERR("--set a: give KEY=VALUE in one word (--set a=1)", "job.yaml", "--set", "a", "1");
    ERR("--set a: give KEY=VALUE in one word (--set a=VALUE)", "job.yaml", "--set", "a");
    ERR("unknown option --frobnicate (see --help)", "job.yaml", "--frobnicate");
    ERR("unknown option - (see --help)", "job.yaml", "-");
    ERR("one job file only (job.yaml, then other.yaml)", "job.yaml", "other.yaml");
    ERR("--resume RUN_DIR comes first and alone (see --help)", "job.yaml", "--resume", "run");
    ERR("", "--quiet");
    ERR("no such job file: nope.yaml", "nope.yaml");
    ERR("no such job file: sub", "sub");
    ERR("--predict RUN_DIR needs --out FILE (where the predictions go; --out - for standard "
        "output)", "job.yaml", "--predict", "model-run");
    ERR("--out and --skip-bad go with --predict RUN_DIR", "job.yaml", "--out", "p.txt");
    ERR("--out and --skip-bad go with --predict RUN_DIR", "job.yaml", "--skip-bad");
    ERR("--out nodir/p.txt: no such folder nodir", "job.yaml", "--predict", "model-run", "--out",
        "nodir/p.txt");
    char want[1024];
    snprintf(want, sizeof want, "--out %s/sub is a folder; give a file name", s_dir);
    ERR(want, "job.yaml", "--predict", "model-run", "--out", "sub");
    ERR("sub has no saved model (sub/model/dense.bin missing): give the run directory of a job "
        "that finished training (it saves RUN_DIR/model)", "job.yaml", "--eval-only", "sub");
    ERR("nobin/shadow-ps not found: run 'make' first or pass --bin", "job.yaml", "--bin", "nobin");
    ERR("halfbin/shadow-super not found: run 'make' first or pass --bin", "job.yaml", "--bin",
        "halfbin");
    ERR("no such hosts file: nohosts", "job.yaml", "--hosts", "nohosts");
    ERR("--exec srun needs --hosts FILE", "job.yaml", "--exec", "srun");
    /* an --exec mode with no backend row: the plan names it */
    ss_launch_opts_t *o = NULL;
    assert_int_equal(s_parse(&o, "job.yaml", "--exec", "telepathy", NULL), SS_LAUNCH_RUN);
    assert_string_equal(ss_launch_opts_get(o, "exec"), "telepathy");
    ss_launch_opts_destroy(&o);
}

static void test_help_version(void **state)
{
    (void)state;
    ss_launch_opts_t *o = NULL;
    assert_int_equal(s_parse(&o, "--help", NULL), SS_LAUNCH_HELP);
    assert_int_equal(s_parse(&o, "job.yaml", "-h", "--bogus", NULL), SS_LAUNCH_HELP);
    assert_int_equal(s_parse(&o, "--version", NULL), SS_LAUNCH_VERSION);
    assert_null(o);
    ERR("unknown option --bogus (see --help)", "--bogus", "--help");
    char text[16384];
    FILE *fp = fmemopen(text, sizeof text, "w");
    assert_non_null(fp);
    ss_launch_usage(fp);
    fclose(fp);
    assert_true(!strncmp(text, "usage: shadow-launch JOB.yaml [--set KEY=VALUE]... [options]\n",
                         61));
    assert_non_null(strstr(text, "when a data file is missing or unreadable"));
}

static void test_resume(void **state)
{
    (void)state;
    ss_launch_opts_t *o = NULL;
    char args[1024], want[512];
    /* launch.args: the working directory, then the launch's arguments */
    snprintf(args, sizeof args, "%s/sub\njob2.yaml\n--set\nx=1\n--predict\n../model-run\n--out\n"
             "-\n", s_dir);
    s_file("run/launch.args", args, 0644);
    /* (the arguments are relative to that directory, --bin's too) */
    assert_int_equal(s_parse(&o, "--resume", "run", "--quiet", "--bin", "../bin", NULL),
                     SS_LAUNCH_RUN);
    assert_string_equal(ss_launch_opts_get(o, "resume"), s_at("run", want, sizeof want));
    assert_string_equal(ss_launch_opts_get(o, "cwd"), s_at("sub", want, sizeof want));
    assert_string_equal(ss_launch_opts_get(o, "job"), s_at("sub/job2.yaml", want, sizeof want));
    assert_string_equal(ss_launch_opts_get(o, "eval_only"), "../model-run");
    assert_string_equal(ss_launch_opts_get(o, "predict_out"), "-");
    assert_string_equal(ss_launch_opts_get(o, "quiet"), "1");
    assert_string_equal(ss_launch_opts_get(o, "bin"), s_at("bin", want, sizeof want));
    size_t n;
    assert_string_equal(ss_launch_opts_sets(o, &n)[0], "x=1");
    ss_launch_opts_destroy(&o);
    ERR("--resume needs a run directory", "--resume");
    ERR("--resume nope: no such run directory", "--resume", "nope");
    ERR("--resume sub: no launch.args there (not a run directory of a job started by "
        "shadow-launch)", "--resume", "sub");
    snprintf(want, sizeof want, "--resume takes only --quiet, --no-plots and --bin besides the "
             "run directory (the job's own options come from %s/run/launch.args)", s_dir);
    ERR(want, "--resume", "run", "--no-plots", "--set", "a=b");
    s_file("run/launch.args", "/no/such/dir\njob.yaml\n", 0644);
    ERR("--resume: the job's working directory /no/such/dir is gone", "--resume", "run");
}

static void test_predict_out(void **state)
{
    (void)state;
    ss_launch_opts_t *o = NULL;
    char want[512];
    assert_int_equal(s_parse(&o, "job.yaml", "--predict", "model-run", "--out", "sub/p.txt",
                             "--skip-bad", NULL), SS_LAUNCH_RUN);
    assert_string_equal(ss_launch_opts_get(o, "predict_out"),
                        s_at("sub/p.txt", want, sizeof want));
    assert_string_equal(ss_launch_opts_get(o, "skip_bad"), "1");
    assert_string_equal(ss_launch_opts_get(o, "predict"), "1");
    assert_string_equal(ss_launch_opts_get(o, "eval_only"), "model-run");
    ss_launch_opts_destroy(&o);
    assert_int_equal(s_parse(&o, "job.yaml", "--eval-only", "model-run", NULL), SS_LAUNCH_RUN);
    assert_string_equal(ss_launch_opts_get(o, "predict"), "0");
    ss_launch_opts_destroy(&o);
}

static void test_write(void **state)
{
    (void)state;
    ss_launch_opts_t *o = NULL;
    assert_int_equal(s_parse(&o, "job.yaml", "--set", "a=1", "--ssh-opts", "-v", NULL),
                     SS_LAUNCH_RUN);
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(ss_launch_opts_write(o, p[1]), 0);
    close(p[1]);
    char buf[8192];
    ssize_t n = read(p[0], buf, sizeof buf);
    close(p[0]);
    assert_true(n > 0 && buf[n - 1] == '\0');
    /* 19 keys with a value each, then set a=1, then ssh_opt -v */
    const char *w = buf, *end = buf + n;
    int words = 0;
    for (; w < end; w += strlen(w) + 1)
        words++;
    assert_int_equal(words, 2 * 19 + 4);
    assert_string_equal(buf, "cwd");
    assert_string_equal(buf + n - 11, "ssh_opt");
    assert_string_equal(buf + n - 3, "-v");
    ss_launch_opts_destroy(&o);
}

/* The path rules (common/ss_path.h) as the launcher applies them: the
 * logical working directory through a symbolic link, ".." after a file
 * (cd's rule: refused), and the binaries found in --bin, ../bin next to
 * the script, the script's own folder, then PATH. */
static void test_paths(void **state)
{
    (void)state;
    ss_launch_opts_t *o = NULL;
    char want[512], lnk[512], script[512], path[1024];
    assert_int_equal(symlink("sub", s_at("lnk", lnk, sizeof lnk)), 0);
    assert_int_equal(chdir(lnk), 0);
    setenv("PWD", lnk, 1);
    assert_int_equal(s_parse(&o, "job2.yaml", NULL), SS_LAUNCH_RUN);
    assert_string_equal(ss_launch_opts_get(o, "cwd"), lnk);
    assert_string_equal(ss_launch_opts_get(o, "job"), s_at("lnk/job2.yaml", want, sizeof want));
    ss_launch_opts_destroy(&o);
    /* ".." after the link: the name is textual (s_dir), the test physical */
    assert_int_equal(s_parse(&o, "../job.yaml", NULL), SS_LAUNCH_RUN);
    assert_string_equal(ss_launch_opts_get(o, "job"), s_at("job.yaml", want, sizeof want));
    ss_launch_opts_destroy(&o);
    assert_int_equal(chdir(s_dir), 0);
    setenv("PWD", s_dir, 1);
    /* ".." after a file or a missing folder: cd fails there, so does the launcher */
    ERR("no such job file: nofile/../job.yaml", "nofile/../job.yaml");
    ERR("no such job file: hosts/../job.yaml", "hosts/../job.yaml");
    ERR("--resume hosts/../run: no such run directory", "--resume", "hosts/../run");
    ERR("--out hosts/../p.txt: no such folder hosts/..", "job.yaml", "--predict", "model-run",
        "--out", "hosts/../p.txt");
    /* the binaries: the script's own folder (installed), then PATH */
    s_mkdir("opt");
    s_mkdir("opt/inst");
    static const char *const bins[] = {"shadow-ps", "shadow-ctl", "shadow-trainer",
                                       "shadow-super"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "opt/inst/%s", bins[i]);
        s_file(path, "#!/bin/sh\n", 0755);
    }
    snprintf(script, sizeof script, "%s/opt/inst/shadow-launch", s_dir);
    char *argv[] = {"job.yaml", NULL};
    assert_int_equal(ss_launch_opts_parse(1, argv, script, &o, s_err, sizeof s_err),
                     SS_LAUNCH_RUN);
    assert_string_equal(ss_launch_opts_get(o, "bin"), s_at("opt/inst", want, sizeof want));
    ss_launch_opts_destroy(&o);
    const char *old = getenv("PATH");
    char *saved = strdup(old ? old : "");
    snprintf(path, sizeof path, "/no/such:%s/sub::bin", s_dir);
    setenv("PATH", path, 1);
    assert_int_equal(ss_launch_opts_parse(1, argv, "/no/such/shadow-launch", &o, s_err,
                                          sizeof s_err), SS_LAUNCH_RUN);
    assert_string_equal(ss_launch_opts_get(o, "bin"), s_at("bin", want, sizeof want));
    ss_launch_opts_destroy(&o);
    /* no script, nothing on PATH */
    setenv("PATH", "/no/such", 1);
    assert_int_equal(ss_launch_opts_parse(1, argv, NULL, &o, s_err, sizeof s_err), SS_E_INVAL);
    assert_string_equal(s_err, "/nonexistent/shadow-ps not found: run 'make' first or pass --bin");
    setenv("PATH", saved, 1);
    free(saved);
}

static int s_setup(void **state)
{
    (void)state;
    if (t_tmpdir(s_dir, sizeof s_dir, "launch-opts") != 0)
        return -1;
    snprintf(s_scripts, sizeof s_scripts, "%s/scripts/shadow-launch", s_dir);
    s_mkdir("scripts");
    s_mkdir("bin");
    s_mkdir("halfbin");
    s_mkdir("sub");
    s_mkdir("run");
    s_mkdir("model-run");
    s_mkdir("model-run/model");
    s_mkdir("sub/model");
    static const char *const bins[] = {"shadow-ps", "shadow-ctl", "shadow-trainer",
                                       "shadow-super"};
    char p[64];
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "bin/%s", bins[i]);
        s_file(p, "#!/bin/sh\n", 0755);
        snprintf(p, sizeof p, "halfbin/%s", bins[i]);
        if (i < 3)
            s_file(p, "#!/bin/sh\n", 0755);
    }
    s_file("job.yaml", "job: {}\n", 0644);
    s_file("sub/job2.yaml", "job: {}\n", 0644);
    s_file("model-run/model/dense.bin", "x", 0644);
    s_file("hosts", "localhost\n", 0644);
    if (chdir(s_dir) != 0)
        return -1;
    setenv("PWD", s_dir, 1);
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    if (chdir("/") != 0)
        return -1;
    t_rmtree(s_dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_values, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_usage_errors, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_help_version, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_resume, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_predict_out, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_write, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_paths, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
