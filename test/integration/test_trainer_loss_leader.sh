#!/usr/bin/env bash
# tags: drill
# Keep-best survives the loss of trainer 0 (issue 24). 3 trainers,
# job.allow_trainer_loss, a validation file (data.valid), a validation after every
# epoch; trainer 0 (the leader: it validates, saves the best model in
# RUN_DIR/model and scores data.eval once at the end) is killed (-9) after
# its first validation and the vote that follows it (its progress line past
# the first epoch's examples), so that every trainer holds its keep-best
# state. Trainer 1 leads from then on and goes on from that state:
#   - it says so, naming the lost leader's best NE, epoch and save;
#   - the job keeps the epoch of the lowest validation NE over every
#     validation logged (the lost leader's and its own). With a validation
#     file of training rows with flipped labels (below) and tables.lr 1 that
#     is the first epoch's for s-ma (11 runs, load 1-5, 2026-12-03: epoch 1
#     lower than epoch 2 by 0.04-0.38; with held-out rows flipped, or rows of
#     the whole file, epoch 2 was lower in 1 to 3 of 3-6 runs, tables.lr 1 to
#     3), whose save, the lost leader's, stays in RUN_DIR/model (MANIFEST)
#     and is restored before data.eval is scored;
#   - data.eval is scored once (eval_scorings 1), and the eval NE reported is
#     what RUN_DIR/model scores on its own (--eval-only).
# Before this the new leader's first validation kept and saved the model it
# held over the lost leader's better one (best_epoch 2 here).
# Sync none (each trainer validates its own replica; the new leader compares
# its replica's validations with the lost leader's best and saves its replica
# only when better): the same checks, the kept epoch being whichever
# validation was lowest (the replicas differ).
# Then both again with trainer 0 killed in its second validation, while the
# others wait for its vote: they find it gone in the vote's barrier, and
# trainer 1 validates the segment itself (s-ma) or compares the validation
# of its own replica with the lost leader's best (none). The validation file
# is larger there (100,000 rows, so that trainer 0 is killed inside its
# validation), and which epoch is best varies (seen: s-ma epoch 2 once in
# 3 runs): the kept epoch is checked against the lowest validation only.
# Last, s-ma stopped (SIGTERM) after trainer 0's first vote and resumed,
# trainer 0 killed before its first vote of the resumed job: trainer 1 goes
# on from the state its job checkpoint carried (run_resumed_case).
# ONLY_RESUMED=1 runs that case alone, RESUMED=0 leaves it out.
# Then trainer 0 killed in its end's work (scoring data.eval after the last
# vote), s-ma and none: trainer 1 takes the work over (run_end_case; END=0
# leaves it out).
. "$(dirname "$0")/lib.sh"
trap stop_launch EXIT  # lib.sh: the launcher (LP) and the job torn down
ROWS=150000
"$BIN/shadow-datagen" --rows $ROWS --seed 5 --out "$T/train.tsv" --eval-rows 10000 \
    --eval-out "$T/eval.tsv" >/dev/null 2>&1 || fail datagen
# the validation file: one training row in 20 with its label flipped, so
# that a model that fits the training rows more (every epoch sees them
# again) scores worse on it: the first epoch's validation is the best one.
# Rows of trainers 1 and 2's parts only (the last two thirds of the file),
# which go on training after trainer 0 is lost
awk 'BEGIN { FS = OFS = "\t" } NR > 50000 && NR % 20 == 0 { $1 = 1 - $1; print }' "$T/train.tsv" >"$T/flipped.tsv"
# a trainer's examples an epoch: 150,000 / 3 = 50,000. Killed at 57,000: its second segment trains, so the first vote has passed; an epoch
# takes about a second here, the kill lands within 0.15 s of the line
KILL_AT=${KILL_AT:-57000}

# kill_leader_at EXAMPLES SECONDS: kill -9 trainer 0 once its progress line
# shows at least EXAMPLES examples
kill_leader_at() {
    local want=$1 n=$(( $2 * 20 )) got
    while ((n-- > 0)); do
        got=$(sed -n "s/^trainer 0 | \([0-9]*\) ex .*/\1/p" "$T/run/logs/trainer-0.log" 2>/dev/null | tail -n 1)
        if [ -n "$got" ] && ((got >= want)); then
            pkill -9 -f -- "-c $JOB .*--rank 0( |\$)" || fail "no trainer 0 to kill"
            KILLED_EX="at $got examples, after its first validation"
            return 0
        fi
        kill -0 "$LP" 2>/dev/null || { cat "$T"/launch-*.log; fail "the job ended before trainer 0 reached $want examples"; }
        sleep 0.05
    done
    fail "trainer 0 did not reach $want examples within $2 s"
}

# kill_leader_validating SECONDS: kill -9 trainer 0 as soon as it has the
# second segment's dense average (a poll every 0.01 s), the last barrier
# before its second validation (0.2-0.7 s for the 100,000 validation rows of
# these cases), while the others wait in the vote, so that they find it gone
# in the vote's barrier. (A kill right after the segment's own barrier, the
# earlier trigger, could land before the averaging barrier: the others then
# find it gone there and trainer 1 leads into the vote, another path.)
kill_leader_validating() {
    local n=$(( $1 * 100 ))
    while ((n-- > 0)); do
        # (no log yet: a count of 0, not an empty string for [ -ge ] to complain of)
        if (( $(cat "$T/run/logs/trainer-0.log" 2>/dev/null | grep -c "model.dense_average: scoring the average") >= 2 )); then
            pkill -9 -f -- "-c $JOB .*--rank 0( |\$)" || fail "no trainer 0 to kill"
            KILLED_EX="in its second validation"
            return 0
        fi
        kill -0 "$LP" 2>/dev/null || { cat "$T"/launch-*.log; fail "the job ended before trainer 0's second validation"; }
        sleep 0.01
    done
    fail "trainer 0 did not end its second segment within $1 s"
}

# vals LOG: "epoch NE" of each validation LOG logged
vals() { sed -n 's/.*validation after \([0-9]*\) epoch(s): NE \([0-9.]*\).*/\1 \2/p' "$1"; }

# run_case ALGO [validating]: the job with trainer 0 killed in its second
# segment (or in its second validation); checks and prints the outcome
run_case() {
    local algo=$1 when=${2:-training} r=$T/run/result.json l0=$T/run/logs/trainer-0.log l1=$T/run/logs/trainer-1.log
    make_job 1 0 3 "data:" "  train: [$T/train.tsv]" \
        "  eval: [$T/eval.tsv]" "  valid: [$T/flipped.tsv]" "trainer:" "  workers: 1" \
        "  epochs: 3" "  eval_every: 1" "sync:" "  algorithm: $algo" "  timeout_ms: 1000" \
        "tables:" "  lr: ${LR:-1}" "metrics:" "  interval_s: 0.1"
    rm -rf "$T/run"
    launch --set job.allow_trainer_loss=true >"$T/launch-$algo.log" 2>&1 &
    LP=$!
    if [ "$when" = validating ]; then kill_leader_validating 60; else kill_leader_at "$KILL_AT" 60; fi
    wait_exit "$LP" 120 || { cat "$T/launch-$algo.log"; fail "$algo: job failed after trainer 0 was killed"; }
    LP=""
    grep -q '"trainers_lost":\[{"rank":0,"exit":137,' "$r" ||
        { cat "$r"; fail "$algo: result.json does not list trainer 0 as lost"; }
    [ "$when" = validating ] || [ "$(vals "$l0" | wc -l)" = 1 ] ||
        fail "$algo: trainer 0 validated $(vals "$l0" | wc -l) times before the kill, not once"
    local ne0 s0 best_ep best_ne kept mani
    ne0=$(vals "$l0" | awk '$1 == 1 { print $2 }')
    s0=$(sed -n 's/.*model saved to .*run\/model (dense model and embeddings of save \([0-9a-f]*\)).*/\1/p' "$l0" | head -n 1)
    [ -n "$s0" ] || fail "$algo: trainer 0 saved no model before the kill"
    grep -q "going on from the lost leader's keep-best state: best validation NE $ne0 after 1 epoch(s), save $s0" "$l1" ||
        fail "$algo: trainer 1 does not go on from the lost leader's state (NE $ne0, save $s0)"
    if [ "$when" = validating ]; then
        grep -q "the trainer that scores was lost; this one (rank 1) takes over" "$l1" ||
            fail "$algo: trainer 1 did not find trainer 0 gone in the vote"
        # trainer 2 waits in a second vote while trainer 1 scores and saves
        # (before, it trained the next segment meanwhile, changing the
        # embeddings trainer 1 scored and saved)
        grep -q "the trainer that scores was lost; voting again once rank 1, which leads now, has done its part" "$T/run/logs/trainer-2.log" ||
            fail "$algo: trainer 2 did not vote again after trainer 0 was lost in the vote"
        [ "$algo" != none ] || grep -q "this trainer's own validation after 2 epoch(s), NE [0-9.]*, against the lost leader's best" "$l1" ||
            fail "$algo: trainer 1 did not compare its own second validation with the lost leader's best"
    fi
    # the lowest NE over every validation of the model kept: trainer 0's and
    # trainer 1's since it leads (for none, its own replica's before too)
    read -r best_ep best_ne < <( { vals "$l0" | awk '$1 == 1'; vals "$l1" | awk '$1 > 1'; } | sort -k2,2g | head -n 1)
    kept=$(json_field "$r" best_epoch)
    [ "$kept" = "$best_ep" ] || fail "$algo: best_epoch $kept, the lowest validation NE $best_ne is epoch $best_ep's"
    [ "$(json_field "$r" eval_scorings)" = 1 ] || fail "$algo: eval_scorings $(json_field "$r" eval_scorings)"
    mani=$(sed -n 's/^save_id //p' "$T/run/model/MANIFEST")
    if [ "$best_ep" = 1 ]; then
        [ "$mani" = "$s0" ] || fail "$algo: RUN_DIR/model holds save $mani, not the lost leader's $s0"
        grep -q "the model kept (epoch 1, save $s0) restored on every PS" "$l1" ||
            fail "$algo: trainer 1 did not restore the lost leader's save before data.eval"
    fi
    same_as_eval_only "$(json_field "$r" eval_ne)" "$algo"
    no_leftovers
    # s-ma killed in training is the case of the lost leader's save kept; its
    # setting makes epoch 1 the best most of the time, not always (a fresh
    # clone's CI under ASan: epoch 2 NE 3.614 below epoch 1's; 8 local runs:
    # epoch 1 3.42-3.77, epoch 2 3.69-3.96): the caller runs it again
    if [ "$algo" != none ] && [ "$when" != validating ] && [ "$best_ep" != 1 ]; then
        echo "note: $algo: the validation after epoch $best_ep ($best_ne) beat the lost leader's (epoch 1, $ne0); kept epoch $kept as it should, but the lost leader's save was not the one kept: running the case again"
        return 2
    fi
    ok "$algo: trainer 0 killed $KILLED_EX (epoch 1's: NE $ne0, save $s0);" \
       "trainer 1's: $(vals "$l1" | awk '$1 > 1 { printf "epoch %s NE %s; ", $1, $2 }')kept epoch $kept" \
       "(save $mani$([ "$mani" = "$s0" ] && echo ", the lost leader's")), data.eval scored once, NE" \
       "$(json_field "$r" eval_ne) = --eval-only of RUN_DIR/model"
}

# progress_at LOG FROM: the examples of trainer 0's last progress line in
# LOG past its line FROM (0 when none yet)
progress_at() {
    tail -n +"$(($2 + 1))" "$1" 2>/dev/null | sed -n "s/^trainer 0 | \([0-9]*\) ex .*/\1/p" | tail -n 1
}

# run_resumed_case: the keep-best state survives a stop and --resume (the
# job checkpoint carries it whole: format 3 of trainer-R.state). s-ma as in
# run_case, stopped (SIGTERM, exit 75) in its second segment, after trainer
# 0's first validation and vote, then resumed; trainer 0 is killed at its
# first progress line after the resume, before any vote of the resumed job,
# so that trainer 1 takes over with nothing but what its own state file
# carried: it goes on from trainer 0's state of before the stop (its best
# NE, epoch 1, its save), and the checks of run_case hold. Before, the state
# file held no carried state: trainer 1 went on from its own empty history
# and its first validation kept its model (best_epoch 2 here, the lost
# leader's better save overwritten).
run_resumed_case() {
    local r=$T/run/result.json l0=$T/run/logs/trainer-0.log l1=$T/run/logs/trainer-1.log
    make_job 1 0 3 "data:" "  train: [$T/train.tsv]" \
        "  eval: [$T/eval.tsv]" "  valid: [$T/flipped.tsv]" "trainer:" "  workers: 1" \
        "  epochs: 3" "  eval_every: 1" "sync:" "  algorithm: s-ma" "  timeout_ms: 1000" \
        "tables:" "  lr: ${LR:-1}" "metrics:" "  interval_s: 0.1"
    rm -rf "$T/run"
    # the launcher itself in the background (not launch's subshell): the
    # SIGTERM goes to it
    "$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet --no-plots \
        --set job.allow_trainer_loss=true >"$T/launch-resumed.log" 2>&1 &
    LP=$!
    # stopped as early in epoch 2 as the first vote allows (trainer 0 past
    # its 50,000 examples of epoch 1 trains epoch 2: the vote has passed),
    # so that the resumed job has most of epoch 2 to train before its vote
    local n=1200 got=0 at_ex=${RESUME_AT:-51000}
    while ((n-- > 0)) && ((got < at_ex)); do
        got=$(progress_at "$l0" 0); got=${got:-0}
        kill -0 "$LP" 2>/dev/null || break
        sleep 0.05
    done
    ((got >= at_ex)) || { cat "$T/launch-resumed.log"; fail "resumed: trainer 0 did not reach $at_ex examples"; }
    kill -TERM "$LP"
    local rc=0
    wait_exit "$LP" 60 || rc=$?
    LP=""
    if [ "$rc" != 75 ]; then
        skip_case "resumed: the job ended with $rc before the SIGTERM could stop it (want 75)"
        return 0
    fi
    [ "$(vals "$l0" | wc -l)" = 1 ] ||
        fail "resumed: trainer 0 validated $(vals "$l0" | wc -l) times before the stop, not once"
    local ne0 s0 best_ep best_ne kept mani
    ne0=$(vals "$l0" | awk '$1 == 1 { print $2 }')
    s0=$(sed -n 's/.*model saved to .*run\/model (dense model and embeddings of save \([0-9a-f]*\)).*/\1/p' "$l0" | head -n 1)
    [ -n "$s0" ] || fail "resumed: trainer 0 saved no model before the stop"
    "$ROOT/scripts/shadow-launch" --resume "$T/run" --bin "$BIN" --quiet --no-plots \
        >"$T/resume-resumed.log" 2>&1 &
    LP=$!
    # the resumed job's logs are new files (the launcher moves the ones
    # before to logs.1): trainer 0 is killed at its first progress line past
    # its "resuming from" line, a poll every 0.02 s
    local at
    n=3000
    while ((n-- > 0)); do
        at=$(grep -n "INFO resuming from" "$l0" 2>/dev/null | head -n 1 | cut -d: -f1)
        if [ -n "$at" ] && [ -n "$(progress_at "$l0" "$at")" ]; then
            pkill -9 -f -- "-c $JOB .*--rank 0( |\$)" || fail "resumed: no trainer 0 to kill"
            break
        fi
        kill -0 "$LP" 2>/dev/null || { cat "$T/resume-resumed.log"; fail "resumed: the job ended before trainer 0 trained again"; }
        sleep 0.02
    done
    ((n >= 0)) || fail "resumed: trainer 0 did not train within 60 s of the resume"
    wait_exit "$LP" 120 || { cat "$T/resume-resumed.log"; fail "resumed: job failed after trainer 0 was killed"; }
    LP=""
    [ -f "$T/run/logs.1/trainer-1.log" ] || fail "resumed: no logs.1 (the logs of before the resume)"
    if grep -q "validation after" "$l0"; then
        echo "note: resumed: trainer 0 validated after the resume before it was killed (the rest of its segment took less than a poll): running the case again"
        return 2
    fi
    grep -q "going on from the lost leader's keep-best state: best validation NE $ne0 after 1 epoch(s), save $s0" "$l1" ||
        fail "resumed: trainer 1 does not go on from the state trainer 0 sent before the stop (NE $ne0, save $s0)"
    read -r best_ep best_ne < <( { vals "$T/run/logs.1/trainer-0.log" | awk '$1 == 1'; vals "$l1" | awk '$1 > 1'; } | sort -k2,2g | head -n 1)
    kept=$(json_field "$r" best_epoch)
    [ "$kept" = "$best_ep" ] || fail "resumed: best_epoch $kept, the lowest validation NE $best_ne is epoch $best_ep's"
    [ "$(json_field "$r" eval_scorings)" = 1 ] || fail "resumed: eval_scorings $(json_field "$r" eval_scorings)"
    mani=$(sed -n 's/^save_id //p' "$T/run/model/MANIFEST")
    if [ "$best_ep" = 1 ]; then
        [ "$mani" = "$s0" ] || fail "resumed: RUN_DIR/model holds save $mani, not the lost leader's $s0"
        grep -q "the model kept (epoch 1, save $s0) restored on every PS" "$l1" ||
            fail "resumed: trainer 1 did not restore the lost leader's save before data.eval"
    fi
    grep -q "MANIFEST names save" "$l1" && fail "resumed: trainer 1's state names another save than MANIFEST"
    same_as_eval_only "$(json_field "$r" eval_ne)" resumed
    no_leftovers
    ok "resumed: stopped after trainer 0's first validation (NE $ne0, save $s0), resumed, trainer 0" \
       "killed before its next vote; trainer 1 went on from that state, kept epoch $kept" \
       "(save $mani), data.eval scored once, NE $(json_field "$r" eval_ne) = --eval-only"
}

# run_resumed_case until trainer 0 is killed before its first vote after
# the resume (3 tries)
resumed_cases() {
    local tries=0
    until run_resumed_case; do
        (( ++tries < 3 )) || fail "resumed: 3 runs in a row, and in none was trainer 0 killed before it validated again"
    done
}
if [ "${ONLY_RESUMED:-0}" = 1 ]; then
    resumed_cases
    pass
fi

# s-ma until the lost leader's epoch 1 is the best (3 tries: see run_case)
tries=0
until run_case s-ma; do
    (( ++tries < 3 )) || fail "s-ma: 3 runs in a row, and in none was the lost leader's epoch 1 the best: the setting no longer makes epoch 1 the best"
done
run_case none
# the same, trainer 0 killed in its second validation: the others find it
# gone in the vote; trainer 1 validates the segment (s-ma) or compares its
# own replica's validation (none) with the lost leader's best
if [ "${VALIDATING:-1}" = 1 ]; then
    awk 'BEGIN { FS = OFS = "\t" } NR > 50000 { $1 = 1 - $1; print }' "$T/train.tsv" >"$T/flipped.tsv"
    run_case s-ma validating
    run_case none validating
fi
[ "${RESUMED:-1}" = 1 ] && resumed_cases

# run_end_case ALGO: trainer 0 killed after its last validation and save,
# while it scores data.eval at the end (300,000 eval rows: 0.3-0.5 s here),
# the others having ended the vote. They meet once more after the end's work
# (job.allow_trainer_loss), find it gone, and trainer 1, leading now, scores
# the model kept once. Before, the others ended at once and nothing scored
# data.eval. Returns 2 when the kill did not land in that work (the setting:
# the caller runs it again).
run_end_case() {
    local algo=$1 r=$T/run/result.json l0=$T/run/logs/trainer-0.log l1=$T/run/logs/trainer-1.log n=6000
    make_job 1 0 3 "data:" "  train: [$T/train-end.tsv]" "  eval: [$T/eval-end.tsv]" \
        "  valid_fraction: 0.05" "trainer:" "  workers: 1" "  epochs: 2" "  eval_every: 1" \
        "sync:" "  algorithm: $algo" "  timeout_ms: 1000" "metrics:" "  interval_s: 0.1"
    rm -rf "$T/run"
    launch --set job.allow_trainer_loss=true >"$T/launch-end-$algo.log" 2>&1 &
    LP=$!
    until grep -q "validation after 2 epoch" "$l0" 2>/dev/null || ((n-- == 0)); do
        kill -0 "$LP" 2>/dev/null || { cat "$T/launch-end-$algo.log"; fail "end, $algo: the job ended before trainer 0's last validation"; }
        sleep 0.01
    done
    ((n > 0)) || fail "end, $algo: trainer 0 did not validate after epoch 2 within 60 s"
    sleep "${END_DELAY:-0.15}"
    pkill -9 -f -- "-c $JOB .*--rank 0( |\$)" || fail "end, $algo: no trainer 0 to kill"
    wait_exit "$LP" 120 || { cat "$T/launch-end-$algo.log"; fail "end, $algo: job failed after trainer 0 was killed in its end"; }
    LP=""
    grep -q '"trainers_lost":\[{"rank":0,"exit":137,' "$r" || { cat "$r"; fail "end, $algo: result.json does not list trainer 0 as lost"; }
    if ! grep -q "the trainer that does the end's work (rank 0) was lost; rank 1, which leads now, does it" "$l1"; then
        echo "note: end, $algo: the kill did not land in trainer 0's end (it was lost elsewhere): running the case again"
        return 2
    fi
    grep -q "test (data.eval) of the model kept, from epoch [0-9]*, scored once" "$l1" ||
        fail "end, $algo: trainer 1 took over the end but did not score data.eval"
    [ "$(json_field "$r" eval_scorings)" = 1 ] || fail "end, $algo: eval_scorings $(json_field "$r" eval_scorings)"
    local kept ne
    kept=$(json_field "$r" best_epoch) ne=$(json_field "$r" eval_ne)
    same_as_eval_only "$ne" "end, $algo"  # (its scoring run writes RUN_DIR/result.json)
    no_leftovers
    ok "end, $algo: trainer 0 killed in its end's work; trainer 1 took it over and scored the model" \
       "kept (epoch $kept) once, NE $ne = --eval-only of RUN_DIR/model"
}
if [ "${END:-1}" = 1 ]; then
    "$BIN/shadow-datagen" --rows 90000 --seed 5 --out "$T/train-end.tsv" --eval-rows 300000 \
        --eval-out "$T/eval-end.tsv" >/dev/null 2>&1 || fail "datagen (end)"
    for algo in s-ma none; do
        tries=0
        until run_end_case $algo; do
            (( ++tries < 3 )) || fail "end, $algo: 3 runs in a row, and in none did the kill land in trainer 0's end's work"
        done
    done
fi
pass
