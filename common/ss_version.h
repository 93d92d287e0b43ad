/* ss_version.h - the version and git revision built into every binary, and
 * the answer to --version and --help.
 *
 * The Makefile compiles ss_version.c with -DSS_VERSION (the VERSION file)
 * and -DSS_GIT_REV (git rev-parse --short=12 HEAD, "-dirty" when the tree
 * had changes; "unknown" when built without git), and rebuilds it when
 * either changes. Thread: all functions are thread-safe. */
#ifndef SS_VERSION_H
#define SS_VERSION_H

#include <stdio.h>

/* The release version, e.g. "0.1.0" ("unknown" if the build gave none).
 * Static string. */
const char *ss_version(void);

/* The git revision built, e.g. "8b78f82c1a2b" or "8b78f82c1a2b-dirty", or
 * "unknown". Static string. */
const char *ss_git_rev(void);

/* Print "PROG VERSION (git REV)" and a newline to out: the --version text
 * of every binary. */
void ss_version_print(FILE *out, const char *prog);

/* What shadow-ps, shadow-trainer and shadow-ctl do when their argument
 * parser returned parsed, not 0: 3 (--version) prints the version line to
 * stdout, 1 (--help) calls usage(stdout), 2 (a usage error the parser has
 * reported) calls usage(stderr). Returns the exit status: 0 after --version
 * or --help, 2 after a usage error. */
int ss_version_or_usage(int parsed, const char *prog, void (*usage)(FILE *out));

#endif
