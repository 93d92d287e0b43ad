/* ctl_slurm.c - shadow-ctl slurm: what scripts/shadow-slurm does (that
 * script only finds shadow-ctl and runs this): run a job on the nodes of
 * the Slurm allocation it runs in, or (--sbatch) write a batch script that
 * does and submit it.
 *
 * Inside an allocation it checks SLURM_JOB_ID, SLURM_JOB_NODELIST and the
 * Slurm client commands, asks `scontrol show hostnames` for the nodes and
 * `scontrol -o show node` for each one's NodeAddr (resolved as the plan
 * resolves a hosts file's HOST), writes RUN_DIR/slurm-hosts and execs
 * `shadow-launch JOB ... --hosts FILE --exec srun` (or `--resume RUN_DIR`).
 * scontrol and sbatch run by fork and exec, their output read through a
 * pipe: no shell between. The rules and texts are common/ss_slurm.h's.
 *
 * Every message starts "shadow-slurm: "; the exit status is 2 for a usage
 * or allocation error, sbatch's with --sbatch, otherwise shadow-launch's
 * (exec). */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl_slurm.h"
#include "ss_cfg.h"
#include "ss_fs.h"
#include "ss_launch_proc.h"
#include "ss_mem.h"
#include "ss_path.h"
#include "ss_plan.h"
#include "ss_slurm.h"
#include "ss_version.h"

/* shadow-slurm --help. */
static void s_usage(FILE *out)
{
    fputs(
          "usage: shadow-slurm JOB.yaml [--set KEY=VALUE]... [options] [shadow-launch options]\n"
          "       shadow-slurm --resume RUN_DIR [--quiet] [--bin DIR]\n"
          "       shadow-slurm --sbatch [--signal-before S] JOB.yaml [options] "
          "[-- SBATCH_OPTIONS]\n"
          "       shadow-slurm --sbatch [--signal-before S] --resume RUN_DIR [--quiet] "
          "[--bin DIR]\n"
          "                    [-- SBATCH_OPTIONS]\n"
          "\n"
          "Run a ShadowSync job on the nodes of the current Slurm allocation: inside\n"
          "salloc, or as the body of an sbatch script; or (--sbatch) write that sbatch\n"
          "script and submit it.\n"
          "\n"
          "  salloc -N 4 --exclusive shadow-slurm job.yaml\n"
          "  shadow-slurm --sbatch job.yaml -- -N 4 --exclusive -t 8:00:00\n"
          "  sbatch -N 4 --exclusive --signal=B:TERM@120 --wrap 'exec shadow-slurm job.yaml'\n"
          "\n"
          "Every node takes every role: trainer r runs on node r mod N, embedding and\n"
          "sync shard k on node k mod N (N nodes, in the allocation's order); with\n"
          "--ps-nodes K the last K nodes run the PSs and the others the trainers.\n"
          "Endpoints use each node's address (NodeAddr of `scontrol show node`) and a\n"
          "free port there. Every process is one job step (srun --overlap) that may use\n"
          "all of the job's CPUs on its node.\n"
          "\n"
          "  --set KEY=VALUE     override a job-file key for every process (repeatable)\n"
          "  --bin DIR           where the shadow-* binaries are, the same path on every\n"
          "                      node (default: ../bin next to this script, its own\n"
          "                      folder, then PATH)\n"
          "  --ps-nodes K        the last K nodes run the PSs, the others the trainers\n"
          "  --dry-run           print the hosts file and the shadow-launch command only\n"
          "                      (with --sbatch: write and print the sbatch script, do\n"
          "                      not submit it)\n"
          "  --resume RUN_DIR    go on with the job that SIGTERM stopped in RUN_DIR (exit\n"
          "                      75): the hosts file is written again from this\n"
          "                      allocation (its nodes may be others; --ps-nodes as\n"
          "                      before), then shadow-launch --resume RUN_DIR\n"
          "  --sbatch            outside an allocation: write RUN_DIR/shadow-slurm.sbatch,\n"
          "                      a batch script that runs this same command in its\n"
          "                      allocation, and submit it: sbatch SBATCH_OPTIONS\n"
          "                      (everything after --: nodes, time limit, partition,\n"
          "                      --wait, ...) RUN_DIR/shadow-slurm.sbatch. Its exit\n"
          "                      status is sbatch's.\n"
          "  --signal-before S   with --sbatch: the script asks Slurm for SIGTERM S\n"
          "                      seconds before the job's time limit (#SBATCH\n"
          "                      --signal=B:TERM@S; default 120, 0: none), so that\n"
          "                      the job checkpoint is written and gathered in time\n"
          "                      (see \"The time limit\" below)\n"
          "  -h, --help          this text\n"
          "  --version           print the version and git revision\n"
          "Other options go to shadow-launch: --quiet, --eval-only RUN_DIR,\n"
          "--predict RUN_DIR --out FILE|- [--skip-bad], --base-port P, --remote-bin DIR,\n"
          "--remote-run-dir DIR, --fixed-ports.\n"
          "\n"
          "RUN_DIR (job.run_dir) gets the hosts file, slurm-hosts, besides what\n"
          "shadow-launch writes there (cluster.args has the endpoints used).\n"
          "\n"
          "SIGTERM to shadow-slurm (it is shadow-launch once started: kill PID, or\n"
          "scancel --signal=TERM --batch JOBID for an sbatch script that runs it in the\n"
          "foreground) stops the job with a job checkpoint gathered into RUN_DIR/jobckpt\n"
          "and exit status 75; resume it in an allocation of the same or other nodes\n"
          "with shadow-slurm --resume RUN_DIR.\n"
          "\n"
          "The time limit: when a job reaches it, Slurm sends SIGTERM to every process\n"
          "of it, and SIGKILL KillWait seconds later (30 by default): often too soon\n"
          "for a job checkpoint (the trainers drain and sync, every PS writes its\n"
          "embeddings, the launcher gathers them from the nodes), and the PSs get the\n"
          "SIGTERM too. The script --sbatch writes asks Slurm for an early SIGTERM to\n"
          "the batch shell alone (B:), S seconds before the limit (--signal-before;\n"
          "Slurm may send it up to a minute earlier than asked); the script execs this\n"
          "command, so the launcher gets it and stops the job with a job checkpoint\n"
          "(exit 75). Resubmit with shadow-slurm --sbatch --resume RUN_DIR [-- ...].\n"
          "Writing your own batch script instead: put \"#SBATCH --signal=B:TERM@120\"\n"
          "in it and \"exec\" before shadow-slurm (a shell that waits for it does not\n"
          "pass the signal on), or give sbatch --signal=B:TERM@120 with --wrap 'exec\n"
          "shadow-slurm ...' as above. Size S to the checkpoint: about the time a\n"
          "SIGTERM checkpoint took (the launcher prints it) plus a margin.\n"
          "\n"
          "Exit status: shadow-launch's (0 when every trainer finished, 75 when SIGTERM\n"
          "stopped it with a job checkpoint), 2 for a usage or allocation error; with\n"
          "--sbatch, sbatch's (with --wait: the job's).\n",
          out);
}

/* Where the wrapper lives, and what one run has found so far. */
struct s_run {
    const char *here;        /* the folder of scripts/shadow-slurm (and shadow-launch) */
    const char *as;          /* the script's name as run ($0), for messages */
    char cwd[PATH_MAX];      /* the current folder, as the shell's $PWD */
    char bin[PATH_MAX];      /* the binaries' folder, absolute */
    char run_dir[PATH_MAX];  /* job.run_dir, absolute */
    char resume[PATH_MAX];   /* --resume's run directory, absolute, or "" */
};

/* Print "shadow-slurm: MESSAGE" on stderr; returns 2 (a usage or
 * allocation error). */
static int __attribute__((format(printf, 1, 2))) s_err(const char *fmt, ...)
{
    va_list ap;
    fputs("shadow-slurm: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

/* This host's short name (hostname -s). */
static const char *s_host(char *buf, size_t len)
{
    if (gethostname(buf, len) != 0)
        snprintf(buf, len, "localhost");
    buf[len - 1] = '\0';
    buf[strcspn(buf, ".")] = '\0';
    return buf;
}

/* The binaries' folder (ss_path_find_bin(), looking for prog), named as
 * cd names it into r->bin. Checks that it holds shadow-ctl. Returns 0, or
 * 2 after the message. */
static int s_find_bin(struct s_run *r, const char *bin, const char *prog)
{
    char dir[PATH_MAX], path[PATH_MAX + 16];
    ss_path_find_bin(r->cwd, bin, r->here, prog, dir, sizeof dir);
    if (ss_path_dir(r->cwd, dir, r->bin, sizeof r->bin) != 0)
        return s_err("--bin: no such folder");
    snprintf(path, sizeof path, "%s/shadow-ctl", r->bin);
    if (!ss_path_test(r->cwd, path, 'x'))
        return s_err("%s not found: run 'make' first or pass --bin", path);
    return 0;
}

/* Load the job file with the --set values and read key into out. Returns
 * 0, or 2 after the message (as shadow-ctl config get says it). */
static int s_job_key(const struct ss_slurm_args *a, const char *key, char *out, size_t len)
{
    struct ss_cfg *cfg = ss_calloc(1, sizeof *cfg);
    char err[1024];
    int rc = ss_cfg_load(cfg, a->job, a->sets, a->n_sets, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "shadow-ctl: %s\n", err);
    else if ((rc = ss_cfg_get(cfg, key, out, len)) != 0)
        fprintf(stderr, "shadow-ctl: config get %s: cannot read it\n", key);
    ss_free(cfg);
    return rc ? 2 : 0;
}

/* The job's run directory (--resume's, else job.run_dir relative to the
 * current folder) into r->run_dir. Returns 0, or 2 after the message. */
static int s_run_dir_name(struct s_run *r, const struct ss_slurm_args *a)
{
    char dir[PATH_MAX];
    if (r->resume[0]) {
        snprintf(r->run_dir, sizeof r->run_dir, "%s", r->resume);
    } else {
        if (s_job_key(a, "job.run_dir", dir, sizeof dir) != 0)
            return 2;
        if (dir[0] == '/')
            snprintf(r->run_dir, sizeof r->run_dir, "%s", dir);
        else
            snprintf(r->run_dir, sizeof r->run_dir, "%s/%s", r->cwd, dir);
    }
    return 0;
}

/* The job's run directory (s_run_dir_name()) into r->run_dir, created.
 * Returns 0, or 2 after the message. */
static int s_run_dir(struct s_run *r, const struct ss_slurm_args *a)
{
    if (s_run_dir_name(r, a) != 0)
        return 2;
    if (ss_mkdirs(r->run_dir) != 0)
        return s_err("cannot create the run directory %s", r->run_dir);
    return 0;
}

/* Write text to path (atomically). Returns 0, or 2 after the message. */
static int s_write(const char *path, const char *text)
{
    struct ss_fs_piece piece = {text, strlen(text)};
    char err[512];
    if (ss_fs_write_atomic(path, &piece, 1, err, sizeof err) != 0)
        return s_err("cannot write %s", path);
    return 0;
}

/* Run argv (no shell) and read its standard output into a string the
 * caller frees with ss_free() (ss_launch_capture); its standard error stays
 * ours. Returns NULL when it cannot be started. */
static char *s_output(char *const *argv)
{
    char *out = NULL;
    struct ss_launch_io io = {.out_fd = -1, .err_fd = -1, .who = "shadow-slurm"};
    if (ss_launch_capture(argv, &io, 0, &out) == 127) {
        ss_free(out);
        return NULL;
    }
    return out;
}

/* ---- --sbatch ---- */

/* Write RUN_DIR/shadow-slurm.sbatch, a script that runs this same command
 * (without --sbatch) in its allocation with exec, so that the early SIGTERM
 * Slurm sends the batch shell (B:) reaches the launcher; print it
 * (--dry-run) or submit it. Returns the exit status (sbatch's by exec). */
static int s_sbatch(struct s_run *r, const struct ss_slurm_args *a)
{
    char name[1024], script[PATH_MAX + 32], self[PATH_MAX + 16], host[256], path[PATH_MAX];
    char err[PATH_MAX + 1024];
    int rc = s_find_bin(r, a->bin, "shadow-ctl");
    if (rc)
        return rc;
    if (!r->resume[0] && !ss_path_test(r->cwd, a->job, 'f'))
        return s_err("no such job file: %s", a->job);
    if ((rc = s_run_dir_name(r, a)) != 0)
        return rc;
    if (r->resume[0])
        snprintf(name, sizeof name, "%s", strrchr(r->resume, '/') + 1);
    else if ((rc = s_job_key(a, "job.name", name, sizeof name)) != 0)
        return rc;
    snprintf(script, sizeof script, "%s/shadow-slurm.sbatch", r->run_dir);
    snprintf(self, sizeof self, "%s/shadow-slurm", r->here);
    char *text = ss_slurm_sbatch_text(name, r->run_dir, a->signal_before, r->cwd, self,
                                      a->again, a->n_again, err, sizeof err);
    if (!text)
        return s_err("%s", err);   /* before the run directory is made */
    if (ss_mkdirs(r->run_dir) != 0)
        rc = s_err("cannot create the run directory %s", r->run_dir);
    else
        rc = s_write(script, text);
    if (rc == 0 && a->dry_run)
        fputs(text, stdout);
    ss_free(text);
    if (rc || a->dry_run)
        return rc;
    if (ss_path_search(r->cwd, "sbatch", path, sizeof path) != 0)
        return s_err("sbatch is not on PATH on %s", s_host(host, sizeof host));
    printf("shadow-slurm: submitting %s: sbatch ", script);
    for (size_t i = 0; i < a->n_sbatch_args; i++)
        printf("%s%s", i ? " " : "", a->sbatch_args[i]);
    printf("\n");
    fflush(stdout);
    const char **argv = ss_calloc(a->n_sbatch_args + 3, sizeof *argv);
    argv[0] = "sbatch";
    memcpy(argv + 1, a->sbatch_args, a->n_sbatch_args * sizeof *argv);
    argv[a->n_sbatch_args + 1] = script;
    execvp(argv[0], (char **)argv);
    fprintf(stderr, "shadow-slurm: cannot run sbatch: %s\n", strerror(errno));
    ss_free(argv);
    return 127;
}

/* ---- inside an allocation ---- */

/* The nodes of the allocation, one per line of `scontrol show hostnames
 * LIST`, into *nodes (heap strings). Returns the count. */
static size_t s_nodes(const char *list, char ***nodes)
{
    char *argv[] = {"scontrol", "show", "hostnames", (char *)list, NULL};
    char *out = s_output(argv), *save = NULL;
    size_t n = 0;
    *nodes = NULL;
    for (char *l = out ? strtok_r(out, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
        *nodes = ss_realloc(*nodes, (n + 1) * sizeof **nodes);
        (*nodes)[n++] = ss_strdup(l);
    }
    ss_free(out);
    return n;
}

/* The address of node (its NodeAddr, else its name) as IP text into out,
 * resolved as the plan resolves a hosts file's HOST (IPv4 first). Returns
 * 0, or -1 when it does not resolve. */
static int s_node_addr(const char *node, char *out, size_t len)
{
    char *argv[] = {"scontrol", "-o", "show", "node", (char *)node, NULL};
    char *line = s_output(argv), why[256];
    char *addr = ss_slurm_node_addr(line ? line : "");
    struct sockaddr_storage sa;
    socklen_t sa_len;
    int rc = ss_plan_resolve(addr[0] ? addr : node, &sa, &sa_len, why, sizeof why);
    if (rc == 0) {
        const void *ip = sa.ss_family == AF_INET
                             ? (const void *)&((struct sockaddr_in *)&sa)->sin_addr
                             : (const void *)&((struct sockaddr_in6 *)&sa)->sin6_addr;
        rc = inet_ntop(sa.ss_family, ip, out, (socklen_t)len) ? 0 : -1;
    }
    ss_free(addr);
    ss_free(line);
    return rc;
}

/* The checks of the allocation and of what this host has. Returns 0, or 2
 * after the message. */
static int s_check_allocation(struct s_run *r, const struct ss_slurm_args *a)
{
    const char *id = getenv("SLURM_JOB_ID"), *list = getenv("SLURM_JOB_NODELIST");
    static const char *const need[] = {"srun", "scontrol"};
    char path[PATH_MAX], host[256];
    if (!id || !*id || !list || !*list)
        return s_err("not inside a Slurm allocation (SLURM_JOB_ID or SLURM_JOB_NODELIST is "
                     "not set): run it inside salloc or sbatch: salloc -N 2 --exclusive %s %s",
                     r->as, a->job);
    for (size_t i = 0; i < 2; i++)
        if (ss_path_search(r->cwd, need[i], path, sizeof path) != 0)
            return s_err("%s is not on PATH on %s: shadow-slurm needs the Slurm client commands",
                         need[i], s_host(host, sizeof host));
    if (!r->resume[0] && !ss_path_test(r->cwd, a->job, 'f'))
        return s_err("no such job file: %s", a->job);
    return s_find_bin(r, a->bin, "shadow-ps");
}

/* Run shadow-launch (exec), or with --dry-run print the hosts file's node
 * lines and the command, quoted. Returns the exit status (when exec fails,
 * or 0 after --dry-run). */
static int s_run_launch(const char *launcher, const struct ss_slurm_args *a,
                        const struct s_run *r, const char *hosts, const char *hosts_text)
{
    char **argv = ss_slurm_launch_argv(launcher, a, r->bin, hosts,
                                       r->resume[0] ? r->run_dir : NULL);
    if (a->dry_run) {
        for (const char *l = hosts_text; *l;) {
            size_t n = strcspn(l, "\n");
            if (l[0] != '#')
                printf("%.*s\n", (int)n, l);
            l += n + (l[n] == '\n');
        }
        for (size_t i = 0; argv[i]; i++) {
            char *q = ss_slurm_quote(argv[i]);
            printf("%s ", q);
            ss_free(q);
        }
        printf("\n");
        ss_free(argv);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    fflush(NULL);
    execv(launcher, argv);
    fprintf(stderr, "shadow-slurm: cannot run %s: %s\n", launcher, strerror(errno));
    ss_free(argv);
    return errno == ENOENT ? 127 : 126;
}

/* Write RUN_DIR/slurm-hosts from the allocation's nodes, say so, then run
 * shadow-launch (or print it: --dry-run). Returns the exit status. */
static int s_launch(struct s_run *r, const struct ss_slurm_args *a)
{
    const char *id = getenv("SLURM_JOB_ID"), *list = getenv("SLURM_JOB_NODELIST");
    char **nodes, **addrs, hosts[PATH_MAX + 16], launcher[PATH_MAX + 16], err[256];
    size_t n = s_nodes(list, &nodes), ps = 0;
    int rc = 0;
    addrs = ss_calloc(n + 1, sizeof *addrs);
    if (n == 0)
        rc = s_err("scontrol show hostnames '%s' named no node", list);
    for (size_t i = 0; i < n && !rc; i++) {
        addrs[i] = ss_malloc(SS_PLAN_ADDR_MAX);
        if (s_node_addr(nodes[i], addrs[i], SS_PLAN_ADDR_MAX) != 0)
            rc = s_err("node %s: its address (NodeAddr of 'scontrol show node %s') does not "
                       "resolve to an IP address here", nodes[i], nodes[i]);
    }
    if (!rc && a->ps_nodes && ss_slurm_ps_nodes(a->ps_nodes, n, &ps, err, sizeof err) != 0)
        rc = s_err("%s", err);
    if (!rc)
        rc = s_run_dir(r, a);
    snprintf(hosts, sizeof hosts, "%s/slurm-hosts", r->run_dir);
    char *text = rc ? NULL : ss_slurm_hosts_text(id, a->ps_nodes, ps, (const char *const *)nodes,
                                                 (const char *const *)addrs, n);
    if (text && !(rc = s_write(hosts, text))) {
        FILE *note = a->note_stderr ? stderr : stdout;
        fprintf(note, "shadow-slurm: Slurm job %s, %zu node(s):", id, n);
        for (size_t i = 0; i < n; i++)
            fprintf(note, " %s", nodes[i]);
        fprintf(note, " (hosts file %s)\n", hosts);
        snprintf(launcher, sizeof launcher, "%s/shadow-launch", r->here);
        rc = s_run_launch(launcher, a, r, hosts, text);
    }
    ss_free(text);
    for (size_t i = 0; i < n; i++) {
        ss_free(nodes[i]);
        ss_free(addrs[i]);
    }
    ss_free(nodes);
    ss_free(addrs);
    return rc;
}

/* --resume RUN_DIR: the run directory made absolute into r->resume, and
 * the --ps-nodes its hosts file records. Returns 0, or 2 after the
 * message. */
static int s_resume(struct s_run *r, struct ss_slurm_args *a, char **ps_nodes)
{
    char hosts[PATH_MAX + 16];
    FILE *f;
    if (ss_path_dir(r->cwd, a->resume, r->resume, sizeof r->resume) != 0)
        return s_err("--resume %s: no such run directory", a->resume);
    snprintf(hosts, sizeof hosts, "%s/slurm-hosts", r->resume);
    if (!ss_path_test(r->cwd, hosts, 'f') || !(f = fopen(hosts, "r")))
        return s_err("--resume %s: no slurm-hosts there (not a run directory of a job started "
                     "by shadow-slurm)", a->resume);
    char *text = ss_strdup("");
    size_t len = 0, n;
    char chunk[4096];
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        text = ss_realloc(text, len + n + 1);
        memcpy(text + len, chunk, n);
        len += n;
        text[len] = '\0';
    }
    fclose(f);
    *ps_nodes = ss_slurm_hosts_ps_nodes(text);
    ss_free(text);
    a->ps_nodes = (*ps_nodes)[0] ? *ps_nodes : NULL;
    if (a->resume_err)
        return s_err("%s", a->resume_err);
    return 0;
}

/* shadow-ctl slurm --here DIR [--as NAME] -- ARGS...: the wrapper's
 * options, then shadow-slurm's own arguments. */
int ctl_slurm_main(int argc, char **argv)
{
    struct s_run *r = ss_calloc(1, sizeof *r);
    struct ss_slurm_args a = {0};
    char err[1024], *ps_nodes = NULL;
    int i = 1, rc;
    for (; i + 1 < argc && strcmp(argv[i], "--"); i += 2) {
        if (!strcmp(argv[i], "--here"))
            r->here = argv[i + 1];
        else if (!strcmp(argv[i], "--as"))
            r->as = argv[i + 1];
        else
            break;
    }
    if (!r->here || i >= argc || strcmp(argv[i], "--")) {
        fprintf(stderr, "shadow-ctl: usage: slurm --here DIR [--as NAME] -- [shadow-slurm "
                "arguments] (scripts/shadow-slurm runs it)\n");
        ss_free(r);
        return 2;
    }
    if (!r->as)
        r->as = "shadow-slurm";
    (void)ss_path_cwd(r->cwd, sizeof r->cwd);   /* "/" when it has no name */
    if (ss_slurm_parse(&a, argc - i - 1, argv + i + 1, err, sizeof err) != 0)
        rc = s_err("%s", err);
    else if (a.help || a.version)
        rc = a.help ? (s_usage(stdout), 0) : (ss_version_print(stdout, "shadow-slurm"), 0);
    else if (a.resume && (rc = s_resume(r, &a, &ps_nodes)) != 0)
        ;
    else if (a.usage_error)
        rc = (s_usage(stderr), 2);
    else if (a.sbatch)
        rc = s_sbatch(r, &a);
    else if ((rc = s_check_allocation(r, &a)) == 0)
        rc = s_launch(r, &a);
    ss_slurm_args_fini(&a);
    ss_free(ps_nodes);
    ss_free(r);
    return rc;
}
