#!/usr/bin/env bash
# Throughput of make run's job (issue 11): this tree against an older
# revision and the PyTorch DLRM peer, side by side in one run.
#
# Each repetition runs, back to back: the job of BASE_REV (its own
# conf/local.yaml and binaries, built once in the scratch dir) and the job of
# this tree (in turn first: the older tree in even repetitions), then
# bench/peers/dlrm_torch.py (2 Hogwild processes, 2 epochs)
# on the same planted data (make run's: 1M rows, seed 7). Ratios are taken
# within a repetition, then the median over REPS. Besides examples/s, every
# job reports examples per CPU-second summed over all its processes (bash's
# `time` of the launcher: trainers and PSs are its waited-for children),
# which a noisy shared machine moves much less, and, for this tree, where
# the CPU went (PSs, workers, shadow thread, ZeroMQ I/O threads, the rest).
# The peer reports its training processes' CPU the same way (user + system
# of the waited-for processes), so the ratio per CPU-second is printed too.
#
#   BASE_REV=8b78f82 (the last commit before the throughput work)
#   BASE_DIR=PATH: an already built tree (bin/ ready) to compare against
#     instead of building BASE_REV (its name is still BASE_REV's in the output)
#   REPS=3  PEER=1 (0: skip the PyTorch peer)  ROWS=1000000
#   SHAPE=makerun (default): the job as make run runs it (the launcher's
#     ipc:// endpoints, make run's data.valid_fraction); SHAPE=tcp-nosplit:
#     free tcp ports and no validation split, the shape of the figures
#     before issue 20's eighth pass (bench_shape in bench/bench-lib.sh).
#     The examples counted are those trained (the validation lines are not).
#   NOW_SETS="" BASE_SETS="": extra --set KEY=VALUE words for this tree's job
#     and the older tree's (BASE_DIR=. BASE_REV=r1 NOW_SETS=trainer.round_batches=2
#     compares two settings of this tree, pair by pair)
# Arg: scratch dir. JSON lines on stdout.
set -u
cd "$(dirname "$0")/.."
T=$1; REPS=${REPS:-3}; BASE_REV=${BASE_REV:-8b78f82}; PEER=${PEER:-1}
SHAPE=${SHAPE:-makerun}
ROWS=${ROWS:-1000000}
. bench/bench-lib.sh
bench_data "$ROWS" 200000

# the older tree, built once
BEFORE=""
if [ -n "${BASE_DIR:-}" ]; then
    [ -x "$BASE_DIR/scripts/shadow-launch" ] && [ -d "$BASE_DIR/bin" ] && BEFORE=$BASE_DIR ||
        echo "throughput-bench: BASE_DIR=$BASE_DIR is not a built tree; comparing without it" >&2
elif git rev-parse --verify -q "$BASE_REV^{commit}" >/dev/null 2>&1; then
    mkdir -p "$T/before"
    if git archive "$BASE_REV" | tar -x -C "$T/before" &&
        make -C "$T/before" -j2 build >"$T/before-build.log" 2>&1; then
        BEFORE=$T/before
    else
        echo "throughput-bench: cannot build $BASE_REV (see $T/before-build.log); comparing without it" >&2
    fi
else
    echo "throughput-bench: revision $BASE_REV not in this clone; comparing without it" >&2
fi
PY=""
if [ "$PEER" = 1 ]; then
    for c in /usr/bin/python3 python3; do
        "$c" -c 'import torch, numpy' 2>/dev/null && { PY=$c; break; }
    done
    [ -n "$PY" ] || echo "throughput-bench: no python3 with torch (apt-get install python3-torch): no peer" >&2
fi

# job TREE LABEL SETS: run TREE's default job with the extra --set words SETS;
# sets EPS, EXCPU, NE, and the CPU split
job() {
    local tree=$1 rd=$T/run-$2 t w sets=()
    for w in ${3:-}; do sets+=(--set "$w"); done
    rm -rf "$rd"
    bench_shape "$tree"
    [ -z "$SHAPE_NOTE" ] || echo "throughput-bench: $2 ($tree): $SHAPE_NOTE" >&2
    TIMEFORMAT="%R %U %S"
    t=$( { time "$tree/scripts/shadow-launch" "$tree/conf/local.yaml" --quiet $(bench_noplots "$tree") \
        --set "job.run_dir=$rd" --set "data.train=$TRAIN" --set "data.eval=$EVAL" \
        "${SHAPE_ARGS[@]}" "${sets[@]}" >"$T/launch-$2.log" 2>&1; } 2>&1 ) ||
        { echo "throughput-bench: $2 job failed" >&2; tail -n 20 "$T/launch-$2.log" >&2; exit 1; }
    read -r _ u s <<<"$(echo "$t" | tail -n 1)"
    LOAD=$(cut -d' ' -f1 /proc/loadavg)
    EPS=$(bench_field "$rd/result.json" eps)
    NE=$(bench_field "$rd/result.json" eval_ne)
    CPU=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.3f", u + s }')
    local ex; ex=$(bench_field "$rd/result.json" examples)
    EXCPU=$(awk -v e="$ex" -v c="$CPU" 'BEGIN { printf "%.0f", e / c }')
    SPLIT=""; WUS=null
    if grep -q '"cpu_workers_s"' "$rd/result-trainer-0.json" 2>/dev/null; then
        local k v ps=0 f
        for f in "$rd"/logs/ps-*.log; do
            v=$(sed -n 's/.* cpu: \([0-9.]*\) s total.*/\1/p' "$f" | tail -n 1)
            ps=$(awk -v a="$ps" -v b="${v:-0}" 'BEGIN { print a + b }')
        done
        SPLIT="\"cpu_s\":$CPU,\"ps_s\":$ps"
        for k in workers shadow zmq_io other; do
            v=0
            for f in "$rd"/result-trainer-*.json; do
                v=$(awk -v a="$v" -v b="$(bench_field "$f" "cpu_${k}_s")" 'BEGIN { print a + b }')
            done
            SPLIT="$SPLIT,\"trainer_${k}_s\":$v"
            [ "$k" = workers ] && WUS=$(awk -v w="$v" -v e="$ex" 'BEGIN { printf "%.3f", w * 1e6 / e }')
        done
    fi
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.4f", a / b; else print "null" }'; }
declare -A V
add() { V[$1]="${V[$1]:-} $2"; }
# run_before / run_now REP: one job of that arm, its line, its values kept
run_before() {
    job "$BEFORE" before "${BASE_SETS:-}"; b_eps=$EPS; b_cpu=$EXCPU; b_wus=$WUS
    add before_eps "$EPS"; add before_excpu "$EXCPU"; add before_ne "$NE"
    [ "$WUS" != null ] && add before_wus "$WUS"
    echo "{\"bench\":\"throughput_job\",\"shape\":\"$SHAPE\",\"tree\":\"$BASE_REV\",\"rep\":$1,\"load\":$LOAD,\"eps\":$EPS,\"examples_per_cpu_s\":$EXCPU,\"eval_ne\":$NE,\"worker_us_per_example\":$WUS,\"cpu_split\":{$SPLIT}}"
}
run_now() {
    job . now "${NOW_SETS:-}"; n_eps=$EPS; n_excpu=$EXCPU; n_wus=$WUS
    add now_eps "$EPS"; add now_excpu "$EXCPU"; add now_ne "$NE"
    [ "$WUS" != null ] && add now_wus "$WUS"
    echo "{\"bench\":\"throughput_job\",\"shape\":\"$SHAPE\",\"tree\":\"now\",\"rep\":$1,\"load\":$LOAD,\"eps\":$EPS,\"examples_per_cpu_s\":$EXCPU,\"eval_ne\":$NE,\"worker_us_per_example\":$WUS,\"cpu_split\":{$SPLIT}}"
}
# The two arms alternate which runs first (even repetitions the older tree):
# on this 2-core machine the first job of a pair measured 3-7% cheaper than
# the second, a bias a fixed order puts into every ratio.
for ((rep = 0; rep < REPS; rep++)); do
    if [ -z "$BEFORE" ]; then
        run_now "$rep"
    elif ((rep % 2 == 0)); then
        run_before "$rep"; run_now "$rep"
    else
        run_now "$rep"; run_before "$rep"
    fi
    if [ -n "$BEFORE" ]; then
        add eps_ratio "$(ratio "$n_eps" "$b_eps")"; add excpu_ratio "$(ratio "$n_excpu" "$b_cpu")"
        [ "$n_wus" != null ] && [ "$b_wus" != null ] && add wus_ratio "$(ratio "$b_wus" "$n_wus")"
    fi
    if [ -n "$PY" ]; then
        line=$("$PY" bench/peers/dlrm_torch.py --train "$TRAIN" --eval "$EVAL" --seed 1 \
            --epochs 2 --procs 2 2>"$T/peer.log" | tail -n 1)
        p_eps=$(bench_field - eps <<<"$line")
        p_ne=$(bench_field - eval_ne <<<"$line")
        p_excpu=$(bench_field - examples_per_cpu_s <<<"$line")
        if [ -n "$p_eps" ]; then
            add peer_eps "$p_eps"; add peer_ne "$p_ne"; add vs_peer "$(ratio "$n_eps" "$p_eps")"
            if [ -n "$p_excpu" ]; then
                add peer_excpu "$p_excpu"; add vs_peer_cpu "$(ratio "$n_excpu" "$p_excpu")"
            fi
            echo "{\"bench\":\"throughput_job\",\"tree\":\"pytorch_dlrm\",\"rep\":$rep,\"eps\":$p_eps,\"examples_per_cpu_s\":${p_excpu:-null},\"eval_ne\":$p_ne}"
        else
            echo "throughput-bench: the PyTorch peer failed (see $T/peer.log)" >&2
        fi
    fi
done
m() { if [ -n "${V[$1]:-}" ]; then echo "${V[$1]}" | median; else echo null; fi; }
echo "{\"bench\":\"throughput\",\"shape\":\"$SHAPE\",\"reps\":$REPS,\"rows\":$ROWS,\"before_rev\":\"$BASE_REV\"," \
    "\"before_eps\":$(m before_eps),\"now_eps\":$(m now_eps),\"eps_ratio\":$(m eps_ratio)," \
    "\"before_examples_per_cpu_s\":$(m before_excpu),\"now_examples_per_cpu_s\":$(m now_excpu)," \
    "\"examples_per_cpu_s_ratio\":$(m excpu_ratio),\"before_worker_us_per_example\":$(m before_wus)," \
    "\"now_worker_us_per_example\":$(m now_wus),\"worker_cpu_ratio_before_over_now\":$(m wus_ratio),\"before_eval_ne\":$(m before_ne)," \
    "\"now_eval_ne\":$(m now_ne),\"pytorch_eps\":$(m peer_eps),\"pytorch_eval_ne\":$(m peer_ne)," \
    "\"now_vs_pytorch_eps\":$(m vs_peer),\"pytorch_examples_per_cpu_s\":$(m peer_excpu)," \
    "\"now_vs_pytorch_examples_per_cpu_s\":$(m vs_peer_cpu)}" | tr -d '\n' | sed 's/, "/,"/g'
echo
