#!/usr/bin/env bash
# score_bench.sh - shadow-score next to --predict on the default model.
#
#   bench/score_bench.sh [ROWS] [EVAL_ROWS] [REPEATS]
#
# Trains the default model (conf/local.yaml's keys: 2 embedding PSs, 2
# trainers, s-ma) on ROWS (default 200000) planted rows, exports it, then
# scores EVAL_ROWS (default 200000) planted rows REPEATS times (default 3),
# alternating: scripts/shadow-launch --predict (PSs and a trainer started,
# the model restored, trainer.workers scoring threads) and shadow-score (one
# thread, no PS), each under /usr/bin/time -v. Prints one JSON object per
# run (wall seconds; CPU seconds, user + system, of every process of the run:
# for --predict the launcher, the PSs and the trainer from start to exit;
# predictions/s as each reports it, over its scoring alone; peak RSS: for
# --predict the largest process of the launch, for shadow-score its own) and
# checks that the two outputs are byte-identical. On a loaded machine wall
# times say more about the load than the programs (a launch of 4 processes
# gets more of a shared CPU than one thread): compare CPU seconds.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/bin
ROWS=${1:-200000}; EVAL_ROWS=${2:-200000}; REPEATS=${3:-3}
T=$(mktemp -d "${TMPDIR:-/tmp}/ss-score-bench.XXXXXX")
trap 'rm -rf "$T"' EXIT
port() { "$BIN/shadow-ctl" ports 1; }
SETS=(--set "cluster.embedding=[tcp://127.0.0.1:$(port),tcp://127.0.0.1:$(port)]"
      --set "cluster.sync=[tcp://127.0.0.1:$(port)]"
      --set "cluster.trainers=[tcp://127.0.0.1:$(port),tcp://127.0.0.1:$(port)]"
      --set "data.train=$T/train.tsv" --set "data.eval=$T/eval.tsv")
"$BIN/shadow-datagen" --rows "$ROWS" --seed 7 --out "$T/train.tsv" --eval-rows "$EVAL_ROWS" \
    --eval-out "$T/eval.tsv" >/dev/null 2>&1
"$ROOT/scripts/shadow-launch" "$ROOT/conf/local.yaml" --bin "$BIN" --quiet "${SETS[@]}" \
    --set "job.run_dir=$T/run" >"$T/train.log" 2>&1 || { cat "$T/train.log" >&2; exit 1; }
"$BIN/shadow-ctl" export "$T/run/model" -o "$T/model.ssm" >"$T/export.log"
# max_rss FILE: the "Maximum resident set size" /usr/bin/time -v wrote, KiB
max_rss() { sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$1"; }
cpu() { awk -F': ' '/User time|System time/ { s += $2 } END { print s }' "$1"; }
wall() { sed -n 's/^[[:space:]]*Elapsed (wall clock) time.*: //p' "$1" |
         awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }'; }
for ((r = 1; r <= REPEATS; r++)); do
    /usr/bin/time -v -o "$T/tp" "$ROOT/scripts/shadow-launch" "$ROOT/conf/local.yaml" \
        --bin "$BIN" --quiet "${SETS[@]}" --set "job.run_dir=$T/run-p" --predict "$T/run" \
        --out "$T/pred.txt" >"$T/p.log" 2>&1 || { cat "$T/p.log" >&2; exit 1; }
    pps=$(sed -n 's/.*predictions in [0-9.]* s (\([0-9]*\) predictions\/s).*/\1/p' "$T/p.log" | head -n 1)
    echo "{\"bench\":\"score\",\"how\":\"predict\",\"repeat\":$r,\"rows\":$EVAL_ROWS," \
         "\"wall_s\":$(wall "$T/tp"),\"cpu_s\":$(cpu "$T/tp"),\"trainer_predictions_per_s\":${pps:-0}," \
         "\"max_rss_kib\":$(max_rss "$T/tp")}" | tr -d ' '
    /usr/bin/time -v -o "$T/ts" "$BIN/shadow-score" "$T/model.ssm" "$T/eval.tsv" \
        >"$T/score.txt" 2>"$T/s.log"
    pps=$(sed -n 's/.*predictions in [0-9.]* s (\([0-9]*\) predictions\/s).*/\1/p' "$T/s.log")
    echo "{\"bench\":\"score\",\"how\":\"shadow-score\",\"repeat\":$r,\"rows\":$EVAL_ROWS," \
         "\"wall_s\":$(wall "$T/ts"),\"cpu_s\":$(cpu "$T/ts"),\"predictions_per_s\":${pps:-0}," \
         "\"max_rss_kib\":$(max_rss "$T/ts"),\"model_file_bytes\":$(stat -c %s "$T/model.ssm")}" \
        | tr -d ' '
    cmp -s "$T/pred.txt" "$T/score.txt" || { echo "score_bench: the outputs differ" >&2; exit 1; }
done
