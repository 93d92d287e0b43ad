/* t_data.h - where the unit tests find their data files: $SS_DATA_DIR
 * (default ../shared/data, the shared folder beside the clone), else the copy
 * in test/data (test/data/README). A file in neither fails the test: a check
 * of a file that is not there would compare nothing. Include after
 * <cmocka.h>. */
#ifndef T_DATA_H
#define T_DATA_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The path of data file rel ("criteo/criteo_train_head10k.tsv"), written
 * into buf (len bytes): in $SS_DATA_DIR (default ../shared/data), else in
 * test/data. Returns buf, or fails the test (cmocka's fail_msg) when neither
 * folder has a readable rel. */
static inline const char *t_data_file(const char *rel, char *buf, size_t len)
{
    const char *dir = getenv("SS_DATA_DIR");
    const char *dirs[] = {dir && *dir ? dir : "../shared/data", "test/data"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(buf, len, "%s/%s", dirs[i], rel);
        if (access(buf, R_OK) == 0)
            return buf;
    }
    fail_msg("%s: in neither %s nor test/data (the repository has a copy)", rel, dirs[0]);
    return NULL;
}

#endif
