/* test_ss_slurm.c - unit tests of shadow-slurm's rules (ss_slurm): the
 * quoting of bash's printf %q (the words bash writes, and every word read
 * back by bash as it was: spaces, quotes, '$', newlines), the command line
 * (--sbatch and its options, --resume, the refused options, what goes to
 * shadow-launch), --ps-nodes and the nodes' roles, the hosts file, the
 * NodeAddr of a scontrol line, the sbatch script and the launch command. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ss_mem.h"
#include "ss_slurm.h"

/* Check that ss_slurm_quote(word) is want. */
static void s_quote_is(const char *word, const char *want)
{
    char *q = ss_slurm_quote(word);
    assert_string_equal(q, want);
    ss_free(q);
}

/* What bash's printf %q writes for each (checked against bash 5). */
static void test_quote_as_bash(void **state)
{
    (void)state;
    s_quote_is("plain", "plain");
    s_quote_is("", "''");
    s_quote_is("a b", "a\\ b");
    s_quote_is("it's", "it\\'s");
    s_quote_is("$HOME", "\\$HOME");
    s_quote_is("a\"b", "a\\\"b");
    s_quote_is("`c`", "\\`c\\`");
    s_quote_is("~u", "\\~u");
    s_quote_is("x~", "x~");
    s_quote_is("a=~b", "a=\\~b");
    s_quote_is("k:~", "k:\\~");
    s_quote_is("#x", "\\#x");
    s_quote_is("x#", "x#");
    s_quote_is("*?[]", "\\*\\?\\[\\]");
    s_quote_is("{}|&;<>()!", "\\{\\}\\|\\&\\;\\<\\>\\(\\)\\!");
    s_quote_is("^,", "\\^\\,");
    s_quote_is("%@+-./:=_", "%@+-./:=_");
    s_quote_is("a\nb", "$'a\\nb'");
    s_quote_is("tab\there", "$'tab\\there'");
    s_quote_is("\001", "$'\\001'");
    s_quote_is("\033x", "$'\\Ex'");
    s_quote_is("\xc3\xa9 \xc3\xbc", "\xc3\xa9\\ \xc3\xbc");
    s_quote_is("\xc3\xa9\n", "$'\xc3\xa9\\n'");
    s_quote_is("back\\slash", "back\\\\slash");
    s_quote_is("\x7f", "$'\\177'");
    s_quote_is("it's\n$x", "$'it\\'s\\n$x'");
}

/* Every word, quoted, comes back from bash as it was. */
static void test_quote_reads_back(void **state)
{
    (void)state;
    static const char *const words[] = {
        "a b", "it's", "$HOME $(id) `id`", "\"q\" 'q'", "line\nline\n", "\t\r\v\f\a\b",
        "~root", "#c", "*", "a;b|c&d", "\\", "", "x=~y:~z", "\xc3\xa9\x01\x7f", "-n",
    };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        char *q = ss_slurm_quote(words[i]), out[256];
        char *cmd = ss_malloc(strlen(q) + 32);
        sprintf(cmd, "printf %%s %s", q);
        int fd[2];
        assert_int_equal(pipe(fd), 0);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fd[1], 1);
            close(fd[0]);
            execlp("bash", "bash", "-c", cmd, (char *)NULL);
            _exit(127);
        }
        close(fd[1]);
        size_t len = 0;
        ssize_t n;
        while ((n = read(fd[0], out + len, sizeof out - 1 - len)) > 0)
            len += (size_t)n;
        out[len] = '\0';
        close(fd[0]);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        assert_string_equal(out, words[i]);
        ss_free(cmd);
        ss_free(q);
    }
}

/* Parse a command line given as a NULL-terminated list into *a. */
static int s_parse(struct ss_slurm_args *a, char *err, size_t len, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    va_start(ap, len);
    for (char *w; (w = va_arg(ap, char *)) != NULL;)
        argv[argc++] = w;
    va_end(ap);
    memset(a, 0, sizeof *a);
    err[0] = '\0';
    return ss_slurm_parse(a, argc, argv, err, len);  /* *a points to the literals */
}

static void test_parse_job(void **state)
{
    (void)state;
    struct ss_slurm_args a;
    char err[256];
    assert_int_equal(s_parse(&a, err, sizeof err, "j.yaml", "--set", "a=1", "--set=b=2", "--bin",
                             "B", "--ps-nodes", "1", "--quiet", "--out", "-", "--dry-run",
                             "--fixed-ports", NULL), 0);
    assert_string_equal(a.job, "j.yaml");
    assert_int_equal(a.n_sets, 2);
    assert_string_equal(a.sets[0], "a=1");
    assert_string_equal(a.sets[1], "b=2");
    assert_string_equal(a.bin, "B");
    assert_string_equal(a.ps_nodes, "1");
    assert_true(a.dry_run && a.note_stderr && !a.sbatch && !a.usage_error);
    assert_int_equal(a.n_pass, 4);  /* --quiet --out - --fixed-ports */
    assert_string_equal(a.pass[0], "--quiet");
    assert_string_equal(a.pass[2], "-");
    assert_string_equal(a.pass[3], "--fixed-ports");
    ss_slurm_args_fini(&a);

    assert_int_equal(s_parse(&a, err, sizeof err, "--quiet", NULL), 0);
    assert_true(a.usage_error);
    ss_slurm_args_fini(&a);
    assert_int_equal(s_parse(&a, err, sizeof err, "j.yaml", "--version", "--bogus=", NULL), 0);
    assert_true(a.version && !a.help);
    ss_slurm_args_fini(&a);
    assert_int_equal(s_parse(&a, err, sizeof err, "-h", NULL), 0);
    assert_true(a.help);
    ss_slurm_args_fini(&a);
}

/* Each refusal and missing value, in shadow-slurm's words. */
static void test_parse_errors(void **state)
{
    (void)state;
    static const struct {
        const char *args[4];
        const char *want;
    } cases[] = {
        {{"j", "--hosts", "f"}, "--hosts: shadow-slurm writes the hosts file from the allocation"
                                " and runs every process with srun"},
        {{"j", "--exec=ssh"}, "--exec=ssh: shadow-slurm writes the hosts file"},
        {{"j", "--ssh-opts"}, "--ssh-opts: shadow-slurm writes"},
        {{"a", "b"}, "one job file only (a, b)"},
        {{"j", "--set"}, "--set needs KEY=VALUE"},
        {{"j", "--bin"}, "--bin needs a folder"},
        {{"j", "--ps-nodes"}, "--ps-nodes needs a count"},
        {{"j", "--predict"}, "--predict needs a value"},
        {{"--signal-before"}, "--signal-before needs a count of seconds"},
        {{"--sbatch", "--signal-before", "65536"}, "--signal-before 65536: want whole seconds, "
                                                   "0..65535 (0: no early signal)"},
        {{"--sbatch", "--signal-before", "1x"}, "--signal-before 1x: want whole seconds"},
        {{"--signal-before", "5", "j"}, "--signal-before goes with --sbatch"},
        {{"--resume"}, "--resume needs a run directory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ss_slurm_args a = {0};
        char err[256] = "";
        int argc = 0;
        char *argv[4];
        while (argc < 4 && cases[i].args[argc]) {
            argv[argc] = (char *)cases[i].args[argc];
            argc++;
        }
        assert_int_equal(ss_slurm_parse(&a, argc, argv, err, sizeof err), -1);
        if (strncmp(err, cases[i].want, strlen(cases[i].want)) != 0)
            fail_msg("case %zu: got \"%s\", want \"%s...\"", i, err, cases[i].want);
        ss_slurm_args_fini(&a);
    }
}

static void test_parse_sbatch_and_resume(void **state)
{
    (void)state;
    struct ss_slurm_args a;
    char err[256];
    assert_int_equal(s_parse(&a, err, sizeof err, "--sbatch", "--signal-before", "45", "j",
                             "--dry-run", "--quiet", "--", "-N", "2", "--", NULL), 0);
    assert_true(a.sbatch && a.dry_run);
    assert_int_equal(a.signal_before, 45);
    assert_int_equal(a.n_again, 3);  /* j --dry-run --quiet: the text leaves --dry-run out */
    assert_string_equal(a.again[2], "--quiet");
    assert_int_equal(a.n_sbatch_args, 3);
    assert_string_equal(a.sbatch_args[2], "--");
    ss_slurm_args_fini(&a);
    assert_int_equal(s_parse(&a, err, sizeof err, "--sbatch", "j", NULL), 0);
    assert_int_equal(a.signal_before, SS_SLURM_SIGNAL_BEFORE);
    ss_slurm_args_fini(&a);

    assert_int_equal(s_parse(&a, err, sizeof err, "--resume", "R", "--quiet", "--bin", "B", NULL),
                     0);
    assert_string_equal(a.resume, "R");
    assert_string_equal(a.job, "-");
    assert_string_equal(a.bin, "B");
    assert_null(a.resume_err);
    assert_int_equal(a.n_pass, 3);
    ss_slurm_args_fini(&a);
    /* the rule broken after the run directory: said once it is checked */
    assert_int_equal(s_parse(&a, err, sizeof err, "--resume", "R", "--set", "a=1", NULL), 0);
    assert_non_null(a.resume_err);
    assert_string_equal(a.resume_err, "--resume takes only --quiet and --bin besides the run "
                                      "directory");
    ss_slurm_args_fini(&a);
    assert_int_equal(s_parse(&a, err, sizeof err, "--resume", "R", "--dry-run", NULL), 0);
    assert_non_null(a.resume_err);
    ss_slurm_args_fini(&a);
    assert_int_equal(s_parse(&a, err, sizeof err, "--sbatch", "--resume", "R", "--bin=B",
                             "--dry-run", NULL), 0);
    assert_null(a.resume_err);
    assert_true(a.dry_run);
    assert_string_equal(a.bin, "B");
    ss_slurm_args_fini(&a);
}

static void test_ps_nodes_and_roles(void **state)
{
    (void)state;
    size_t k = 0;
    char err[256];
    assert_int_equal(ss_slurm_ps_nodes("2", 3, &k, err, sizeof err), 0);
    assert_int_equal(k, 2);
    assert_int_equal(ss_slurm_ps_nodes("3", 3, &k, err, sizeof err), -1);
    assert_string_equal(err, "--ps-nodes 3: want 1..2 (the allocation has 3 node(s); the rest "
                             "run the trainers)");
    assert_int_equal(ss_slurm_ps_nodes("0", 3, &k, err, sizeof err), -1);
    assert_int_equal(ss_slurm_ps_nodes("x", 3, &k, err, sizeof err), -1);
    assert_int_equal(ss_slurm_ps_nodes("", 3, &k, err, sizeof err), -1);
    assert_int_equal(ss_slurm_ps_nodes("1", 1, &k, err, sizeof err), -1);
    assert_non_null(strstr(err, "want 1..0 (the allocation has 1 node(s)"));
    assert_string_equal(ss_slurm_roles(0, 3, 0), "all");
    assert_string_equal(ss_slurm_roles(0, 3, 1), "trainer");
    assert_string_equal(ss_slurm_roles(1, 3, 1), "trainer");
    assert_string_equal(ss_slurm_roles(2, 3, 1), "ps");
    assert_string_equal(ss_slurm_roles(1, 3, 2), "ps");
}

/* Check that the string got (owned) is want, then free it. */
static void s_owned_is(char *got, const char *want)
{
    assert_string_equal(got, want);
    ss_free(got);
}

static void test_hosts_file(void **state)
{
    (void)state;
    const char *nodes[] = {"n1", "n2", "n3"}, *addrs[] = {"10.0.0.1", "10.0.0.2", "fe80::1"};
    char *t = ss_slurm_hosts_text("42", "1", 1, nodes, addrs, 3);
    assert_string_equal(t, "# written by shadow-slurm for Slurm job 42: NODE ROLES addr=IP\n"
                           "# ps-nodes 1\n"
                           "n1 trainer addr=10.0.0.1\n"
                           "n2 trainer addr=10.0.0.2\n"
                           "n3 ps addr=fe80::1\n");
    s_owned_is(ss_slurm_hosts_ps_nodes(t), "1");
    ss_free(t);
    t = ss_slurm_hosts_text("7", NULL, 0, nodes, addrs, 2);
    assert_string_equal(t, "# written by shadow-slurm for Slurm job 7: NODE ROLES addr=IP\n"
                           "n1 all addr=10.0.0.1\n"
                           "n2 all addr=10.0.0.2\n");
    s_owned_is(ss_slurm_hosts_ps_nodes(t), "");
    ss_free(t);
    s_owned_is(ss_slurm_hosts_ps_nodes("# ps-nodes 2\nx\n# ps-nodes 3"), "2\n3");
}

static void test_node_addr(void **state)
{
    (void)state;
    s_owned_is(ss_slurm_node_addr("NodeName=n1 Arch=x86_64 NodeAddr=10.1.2.3 NodeHostName=n1\n"),
               "10.1.2.3");
    s_owned_is(ss_slurm_node_addr("NodeName=n1 NodeHostName=n1 NodeAddr=host-a\n"), "host-a");
    s_owned_is(ss_slurm_node_addr("Node zz not found"), "");
    s_owned_is(ss_slurm_node_addr(""), "");
}

static void test_sbatch_text(void **state)
{
    (void)state;
    const char *args[] = {"j.yaml", "--dry-run", "--set", "job.name=a b", "--set", "x=$y\n"};
    char err[512];
    char *t = ss_slurm_sbatch_text("nm", "/r", 120, "/w d", "/s/shadow-slurm", args, 6, err,
                                   sizeof err);
    assert_string_equal(t, "#!/usr/bin/env bash\n"
                           "# written by shadow-slurm --sbatch: runs the job on the nodes of "
                           "this allocation\n"
                           "#SBATCH --job-name=shadowsync-nm\n"
                           "#SBATCH --output=/r/slurm-%j.out\n"
                           "# SIGTERM to this script (it becomes shadow-launch: exec below) 120 s\n"
                           "# before the time limit: the job stops with a job checkpoint (exit 75)\n"
                           "#SBATCH --signal=B:TERM@120\n"
                           "cd /w\\ d || exit 2\n"
                           "exec /s/shadow-slurm j.yaml --set job.name=a\\ b --set $'x=$y\\n'\n");
    ss_free(t);
    t = ss_slurm_sbatch_text("nm", "/r", 0, "/w", "/s/shadow-slurm", args, 1, err, sizeof err);
    assert_null(strstr(t, "--signal"));
    assert_non_null(strstr(t, "\ncd /w || exit 2\nexec /s/shadow-slurm j.yaml\n"));
    ss_free(t);
    /* a name or run directory that would end its #SBATCH line: refused */
    assert_null(ss_slurm_sbatch_text("a\n#SBATCH --x", "/r", 0, "/w", "/s", args, 1, err,
                                     sizeof err));
    assert_string_equal(err, "job.name $'a\\n#SBATCH --x' holds a newline or another control "
                        "character: it would break the line \"#SBATCH --job-name=shadowsync-NAME\" "
                        "of the batch script (choose one without)");
    assert_null(ss_slurm_sbatch_text("a\rb", "/r", 0, "/w", "/s", args, 1, err, sizeof err));
    assert_non_null(strstr(err, "job.name $'a\\rb' holds"));
    assert_null(ss_slurm_sbatch_text("nm", "/r\x7f", 0, "/w", "/s", args, 1, err, sizeof err));
    assert_ptr_equal(strstr(err, "the run directory $'/r\\177' holds a newline"), err);
    assert_non_null(strstr(err, "\"#SBATCH --output=RUN_DIR/slurm-%j.out\""));
    /* printable names pass as they are (a tab is a control character too) */
    t = ss_slurm_sbatch_text("a-b.c_1", "/r", 0, "/w", "/s", args, 1, err, sizeof err);
    assert_non_null(strstr(t, "#SBATCH --job-name=shadowsync-a-b.c_1\n"));
    ss_free(t);
    assert_null(ss_slurm_sbatch_text("a\tb", "/r", 0, "/w", "/s", args, 1, err, sizeof err));
    /* what sbatch's reader takes as syntax (blanks, quotes, '\\', '#'): in
     * double quotes, '"' and '\\' escaped; the run directory's line too */
    t = ss_slurm_sbatch_text("a b#c\"d'e\\f", "/r 1", 0, "/w", "/s", args, 1, err, sizeof err);
    assert_non_null(strstr(t, "\n#SBATCH --job-name=\"shadowsync-a b#c\\\"d'e\\\\f\"\n"
                              "#SBATCH --output=\"/r 1/slurm-%j.out\"\n"));
    ss_free(t);
    /* sbatch replaces %j, %u... in --output and reads %% as '%': a run
     * directory's '%' is doubled, the job name's is not (not a pattern) */
    t = ss_slurm_sbatch_text("5%", "/r/50%j/%", 0, "/w", "/s", args, 1, err, sizeof err);
    assert_non_null(strstr(t, "#SBATCH --job-name=shadowsync-5%\n"
                              "#SBATCH --output=/r/50%%j/%%/slurm-%j.out\n"));
    ss_free(t);
    /* with a backslash sbatch replaces nothing: the name stays as it is */
    t = ss_slurm_sbatch_text("nm", "/r\\%", 0, "/w", "/s", args, 1, err, sizeof err);
    assert_non_null(strstr(t, "#SBATCH --output=\"/r\\\\%/slurm-%j.out\"\n"));
    ss_free(t);
}

/* Check that argv v (NULL-terminated) is want (the same), then free v. */
static void s_argv_is(char **v, const char *const *want)
{
    size_t i = 0;
    for (; want[i]; i++)
        assert_string_equal(v[i], want[i]);
    assert_null(v[i]);
    ss_free(v);
}

static void test_launch_argv(void **state)
{
    (void)state;
    struct ss_slurm_args a;
    char err[256];
    assert_int_equal(s_parse(&a, err, sizeof err, "j", "--set", "k=v", "--quiet", NULL), 0);
    char **v = ss_slurm_launch_argv("/s/shadow-launch", &a, "/b", "/r/slurm-hosts", NULL);
    const char *want[] = {"/s/shadow-launch", "j", "--set", "k=v", "--bin", "/b", "--hosts",
                          "/r/slurm-hosts", "--exec", "srun", "--quiet", NULL};
    s_argv_is(v, want);
    ss_slurm_args_fini(&a);
    assert_int_equal(s_parse(&a, err, sizeof err, "--resume", "R", "--bin", "/b", NULL), 0);
    v = ss_slurm_launch_argv("/s/shadow-launch", &a, "/b", "/r/slurm-hosts", "/abs/R");
    const char *want2[] = {"/s/shadow-launch", "--resume", "/abs/R", "--bin", "/b", NULL};
    s_argv_is(v, want2);
    ss_slurm_args_fini(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quote_as_bash),
        cmocka_unit_test(test_quote_reads_back),
        cmocka_unit_test(test_parse_job),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_sbatch_and_resume),
        cmocka_unit_test(test_ps_nodes_and_roles),
        cmocka_unit_test(test_hosts_file),
        cmocka_unit_test(test_node_addr),
        cmocka_unit_test(test_sbatch_text),
        cmocka_unit_test(test_launch_argv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
