#!/usr/bin/env bash
# Selection apart from evaluation (issue 24), on planted data:
# 1. data.valid chooses: the eval file is the validation file with every label
#    flipped, so a model that gets better on the validation file gets worse
#    on it. Keep-best must follow the validation figures (the kept epoch is
#    the validation minimum), data.eval must be scored once, at the end, on
#    the model kept (one eval row, naming the kept epoch; eval_scorings 1),
#    and the reported eval NE must be what the saved model scores on its own
#    (--eval-only). A selection that read data.eval would keep another epoch
#    or score it after every epoch.
# 2. trainer.patience counts validation figures: the run stops after the first
#    validation without gain, whatever data.eval says.
# 3. data.valid_fraction: the rows set aside never train (examples trained =
#    epochs x (lines - validation rows)), about the fraction asked, and the
#    same rows in a rerun with another seed.
# 4. Without a validation split, the job says that data.eval chose the epoch.
# 5. model.dense_average: the average of the dense models over the tail of
#    each epoch is what is scored and saved (scoring the saved run again gives
#    the same logloss), over about the share of batches asked.
# 6. The kept epoch is not the last (1 trainer x 1 worker, sync none, a
#    tables.lr that overfits after epoch 1: deterministic): every PS restores
#    the kept set (RESTORE) before data.eval is scored once; the eval NE is
#    the kept model's, scored on its own (--eval-only), not the last one's.
# 7. The kept epoch is the last (2 epochs, the default tables.lr): nothing is
#    restored, data.eval scored once.
# 8. s-easgd, 2 trainers, 2 embedding PSs and a sync PS (which epoch is kept
#    varies run to run): data.eval scored once by trainer 0 only, its NE what
#    the saved model scores on its own; when an earlier epoch was kept, every
#    PS, the sync PS too, restored its file of the kept save.
# 9. A job stopped by SIGTERM (job checkpoint) after epoch 1 was kept, then
#    resumed: the checkpoint records no test scoring, the resumed job scores
#    data.eval once at its end, restoring the kept set first unless it kept
#    a later epoch, and reports what the saved model scores on its own.
# 10. A PS refuses the final RESTORE (its file of the kept save was made bad
#    after the save): the job fails, its error naming the PS, the PS's reply
#    and how to score the kept model on its own; data.eval is not scored;
#    result.json carries the error and the validation figures, as after a
#    failed save.
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
[ "$eval_epochs" = "$min_epoch" ] || fail "data.eval rows of epochs '$eval_epochs'; expected one, of the model kept (epoch $min_epoch)"
[ "$(json_field "$R" best_epoch)" = "$min_epoch" ] || fail "kept epoch $(json_field "$R" best_epoch), the validation minimum is at epoch $min_epoch"
awk -v a="$(json_field "$R" valid_ne)" -v b="$min_ne" 'BEGIN { exit !((a - b) ^ 2 < 1e-12) }' \
    || fail "result valid_ne $(json_field "$R" valid_ne) is not the validation minimum $min_ne"
want_eval=$(echo "$evals" | awk -v e="$min_epoch" '$1 == e { print $2 }')
awk -v a="$(json_field "$R" eval_ne)" -v b="$want_eval" 'BEGIN { exit !((a - b) ^ 2 < 1e-12) }' \
    || fail "result eval_ne $(json_field "$R" eval_ne) is not the kept model's ($want_eval)"
[ "$(json_field "$R" eval_scorings)" = 1 ] || fail "eval_scorings $(json_field "$R" eval_scorings), expected 1"
grep -q "data.eval scored 1 time(s), on the model kept (epoch $min_epoch" "$T/run/logs/trainer-0.log" \
    || fail "trainer 0 does not say data.eval was scored once on the kept epoch"
grep -q '"selected_on":"data.valid"' "$R" || fail "result does not say data.valid chose"
float_lt 1 "$(json_field "$R" eval_ne)" || fail "the flipped eval file should score above 1"
# the flipped file ranks the epochs the other way round: reading it would have chosen otherwise
worst_valid_epoch=$(echo "$valid" | sort -k2,2g | tail -n 1 | cut -d' ' -f1)
[ "$min_epoch" != "$worst_valid_epoch" ] || fail "validation NE did not vary over the epochs"
grep -q "valid NE" "$T/launch-1.log" || fail "the summary has no validation figure"
same_as_eval_only "$(json_field "$R" eval_ne)" 1
ok "kept epoch $min_epoch (validation NE $min_ne; new bests at epochs $bests); data.eval scored once, on it; test NE $(json_field "$R" eval_ne)"

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
[ "$(rows_of eval_ne | wc -l)" = 1 ] || fail "patience run: data.eval scored $(rows_of eval_ne | wc -l) times"
[ "$(json_field "$R" eval_scorings)" = 1 ] || fail "patience run: eval_scorings $(json_field "$R" eval_scorings)"
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

# 6. the kept epoch is not the last: the PSs go back to it, data.eval once
make_job 1 0 1 "data:" "  train: [$T/train.tsv]" "  eval: [$T/valid.tsv]" \
    "  valid_fraction: 0.2" "trainer:" "  workers: 1" "  epochs: 3" "  eval_every: 1" \
    "sync:" "  algorithm: none" "tables:" "  lr: 1"
launch >"$T/launch-6.log" 2>&1 || { cat "$T/launch-6.log"; fail "case 6 job failed"; }
valid=$(rows_of valid_ne)
min_epoch=$(echo "$valid" | sort -k2,2g | head -n 1 | cut -d' ' -f1)
[ "$min_epoch" != 3 ] || fail "case 6: tables.lr 1 did not make a later epoch worse ($valid)"
[ "$(json_field "$R" best_epoch)" = "$min_epoch" ] || fail "case 6: kept epoch $(json_field "$R" best_epoch), validation minimum at $min_epoch"
[ "$(rows_of eval_ne | cut -d' ' -f1)" = "$min_epoch" ] || fail "case 6: eval rows '$(rows_of eval_ne)', expected one of epoch $min_epoch"
[ "$(json_field "$R" eval_scorings)" = 1 ] || fail "case 6: eval_scorings $(json_field "$R" eval_scorings)"
grep -q "restored on every PS" "$T/run/logs/trainer-0.log" || fail "case 6: the trainer did not restore the kept model"
grep -q "shard restored from .*/model/embedding-0.ckpt (RESTORE" "$T/run/logs/ps-embedding-0.log" \
    || fail "case 6: the PS did not restore its file of the model kept"
n=$(json_field "$T/run/logs/ps-embedding-0.stats.json" req_restore)
[ "$n" = 1 ] || fail "case 6: the PS counted $n RESTORE requests (req_restore), want 1"
ne6=$(json_field "$R" eval_ne)
same_as_eval_only "$ne6" 6
ok "kept epoch $min_epoch of 3 (validation NE $(echo "$valid" | cut -d' ' -f2 | paste -sd' ')): PSs restored, data.eval scored once: NE $ne6, as the saved model scores on its own"

# 7. the kept epoch is the last: no restore, still one scoring
launch --set tables.lr=0.1 --set trainer.epochs=2 >"$T/launch-7.log" 2>&1 || { cat "$T/launch-7.log"; fail "case 7 job failed"; }
valid=$(rows_of valid_ne)
min_epoch=$(echo "$valid" | sort -k2,2g | head -n 1 | cut -d' ' -f1)
[ "$min_epoch" = 2 ] || fail "case 7: epoch 2 was not the best ($valid)"
[ "$(json_field "$R" eval_scorings)" = 1 ] || fail "case 7: eval_scorings $(json_field "$R" eval_scorings)"
[ "$(rows_of eval_ne | cut -d' ' -f1)" = 2 ] || fail "case 7: eval rows '$(rows_of eval_ne)'"
! grep -q "restored on every PS" "$T/run/logs/trainer-0.log" || fail "case 7: restored although the kept model is the last"
! grep -q "RESTORE" "$T/run/logs/ps-embedding-0.log" || fail "case 7: a PS got a RESTORE"
n=$(json_field "$T/run/logs/ps-embedding-0.stats.json" req_restore)
[ "$n" = 0 ] || fail "case 7: the PS counted $n RESTORE requests (req_restore), want 0"
same_as_eval_only "$(json_field "$R" eval_ne)" 7
ok "kept epoch 2 of 2: no restore, data.eval scored once (NE $(json_field "$R" eval_ne))"

# 8. s-easgd: the sync PS holds the center of the kept save too
make_job 2 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/valid.tsv]" \
    "  valid_fraction: 0.2" "trainer:" "  epochs: 3" "  eval_every: 1" \
    "sync:" "  algorithm: s-easgd" "tables:" "  lr: 0.3"
launch >"$T/launch-8.log" 2>&1 || { cat "$T/launch-8.log"; fail "case 8 job failed"; }
kept=$(json_field "$R" best_epoch)
[ "$(json_field "$R" eval_scorings)" = 1 ] || fail "case 8: eval_scorings $(json_field "$R" eval_scorings)"
[ "$(rows_of eval_ne | cut -d' ' -f1)" = "$kept" ] || fail "case 8: eval rows '$(rows_of eval_ne)', kept epoch $kept"
! grep -q '"eval_ne"' "$T/run/metrics-trainer-1.jsonl" || fail "case 8: trainer 1 scored data.eval"
if [ "$kept" != 3 ]; then
    for l in ps-embedding-0 ps-embedding-1 ps-sync-0; do
        grep -q "shard restored from .*/model/.* (RESTORE" "$T/run/logs/$l.log" \
            || fail "case 8: $l did not restore the kept save"
    done
else
    ! grep -q "RESTORE" "$T/run/logs/ps-sync-0.log" || fail "case 8: kept the last epoch, restored all the same"
fi
same_as_eval_only "$(json_field "$R" eval_ne)" 8
ok "s-easgd: kept epoch $kept of 3$([ "$kept" != 3 ] && echo ", every PS and the sync PS restored"), data.eval scored once (NE $(json_field "$R" eval_ne))"

# 9. SIGTERM after the first validation, then --resume: one scoring at the end
"$BIN/shadow-datagen" --rows 80000 --seed 43 --out "$T/train9.tsv" >/dev/null 2>&1 || fail datagen
make_job 1 0 1 "data:" "  train: [$T/train9.tsv]" "  eval: [$T/valid.tsv]" \
    "  valid_fraction: 0.05" "trainer:" "  workers: 1" "  epochs: 3" "  eval_every: 1" \
    "sync:" "  algorithm: none" "tables:" "  lr: 1"
"$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet --no-plots >"$T/stop-9.log" 2>&1 &
LP=$!
wait_log "$T/run/logs/trainer-0.log" "validation after 1 epoch" 60
kill -TERM "$LP"
rc=0; wait_exit "$LP" 60 || rc=$?
if [ "$rc" = 75 ]; then
    grep -q "test (data.eval)" "$T/run/logs/trainer-0.log" && fail "case 9: data.eval scored before the job checkpoint"
    "$ROOT/scripts/shadow-launch" --resume "$T/run" --bin "$BIN" --quiet --no-plots \
        >"$T/resume-9.log" 2>&1 || { cat "$T/resume-9.log"; fail "case 9: the resumed job failed"; }
    kept=$(json_field "$R" best_epoch)
    grep -q '"resumed":true' "$R" || fail "case 9: result.json does not say resumed"
    [ "$(json_field "$R" eval_scorings)" = 1 ] || fail "case 9: eval_scorings $(json_field "$R" eval_scorings)"
    [ "$(rows_of eval_ne | cut -d' ' -f1)" = "$kept" ] || fail "case 9: eval rows '$(rows_of eval_ne)', kept epoch $kept"
    if [ "$kept" != 3 ]; then
        grep -q "restored on every PS" "$T/run/logs/trainer-0.log" || fail "case 9: kept epoch $kept not restored"
    fi
    same_as_eval_only "$(json_field "$R" eval_ne)" 9
    ok "SIGTERM after epoch 1 (exit 75), resumed: kept epoch $kept, data.eval scored once at the end (NE $(json_field "$R" eval_ne))"
else
    skip_case "case 9: the job ended with $rc before the SIGTERM could stop it (want 75)"
fi
# 10. a PS refuses the final RESTORE (its file of the kept save went bad after
#     the save): the job fails with the PS's reply and scores nothing. The
#     file is made bad while epochs 2 to 8 train (about 0.4 s each here;
#     tables.lr 1 overfits after epoch 1 on case 9's data).
make_job 1 0 1 "data:" "  train: [$T/train9.tsv]" "  eval: [$T/valid.tsv]" \
    "  valid_fraction: 0.05" "trainer:" "  workers: 1" "  epochs: 8" "  eval_every: 1" \
    "sync:" "  algorithm: none" "tables:" "  lr: 1"
rm -rf "$T/run"   # the model folder of an earlier case must not be the one made bad
"$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet --no-plots >"$T/launch-10.log" 2>&1 &
LP=$!
n=3000
until grep -q save_id "$T/run/model/MANIFEST" 2>/dev/null || ((n-- == 0)); do sleep 0.02; done
printf 'XXXX' | dd of="$T/run/model/embedding-0.ckpt" bs=1 seek=200 conv=notrunc 2>/dev/null
rc=0; wait_exit "$LP" 120 || rc=$?
LP=""
TL=$T/run/logs/trainer-0.log
if [ "$rc" = 0 ] && [ "$(json_field "$R" best_epoch)" != 1 ]; then
    skip_case "case 10: the job kept epoch $(json_field "$R" best_epoch), whose save is not the file made bad"
elif [ "$rc" = 0 ]; then
    skip_case "case 10: the job restored the kept model before its file was made bad (a loaded machine)"
else
    grep -q "cannot go back to the model kept in .*/model (epoch 1) to score data.eval: embedding PS 0 did not restore the model kept: .*RESTORE from .*/model/embedding-0.ckpt failed" "$TL" \
        || { tail -n 5 "$TL"; fail "case 10: the trainer does not say which PS refused the RESTORE and why"; }
    grep -q "score it on its own" "$TL" || fail "case 10: the trainer's error does not say how to score the kept model"
    ! grep -q '"eval_ne"' "$M" || fail "case 10: data.eval scored although the PSs could not go back to the kept model"
    ! grep -q "test (data.eval)" "$TL" || fail "case 10: the trainer logged a test scoring"
    json_field "$R" error | grep -q "cannot go back to the model kept" \
        || fail "case 10: result.json does not carry the error (as after a failed save)"
    [ "$(json_field "$R" eval_scorings)" = 0 ] || fail "case 10: eval_scorings $(json_field "$R" eval_scorings)"
    [ "$(json_field "$R" best_epoch)" = 1 ] || fail "case 10: result.json names kept epoch $(json_field "$R" best_epoch)"
    grep -q "payload checksum mismatch" "$T/run/logs/ps-embedding-0.log" || fail "case 10: the PS log does not say why"
    grep -q "the output model was saved in .*/run/model, but the job ended with an error" "$T/launch-10.log" &&
        ! grep -q "was not saved" "$T/launch-10.log" ||
        { cat "$T/launch-10.log"; fail "case 10: the launcher does not say that the model was saved all the same"; }
    ok "a PS refused the final RESTORE: the job failed (exit $rc) with its reply, nothing scored"
fi

no_leftovers
pass
