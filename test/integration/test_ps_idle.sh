#!/usr/bin/env bash
# tags: quick
# An idle PS sleeps (issue 19: a job with many PS processes pays every idle
# wake-up of each): with one service thread, its main thread wakes about once
# a second (the shard's clock tick), not every 100 ms; and a signal still
# goes to the main thread, also with a job token (whose ZAP handler thread
# must not be the one that takes SIGTERM) or a metrics server, so that it
# stops the PS at once; and it loads libmicrohttpd only to serve /metrics.
# About 12 s.
. "$(dirname "$0")/lib.sh"

[ -r /proc/self/task/$$/status ] || skip "no /proc/PID/task (not Linux?)"
(umask 077 && echo "t0k3n-$RANDOM-0123456789abcdef" >"$T/job.token") || fail "token file"
make_job 1 0 1 "ps:" "  threads: 1"

# wakes PID: voluntary context switches of PID's main thread so far
wakes() { sed -n 's/^voluntary_ctxt_switches:[[:space:]]*//p' "/proc/$1/task/$1/status"; }

# only_main_takes_signals PID: every thread of PID but the main one blocks
# SIGTERM and SIGINT (SigBlk bits 14 and 1), so a signal ends the main
# thread's poll at once (the main thread sleeps up to a second when idle)
only_main_takes_signals() {
    local t blk n=0
    for t in /proc/"$1"/task/*; do
        [ "${t##*/}" = "$1" ] && continue
        blk=$(sed -n 's/^SigBlk:[[:space:]]*//p' "$t/status")
        (( (0x$blk & 0x4002) == 0x4002 )) ||
            fail "thread ${t##*/} ($(cat "$t/comm")) of the PS takes SIGTERM or SIGINT (SigBlk $blk)"
        n=$((n + 1))
    done
    ok "its $n other threads block SIGTERM and SIGINT"
}

# http_lib PID: 1 when PID has libmicrohttpd loaded
http_lib() { grep -q 'libmicrohttpd' "/proc/$1/maps" && echo 1 || echo 0; }

for how in plain token metrics; do
    sets=()
    [ "$how" = token ] && sets=(--set "security.token_file=$T/job.token")
    [ "$how" = metrics ] && sets=(--set "metrics.port=$(free_port)")
    start_ps embedding 0 "${sets[@]}"
    pid=$LAST_PID log=$T/embedding-0.log
    sleep 0.5
    w0=$(wakes "$pid")
    sleep 3
    w1=$(wakes "$pid")
    n=$((w1 - w0))
    # a wake a second (4 at most in 3 s, as ticks fall), a few spare for the
    # machine; the old 100 ms poll woke 30 times
    ((n <= 10)) || fail "[$how] the idle PS's main thread woke $n times in 3 s (at most 10)"
    ok "[$how] idle for 3 s: its main thread woke $n times"
    only_main_takes_signals "$pid"
    # libmicrohttpd (and its TLS libraries) only in a PS that serves /metrics
    [ "$(http_lib "$pid")" = "$([ "$how" = metrics ] && echo 1 || echo 0)" ] ||
        fail "[$how] libmicrohttpd loaded: $(http_lib "$pid") (only with metrics.port)"
    ok "[$how] libmicrohttpd loaded: $(http_lib "$pid")"
    kill -TERM "$pid"
    wait_log "$log" "stopped" 10
    wait "$pid" || fail "[$how] the PS exited $? on SIGTERM (see $log)"
    : >"$log"
done
pass
