#!/usr/bin/env bash
# tags: quick
# Metrics ports picked by the launcher (issue 22, item 4): metrics.port is
# on, but the port it names and the next one are already taken by another
# listener (two PSs of another job, started by hand: they keep the
# documented metrics.port + index rule). shadow-launch gives every process
# a free port instead, prints them, writes RUN_DIR/metrics.ports and passes
# them as metrics.ports (cluster.args: shadow-ctl --run finds them); every
# process that runs answers /metrics there with real counts, and the sync PS
# of an s-ma job, which does not run, gets no port and the output says so.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || skip "curl is not installed (make deps installs it)"
"$BIN/shadow-datagen" --rows 200000 --seed 5 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen

# the other listener: embedding PSs 0 and 1 of another job, by hand, on
# metrics ports BASE and BASE + 1
for _ in $(seq 50); do
    BASE=$(free_port)
    (exec 3<>"/dev/tcp/127.0.0.1/$((BASE + 1))") 2>/dev/null || break
done
make_job 2 0 1 "metrics:" "  port: $BASE"
for k in 0 1; do start_ps embedding "$k"; done
grep -q "metrics: http://127.0.0.1:$BASE/metrics" "$T/embedding-0.log" \
    || fail "a PS started by hand: not on metrics.port + 0 ($BASE)"
grep -q "metrics: http://127.0.0.1:$((BASE + 1))/metrics" "$T/embedding-1.log" \
    || fail "a PS started by hand: not on metrics.port + 1"
ok "by hand: metrics.port + index ($BASE, $((BASE + 1))), both now taken"

# 3 epochs, 300,000 examples a trainer (about 2.6 s here, 115,000 a second):
# the scrapes below take about 0.3 s from the first progress, inside the job
# on a machine 4 times as fast as this one (2 epochs left half that margin)
make_job 2 1 2 "data:" "  train: [$T/train.tsv]" "sync:" "  algorithm: s-ma" \
    "metrics:" "  port: $BASE" "  interval_s: 0.2" "trainer:" "  epochs: 3"
launch >"$T/launch.log" 2>&1 &
LP=$!
PIDS+=("$LP")
wait_log "$T/run/logs/trainer-1.log" "training:" 30
M=$T/run/metrics.ports
[ -s "$M" ] || fail "no $M"
mapfile -t ROWS <"$M"
[ "${#ROWS[@]}" = 5 ] || { cat "$M"; fail "metrics.ports: ${#ROWS[@]} lines, want 5"; }
[ "$(awk '$1 == "sync" { print $3, $4 }' "$M")" = "0 -" ] \
    || { cat "$M"; fail "the s-ma job's sync PS (not run) has a metrics port"; }
grep -q "metrics (free ports; GET /metrics): .*, sync 0 none (sync s-ma runs no sync PS), " \
    "$T/launch.log" || { cat "$T/launch.log"; fail "the launcher does not print the ports"; }
LISTED=$("$BIN/shadow-ctl" --run "$T/run" config get metrics.ports | paste -sd' ')
[ "$LISTED" = "$(awk '{ print $3 }' "$M" | paste -sd' ')" ] \
    || fail "cluster.args' metrics.ports ($LISTED) differs from $M"

# every process that runs, scraped on its port until it counts work
value() {  # FILE NAME: the first sample of NAME
    grep "^$2{" "$1" | head -n 1 | awk '{ print $2 }'
}
counts() {  # ROLE K PORT NAME: true once NAME > 0 there
    curl -sf --max-time 5 "http://127.0.0.1:$3/metrics" >"$T/m-$1-$2.txt" || return 1
    float_lt 0 "$(value "$T/m-$1-$2.txt" "$4")"
}
while read -r role k port url; do
    [ "$role" = sync ] && continue
    [ "$port" != "$BASE" ] && [ "$port" != "$((BASE + 1))" ] || fail "$role $k on taken port $port"
    [ "$url" = "http://127.0.0.1:$port/metrics" ] || fail "$role $k: url $url"
    grep -q "metrics (.*$role $k 127.0.0.1:$port[,;]" "$T/launch.log" || fail "$role $k: port not printed"
    if [ "$role" = trainer ]; then name=shadowsync_trainer_examples_total
    else name=shadowsync_ps_keys_looked_up_total; fi
    wait_for 20 counts "$role" "$k" "$port" "$name"
    grep -q "rank=\"$k\"\|shard=\"$k\"" "$T/m-$role-$k.txt" || fail "$role $k: labels of another process"
    echo "$role $k: port $port, $name $(value "$T/m-$role-$k.txt" "$name")"
done <"$M"
ok "every process scraped on the port the launcher picked (base $BASE and $((BASE + 1)) taken)"
wait_exit "$LP" 120 || { cat "$T/launch.log"; fail "job failed"; }
pass
