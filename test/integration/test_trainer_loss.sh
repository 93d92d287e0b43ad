#!/usr/bin/env bash
# tags: drill
# A trainer killed with -9 mid-run (job.allow_trainer_loss, auto for the
# shadow algorithms): under s-ma the ring re-forms without it after
# sync.timeout_ms (stall) plus at most sync.timeout_ms (probe), the two
# survivors average among themselves and the job finishes through
# scripts/shadow-launch with result.json naming the lost trainer; its eval NE
# stays under a multiple (below) of the Bayes-optimal NE. Under s-easgd the
# survivors meet at the end-of-epoch barrier, which re-forms the same way. A
# trainer stopped (SIGSTOP) longer than that is declared dead too, and when it
# runs again it is refused with a clear error. Trainer 0 killed: trainer 1
# scores and saves the model instead. With allow_trainer_loss false the same kill still ends the job, nothing
# left running.
#
# The bound: the killed trainer's unread share of the data is not trained, so
# the NE is a little worse, not only noisier. Each faulted run's eval NE (on
# 50,000 held-out planted rows) must stay under a multiple of the
# Bayes-optimal NE the generator reports: a fixed bound, where one run
# against one fault-free run (1.03x, before) compared two noisy numbers.
# This job: 300k planted rows, 3 trainers of 100k rows an epoch, 2 epochs,
# trainer 1 killed at 120k of its 200k examples (1/8 of the examples lost);
# Bayes NE 0.7489. Observed, x Bayes (6 runs on a 2-core machine at load
# 10-30, 2026-12-02):
#   s-ma      fault-free 1.0500-1.0688, trainer 1 killed 1.0512-1.0582,
#             trainer 0 killed 1.0531-1.0695
#   s-easgd   fault-free 1.0499-1.0551, trainer 1 killed 1.0520-1.0607
# Bound 1.09 for each: about 0.02 over the highest (the largest run-to-run
# spread seen on planted data). Earlier records of the same job: s-ma
# fault-free 0.7865-0.7947 (1.050-1.061x), s-easgd 0.7879-0.8044 (1.052-
# 1.074x), a kill costing up to +2% against one fault-free run. What it
# catches is coarse: a ring mean divided by the job's trainer count instead of
# the ring's members after a loss (one line) scored 1.091x and 1.20x (trainer
# 1, trainer 0 killed) in one run, 1.062x and 1.089x in another.
. "$(dirname "$0")/lib.sh"
BOUND_SMA=${BOUND_SMA:-1.09} BOUND_SEASGD=${BOUND_SEASGD:-1.09} BOUND_LEAD=${BOUND_LEAD:-1.09}  # x Bayes
KILL_AT=${KILL_AT:-120000}  # trainer 1's examples when it is killed
trap stop_launch EXIT  # lib.sh: the launcher (LP) and the job torn down
"$BIN/shadow-datagen" --rows 300000 --seed 5 --out "$T/train.tsv" \
    --eval-rows 50000 --eval-out "$T/eval.tsv" >"$T/datagen.json" 2>/dev/null || fail datagen
BAYES=$(json_field "$T/datagen.json" eval.bayes_ne)
[ -n "$BAYES" ] || { cat "$T/datagen.json"; fail "no Bayes NE in the datagen output"; }
# under_bound WHAT NE BOUND: fails unless NE < BOUND x the Bayes-optimal NE
under_bound() {
    float_lt "$2" "$(awk -v b="$BAYES" -v k="$3" 'BEGIN { print b * k }')" ||
        fail "$1: eval NE $2 is $(x_bayes "$2") x the Bayes-optimal $BAYES, over the bound $3"
}
x_bayes() { awk -v a="$1" -v b="$BAYES" 'BEGIN { printf "%.4f", a / b }'; }

# kill_trainer_at RANK EXAMPLES SECONDS: kill -9 the trainer once its progress
# line shows at least EXAMPLES examples. A line every 0.1 s (metrics.interval_s,
# the least it takes), read every 0.05 s: the kill lands at most about 0.15 s
# of training past EXAMPLES, 40,000 examples on a machine 4 times as fast as
# this one (70,000 a second a trainer here), inside the trainer's 200,000
kill_trainer_at() {
    local r=$1 want=$2 n=$(( $3 * 20 )) got
    while ((n-- > 0)); do
        got=$(sed -n "s/^trainer $r | \([0-9]*\) ex .*/\1/p" "$T/run/logs/trainer-$r.log" 2>/dev/null | tail -n 1)
        if [ -n "$got" ] && ((got >= want)); then
            pkill -9 -f -- "-c $JOB .*--rank $r( |\$)" || fail "no trainer $r to kill"
            KILLED_T=$(date +%s.%N) KILLED_EX=$got
            return 0
        fi
        sleep 0.05
    done
    fail "trainer $r did not reach $want examples within $3 s"
}

# drill ALGO N_SYNC NE_BOUND: a fault-free run, then the same job with
# trainer 1 killed; checks the result and that NE < NE_BOUND x Bayes
drill() {
    local algo=$1 ns=$2 bound=$3 ne0 ne1 t0
    make_job 2 "$ns" 3 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
        "sync:" "  algorithm: $algo" "  timeout_ms: 1000" "metrics:" "  interval_s: 0.1"
    rm -rf "$T/run"
    t0=$(date +%s)
    timeout 90 "$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet >"$T/clean-$algo.log" 2>&1 ||
        { cat "$T/clean-$algo.log"; fail "$algo: fault-free job failed"; }
    ne0=$(json_field "$T/run/result.json" eval_ne)
    NE_CLEAN=$ne0
    grep -q '"trainers_lost":\[\]' "$T/run/result.json" || fail "$algo: fault-free result lists a lost trainer"
    ok "$algo fault-free: eval NE $ne0 ($(x_bayes "$ne0") x Bayes) in $(( $(date +%s) - t0 )) s"

    rm -rf "$T/run"
    t0=$(date +%s)
    "$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet >"$T/loss-$algo.log" 2>&1 &
    LP=$!
    kill_trainer_at 1 "$KILL_AT" 60
    wait_exit "$LP" 90 || { cat "$T/loss-$algo.log"; fail "$algo: job failed after trainer 1 was killed"; }
    cat "$T/loss-$algo.log"
    grep -q '"trainers_lost":\[{"rank":1,"exit":137,"at_s":[0-9.]*}\]' "$T/run/result.json" ||
        { cat "$T/run/result.json"; fail "$algo: result.json does not list trainer 1 as lost"; }
    grep -q "trainers lost     1 (rank 1 (exit 137)); the others finished without it" "$T/loss-$algo.log" || fail "$algo: summary does not say"
    [ ! -f "$T/run/result-trainer-1.json" ] || fail "$algo: the killed trainer wrote a result"
    for r in 0 2; do
        f=$T/run/result-trainer-$r.json
        [ "$(json_field "$f" ring_size)" = 2 ] || fail "$algo: trainer $r ends with ring_size $(json_field "$f" ring_size)"
        [ "$(json_field "$f" ring_changes)" = 1 ] || fail "$algo: trainer $r: ring_changes $(json_field "$f" ring_changes)"
        grep -q "ring membership change 1: rank(s) 1 left the ring.*ring of 2 now: ranks 0,2" \
            "$T/run/logs/trainer-$r.log" || fail "$algo: trainer $r did not log the membership change"
    done
    [ "$algo" = s-easgd ] || [ "$(json_field "$T/run/result-trainer-0.json" sync_final_ok)" = true ] ||
        fail "$algo: final sync not ok"
    # seconds from the kill to the first survivor's membership line
    local line_t reform
    line_t=$(grep -h "ring membership change 1" "$T/run/logs/trainer-0.log" "$T/run/logs/trainer-2.log" |
             cut -c12-23 | sort | head -n 1)
    reform=$(awk -v k="$KILLED_T" -v l="$line_t" 'BEGIN { split(l, a, ":");
        s = a[1] * 3600 + a[2] * 60 + a[3]; d = s - (k % 86400); if (d < 0) d += 86400; printf "%.2f", d }')
    ne1=$(json_field "$T/run/result.json" eval_ne)
    under_bound "$algo with trainer 1 lost" "$ne1" "$bound"
    LP=""
    no_leftovers
    ok "$algo, trainer 1 killed at $KILLED_EX examples (past $KILL_AT): ring re-formed $reform s after the kill" \
       "(ring_reform_ms $(json_field "$T/run/result-trainer-0.json" ring_reform_ms)), job finished in" \
       "$(( $(date +%s) - t0 )) s, eval NE $ne1 = $(x_bayes "$ne1") x Bayes (fault-free $ne0, $(awk -v a="$ne0" -v b="$ne1" \
       'BEGIN { printf "%+.2f%%", (b / a - 1) * 100 }'))"
}

drill s-ma 0 "$BOUND_SMA"
# s-ma, a trainer stopped (SIGSTOP) as one cut off by the network: the
# others declare it dead and re-form; when it runs again (let go once a
# survivor logs the new ring: the event, not a time) its pieces carry the old
# ring and are refused, it is told, stops with a clear error (exit 1), and
# the job finishes without it. 8 epochs, 800,000 examples a survivor, so
# that the others still run when it wakes: the re-form takes up to 2 s
# (sync.timeout_ms stall + probe), and with 4 epochs a machine twice as fast
# as this one (about 100,000 examples a second a survivor) was near its end
# by then. (Its NE is not compared: stopped at the start, it loses a full
# third of the data.)
rm -rf "$T/run"
"$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet --set trainer.epochs=8 >"$T/stop.log" 2>&1 &
LP=$!
wait_log "$T/run/logs/trainer-1.log" "^trainer 1 | [1-9]" 60
pkill -STOP -f -- "-c $JOB .*--rank 1( |\$)" || fail "no trainer 1 to stop"
wait_log "$T/run/logs/trainer-0.log" "ring membership change 1: rank(s) 1 left the ring" 30
[ -f "$T/run/result-trainer-0.json" ] && fail "the survivors finished before trainer 1 woke (size the job up)"
pkill -CONT -f -- "-c $JOB .*--rank 1( |\$)"
wait_exit "$LP" 90 || { cat "$T/stop.log"; fail "job failed after trainer 1 was stopped for 3 s"; }
LP=""
grep -q '"trainers_lost":\[{"rank":1,"exit":1,' "$T/run/result.json" ||
    { cat "$T/run/result.json"; fail "result.json does not list the stopped trainer 1 (exit 1)"; }
grep -q "ERROR .*this trainer was declared dead and left out of the ring: rank [02]'s ring (ranks 0,2)" \
    "$T/run/logs/trainer-1.log" || fail "trainer 1 does not say it was declared dead"
no_leftovers
ok "trainer 1 stopped until the others re-formed without it: declared dead, refused when back ($(grep -c "final sync round failed" \
    "$T/run/logs/trainer-1.log") final retries), job finished without it"

# s-ma, trainer 0 (the one that scores and saves) killed: trainer 1, the
# lowest rank left, scores and saves the output model instead
rm -rf "$T/run"
"$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet >"$T/lead.log" 2>&1 &
LP=$!
kill_trainer_at 0 "$KILL_AT" 60
wait_exit "$LP" 90 || { cat "$T/lead.log"; fail "job failed after trainer 0 was killed"; }
LP=""
grep -q '"trainers_lost":\[{"rank":0,"exit":137,' "$T/run/result.json" ||
    { cat "$T/run/result.json"; fail "result.json does not list trainer 0 as lost"; }
[ "$(json_field "$T/run/result-trainer-1.json" model_saved)" = true ] || fail "trainer 1 did not save the model"
[ -f "$T/run/model/dense.bin" ] || fail "no model saved"
NE_LEAD=$(json_field "$T/run/result.json" eval_ne)
under_bound "s-ma with trainer 0 lost" "$NE_LEAD" "$BOUND_LEAD"
no_leftovers
ok "s-ma, trainer 0 killed: trainer 1 scored (eval NE $NE_LEAD = $(x_bayes "$NE_LEAD") x Bayes, fault-free $NE_CLEAN) and saved the model"

drill s-easgd 1 "$BOUND_SEASGD"

# allow_trainer_loss false: the same kill ends the job, naming the trainer
rm -rf "$T/run"
"$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet \
    --set job.allow_trainer_loss=false >"$T/strict.log" 2>&1 &
LP=$!
kill_trainer_at 1 20000 60
wait_exit "$LP" 30 && fail "job exited 0 after a trainer died with allow_trainer_loss false"
grep -q "trainer 1 exited with status 137" "$T/strict.log" || { cat "$T/strict.log"; fail "message does not name trainer 1"; }
LP=""
no_leftovers
ok "allow_trainer_loss false: the job ended naming trainer 1, nothing left running"
pass
