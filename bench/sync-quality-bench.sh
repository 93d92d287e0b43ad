#!/usr/bin/env bash
# The paper's S-* vs FR-* quality question (issue 7): eval NE of the output
# model for none, s-easgd, s-ma, s-bmuf and fr-easgd, fr-ma, fr-bmuf at
# sync.gap 10, over SEEDS job seeds (dense and embedding initialization, and
# so the Hogwild interleaving), on ROWS planted training rows, with the
# default job otherwise (conf/local.yaml's model and optimizers, 2 trainers x
# 2 workers) but one epoch and the shadow thread unthrottled (cpu_share 0, as
# in the paper: rounds back to back). Settings run interleaved within each seed. One JSON line per
# setting: mean, std (sample) and every run's eval NE, and the median eps.
# Arg: scratch dir.
set -u
cd "$(dirname "$0")/.."
T=$1; ROWS=${SYNCQ_ROWS:-1000000}; SEEDS=${SEEDS:-"1 2 3 4 5"}
. bench/bench-lib.sh
bench_data "$ROWS" 100000
bench_job 2
SETTINGS="none s-easgd s-ma s-bmuf fr-easgd fr-ma fr-bmuf"
declare -A NE EPS
for seed in $SEEDS; do
    for a in $SETTINGS; do
        bench_run --set job.seed="$seed" --set sync.algorithm=$a --set sync.gap=10 \
            --set ps.threads=2 --set trainer.epochs=1 --set sync.cpu_share=0 || exit 1
        NE[$a]="${NE[$a]:-} $(bench_field "$T/run/result.json" eval_ne)"
        EPS[$a]="${EPS[$a]:-} $(bench_field "$T/run/result.json" eps)"
    done
done
for a in $SETTINGS; do
    echo "${NE[$a]}" | tr ' ' '\n' | grep -v '^$' | awk -v a="$a" -v eps="$(echo "${EPS[$a]}" | median)" '
        { v[NR] = $1; s += $1 }
        END { m = s / NR; for (i = 1; i <= NR; i++) q += (v[i] - m) ^ 2
              sd = NR > 1 ? sqrt(q / (NR - 1)) : 0
              printf "{\"bench\":\"sync_quality\",\"setting\":\"%s\",\"gap\":10,\"seeds\":%d,\"eval_ne_mean\":%.5f,\"eval_ne_std\":%.5f,\"eval_ne_runs\":[", a, NR, m, sd
              for (i = 1; i <= NR; i++) printf "%s%s", v[i], i < NR ? "," : ""
              printf "],\"eps_median\":%s}\n", eps }'
done
