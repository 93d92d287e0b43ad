#!/usr/bin/env bash
# make bench: run every benchmark side by side in one run and print JSON
# lines (one per measurement) plus ratios. Results also go to
# bench/results/latest.jsonl.  BENCH=ps|embed|rows|parse|trainer|sync|cluster|throughput|default|curve runs one
# of them; BENCH=syncq runs the S-* vs FR-* quality study (long, not in all).
# BENCH=embed sizes: KEYS (key space, default 2000000), STREAM (draws, default
# 2 x KEYS), CAP_MIB (max_memory_bytes, default 16), ADMIT (default 2); the
# full size is KEYS=50000000 CAP_MIB=256 (about 2 minutes, 1.5 GiB). BENCH=scaling
# measures the inputs of docs/scaling.md's cluster model and checks it against the
# job shapes that fit this machine (about 5 minutes on 2 cores, not in all).
# BENCH=cost: whole-job CPU per example for 1-8 PSs and 1-4 trainers
# (bench/cost-bench.sh; COST_BASE=DIR pairs every run with another checkout's).
set -u
cd "$(dirname "$0")/.."
BUILD=${1:-build/rel}
WHICH=${BENCH:-all}
T=$(mktemp -d "${TMPDIR:-/tmp}/ss-bench.XXXXXX")
PIDS=()
trap 'for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done; rm -rf "$T"' EXIT
mkdir -p bench/results
OUT=bench/results/latest.jsonl
: >"$OUT"
emit() { echo "$1"; echo "$1" >>"$OUT"; }

. bench/bench-lib.sh

# ps_job DIM: a one-PS job file
ps_job() {
    cat >"$T/ps.yaml" <<YAML
job: {run_dir: $T/run}
cluster:
  embedding: [tcp://127.0.0.1:$(bench_port)]
  sync: []
  trainers: [tcp://127.0.0.1:$(bench_port)]
model: {embedding_dim: $1, bottom_mlp: [64, $1], first_order: false}
ps: {threads: 2}
tables: {capacity_rows: 20000000, admit_after: 0}  # storage speed: every key stored
YAML
}

start_ps() {  # extra args
    bin/shadow-ps -c "$T/ps.yaml" --role embedding --shard 0 "$@" >"$T/ps.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do grep -q "ready:" "$T/ps.log" && return 0; sleep 0.1; done
    cat "$T/ps.log"; exit 1
}
stop_ps() { kill -TERM "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null; }

if [ "$WHICH" = all ] || [ "$WHICH" = ps ]; then
    ps_job 1
    start_ps --bench-noop
    noop=$("$BUILD/bench/ps_bench" -c "$T/ps.yaml" kv --keys 10000000 --reps 5) || exit 1
    stop_ps
    start_ps
    real=$("$BUILD/bench/ps_bench" -c "$T/ps.yaml" kv --keys 10000000 --reps 5) || exit 1
    stop_ps
    emit "$(echo "$noop" | sed 's/^{/{"handler":"noop",/')"
    emit "$(echo "$real" | sed 's/^{/{"handler":"rowwise_adagrad",/')"
    ps_job 16
    for c in 1 2; do
        start_ps
        emit "$("$BUILD/bench/ps_bench" -c "$T/ps.yaml" rows --clients $c --seconds 2)" || exit 1
        stop_ps
    done
    # CPU per request on the PS and the client: light (1 client), busy (8)
    for c in 1 8; do
        start_ps
        emit "$("$BUILD/bench/ps_bench" -c "$T/ps.yaml" req --clients $c --seconds 2)" || exit 1
        stop_ps
    done
    # ps-lite on this machine (issue 2): push 283-388 ms, pull 548-637 ms for 10M keys
    pm=$(bench_field - push_ms_median <<<"$real")
    lm=$(bench_field - pull_ms_median <<<"$real")
    emit "$(awk -v p="$pm" -v l="$lm" 'BEGIN { printf "{\"bench\":\"kv_vs_pslite\",\"push_speedup_vs_pslite_best\":%.2f,\"pull_speedup_vs_pslite_best\":%.2f}\n", 283 / p, 548 / l }')"
fi
if [ "$WHICH" = all ] || [ "$WHICH" = embed ]; then
    ek=${KEYS:-2000000}
    eargs=(--keys "$ek" --stream "${STREAM:-$((2 * ek))}" --cap-mib "${CAP_MIB:-16}")
    out=$("$BUILD/bench/embed_bench" speed "${eargs[@]}" --admit "${ADMIT:-2}") || exit 1
    emit "$out"
    out=$("$BUILD/bench/embed_bench" rss "${eargs[@]}") || exit 1
    emit "$out"
    alone=$("$BUILD/bench/embed_bench" rss "${eargs[@]}" --cap-mib 0) || exit 1
    b=$(bench_field - keys_per_cpu_s <<<"$out")
    u=$(bench_field - keys_per_cpu_s <<<"$alone")
    emit "$(awk -v b="$b" -v u="$u" 'BEGIN { printf "{\"bench\":\"embed_alone\",\"bounded_keys_per_cpu_s\":%.0f,\"unbounded_keys_per_cpu_s\":%.0f,\"ratio_bounded_vs_unbounded\":%.3f}\n", b, u, b / u }')"
fi
if [ "$WHICH" = all ] || [ "$WHICH" = embed ] || [ "$WHICH" = rows ]; then
    # the PS's row work per key and per example, a job's request shape (docs/per-core.md)
    out=$("$BUILD/bench/embed_bench" rows) || exit 1
    emit "$out"
fi
if [ "$WHICH" = all ] || [ "$WHICH" = parse ]; then
    # ns per Criteo line, scalar reference vs AVX-512 parser (docs/per-core.md)
    out=$("$BUILD/bench/parse_bench") || exit 1
    emit "$out"
    # ns per key of a worker's batch de-duplication against a plain walk
    out=$("$BUILD/bench/dedup_bench") || exit 1
    emit "$out"
fi
if [ "$WHICH" = all ] || [ "$WHICH" = trainer ]; then
    emit "$("$BUILD/bench/model_bench" 3 | sed 's/^{/{"bench":"model",/')"
    [ -x bench/trainer-bench.sh ] && bench/trainer-bench.sh "$T" | while read -r l; do emit "$l"; done
fi
if [ "$WHICH" = all ] || [ "$WHICH" = sync ]; then
    [ -x bench/sync-bench.sh ] && bench/sync-bench.sh "$T" | while read -r l; do emit "$l"; done
fi
if [ "$WHICH" = syncq ]; then  # long (35 jobs on 1M rows): not part of "all"
    bench/sync-quality-bench.sh "$T" | while read -r l; do emit "$l"; done
fi
if [ "$WHICH" = scaling ]; then  # about 5 minutes: not part of "all"
    BUILD=$BUILD bench/scaling-bench.sh "$T" | while read -r l; do emit "$l"; done
fi
if [ "$WHICH" = all ] || [ "$WHICH" = cost ]; then  # the request tax (issue 19), ~3 minutes
    bench/cost-bench.sh "$T" | while read -r l; do emit "$l"; done
fi
if [ "$WHICH" = all ] || [ "$WHICH" = cluster ]; then  # needs root (namespaces), else skips
    bench/cluster-bench.sh "$T" | while read -r l; do emit "$l"; done
fi
if [ "$WHICH" = all ] || [ "$WHICH" = throughput ]; then
    bench/throughput-bench.sh "$T" | while read -r l; do emit "$l"; done
fi
if [ "$WHICH" = all ] || [ "$WHICH" = default ]; then
    bench/default-sync-bench.sh "$T" | while read -r l; do emit "$l"; done
fi
if [ "$WHICH" = all ] || [ "$WHICH" = curve ]; then
    bench/curve-bench.sh "$T" | while read -r l; do emit "$l"; done
fi
exit 0
