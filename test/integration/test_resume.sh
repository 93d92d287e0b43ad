#!/usr/bin/env bash
# tags: drill
# SIGTERM then --resume (the drill of issue 9): a job on the planted data is
# stopped with SIGTERM to the launcher after some progress; the launcher
# exits 75 with a complete job checkpoint (every trainer's state, the PSs'
# embeddings); shadow-launch --resume RUN_DIR finishes the job, which then has
# trained exactly the examples of a fault-free run (no example lost or seen
# twice: the readers go on from their offsets) and scores an eval NE under
# NE_TOL x the Bayes-optimal NE of the held-out rows (see below). Every
# trainer resumes with the dense model, optimizer state and (s-bmuf) block
# state it saved, bit for bit (digests in the logs); s-bmuf runs without a
# fault-free twin (its NE is held to the same bound) to keep the drill within
# the ASan run's time limit. Trainer 0's PS-wait latency histogram
# (/metrics) goes on across the resume: its _count just after the resume is
# at least the one scraped just before the SIGTERM (when curl is there).
# SIGTERM while one trainer waits at a
# segment's end and the other is still in it. Refusals: a run directory without a job checkpoint, another
# trainer count, a run directory a live launch holds. A second SIGTERM stops
# the job at once.
. "$(dirname "$0")/lib.sh"
ALGOS=${RESUME_ALGOS:-"s-ma s-easgd s-bmuf"}
# The bound. Each resumed job's eval NE, on 50,000 held-out planted rows,
# must stay under NE_TOL x the Bayes-optimal NE the generator reports (s-bmuf
# included, which has no fault-free twin). Before, it was compared with one
# fault-free run of the same invocation: two noisy numbers. Eval was on the
# training file then, where the NE measured memorized rows (0.91-0.94x Bayes)
# and spread 3.7% between fault-free runs (0.6860-0.7117); a full make test
# saw s-easgd resume +3.7% over its twin, past the 3% bound of the time.
# Observed on held-out rows (Bayes 0.7489), x Bayes, 5 runs on a 2-core
# machine at load 15-30 (2026-12-02): s-ma fault-free 1.0470-1.0528, resumed
# 1.0435-1.0470; s-easgd fault-free 1.0469-1.0487, resumed 1.0460-1.0478;
# s-bmuf resumed 1.0446-1.0515. Bound 1.08: about 0.02 over the highest, the
# largest run-to-run spread seen on planted data (test_sync_quality). s-bmuf
# with its block momentum measured from g instead of t (one line) resumes at
# 1.137x: caught here, where before s-bmuf's NE was not compared at all.
# The NE bound is the coarse check (a resume that loses the model outright);
# the exact ones are each trainer's dense-state digest at the checkpoint and
# at the resume (bit for bit: a build that resumed with the dense model and
# its Adagrad state re-initialized scored only +3.2%) and the example count
# (lost or repeated training).
NE_TOL=${NE_TOL:-1.08}
"$BIN/shadow-datagen" --rows 400000 --seed 5 --out "$T/train.tsv" \
    --eval-rows 50000 --eval-out "$T/eval.tsv" >"$T/datagen.json" 2>/dev/null || fail datagen
BAYES=$(json_field "$T/datagen.json" eval.bayes_ne)
[ -n "$BAYES" ] || { cat "$T/datagen.json"; fail "no Bayes NE in the datagen output"; }
x_bayes() { awk -v a="$1" -v b="$BAYES" 'BEGIN { printf "%.4f", a / b }'; }
resume() { "$ROOT/scripts/shadow-launch" --resume "$@" --bin "$BIN" --quiet; }
# metrics on: any non-zero metrics.port; the launcher picks a free port for
# each process and lists them in RUN_DIR/metrics.ports (read by wait_count)
MPORT=9400
HAVE_CURL=0; command -v curl >/dev/null && HAVE_CURL=1
[ "$HAVE_CURL" = 1 ] || skip_case "the PS-wait histogram across the resume (curl is not installed)"
wait_count() {  # trainer 0's batch_ps_wait histogram _count now (its metrics)
    curl -sf --max-time 5 "http://127.0.0.1:$(awk '$1 == "trainer" && $2 == 0 { print $3 }' "$T/run/metrics.ports")/metrics" \
        | sed -n 's/^shadowsync_trainer_batch_ps_wait_seconds_count\({[^}]*}\)\{0,1\} \([0-9]*\)$/\2/p'
}
examples_now() {  # trainer 0's last progress line: examples so far
    sed -n 's/.*trainer 0 | \([0-9]*\) ex |.*/\1/p' "$T/run/logs/trainer-0.log" | tail -n 1
}
past() { (( $(examples_now || echo 0) + 0 >= $1 )); }  # past N: trainer 0's progress is N or more

for algo in $ALGOS; do
    make_job 2 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
        "metrics:" "  interval_s: 0.2" "  port: $MPORT" "sync:" "  algorithm: $algo"
    EX0=800000  # 400000 rows x 2 epochs
    NE0=""
    if [ "$algo" != s-bmuf ]; then
        rm -rf "$T/run"
        launch >"$T/clean-$algo.log" 2>&1 || { cat "$T/clean-$algo.log"; fail "$algo: fault-free job failed"; }
        NE0=$(json_field "$T/run/result.json" eval_ne)
        ex=$(json_field "$T/run/result.json" examples)
        [ "$ex" = "$EX0" ] || fail "$algo: fault-free job trained $ex examples, want 400000 rows x 2 epochs"
        grep -q '"resumed":false' "$T/run/result.json" || fail "$algo: result.json lacks resumed false"
        [ ! -e "$T/run/jobckpt" ] || fail "$algo: a finished job left a job checkpoint"
        ok "$algo fault-free: eval NE $NE0 ($(x_bayes "$NE0") x Bayes $BAYES), $EX0 examples"
    fi

    # SIGTERM once trainer 0 has trained some of its examples (30% of its 400k)
    rm -rf "$T/run"
    # the launcher itself, not a shell function around it: it gets the SIGTERM
    "$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet >"$T/stop-$algo.log" 2>&1 &
    LP=$!
    PIDS+=("$LP")
    wait_for 60 past 120000
    at=$(examples_now)
    H0=""
    [ "$HAVE_CURL" = 0 ] || H0=$(wait_count)
    [ "$HAVE_CURL" = 0 ] || [ -n "$H0" ] || fail "$algo: no batch_ps_wait histogram on trainer 0's metrics port"
    kill -TERM "$LP"
    wait_exit "$LP" 150; rc=$?
    cat "$T/stop-$algo.log"
    [ "$rc" = 75 ] || fail "$algo: the launcher exited $rc after SIGTERM, want 75"
    grep -q "job checkpoint saved in $T/run/jobckpt" "$T/stop-$algo.log" || fail "$algo: no checkpoint message"
    grep -q "resume with: .*--resume $T/run" "$T/stop-$algo.log" || fail "$algo: the message does not say how to resume"
    no_leftovers
    for f in MANIFEST trainer-0.state trainer-1.state embedding-0.ckpt embedding-1.ckpt; do
        [ -s "$T/run/jobckpt/$f" ] || fail "$algo: jobckpt/$f missing"
    done
    if [ "$algo" = s-easgd ]; then
        [ -s "$T/run/jobckpt/sync-0.ckpt" ] || fail "$algo: jobckpt/sync-0.ckpt (the center) missing"
    fi
    ls -d "$T/run"/jobckpt.new-* 2>/dev/null && fail "$algo: a jobckpt.new-* folder is left"
    EXC=$(sed -n 's/^examples //p' "$T/run/jobckpt/MANIFEST")
    ((EXC > 0 && EXC < EX0)) || fail "$algo: the checkpoint holds $EXC examples, want between 0 and $EX0"
    ok "$algo SIGTERM after $at examples of trainer 0: exit 75, job checkpoint of $EXC examples (all trainers)"

    resume "$T/run" >"$T/resume-$algo.log" 2>&1 &
    LP=$!
    PIDS+=("$LP")
    H1=""
    if [ "$HAVE_CURL" = 1 ]; then  # once trainer 0 has restored its state
        wait_log "$T/run/logs/trainer-0.log" "resuming from" 60
        H1=$(wait_count)
        [ -n "$H1" ] || fail "$algo: no batch_ps_wait histogram on the resumed trainer 0"
        ((H1 >= H0 && H1 > 0)) \
            || fail "$algo: trainer 0's batch_ps_wait histogram counts $H1 after the resume, $H0 before the SIGTERM: it did not go on"
    fi
    wait_exit "$LP" 300 || { cat "$T/resume-$algo.log"; fail "$algo: the resumed job failed"; }
    cat "$T/resume-$algo.log"
    grep -q '"resumed":true' "$T/run/result.json" || fail "$algo: result.json does not say resumed"
    [ "$(json_field "$T/run/result.json" resumed_from_examples)" = "$EXC" ] \
        || fail "$algo: resumed_from_examples is not $EXC"
    # each trainer's dense model and optimizer state, bit for bit: the digest
    # it logged when it wrote its state is the one of what it resumed with
    for r in 0 1; do
        d0=$(sed -n 's/.*job checkpoint: state written .*digest \([0-9a-f]*\)).*/\1/p' \
            "$T/run/logs.1/trainer-$r.log")
        d1=$(sed -n 's/.*resuming from .*trainer-'$r'.state: .*digest \([0-9a-f]*\)$/\1/p' \
            "$T/run/logs/trainer-$r.log")
        [ -n "$d0" ] && [ "$d0" = "$d1" ] \
            || fail "$algo: trainer $r wrote dense state digest '$d0', resumed with '$d1'"
        [ "$algo" = s-bmuf ] || continue
        # BMUF's global model, block momentum and target
        s0=$(sed -n 's/.*job checkpoint: state written (.* \([0-9]*\) floats of sync state, digest \([0-9a-f]*\);.*/\1 \2/p' \
            "$T/run/logs.1/trainer-$r.log")
        s1=$(sed -n 's/.*sync state restored: \([0-9]*\) floats, digest \([0-9a-f]*\)$/\1 \2/p' \
            "$T/run/logs/trainer-$r.log")
        [ -n "$s0" ] && [ "${s0%% *}" -gt 0 ] && [ "$s0" = "$s1" ] \
            || fail "$algo: trainer $r wrote sync state '$s0' (floats digest), restored '$s1'"
    done
    EX1=$(json_field "$T/run/result.json" examples)
    # every example once: not restarted from zero (EX0 + EXC), none skipped
    [ "$EX1" = "$EX0" ] || fail "$algo: the resumed job trained $EX1 examples in all, a fault-free run $EX0 ($EXC before SIGTERM)"
    NE1=$(json_field "$T/run/result.json" eval_ne)
    float_lt "$NE1" "$(awk -v b="$BAYES" -v t="$NE_TOL" 'BEGIN { print b * t }')" \
        || fail "$algo: eval NE $NE1 after the resume is $(x_bayes "$NE1") x the Bayes-optimal $BAYES, over the bound $NE_TOL"
    [ -f "$T/run/logs.1/trainer-0.log" ] || fail "$algo: the logs before the resume were not kept"
    [ ! -e "$T/run/jobckpt" ] || fail "$algo: the finished job left its job checkpoint"
    no_leftovers
    ok "$algo resumed: $((EX1 - EXC)) examples after the resume + $EXC before = $EX1 (fault-free $EX0), eval NE $NE1 = $(x_bayes "$NE1") x Bayes (fault-free ${NE0:-not run}); dense${s0:+ and sync} state restored bit for bit${H1:+; PS-wait histogram _count $H0 before the SIGTERM, $H1 just after the resume}"
done

# SIGTERM while one trainer waits at the end of a segment and the other is
# still in it (the case a loaded machine produces by chance): trainer 0 is
# stopped (SIGSTOP) mid-epoch until trainer 1 has finished its epoch and waits
# at the segment's barrier; then SIGTERM to the launcher and SIGCONT. Both
# must go on in that segment when resumed: every example once. (A smaller
# input: 200000 rows, 2 epochs. Trainer 0 is stopped past 15,000 of its
# 100,000 examples an epoch, seen within about 0.15 s (a progress line every
# 0.1 s, read every 0.05 s): mid-epoch even on a machine 4 times as fast as
# this one, about 115,000 examples a second a trainer. With 100,000 rows and
# a line every 0.2 s read every 0.1 s, it was 50,000 an epoch and up to
# 35,000 past the point here already.)
"$BIN/shadow-datagen" --rows 200000 --seed 6 --out "$T/edge.tsv" >/dev/null 2>&1 || fail datagen
make_job 2 1 2 "data:" "  train: [$T/edge.tsv]" "  eval: [$T/edge.tsv]" \
    "metrics:" "  interval_s: 0.1" "sync:" "  algorithm: s-easgd" "  timeout_ms: 60000"
rm -rf "$T/run"
"$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet >"$T/edge.log" 2>&1 &
LP=$!
PIDS+=("$LP")
wait_for 60 past 15000
tp=$(pgrep -f -- "shadow-trainer -c $JOB --rank 0( |\$)") || fail "segment edge: no trainer 0"
kill -STOP $tp
# the case under test: trainer 0 stopped inside its first segment
EDGE=1
grep -q "segment done" "$T/run/logs/trainer-0.log" && EDGE=0
wait_log "$T/run/logs/trainer-1.log" "segment done: 1 epoch" 60
kill -TERM "$LP"
# the launcher has passed the SIGTERM on: pending at the stopped trainer 0
wait_log "$T/edge.log" "SIGTERM: stopping the job with a job checkpoint" 20
wait_for 10 sig_pending "$tp" 15
kill -CONT $tp
wait_exit "$LP" 150; rc=$?
[ "$rc" = 75 ] || { cat "$T/edge.log"; fail "segment edge: the launcher exited $rc after SIGTERM, want 75"; }
EXC=$(sed -n 's/^examples //p' "$T/run/jobckpt/MANIFEST")
resume "$T/run" >"$T/edge-resume.log" 2>&1 || { cat "$T/edge-resume.log"; fail "segment edge: the resumed job failed"; }
EX1=$(json_field "$T/run/result.json" examples)
[ "$EX1" = 400000 ] || { cat "$T/edge-resume.log"; fail "segment edge: the resumed job trained $EX1 examples in all, a fault-free run 400000 ($EXC before SIGTERM, trainer 1 done with its first epoch)"; }
no_leftovers
if [ "$EDGE" = 1 ]; then
    ok "SIGTERM with trainer 1 done with its epoch, trainer 0 not: resumed in that segment, $EXC + $((EX1 - EXC)) = $EX1 examples"
else
    skip_case "segment edge: trainer 0 was past its first segment when stopped (resumed whole: $EXC + $((EX1 - EXC)) = $EX1 examples)"
fi

# refusals: no job checkpoint (the finished job removed it)
resume "$T/run" >"$T/refuse1.log" 2>&1; rc=$?
[ "$rc" = 2 ] && grep -q "no complete job checkpoint" "$T/refuse1.log" \
    || { cat "$T/refuse1.log"; fail "resume without a job checkpoint: exit $rc"; }
ok "refused without a job checkpoint: $(head -n 1 "$T/refuse1.log" | cut -c1-120)"
# another trainer count
mkdir -p "$T/run/jobckpt"
printf 'shadowsync-jobckpt 1\nsave_id 1\ntrainers 3\nembedding_shards 2\nexamples 5\n' >"$T/run/jobckpt/MANIFEST"
resume "$T/run" >"$T/refuse2.log" 2>&1; rc=$?
[ "$rc" = 2 ] && grep -q "holds 3 trainers' states, the job has 2" "$T/refuse2.log" \
    || { cat "$T/refuse2.log"; fail "resume with another trainer count: exit $rc"; }
ok "refused with another trainer count: $(head -n 1 "$T/refuse2.log" | cut -c1-120)"
# a run directory a live launch holds
exec {LK}>"$T/run/.launch.lock"
flock -n "$LK" || fail "cannot take the lock"
resume "$T/run" >"$T/refuse3.log" 2>&1; rc=$?
exec {LK}>&-
[ "$rc" = 2 ] && grep -q "in use by another launch" "$T/refuse3.log" \
    || { cat "$T/refuse3.log"; fail "resume of a locked run directory: exit $rc"; }
ok "refused while another launch holds the run directory"

# a second SIGTERM tears the job down at once (no checkpoint wait)
rm -rf "$T/run"
"$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet >"$T/twice.log" 2>&1 &
LP=$!
PIDS+=("$LP")
wait_log "$T/run/logs/trainer-0.log" "trainer 0 |" 60
# Trainer 1 is stopped (SIGSTOP) first, so that the job checkpoint cannot
# complete before the second SIGTERM comes: on this small job it otherwise
# took under 0.3 s, and the launcher exited 75 before the second one.
tp=$(pgrep -f -- "shadow-trainer -c $JOB --rank 1( |\$)") || fail "two SIGTERMs: no trainer 1"
kill -STOP $tp
kill -TERM "$LP"
wait_log "$T/twice.log" "SIGTERM: stopping the job with a job checkpoint" 20  # the first one taken
kill -TERM "$LP"
wait_exit "$LP" 45; rc=$?  # "at once": no 120 s checkpoint wait (ASan daemons under load take seconds to die)
kill -CONT $tp 2>/dev/null  # (the launcher's teardown has killed it: no_leftovers checks)
[ "$rc" = 1 ] && grep -q "second SIGTERM: stopping the job at once" "$T/twice.log" \
    || { cat "$T/twice.log"; fail "two SIGTERMs: exit $rc"; }
no_leftovers
ok "a second SIGTERM stops the job at once (exit 1), nothing left running"
pass
