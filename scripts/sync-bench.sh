#!/usr/bin/env bash
# Sync benchmark (issue 4): 2 trainers x 1 worker on planted data, the same
# data budget for each setting (trainer.max_examples per trainer). For
# none, the three s-* back to back, the three fr-* at gaps 1, 10 and 100,
# and the s-* throttled (sync.min_interval_ms) to the round rate of their
# fr-* twin at gap 10: examples/s, eval NE, rounds/min, mean sync gap, CPU
# time of the sync rounds, and examples/s relative to none (medians of REPS
# runs each: this 2-core machine is shared and noisy). JSON lines on
# stdout; docs are made from them by scripts/bench-report.sh. Arg: scratch dir.
set -u
cd "$(dirname "$0")/.."
T=$1; BUDGET=${SYNC_BENCH_BUDGET:-300000}; REPS=${REPS:-3}
. scripts/bench-lib.sh
bench_data 700000 50000
bench_job 2

# run LABEL [--set ...]: REPS jobs, one JSON line of medians; sets $RPM
run() {
    local label=$1; shift
    local e="" n="" r="" g="" c="" i
    for ((i = 0; i < REPS; i++)); do
        bench_run --set trainer.workers=1 --set trainer.max_examples="$BUDGET" "$@" || return 1
        local R=$T/run/result.json r0=$T/run/result-trainer-0.json
        e="$e $(bench_field "$R" eps)"; n="$n $(bench_field "$R" eval_ne)"
        r="$r $(bench_field "$r0" sync_rounds_per_min)"; g="$g $(bench_field "$r0" sync_gap)"
        c="$c $(bench_sum sync_cpu_s)"
    done
    local eps ne rpm gap cpu
    eps=$(echo "$e" | median); ne=$(echo "$n" | median)
    rpm=$(echo "$r" | median); gap=$(echo "$g" | median); cpu=$(echo "$c" | median)
    RPM=${rpm:-0}
    [ -z "${BASE_EPS:-}" ] && BASE_EPS=$eps
    echo "{\"bench\":\"sync\",\"setting\":\"$label\",\"reps\":$REPS,\"eps\":$eps,\"eval_ne\":$ne,\"rounds_per_min\":${rpm:-0},\"sync_gap\":${gap:-0},\"sync_cpu_s\":${cpu:-0},\"eps_ratio_vs_none\":$(awk -v a="$eps" -v b="$BASE_EPS" 'BEGIN { printf "%.3f", a / b }'),\"eps_runs\":[$(echo $e | tr ' ' ',')]}"
}

BASE_EPS=""
run none --set sync.algorithm=none
for a in easgd ma bmuf; do run "s-$a" --set sync.algorithm=s-$a; done
for a in easgd ma bmuf; do
    for gap in 1 10 100; do
        run "fr-$a gap $gap" --set sync.algorithm=fr-$a --set sync.gap=$gap
        [ $gap = 10 ] && eval "RPM10_$a=\$RPM"
    done
done
for a in easgd ma bmuf; do
    rpm=$(eval echo "\$RPM10_$a")
    ms=$(awk -v r="$rpm" 'BEGIN { if (r > 0) printf "%d", 60000 / r; else print 0 }')
    run "s-$a throttled ${ms}ms" --set sync.algorithm=s-$a --set sync.min_interval_ms="$ms"
done
