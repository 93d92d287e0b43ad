#!/usr/bin/env bash
# The end-of-job save's requests go to every PS at once and are then waited
# for one by one; each PS's retries still get their own
# limits.recovery_timeout_ms, counted from when its reply is waited for, as
# when the PSs were asked in turn. Here both embedding PSs are frozen
# (SIGSTOP) at the dense save: PS 0 is let go after the trainer has waited
# for it longer than limits.recovery_timeout_ms (answering its second try),
# PS 1 a few seconds later: PS 1 must be asked again and the job must save a
# whole model and exit 0. Before, PS 1's window counted from the first
# request to PS 0, had run out by the time PS 1 was looked at, and its
# first unanswered try failed the save.
. "$(dirname "$0")/lib.sh"
ROWS=200000
"$BIN/shadow-datagen" --rows $ROWS --seed 9 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen
# a try is given up 6 x 500 ms (and a last look) after it was sent
make_job 2 0 1 "data:" "  train: [$T/train.tsv]" \
    "trainer:" "  workers: 1" "  epochs: 1" "sync:" "  algorithm: none" \
    "limits:" "  request_timeout_ms: 500" "  recovery_timeout_ms: 5000"
LOG=$T/run/logs/trainer-0.log
asked_ps0_or_answered() {
    grep -q "embedding PS 0 .*did not checkpoint.*asking again" "$LOG" ||
        (( $(grep -c "PS .* checkpointed to" "$LOG") >= 2 ))
}
# attempt I: 0 when the freeze came before the PSs' checkpoints and the job
# came through, 2 when the save was done before the freeze landed; fails
# otherwise
attempt() {
    frozen_at_save "$1"
    # the requests go to both PSs at once: either may have answered before
    # its freeze landed (a PS logs its checkpoint written before it answers):
    # too late. PS 1: nothing is waited for after PS 0. PS 0: nothing is
    # waited for past the window, and the trainer waits for PS 1 alone, which
    # must be let go at once (before, the test waited for PS 0 to be asked
    # again, which never came, until PS 1's window ran out and the job failed)
    local early=0
    grep -q "checkpoint written to" "$T/run/logs/ps-embedding-0.log" \
        "$T/run/logs/ps-embedding-1.log" && early=1
    ((early)) || wait_for 30 asked_ps0_or_answered
    if ((early)) || ! grep -q "embedding PS 0 .*did not checkpoint.*asking again" "$LOG"; then
        kill -CONT "$P0" "$P1"
        wait_exit "$LP" 60 || fail "attempt $1: the job failed"
        return 2
    fi
    # PS 0's first try was given up about 3.3 s after the requests, its
    # second (sent 0.2 s later) waits until about 6.8 s: let go 0.3 s past
    # the 5 s of limits.recovery_timeout_ms since the requests (the trainer's
    # "dense model saved" comes just before them), on the log's clock. Not a
    # fixed time after the retry: a trainer late by 1.7 s (load 11) retried
    # at 5 s, and 2.5 s after that left PS 0 1.4 s to write its file twice
    # (the first try's request, then the second's), too little there
    local saved_ms wait_ms
    saved_ms=$(log_ms "dense model saved" "$LOG")
    wait_ms=$((saved_ms + 5300 - $(date +%s%3N)))
    ((wait_ms <= 0)) || sleep "$((wait_ms / 1000)).$(printf '%03d' $((wait_ms % 1000)))"
    kill -CONT "$P0"
    sleep 2.5
    kill -CONT "$P1"
    wait_exit "$LP" 60; rc=$?
    [ "$rc" = 0 ] || { cat "$T/launch-$1.log"; fail "the job exited $rc: PS 1 was not asked again once PS 0 answered late"; }
    grep -q "embedding PS 1 answered the save at try [2-9]" "$LOG" || fail "PS 1 answered no later try"
    model_whole MANIFEST dense.bin embedding-0.ckpt embedding-1.ckpt
    return 0
}
attempts 8 "the save was done before the freeze landed"
ok "PS 0 answered after limits.recovery_timeout_ms, PS 1 asked again after it (job $ATTEMPT); model whole, job exit 0"
no_leftovers
pass
