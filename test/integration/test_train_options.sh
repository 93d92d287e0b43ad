#!/usr/bin/env bash
# Trainer options the user guide (docs/guide.md) promises, each on a short job:
# - trainer.patience: with an evaluation after every epoch the job stops
#   exactly `patience` evaluations after the best one (Criteo overfits from
#   the second pass on) and says so (stopped_early);
# - tables.capacity_rows, seen from the trainer: a PS that is full refuses
#   new keys; the trainer warns, counts pushes_over_capacity and finishes;
# - sync.cpu_share: the shadow thread's CPU time stays under twice its share
#   of the training time;
# - trainer.barrier_timeout_s: a trainer whose peer never comes fails at the
#   end-of-training barrier after that time (not sync.timeout_ms), naming
#   the rank it waited for.
. "$(dirname "$0")/lib.sh"
criteo_split
make_job 2 0 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  workers: 2" "  batch_size: 32" "model:" "  lr: 0.02" \
    "sync:" "  algorithm: s-ma"

# patience 2 over at most 8 epochs
launch --set trainer.epochs=8 --set trainer.eval_every=1 --set trainer.patience=2 \
    >"$T/pat.log" 2>&1 || { cat "$T/pat.log"; fail "patience job failed"; }
R0=$T/run/result-trainer-0.json
done0=$(json_field "$R0" epochs_done); best=$(json_field "$R0" best_epoch)
grep -q '"stopped_early":true' "$R0" || { cat "$R0"; fail "patience: not stopped early"; }
[ "$done0" = $((best + 2)) ] || fail "patience 2: stopped after epoch $done0, best epoch $best"
[ "$(json_field "$T/run/result-trainer-1.json" epochs_done)" = "$done0" ] \
    || fail "patience: trainer 1 did not stop with trainer 0"
ok "patience 2: best epoch $best, stopped after epoch $done0 of 8"

# capacity: 500 rows a shard, far fewer than the sample's keys
launch --set tables.capacity_rows=500 --set trainer.epochs=1 >"$T/cap.log" 2>&1 \
    || { cat "$T/cap.log"; fail "job with full PSs failed"; }
full=$(( $(json_field "$R0" pushes_over_capacity) +
         $(json_field "$T/run/result-trainer-1.json" pushes_over_capacity) ))
((full > 0)) || fail "capacity 500: no push was refused"
grep -q "WARN.*is full (tables.capacity_rows)" "$T/run/logs/trainer-0.log" \
    || fail "capacity: the trainer did not warn"
ne=$(json_field "$T/run/result.json" eval_ne)
float_lt "$ne" 1.5 || fail "capacity: eval NE $ne"
ok "capacity_rows 500: $full pushes refused in part, warned, job finished (eval NE $ne)"

# sync.cpu_share 0.005: the shadow thread's CPU time stays under twice that
# share of the training time. (Back to back it took 0.026-0.083 here,
# depending on the load; at the default 0.02, 0.011-0.017.)
share() {  # RESULT-FILE: sync_cpu_s / wall_s
    awk -v c="$(json_field "$1" sync_cpu_s)" -v w="$(json_field "$1" wall_s)" \
        'BEGIN { printf "%.4f", (w > 0 ? c / w : 1) }'
}
launch --set trainer.epochs=4 --set trainer.eval_every=0 --set sync.cpu_share=0.005 \
    >"$T/cs.log" 2>&1 || { cat "$T/cs.log"; fail "cpu_share job failed"; }
s1=$(share "$R0"); r1=$(json_field "$R0" sync_rounds)
float_lt "$s1" 0.01 || fail "cpu_share 0.005: the shadow thread took $s1 of the training time"
[ "${r1:-0}" -gt 0 ] || fail "cpu_share 0.005: no sync rounds"
ok "sync.cpu_share 0.005: the shadow thread took $s1 of the training time ($r1 rounds)"

# barrier timeout: trainer 1 alone (sync none: the ring is only for barriers)
start_ps embedding 0
start_ps embedding 1
"$BIN/shadow-trainer" -c "$JOB" --rank 1 --set sync.algorithm=none --set trainer.epochs=1 \
    --set trainer.barrier_timeout_s=2 --set sync.timeout_ms=20000 >"$T/bar.log" 2>&1 &
TB=$!; PIDS+=("$TB")
wait_exit "$TB" 90 && fail "a trainer without its peer finished"
ep0=$(ctl config get cluster.trainers.0)
grep -q "ERROR.*no data from rank 0 ($ep0) within 2000 ms.*(waiting for the other trainers" \
    "$T/bar.log" || { tail -n 5 "$T/bar.log"; fail "barrier: no error naming rank 0 and 2000 ms"; }
# the wait between reaching the barrier and failing: about 2 s, bounded
ms() { date -d "$(cut -d' ' -f1 <<<"$1")" +%s%3N; }
t1=$(ms "$(grep -m1 "segment done" "$T/bar.log")"); t2=$(ms "$(grep -m1 "ERROR" "$T/bar.log")")
(( t2 - t1 >= 1900 && t2 - t1 < 15000 )) || fail "barrier: failed $((t2 - t1)) ms after arriving"
ok "barrier_timeout_s 2: the lone trainer failed $((t2 - t1)) ms after reaching the barrier"
kill -TERM "$PID_embedding_0" "$PID_embedding_1"
wait_exit "$PID_embedding_0" 10 || fail "PS 0 exited non-zero"
wait_exit "$PID_embedding_1" 10 || fail "PS 1 exited non-zero"
no_leftovers
pass
