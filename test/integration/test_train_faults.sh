#!/usr/bin/env bash
# Faults while training: a PS killed with -9 mid-run is restarted by the
# launcher from its recovery checkpoint and the job finishes with an eval NE
# within 3% of a fault-free run (this short job's own run-to-run spread is
# about 2.5%: 0.669-0.687 over four fault-free runs); a PS stalled (SIGSTOP) for longer than the
# request timeout is waited out; a PS that dies more often than
# job.max_ps_restarts ends the job naming it, with nothing left running; a
# trainer whose PS stops answering (recovery off) names the endpoint instead
# of hanging; bad input lines are skipped and counted; missing data files are
# a clear error.
. "$(dirname "$0")/lib.sh"
"$BIN/shadow-datagen" --rows 400000 --seed 5 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen
make_job 2 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/train.tsv]" \
    "limits:" "  request_timeout_ms: 1500" "metrics:" "  interval_s: 0.2" \
    "checkpoint:" "  interval_s: 1"

# 0. the same job without faults, for its eval NE
launch >"$T/clean.log" 2>&1 || { cat "$T/clean.log"; fail "fault-free job failed"; }
NE0=$(json_field "$T/run/result.json" eval_ne)
ok "fault-free job: eval NE $NE0"

# 1. kill -9 of embedding PS 1 once training runs: restarted, the job ends well
rm -rf "$T/run"
launch >"$T/launch.log" 2>&1 &
LP=$!
PIDS+=("$LP")
wait_log "$T/run/logs/trainer-0.log" "eval after 1 epoch" 60
# right after a recovery checkpoint, so that what is lost is the fault's own
# cost (lookups retried, pushes in flight), not the checkpoint's age
n=$(grep -c "recovery checkpoint" "$T/run/logs/ps-embedding-1.log")
for _ in $(seq 100); do
    (( $(grep -c "recovery checkpoint" "$T/run/logs/ps-embedding-1.log") > n )) && break
    sleep 0.05
done
pkill -9 -f -- "-c $JOB .*--role embedding --shard 1" || fail "no PS to kill"
wait_exit "$LP" 120 || { cat "$T/launch.log"; fail "job failed after a PS was killed and restarted"; }
cat "$T/launch.log"
grep -q '"ps_restarts":\[{"ps":"embedding:1","exit":137' "$T/run/result.json" \
    || { cat "$T/run/result.json"; fail "result.json does not list the restart"; }
NE1=$(json_field "$T/run/result.json" eval_ne)
float_lt "$NE1" "$(awk -v a="$NE0" 'BEGIN { print a * 1.03 }')" \
    || fail "eval NE $NE1 after the restart, fault-free $NE0: more than 3% worse"
retries=$(( $(json_field "$T/run/result-trainer-0.json" lookup_retries) +
            $(json_field "$T/run/result-trainer-1.json" lookup_retries) ))
no_leftovers
ok "kill -9 of a PS: restarted from its checkpoint, job finished, eval NE $NE1 (fault-free $NE0), $retries lookups retried"

# 1b. SIGSTOP of embedding PS 0 for 4 s (request timeout 1.5 s): waited out
rm -rf "$T/run"
launch >"$T/stop.log" 2>&1 &
LP=$!
PIDS+=("$LP")
wait_log "$T/run/logs/trainer-0.log" "training:" 20
sleep 0.5
pkill -STOP -f -- "-c $JOB .*--role embedding --shard 0" || fail "no PS to stop"
sleep 4
pkill -CONT -f -- "-c $JOB .*--role embedding --shard 0"
wait_exit "$LP" 120 || { cat "$T/stop.log"; fail "job failed after a PS was stalled"; }
retries=$(( $(json_field "$T/run/result-trainer-0.json" lookup_retries) +
            $(json_field "$T/run/result-trainer-1.json" lookup_retries) ))
((retries > 0)) || fail "no lookup was retried while the PS was stopped"
NE2=$(json_field "$T/run/result.json" eval_ne)
float_lt "$NE2" "$(awk -v a="$NE0" 'BEGIN { print a * 1.03 }')" \
    || fail "eval NE $NE2 after the stall, fault-free $NE0: more than 3% worse"
ok "SIGSTOP of a PS for 4 s: $retries lookups retried, job finished, eval NE $NE2"

# 1c. no restarts allowed: the job ends naming the dead PS, nothing left running
rm -rf "$T/run"
launch --set job.max_ps_restarts=0 >"$T/dead.log" 2>&1 &
LP=$!
PIDS+=("$LP")
wait_log "$T/run/logs/trainer-0.log" "training:" 20
sleep 0.5
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
