#!/usr/bin/env bash
# The cost of the job token at the handshake (security.token_file, ZeroMQ
# PLAIN; issue 22): one embedding PS (2 service threads, rows of 16 floats)
# driven by ps_bench with the token off and on, back to back in each
# repetition (the order alternates): CPU microseconds per request on the PS
# and on the client (req, 16 keys, 1 client: light, 8: busy) and rows/s of
# lookups and pushes (rows, 2 clients, 4096 keys a request). PLAIN checks
# the secret once per connection and frames every message as before, so the
# ratios on/off should be 1 within the noise; medians over REPS.
#
#   REPS=5  SECONDS_EACH=2
# Arg: scratch dir. JSON lines on stdout. Needs make (bin/, build/rel/bench).
set -u
cd "$(dirname "$0")/.."
T=$1; REPS=${REPS:-5}; S=${SECONDS_EACH:-2}
. bench/bench-lib.sh
mkdir -p "$T"
BENCH_BIN=build/rel/bench/ps_bench
cat >"$T/token.yaml" <<YAML
job: {run_dir: $T/token-run}
cluster:
  embedding: [tcp://127.0.0.1:$(bench_port)]
  sync: []
  trainers: [tcp://127.0.0.1:$(bench_port)]
model: {embedding_dim: 16, bottom_mlp: [64, 16], first_order: false}
ps: {threads: 2}
tables: {capacity_rows: 4000000, admit_after: 0}
YAML
(umask 077 && od -An -tx1 -N24 /dev/urandom | tr -d ' \n' >"$T/job.token") || exit 1
PS_PID=""
stop() { kill -TERM "$PS_PID" 2>/dev/null; wait "$PS_PID" 2>/dev/null; }

# one MODE: starts the PS (with the token when MODE is on), runs the three
# measurements with the same setting, stops the PS; prints one JSON line
# (it runs in a subshell: it stops its own PS, also on failure)
one() {
    local mode=$1 rep=$2 sets=() r1 r8 rows
    [ "$mode" = on ] && sets=(--set "security.token_file=$T/job.token")
    bin/shadow-ps -c "$T/token.yaml" --role embedding --shard 0 "${sets[@]}" >"$T/token-ps.log" 2>&1 &
    PS_PID=$!
    for _ in $(seq 100); do grep -q "ready:" "$T/token-ps.log" && break; sleep 0.1; done
    r1=$("$BENCH_BIN" -c "$T/token.yaml" "${sets[@]}" req --clients 1 --seconds "$S") || { stop; exit 1; }
    r8=$("$BENCH_BIN" -c "$T/token.yaml" "${sets[@]}" req --clients 8 --seconds "$S") || { stop; exit 1; }
    rows=$("$BENCH_BIN" -c "$T/token.yaml" "${sets[@]}" rows --clients 2 --seconds "$S") || { stop; exit 1; }
    stop
    printf '{"bench":"token_rep","token":%s,"rep":%d,"ps_us_light":%s,"client_us_light":%s,' \
        "$([ "$mode" = on ] && echo true || echo false)" "$rep" \
        "$(bench_field - ps_cpu_us_per_request <<<"$r1")" \
        "$(bench_field - client_cpu_us_per_request <<<"$r1")"
    printf '"ps_us_busy":%s,"client_us_busy":%s,"lookup_rows_per_s":%s,"push_rows_per_s":%s}\n' \
        "$(bench_field - ps_cpu_us_per_request <<<"$r8")" \
        "$(bench_field - client_cpu_us_per_request <<<"$r8")" \
        "$(bench_field - lookup_rows_per_s <<<"$rows")" \
        "$(bench_field - push_rows_per_s <<<"$rows")"
}

declare -A V
add() { V[$1]="${V[$1]:-} $2"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.4f", a / b; else print "null" }'; }
F=(ps_us_light client_us_light ps_us_busy client_us_busy lookup_rows_per_s push_rows_per_s)
for ((rep = 0; rep < REPS; rep++)); do
    declare -A cur=()
    for mode in $( ((rep % 2)) && echo "on off" || echo "off on"); do
        line=$(one "$mode" "$rep") || exit 1
        echo "$line"
        for f in "${F[@]}"; do cur[$mode.$f]=$(bench_field - "$f" <<<"$line"); done
    done
    for f in "${F[@]}"; do add "$f" "$(ratio "${cur[on.$f]}" "${cur[off.$f]}")"; done
done
printf '{"bench":"token","reps":%d,"seconds_each":%s' "$REPS" "$S"
for f in "${F[@]}"; do printf ',"%s_on_off":%s' "$f" "$(echo "${V[$f]}" | median)"; done
printf '}\n'
