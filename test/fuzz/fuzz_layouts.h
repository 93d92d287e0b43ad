/* fuzz_layouts.h - the data layouts the parse and reader harnesses use:
 * real job-file layouts made by ss_cfg_load() from --set overrides, covering
 * every format, every csv column role, several delimiters and both header
 * modes. An input's first byte picks one (modulo FUZZ_N_LAYOUTS); seeds name
 * them by index, so append new layouts at the end. */
#ifndef FUZZ_LAYOUTS_H
#define FUZZ_LAYOUTS_H

#include <stdlib.h>

#include "fuzz_util.h"
#include "ss_cfg.h"

/* The layouts, as --set overrides (NULL-terminated). */
static const char *const s_layout_sets[][6] = {
    {"data.format=criteo_tsv", NULL},
    {"data.format=csv", "data.columns=label,dense*2,categorical*3,multi,ignore", NULL},
    {"data.format=csv", "data.columns=[ignore, multi, label, dense]", "data.delimiter=tab",
     "data.header=true", "data.multi_separator=;", NULL},
    {"data.format=libsvm", NULL},
    {"data.format=libffm", "data.fields=4", NULL},
    {"data.format=libffm", "data.fields=1", NULL},
    {"data.format=csv", "data.columns=multi,label", "data.delimiter=;",
     "data.multi_separator=,", NULL},
    {"data.format=csv", "data.columns=label,dense*13,categorical*26", "data.delimiter=tab",
     NULL},
    {"data.format=libsvm", "data.labels=false", NULL},
    {"data.format=libffm", "data.fields=4", "data.labels=false", NULL},
};
#define FUZZ_N_LAYOUTS (sizeof s_layout_sets / sizeof s_layout_sets[0])

static struct ss_data_cfg fuzz_layouts[FUZZ_N_LAYOUTS];  /* filled by fuzz_load_layouts() */

static void fuzz_load_layouts(void)
{
    struct ss_cfg *cfg = calloc(1, sizeof *cfg);
    FUZZ_CHECK(cfg, "out of memory");
    for (size_t i = 0; i < FUZZ_N_LAYOUTS; i++) {
        char err[512];
        size_t n = 0;
        while (s_layout_sets[i][n])
            n++;
        int rc = ss_cfg_load(cfg, NULL, s_layout_sets[i], n, err, sizeof err);
        FUZZ_CHECK(rc == 0, "layout %zu: %s", i, err);
        fuzz_layouts[i] = cfg->data;
    }
    free(cfg);
}

#endif
