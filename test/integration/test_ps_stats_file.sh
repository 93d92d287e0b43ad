#!/usr/bin/env bash
# tags: quick
# The PS's exit counters as a JSON file (shadow-ps --stats-file): by default
# beside its log (NAME.log -> NAME.stats.json), whole where the log line may
# be cut at 1 KiB, equal to the "stats at exit" line; an explicit path; and
# 'none' writes nothing.
. "$(dirname "$0")/lib.sh"

make_job 1 1 1 "tables:" "  admit_after: 0"
LOG=$T/embedding-0.log STATS=$T/embedding-0.stats.json

# stop_ps0: SIGTERM to embedding PS 0 and wait for it (it exits 0)
stop_ps0() {
    kill -TERM "$PID_embedding_0"
    wait "$PID_embedding_0" || fail "PS exited $? on SIGTERM (see $LOG)"
}

start_ps embedding 0
"$PROBE" -c "$JOB" push --client 0 --rounds 3 --keys 400 >"$T/push.log" 2>&1 \
    || { cat "$T/push.log"; fail "push"; }
stop_ps0
[ -s "$STATS" ] || { ls -l "$T"; fail "no $STATS beside the log"; }
jq -e '.role == "embedding" and .shard == 0 and .keys_pushed == 1200 and .rows == 400' \
    "$STATS" >/dev/null || { cat "$STATS"; fail "stats file: wrong counters"; }
line=$(sed -n 's/.*stats at exit: //p' "$LOG" | tail -n 1)
[ "$(jq -S -c . <<<"$line")" = "$(jq -S -c . "$STATS")" ] \
    || { echo "$line"; cat "$STATS"; fail "stats file differs from the log line"; }
ok "stats at exit beside the log: $(jq -c '{keys_pushed, rows}' "$STATS"), equal to the log line"

rm -f "$STATS"
start_ps embedding 0 --stats-file "$T/explicit.json"
stop_ps0
jq -e '.keys_pushed == 0' "$T/explicit.json" >/dev/null || fail "--stats-file PATH not written"
[ ! -e "$STATS" ] || fail "--stats-file PATH also wrote beside the log"
start_ps embedding 0 --stats-file none
stop_ps0
[ ! -e "$STATS" ] || fail "--stats-file none wrote $STATS"
ok "--stats-file PATH writes PATH only; --stats-file none writes nothing"
pass
