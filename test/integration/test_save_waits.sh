#!/usr/bin/env bash
# The end-of-job save waits for a PS that does not answer, as lookups do:
# its CHECKPOINT request, unanswered in 6 x limits.request_timeout_ms, is
# sent again on a new connection until limits.recovery_timeout_ms has
# passed. Here both embedding PSs are frozen (SIGSTOP) the moment the
# trainer logs its dense model saved (the PSs' checkpoints come next, PS 1's
# after PS 0's) and kept frozen until the trainer has asked one of them
# again, then let go (SIGCONT): the job must save a whole model and exit 0.
# Before, the first unanswered try failed the save and the job (a PS that
# the launcher was restarting during the final save did the same).
. "$(dirname "$0")/lib.sh"
ROWS=200000
"$BIN/shadow-datagen" --rows $ROWS --seed 9 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen
make_job 2 0 1 "data:" "  train: [$T/train.tsv]" \
    "trainer:" "  workers: 1" "  epochs: 1" "sync:" "  algorithm: none" \
    "limits:" "  request_timeout_ms: 300" "  recovery_timeout_ms: 30000"
LOG=$T/run/logs/trainer-0.log
# asked_or_answered: the trainer asked a frozen PS again, or both PSs
# answered its checkpoint requests
asked_or_answered() {
    grep -q "did not checkpoint.*asking again" "$LOG" ||
        (( $(grep -c "PS .* checkpointed to" "$LOG") >= 2 ))
}
# attempt I: one job, its PSs frozen at the dense save. Returns 0 when the
# freeze came before the PSs' checkpoints and the job came through, 2 when
# the save was done before the freeze landed (a race the test loses on a
# loaded machine: the PSs' checkpoints take milliseconds); fails otherwise.
attempt() {
    frozen_at_save "$1"
    # a reply the PS sent just before its freeze may be logged just after
    # the check: the trainer then asks nobody again, and both answered
    wait_for 30 asked_or_answered
    if ! grep -q "did not checkpoint.*asking again" "$LOG"; then  # too late: both answered
        kill -CONT "$P0" "$P1"
        wait_exit "$LP" 60 || fail "attempt $1: the job failed"
        return 2
    fi
    sleep 1
    kill -CONT "$P0" "$P1"
    wait_exit "$LP" 60; rc=$?
    [ "$rc" = 0 ] || { cat "$T/launch-$1.log"; fail "the job exited $rc with its PSs frozen during the save"; }
    grep -q "embedding PS [01] answered the save at try [2-9]" "$LOG" || fail "no later try answered"
    model_whole MANIFEST dense.bin embedding-0.ckpt embedding-1.ckpt
    return 0
}
attempts 8 "the save was done before the freeze landed"
tries=$(grep -c "did not checkpoint.*asking again" "$LOG")
ok "PSs frozen through the save (job $ATTEMPT): $tries unanswered tries, answered after SIGCONT; model whole, job exit 0"
no_leftovers
pass
