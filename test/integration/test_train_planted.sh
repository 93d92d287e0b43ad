#!/usr/bin/env bash
# A local job on shadow-datagen data (1,000,000 rows from a planted model)
# gets within 10% of the Bayes-optimal NE that shadow-datagen reports.
. "$(dirname "$0")/lib.sh"
"$BIN/shadow-datagen" --rows 1000000 --seed 7 --out "$T/train.tsv" \
    --eval-rows 100000 --eval-out "$T/eval.tsv" >"$T/datagen.json" 2>"$T/datagen.log" \
    || { cat "$T/datagen.log"; fail "datagen"; }
bayes=$(json_field "$T/datagen.json" eval.bayes_ne)
[ -n "$bayes" ] || { cat "$T/datagen.json"; fail "no Bayes NE in the datagen output"; }
make_job 2 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  batch_size: 32" "tables:" "  lr: 0.1"
launch >"$T/launch.log" 2>&1 || { cat "$T/launch.log"; fail "job failed"; }
cat "$T/launch.log"
ne=$(json_field "$T/run/result.json" eval_ne)
limit=$(awk -v b="$bayes" 'BEGIN { printf "%.4f", 1.10 * b }')
float_lt "$ne" "$limit" || fail "eval NE $ne is not within 10% of the Bayes-optimal $bayes (limit $limit)"
ok "eval NE $ne within 10% of the Bayes-optimal NE $bayes (limit $limit)"
pass
