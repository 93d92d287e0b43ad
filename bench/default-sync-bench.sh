#!/usr/bin/env bash
# Default-job sync benchmark (issue 7): make run's job shape (2 trainers x 2
# workers, batch 128, 2 embedding PSs) on planted data, sync none against
# s-easgd and s-ma with the shadow thread held to a CPU share (sync.cpu_share)
# or unlimited. Interleaved: each repetition runs none first and then every
# setting, each setting's examples/s is divided by the none of its own
# repetition; medians over REPS. JSON lines on stdout. Arg: scratch dir.
set -u
cd "$(dirname "$0")/.."
T=$1; BUDGET=${DEFAULT_BENCH_BUDGET:-250000}; REPS=${REPS:-3}
SHARES=${SHARES:-"0 0.2 0.05"}
. bench/bench-lib.sh
bench_data 700000 50000
bench_job 2

declare -A EPS NE RATIO RPM
LABELS=()
one() {  # LABEL BASE_EPS [--set ...]
    local label=$1 base=$2 e; shift 2
    bench_run --set trainer.max_examples="$BUDGET" --set ps.threads=2 "$@" || exit 1
    e=$(bench_field "$T/run/result.json" eps)
    [[ " ${LABELS[*]} " == *" $label "* ]] || LABELS+=("$label")
    EPS[$label]="${EPS[$label]:-} $e"
    NE[$label]="${NE[$label]:-} $(bench_field "$T/run/result.json" eval_ne)"
    RPM[$label]="${RPM[$label]:-} $(bench_field "$T/run/result-trainer-0.json" sync_rounds_per_min)"
    RATIO[$label]="${RATIO[$label]:-} $(awk -v a="$e" -v b="${base:-$e}" 'BEGIN { printf "%.4f", a / b }')"
    LAST=$e
}
for ((rep = 0; rep < REPS; rep++)); do
    one none "" --set sync.algorithm=none
    base=$LAST
    for a in s-easgd s-ma; do
        for sh in $SHARES; do
            one "$a cpu_share $sh" "$base" --set sync.algorithm=$a --set sync.cpu_share=$sh
        done
    done
done
for l in "${LABELS[@]}"; do
    echo "{\"bench\":\"default_sync\",\"setting\":\"$l\",\"reps\":$REPS,\"eps\":$(echo "${EPS[$l]}" | median),\"eval_ne\":$(echo "${NE[$l]}" | median),\"eval_ne_runs\":[$(echo ${NE[$l]} | tr ' ' ',')],\"rounds_per_min\":$(echo "${RPM[$l]:-0}" | median),\"eps_ratio_vs_none\":$(echo "${RATIO[$l]}" | median),\"ratio_runs\":[$(echo ${RATIO[$l]} | tr ' ' ',')]}"
done
