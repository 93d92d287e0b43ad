#!/usr/bin/env bash
# shadow-ctl reaches the trainers of a live job through their admin
# endpoints (cluster.trainer_admin, free ports picked by shadow-launch):
# ping answers from every PS and trainer; stats of a trainer shows its
# examples counter growing between two calls, and its /metrics endpoint, read
# between them, says a value in between (the same counters); config get
# --live returns the --set value the trainers run with; a client with another
# cluster config is refused at HELLO; requests trainers do not serve are
# usage errors. With security.curve on, a listed key is served by a trainer
# and an unlisted one gets no reply.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || skip "curl is not installed (make deps installs it)"
"$BIN/shadow-datagen" --rows 300000 --seed 5 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen

# metrics on: any non-zero metrics.port; the launcher picks a free port for
# each process and lists them in RUN_DIR/metrics.ports
BASE=9400
make_job 1 0 2 "data:" "  train: [$T/train.tsv]" "metrics:" "  port: $BASE" "  interval_s: 0.2" \
    "trainer:" "  epochs: 4"
launch --set trainer.batch_size=200 >"$T/launch.log" 2>&1 &
LP=$!
PIDS+=("$LP")
RUN=$T/run
wait_log "$RUN/logs/trainer-1.log" "admin: tcp://" 20
wait_log "$RUN/logs/trainer-0.log" "training:" 20
wait_log "$RUN/logs/trainer-0.log" "trainer 0 |" 20
rctl() { "$BIN/shadow-ctl" --run "$RUN" "$@"; }

# ping: every PS and trainer, at once
rctl ping >"$T/ping.out" 2>&1 || { cat "$T/ping.out"; fail "ping of the live job"; }
for t in embedding:0 trainer:0 trainer:1; do
    grep -q "^$t .* ok .*pong" "$T/ping.out" || { cat "$T/ping.out"; fail "no pong from $t"; }
done
[ "$(wc -l <"$T/ping.out")" = 3 ] || { cat "$T/ping.out"; fail "ping: expected 3 targets (no sync PS: s-ma)"; }
ok "ping: $(tr -s ' ' <"$T/ping.out" | cut -d' ' -f1,3,4,5 | paste -sd';')"

# stats twice, /metrics between
examples() { json_field "$1" stats.examples; }
rctl -t trainer:0 --json stats >"$T/s1.json" || { cat "$T/s1.json"; fail "stats of trainer 0"; }
curl -sf --max-time 5 "http://127.0.0.1:$(awk '$1 == "trainer" && $2 == 0 { print $3 }' "$T/run/metrics.ports")/metrics" >"$T/m.txt" || fail "no metrics of trainer 0"
e1=$(examples "$T/s1.json")
# the second stats call once trainer 0 has gone on (bounded)
grown() {
    rctl -t trainer:0 --json stats >"$T/s2.json" || { cat "$T/s2.json"; fail "stats of trainer 0"; }
    float_lt "${e1:-0}" "$(examples "$T/s2.json")"
}
wait_for 20 grown
e2=$(examples "$T/s2.json")
m=$(sed -n 's/^shadowsync_trainer_examples_total{[^}]*rank="0"} \(.*\)/\1/p' "$T/m.txt")
[ -n "$e1" ] && [ -n "$e2" ] && [ -n "$m" ] || { cat "$T/s1.json" "$T/m.txt"; fail "examples missing"; }
float_lt "$e1" "$e2" || fail "trainer 0's examples did not grow between two stats calls: $e1 then $e2"
awk -v a="$e1" -v b="$m" -v c="$e2" 'BEGIN { exit !(a <= b && b <= c) }' \
    || fail "/metrics says $m examples, not between the stats calls before ($e1) and after ($e2)"
grep -q '"target":"trainer:0"' "$T/s1.json" || fail "stats --json does not name trainer:0"
grep -q '"sync_algorithm":"s-ma"' "$T/s2.json" || { cat "$T/s2.json"; fail "stats: no sync_algorithm"; }
ok "stats of trainer 0: examples $e1 -> $e2, /metrics between: $m"

# config get --live after --set: the value the trainers run with
rctl --json config get --live trainer.batch_size >"$T/cfg.json" || { cat "$T/cfg.json"; fail "config get --live"; }
for t in trainer:0 trainer:1 embedding:0; do
    grep -q "\"target\":\"$t\".*\"reply\":\"200\"" "$T/cfg.json" || { cat "$T/cfg.json"; fail "$t does not run with batch_size 200"; }
done
[ "$("$BIN/shadow-ctl" -c "$JOB" config get trainer.batch_size)" = 128 ] \
    || fail "the job file's own batch size is not 128 (the test means nothing)"
if rctl -t trainer:1 config get --live no.such.key >"$T/cfg2.out" 2>&1; then fail "unknown key answered"; fi
grep -q "no config key 'no.such.key'" "$T/cfg2.out" || { cat "$T/cfg2.out"; fail "unknown key: wrong error"; }
ok "config get --live trainer.batch_size: 200 from trainers 0, 1 and the PS (job file: 128)"

# another cluster config: refused at HELLO, by name
if rctl --set job.seed=7 -t trainer:0 ping >"$T/hash.out" 2>&1; then
    fail "a client with another cluster config was served"
fi
grep -q "hash mismatch" "$T/hash.out" || { cat "$T/hash.out"; fail "HELLO refusal does not say why"; }
# trainers serve no checkpoint or shutdown
rctl -t trainer checkpoint >"$T/ck.out" 2>&1; rc=$?
[ "$rc" = 2 ] && grep -q "trainers answer ping, stats" "$T/ck.out" || { cat "$T/ck.out"; fail "checkpoint to trainers: exit $rc"; }
ok "HELLO with another config hash refused; checkpoint to a trainer is a usage error"

wait_exit "$LP" 180 || { cat "$T/launch.log"; fail "job failed"; }
no_leftovers

# CURVE: the admin endpoint is a CURVE server behind the trainer's ZAP handler
K=$T/keys
mkdir -p "$K"
for name in server trainer ops stranger; do
    "$BIN/shadow-ctl" keygen "$K/$name" >/dev/null || fail "keygen $name"
done
cat "$K/trainer.pub" "$K/ops.pub" >"$K/authorized"
SEC=(--set security.curve=true --set "security.server_key=$K/server.key"
     --set "security.server_public=$K/server.pub" --set "security.client_key=$K/trainer.key"
     --set "security.authorized=$K/authorized" --set metrics.port=0)
launch "${SEC[@]}" --set job.run_dir="$T/run2" >"$T/launch2.log" 2>&1 &
LP=$!
PIDS+=("$LP")
RUN=$T/run2
wait_log "$RUN/logs/trainer-0.log" "trainer 0 |" 30
rctl -t trainer:0 --set "security.client_key=$K/ops.key" ping >"$T/cping.out" 2>&1 \
    || { cat "$T/cping.out"; fail "a listed key was not served by trainer 0"; }
if rctl -t trainer:0 --set "security.client_key=$K/stranger.key" -T 1000 ping >"$T/sping.out" 2>&1; then
    fail "an unlisted key was served by trainer 0"
fi
grep -q "no reply" "$T/sping.out" || { cat "$T/sping.out"; fail "unlisted key: not a silent refusal"; }
grep -q "is not in security.authorized" "$RUN/logs/trainer-0.log" \
    || fail "the trainer logged no refusal of the unlisted key"
ok "CURVE: trainer 0's admin endpoint serves a listed key, not an unlisted one"
wait_exit "$LP" 180 || { cat "$T/launch2.log"; fail "CURVE job failed"; }
no_leftovers
pass
