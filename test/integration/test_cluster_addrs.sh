#!/usr/bin/env bash
# Bind and advertised addresses (issue 8). The job file advertises every
# process as tcp://localhost:PORT (a host name, not an address); the PSs bind
# every interface (tcp://*:PORT: one through --bind, one through cluster.bind,
# the sync PS through a whole --bind endpoint), the trainers bind what
# "localhost" resolves to. The job trains on planted data to within 15% of
# the Bayes-optimal eval NE. Clients that write the same PSs as 127.0.0.1
# reach them (the HELLO hash covers the cluster's shape, not how addresses
# are written). A PS whose port is taken fails within seconds saying so, and
# names that do not resolve, or resolve to another machine, are refused with
# the entry they come from.
. "$(dirname "$0")/lib.sh"

# a host name the resolver refuses without asking a name server (a 64-byte label)
NO_SUCH=no-such-host-0123456789012345678901234567890123456789012345678901.invalid

"$BIN/shadow-datagen" --rows 300000 --seed 7 --out "$T/train.tsv" \
    --eval-rows 50000 --eval-out "$T/eval.tsv" >"$T/datagen.json" 2>"$T/datagen.log" \
    || { cat "$T/datagen.log"; fail "datagen"; }
bayes=$(json_field "$T/datagen.json" eval.bayes_ne)
[ -n "$bayes" ] || { cat "$T/datagen.json"; fail "no Bayes NE in the datagen output"; }

E0=$(free_port); E1=$(free_port); S0=$(free_port); R0=$(free_port); R1=$(free_port)
JOB=$T/job.yaml
cat >"$JOB" <<EOF
job:
  name: it-addrs
  run_dir: $T/run
cluster:
  embedding: [tcp://localhost:$E0, tcp://localhost:$E1]
  sync: [tcp://localhost:$S0]
  trainers: [tcp://localhost:$R0, tcp://localhost:$R1]
data:
  train: [$T/train.tsv]
  eval: [$T/eval.tsv]
trainer:
  batch_size: 32
tables:
  lr: 0.1
sync:
  algorithm: s-easgd
EOF

start_ps embedding 0 --bind '*'
start_ps embedding 1 --set 'cluster.bind=*'
start_ps sync 0 --bind "tcp://0.0.0.0:$S0"
grep -q "ready: embedding shard 0 on tcp://localhost:$E0, bound at tcp://\*:$E0" \
    "$T/embedding-0.log" || fail "embedding PS 0 did not bind tcp://*:$E0"
grep -q "ready: embedding shard 1 on tcp://localhost:$E1, bound at tcp://\*:$E1" \
    "$T/embedding-1.log" || fail "embedding PS 1 (cluster.bind) did not bind tcp://*:$E1"
grep -q "bound at tcp://0.0.0.0:$S0" "$T/sync-0.log" || fail "sync PS did not bind 0.0.0.0"
ok "PSs advertised as tcp://localhost:PORT bound tcp://*:PORT (--bind, cluster.bind) and 0.0.0.0"

# clients through the advertised names, and through 127.0.0.1 (same shape, same hash)
ctl -t all ping >"$T/ping.out" || { cat "$T/ping.out"; fail "ping by name"; }
[ "$(grep -c ' ok ' "$T/ping.out")" = 3 ] || { cat "$T/ping.out"; fail "ping: not 3 ok"; }
ctl -t all --set "cluster.embedding=tcp://127.0.0.1:$E0,tcp://127.0.0.1:$E1" \
    --set "cluster.sync=tcp://127.0.0.1:$S0" ping >"$T/ping-ip.out" \
    || { cat "$T/ping-ip.out"; fail "ping by 127.0.0.1"; }
[ "$(grep -c ' ok ' "$T/ping-ip.out")" = 3 ] || { cat "$T/ping-ip.out"; fail "ping by IP"; }
ok "shadow-ctl reaches every PS as tcp://localhost:PORT and as tcp://127.0.0.1:PORT"
# the same PSs listed in another order: HELLO names the misplaced shard
if ctl -t embedding:0 --set "cluster.embedding=tcp://localhost:$E1,tcp://localhost:$E0" \
    ping >"$T/ping-swapped.out"; then
    cat "$T/ping-swapped.out"; fail "a swapped endpoint list passed HELLO"
fi
grep -q "cluster config hash mismatch: this embedding PS 1 has" "$T/ping-swapped.out" \
    || { cat "$T/ping-swapped.out"; fail "swapped list: no hash mismatch"; }
ok "a client whose list puts PS 1 at shard 0's place is refused at HELLO by PS 1"

# a second PS on a taken port: a clear error within seconds, not a hang
t0=$(date +%s)
if timeout 20 "$BIN/shadow-ps" -c "$JOB" --role embedding --shard 0 >"$T/busy.log" 2>&1; then
    fail "a second PS on port $E0 started"
fi
dt=$(( $(date +%s) - t0 ))
want="cannot bind tcp://127.0.0.1:$E0 (advertised as tcp://localhost:$E0): Address already in use: another process (another job?) uses port $E0; pick free ports or stop it"
grep -qF "$want" "$T/busy.log" || { cat "$T/busy.log"; fail "busy port: message"; }
((dt <= 10)) || fail "the busy-port failure took $dt s"
ok "a PS on a taken port fails in $dt s: $want"

# names that do not resolve, or that name another machine
if "$BIN/shadow-ps" -c "$JOB" --role embedding --shard 1 \
    --set "cluster.embedding=tcp://localhost:$E0,tcp://$NO_SUCH:$E1" >"$T/nohost.log" 2>&1; then
    fail "a PS with an unresolvable name started"
fi
grep -qF "cannot resolve host $NO_SUCH in cluster.embedding[1] (tcp://$NO_SUCH:$E1): " \
    "$T/nohost.log" || { cat "$T/nohost.log"; fail "unresolvable name: message"; }
if "$BIN/shadow-ps" -c "$JOB" --role embedding --shard 1 \
    --set "cluster.embedding=tcp://localhost:$E0,tcp://3221225985:$E1" >"$T/far.log" 2>&1; then
    fail "a PS advertised at another machine's address started"
fi
grep -qF "resolves to 192.0.2.1, which is not an address of this machine; start this process on 3221225985 or set --bind" \
    "$T/far.log" || { cat "$T/far.log"; fail "foreign name: message"; }
ok "an unresolvable name and another machine's name are refused, naming the entry"

# train: trainer 0 binds what localhost resolves to, trainer 1 through --bind
"$BIN/shadow-trainer" -c "$JOB" --rank 0 >"$T/trainer-0.log" 2>&1 &
TR0=$!; PIDS+=("$TR0")
"$BIN/shadow-trainer" -c "$JOB" --rank 1 --bind 127.0.0.1 >"$T/trainer-1.log" 2>&1 &
TR1=$!; PIDS+=("$TR1")
wait_exit "$TR0" 400 || fail "trainer 0 failed"
wait_exit "$TR1" 60 || fail "trainer 1 failed"
grep -q "allreduce: rank 0 of 2 on tcp://localhost:$R0" "$T/trainer-0.log" \
    || fail "trainer 0's ring endpoint"
ne=$(json_field "$T/run/result-trainer-0.json" eval_ne)
limit=$(awk -v b="$bayes" 'BEGIN { printf "%.4f", 1.15 * b }')
[ -n "$ne" ] || { cat "$T/run/result-trainer-0.json"; fail "no eval NE"; }
float_lt "$ne" "$limit" || fail "eval NE $ne is not within 15% of the Bayes-optimal $bayes"
ok "trained across the named endpoints: eval NE $ne (Bayes-optimal $bayes, limit $limit)"

ctl -t all shutdown >"$T/shutdown.out" || { cat "$T/shutdown.out"; fail "shutdown"; }
for p in "$PID_embedding_0" "$PID_embedding_1" "$PID_sync_0"; do
    wait_exit "$p" 20 || fail "a PS exited with an error after shutdown"
done
pass
