#!/usr/bin/env bash
# Trainer throughput (issue 3): examples/s of one local job, default model
# (dim 16, bottom 13-64-16, top 64-1, batch 128), planted data, with 1 trainer
# x 1 worker, 1 x 2 workers and 2 trainers x 1 worker. Median of REPS runs.
# JSON lines on stdout. Arg: scratch dir.
set -u
cd "$(dirname "$0")/.."
T=$1; REPS=${REPS:-3}; ROWS=${TRAINER_BENCH_ROWS:-600000}
. bench/bench-lib.sh
bench_data "$ROWS" 20000
for shape in "1 1" "1 2" "2 1"; do
    set -- $shape
    bench_job "$1"
    v=""
    for ((i = 0; i < REPS; i++)); do
        bench_run --set trainer.workers="$2" --set sync.algorithm=none || exit 1
        v="$v $(bench_field "$T/run/result.json" eps)"
    done
    eps=$(echo "$v" | median)
    echo "{\"bench\":\"trainer\",\"trainers\":$1,\"workers\":$2,\"rows\":$ROWS,\"eps_median\":$eps,\"eps_runs\":[$(echo $v | tr ' ' ',')],\"ratio_vs_pytorch_15k\":$(awk -v e="$eps" 'BEGIN { printf "%.2f", e / 15000 }')}"
done
