/* ss_rundir.c - joining the parts of saves in a run directory (see
 * ss_rundir.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ss_fs.h"
#include "ss_rundir.h"
#include "ss_super.h"

static int s_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Move every entry of from into to (rename: mv -f), or only the names ending
 * in suffix when it is not NULL. */
static void s_move_all(const char *from, const char *to, const char *suffix)
{
    DIR *d = opendir(from);
    struct dirent *e;
    char a[4096], b[4096];
    size_t sl = suffix ? strlen(suffix) : 0;
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (suffix && (l < sl || strcmp(e->d_name + l - sl, suffix) != 0))
            continue;
        snprintf(a, sizeof a, "%s/%s", from, e->d_name);
        snprintf(b, sizeof b, "%s/%s", to, e->d_name);
        if (rename(a, b) != 0 && s_is_dir(b)) {  /* a folder over a folder: replace it */
            ss_fs_remove_tree(b);
            (void)rename(a, b);
        }
    }
    closedir(d);
}

/* Every PREFIX* folder of run_dir: call fn(run_dir, its path, arg). */
static void s_each(const char *run_dir, const char *prefix,
                   void (*fn)(const char *run_dir, const char *path, void *arg), void *arg)
{
    DIR *d = opendir(run_dir);
    struct dirent *e;
    char path[4096];
    size_t pl = strlen(prefix);
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, pl) != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", run_dir, e->d_name);
        fn(run_dir, path, arg);
    }
    closedir(d);
}

/* model.new-ID: its .ckpt files join model/ when ID is model/'s save; dropped */
static void s_model_part(const char *run_dir, const char *path, void *arg)
{
    const char *id = arg;
    char want[4096], model[4096];
    if (!s_is_dir(path))
        return;
    snprintf(want, sizeof want, "%s/model.new-%s", run_dir, id);
    snprintf(model, sizeof model, "%s/model", run_dir);
    if (id[0] && strcmp(path, want) == 0)
        s_move_all(path, model, ".ckpt");
    ss_fs_remove_tree(path);
}

void ss_rundir_merge_model(const char *run_dir)
{
    char model[4096], id[128];
    snprintf(model, sizeof model, "%s/model", run_dir);
    ss_super_manifest(model, "save_id", id, sizeof id);
    s_each(run_dir, "model.new-", s_model_part, id);
}

static void s_remove(const char *run_dir, const char *path, void *arg)
{
    (void)run_dir;
    (void)arg;
    ss_fs_remove_tree(path);
}

int ss_rundir_merge_jobckpt(const char *run_dir, char *msg, size_t msg_len)
{
    char g[4096], jobckpt[4096], part[4096], id[128], have[128], err[256];
    struct ss_super_ckpt ck;
    int rc = 0;
    msg[0] = '\0';
    snprintf(g, sizeof g, "%s/jobckpt.gathered", run_dir);
    snprintf(jobckpt, sizeof jobckpt, "%s/jobckpt", run_dir);
    if (s_is_dir(g)) {
        ss_super_manifest(g, "save_id", id, sizeof id);
        ss_super_manifest(jobckpt, "save_id", have, sizeof have);
        if (id[0] && strcmp(id, have) != 0) {
            /* the committed folder and every host's part of its save */
            snprintf(part, sizeof part, "%s/jobckpt.new-%s", run_dir, id);
            if (ss_mkdirs(part) == 0)
                s_move_all(g, part, NULL);
            ss_super_ckpt_read(part, &ck);
            if (ck.complete) {
                if (ss_fs_replace_dir(part, jobckpt, err, sizeof err) != 0)
                    snprintf(msg, msg_len, "%s: %s", id, err), rc = 1;
            } else {
                snprintf(msg, msg_len, "%s lacks%s", id, ck.missing);
                rc = 1;
            }
        }
        ss_fs_remove_tree(g);
    }
    /* a jobckpt/ committed on a host that shares RUN_DIR: the others' parts join it */
    ss_super_manifest(jobckpt, "save_id", id, sizeof id);
    snprintf(part, sizeof part, "%s/jobckpt.new-%s", run_dir, id);
    if (id[0] && s_is_dir(part))
        s_move_all(part, jobckpt, NULL);
    s_each(run_dir, "jobckpt.new-", s_remove, NULL);
    return rc;
}

/* Append name to out as a line unless it is there already; count it. */
static void s_add_name(char *out, size_t len, size_t *n, const char *name)
{
    size_t at = strlen(out), nl = strlen(name);
    for (const char *p = out; *p;) {
        const char *e = strchr(p, '\n');
        if ((size_t)(e - p) == nl && strncmp(p, name, nl) == 0)
            return;
        p = e + 1;
    }
    if (at + nl + 2 > len)
        return;
    memcpy(out + at, name, nl);
    out[at + nl] = '\n';
    out[at + nl + 1] = '\0';
    (*n)++;
}

size_t ss_rundir_resume_files(const char *dir, const struct ss_rundir_proc *procs, size_t n,
                              char *out, size_t out_len)
{
    char name[128], key[64], val[32];
    size_t count = 0;
    out[0] = '\0';
    s_add_name(out, out_len, &count, "MANIFEST");
    for (size_t i = 0; i < n; i++) {
        const struct ss_rundir_proc *p = &procs[i];
        if (!strcmp(p->role, "trainer")) {
            snprintf(name, sizeof name, "trainer-%d.state", p->index);
            s_add_name(out, out_len, &count, name);
            continue;
        }
        snprintf(key, sizeof key, "%s_shards", p->role);
        ss_super_manifest(dir, key, val, sizeof val);
        int saved = atoi(val);
        if (saved == p->count) {
            snprintf(name, sizeof name, "%s-%d.ckpt", p->role, p->index);
            s_add_name(out, out_len, &count, name);
            continue;
        }
        for (int j = 0; j < saved; j++) {
            snprintf(name, sizeof name, "%s-%d.ckpt", p->role, j);
            s_add_name(out, out_len, &count, name);
        }
    }
    return count;
}
