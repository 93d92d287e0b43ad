/* ss_launch_end.c - the end of a launched job that finished (see
 * ss_launch_end.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ss_backend.h"
#include "ss_fs.h"
#include "ss_json.h"
#include "ss_launch_end.h"
#include "ss_launch_proc.h"
#include "ss_path.h"

/* Run argv with its output (both streams) into out_path when given, else
 * ours; wait. Returns its exit status (128 + N for signal N, 127 when it
 * cannot run). */
static int s_run(char *const *argv, const char *out_path)
{
    int fd = -1;
    if (out_path && (fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        return 127;
    struct ss_launch_io io = {.out_fd = fd, .err_fd = fd, .who = SS_LAUNCH_WHO};
    int rc = ss_launch_run(argv, &io);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Print the lines of path that start with prefix, less skip chars, each
 * after lead (the first) or on its own line (the others): as the shell's
 * $(sed -n 's/^PREFIX//p') inside one echo. Returns how many. */
static int s_print_lines(const char *path, const char *prefix, size_t skip, const char *lead)
{
    FILE *fp = fopen(path, "r");
    char line[8192];
    int n = 0;
    if (!fp)
        return 0;
    while (fgets(line, sizeof line, fp)) {
        if (strncmp(line, prefix, strlen(prefix)) != 0)
            continue;
        line[strcspn(line, "\n")] = '\0';
        printf("%s%s", n++ ? "\n" : lead ? lead : "", line + skip);
        if (!lead)
            printf("\n");
    }
    fclose(fp);
    if (n && lead)
        printf("\n");
    return n;
}

/* shadow-ctl report: result.json and the summary. Returns its status. */
static int s_report(const struct ss_launch_data *d, const struct ss_launch_end *e)
{
    const char *run_dir = ss_launch_data_get(d, "run_dir"), *logs = ss_launch_data_get(d, "logs");
    char ctl[4096], trainers[16], restarts[4096], lost[4096], scored[4096];
    char *argv[32];
    int n = 0;
    snprintf(ctl, sizeof ctl, "%s/shadow-ctl", ss_launch_data_get(d, "bin"));
    snprintf(trainers, sizeof trainers, "%d", e->n_run);
    snprintf(restarts, sizeof restarts, "%s/ps-restarts.jsonl", run_dir);
    snprintf(lost, sizeof lost, "%s/trainers-lost.jsonl", run_dir);
    char *head[] = {ctl, "report", (char *)run_dir, "--job", (char *)e->job_name, "--sync",
                    (char *)ss_launch_data_get(d, "algo"), "--trainers", trainers, "--wall-s",
                    (char *)e->wall_s, "--restarts", restarts, "--lost", lost, "--logs",
                    (char *)logs};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        argv[n++] = head[i];
    if (e->resumed_from) {
        argv[n++] = "--resumed-from";
        argv[n++] = (char *)e->resumed_from;
    }
    /* --eval-only and --predict trained nothing: a scoring summary */
    if (ss_launch_data_has(d, "eval_only")) {
        snprintf(scored, sizeof scored, "%s/model", ss_launch_data_get(d, "eval_only"));
        argv[n++] = "--scored";
        argv[n++] = scored;
    }
    argv[n] = NULL;
    return s_run(argv, NULL);
}

/* A training job's plots, when gnuplot is there; their line. */
static void s_plots(const struct ss_launch_data *d, const struct ss_launch_end *e)
{
    const char *bayes = getenv("SHADOW_PLOT_BAYES");
    char log[4096];
    char *argv[6];
    int n = 0;
    if (!e->plot || ss_launch_data_has(d, "eval_only")
        || ss_path_search(".", "gnuplot", NULL, 0) != 0)
        return;
    argv[n++] = (char *)e->plot;
    if (bayes && *bayes) {
        argv[n++] = "--bayes";
        argv[n++] = (char *)bayes;
    }
    argv[n++] = (char *)ss_launch_data_get(d, "run_dir");
    argv[n] = NULL;
    snprintf(log, sizeof log, "%s/plot.log", ss_launch_data_get(d, "logs"));
    if (s_run(argv, log) != 0)
        return;
    if (s_print_lines(log, "shadow-plot: wrote ", 19, "   plots             ") == 0)
        printf("   plots             \n");
}

int ss_launch_end_report(const struct ss_launch_data *d, const struct ss_launch_end *e)
{
    char log[4096];
    struct stat st;
    const char *jobckpt = ss_launch_data_get(d, "jobckpt");
    if (s_report(d, e) != 0) {
        ss_launch_err("logs are in %s\n", ss_launch_data_get(d, "logs"));
        return 1;
    }
    /* --predict: trainer 0's summary of the predictions it wrote */
    if (!strcmp(ss_launch_data_get(d, "predict"), "1")) {
        snprintf(log, sizeof log, "%s/trainer-0.log", ss_launch_data_get(d, "logs"));
        s_print_lines(log, "trainer 0 predict", 10, NULL);
    }
    s_plots(d, e);
    fflush(stdout);
    /* the job is done: its job checkpoint is of no use any more */
    if (!ss_launch_data_has(d, "eval_only") && jobckpt[0] && lstat(jobckpt, &st) == 0)
        ss_fs_remove_tree(jobckpt);
    return 0;
}

/* The output model's save failed after an earlier model's: say which epoch
 * the model folder holds and which one was not saved (result.json's
 * model_epoch and best_epoch). */
static void s_say_older_kept(const char *run_dir)
{
    char path[4096], err[256], best[64] = "";
    json_t *o = NULL;
    uint64_t held = 0, kept = 0;
    snprintf(path, sizeof path, "%s/result.json", run_dir);
    if (ss_json_load(path, &o, NULL, err, sizeof err) != 0 ||
        ss_json_u64(o, "model_epoch", &held, "result.json", err, sizeof err) != 0)
        held = 0;
    if (o && ss_json_u64(o, "best_epoch", &kept, "result.json", err, sizeof err) == 0 &&
        kept != held)
        snprintf(best, sizeof best, " (the better model of epoch %llu could not be saved)",
                 (unsigned long long)kept);
    json_decref(o);
    ss_launch_err("the output model was not saved: %s/model holds an earlier model, of epoch "
                  "%llu%s; the error and the figures obtained are in %s/result.json\n", run_dir,
                  (unsigned long long)held, best, run_dir);
}

void ss_launch_end_unsaved(const struct ss_launch_data *d, const char *job_name,
                           int trainers_failed)
{
    const char *run_dir = ss_launch_data_get(d, "run_dir");
    char ctl[4096], restarts[4096], lost[4096], result[4096];
    snprintf(result, sizeof result, "%s/result-trainer-0.json", run_dir);
    if (!trainers_failed || access(result, F_OK) != 0)
        return;
    snprintf(ctl, sizeof ctl, "%s/shadow-ctl", ss_launch_data_get(d, "bin"));
    snprintf(restarts, sizeof restarts, "%s/ps-restarts.jsonl", run_dir);
    snprintf(lost, sizeof lost, "%s/trainers-lost.jsonl", run_dir);
    char *argv[] = {ctl, "report", (char *)run_dir, "--if-error", "--job", (char *)job_name,
                    "--sync", (char *)ss_launch_data_get(d, "algo"), "--restarts", restarts,
                    "--lost", lost, NULL};
    int rc = s_run(argv, NULL);
    if (rc == 0)
        ss_launch_err("the output model was not saved; the error and the "
                      "figures obtained (the eval, if it had finished) are in %s/result.json\n",
                      run_dir);
    else if (rc == 4)  /* shadow-ctl report: an error after the model was saved */
        ss_launch_err("the output model was saved in %s/model, but the job ended with an "
                      "error; the error and the figures obtained are in %s/result.json\n",
                      run_dir, run_dir);
    else if (rc == 5)  /* shadow-ctl report: the save failed, an earlier model is there */
        s_say_older_kept(run_dir);
}
