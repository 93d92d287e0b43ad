#!/usr/bin/env bash
# The drill of issue 22, item 5: a launched s-easgd job whose sync PS is
# killed (-9) in the middle of training (once trainer 0 has trained
# RESEED_KILL_EX examples, 60,000 of its 600,000: a point in the data, not a
# time, so that a fast machine cannot finish first), before its first
# recovery checkpoint (the
# job used to end, exit 1). The launcher restarts it empty; the trainers offer
# their live replicas and the PS seeds its center with their mean (a center
# from one replica would pull the consensus towards it, since every round
# keeps sum(x_i) + c constant); the job finishes with an eval NE within 0.5%
# of a fault-free run's (bound set by the issue).
#
# The bound is judged against the noise, measured on this job (600,000
# planted rows, 2 epochs, 2 trainers; RESEED_REPS=3 runs each side, loaded
# 2-core machine, 2026-12-02): fault-free eval NE 0.78181-0.78246 (spread
# 0.08%) and 0.78137-0.78181 (0.06%); killed at +6 s of training (the kill
# point then) 0.78274-0.78337 and
# 0.78121-0.78268; medians +0.12% (mean of the replicas) and +0.05% (the
# old first-replica rule, on main's binaries). Over 5 runs each side the
# faulty run is 0.13% worse on average (the sync lost while the PS is
# down), single pairs from -0.03% to +0.32% (standard deviation of a pair's
# difference about 0.11%): one pair (the default) stays under 0.5%;
# RESEED_REPS=N compares the medians of N interleaved runs. The check is
# one-sided: the faulty run may not be worse by 0.5% or more. On this job
# the mean and the first replica are within the noise of each other (the
# two replicas are close when the PS dies); the unit tests (test_ps_sync,
# test_tr_sync) check that the center is the exact mean.
. "$(dirname "$0")/lib.sh"
REPS=${RESEED_REPS:-1}
# 60,000: early in trainer 0's first segment (its first epoch, 300,000), so
# that the launcher has restarted the sync PS long before that segment ends
# (240,000 examples later: 2.4 s here, 0.6 s on a machine 4 times as fast;
# the restart takes well under a second). At 240,000, seen up to 35,000
# late, the segment could end first: its final sync then completed without
# the PS and the model save after it found the restarted PS empty ("not
# initialized": the job failed, 2 runs of 3 with the data divided by 4).
# The save now puts the center back (test_sync_save_reseed.sh); such a run
# is reported as a case not reached (no mean of the replicas was made).
KILL_EX=${RESEED_KILL_EX:-60000}
"$BIN/shadow-datagen" --rows "${RESEED_ROWS:-600000}" --seed 11 --out "$T/train.tsv" \
    --eval-rows 20000 --eval-out "$T/eval.tsv" >"$T/datagen.json" 2>"$T/datagen.err" || fail datagen
make_job 1 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  workers: 1" "  epochs: 2" "sync:" "  algorithm: s-easgd" "  timeout_ms: 1000" \
    "checkpoint:" "  interval_s: 300" "limits:" "  request_timeout_ms: 3000" \
    "metrics:" "  interval_s: 0.1"

# clean_run I: a fault-free job; its eval NE goes to $T/clean.ne
clean_run() {
    launch >"$T/clean-$1.log" 2>&1 || { cat "$T/clean-$1.log"; fail "fault-free job $1 failed"; }
    json_field "$T/run/result.json" eval_ne >>"$T/clean.ne"
    mv "$T/run" "$T/clean-run-$1"  # the next run's logs start empty
}

# fault_run I: the drill; its eval NE goes to $T/fault.ne
fault_run() {
    local lp sp ex r reseeds=0
    launch >"$T/fault-$1.log" 2>&1 &
    lp=$!
    PIDS+=("$lp")
    wait_log "$T/run/logs/trainer-0.log" "training:" 30
    wait_for 120 examples_above "$T/run/metrics-trainer-0.jsonl" "$KILL_EX"
    ex=$(tail -n 1 "$T/run/metrics-trainer-0.jsonl" | json_field - examples)
    [ -f "$T/run/result-trainer-0.json" ] && fail "run $1: training ended before the kill"
    sp=$(pgrep -f -- "-c $JOB --role sync --shard 0") || fail "no sync PS"
    kill -9 $sp
    wait_exit "$lp" 180 \
        || { cat "$T/fault-$1.log"; fail "run $1: the job ended when its sync PS died"; }
    grep -q "restarting it from nothing: the trainers re-seed it" "$T/fault-$1.log" \
        || { cat "$T/fault-$1.log"; fail "run $1: no empty restart"; }
    if grep -q "was empty after the final sync" "$T/run/logs/trainer-0.log"; then
        # the kill came after a segment's final sync (data made small): the
        # job came through because the save put the center back
        # (test_sync_save_reseed.sh); no mean of the replicas was made
        skip_case "run $1: the sync PS died after a segment's final sync; the save put" \
            "the center back, no mean of replicas to check"
        json_field "$T/run/result.json" eval_ne >>"$T/fault.ne"
        mv "$T/run" "$T/fault-run-$1"
        return 0
    fi
    # the restarted PS (its log's last start) took the mean of both replicas
    tac "$T/run/logs/ps-sync-0.log" | sed '/ready: sync shard/q' >"$T/restarted-$1.log"
    grep -q "initialized from the mean of 2 trainer replica" "$T/restarted-$1.log" \
        || { cat "$T/restarted-$1.log"; fail "run $1: not seeded from both replicas"; }
    for r in 0 1; do
        reseeds=$((reseeds + $(json_field "$T/run/result-trainer-$r.json" sync_reseeds)))
    done
    [ "$reseeds" = 2 ] || fail "run $1: $reseeds re-seed offers taken, want one per trainer"
    json_field "$T/run/result.json" eval_ne >>"$T/fault.ne"
    ok "run $1: sync PS killed at $ex examples of trainer 0," \
        "restarted empty, seeded from the mean of 2 replicas, eval NE $(tail -n 1 "$T/fault.ne")"
    mv "$T/run" "$T/fault-run-$1"
}

for ((i = 0; i < REPS; i++)); do
    clean_run "$i"
    fault_run "$i"
done
median() {
    sort -g "$1" | awk '{ v[NR] = $1 }
        END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ne0=$(median "$T/clean.ne")
ne1=$(median "$T/fault.ne")
bayes=$(json_field "$T/datagen.json" eval.bayes_ne)
rel=$(awk -v a="$ne1" -v b="$ne0" 'BEGIN { printf "%.4f", (a - b) / b }')
echo "eval NE, median of $REPS: fault-free $ne0 ($(paste -sd' ' "$T/clean.ne")), sync PS" \
    "killed past $KILL_EX examples $ne1 ($(paste -sd' ' "$T/fault.ne")): relative difference $rel;" \
    "Bayes-optimal $bayes"
float_lt "$rel" 0.005 || fail "median NE $ne1 after the re-seed, $ne0 without the fault"
ok "sync PS killed past $KILL_EX examples: restarted empty, re-seeded from the mean, NE $ne1 vs $ne0"
no_leftovers
pass
