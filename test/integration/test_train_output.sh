#!/usr/bin/env bash
# The result is the model the job outputs, on the real Criteo sample:
# - trainer 0 scores only after every trainer has finished (trainer 1 starts
#   once trainer 0 has finished training, and trainer 0 waits for it at the
#   barrier);
# - the eval in result.json is the eval of what model/ and ckpt/ hold:
#   scoring the saved run again (--eval-only) gives the same logloss;
# - with 3 epochs and an eval after each, the kept model is the best one seen,
#   not the last, and the saved run scores as that best one;
# - trainer.eval_every_examples scores every N examples, across epochs.
. "$(dirname "$0")/lib.sh"
criteo_split
make_job 2 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  workers: 2" "  batch_size: 32" "model:" "  lr: 0.02" \
    "sync:" "  algorithm: s-easgd"

# 1. eval barrier: trainers started by hand, trainer 1 late
start_ps embedding 0
start_ps embedding 1
start_ps sync 0
"$BIN/shadow-trainer" -c "$JOB" --rank 0 >"$T/trainer-0.log" 2>&1 &
P0=$!; PIDS+=("$P0")
wait_log "$T/trainer-0.log" "segment done" 60  # trainer 0 is done training
"$BIN/shadow-trainer" -c "$JOB" --rank 1 >"$T/trainer-1.log" 2>&1 &
P1=$!; PIDS+=("$P1")
wait_exit "$P1" 60 || fail "trainer 1 failed"
wait_exit "$P0" 60 || fail "trainer 0 failed"
ts() { grep -m1 "$2" "$1" | cut -d' ' -f1; }
done1=$(ts "$T/trainer-1.log" "segment done")
eval0=$(ts "$T/trainer-0.log" "eval after")
[ -n "$done1" ] && [ -n "$eval0" ] || fail "log lines missing"
[[ "$eval0" > "$done1" ]] || fail "trainer 0 scored at $eval0, before trainer 1 finished at $done1"
grep -q '"sync_final_ok":true' "$T/run/result-trainer-1.json" || fail "trainer 1: final sync"
ok "trainer 0 scored at $eval0, after trainer 1 finished training at $done1"
ctl --target all shutdown >/dev/null 2>&1
for p in "${PIDS[@]}"; do wait_exit "$p" 15 >/dev/null; done
PIDS=()

# 2. the result is the saved model: score it again from model/ and ckpt/
launch >"$T/launch-1.log" 2>&1 || { cat "$T/launch-1.log"; fail "job failed"; }
R=$T/run/result.json
ll=$(json_field "$R" eval_logloss)
grep -q '"output_model":"center"' "$R" || fail "output model not reported as the center"
cp -r "$T/run" "$T/saved"
launch --eval-only "$T/saved" >"$T/launch-eval.log" 2>&1 || { cat "$T/launch-eval.log"; fail "eval-only failed"; }
ll2=$(json_field "$T/run/result.json" eval_logloss)
[ "$ll" = "$ll2" ] || fail "job reported logloss $ll, its saved model scores $ll2"
ok "the job's eval (logloss $ll) is the eval of the model it saved ($ll2)"

# 3. epochs 3 with an eval per epoch: the best model is kept
launch --set trainer.epochs=3 --set trainer.eval_every=1 >"$T/launch-3.log" 2>&1 \
    || { cat "$T/launch-3.log"; fail "3-epoch job failed"; }
M=$T/run/metrics-trainer-0.jsonl
n_evals=$(grep -c '"eval_ne"' "$M")
[ "$n_evals" = 3 ] || fail "expected 3 evals in $M, got $n_evals"
best=$(json_field "$M" eval_ne | sort -g | head -n 1)
ne=$(json_field "$T/run/result.json" eval_ne)
awk -v a="$ne" -v b="$best" 'BEGIN { exit !((a - b) ^ 2 < 1e-12) }' \
    || fail "result eval NE $ne is not the best eval seen ($best)"
ll=$(json_field "$T/run/result.json" eval_logloss)
be=$(json_field "$T/run/result.json" best_epoch)
cp -r "$T/run" "$T/saved3"
launch --eval-only "$T/saved3" >"$T/launch-eval3.log" 2>&1 || fail "eval-only (3 epochs) failed"
ll3=$(json_field "$T/run/result.json" eval_logloss)
[ "$ll" = "$ll3" ] || fail "3 epochs: reported logloss $ll, the saved model scores $ll3"
ok "3 epochs: evals $(json_field "$M" eval_ne | paste -sd' '), kept the best ($ne, epoch $be), saved model scores the same"
# 4. evals every 1500 examples per trainer, across epoch boundaries
launch --set trainer.epochs=2 --set trainer.eval_every_examples=1500 >"$T/launch-ex.log" 2>&1 \
    || { cat "$T/launch-ex.log"; fail "eval_every_examples job failed"; }
steps=$(json_field "$M" examples eval_ne | paste -sd' ')
n_evals=$(echo "$steps" | wc -w)
[ "$n_evals" -ge 5 ] || fail "eval_every_examples 1500 over 8000 examples per trainer: $n_evals evals ($steps)"
set -- $steps
[ "$1" = 1500 ] && [ "$2" = 3000 ] || fail "evals not 1500 examples apart: $steps"
[ "$(json_field "$T/run/result.json" examples)" = 16000 ] || fail "not every row twice"
ok "eval_every_examples 1500: evals at $steps examples of trainer 0"
no_leftovers
pass
