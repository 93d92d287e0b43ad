#!/usr/bin/env bash
# tags: drill
# Faults while training: a PS killed with -9 mid-run is restarted by the
# launcher from its recovery checkpoint and the job finishes with an eval NE
# (on held-out rows of the planted model) under FAULT_BOUND x the
# Bayes-optimal NE; a PS stalled (SIGSTOP) for longer than the request
# timeout is waited out, under the same bound, and the pushes it did not
# answer in time are counted, never sent twice (pushes_unconfirmed); a PS
# that dies more often than job.max_ps_restarts ends the job naming it, with
# nothing left running; a trainer whose PS stops answering (recovery off)
# names the endpoint instead of hanging; bad input lines are skipped and
# counted; missing data files are a clear error.
# The bound: this job without faults scores 1.044, 1.047, 1.052 x Bayes
# (three runs on a loaded 2-core machine), with the kill -9 and the SIGSTOP
# 1.048 each; before, each fault run was compared with one fault-free run
# within 3% (observed +2.78%: one noisy run against another, and a run more
# to pay for). FAULT_BOUND 1.07 leaves twice the fault-free spread over the
# worst fault-free run.
. "$(dirname "$0")/lib.sh"
FAULT_BOUND=1.07
"$BIN/shadow-datagen" --rows 400000 --seed 5 --out "$T/train.tsv" --eval-rows 50000 \
    --eval-out "$T/eval.tsv" >"$T/datagen.json" 2>"$T/datagen.log" \
    || { cat "$T/datagen.log"; fail datagen; }
bayes=$(json_field "$T/datagen.json" eval.bayes_ne)
[ -n "$bayes" ] || { cat "$T/datagen.json"; fail "no Bayes NE in the datagen output"; }
LIMIT=$(awk -v b="$bayes" -v k=$FAULT_BOUND 'BEGIN { printf "%.4f", b * k }')
make_job 2 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "limits:" "  request_timeout_ms: 1500" "metrics:" "  interval_s: 0.2" \
    "checkpoint:" "  interval_s: 1"

# 1. kill -9 of embedding PS 1 once training runs: restarted, the job ends well
rm -rf "$T/run"
launch >"$T/launch.log" 2>&1 &
LP=$!
PIDS+=("$LP")
# in trainer 0's second epoch (200,000 examples each), once the model of the
# first is saved (a save waits at most 6 request timeouts, 9 s, for a PS: one
# killed during a save failed the job, seen with ASan-built daemons), at a
# point in the data, not a time: past KILL_EX examples, right after a
# recovery checkpoint of PS 1 if one comes before KILL_EX_LAST (so that what
# is lost is the fault's own cost: lookups retried, pushes in flight, not the
# checkpoint's age). The trainers then have most of the epoch to train, which
# waits for the PS's restart, and the final save comes after it (a kill timed
# in seconds could come after the last lookup on a fast or loaded machine,
# and the final save's HELLO to the restarting PS timed out). The window is
# wide because this script's polling lags under load (at load 24 it once saw
# trainer 0 at 396,778 when a window of 250,000-300,000 was meant).
KILL_EX=220000 KILL_EX_LAST=270000
M0=$T/run/metrics-trainer-0.jsonl
wait_log "$T/run/logs/trainer-0.log" "model saved to" 120
wait_for 120 examples_above "$M0" $KILL_EX
n=$(grep -c "recovery checkpoint" "$T/run/logs/ps-embedding-1.log")
for _ in $(seq 600); do  # 30 s at most
    (( $(grep -c "recovery checkpoint" "$T/run/logs/ps-embedding-1.log") > n )) && break
    examples_above "$M0" $KILL_EX_LAST && break
    sleep 0.05
done
ex=$(tail -n 1 "$M0" | json_field - examples 2>/dev/null)
[ -f "$T/run/result-trainer-0.json" ] && fail "training ended before the kill (trainer 0 at $ex examples)"
pkill -9 -f -- "-c $JOB .*--role embedding --shard 1" || fail "no PS to kill"
wait_exit "$LP" 120 || { cat "$T/launch.log"; fail "job failed after a PS was killed and restarted"; }
cat "$T/launch.log"
grep -q '"ps_restarts":\[{"ps":"embedding:1","exit":137' "$T/run/result.json" \
    || { cat "$T/run/result.json"; fail "result.json does not list the restart"; }
NE1=$(json_field "$T/run/result.json" eval_ne)
float_lt "$NE1" "$LIMIT" \
    || fail "eval NE $NE1 after the restart: over $FAULT_BOUND x Bayes $bayes ($LIMIT)"
retries=$(( $(json_field "$T/run/result-trainer-0.json" lookup_retries) +
            $(json_field "$T/run/result-trainer-1.json" lookup_retries) ))
no_leftovers
ok "kill -9 of a PS at $ex examples of trainer 0: restarted from its checkpoint, job finished, eval NE $NE1" \
    "($(awk -v a="$NE1" -v b="$bayes" 'BEGIN { printf "%.4f", a / b }') x Bayes), $retries lookups retried"

# 1b. SIGSTOP of embedding PS 0 for 4 s (request timeout 1.5 s): waited out
rm -rf "$T/run"
launch >"$T/stop.log" 2>&1 &
LP=$!
PIDS+=("$LP")
wait_log "$T/run/logs/trainer-0.log" "training:" 20
# mid-training: past the first batches, whose requests carry lookups only
# (a stop then left no push in flight to count; seen at load 25), and far
# from the end of trainer 0's 400,000 examples on any machine
wait_for 30 examples_above "$T/run/metrics-trainer-0.jsonl" 20000
pkill -STOP -f -- "-c $JOB .*--role embedding --shard 0" || fail "no PS to stop"
sleep 4
pkill -CONT -f -- "-c $JOB .*--role embedding --shard 0"
wait_exit "$LP" 120 || { cat "$T/stop.log"; fail "job failed after a PS was stalled"; }
retries=$(( $(json_field "$T/run/result-trainer-0.json" lookup_retries) +
            $(json_field "$T/run/result-trainer-1.json" lookup_retries) ))
((retries > 0)) || fail "no lookup was retried while the PS was stopped"
unconf=$(( $(json_field "$T/run/result-trainer-0.json" pushes_unconfirmed) +
            $(json_field "$T/run/result-trainer-1.json" pushes_unconfirmed) ))
((unconf > 0)) || fail "no push counted unconfirmed while the PS was stopped (sent again?)"
NE2=$(json_field "$T/run/result.json" eval_ne)
float_lt "$NE2" "$LIMIT" \
    || fail "eval NE $NE2 after the stall: over $FAULT_BOUND x Bayes $bayes ($LIMIT)"
ok "SIGSTOP of a PS for 4 s: $retries lookups retried, $unconf pushes unconfirmed (not" \
    "resent), job finished, eval NE $NE2 ($(awk -v a="$NE2" -v b="$bayes" 'BEGIN { printf "%.4f", a / b }') x Bayes)"

# 1c. no restarts allowed: the job ends naming the dead PS, nothing left running
rm -rf "$T/run"
launch --set job.max_ps_restarts=0 >"$T/dead.log" 2>&1 &
LP=$!
PIDS+=("$LP")
wait_log "$T/run/logs/trainer-0.log" "training:" 20
# mid-training: past the first batches, whose requests carry lookups only
# (a stop then left no push in flight to count; seen at load 25), and far
# from the end of trainer 0's 400,000 examples on any machine
wait_for 30 examples_above "$T/run/metrics-trainer-0.jsonl" 20000
pkill -9 -f -- "-c $JOB .*--role embedding --shard 1" || fail "no PS to kill"
wait_exit "$LP" 30 && fail "job exited 0 after a PS died with restarts off"
cat "$T/dead.log"
grep -q "embedding:1" "$T/dead.log" || fail "message does not name the dead PS"
no_leftovers
ok "killed PS with job.max_ps_restarts 0: job failed naming embedding:1, nothing left running"

# 2. a trainer alone: its PS is frozen, the error names the endpoint
start_ps embedding 0
start_ps embedding 1
kill -STOP "$PID_embedding_1"
"$BIN/shadow-trainer" -c "$JOB" --rank 0 --set limits.recovery_timeout_ms=0 >"$T/tr.log" 2>&1 &
TP=$!
PIDS+=("$TP")
wait_exit "$TP" 20 && fail "trainer exited 0 with a frozen PS"
EP1=$("$BIN/shadow-ctl" -c "$JOB" config get cluster.embedding.1)
grep -q "$EP1" "$T/tr.log" || { cat "$T/tr.log"; fail "trainer error does not name $EP1"; }
ok "frozen PS: $(grep ERROR "$T/tr.log" | head -n 1 | cut -c1-160)"
kill -CONT "$PID_embedding_1"
kill -9 "$PID_embedding_0" "$PID_embedding_1"

# a job with one trainer for the rest
make_job 2 0 1 "data:" "  train: [$T/train.tsv]" "  eval: [$T/train.tsv]" "trainer:" "  epochs: 1"
start_ps embedding 0
start_ps embedding 1

# 3. bad lines are skipped and counted, never fatal
{ head -n 300 "$T/train.tsv"; echo "garbage line"; printf '2\t1\t2\n'; printf 'x\n';
  printf '1\tnotanumber\n'; tail -n 300 "$T/train.tsv"; } >"$T/bad.tsv"
"$BIN/shadow-trainer" -c "$JOB" --rank 0 \
    --set data.train="$T/bad.tsv" --set data.eval="$T/bad.tsv" >"$T/bad.log" 2>&1 \
    || { cat "$T/bad.log"; fail "trainer failed on bad lines"; }
bad=$(json_field "$T/run/result-trainer-0.json" bad_lines)
ex=$(json_field "$T/run/result-trainer-0.json" examples)
[ "$bad" = 4 ] && [ "$ex" = 600 ] || { cat "$T/bad.log"; fail "bad_lines $bad examples $ex, want 4 and 600"; }
ok "4 bad lines skipped and counted, 600 trained"

# 4. a missing data file is a clear error
if "$BIN/shadow-trainer" -c "$JOB" --rank 0 --set data.train="$T/nope.tsv" >"$T/miss.log" 2>&1; then
    fail "trainer succeeded without its data"
fi
# (the config dump names the file too: the ERROR line must, with the reason)
grep -q "ERROR data.train: cannot open '$T/nope.tsv': No such file or directory" "$T/miss.log" \
    || { cat "$T/miss.log"; fail "no error naming the key, the file and the reason"; }
ok "missing file: $(grep -m1 "ERROR.*nope.tsv" "$T/miss.log" | cut -c1-150)"
pass
