#!/usr/bin/env bash
# A launched local job cannot be stopped by a local process that lacks its
# secret (issue 22, item 6): without CURVE, shadow-launch makes
# RUN_DIR/admin.token (mode 0600), and every SHUTDOWN, CHECKPOINT and INIT
# must carry it. A plain client (the job file alone) may read stats but its
# SHUTDOWN is refused without a word about the job, and the job finishes;
# shadow-ctl --run RUN_DIR (the launch's arguments) carries the token. A
# token file that other users can read is refused at start.
. "$(dirname "$0")/lib.sh"
"$BIN/shadow-datagen" --rows 150000 --seed 4 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen
make_job 2 1 1 "data:" "  train: [$T/train.tsv]" "  eval: [$T/train.tsv]" \
    "sync:" "  algorithm: s-easgd" "trainer:" "  epochs: 2" "  batch_size: 64"
launch >"$T/launch.log" 2>&1 &
LP=$!
PIDS+=("$LP")
wait_log "$T/run/logs/trainer-0.log" "training:" 30
[ "$(stat -c %a "$T/run/admin.token")" = 600 ] || fail "admin.token has mode $(stat -c %a "$T/run/admin.token")"

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

wait_exit "$LP" 180 || { cat "$T/launch.log"; fail "the job failed"; }
[ -f "$T/run/model/dense.bin" ] || fail "no model saved (CHECKPOINT with the token)"
ok "the job finished and saved its model: its own CHECKPOINTs and INITs carry the token"

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
