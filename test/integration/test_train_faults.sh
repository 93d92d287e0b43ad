#!/usr/bin/env bash
# Faults while training: a PS killed mid-run makes the job exit non-zero
# with a message naming it and leaves no process behind; a trainer whose PS
# stops answering names the endpoint instead of hanging; bad input lines are
# skipped and counted; missing data files are a clear error.
. "$(dirname "$0")/lib.sh"
"$BIN/shadow-datagen" --rows 400000 --seed 5 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen
make_job 2 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/train.tsv]" \
    "limits:" "  request_timeout_ms: 1500" "metrics:" "  interval_s: 0.2"

# 1. launcher: kill -9 embedding PS 1 once training runs
launch >"$T/launch.log" 2>&1 &
LP=$!
PIDS+=("$LP")
wait_log "$T/run/logs/trainer-0.log" "training:" 20
sleep 0.5
pkill -9 -f -- "-c $JOB --role embedding --shard 1" || fail "no PS to kill"
wait_exit "$LP" 30 && fail "job exited 0 after a PS was killed"
cat "$T/launch.log"
grep -q "embedding:1" "$T/launch.log" || fail "message does not name the dead PS"
no_leftovers
ok "killed PS: job failed naming embedding:1, nothing left running"

# 2. a trainer alone: its PS is frozen, the error names the endpoint
start_ps embedding 0
start_ps embedding 1
kill -STOP "$PID_embedding_1"
"$BIN/shadow-trainer" -c "$JOB" --rank 0 >"$T/tr.log" 2>&1 &
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
grep -q "nope.tsv" "$T/miss.log" || { cat "$T/miss.log"; fail "error does not name the file"; }
ok "missing file: $(grep -m1 nope.tsv "$T/miss.log" | cut -c1-150)"
pass
