#!/usr/bin/env bash
# Sync benchmark (issue 4): 2 trainers x 1 worker on planted data, the same
# data budget for each setting (trainer.max_examples per trainer). For none,
# the three s-* back to back, the three fr-* at gaps 1, 10 and 100, and the
# s-* throttled (sync.min_interval_ms) to the round rate of their fr-* twin
# at gap 10: examples/s, eval NE, rounds/min, mean sync gap, CPU time of the
# sync rounds, and examples/s relative to none.
#
# This 2-core machine is shared and noisy, so the settings run interleaved:
# each repetition runs none and then every setting once, each setting's
# ratio is taken against the none of its own repetition, and the medians
# over REPS repetitions are reported. JSON lines on stdout; docs are made from
# them by bench/bench-report.sh. Arg: scratch dir.
set -u
cd "$(dirname "$0")/.."
T=$1; BUDGET=${SYNC_BENCH_BUDGET:-300000}; REPS=${REPS:-3}
. bench/bench-lib.sh
bench_data 700000 50000
bench_job 2

declare -A EPS NE RPM GAP CPU RATIO
num() { local v; v=$(bench_field "$@"); echo "${v:-0}"; }
LABELS=()

# one LABEL BASE [--set ...]: one job; appends its figures (ratio vs BASE)
one() {
    local label=$1 base=$2; shift 2
    bench_run --set trainer.workers=1 --set trainer.max_examples="$BUDGET" "$@" || exit 1
    local R=$T/run/result.json r0=$T/run/result-trainer-0.json e
    e=$(bench_field "$R" eps)
    [[ " ${LABELS[*]} " == *" $label "* ]] || LABELS+=("$label")
    EPS[$label]="${EPS[$label]:-} $e"
    NE[$label]="${NE[$label]:-} $(num "$R" eval_ne)"
    RPM[$label]="${RPM[$label]:-} $(num "$r0" sync_rounds_per_min)"
    GAP[$label]="${GAP[$label]:-} $(num "$r0" sync_gap)"
    CPU[$label]="${CPU[$label]:-} $(bench_sum sync_cpu_s)"
    RATIO[$label]="${RATIO[$label]:-} $(awk -v a="$e" -v b="${base:-$e}" 'BEGIN { printf "%.4f", a / b }')"
    LAST_EPS=$e
}

SETTINGS=("s-easgd|--set sync.algorithm=s-easgd" "s-ma|--set sync.algorithm=s-ma"
          "s-bmuf|--set sync.algorithm=s-bmuf")
for a in easgd ma bmuf; do
    for gap in 1 10 100; do
        SETTINGS+=("fr-$a gap $gap|--set sync.algorithm=fr-$a --set sync.gap=$gap")
    done
done
for ((rep = 0; rep < REPS; rep++)); do
    one none "" --set sync.algorithm=none
    base=$LAST_EPS
    for s in "${SETTINGS[@]}"; do
        # shellcheck disable=SC2086
        one "${s%%|*}" "$base" ${s#*|}
    done
done
# throttled s-*: the median round rate of the fr twin at gap 10
for ((rep = 0; rep < REPS; rep++)); do
    one none-b "" --set sync.algorithm=none
    base=$LAST_EPS
    for a in easgd ma bmuf; do
        rpm=$(echo "${RPM[fr-$a gap 10]}" | median)
        ms=$(awk -v r="$rpm" 'BEGIN { if (r > 0) printf "%d", 60000 / r; else print 0 }')
        one "s-$a throttled to fr gap 10" "$base" --set sync.algorithm=s-$a \
            --set sync.min_interval_ms="$ms"
    done
done
for l in "${LABELS[@]}"; do
    [ "$l" = none-b ] && continue
    echo "{\"bench\":\"sync\",\"setting\":\"$l\",\"reps\":$REPS,\"eps\":$(echo "${EPS[$l]}" | median),\"eval_ne\":$(echo "${NE[$l]}" | median),\"rounds_per_min\":$(echo "${RPM[$l]}" | median),\"sync_gap\":$(echo "${GAP[$l]}" | median),\"sync_cpu_s\":$(echo "${CPU[$l]}" | median),\"eps_ratio_vs_none\":$(echo "${RATIO[$l]}" | median),\"ratio_runs\":[$(echo ${RATIO[$l]} | tr ' ' ',')]}"
done
