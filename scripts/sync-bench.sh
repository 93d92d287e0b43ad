#!/usr/bin/env bash
# Sync benchmark (issue 4): 2 trainers x 1 worker on planted data, the same
# data budget for each setting (trainer.max_examples per trainer). For
# none, the three s-* back to back, the three fr-* at gaps 1, 10 and 100,
# and the s-* throttled (sync.min_interval_ms) to the round rate of their
# fr-* twin at gap 10: examples/s, eval NE, rounds/min, mean sync gap, CPU
# time of the sync rounds, and examples/s relative to none. JSON lines on
# stdout; docs are made from them by scripts/bench-report.sh. Arg: scratch dir.
set -u
cd "$(dirname "$0")/.."
T=$1; BUDGET=${SYNC_BENCH_BUDGET:-150000}
. scripts/bench-lib.sh
bench_data 400000 50000
bench_job 2

# run SETTING LABEL [--set ...]: one job, one JSON line; sets $RPM (rounds/min)
run() {
    local label=$1; shift
    bench_run --set trainer.workers=1 --set trainer.max_examples="$BUDGET" "$@" || return 1
    local R=$T/run/result.json r0=$T/run/result-trainer-0.json
    local eps ne rpm gap cpu
    eps=$(bench_field "$R" eps); ne=$(bench_field "$R" eval_ne)
    rpm=$(bench_field "$r0" sync_rounds_per_min); gap=$(bench_field "$r0" sync_gap)
    cpu=$(bench_sum sync_cpu_s)
    RPM=${rpm:-0}
    [ -z "${BASE_EPS:-}" ] && BASE_EPS=$eps
    echo "{\"bench\":\"sync\",\"setting\":\"$label\",\"eps\":$eps,\"eval_ne\":$ne,\"rounds_per_min\":${rpm:-0},\"sync_gap\":${gap:-0},\"sync_cpu_s\":${cpu:-0},\"eps_ratio_vs_none\":$(awk -v a="$eps" -v b="$BASE_EPS" 'BEGIN { printf "%.3f", a / b }')}"
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
