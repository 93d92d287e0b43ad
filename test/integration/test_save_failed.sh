#!/usr/bin/env bash
# Trainer failures that are not a lost trainer (issue 22: in a 2-trainer
# job the launcher took each for a lost trainer and ended the job under the
# trainer-loss rule, "1 of the 2 trainers in the ring are left, not a
# majority", or "before the trainers' ring had formed"):
# - a trainer whose data.train cannot be read on its host exits with status
#   66 (TR_EXIT_NO_INPUT) naming the key and the file, and the launcher ends
#   the job saying so (a wrapper makes trainer 0 of a launched job read a
#   missing file: the launcher's own check of the data passed);
# - trainer 0 that cannot save the output model because the disk is full
#   exits with status 74 (TR_EXIT_SAVE_FAILED) and the launcher ends the job
#   naming the failed save and the full disk, and writes result.json with
#   the error. The run directory is then a small tmpfs mounted by the test
#   (root only), filled so that the end-of-job save runs out of space at a
#   PS's checkpoint (as in test_model_save.sh). With a validation split the
#   job still scores data.eval once, on the model trained last (none is on
#   disk), and trainer 0 says so. When the save that fails comes after an
#   earlier model's (2 epochs), result.json (model_saved false, model_epoch)
#   and the launcher say which epoch the model folder holds.
. "$(dirname "$0")/lib.sh"
"$BIN/shadow-datagen" --rows 20000 --seed 5 --out "$T/train.tsv" \
    --eval-rows 2000 --eval-out "$T/eval.tsv" >/dev/null 2>&1 || fail datagen
make_job 1 0 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  epochs: 1" "  workers: 1" "sync:" "  algorithm: s-ma"

# 1. data missing on a trainer's host: exit 66, named
"$BIN/shadow-trainer" -c "$JOB" --rank 0 --set "data.train=$T/missing.tsv" >"$T/t66.log" 2>&1
rc=$?
[ "$rc" = 66 ] || { cat "$T/t66.log"; fail "a trainer without its data exited with $rc, want 66"; }
grep -q "ERROR data.train: cannot open '$T/missing.tsv'" "$T/t66.log" \
    || { cat "$T/t66.log"; fail "the trainer does not name the key and the file"; }
mkdir -p "$T/wbin"
for b in "$BIN"/*; do ln -s "$b" "$T/wbin/"; done
rm "$T/wbin/shadow-trainer"
{
    echo '#!/usr/bin/env bash'
    echo '# trainer 0 reads a file missing on "its host"'
    echo "case \" \$* \" in *\" --rank 0 \"*) exec \"$BIN/shadow-trainer\" \"\$@\" --set \"data.train=$T/missing.tsv\" ;; esac"
    echo "exec \"$BIN/shadow-trainer\" \"\$@\""
} >"$T/wbin/shadow-trainer"
chmod +x "$T/wbin/shadow-trainer"
"$ROOT/scripts/shadow-launch" "$JOB" --bin "$T/wbin" --quiet --set "job.run_dir=$T/run66" \
    >"$T/l66.log" 2>&1 && { cat "$T/l66.log"; fail "the job succeeded without trainer 0's data"; }
grep -q "trainer 0 cannot read its data (exit 66): data.train: cannot open '$T/missing.tsv'" \
    "$T/l66.log" || { cat "$T/l66.log"; cat "$T/wbin/shadow-trainer"; fail "the launcher does not name the missing data"; }
grep -qiE "majority|ring had formed|allow_trainer_loss|was lost" "$T/l66.log" \
    && { cat "$T/l66.log"; fail "missing data was reported as a lost trainer"; }
no_leftovers
ok "trainer 0 without its data: exit 66, the launcher names data.train and the file, no lost trainer"

# 2. a full disk at trainer 0's save
run_on_tmpfs "part 1 passed"

# a first job saves a model: the sizes of its parts
launch >"$T/first.log" 2>&1 || { cat "$T/first.log"; fail "first job failed"; }
DENSE=$(stat -c %s "$MNT/model/dense.bin")
EMB=$(stat -c %s "$MNT/model/embedding-0.ckpt")
rm -rf "${MNT:?}/model"

# room for dense.bin, not for the PS's embeddings
fill_to $((DENSE + EMB / 2))
launch >"$T/full.log" 2>&1
rc=$?
rm -f "$MNT/filler"
[ "$rc" = 1 ] || { cat "$T/full.log"; fail "the job exited with $rc on a full disk, want 1"; }
grep -q "trainer 0 could not save the output model (exit 74): saving the model failed: .*o space left on device" \
    "$T/full.log" || { cat "$T/full.log"; fail "the launcher does not name the failed save and its cause"; }
grep -qiE "majority|allow_trainer_loss|was lost|lose one" "$T/full.log" \
    && { cat "$T/full.log"; fail "a failed save was reported as a lost trainer"; }
[ -s "$MNT/trainers-lost.jsonl" ] && fail "trainers-lost.jsonl lists a trainer: $(cat "$MNT/trainers-lost.jsonl")"
grep -q "ERROR saving the model failed" "$T/logs/trainer-0.log" || fail "trainer 0's log has no save error"
err=$(json_field "$MNT/result.json" error)
case $err in
    "saving the model failed: "*"o space left on device"*) ;;
    *) cat "$MNT/result.json"; fail "result.json's error is '$err', not the failed save" ;;
esac
ok "full disk at trainer 0's save in a 2-trainer job: exit 74, reported as the failed save" \
    "(\"$(grep -o 'trainer 0 could not save[^;]*' "$T/full.log" | head -n 1 | cut -c1-120)...\"), no lost trainer"
no_leftovers

# the same with a validation split: no model kept on disk, so data.eval is
# scored once on the model trained last, and the trainer says so
fill_to $((DENSE + EMB / 2))
launch --set data.valid_fraction=0.1 >"$T/fullv.log" 2>&1
rc=$?
rm -f "$MNT/filler"
[ "$rc" = 1 ] || { cat "$T/fullv.log"; fail "with a validation split the job exited with $rc on a full disk, want 1"; }
[ "$(json_field "$MNT/result.json" eval_scorings)" = 1 ] \
    || { cat "$MNT/result.json"; fail "failed save with a split: eval_scorings $(json_field "$MNT/result.json" eval_scorings), want 1"; }
float_lt 0 "$(json_field "$MNT/result.json" eval_ne)" || fail "failed save with a split: no eval NE in result.json"
grep -q "no model is kept in .* (its save failed): data.eval is scored on the model trained last" \
    "$T/logs/trainer-0.log" || fail "trainer 0 does not say the eval is of a model not on disk"
ok "full disk with a validation split: data.eval scored once on the model trained last (NE $(json_field "$MNT/result.json" eval_ne)), said so"
no_leftovers

# the output model's save fails after an earlier one's (2 epochs, a
# validation split; room for one model, not two: a save writes the new
# folder before the old one goes): the model folder holds epoch 1's model,
# whole, and result.json and the launcher say which, not "saved"
fill_to $(((DENSE + EMB) * 3 / 2))
launch --set data.valid_fraction=0.1 --set trainer.epochs=2 >"$T/older.log" 2>&1
rc=$?
rm -f "$MNT/filler"
R=$MNT/result.json
if [ "$rc" = 0 ] || [ "$(json_field "$R" best_epoch)" != 2 ]; then
    skip_case "older model kept: the job exited $rc keeping epoch $(json_field "$R" best_epoch) (epoch 2 did not validate better, or its save fitted)"
else
    [ "$rc" = 1 ] || { cat "$T/older.log"; fail "older model kept: the job exited with $rc, want 1"; }
    [ "$(json_field "$R" model_saved)" = false ] || { cat "$R"; fail "older model kept: result.json says model_saved $(json_field "$R" model_saved)"; }
    [ "$(json_field "$R" model_epoch)" = 1 ] || { cat "$R"; fail "older model kept: result.json's model_epoch is '$(json_field "$R" model_epoch)', want 1"; }
    [ "$(jq -r '.per_trainer[0].model_epoch' "$R")" = 1 ] || fail "older model kept: per_trainer[0].model_epoch is not 1"
    grep -q "the output model was not saved: $MNT/model holds an earlier model, of epoch 1 (the better model of epoch 2 could not be saved); the error and the figures obtained are in $MNT/result.json" \
        "$T/older.log" || { cat "$T/older.log"; fail "older model kept: the launcher does not say which epoch the model folder holds"; }
    grep -q "was saved in" "$T/older.log" && { cat "$T/older.log"; fail "older model kept: the launcher says the output model was saved"; }
    grep -q save_id "$MNT/model/MANIFEST" && [ -s "$MNT/model/dense.bin" ] || fail "older model kept: the model folder is not whole"
    grep -q "the model kept was not saved (.*/model holds an earlier model, of epoch 1): data.eval is scored on the model trained last" \
        "$T/logs/trainer-0.log" || fail "older model kept: trainer 0 does not say the folder holds epoch 1"
    ok "the save of epoch 2 failed after epoch 1's: model_saved false, model_epoch 1, the launcher names epoch 1"
fi
no_leftovers
pass
