#!/usr/bin/env bash
# SIGTERM after a trainer loss keeps the last complete job checkpoint.
# 3 trainers, s-ma (job.allow_trainer_loss: the job goes on without a lost
# one), a periodic job checkpoint every second: trainer 2 is killed (-9) just
# after a periodic checkpoint, then the launcher gets SIGTERM. A checkpoint
# now would hold the two survivors' states only and could not be resumed, so:
#   - the trainers write nothing: RUN_DIR/jobckpt is byte for byte the one
#     from before the loss, and no jobckpt.new-* folder is left;
#   - the launcher names the lost trainer and the kept checkpoint, says
#     --resume RUN_DIR goes on from it, and exits 75;
#   - --resume RUN_DIR (all 3 trainers again) finishes the job with exactly
#     the examples of a run without the fault: the kept checkpoint's, plus
#     the rest, the work since it trained again, nothing twice.
# Before the fix the survivors' states were committed over the checkpoint
# and the launcher exited 1 ("the job checkpoint was not completed"): the
# run could not be resumed.
. "$(dirname "$0")/lib.sh"
ROWS=240000
# 6 epochs, every row once an epoch over the 3 trainers: 480,000 examples a
# trainer. The kill comes after the first periodic checkpoint (1 s of
# training) and the SIGTERM a moment later; the survivors must still be
# training then. With 2 epochs (160,000 a trainer, about 2.5 s here at 3
# trainers) a machine twice as fast was near its end by then; now one 4
# times as fast still has a third of its data left.
EPOCHS=6
EX0=$((ROWS * EPOCHS))
"$BIN/shadow-datagen" --rows $ROWS --seed 5 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen
make_job 2 0 3 "data:" "  train: [$T/train.tsv]" "sync:" "  algorithm: s-ma" \
    "  timeout_ms: 1000" "metrics:" "  interval_s: 0.2" "trainer:" "  epochs: $EPOCHS"
# digest DIR: every file's name and content, one line each
digest() { (cd "$1" && find . -type f | sort | xargs sha256sum); }

t0=$(date +%s.%N)
# (not the lib's launch function: $! must be the launcher, which gets SIGTERM)
"$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet --set job.checkpoint_interval_s=1 \
    >"$T/run1.log" 2>&1 &
LP=$!
PIDS+=("$LP")
# just after trainer 0's first periodic checkpoint (its line comes once its
# workers train again: the next one is a second away), kill trainer 2
wait_log "$T/run/logs/trainer-0.log" "periodic job checkpoint 1:" 60
tp=$(pgrep -f -- "shadow-trainer -c $JOB --rank 2( |\$)") || fail "no trainer 2"
kill -KILL $tp
[ -f "$T/run/jobckpt/MANIFEST" ] || fail "no job checkpoint after trainer 0 logged one"
BEFORE=$(digest "$T/run/jobckpt")
EXC=$(sed -n 's/^examples //p' "$T/run/jobckpt/MANIFEST")
wait_log "$T/run1.log" "trainer 2 exited with status 137 at .*goes on without it" 10
[ -f "$T/run/result-trainer-0.json" ] && fail "the survivors finished before the SIGTERM (size the job up)"
kill -TERM "$LP"
wait_exit "$LP" 60; rc=$?
cat "$T/run1.log"
[ "$rc" = 75 ] || fail "the launcher exited $rc after SIGTERM following a trainer loss, want 75"
no_leftovers
[ "$(digest "$T/run/jobckpt")" = "$BEFORE" ] \
    || fail "RUN_DIR/jobckpt changed after the loss (the survivors' states were written over it)"
ls -d "$T/run"/jobckpt.new-* 2>/dev/null && fail "a jobckpt.new-* folder was left"
grep -q "trainer 2 was lost at [0-9.]* s" "$T/run1.log" || fail "the launcher does not name the lost trainer"
grep -q "the job checkpoint of [0-9:]* (before the loss; $EXC examples trained) is kept as it was in $T/run/jobckpt; .*shadow-launch --resume $T/run goes on from it" \
    "$T/run1.log" || fail "the launcher does not name the kept checkpoint and --resume"
for r in 0 1; do
    grep -q "SIGTERM: no job checkpoint written: 2 of 3 trainers are left" \
        "$T/run/logs/trainer-$r.log" || fail "trainer $r does not say why it wrote no checkpoint"
done
ok "trainer 2 killed after a periodic checkpoint, then SIGTERM: exit 75, RUN_DIR/jobckpt ($EXC examples) byte-identical, nothing else left"

"$ROOT/scripts/shadow-launch" --resume "$T/run" --bin "$BIN" --quiet >"$T/resume.log" 2>&1 \
    || { cat "$T/resume.log"; fail "the resumed job failed"; }
cat "$T/resume.log"
EX1=$(json_field "$T/run/result.json" examples)
[ "$EX1" = $EX0 ] || fail "the resumed job trained $EX1 examples in all, want $EX0 ($EXC before the loss)"
[ "$(json_field "$T/run/result.json" resumed_from_examples)" = "$EXC" ] \
    || fail "resumed_from_examples is not $EXC"
grep -q '"trainers_lost":\[\]' "$T/run/result.json" || fail "the resumed job lists a lost trainer"
no_leftovers
ok "resumed with 3 trainers: $EXC + $((EX1 - EXC)) = $EX1 examples, as without the fault; $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s in all"
pass
