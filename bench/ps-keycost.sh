#!/usr/bin/env bash
# ps-keycost.sh SCRATCH BASE_DIR: what a key costs the embedding PSs of make
# run's job (conf/local.yaml: 2 embedding PSs, 2 trainers), this checkout
# against BASE_DIR (another built checkout), REPS (default 3) interleaved pairs.
# Data: TRAIN (default data/planted-train.tsv, make run's 1M rows) and a
# 2,000-row eval file cut from EVAL (default data/planted-eval.tsv), so that
# read-only scoring adds few keys to the count. Per job, from the PSs' exit
# log lines ("cpu: ..." and "stats at exit"): ns of PS CPU per key operation
# (keys looked up + keys pushed, both PSs), split into the service threads
# and ZeroMQ's I/O threads, and the whole job's CPU per trained example and
# its system time (bash `time` of shadow-launch, which waits for everything it
# starts; a small TRAIN shows what first touches of memory cost). JSON lines:
# keycost_job per job, keycost_ratio per pair (base / here; > 1: here is
# cheaper) and keycost_median at the end.
set -u
cd "$(dirname "$0")/.."
T=${1:?usage: bench/ps-keycost.sh SCRATCH BASE_DIR}
BASE=${2:?usage: bench/ps-keycost.sh SCRATCH BASE_DIR}
REPS=${REPS:-3}
TRAIN=${TRAIN:-data/planted-train.tsv}
EVAL=${EVAL:-data/planted-eval.tsv}
command -v jq >/dev/null || { echo "ps-keycost: jq is not installed" >&2; exit 1; }
[ -s "$TRAIN" ] && [ -s "$EVAL" ] || { echo "ps-keycost: no $TRAIN or $EVAL (make run makes them)" >&2; exit 1; }
mkdir -p "$T"
TRAIN=$(realpath "$TRAIN")
head -n 2000 "$EVAL" >"$T/eval-2k.tsv"

# job NAME ROOT: one job of ROOT's binaries; prints its keycost_job line
job() {
    local name=$1 root=$2 run="$T/run-$1" t
    rm -rf "$run"
    t=$( { TIMEFORMAT='%U %S'; time "$root/scripts/shadow-launch" "$root/conf/local.yaml" --quiet \
        $("$root/scripts/shadow-launch" --help 2>/dev/null | grep -o -- --no-plots) \
        --set "job.run_dir=$run" --set "data.train=$TRAIN" --set "data.eval=$T/eval-2k.tsv" \
        --set data.valid_fraction=0.02 >"$T/launch-$name.log" 2>&1; } 2>&1 ) \
        || { echo "ps-keycost: $name job failed: $T/launch-$name.log" >&2; return 1; }
    # the exit stats are JSON after "stats at exit: "; cpu from the line before
    for f in "$run"/logs/ps-e*.log; do
        sed -n 's/.*stats at exit: //p' "$f" | tail -n 1
    done | jq -s --arg name "$name" --arg t "$t" \
        --argjson ex "$(jq '.examples' "$run/result.json")" \
        --argjson svc "$(sed -n 's/.* cpu: .* service threads \([0-9.]*\) s.*/\1/p' \
            "$run"/logs/ps-e*.log | jq -s 'add')" \
        '{bench: "keycost_job", build: $name,
          key_ops: (map(.keys_looked_up + .keys_pushed) | add),
          ps_cpu_s: (map(.cpu_s) | add), zmq_io_s: (map(.cpu_zmq_io_s) | add),
          svc_s: $svc, examples: $ex,
          job_cpu_s: ($t | split(" ") | map(tonumber) | add),
          job_sys_s: ($t | split(" ") | .[1] | tonumber)}
         | . + {ns_per_key_op: (1e9 * .ps_cpu_s / .key_ops),
                svc_ns_per_key_op: (1e9 * .svc_s / .key_ops),
                zmq_ns_per_key_op: (1e9 * .zmq_io_s / .key_ops),
                job_us_per_example: (1e6 * .job_cpu_s / .examples)}'
}

: >"$T/jobs.jsonl"
for ((i = 0; i < REPS; i++)); do
    if ((i % 2 == 0)); then order="base here"; else order="here base"; fi
    for b in $order; do
        root=$PWD
        [ "$b" = base ] && root=$BASE
        job "$b" "$root" | tee -a "$T/jobs.jsonl" | jq -c . || exit 1
    done
    jq -s -c '(map(select(.build == "base")) | last) as $b | (map(select(.build == "here")) | last)
        as $h | {bench: "keycost_ratio", ns_per_key_op: ($b.ns_per_key_op / $h.ns_per_key_op),
        svc: ($b.svc_ns_per_key_op / $h.svc_ns_per_key_op),
        job_us_per_example: ($b.job_us_per_example / $h.job_us_per_example)}' "$T/jobs.jsonl"
done
jq -s -c 'def med: sort | if length % 2 == 1 then .[length / 2 | floor]
        else (.[length / 2 - 1] + .[length / 2]) / 2 end;
    group_by(.build) | map({build: .[0].build, ns_per_key_op: (map(.ns_per_key_op) | med),
        svc_ns_per_key_op: (map(.svc_ns_per_key_op) | med),
        zmq_ns_per_key_op: (map(.zmq_ns_per_key_op) | med),
        job_us_per_example: (map(.job_us_per_example) | med),
        job_sys_s: (map(.job_sys_s) | med)})
    | {bench: "keycost_median", builds: .}' "$T/jobs.jsonl"
