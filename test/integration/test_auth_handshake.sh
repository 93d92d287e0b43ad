#!/usr/bin/env bash
# Authentication before any payload (issue 22, items 2 and 6). libzmq hands
# a multi-frame message to the PS only once every frame has arrived, and
# limits.max_message_bytes bounds a frame, not a message: one message of 40
# frames of 8 MiB makes a PS without a job token hold 320 MiB before it can
# refuse it (the control below: the test fails when it cannot see that).
# With security.token_file set, every connection must show the secret at its
# ZeroMQ handshake (PLAIN, checked by the ZAP handler): a client without it,
# one with a wrong secret, and a bare socket that claims PLAIN and sends the
# frames without the handshake leave the PS's peak resident memory (VmHWM)
# within 16 MiB; the bare socket is cut after its first frame. A client with
# the secret is served; one without gets no reply at all.
. "$(dirname "$0")/lib.sh"
make_job 1 0 1
(umask 077 && echo "t0k3n-$RANDOM-0123456789abcdef" >"$T/job.token" &&
    echo "wrong-$RANDOM-0123456789abcdef" >"$T/wrong.token") || fail "token files"
FRAMES=40 FRAME_MB=8
hwm_kb() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status"; }
send_frames() { "$PROBE" -c "$JOB" "$@" frames --frames $FRAMES --frame-mb $FRAME_MB --hold-ms 1000; }
mib() { echo $(( ($2 - $1) / 1024 )); }

# the control: no token, the whole message is buffered before the refusal
start_ps embedding 0
PS=$LAST_PID
h0=$(hwm_kb $PS)
"$PROBE" -c "$JOB" frames --frames $FRAMES --frame-mb $FRAME_MB --hold-ms 20000 \
    >"$T/control.out" 2>&1 &
FP=$!
PIDS+=("$FP")
for ((n = 0; n < 200; n++)); do  # the whole message is in within 20 s, even under load
    h1=$(hwm_kb $PS)
    [ "$(mib "$h0" "$h1")" -ge $((FRAMES * FRAME_MB - 20)) ] && break
    sleep 0.1
done
kill "$FP" 2>/dev/null; wait "$FP" 2>/dev/null
control=$(mib "$h0" "$h1")
[ "$control" -ge 200 ] || fail "control: the PS without a token peaked only $control MiB above" \
    "its start under a $((FRAMES * FRAME_MB)) MiB message: this test cannot see the memory"
ctl shutdown >/dev/null || fail "shutdown of the control PS"
wait_exit $PS 20 || fail "the control PS exited non-zero"
ok "without a job token: one message of $FRAMES x $FRAME_MB MiB, PS peak ${h0} kB -> ${h1} kB (+$control MiB)"

# with the token: three clients without it
start_ps embedding 0 --set "security.token_file=$T/job.token"
PS=$LAST_PID
h0=$(hwm_kb $PS)
send_frames >"$T/null.out" 2>&1 || { cat "$T/null.out"; fail "frames (no token) not sent"; }
h1=$(hwm_kb $PS)
send_frames --set "security.token_file=$T/wrong.token" >"$T/wrong.out" 2>&1 \
    || { cat "$T/wrong.out"; fail "frames (wrong token) not sent"; }
h2=$(hwm_kb $PS)
send_frames --raw-plain >"$T/raw.out" 2>&1 || { cat "$T/raw.out"; fail "frames (bare socket) not sent"; }
h3=$(hwm_kb $PS)
grown=$(mib "$h0" "$h3")
[ "$grown" -lt 16 ] || fail "with the token the PS peaked $grown MiB above its start" \
    "(no token +$(mib "$h0" "$h1"), wrong token +$(mib "$h1" "$h2"), bare +$(mib "$h2" "$h3") MiB)"
taken=$(json_field "$T/raw.out" bytes_taken)
[ -n "$taken" ] && [ "$taken" -lt $((3 * FRAME_MB * 1048576)) ] \
    || { cat "$T/raw.out"; fail "the bare socket got ${taken:-?} bytes in (more than 2 frames)"; }
ok "with security.token_file: PS peak +$(mib "$h0" "$h1") MiB (no token), +$(mib "$h1" "$h2")" \
    "MiB (wrong token), +$(mib "$h2" "$h3") MiB (bare socket, cut after $taken bytes of" \
    "$((FRAMES * FRAME_MB)) MiB)"

# a client with the secret is served, one without gets no reply; counted
tctl() { ctl --set "security.token_file=$T/job.token" "$@"; }
tctl ping >"$T/ping.out" 2>&1 || { cat "$T/ping.out"; fail "a client with the token not served"; }
if ctl --timeout-ms 1500 ping >"$T/keyless.out" 2>&1; then
    cat "$T/keyless.out"; fail "a client without the token was answered"
fi
grep -q "no reply" "$T/keyless.out" || { cat "$T/keyless.out"; fail "keyless: not 'no reply'"; }
tctl --json stats >"$T/stats.json" || fail "stats with the token"
read -r refused failed <<<"$(json_field "$T/stats.json" stats.auth_refused,stats.handshakes_failed)"
[ "${refused:-0}" -ge 1 ] && [ "${failed:-0}" -ge 2 ] \
    || { cat "$T/stats.json"; fail "auth_refused $refused, handshakes_failed $failed"; }
grep -q "wrong job token" "$T/embedding-0.log" || fail "the refusal is not logged"
ok "with the token served; without it no reply; auth_refused $refused, handshakes_failed $failed"
tctl shutdown >/dev/null || fail "shutdown with the token"
wait_exit $PS 20 || fail "the PS exited non-zero"
no_leftovers
pass
