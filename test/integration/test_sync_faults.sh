#!/usr/bin/env bash
# tags: drill
# s-easgd under faults: a trainer frozen by SIGSTOP does not stop the others,
# and resumes after SIGCONT; a sync PS killed and restarted empty is
# re-seeded from a trainer's replica and training finishes.
. "$(dirname "$0")/lib.sh"
"$BIN/shadow-datagen" --rows 600000 --seed 11 --out "$T/train.tsv" \
    --eval-rows 20000 --eval-out "$T/eval.tsv" >/dev/null 2>&1 || fail datagen
make_job 2 1 3 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  workers: 1" "sync:" "  algorithm: s-easgd" "  timeout_ms: 1000" \
    "  min_interval_ms: 20" "metrics:" "  interval_s: 0.1" "limits:" "  request_timeout_ms: 3000"
M=$T/run

# 1. freeze trainer 1 for 3 s. sync.timeout_ms 10 s here: the others sync
# with the sync PS, not with trainer 1, but at an epoch's end they wait for
# it at the segment's barrier, and with 1 s (stall + probe: about 2 s) a
# machine that reaches that end within the freeze declared trainer 1 dead
# (each trainer's epoch is 200,000 examples, about 3 s here: a machine 1.5
# times as fast as this one could)
launch --set sync.timeout_ms=10000 >"$T/launch1.log" 2>&1 &
LP=$!; PIDS+=("$LP")
wait_log "$M/logs/trainer-1.log" "training:" 20
examples() { tail -n 1 "$1" 2>/dev/null | json_field - examples 2>/dev/null; }
wait_for 30 examples_above "$M/metrics-trainer-1.jsonl" 0  # trainer 1 is training
TP=$(pgrep -f -- "-c $JOB --rank 1") || fail "no trainer 1"
kill -STOP "$TP"
e0=$(examples "$M/metrics-trainer-0.jsonl"); e0=${e0:-0}; t0=$SECONDS
# frozen at least 3 s, and until trainer 0 has gone on (bounded)
wait_for 60 examples_above "$M/metrics-trainer-0.jsonl" "$e0"
while ((SECONDS - t0 < 3)); do sleep 0.1; done
e1=$(examples "$M/metrics-trainer-0.jsonl")
kill -CONT "$TP"
ok "trainer 0 went on while trainer 1 was frozen: $e0 -> $e1 examples in $((SECONDS - t0)) s"
wait_exit "$LP" 120 || { cat "$T/launch1.log"; fail "job failed after SIGCONT"; }
grep -q '"sync_final_ok":true' "$M/result-trainer-1.json" || fail "trainer 1 did not finish its sync"
ok "trainer 1 resumed and finished: $(json_field "$M/result-trainer-1.json" examples) examples"

# 2. kill the sync PS mid-run and restart it empty: re-seeded, job finishes
# (processes started by hand: the launcher would end the job when a PS dies)
rm -f "$M"/result-trainer-*.json "$M"/metrics-trainer-*.jsonl
start_ps embedding 0
start_ps embedding 1
start_ps sync 0
TPS=()
for r in 0 1 2; do
    "$BIN/shadow-trainer" -c "$JOB" --rank $r >"$T/trainer-$r.log" 2>&1 &
    TPS+=($!); PIDS+=($!)
done
wait_log "$T/trainer-0.log" "training:" 20
# mid-run: the sync PS holds a center the trainers have synced with
wait_for 30 metric_above "$M/metrics-trainer-0.jsonl" sync_rounds 0
kill -9 "$PID_sync_0"
wait "$PID_sync_0" 2>/dev/null  # gone, its port free
"$BIN/shadow-ps" -c "$JOB" --role sync --shard 0 >"$T/sync-restarted.log" 2>&1 &
PIDS+=($!)
wait_log "$T/sync-restarted.log" "ready:" 10
for r in 0 1 2; do
    wait_exit "${TPS[$r]}" 120 || { tail -n 20 "$T/trainer-$r.log"; fail "trainer $r failed"; }
done
reseeds=0
for r in 0 1 2; do reseeds=$((reseeds + $(json_field "$M/result-trainer-$r.json" sync_reseeds))); done
[ "$reseeds" -ge 1 ] || fail "the restarted sync PS was never re-seeded"
grep -q "initialized" "$T/sync-restarted.log" || fail "restarted sync PS log has no INIT"
ok "sync PS restarted empty was re-seeded ($reseeds re-seed(s)); all trainers finished"
pass
