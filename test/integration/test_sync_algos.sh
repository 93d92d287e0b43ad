#!/usr/bin/env bash
# 3 trainers x 2 workers on the real Criteo sample with each of the seven
# sync settings: every job ends with eval NE below 0.95, the sync settings
# report completed rounds and a completed final sync.
. "$(dirname "$0")/lib.sh"
SRC=$SS_DATA_DIR/criteo/criteo_train_head10k.tsv
[ -f "$SRC" ] || fail "missing $SRC (set SS_DATA_DIR)"
head -n 8000 "$SRC" >"$T/train.tsv"
tail -n 2000 "$SRC" >"$T/eval.tsv"
make_job 2 1 3 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  workers: 2" "  batch_size: 32" "model:" "  lr: 0.02" \
    "sync:" "  gap: 5" "  timeout_ms: 3000"
for algo in none s-easgd s-ma s-bmuf fr-easgd fr-ma fr-bmuf; do
    launch --set sync.algorithm=$algo >"$T/launch-$algo.log" 2>&1 \
        || { cat "$T/launch-$algo.log"; fail "$algo: job failed"; }
    R=$T/run/result.json
    ne=$(json_field "$R" eval_ne)
    float_lt "$ne" 0.95 || fail "$algo: eval NE $ne is not below 0.95"
    line="$algo: eval NE $ne AUC $(json_field "$R" eval_auc)"
    if [ $algo != none ]; then
        r0=$T/run/result-trainer-0.json
        rounds=$(json_field "$r0" sync_rounds)
        [ "${rounds:-0}" -gt 0 ] || { cat "$r0"; fail "$algo: no sync rounds"; }
        grep -q '"sync_final_ok":true' "$r0" || { cat "$r0"; fail "$algo: final sync incomplete"; }
        line="$line, $rounds rounds, gap $(json_field "$r0" sync_gap)"
    fi
    ok "$line"
done
# MA: after the final round every trainer holds the same average
launch --set sync.algorithm=s-ma >"$T/launch-ma2.log" 2>&1 || fail "s-ma rerun"
a=$(json_field "$T/run/result-trainer-0.json" eval_logloss)
b=$(json_field "$T/run/result-trainer-2.json" eval_logloss)
[ "$a" = "$b" ] || fail "s-ma: trainers 0 and 2 evaluate different models ($a vs $b)"
ok "s-ma: all trainers end with the same averaged model (eval logloss $a)"
no_leftovers
pass
