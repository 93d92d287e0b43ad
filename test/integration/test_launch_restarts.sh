#!/usr/bin/env bash
# The launcher's branches when a PS dies, and Ctrl-C (docs/operations.md):
# - an embedding PS killed before its first recovery checkpoint is restarted
#   with empty rows, and the job finishes (result.json: checkpoint_age_s null);
# (a sync PS killed before its first recovery checkpoint is restarted empty
# and re-seeded by the trainers: test_sync_reseed.sh);
# - job.max_ps_restarts 1: the second death ends the job ("restarts are used
#   up"), nothing left running;
# - SIGINT to a local launch (Ctrl-C) stops the job at once: exit status not
#   0, "interrupted", nothing left running.
# Recovery checkpoints are off (checkpoint.interval_s 0) but in the last case.
. "$(dirname "$0")/lib.sh"
"$BIN/shadow-datagen" --rows 150000 --seed 3 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen
make_job 2 1 2 "data:" "  train: [$T/train.tsv]" "trainer:" "  workers: 1" "  epochs: 1" \
    "sync:" "  algorithm: s-easgd" "checkpoint:" "  interval_s: 0"
RL=$T/run/logs
# start_job LOG [launch args]: a launch in the background, trainer 0 training
start_job() {
    local log=$1; shift
    rm -rf "$T/run"
    launch "$@" >"$log" 2>&1 &
    LP=$!; PIDS+=("$LP")
    wait_log "$RL/trainer-0.log" "training:" 30
}
kill_ps() { pkill -9 -f -- "-c $JOB .*--role $1 --shard $2" || fail "no $1 PS $2 to kill"; }

# Each trainer has 75,000 examples an epoch (under 1 s on a fast machine):
# the jobs below get enough epochs that they still run when the test acts on
# them; the first ends by itself, the other two are ended by the test.
# empty restart: the job goes on
start_job "$T/empty.log" --set trainer.epochs=4
kill_ps embedding 1
wait_exit "$LP" 120 || { cat "$T/empty.log"; fail "job failed after an empty restart"; }
grep -q "PS embedding:1 died (exit 137); restarting it from empty rows (no checkpoint yet)" \
    "$T/empty.log" || { cat "$T/empty.log"; fail "no empty-restart message"; }
grep -q '"ps_restarts":\[{"ps":"embedding:1","exit":137,[^]]*"checkpoint_age_s":null' \
    "$T/run/result.json" || { cat "$T/run/result.json"; fail "result.json: no empty restart"; }
no_leftovers
ok "embedding PS killed before any checkpoint: restarted empty, job finished"

# max_ps_restarts 1, checkpoints on: the second death ends the job
start_job "$T/max.log" --set job.max_ps_restarts=1 --set checkpoint.interval_s=1 \
    --set trainer.epochs=100
kill_ps embedding 0
wait_for 60 grep -q "PS embedding:0 died (exit 137); restarting it" "$T/max.log"
readies() { [ "$(grep -c "ready:" "$1")" -ge "$2" ]; }  # FILE N: N ready lines or more
wait_for 60 readies "$RL/ps-embedding-0.log" 2  # the restarted PS is up
kill_ps embedding 0
wait_exit "$LP" 60 && fail "job exited 0 after a second death with max_ps_restarts 1"
grep -q "PS embedding:0 on host .* died (exit 137) and job.max_ps_restarts (1) restarts are used up" \
    "$T/max.log" || { cat "$T/max.log"; fail "no message about the restarts used up"; }
no_leftovers
ok "max_ps_restarts 1: the second death ended the job, nothing left"

# Ctrl-C: SIGINT (a background job of a script ignores it: reset to default)
rm -rf "$T/run"
env --default-signal=INT "$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet \
    --set trainer.epochs=100 \
    >"$T/int.log" 2>&1 &
LP=$!; PIDS+=("$LP")
wait_log "$RL/trainer-0.log" "training:" 30
kill -INT "$LP"
wait_exit "$LP" 20 && fail "the launcher exited 0 after SIGINT"
grep -q "interrupted: stopping the job" "$T/int.log" || { cat "$T/int.log"; fail "no interrupt message"; }
no_leftovers
ok "SIGINT: the job stopped at once, nothing left running"
pass
