#!/usr/bin/env bash
# Selection apart from evaluation (issue 24), on planted data:
# 1. data.valid chooses: the eval file is the validation file with every label
#    flipped, so a model that gets better on the validation file gets worse
#    on it. Keep-best must follow the validation figures (the kept epoch is
#    the validation minimum), data.eval must be scored only on the models
#    kept (one eval row per new best, none on the others), and the reported
#    eval NE must be the one scored on the kept model. A selection that read
#    data.eval would keep another epoch or score it after every epoch.
# 2. trainer.patience counts validation figures: the run stops after the first
#    validation without gain, whatever data.eval says.
# 3. data.valid_fraction: the rows set aside never train (examples trained =
#    epochs x (lines - validation rows)), about the fraction asked, and the
#    same rows in a rerun with another seed.
# 4. Without a validation split, the job says that data.eval chose the epoch.
# 5. model.dense_average: the average of the dense models over the tail of
#    each epoch is what is scored and saved (scoring the saved run again gives
#    the same logloss), over about the share of batches asked.
. "$(dirname "$0")/lib.sh"
"$BIN/shadow-datagen" --rows 16000 --seed 41 --out "$T/train.tsv" --eval-rows 4000 \
    --eval-out "$T/valid.tsv" >/dev/null 2>&1 || fail datagen
awk 'BEGIN { FS = OFS = "\t" } { $1 = 1 - $1; print }' "$T/valid.tsv" >"$T/flipped.tsv"
make_job 2 1 2 "data:" "  train: [$T/train.tsv]" "  valid: [$T/valid.tsv]" \
    "  eval: [$T/flipped.tsv]" "trainer:" "  epochs: 4" "  eval_every: 1"
M=$T/run/metrics-trainer-0.jsonl
R=$T/run/result.json

# rows_of KEY: "epoch value best" of each row of $M that has KEY
rows_of() { json_field "$M" "epoch,$1,best" "$1"; }

# 1. data.valid chooses, data.eval is the test
launch >"$T/launch-1.log" 2>&1 || { cat "$T/launch-1.log"; fail "job failed"; }
valid=$(rows_of valid_ne)
evals=$(rows_of eval_ne)
echo "validation (epoch NE best):"; echo "$valid" | sed 's/^/    /'
echo "test (epoch NE):"; echo "$evals" | sed 's/^/    /'
[ "$(echo "$valid" | wc -l)" = 4 ] || fail "expected 4 validation rows"
min_epoch=$(echo "$valid" | sort -k2,2g | head -n 1 | cut -d' ' -f1)
min_ne=$(echo "$valid" | sort -k2,2g | head -n 1 | cut -d' ' -f2)
bests=$(echo "$valid" | awk '$3 == "true" { print $1 }' | paste -sd' ')
eval_epochs=$(echo "$evals" | cut -d' ' -f1 | paste -sd' ')
[ "$eval_epochs" = "$bests" ] || fail "data.eval scored after epochs '$eval_epochs'; the models kept were those of epochs '$bests'"
[ "$(json_field "$R" best_epoch)" = "$min_epoch" ] || fail "kept epoch $(json_field "$R" best_epoch), the validation minimum is at epoch $min_epoch"
awk -v a="$(json_field "$R" valid_ne)" -v b="$min_ne" 'BEGIN { exit !((a - b) ^ 2 < 1e-12) }' \
    || fail "result valid_ne $(json_field "$R" valid_ne) is not the validation minimum $min_ne"
want_eval=$(echo "$evals" | awk -v e="$min_epoch" '$1 == e { print $2 }')
awk -v a="$(json_field "$R" eval_ne)" -v b="$want_eval" 'BEGIN { exit !((a - b) ^ 2 < 1e-12) }' \
    || fail "result eval_ne $(json_field "$R" eval_ne) is not the kept model's ($want_eval)"
[ "$(json_field "$R" eval_scorings)" = "$(echo "$bests" | wc -w)" ] || fail "eval_scorings $(json_field "$R" eval_scorings)"
grep -q '"selected_on":"data.valid"' "$R" || fail "result does not say data.valid chose"
float_lt 1 "$(json_field "$R" eval_ne)" || fail "the flipped eval file should score above 1"
# the flipped file ranks the epochs the other way round: reading it would have chosen otherwise
worst_valid_epoch=$(echo "$valid" | sort -k2,2g | tail -n 1 | cut -d' ' -f1)
[ "$min_epoch" != "$worst_valid_epoch" ] || fail "validation NE did not vary over the epochs"
grep -q "valid NE" "$T/launch-1.log" || fail "the summary has no validation figure"
ok "kept epoch $min_epoch (validation NE $min_ne; new bests at epochs $bests); data.eval scored only then; test NE $(json_field "$R" eval_ne)"

# 2. patience reads the validation figures
launch --set trainer.epochs=6 --set trainer.patience=1 >"$T/launch-2.log" 2>&1 \
    || { cat "$T/launch-2.log"; fail "patience job failed"; }
valid=$(rows_of valid_ne)
n=$(echo "$valid" | wc -l)
first_no=$(echo "$valid" | awk '$3 == "false" { print NR; exit }')
if [ -n "$first_no" ]; then
    [ "$n" = "$first_no" ] || fail "patience 1: $n validations, the first without gain was number $first_no"
    grep -q '"stopped_early":true' "$T/run/result-trainer-0.json" || fail "not reported as stopped early"
else
    [ "$n" = 6 ] || fail "patience 1, every validation a gain: $n validations, expected 6"
fi
[ "$(rows_of eval_ne | wc -l)" = "$(echo "$valid" | awk '$3 == "true"' | wc -l)" ] \
    || fail "patience run: data.eval scored on models not kept"
ok "patience 1 stopped after validation ${first_no:-none} of $n (validation NE $(echo "$valid" | cut -d' ' -f2 | paste -sd' '))"

# 3. data.valid_fraction: the rows set aside never train, the same ones every run
ex_of() { json_field "$R" examples; }
for seed in 1 2; do
    launch --set data.valid= --set data.valid_fraction=0.2 --set job.seed=$seed \
        --set trainer.epochs=2 >"$T/launch-3-$seed.log" 2>&1 \
        || { cat "$T/launch-3-$seed.log"; fail "valid_fraction job failed"; }
    vr=$(json_field "$T/run/result-trainer-0.json" valid_rows) ex=$(ex_of)
    [ "$ex" = $((2 * (16000 - vr))) ] || fail "seed $seed: $ex examples trained, $vr rows of 16000 set aside, 2 epochs"
    ((vr > 2900 && vr < 3500)) || fail "seed $seed: $vr of 16000 rows set aside at 0.2"
    grep -q '"selected_on":"data.valid_fraction"' "$R" || fail "result does not say data.valid_fraction chose"
    eval "VR_$seed=$vr"
done
[ "$VR_1" = "$VR_2" ] || fail "the split moved between runs: $VR_1 then $VR_2 rows"
ok "valid_fraction 0.2: $VR_1 of 16000 rows set aside in both runs, the other $((16000 - VR_1)) trained twice"

# 4. no validation split: the job says that data.eval chose
launch --set data.valid= --set data.eval="$T/valid.tsv" --set trainer.epochs=2 \
    >"$T/launch-4.log" 2>&1 || { cat "$T/launch-4.log"; fail "job without validation failed"; }
grep -q '"selected_on":"data.eval"' "$R" || fail "result does not say data.eval chose"
grep -q "biased low" "$T/launch-4.log" || fail "the summary does not warn that data.eval chose"
grep -q "no validation split" "$T/run/logs/trainer-0.log" || fail "trainer 0 does not warn"
ok "without a validation split the result and summary say data.eval chose the epoch"
# 5. model.dense_average: the average is what is scored, kept and saved
launch --set trainer.epochs=2 --set model.dense_average=0.5 >"$T/launch-5.log" 2>&1 \
    || { cat "$T/launch-5.log"; fail "dense_average job failed"; }
counts=$(sed -n 's/.*scoring the average of \([0-9]*\) dense models.*/\1/p' "$T/run/logs/trainer-0.log" | paste -sd' ')
[ "$(echo "$counts" | wc -w)" = 2 ] || fail "expected an average at each of 2 segments, got '$counts'"
for c in $counts; do  # 16000 rows / 128 = 125 batches an epoch over the 4 workers: ~half
    ((c >= 45 && c <= 90)) || fail "averaged $c models over half an epoch of 125 batches"
done
ll=$(json_field "$R" eval_logloss)
cp -r "$T/run" "$T/saved5"
launch --eval-only "$T/saved5" >"$T/launch-5e.log" 2>&1 || { cat "$T/launch-5e.log"; fail "eval-only failed"; }
[ "$(json_field "$R" eval_logloss)" = "$ll" ] || fail "the saved model scores $(json_field "$R" eval_logloss), the job reported $ll"
ok "dense_average 0.5: averages of $counts models scored; the saved model is the average (logloss $ll)"
no_leftovers
pass
