#!/usr/bin/env bash
# A sync PS that dies after the final sync and before the save of the model
# (s-easgd, 2 trainers). The final sync pulled the center into every
# replica from the old PS; the launcher restarts the PS empty; the save that
# keeps the model then asks it to checkpoint. Before, the PS answered "not
# initialized", trainer 0 exited 74 and the job failed although nothing
# trained was lost (every replica held the center). Now the save puts the
# center back (the replica trainer 0 pulled) and asks again: exit 0, a
# whole model, one re-seed counted.
#
# No timing decides it: the embedding PS is frozen (SIGSTOP) once trainer 0
# logs its final sync complete (the trainers' pushes are all acknowledged
# then; the eval's lookups and the save's embedding checkpoint, which
# comes before the sync PS's, wait for it), both trainers' final syncs are
# waited for, the sync PS is killed, its empty restart is waited for, and
# only then is the embedding PS let go. The one race: the freeze must land
# before the embedding PS has answered the save's checkpoint (the eval of
# 100,000 rows comes in between); an attempt whose freeze came later is
# detected (that answer is in the log) and run again, as test_save_waits.sh
# does. model.dense_average is off, so that the saved dense model is the
# center itself and the saved sync shard can be compared with it.
. "$(dirname "$0")/lib.sh"
"$BIN/shadow-datagen" --rows 60000 --seed 13 --out "$T/train.tsv" \
    --eval-rows 100000 --eval-out "$T/eval.tsv" >/dev/null 2>&1 || fail datagen
make_job 1 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "model:" "  dense_average: 0" \
    "trainer:" "  workers: 1" "  epochs: 1" "sync:" "  algorithm: s-easgd" \
    "  timeout_ms: 1000" "checkpoint:" "  interval_s: 300" \
    "limits:" "  request_timeout_ms: 10000" "  recovery_timeout_ms: 60000"
L0=$T/run/logs/trainer-0.log
L1=$T/run/logs/trainer-1.log
SLOG=$T/run/logs/ps-sync-0.log

# the sync PS's log holds a second start
sync_ps_restarted() { [ "$(grep -c "ready: sync shard" "$SLOG")" -ge 2 ]; }

# attempt I: 0 when the drill ran and the job came through, 2 when the
# freeze landed after the embedding PS had checkpointed (nothing tested)
attempt() {
    local lp ep sp
    rm -rf "$T/run"
    launch >"$T/launch-$1.log" 2>&1 &
    lp=$!; PIDS+=("$lp")
    wait_log "$L0" "training:" 30
    ep=$(ps_pid embedding 0) || fail "no embedding PS"
    sp=$(ps_pid sync 0) || fail "no sync PS"
    wait_line_now "$L0" "final sync complete" 120 || fail "no final sync in trainer 0's log in 120 s"
    kill -STOP "$ep"
    if grep -q "checkpointed to .*embedding-0.ckpt" "$L0"; then  # too late
        kill -CONT "$ep"
        wait_exit "$lp" 60 || fail "attempt $1: the job failed (freeze too late)"
        return 2
    fi
    wait_log "$L1" "final sync complete" 60  # trainer 1 pulled from the old PS too
    kill -9 "$sp"
    wait_for 60 grep -q "restarting it from nothing" "$T/launch-$1.log"
    wait_for 60 sync_ps_restarted
    kill -CONT "$ep"
    local rc=0
    wait_exit "$lp" 120 || rc=$?
    [ "$rc" = 0 ] || { cat "$T/launch-$1.log"; fail "the job exited $rc: its sync PS" \
        "restarted empty between the final sync and the save"; }
    grep -q "was empty after the final sync (restarted?): put back the center" "$L0" \
        || fail "trainer 0 did not put the center back"
    for f in MANIFEST dense.bin embedding-0.ckpt sync-0.ckpt; do
        [ -f "$T/run/model/$f" ] || { ls "$T/run/model"; fail "model/$f missing"; }
    done
    grep -q "^sync_shards 1" "$T/run/model/MANIFEST" || fail "MANIFEST without the sync shard"
    [ "$(json_field "$T/run/result-trainer-0.json" sync_reseeds)" = 1 ] \
        || fail "trainer 0 counted no re-seed"
    # the center put back is the one every replica pulled: the saved sync
    # shard's values (the file's last bytes, after its header) are the
    # dense model's, float for float
    local n=$(( $(json_field "$T/run/result-trainer-0.json" dense_params) * 4 ))
    cmp -s <(tail -c "$n" "$T/run/model/dense.bin") <(tail -c "$n" "$T/run/model/sync-0.ckpt") \
        || fail "the saved center differs from the saved dense model"
    return 0
}
for ((i = 1; ; i++)); do
    r=0; attempt "$i" || r=$?
    [ "$r" = 0 ] && break
    ((i < 6)) || skip "the freeze came after the embedding PS's checkpoint in 6 jobs of 6"
    echo "attempt $i: the freeze came after the embedding PS's checkpoint; again"
done
ok "sync PS restarted empty after the final sync (job $i): the save put the center back," \
    "model whole, job exit 0"
no_leftovers
pass
