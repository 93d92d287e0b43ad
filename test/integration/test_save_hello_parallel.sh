#!/usr/bin/env bash
# The end-of-job save's HELLOs go out with its requests, to every PS at
# once: a PS that answers neither (frozen) delays no other PS's save. Here
# embedding PS 0 alone is frozen (SIGSTOP) before the save begins, and PS 1
# must have written its checkpoint well before the trainer gives PS 0's
# first try up (6 x limits.request_timeout_ms); PS 0 is then let go and the
# job must save a whole model and exit 0. Before, the trainer waited for PS
# 0's HELLO answer before it said HELLO to PS 1, so PS 1 was asked only once
# PS 0's try had timed out.
#
# No race: the sync PS (s-easgd) is frozen while the trainer trains, so the
# trainer, its pushes acknowledged, waits in the segment's final sync
# (sync.timeout_ms 30 s) until the sync PS is let go; PS 0 is frozen during
# that wait, when nothing more is asked of it before the save.
. "$(dirname "$0")/lib.sh"
ROWS=200000
"$BIN/shadow-datagen" --rows $ROWS --seed 9 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen
# a try is given up 6 x 1000 ms (and a last look) after it was sent
make_job 2 1 1 "data:" "  train: [$T/train.tsv]" \
    "trainer:" "  workers: 1" "  epochs: 1" "sync:" "  algorithm: s-easgd" "  timeout_ms: 30000" \
    "limits:" "  request_timeout_ms: 1000" "  recovery_timeout_ms: 30000"
LOG=$T/run/logs/trainer-0.log
launch >"$T/launch.log" 2>&1 &
LP=$!; PIDS+=("$LP")
wait_log "$LOG" "training:" 30
S0=$(ps_pid sync 0) || fail "no sync PS"
P0=$(ps_pid embedding 0) || fail "no PS 0"
kill -STOP "$S0"
wait_log "$LOG" "pushes acknowledged" 60
grep -q "final sync complete" "$LOG" && skip "the final sync was done before the sync PS's freeze landed (training took 50 ms?)"
kill -STOP "$P0"
grep -q "final sync complete" "$LOG" && fail "the final sync completed with its sync PS frozen"
kill -CONT "$S0"
wait_log "$LOG" "embedding PS 0 .*did not checkpoint.*asking again" 30
given_up=$(log_ms "embedding PS 0 .*did not checkpoint.*asking again" "$LOG")
written=$(log_ms "checkpoint written to" "$T/run/logs/ps-embedding-1.log")
kill -CONT "$P0"
[ -n "$written" ] && ((written + 3000 < given_up)) ||
    fail "PS 1 wrote its checkpoint at ${written:-no time} ms, less than 3 s before the trainer gave PS 0's first try up ($given_up ms): it waited for PS 0"
ok "PS 1 checkpointed $((given_up - written)) ms before PS 0's first try was given up"
wait_exit "$LP" 60; rc=$?
[ "$rc" = 0 ] || { cat "$T/launch.log"; fail "the job exited $rc"; }
model_whole MANIFEST dense.bin embedding-0.ckpt embedding-1.ckpt sync-0.ckpt
ok "a frozen PS 0 did not delay PS 1's save; model whole, job exit 0"
no_leftovers
pass
