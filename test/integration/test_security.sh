#!/usr/bin/env bash
# security.curve on (issue 9): keys from shadow-ctl keygen, a whole job
# (2 embedding PSs, 1 sync PS, 2 trainers; bottom MLP by EASGD, top by MA, so
# PS traffic, INIT and the allreduce ring all run CURVE) finishes with a
# sound model; then at a PS: a listed key is served, an unlisted key and a
# client without CURVE get no reply and are counted, a key that is not an
# admin key cannot SHUTDOWN, HELLO comes first, and the admin key stops it.
# A trainer whose key is not an admin key refuses to start. Last, a job
# started by hand: a client without CURVE at trainer 1's ring
# endpoint (while trainer 1 waits for trainer 0) and at the sync PS fails its
# handshake and is counted there (ring_handshakes_failed, handshakes_failed);
# the job still ends well.
. "$(dirname "$0")/lib.sh"
criteo_split
K=$T/keys
mkdir -p "$K"
for name in server trainer ops stranger; do
    "$BIN/shadow-ctl" keygen "$K/$name" >/dev/null || fail "keygen $name"
done
[ "$(stat -c %a "$K/server.key")" = 600 ] || fail "secret key file is not mode 0600"
cat "$K/trainer.pub" "$K/ops.pub" >"$K/authorized"
cp "$K/trainer.pub" "$K/admins"
# key paths relative to the job file's folder ($T); the tests run from $ROOT
make_job 2 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/eval.tsv]" \
    "trainer:" "  workers: 2" "  batch_size: 32" "model:" "  lr: 0.02" \
    "sync:" "  groups: [{component: bottom, algorithm: s-easgd}," \
    "           {component: top, algorithm: s-ma}]" \
    "ps:" "  threads: 2" \
    "security:" "  curve: true" "  server_key: keys/server.key" "  server_public: keys/server.pub" \
    "  client_key: keys/trainer.key" "  authorized: keys/authorized" "  admin_keys: keys/admins"

launch >"$T/launch.log" 2>&1 || { cat "$T/launch.log"; fail "CURVE job failed"; }
R=$T/run/result.json
ne=$(json_field "$R" eval_ne)
float_lt "$ne" 0.91 || fail "eval NE $ne is not below 0.91 (observed 0.880-0.885)"
grep -q '"sync_final_ok":true' "$T/run/result-trainer-0.json" || fail "final sync incomplete"
grep -q "CURVE on: 2 authorized keys" "$T/run/logs/ps-embedding-0.log" || fail "PS without CURVE"
grep -q "CURVE on" "$T/run/logs/trainer-1.log" || fail "allreduce endpoint without CURVE"
# (the counters in the PS's "stats at exit" line are named *refused*: not those)
! grep -E "WARN|ERROR" "$T/run/logs/"*.log | grep -q "refused" \
    || { grep -E "WARN|ERROR" "$T/run/logs/"*.log | grep "refused"; fail "refusals in the job"; }
ok "CURVE job (PS, INIT, ring): eval NE $ne, nothing refused"

# a trainer whose key is authorized but not an admin key refuses to start
# (it sends INIT and CHECKPOINT); nothing else runs now, so it would hang
"$BIN/shadow-trainer" -c "$JOB" --rank 0 --set "security.client_key=$K/ops.key" \
    >"$T/tr-ops.log" 2>&1 &
TRO=$!; PIDS+=("$TRO")
wait_exit "$TRO" 20 && fail "a trainer with a key that is not an admin key started"
grep -q "ERROR.*(security.client_key $K/ops.key) is not in security.admin_keys" "$T/tr-ops.log" \
    || { tail -n 3 "$T/tr-ops.log"; fail "no clear refusal of the trainer's non-admin key"; }
ok "a trainer with a non-admin key: refused at start, naming security.admin_keys"

start_ps embedding 0
ctl -t embedding:0 ping >"$T/ping.out" || { cat "$T/ping.out"; fail "admin key ping"; }
ctl -t embedding:0 --set "security.client_key=$K/ops.key" ping >"$T/ops.out" \
    || { cat "$T/ops.out"; fail "listed key ping"; }
ok "listed keys served"

if ctl -t embedding:0 --set "security.client_key=$K/stranger.key" -T 1000 ping >"$T/s.out"; then
    fail "an unlisted key was served"
fi
grep -q "no reply" "$T/s.out" || { cat "$T/s.out"; fail "unlisted key: not a silent refusal"; }
if ctl -t embedding:0 --set security.curve=false -T 1000 ping >"$T/p.out"; then
    fail "a client without CURVE was served"
fi
ctl -t embedding:0 --json stats >"$T/stats.json" || fail "stats"
refused=$(json_field "$T/stats.json" stats.auth_refused)
failed=$(json_field "$T/stats.json" stats.handshakes_failed)
[ "${refused:-0}" -ge 1 ] || { cat "$T/stats.json"; fail "unlisted key not counted"; }
[ "${failed:-0}" -ge 2 ] || { cat "$T/stats.json"; fail "failed handshakes not counted"; }
grep -q "is not in security.authorized" "$T/embedding-0.log" \
    || fail "no log line for the unlisted key"
ok "unlisted key and plain client: no reply; counted (auth_refused $refused," \
    "handshakes_failed $failed)"

if ctl -t embedding:0 --set "security.client_key=$K/ops.key" shutdown >"$T/sd.out"; then
    fail "a key that is not an admin key shut the PS down"
fi
grep -q "not in security.admin_keys" "$T/sd.out" || { cat "$T/sd.out"; fail "no clear refusal"; }
if ctl -t embedding:0 --set "security.client_key=$K/ops.key" checkpoint >"$T/ck.out"; then
    fail "a key that is not an admin key wrote a checkpoint"
fi
kill -0 "$PID_embedding_0" || fail "the PS stopped"
ctl -t embedding:0 --json stats >"$T/stats.json"
grep -q '"refused_not_admin":2,' "$T/stats.json" || { cat "$T/stats.json"; fail "not counted"; }
ok "non-admin key: SHUTDOWN and CHECKPOINT refused (SS_E_DENIED), counted"

# HELLO first, under CURVE too (ps_probe garbage begins with a LOOKUP before HELLO)
"$PROBE" -c "$JOB" garbage --shard 0 >"$T/garbage.log" 2>&1 \
    || { cat "$T/garbage.log"; fail "garbage"; }
ctl -t embedding:0 --json stats >"$T/stats.json"
grep -q '"refused_no_hello":1,' "$T/stats.json" \
    || { cat "$T/stats.json"; fail "no-HELLO not counted"; }
ok "a request before HELLO: SS_E_NOHELLO, counted"

ctl -t embedding:0 shutdown >"$T/sd.out" || { cat "$T/sd.out"; fail "admin shutdown"; }
wait_exit "$PID_embedding_0" 10 || fail "PS exited non-zero"
grep -qF "SHUTDOWN requested by key $(cut -d" " -f1 "$K/trainer.pub")" "$T/embedding-0.log" \
    || fail "the log does not name the key that stopped the PS"
ok "admin key: SHUTDOWN, logged with its key"

# the ring and the sync PS, each by a keyless client, in a fresh run folder
R2=(--set "job.run_dir=$T/run2")
start_ps embedding 0 "${R2[@]}"
start_ps embedding 1 "${R2[@]}"
start_ps sync 0 "${R2[@]}"
"$BIN/shadow-trainer" -c "$JOB" --rank 1 "${R2[@]}" >"$T/trainer-1.log" 2>&1 &
TR1=$!; PIDS+=("$TR1")
wait_log "$T/trainer-1.log" "allreduce: rank 1 of 2 on" 20
ring1=$(sed -n 's/.*allreduce: rank 1 of 2 on \(tcp:[^,]*\),.*/\1/p' "$T/trainer-1.log")
plain_client "$ring1"   # trainer 1 waits at its first ring round for trainer 0
plain_client "$(grep -A1 '^  sync:' "$JOB" | sed -n 's/^ *- //p')"
"$BIN/shadow-trainer" -c "$JOB" --rank 0 "${R2[@]}" >"$T/trainer-0.log" 2>&1 &
TR0=$!; PIDS+=("$TR0")
wait_exit "$TR1" 120 || fail "trainer 1 failed"
wait_exit "$TR0" 120 || fail "trainer 0 failed"
hs1=$(json_field "$T/run2/result-trainer-1.json" ring_handshakes_failed)
hs0=$(json_field "$T/run2/result-trainer-0.json" ring_handshakes_failed)
[ "${hs1:-0}" -ge 1 ] || fail "trainer 1: ring_handshakes_failed ${hs1:-missing}, want >= 1"
[ "$hs0" = 0 ] || fail "trainer 0: ring_handshakes_failed $hs0, want 0"
grep -q "allreduce: a connection failed its handshake: security mechanism mismatch" \
    "$T/trainer-1.log" || fail "trainer 1 logged no failed handshake at its ring"
grep -q '"sync_final_ok":true' "$T/run2/result-trainer-1.json" || fail "job 2: final sync"
for ps in embedding:0 embedding:1 sync:0; do
    ctl -t "$ps" "${R2[@]}" shutdown >"$T/sd2.out" || { cat "$T/sd2.out"; fail "shutdown $ps"; }
done
wait_exit "$PID_sync_0" 20 || fail "sync PS exited non-zero"
shs=$(json_field "$T/sync-0.stats.json" handshakes_failed)  # its counters at exit, beside its log
[ "${shs:-0}" -ge 1 ] || fail "sync PS: handshakes_failed ${shs:-missing}, want >= 1"
ok "a client without CURVE at trainer 1's ring and at the sync PS: refused, counted" \
    "(ring_handshakes_failed $hs1, sync PS handshakes_failed $shs)"
no_leftovers
pass
