#!/usr/bin/env bash
# tags: quick
# An idle PS with several service threads sleeps (issue 19): threads 1..
# have no timer and sleep until a request, a connection event or a stop
# comes (they used to wake every 100 ms to look at the stop flag, and so did
# thread 0 with them); thread 0 wakes about once a second, as with one
# thread. A stop still reaches every thread: SIGTERM (taken by thread 0) and
# a SHUTDOWN stop the PS, which exits 0. About 10 s.
. "$(dirname "$0")/lib.sh"

[ -r /proc/self/task/$$/status ] || skip "no /proc/PID/task (not Linux?)"
make_job 1 0 1 "ps:" "  threads: 3"

# wakes PID TID: voluntary context switches of thread TID of PID so far
wakes() { sed -n 's/^voluntary_ctxt_switches:[[:space:]]*//p' "/proc/$1/task/$2/status"; }

# svc_tids PID: the PS's service threads (comm svc-N; the main one is thread 0)
svc_tids() {
    local t
    echo "$1"
    for t in /proc/"$1"/task/*; do
        case $(cat "$t/comm") in svc-*) echo "${t##*/}" ;; esac
    done
}

for how in sigterm shutdown; do
    start_ps embedding 0
    pid=$LAST_PID log=$T/embedding-0.log
    tids=($(svc_tids "$pid"))
    ((${#tids[@]} == 3)) || fail "[$how] ${#tids[@]} service threads found, want 3"
    sleep 0.5
    declare -A w0=()
    for t in "${tids[@]}"; do w0[$t]=$(wakes "$pid" "$t"); done
    sleep 3
    for t in "${tids[@]}"; do
        n=$(( $(wakes "$pid" "$t") - ${w0[$t]} ))
        # thread 0: a wake a second (4 at most in 3 s), threads 1..: none; a
        # few spare for the machine. The old 100 ms poll woke each 30 times.
        ((n <= 10)) || fail "[$how] idle service thread $t ($(cat /proc/$pid/task/$t/comm)) woke $n times in 3 s (at most 10)"
    done
    ok "[$how] idle for 3 s: no service thread woke more than 10 times"
    if [ "$how" = sigterm ]; then
        kill -TERM "$pid"
    else
        ctl shutdown >/dev/null || fail "[$how] shutdown"
    fi
    wait_log "$log" "stopped" 10
    wait "$pid" || fail "[$how] the PS exited $? (see $log)"
    ok "[$how] every service thread stopped, exit 0"
    : >"$log"
done
pass
