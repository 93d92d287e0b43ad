#!/usr/bin/env bash
# tags: quick
# 2 embedding PSs + 1 sync PS on localhost: exact sums after concurrent
# pushes, garbage frames, sync rule, checkpoint + kill -9 + restore, and a
# clean shutdown through shadow-ctl. Admission is off: every push lands.
. "$(dirname "$0")/lib.sh"

make_job 2 1 2 "tables:" "  optimizer: sgd" "  lr: 0.5" "  init_scale: 0" "  admit_after: 0" "ps:" "  threads: 3" \
    "sync:" "  algorithm: s-easgd"  # so that "all" targets include the sync PS
start_ps embedding 0
start_ps embedding 1
start_ps sync 0

ctl ping >"$T/ping.out" || { cat "$T/ping.out"; fail "ping"; }
[ "$(grep -c ' ok ' "$T/ping.out")" = 3 ] || fail "ping: not 3 ok lines"
ok "ping all 3"
# "all" leaves out the sync PSs of a job that never starts them (no EASGD)
ctl --set sync.algorithm=s-ma ping >"$T/ping2.out" || { cat "$T/ping2.out"; fail "ping s-ma"; }
[ "$(grep -c ' ok ' "$T/ping2.out")" = 2 ] && ! grep -q '^sync' "$T/ping2.out" \
    || { cat "$T/ping2.out"; fail "ping of an s-ma job probed the sync PS"; }
ok "ping of an s-ma job: the 2 embedding PSs only"
# config get reads the file (and --set); --live asks the running PSs
[ "$(ctl --set tables.lr=0.25 config get tables.lr)" = 0.25 ] || fail "config get with --set"
ctl --set tables.lr=0.25 config get --live tables.lr >"$T/live.out" || { cat "$T/live.out"; fail "config get --live"; }
[ "$(grep -c ' ok .*  0.5$' "$T/live.out")" = 3 ] || { cat "$T/live.out"; fail "live value is not the running 0.5"; }
if ctl -t embedding:0 config get --live no.such.key >"$T/live2.out"; then fail "unknown live key answered"; fi
grep -q "no config key 'no.such.key'" "$T/live2.out" || { cat "$T/live2.out"; fail "unknown key message"; }
ok "config get --live: each PS answers the value it runs with (0.5, not the 0.25 of --set)"

# 4 concurrent clients, 20 rounds each, 3000 keys over both shards; clients 2
# and 3 push with PUSH_LOOKUP and check that each reply holds their own pushes
for i in 0 1 2 3; do
    combined=(); ((i >= 2)) && combined=(--combined)
    "$PROBE" -c "$JOB" push --client $i --rounds 20 --keys 3000 "${combined[@]}" >"$T/push-$i.log" 2>&1 &
    CP[$i]=$!
done
# meanwhile garbage to shard 0: every case must get its error reply
"$PROBE" -c "$JOB" garbage --shard 0 >"$T/garbage.log" 2>&1 || { cat "$T/garbage.log"; fail "garbage"; }
ok "garbage frames answered with errors"
# a HELLO refusal names no hash: it tells an unknown client nothing (issue 22)
! grep -A1 "wrong config hash" "$T/garbage.log" | grep -qE "[0-9a-f]{16}" \
    || { grep -A1 "wrong config hash" "$T/garbage.log"; fail "the HELLO refusal reveals a config hash"; }
for i in 0 1 2 3; do wait "${CP[$i]}" || { cat "$T/push-$i.log"; fail "push client $i"; }; done
ok "4 clients pushed (2 with PUSH_LOOKUP, each reply holding the client's own pushes)"
"$PROBE" -c "$JOB" verify --clients 4 --rounds 20 --keys 3000 >"$T/verify.log" 2>&1 \
    || { cat "$T/verify.log"; fail "verify"; }
cat "$T/verify.log"
grep -q " 0 mismatches" "$T/verify.log" || fail "rows differ"
ok "exact rows after concurrent pushes"

ctl --json stats --target embedding:0 >"$T/stats.json"
# 15 garbage cases and the unknown key of config get --live
grep -q '"bad_requests":16,' "$T/stats.json" || { cat "$T/stats.json"; fail "bad_requests count"; }
# a NaN push and a 1e30 push (issue 22: finite but huge values are refused too)
grep -q '"nonfinite_refused":2,' "$T/stats.json" || { cat "$T/stats.json"; fail "NaN and 1e30 pushes not counted"; }
grep -q '"refused_no_hello":1,' "$T/stats.json" || { cat "$T/stats.json"; fail "no-HELLO not counted"; }
grep -q 'beyond security.max_abs_value' "$T/garbage.log" || { cat "$T/garbage.log"; fail "1e30 push reply"; }
ok "bad requests counted (a NaN and a 1e30 push among them), a request before HELLO refused apart"
for f in '"max_memory_bytes":0,' '"keys_not_admitted":0,' '"rows_evicted_ttl":0,' \
         '"rows_evicted_memory":0'; do
    grep -q "$f" "$T/stats.json" || { cat "$T/stats.json"; fail "stats lack $f"; }
done
grep -q '"rows_admitted":[1-9]' "$T/stats.json" || { cat "$T/stats.json"; fail "rows_admitted"; }
ok "row churn counters in stats"

# 5000 random messages (random header fields, frame counts and sizes) to an
# embedding PS: it keeps serving, and its log stays short
"$PROBE" -c "$JOB" fuzz --rounds 5000 --shard 1 >"$T/fuzz-e.log" 2>&1 || { cat "$T/fuzz-e.log"; fail "fuzz embedding"; }
ok "$(cat "$T/fuzz-e.log")"
[ "$(grep -c "bad request" "$T/embedding-1.log")" -lt 60 ] || fail "a flood of bad requests flooded the log"

"$PROBE" -c "$JOB" sync >"$T/sync.log" 2>&1 || { cat "$T/sync.log"; fail "sync rule"; }
ok "sync shard: init once, elastic rule, range check"
"$PROBE" -c "$JOB" fuzz --rounds 5000 --sync >"$T/fuzz-s.log" 2>&1 || { cat "$T/fuzz-s.log"; fail "fuzz sync"; }
ok "sync PS $(cat "$T/fuzz-s.log")"

# checkpoint, kill -9, restart with restore: identical rows
"$PROBE" -c "$JOB" dump --keys 3000 --out "$T/before.txt" || fail "dump before"
# three CHECKPOINT requests at once to each PS (3 service threads): one at a
# time, every one succeeds, the file restores (before: two "rename failed")
for i in 1 2 3; do ctl checkpoint >"$T/ckpt-$i.out" 2>&1 & CK[$i]=$!; done
for i in 1 2 3; do wait "${CK[$i]}" || { cat "$T/ckpt-$i.out"; fail "concurrent checkpoint $i"; }; done
ok "3 concurrent checkpoints per PS all succeeded"
ls "$T/run/ckpt/embedding-0.ckpt" "$T/run/ckpt/embedding-1.ckpt" "$T/run/ckpt/sync-0.ckpt" >/dev/null \
    || fail "checkpoint files missing"
kill -9 "$PID_embedding_0" "$PID_embedding_1"
wait "$PID_embedding_0" "$PID_embedding_1" 2>/dev/null  # gone, their ports free
start_ps embedding 0 --restore "$T/run/ckpt"
start_ps embedding 1 --restore "$T/run/ckpt"
"$PROBE" -c "$JOB" dump --keys 3000 --out "$T/after.txt" || fail "dump after"
cmp "$T/before.txt" "$T/after.txt" || fail "rows differ after restore"
ok "identical rows after kill -9 and restore"

# a restore from a corrupted checkpoint is refused with a clear error
cp "$T/run/ckpt/embedding-0.ckpt" "$T/bad.ckpt"
printf '\x42' | dd of="$T/bad.ckpt" bs=1 seek=200 conv=notrunc 2>/dev/null
mkdir -p "$T/badckpt" && mv "$T/bad.ckpt" "$T/badckpt/embedding-0.ckpt"
if "$BIN/shadow-ps" -c "$JOB" --role embedding --shard 0 --restore "$T/badckpt" \
    --bind tcp://127.0.0.1:0 \
    >"$T/badrestore.log" 2>&1; then
    fail "restore from a corrupted file succeeded"
fi
grep -qi "restore" "$T/badrestore.log" || fail "no clear restore error"
ok "corrupted checkpoint refused: $(grep -i restore "$T/badrestore.log" | tail -1 | cut -c1-150)"

# clean shutdown via shadow-ctl: every PS exits 0
ctl shutdown >"$T/shutdown.out" || { cat "$T/shutdown.out"; fail "shutdown"; }
for p in $PID_embedding_0 $PID_embedding_1 $PID_sync_0; do
    wait_exit "$p" 10 || fail "PS $p exited non-zero"
done
ok "clean shutdown"
pass
