#!/usr/bin/env bash
# Prometheus endpoints: a running job (2 embedding PSs, 1 sync PS, 2 trainers,
# s-easgd so that the sync PS works too) is scraped with curl twice; every
# process answers on its own port, the names of docs/metrics.md are there,
# counters that must move do move, the exposition format is well formed, the
# trainers' latency histograms (PS wait per batch, sync round) grow and are
# consistent (cumulative buckets, +Inf = _count, one wait per batch), and a
# wrong path gets 404. A port that is taken stops the process with a clear
# error. Metrics listen on 127.0.0.1 only (as the job binds), and 16 slow
# clients do not lock scrapes out (issue 22).
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || skip "curl is not installed (make deps installs it)"
"$BIN/shadow-datagen" --rows 300000 --seed 3 --out "$T/train.tsv" >/dev/null 2>&1 || fail datagen

# metrics.port: the launched job's processes get free ports the launcher
# picks; only the PS started by hand at the end binds BASE itself
BASE=$(free_port)
make_job 2 1 2 "data:" "  train: [$T/train.tsv]" "  eval: [$T/train.tsv]" \
    "sync:" "  algorithm: s-easgd" "metrics:" "  port: $BASE" "  interval_s: 0.2" \
    "trainer:" "  epochs: 4" "  eval_every: 0"
launch >"$T/launch.log" 2>&1 &
LP=$!
PIDS+=("$LP")
wait_log "$T/run/logs/trainer-1.log" "metrics: http" 20
wait_log "$T/run/logs/trainer-0.log" "training:" 20
for r in 0 1; do wait_for 30 metric_above "$T/run/metrics-trainer-$r.jsonl" sync_rounds 0; done

scrape() { curl -sf --max-time 5 "http://127.0.0.1:$1/metrics"; }
# the ports the launcher picked (free ones: metrics.port turns metrics on)
MP=($(awk '{ print $3 }' "$T/run/metrics.ports")) && [ "${#MP[@]}" = 5 ] || fail "no run/metrics.ports"
value() {  # FILE NAME [LABEL-SUBSTRING]: the first sample of NAME
    grep "^$2{" "$1" | grep -F -- "${3:-}" | head -n 1 | awk '{ print $2 }'
}
t_a=$EPOCHREALTIME
for i in 0 1 2 3 4; do scrape ${MP[$i]} >"$T/a$i.txt" || fail "no metrics on port ${MP[$i]}"; done
# the second scrape once both trainers have trained and synced past what the
# first saw (their metrics files; bounded): every counter checked below
# moves with those
for r in 0 1; do
    a=$T/a$((r + 3)).txt
    wait_for 30 examples_above "$T/run/metrics-trainer-$r.jsonl" \
        "$(grep "^shadowsync_trainer_examples_total{" "$a" | awk '{ printf "%d", $2 }')"
    wait_for 30 metric_above "$T/run/metrics-trainer-$r.jsonl" sync_rounds \
        "$(grep "^shadowsync_trainer_sync_rounds_total{" "$a" | awk '{ printf "%d", $2 }')"
done
for i in 0 1 2 3 4; do scrape ${MP[$i]} >"$T/b$i.txt" || fail "no metrics on port ${MP[$i]}"; done
t_ab=$(awk -v a="$t_a" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')  # seconds between

# what needs the live job first, the checks of what was scraped after: the
# job (4 epochs, 600,000 examples a trainer, about 5 s of training here, one
# eval at the end) must outlast only these few requests, about 1.2 s from
# its start even on a machine 4 times as fast as this one
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${MP[0]}/nothing")
[ "$code" = 404 ] || fail "GET /nothing answered $code, not 404"
ok "other paths: 404"

# issue 22: metrics listen where the process binds (a local job: 127.0.0.1
# only), and 16 clients that send a byte every 3 s do not lock scrapes out
if command -v ss >/dev/null; then
    ss -ltn | grep -q "127.0.0.1:${MP[0]} " || { ss -ltn; fail "metrics of PS 0 not bound to 127.0.0.1"; }
    ! ss -ltn | grep -qE "(\*|0\.0\.0\.0|\[::\]):${MP[0]} " || { ss -ltn; fail "metrics listen on every interface"; }
else
    skip_case "metrics bound to 127.0.0.1 only (ss is not installed)"
fi
for i in $(seq 16); do
    ( exec 3<>"/dev/tcp/127.0.0.1/${MP[0]}" || exit 0
      : >"$T/slow-$i.on"
      for _ in 1 2 3 4; do printf 'G' >&3 || exit 0; sleep 3; done ) 2>/dev/null &
    PIDS+=("$!")
done
slow_on() { [ "$(ls "$T"/slow-*.on 2>/dev/null | wc -l)" = 16 ]; }
wait_for 10 slow_on  # all 16 connected and holding their connections
t0=$(date +%s%N)
scrape "${MP[0]}" >"$T/slow.txt" || fail "no scrape while 16 slow clients hold connections"
ok "metrics bound to 127.0.0.1; scraped in $(( ($(date +%s%N) - t0) / 1000000 )) ms while 16 slow clients hold connections"

# names (docs/metrics.md) and labels
for n in shadowsync_ps_keys_looked_up_total shadowsync_ps_keys_pushed_total \
    shadowsync_ps_bytes_in_total shadowsync_ps_rows shadowsync_ps_memory_bytes \
    shadowsync_ps_request_seconds_bucket shadowsync_ps_nonfinite_refused_total; do
    grep -q "^$n{job=\"it\",role=\"embedding\",shard=\"1\"" "$T/b1.txt" || { cat "$T/b1.txt"; fail "PS 1: no $n"; }
done
grep -q '^shadowsync_ps_elastic_rounds_total{job="it",role="sync",shard="0"}' "$T/b2.txt" \
    || { cat "$T/b2.txt"; fail "sync PS: no elastic rounds"; }
for n in shadowsync_trainer_examples_total shadowsync_trainer_examples_per_second \
    shadowsync_trainer_train_ne shadowsync_trainer_sync_rounds_total shadowsync_trainer_sync_drift \
    shadowsync_trainer_ps_wait_seconds_total shadowsync_trainer_cpu_seconds; do
    grep -q "^$n{job=\"it\",role=\"trainer\",rank=\"1\"}" "$T/b4.txt" || { cat "$T/b4.txt"; fail "trainer 1: no $n"; }
done
ok "every process serves its metrics, with job/role/shard or rank labels"

# well formed: every sample line is NAME{LABELS} NUMBER, every name has TYPE
for f in b0 b3; do  # a PS and a trainer
    bad=$(grep -v '^#' "$T/$f.txt" | grep -vE '^[a-z_][a-z0-9_]*\{[^}]*\} [-+0-9.eE]+$|^[a-z_][a-z0-9_]*\{[^}]*\} (\+Inf|NaN)$')
    [ -z "$bad" ] || fail "$f: malformed sample lines: $bad"
    for n in $(grep -v '^#' "$T/$f.txt" | sed 's/{.*//; s/_bucket$//; s/_sum$//; s/_count$//' | sort -u); do
        grep -q "^# TYPE $n " "$T/$f.txt" || fail "$f: no TYPE line for $n"
    done
    # OpenMetrics: a counter's family is its name without _total, and no two
    # families may share a name (a histogram X beside a counter X_total)
    dup=$(awk '$1 == "#" && $2 == "TYPE" { n = $3; if ($4 == "counter") sub(/_total$/, "", n); print n }' \
        "$T/$f.txt" | sort | uniq -d)
    [ -z "$dup" ] || fail "$f: metric families share a base name: $dup"
done
ok "exposition format well formed, family names unique"

# counters that must move while training
moved() {  # FILE-INDEX NAME
    local a b
    a=$(value "$T/a$1.txt" "$2"); b=$(value "$T/b$1.txt" "$2")
    float_lt "$a" "$b" || fail "$2 did not grow on port ${MP[$1]}: $a then $b"
    echo "$2 $a -> $b"
}
moved 0 shadowsync_ps_keys_looked_up_total
moved 1 shadowsync_ps_keys_pushed_total
moved 2 shadowsync_ps_elastic_rounds_total
moved 3 shadowsync_trainer_examples_total
moved 4 shadowsync_trainer_sync_rounds_total
n=$(value "$T/b0.txt" shadowsync_ps_request_seconds_count 'type="push_lookup"')
float_lt 0 "$n" || fail "no PUSH_LOOKUP in the PS's latency histogram"
ok "counters move between scrapes; $n PUSH_LOOKUPs timed on PS 0"

# the trainers' latency histograms
hist() {  # FILE NAME LABEL-SUBSTRING: checks the histogram, prints "count sum"
    grep "^$2_\(bucket\|sum\|count\){" "$1" | grep -F -- "$3" | awk -v f="$1" -v n="$2" '
        function die(m) { print n " in " f ": " m > "/dev/stderr"; bad = 1; exit 1 }
        $1 ~ /_bucket\{/ { nb++; if ($2 + 0 < last) die("bucket " nb " goes down: " $2 " < " last)
                           last = $2 + 0; inf = ($1 ~ /le="\+Inf"/) ? $2 + 0 : -1 }
        $1 ~ /_sum\{/   { sum = $2 + 0 }
        $1 ~ /_count\{/ { count = $2 + 0 }
        END { if (bad) exit 1
              if (nb != 15) die(nb " buckets, not 15")
              if (inf != count) die("+Inf " inf " (last bucket) != _count " count)
              print count, sum }'
}
for r in 3 4; do
    for f in a b; do
        hist "$T/$f$r.txt" shadowsync_trainer_batch_ps_wait_seconds "" >"$T/w$f" || { cat "$T/$f$r.txt"; fail "PS-wait histogram"; }
        hist "$T/$f$r.txt" shadowsync_trainer_sync_round_seconds 'algorithm="s-easgd"' >"$T/s$f" \
            || { cat "$T/$f$r.txt"; fail "sync round histogram"; }
    done
    read -r wa _ <"$T/wa"; read -r wb wsum <"$T/wb"; read -r sa _ <"$T/sa"; read -r sb ssum <"$T/sb"
    float_lt "$wa" "$wb" || fail "trainer $((r - 3)): PS-wait count did not grow: $wa then $wb"
    float_lt "$sa" "$sb" || fail "trainer $((r - 3)): sync round count did not grow: $sa then $sb"
    float_lt 0 "$wsum" && float_lt 0 "$ssum" || fail "trainer $((r - 3)): _sum 0 ($wsum, $ssum)"
    # one wait per batch: the counters are read first, the histograms after
    # (and each worker adds its wait before its batch), so never fewer waits
    # than batches, and at most what the workers did while the scrape ran:
    # allowed one progress interval (0.2 s) of batches
    ba=$(value "$T/a$r.txt" shadowsync_trainer_batches_total)
    bb=$(value "$T/b$r.txt" shadowsync_trainer_batches_total)
    tol=$(awk -v a="$ba" -v b="$bb" -v t="$t_ab" 'BEGIN { printf "%d", (b - a) / t * 0.2 + 2 }')
    awk -v w="$wb" -v b="$bb" -v t="$tol" 'BEGIN { exit !(w >= b && w <= b + t) }' \
        || fail "trainer $((r - 3)): $wb PS waits for $bb batches (allowed $bb..$((bb + tol)))"
    rounds=$(value "$T/b$r.txt" shadowsync_trainer_sync_rounds_total)
    awk -v s="$sb" -v r="$rounds" 'BEGIN { exit !(s >= r) }' \
        || fail "trainer $((r - 3)): $sb rounds timed, fewer than the $rounds counted"
    echo "trainer $((r - 3)): PS waits $wa -> $wb (${wsum} s; batches $bb), sync rounds $sa -> $sb (${ssum} s; counted $rounds)"
done
ok "trainer histograms: counts grow, buckets cumulative, +Inf = _count, one PS wait per batch"

wait_exit "$LP" 120 || { cat "$T/launch.log"; fail "job failed"; }

# a taken port is a clear error: a second PS on another cluster port (one the
# system picks) but the same metrics port
start_ps embedding 0
if "$BIN/shadow-ps" -c "$JOB" --bind tcp://127.0.0.1:0 --role embedding --shard 0 \
    >"$T/taken.log" 2>&1; then
    fail "a PS started although its metrics port was taken"
fi
grep -q "cannot serve metrics on port $BASE" "$T/taken.log" || { cat "$T/taken.log"; fail "error does not name the port"; }
ok "taken port: $(grep -m1 'cannot serve' "$T/taken.log" | sed 's/.*ERROR //')"
pass
