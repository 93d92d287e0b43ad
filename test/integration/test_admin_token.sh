#!/usr/bin/env bash
# A launched local job cannot be stopped by a local process that lacks its
# secret (issue 22, item 6): without CURVE, shadow-launch makes
# RUN_DIR/admin.token (mode 0600), and every SHUTDOWN, CHECKPOINT and INIT
# must carry it. A plain client (the job file alone) may read stats but its
# SHUTDOWN is refused without a word about the job, and the job finishes;
# shadow-ctl --run RUN_DIR (the launch's arguments) carries the token. The
# same secret is asked at the handshake (security.token_file): a client
# without it gets no reply to SHUTDOWN, stats or LOOKUP. A token file that
# other users can read is refused at start.
#
# The job must run through every check below (the clients without the secret
# wait out a 1.5 s request timeout): with 2 epochs (300,000 examples, about
# 2.5 s here) a faster machine could finish first, and the checks that the job
# "still runs" failed. It has 40 epochs now, more than any machine trains in
# the checks' time, and the test ends it with SIGTERM: the job checkpoint that
# stops it goes through the PSs' CHECKPOINT, which must carry the token.
. "$(dirname "$0")/lib.sh"
"$BIN/shadow-datagen" --rows 150000 --seed 4 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen
make_job 2 1 1 "data:" "  train: [$T/train.tsv]" "  eval: [$T/train.tsv]" \
    "sync:" "  algorithm: s-easgd" "trainer:" "  epochs: 40" "  batch_size: 64"
# (the launcher itself, not the lib's launch function: it gets the SIGTERM)
"$ROOT/scripts/shadow-launch" "$JOB" --bin "$BIN" --quiet --no-plots >"$T/launch.log" 2>&1 &
LP=$!
PIDS+=("$LP")
wait_log "$T/run/logs/trainer-0.log" "training:" 30
[ "$(stat -c %a "$T/run/admin.token")" = 600 ] || fail "admin.token has mode $(stat -c %a "$T/run/admin.token")"

# the same secret is asked at every connection's handshake
# (security.token_file): a client that cannot read it gets no reply at all,
# to SHUTDOWN, stats or a LOOKUP (ps_probe dump: HELLO, then lookups); with
# it the same LOOKUP is answered. All at once (each waits out a timeout).
mapfile -t ARGS <"$T/run/cluster.args"
grep -qx "security.token_file=$T/run/admin.token" "$T/run/cluster.args" \
    || fail "the launch did not set security.token_file"
nokey=(--set security.admin_token_file= --set security.token_file= --set limits.request_timeout_ms=1500)
NK=()
for i in 1 2 3 4; do
    "$BIN/shadow-ctl" "${ARGS[@]}" "${nokey[@]}" shutdown >"$T/nokey-$i.out" 2>&1 &
    NK+=($!)
done
"$BIN/shadow-ctl" "${ARGS[@]}" "${nokey[@]}" stats >"$T/nokey-stats.out" 2>&1 &
NK+=($!)
"$PROBE" "${ARGS[@]}" "${nokey[@]}" dump --keys 50 --out "$T/nokey.rows" >"$T/nokey-lookup.out" 2>&1 &
NK+=($!)
PIDS+=("${NK[@]}")
"$PROBE" "${ARGS[@]}" dump --keys 50 --out "$T/key.rows" >"$T/key-lookup.out" 2>&1 \
    || { cat "$T/key-lookup.out"; fail "a LOOKUP with the secret not answered"; }
[ "$(wc -l <"$T/key.rows")" = 50 ] || fail "the LOOKUP with the secret gave $(wc -l <"$T/key.rows") rows"
for p in "${NK[@]}"; do
    if wait "$p"; then
        cat "$T"/nokey-*.out; fail "a client without the secret was answered (SHUTDOWN, stats or LOOKUP)"
    fi
done
grep -q "no reply" "$T/nokey-4.out" || { cat "$T/nokey-4.out"; fail "no-secret SHUTDOWN: not 'no reply'"; }
grep -q "no reply" "$T/nokey-lookup.out" || { cat "$T/nokey-lookup.out"; fail "LOOKUP: not 'no reply'"; }
kill -0 "$LP" 2>/dev/null || { cat "$T/launch.log"; fail "the job ended under the no-secret clients"; }
"$BIN/shadow-ctl" --run "$T/run" --json stats >"$T/stats.json" 2>"$T/stats.err" || fail "stats with the secret"
hs=$(json_field "$T/stats.json" stats.handshakes_failed | awk '{ s += $1 } END { print s + 0 }')
[ "$hs" -ge 6 ] || { cat "$T/stats.json"; fail "handshakes_failed $hs over the PSs, want 6 or more"; }
ok "without the secret: 4 SHUTDOWNs, stats and a LOOKUP get no reply ($hs failed handshakes" \
    "counted); with it the LOOKUP is answered"

# the keyless client knows every endpoint (the launch's arguments) but not
# the token: four SHUTDOWNs to every PS (once they ended a job in 1.5 s)
mapfile -t ARGS <"$T/run/cluster.args"
keyless() { "$BIN/shadow-ctl" "${ARGS[@]}" --set security.admin_token_file= "$@"; }
for _ in 1 2 3 4; do
    if keyless --timeout-ms 2000 shutdown >"$T/shutdown.out" 2>&1; then
        cat "$T/shutdown.out"; fail "a client without the token stopped the job"
    fi
done
grep -q "SHUTDOWN refused: not allowed" "$T/shutdown.out" || { cat "$T/shutdown.out"; fail "no refusal"; }
! grep -qE "[0-9a-f]{16}|admin.token" "$T/shutdown.out" || { cat "$T/shutdown.out"; fail "the refusal says too much"; }
keyless stats >"$T/stats.out" 2>&1 || { cat "$T/stats.out"; fail "stats without the token"; }
"$BIN/shadow-ctl" --run "$T/run" ping >"$T/ping.out" 2>&1 || { cat "$T/ping.out"; fail "shadow-ctl --run ping"; }
kill -0 "$LP" 2>/dev/null || { cat "$T/launch.log"; fail "the job ended under the keyless SHUTDOWNs"; }
ok "4 SHUTDOWNs without the token refused ('not allowed'), stats still served, the job runs on"

# the job's own requests carry the token: the trainer's INIT of the sync PS
# (the center it initialized) and the CHECKPOINTs of the job checkpoint that SIGTERM
# asks for (every PS's part written)
kill -TERM "$LP"
wait_exit "$LP" 120; rc=$?
[ "$rc" = 75 ] || { cat "$T/launch.log"; fail "the job exited $rc on SIGTERM, want 75 (stopped with a job checkpoint)"; }
for f in MANIFEST trainer-0.state embedding-0.ckpt embedding-1.ckpt sync-0.ckpt; do
    [ -s "$T/run/jobckpt/$f" ] || { ls "$T/run/jobckpt"; fail "no jobckpt/$f (CHECKPOINT with the token)"; }
done
grep -q "sync PS 0: center range .* initialized" "$T/run/logs/trainer-0.log" \
    || fail "the sync PS's center was not initialized (INIT with the token)"
ok "the job stopped on SIGTERM with a whole job checkpoint (exit 75): its own CHECKPOINTs and INITs carry the token"

# a token file that others may read is refused
printf 'abcdefghijklmnopqrstuvwxyz\n' >"$T/loose.token"
chmod 644 "$T/loose.token"
if "$BIN/shadow-ps" -c "$JOB" --set "security.admin_token_file=$T/loose.token" --role embedding \
    --shard 0 >"$T/loose.log" 2>&1; then fail "a PS started with a world-readable token"; fi
grep -q "can be read or written by other users (mode 644)" "$T/loose.log" \
    || { cat "$T/loose.log"; fail "no mode error"; }
ok "a token file readable by others is refused at start"
no_leftovers
pass
