#!/usr/bin/env bash
# The cost of CURVE (issue 9): make run's job (conf/local.yaml: 2 embedding
# PSs, 2 trainers x 2 workers, s-ma) on planted data, with security.curve off
# and on, back to back in each repetition (the order alternates), keys from
# shadow-ctl keygen. Each job reports examples/s (the trainers' sum) and
# examples per CPU-second over all its processes (bash's `time` of the
# launcher: PSs and trainers are its waited-for children); ratios on/off are
# taken within a repetition, then the median over REPS.
#
#   REPS=3  ROWS=300000 (training rows; 1 epoch)
# Arg: scratch dir. JSON lines on stdout.
set -u
cd "$(dirname "$0")/.."
T=$1; REPS=${REPS:-3}; ROWS=${ROWS:-300000}
. bench/bench-lib.sh
bench_data "$ROWS" 50000

K=$T/curve-keys
rm -rf "$K"; mkdir -p "$K"
for n in server trainer; do bin/shadow-ctl keygen "$K/$n" >/dev/null || exit 1; done
cp "$K/trainer.pub" "$K/authorized"
CURVE=(--set security.curve=true --set "security.server_key=$K/server.key"
       --set "security.client_key=$K/trainer.key" --set "security.authorized=$K/authorized")

# job LABEL [--set ...]: sets EPS and EXCPU
job() {
    local label=$1 rd=$T/run-curve-$1 t u s; shift
    rm -rf "$rd"
    TIMEFORMAT="%R %U %S"
    t=$( { time scripts/shadow-launch conf/local.yaml --quiet --no-plots \
        --set "job.run_dir=$rd" --set "data.train=$TRAIN" --set "data.eval=$EVAL" \
        --set trainer.epochs=1 \
        --set "cluster.embedding=[tcp://127.0.0.1:$(bench_port),tcp://127.0.0.1:$(bench_port)]" \
        --set "cluster.sync=[tcp://127.0.0.1:$(bench_port)]" \
        --set "cluster.trainers=[tcp://127.0.0.1:$(bench_port),tcp://127.0.0.1:$(bench_port)]" \
        "$@" >"$T/launch-curve-$label.log" 2>&1; } 2>&1 ) ||
        { echo "curve-bench: $label job failed" >&2; tail -n 20 "$T/launch-curve-$label.log" >&2
          exit 1; }
    read -r _ u s <<<"$(echo "$t" | tail -n 1)"
    EPS=$(bench_field "$rd/result.json" eps)
    EXCPU=$(awk -v e="$(bench_field "$rd/result.json" examples)" -v u="$u" -v s="$s" \
        'BEGIN { printf "%.0f", e / (u + s) }')
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.4f", a / b; else print "null" }'; }
declare -A V
add() { V[$1]="${V[$1]:-} $2"; }
for ((rep = 0; rep < REPS; rep++)); do
    for mode in $( ((rep % 2)) && echo "on off" || echo "off on"); do
        if [ "$mode" = on ]; then job on "${CURVE[@]}"; else job off; fi
        eval "${mode}_eps=$EPS ${mode}_cpu=$EXCPU"
        add "${mode}_eps" "$EPS"; add "${mode}_excpu" "$EXCPU"
        printf '{"bench":"curve_job","curve":%s,"rep":%d,"eps":%s,"examples_per_cpu_s":%s}\n' \
            "$([ $mode = on ] && echo true || echo false)" "$rep" "$EPS" "$EXCPU"
    done
    add eps_ratio "$(ratio "$on_eps" "$off_eps")"
    add excpu_ratio "$(ratio "$on_cpu" "$off_cpu")"
done
m() { echo "${V[$1]}" | median; }
echo "{\"bench\":\"curve\",\"reps\":$REPS,\"rows\":$ROWS,\"plain_eps\":$(m off_eps)," \
    "\"curve_eps\":$(m on_eps),\"eps_ratio\":$(m eps_ratio)," \
    "\"plain_examples_per_cpu_s\":$(m off_excpu),\"curve_examples_per_cpu_s\":$(m on_excpu)," \
    "\"examples_per_cpu_s_ratio\":$(m excpu_ratio)}" | tr -d '\n' | sed 's/, "/,"/g'
echo
