#!/usr/bin/env bash
# bench-report.sh [RESULTS.jsonl] - turn benchmark JSON lines into markdown
# tables (stdout) and docs/sync_bench.png (examples/s relative to none and
# eval NE per sync setting, with gnuplot when installed).
set -eu
cd "$(dirname "$0")/.."
IN=${1:-bench/results/latest.jsonl}
[ -s "$IN" ] || { echo "bench-report: no results in $IN (run make bench)" >&2; exit 1; }
get() { sed -n "s/.*\"$2\":\"\{0,1\}\([^,\"}]*\)\"\{0,1\}.*/\1/p" <<<"$1"; }

echo "### Parameter server (one embedding PS over TCP loopback)"
echo
echo "| measurement | handler | value |"
echo "|---|---|---|"
grep '"bench":"kv"' "$IN" | while read -r l; do
    echo "| 10M keys x 1 float, push (median ms) | $(get "$l" handler) | $(get "$l" push_ms_median) |"
    echo "| 10M keys x 1 float, pull (median ms) | $(get "$l" handler) | $(get "$l" pull_ms_median) |"
done
grep '"bench":"rows"' "$IN" | while read -r l; do
    echo "| LOOKUP rows/s, dim 16, 4096 keys/request, $(get "$l" clients) client(s) | rowwise_adagrad | $(get "$l" lookup_rows_per_s) |"
    echo "| PUSH rows/s, dim 16, 4096 keys/request, $(get "$l" clients) client(s) | rowwise_adagrad | $(get "$l" push_rows_per_s) |"
done
if grep -q '"bench":"embed_' "$IN"; then
    echo
    echo "### Embedding shard with tables.max_memory_bytes (Zipf(1.1) keys, docs/embeddings.md)"
    echo
    echo "| measurement | value |"
    echo "|---|---|"
    grep '"bench":"embed_speed"' "$IN" | while read -r l; do
        echo "| key space / draws / distinct keys drawn | $(get "$l" keys) / $(get "$l" stream) / $(get "$l" distinct_keys_seen) |"
        echo "| cap, bytes | $(get "$l" cap_bytes) |"
        echo "| bounded / unbounded lookup+push speed, interleaved (CPU time) | $(get "$l" ratio_bounded_vs_unbounded) |"
        echo "| with admit_after 2 / unbounded | $(get "$l" ratio_bounded_admit_vs_unbounded) |"
        echo "| every key of ranks 1-1000 kept its row | $(get "$l" retention_ok) |"
    done
    grep '"bench":"embed_rss"' "$IN" | while read -r l; do
        echo "| largest storage_bytes | $(get "$l" storage_bytes_max) |"
        echo "| VmHWM - baseline, bytes (/ cap) | $(get "$l" hwm_over_base_bytes) ($(get "$l" hwm_over_base_per_cap)) |"
    done
    grep '"bench":"embed_alone"' "$IN" | while read -r l; do
        echo "| bounded / unbounded speed, each alone (CPU time) | $(get "$l" ratio_bounded_vs_unbounded) |"
    done
fi
echo
echo "### Trainer (default model, batch 128, planted data, 2 embedding PSs, all on 2 cores)"
echo
echo "| trainers x workers | examples/s (median) | runs | / PyTorch 15k |"
echo "|---|---|---|---|"
grep '"bench":"trainer"' "$IN" | while read -r l; do
    runs=$(sed -n 's/.*"eps_runs":\[\([^]]*\)\].*/\1/p' <<<"$l")
    echo "| $(get "$l" trainers) x $(get "$l" workers) | $(get "$l" eps_median) | $runs | $(get "$l" ratio_vs_pytorch_15k) |"
done
l=$(grep '"bench":"model"' "$IN" | head -n 1 || true)
[ -n "$l" ] && { echo; echo "Dense model alone, one thread: \`$l\`"; }
echo
echo "### Sync (2 trainers x 1 worker, same data budget per setting)"
echo
echo "| setting | examples/s | / none | eval NE | rounds/min | sync gap | sync CPU s |"
echo "|---|---|---|---|---|---|---|"
grep '"bench":"sync"' "$IN" | while read -r l; do
    echo "| $(get "$l" setting) | $(get "$l" eps) | $(get "$l" eps_ratio_vs_none) | $(get "$l" eval_ne) | $(get "$l" rounds_per_min) | $(get "$l" sync_gap) | $(get "$l" sync_cpu_s) |"
done
if command -v gnuplot >/dev/null && grep -q '"bench":"sync"' "$IN"; then
    D=$(mktemp); trap 'rm -f "$D"' EXIT
    grep '"bench":"sync"' "$IN" | while read -r l; do
        echo "\"$(get "$l" setting)\" $(get "$l" eps_ratio_vs_none) $(get "$l" eval_ne)"
    done >"$D"
    gnuplot <<GP
set terminal pngcairo size 1200,560 noenhanced
set bmargin 9
set output 'docs/sync_bench.png'
set multiplot layout 1,2 title 'sync settings, 2 trainers x 1 worker, same data budget'
set style data histograms
set style fill solid 0.7
set xtics rotate by -45 font ',8'
set grid ytics
set yrange [0:*]
set title 'examples/s relative to none'
plot '$D' using 2:xtic(1) notitle lc rgb '#4477aa'
set title 'eval NE (lower is better)'
set yrange [*:*]
stats '$D' using 3 nooutput
set yrange [STATS_min - 0.01 : STATS_max + 0.01]
plot '$D' using 3:xtic(1) notitle lc rgb '#cc6677'
unset multiplot
GP
    echo
    echo "![sync benchmark](sync_bench.png)"
fi
