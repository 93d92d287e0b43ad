#!/usr/bin/env bash
# The trainer's end-of-job save asks each PS for "still working" replies
# (the CHECKPOINT's progress_ms, each limits.request_timeout_ms) and waits
# for a PS that sends them however long its file takes, logging them
# ("working: ..."). Here the PS's checkpoint file is written slowly (an
# LD_PRELOAD shim, test/tools/slow_ckpt.c: each 1 MiB write of it sleeps
# 0.8 s, about 5 s in all), past the trainer's try timeout (6 x 500 ms
# and a last look, 3.3 s): the first try must succeed, with "working:"
# lines in the trainer's log and no try given up. A trainer that stopped
# asking for progress replies gives the first try up and asks again.
. "$(dirname "$0")/lib.sh"
command -v cc >/dev/null || skip "no C compiler for the LD_PRELOAD shim"
cc -shared -fPIC -O2 -o "$T/slow_ckpt.so" "$ROOT/test/tools/slow_ckpt.c" -ldl ||
    fail "cannot build test/tools/slow_ckpt.c"
ROWS=200000
"$BIN/shadow-datagen" --rows $ROWS --seed 9 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen
make_job 1 0 1 "data:" "  train: [$T/train.tsv]" \
    "trainer:" "  workers: 1" "  epochs: 1" "sync:" "  algorithm: none" \
    "limits:" "  request_timeout_ms: 500" "  recovery_timeout_ms: 30000"
LOG=$T/run/logs/trainer-0.log
SS_TEST_SLOW_CKPT_MS=800 LD_PRELOAD="$T/slow_ckpt.so" launch >"$T/launch.log" 2>&1; rc=$?
grep -q "did not checkpoint.*asking again" "$LOG" &&
    fail "the trainer gave a try up while the PS was writing its file: did it ask for progress replies? (job exit $rc)"
[ "$rc" = 0 ] || { cat "$T/launch.log"; fail "the job exited $rc"; }
model_whole MANIFEST dense.bin embedding-0.ckpt
start=$(log_ms "dense model saved" "$LOG")
done_ms=$(log_ms "PS .* checkpointed to" "$LOG")
[ -n "$start" ] && [ -n "$done_ms" ] || fail "no 'dense model saved' or 'checkpointed to' line in $LOG"
took=$((done_ms - start))
((took > 3300)) || fail "the PS's checkpoint took $took ms, not past the trainer's try timeout (3.3 s): the shim did not slow it"
n=$(grep -c "e0: working: .* written" "$LOG")
((n >= 1)) || fail "no 'working: ... written' line from the PS in the trainer's log"
ok "the PS's checkpoint took $took ms (the try timeout: 3.3 s), answered at the first try after $n 'working:' replies"
no_leftovers
pass
