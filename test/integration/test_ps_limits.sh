#!/usr/bin/env bash
# Bounded resources (issue 9). A client that sends lookups of 1M keys and
# never reads the replies leaves the PS under its stated memory bound, inline
# (ps.threads 1) and behind the proxy (ps.threads 2), while another client is
# served all along; before, every reply queued (40 such lookups: +1.3 GB). A
# PS out of file descriptors logs the connections it refuses and serves again
# once they close. A PS bound to every interface without CURVE warns.
. "$(dirname "$0")/lib.sh"
Q=4           # security.max_in_flight
KEYS=1000000  # keys per lookup: 8 MB requests, 34 MB replies (dim 8 + 1)
ROUNDS=14
make_job 1 0 1 "model:" "  embedding_dim: 8" "  bottom_mlp: [64, 8]" \
    "checkpoint:" "  interval_s: 0" "security:" "  max_in_flight: $Q"

# The bound (docs/security.md): per connection that stops reading, at most
# Q + 3 + 2 x threads replies and Q + 3 x threads requests held, plus 64 MiB
# of socket buffers and allocator slack. It does not grow with ROUNDS.
bound_mb() {
    awk -v q=$Q -v t="$1" -v k=$KEYS 'BEGIN { rep = k * 9 * 4 / 2^20; req = k * 8 / 2^20;
        printf "%.0f", (q + 3 + 2 * t) * rep + (q + 3 * t) * req + 64 }'
}
for threads in 1 2; do
    start_ps embedding 0 --set ps.threads=$threads
    b=$(bound_mb $threads)
    "$PROBE" -c "$JOB" flood --keys $KEYS --rounds $ROUNDS \
        --bound-mb "$b" >"$T/flood-$threads.json" 2>"$T/flood-$threads.err" \
        || { cat "$T/flood-$threads.json" "$T/flood-$threads.err"; fail "flood, $threads threads"; }
    dropped=$(json_field "$T/flood-$threads.json" replies_dropped)
    [ "${dropped:-0}" -ge $((ROUNDS - Q - 3 - 2 * threads)) ] \
        || { cat "$T/flood-$threads.json"; fail "replies not capped"; }
    grep -q "dropped a reply" "$T/embedding-0.log" || fail "drops not logged"
    ok "ps.threads $threads: $(cat "$T/flood-$threads.json")"
    ctl shutdown >/dev/null || fail "shutdown"
    wait_exit "$PID_embedding_0" 10 || fail "PS exited non-zero"
    mv "$T/embedding-0.log" "$T/embedding-0-flood-$threads.log"
    fresh_port embedding 0  # the next PS binds a port of its own: no client holds this one
done

# 150 connections at a PS whose open-file limit is 96: it says so at start,
# warns near the limit, logs the refused connections, and serves again after
( ulimit -n 96; exec "$BIN/shadow-ps" -c "$JOB" --role embedding --shard 0 ) >"$T/fd.log" 2>&1 &
PIDS+=($!)
FD_PID=$!
wait_log "$T/fd.log" "ready:" 20
grep -q "open-file limit (96, hard limit included) leaves room for about" "$T/fd.log" \
    || fail "no warning about the open-file limit at start"
"$PROBE" -c "$JOB" conns --clients 150 --hold-ms 1500 >"$T/conns.out" 2>&1 \
    || { cat "$T/conns.out"; fail "not served after the connections closed"; }
grep -q "90% of the" "$T/fd.log" || fail "no warning near the limit"
grep -q "refused .* connection attempt.*Too many open files" "$T/fd.log" \
    || fail "refused connections not logged"
refused=$(ctl --json stats | json_field - stats.connections_refused)
[ "${refused:-0}" -gt 0 ] || fail "refused connections not counted"
ok "fd limit: $(cat "$T/conns.out"); refusals logged and counted"
kill -TERM "$FD_PID"; wait_exit "$FD_PID" 10 || fail "PS exited non-zero"

# security.max_connections is a bound (issue 22: 4,500 were accepted at
# 4,096): 80 clients at a PS that takes 40, then a new one is served
( exec "$BIN/shadow-ps" -c "$JOB" --set security.max_connections=40 --role embedding --shard 0 ) \
    >"$T/maxc.log" 2>&1 &
PIDS+=($!)
MC_PID=$!
wait_log "$T/maxc.log" "ready:" 20
"$PROBE" -c "$JOB" conns --clients 80 --hold-ms 1500 >"$T/maxc.out" 2>&1 \
    || { cat "$T/maxc.out"; fail "max_connections: not served after the connections closed"; }
answered=$(sed -n 's/.* opened, \([0-9]*\) answered.*/\1/p' "$T/maxc.out")
[ -n "$answered" ] && [ "$answered" -le 40 ] || { cat "$T/maxc.out"; fail "max_connections 40: $answered answered"; }
grep -q "beyond security.max_connections (40" "$T/maxc.log" || fail "max_connections: nothing logged"
refused=$(ctl --json stats | json_field - stats.connections_refused)
[ "${refused:-0}" -ge 40 ] || fail "max_connections: $refused refused, want at least 40"
ok "security.max_connections 40: $(cat "$T/maxc.out"); $refused refused, logged"
kill -TERM "$MC_PID"; wait_exit "$MC_PID" 10 || fail "PS exited non-zero"

# every interface without CURVE: a warning naming the risk
"$BIN/shadow-ps" -c "$JOB" --role embedding --shard 0 \
    --bind tcp://0.0.0.0:0 >"$T/any.log" 2>&1 &
PIDS+=($!)
ANY_PID=$!
wait_log "$T/any.log" "ready:" 20
grep -q "which other hosts can reach, without CURVE" "$T/any.log" || fail "no warning for 0.0.0.0"
kill -TERM "$ANY_PID"; wait_exit "$ANY_PID" 10 || fail "PS exited non-zero"
ok "0.0.0.0 without CURVE: warned"
no_leftovers
pass
