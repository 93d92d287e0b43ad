#!/usr/bin/env bash
# A launched s-easgd job whose sync PS is killed (-9) before its first
# recovery checkpoint (issue 22, item 5: the job used to end, exit 1): the
# launcher restarts it empty, the trainers re-seed it from their live
# replicas, and the job finishes with an eval NE close to a fault-free run's
# (within 2% here; the figures are printed).
. "$(dirname "$0")/lib.sh"
"$BIN/shadow-datagen" --rows 200000 --seed 11 --out "$T/train.tsv" \
    --eval-rows 20000 --eval-out "$T/eval.tsv" >/dev/null 2>&1 || fail datagen
make_job 1 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  workers: 1" "  epochs: 2" "sync:" "  algorithm: s-easgd" "  timeout_ms: 1000" \
    "checkpoint:" "  interval_s: 300" "limits:" "  request_timeout_ms: 3000" \
    "metrics:" "  interval_s: 0.25"

launch >"$T/clean.log" 2>&1 || { cat "$T/clean.log"; fail "fault-free job failed"; }
ne0=$(json_field "$T/run/result.json" eval_ne)
mv "$T/run" "$T/clean-run"  # the faulty run's logs start empty

launch >"$T/fault.log" 2>&1 &
LP=$!
PIDS+=("$LP")
wait_log "$T/run/logs/trainer-0.log" "training:" 30
# mid-run: the sync PS holds a center the trainers have synced with
wait_for 30 metric_above "$T/run/metrics-trainer-0.jsonl" sync_rounds 0
SP=$(pgrep -f -- "-c $JOB --role sync --shard 0") || fail "no sync PS"
kill -9 $SP
wait_exit "$LP" 180 || { cat "$T/fault.log"; fail "the job ended when its sync PS died"; }
grep -q "restarting it from nothing: the trainers re-seed it" "$T/fault.log" \
    || { cat "$T/fault.log"; fail "no empty restart"; }
ne1=$(json_field "$T/run/result.json" eval_ne)
reseeds=0
for r in 0 1; do reseeds=$((reseeds + $(json_field "$T/run/result-trainer-$r.json" sync_reseeds))); done
[ "$reseeds" -ge 1 ] || fail "the restarted sync PS was never re-seeded"
rel=$(awk -v a="$ne1" -v b="$ne0" 'BEGIN { d = (a - b) / b; printf "%.4f", d < 0 ? -d : d }')
echo "eval NE: fault-free $ne0, sync PS killed at +1 s $ne1 (relative difference $rel), $reseeds re-seed(s)"
float_lt "$rel" 0.02 || fail "NE $ne1 after the re-seed, $ne0 without the fault"
ok "sync PS killed before its first checkpoint: restarted empty, re-seeded, NE $ne1 vs $ne0"
no_leftovers
pass
