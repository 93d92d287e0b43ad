#!/usr/bin/env bash
# The output model is one set, replaced in one step: RUN_DIR/model holds
# dense.bin, every PS's embeddings and MANIFEST of one save. A save that fails
# because the disk is full leaves the previous model whole and loadable, and
# the error names ENOSPC and the file, both where the trainer's own write
# fails (dense.bin) and where a PS's checkpoint fails (its error reply reaches
# the trainer's log and the launcher's output). The run directory is a small
# tmpfs mounted by the test (root only) and filled with a file before the
# second job, so that its end-of-job save runs out of space.
. "$(dirname "$0")/lib.sh"
run_on_tmpfs
"$BIN/shadow-datagen" --rows 60000 --seed 3 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen
make_job 2 0 1 "data:" "  train: [$T/train.tsv]" "  eval: [$T/train.tsv]" \
    "sync:" "  algorithm: none"
# digest of the model folder: every file's name and contents
model_sum() { (cd "$MNT/model" && find . -type f | sort | xargs md5sum) | md5sum | cut -c1-32; }
eval_ne() {  # scores RUN_DIR/model with --eval-only; prints its eval NE
    rm -f "$MNT/result.json"
    launch --eval-only "$MNT" >"$T/eval.log" 2>&1 || { cat "$T/eval.log"; fail "--eval-only failed"; }
    json_field "$MNT/result.json" eval_ne
}

# 1. a job that saves its model: one set in model/
launch >"$T/first.log" 2>&1 || { cat "$T/first.log"; fail "first job failed"; }
for f in MANIFEST dense.bin embedding-0.ckpt embedding-1.ckpt; do
    [ -f "$MNT/model/$f" ] || fail "model/$f missing after the first job"
done
id=$(sed -n 's/^save_id //p' "$MNT/model/MANIFEST")
[ -n "$id" ] || fail "MANIFEST names no save"
ls -d "$MNT"/model.new-* 2>/dev/null && fail "a model.new-* folder is left after a good save"
SUM0=$(model_sum)
NE0=$(eval_ne)
ok "first job: model/ holds dense.bin and both PSs' embeddings of save $id; --eval-only NE $NE0"
DENSE=$(stat -c %s "$MNT/model/dense.bin")
EMB=$(stat -c %s "$MNT/model/embedding-0.ckpt")

# run_full CASE: a second job on the full disk must fail in bounded time
run_full() {
    launch >"$T/$1.log" 2>&1 &
    local lp=$!
    PIDS+=("$lp")
    wait_exit "$lp" 120 && { cat "$T/$1.log"; fail "$1: the job succeeded on a full disk"; }
    no_leftovers
    cp "$T/logs/trainer-0.log" "$T/$1-trainer.log"  # --eval-only below starts a new one
    rm -f "$T/$1-result.json"
    [ -f "$MNT/result.json" ] && cp "$MNT/result.json" "$T/$1-result.json"  # eval_ne replaces it
    rm -f "$MNT/filler"
    [ "$(model_sum)" = "$SUM0" ] || fail "$1: model/ changed after a failed save"
    ls -d "$MNT"/model.new-* 2>/dev/null && fail "$1: the failed save left its folder"
    local ne
    ne=$(eval_ne)
    [ "$ne" = "$NE0" ] || fail "$1: the kept model scores NE $ne, it scored $NE0"
}

# 2. no space for the trainer's dense.bin: named with its path
fill_to 0
run_full dense
grep -qi "no space left on device" "$T/dense.log" || { cat "$T/dense.log"; fail "dense: ENOSPC not named"; }
grep -q "model.new-[0-9a-f]*/dense.bin" "$T/dense.log" \
    || { cat "$T/dense.log"; fail "dense: the launcher's output does not name dense.bin"; }
ok "full disk at dense.bin: the job failed naming ENOSPC and the file; model/ unchanged, NE $NE0"

# 3. room for dense.bin, not for a PS's embeddings: the PS's reply names it
fill_to $((DENSE + EMB / 2))
run_full ps
grep -q "PS 0 did not checkpoint\|PS 1 did not checkpoint" "$T/ps.log" \
    || { cat "$T/ps.log"; fail "ps: the launcher's output does not name the PS"; }
grep -qi "embedding-[01].ckpt failed: no space left on device" "$T/ps.log" \
    || { cat "$T/ps.log"; fail "ps: the PS's ENOSPC reply does not reach the launcher's output"; }
grep -qi "embedding-[01].ckpt failed: no space left on device" "$T/ps-trainer.log" \
    || fail "ps: the PS's ENOSPC reply is not in the trainer's log"
ok "full disk at a PS's checkpoint ($DENSE + $((EMB / 2)) bytes free, embeddings $EMB): its ENOSPC reply is in the trainer's log and the launcher's output; model/ unchanged"

# 4. the eval had finished when that save failed: result.json is written all
# the same, with the error and the eval figures (issue 22: there was none),
# and the job still failed (run_full)
R=$T/ps-result.json
[ -f "$R" ] || { cat "$T/ps.log"; fail "no result.json after a failed final save"; }
err=$(json_field "$R" error)
case $err in
    "saving the model failed: "*"PS "[01]" did not checkpoint"*"o space left on device"*) ;;
    *) cat "$R"; fail "result.json's error is '$err', not the failed save" ;;
esac
[ "$(jq -r ".per_trainer[0].model_saved" "$R")" = false ] || { cat "$R"; fail "model_saved not false"; }
ne=$(json_field "$R" eval_ne)
float_lt 0 "$ne" && float_lt "$ne" 1.5 || { cat "$R"; fail "result.json's eval_ne is '$ne'"; }
grep -q "the output model was not saved; the error and the figures obtained .*$MNT/result.json" "$T/ps.log" \
    || { cat "$T/ps.log"; fail "the launcher does not say result.json holds the error"; }
ok "failed final save after the eval: result.json has the error and eval NE $ne; exit non-zero"

# 5. the same failure with no model saved before: the error says so, and
# does not claim a previous model is kept
rm -rf "${MNT:?}/model"
fill_to $((DENSE + EMB / 2))
launch >"$T/first-save.log" 2>&1 && { cat "$T/first-save.log"; fail "the job succeeded on a full disk"; }
rm -f "$MNT/filler"
grep -q "saving the model failed: .*; no model is saved in $MNT/model" "$T/first-save.log" \
    || { cat "$T/first-save.log"; fail "a failed first save does not say that no model is saved"; }
grep -q "previous model" "$T/first-save.log" && fail "a failed first save names a previous model"
[ -e "$MNT/model" ] && fail "a failed first save left $MNT/model"
ok "a failed first save says no model is saved in model/, and names no previous model"
pass
