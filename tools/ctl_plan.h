/* ctl_plan.h - shadow-ctl plan: where a launcher runs each process of a job
 * and at which endpoint (common/ss_plan.h does the work).
 *
 * scripts/shadow-launch calls it twice: before it checks the hosts (how
 * many free ports each must find), and after, with the ports found. The
 * output is plain words a line, read with `read -r`, never evaluated. */
#ifndef CTL_PLAN_H
#define CTL_PLAN_H

/* shadow-ctl plan JOB.yaml [--set K=V]... [--hosts FILE] [--exec MODE]
 * [--fixed-ports] [--base-port P] [--ports H=P,P,...]... [--complete]: print
 * the plan (--complete: fail unless every endpoint is known),
 * one line each:
 *   transport ipc|tcp
 *   host H TARGET ADDR NPORTS       (H from 0, in hosts-file order)
 *   embedding|sync|trainer|admin K H ENDPOINT   ("-" while a port is unknown)
 * argv[0] is "plan". Returns the exit status: 0, 2 on usage, config or
 * hosts-file errors (one line on stderr naming the file and line). */
int ctl_plan_main(int argc, char **argv);

#endif
