/* ctl_plan.h - shadow-ctl plan: where a launcher runs each process of a job
 * and at which endpoint (common/ss_plan.h does the work).
 *
 * scripts/shadow-launch calls it twice: before it checks the hosts (how
 * many free ports each must find), and after, with the ports found. The
 * output is plain words a line, read with `read -r`, never evaluated. */
#ifndef CTL_PLAN_H
#define CTL_PLAN_H

/* shadow-ctl plan JOB.yaml [--set K=V]... [--hosts FILE] [--exec MODE]
 * [--fixed-ports] [--base-port P] [--ports H=P,P,...]... [--complete]
 * [--launch [--eval-only]] [--check-data all|eval]: print the plan (--complete: fail
 * unless every endpoint is known), one line each:
 *   transport ipc|tcp
 *   host H TARGET ADDR NPORTS       (H from 0, in hosts-file order)
 *   embedding|sync|trainer|admin K H ENDPOINT   ("-" while a port is unknown)
 * --launch first prints what the launcher needs of the job file, so that it
 * reads it through this one call, as "config KEY VALUE" lines (VALUE the
 * rest of the line, perhaps empty; a list's entries joined by commas):
 *   run_dir DIR                 job.run_dir, absolute
 *   version TEXT                what shadow-ps --version prints (this build's)
 *   job.name, cluster.embedding.count, cluster.sync.count,
 *   cluster.trainers.count, job.max_ps_restarts, job.allow_trainer_loss,
 *   checkpoint.dir, data.labels, data.eval, metrics.port
 *                               as `shadow-ctl config get` prints them
 *   eval_stdin 0|1              data.eval is "-" (standard input)
 *   algo NAME                   the sync algorithm, or "COMPONENT:ALGO,..."
 *   traits WORDS                what the job's sync needs (sync-traits)
 *   port_span N                 ports in a row a tcp PS takes (ps.threads; 1 on ipc)
 *   metrics_ports_set 0|1       the job file gives metrics.ports itself
 *   admin_token 0|1             the launcher makes RUN_DIR/admin.token the
 *                               admin secret (a local job without CURVE or one)
 *   handshake_token 0|1         ... and the handshake's (no security.token_file)
 * With --launch and metrics.port set (metrics.ports not), every process's
 * Prometheus port too, once known (free ports after the plan's own on each
 * host, counted in its NPORTS; or metrics.port + index with --fixed-ports,
 * --base-port or over 64 processes): "metrics ROLE K PORT URL" lines (port 0,
 * URL "-": the process does not run: a sync PS its sync does not use, a
 * trainer past 0 with --eval-only), then "config metrics_note TEXT" (what
 * the launcher says of them) and "config metrics_free 0|1".
 * With --launch, once every endpoint is known, last the settings every
 * process of the launch gets on top of the job file, "set KEY=VALUE" lines:
 * cluster.embedding, cluster.sync, cluster.trainers and (unless --eval-only,
 * or none) cluster.trainer_admin as YAML flow lists (an IPv6 endpoint
 * quoted); with admin_token, security.admin_token_file RUN_DIR/admin.token
 * (and security.token_file with handshake_token); with free metrics ports,
 * metrics.ports (0 for a process that does not run).
 * --check-data: with --exec local, check the data files by the trainer's rule
 * (every data key, or data.eval alone: ctl_check_data_main()) after printing.
 * argv[0] is "plan". Returns the exit status: 0, 2 on usage, config or
 * hosts-file errors (one line on stderr naming the file and line), 3 when a
 * data file is missing or unreadable (named on stderr). */
int ctl_plan_main(int argc, char **argv);

/* shadow-ctl resolve NAME: print the address a hosts file's HOST resolves to
 * (ss_plan_resolve(): its first IPv4 address, else its first IPv6 one), as
 * text; an IP address prints as itself. For scripts that write a hosts
 * file's addr= (shadow-ctl slurm calls ss_plan_resolve() itself). argv[0] is
 * "resolve". Returns 0, 1 when it does not resolve (why on stderr), 2 on
 * usage. */
int ctl_resolve_main(int argc, char **argv);

#endif
