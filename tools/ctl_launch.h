/* ctl_launch.h - shadow-ctl's commands for launchers: "ports" and "report".
 *
 * Both need no job file and talk to no PS: the launcher calls them so that
 * it neither guesses ports nor assembles JSON itself; and "launch", the
 * launcher itself. */
#ifndef CTL_LAUNCH_H
#define CTL_LAUNCH_H

/* shadow-ctl ports N [--host ADDR] [--range LO-HI]: print N distinct TCP (ADDR IPv4 or IPv6)
 * ports that can be bound on ADDR (default 127.0.0.1), one per line. It binds
 * all N at once (so they differ), then closes them: a port is free when
 * printed, not reserved. Ports are drawn at random below the kernel's
 * ephemeral range (outgoing connections take those) unless --range says
 * otherwise. argv[0] is "ports". Returns the exit status: 0, 1 when not
 * enough ports could be bound (the message says why), 2 on usage errors. */
int ctl_ports_main(int argc, char **argv);

/* shadow-ctl report RUN_DIR [--job NAME] [--sync ALGO] [--trainers N]
 * [--wall-s S] [--restarts FILE] [--logs DIR] [--quiet] [--if-error]: read
 * RUN_DIR/result-trainer-R.json for R in 0..N-1 (N: every file from 0 on
 * when not given), write RUN_DIR/result.json (job totals, trainer 0's
 * evaluation of the output model, the PS restarts listed one JSON object a
 * line in FILE, every trainer's own figures) and print the job summary.
 * argv[0] is "report". Every file is read through ss_json: a result that
 * is not JSON, or lacks examples or eps, is an error naming the file and
 * where or which field; a line of FILE that is not JSON is left out with a
 * warning. --if-error (a launcher's failed job): write result.json, quietly,
 * only when trainer 0's result has an "error" member (its output model was
 * not saved: a full disk), else nothing and return 3. Returns 0, 1 when a
 * result is missing, malformed or cannot be written (the message names the
 * file), 2 on usage errors (--wall-s must be a number), 3 as said. */
int ctl_report_main(int argc, char **argv);

/* shadow-ctl preflight DIR JOB.yaml TOKEN --bin BIN [--ckpt-dir CK] [--ports N
 * [--host ADDR] [--span S]]: what a launcher checks and prepares on each host
 * before it starts anything there (run there: locally, over ssh or srun).
 * Creates the run directory DIR; removes the recovery checkpoints in
 * CK/recovery (a PS restarted in this launch must not restore an earlier
 * one's rows) and DIR's result-trainer-*.json; prints the token of the launch
 * that last used DIR (its .launch-token, "none"), and when it is not TOKEN
 * (DIR is the host's own, not the launcher's) removes DIR's job checkpoint
 * folders (jobckpt*: an earlier launch's parts must not join this one's);
 * checks JOB and BIN/shadow-ps are there; prints the version line of this
 * build as shadow-ps --version does; then, with --ports, N free ports as
 * `ports` does. argv[0] is "preflight". Returns 0, 2 on usage errors, 3 when
 * DIR cannot be created, 4 without JOB, 5 without BIN/shadow-ps, 6 when the
 * ports cannot be found (each with a message on stderr).
 * With --why RC [--exec MODE] [--target T] it checks nothing: run where the
 * launcher runs, with the arguments the preflight had, it prints the line
 * that says what a preflight that ended with RC on host T (reached by MODE,
 * default local: common/ss_backend.h) needs fixed (the meaning of 3-6, of
 * 127: no shadow-ctl there, and of the backend's own failure, ssh's 255),
 * else "exit RC". Returns 0, 2 on usage errors. */
int ctl_preflight_main(int argc, char **argv);

/* shadow-ctl launch SCRIPT [ARG]...: the launcher (common/ss_launch.h):
 * run the job of the command line ARG..., checked by common/ss_launch_opts.h
 * (SCRIPT: the path scripts/shadow-launch was run by, $0: its folder's
 * ../bin may hold the binaries, and the command that resumes the job names
 * it). --help and --version print the launcher's text. argv[0] is
 * "launch". Returns the launcher's exit status (shadow-launch --help). */
int ctl_launch_main(int argc, char **argv);

struct ss_cfg;

/* shadow-ctl -c JOB.yaml check-data [KEY...]: check that the input files of
 * KEY (data.train, data.eval, data.valid; default: each one the job sets)
 * are there, by the trainer's own rule (tr_reader_check_inputs: globs, lists,
 * "-" for standard input in data.eval only), so that a launcher stops before
 * any process starts. A missing one is named on stderr as "KEY: cannot read
 * ENTRY (why)". argv[0] is "check-data". Returns 0, 1 when an input is
 * missing or unreadable, 2 on usage errors (an unknown KEY). */
int ctl_check_data_main(const struct ss_cfg *cfg, int argc, char **argv);

#endif
