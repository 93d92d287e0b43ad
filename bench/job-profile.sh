#!/usr/bin/env bash
# Where make run's job spends its CPU, part by part (issue 20): the job of
# bench/throughput-bench.sh (planted, 1M rows, 2 trainers x 2 workers, 2
# epochs, make run's validation split scored after each, data.eval on each
# model kept; SHAPE=tcp-nosplit: data.eval scored after each) under
# `perf record -e cpu-clock -F 2000 -g`, its samples given to thread roles
# and, for the workers and the eval threads, to parts by leaf function
# (bench/job-parts.py). Trees side by side, interleaved, REPS times.
#   bench/job-profile.sh SCRATCH TREE [TREE ...]
# TREE: a checkout with bin/ and scripts/ built (. for this one). ROWS=1000000
# REPS=1. SHAPE=makerun (default: the job as make run runs it, ipc:// and
# make run's validation split) or tcp-nosplit (bench_shape in
# bench/bench-lib.sh). One JSON line per job on stdout, naming the shape.
# Needs perf (root, or perf_event_paranoid <= 1) and python3.
set -u
cd "$(dirname "$0")/.."
T=$1; shift
REPS=${REPS:-1}; ROWS=${ROWS:-1000000}; HZ=2000
command -v perf >/dev/null && command -v python3 >/dev/null ||
    { echo "job-profile: needs perf and python3" >&2; exit 1; }
mkdir -p "$T"
. bench/bench-lib.sh
bench_data "$ROWS" 200000

# one TREE LABEL: record TREE's job, print its line
one() {
    local tree=$1 rd=$T/prof-$2
    rm -rf "$rd"
    bench_shape "$tree"
    [ -z "$SHAPE_NOTE" ] || echo "job-profile: $2 ($tree): $SHAPE_NOTE" >&2
    perf record -q -e cpu-clock -F "$HZ" -g -o "$rd.data" -- \
        "$tree/scripts/shadow-launch" "$tree/conf/local.yaml" --quiet $(bench_noplots "$tree") \
        --set "job.run_dir=$rd" --set "data.train=$TRAIN" --set "data.eval=$EVAL" \
        "${SHAPE_ARGS[@]}" >"$rd.log" 2>&1 || { echo "job-profile: $2 job failed (see $rd.log)" >&2; return 1; }
    local ex load ne
    ex=$(bench_field "$rd/result.json" examples)
    ne=$(bench_field "$rd/result.json" eval_ne)
    load=$(cut -d' ' -f1 /proc/loadavg)
    perf script -i "$rd.data" -F pid,tid,comm,ip,sym,dso 2>/dev/null |
        python3 bench/job-parts.py "$ex" "$HZ" |
        sed "s|^{|{\"shape\":\"${SHAPE:-makerun}\",\"tree\":\"$2\",\"load\":$load,\"eval_ne\":$ne,|"
    rm -f "$rd.data"
}

for ((rep = 0; rep < REPS; rep++)); do
    i=0
    for tree in "$@"; do
        one "$tree" "$i-$rep" || exit 1
        i=$((i + 1))
    done
done
