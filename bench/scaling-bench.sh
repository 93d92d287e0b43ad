#!/usr/bin/env bash
# Scaling benchmark (issue 11): measures the inputs of the cluster model of
# docs/scaling.md on this machine and checks the model against every job
# shape that fits here.
#
#   1. The dense model's step (first-order terms, forward, backward, Adagrad)
#      per CPU-second on one thread: bench/model_bench.
#   2. One PS pinned to CPU 0, bench/ps_bench on CPU 1: PS CPU (process
#      total, from shadow-ctl stats) per pushed and per looked-up key and per
#      request, from requests of 4096 and of 64 keys.
#   3. Jobs pinned with taskset (PSs on CPU 0, trainers on CPU 1, or all on
#      CPU 0, or unpinned), planted data, no eval, trainer.max_examples
#      BUDGET per trainer: examples/s, examples per CPU-second, the CPU split
#      per example (worker threads, ZeroMQ I/O, PS service, PS I/O, proxy),
#      keys and requests and bytes per example from the PSs' counters (their
#      "stats at exit" log line). 1 trainer x 1 worker with 1, 2 and 4 PSs
#      fit the per-example and per-request costs; the other shapes are the
#      check.
#   4. Sync rounds unthrottled (sync.cpu_share 0), 2 trainers x 1 worker:
#      shadow-thread CPU and latency per round of s-ma (ring AllReduce) and
#      s-easgd against the dense model size (top MLP 64, 256, 1024 wide) and
#      s-ma with 4 trainers; the sync PS's CPU and bytes per EASGD round.
#
# Settings run interleaved, REPS repetitions, medians. JSON lines on stdout:
# scaling_job / scaling_sync (one per run), scaling_constants (the model's
# inputs; bench/scaling-model.sh reads it), scaling_check (predicted
# against measured per shape). About 5 minutes with REPS=3 on 2 cores.
#   REPS=3  SCALING_BUDGET=300000  SCALING_SYNC_BUDGET=60000
# Arg: scratch dir.
set -u
cd "$(dirname "$0")/.."
T=$1; REPS=${REPS:-3}; BUDGET=${SCALING_BUDGET:-300000}
SYNC_BUDGET=${SCALING_SYNC_BUDGET:-60000}; BUILD=${BUILD:-build/rel}
. bench/bench-lib.sh
bench_data 1000000 200000
command -v taskset >/dev/null || { echo "scaling-bench: taskset (util-linux) is needed" >&2; exit 1; }
[ "$(getconf _NPROCESSORS_ONLN)" -ge 2 ] || { echo "scaling-bench: needs 2 CPUs" >&2; exit 1; }
for b in model_bench ps_bench; do
    [ -x "$BUILD/bench/$b" ] || { echo "scaling-bench: build $BUILD/bench/$b first" >&2; exit 1; }
done
declare -A V
add() { V[$1]="${V[$1]:-} $2"; }
med() { if [ -n "${V[$1]:-}" ]; then echo "${V[$1]}" | median; else echo 0; fi; }
calc() { awk "BEGIN { printf \"%.6g\", ($1) }"; }
jf() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" <<<"$1" | head -n 1; }

# ------------------------------------------------------------ 1. the model
model() {
    local l
    l=$(timeout 60 taskset -c 1 "$BUILD/bench/model_bench" 1) || { echo "scaling-bench: model_bench failed" >&2; exit 1; }
    add model_us "$(calc "1e6 / $(jf "$l" job_step_examples_per_cpu_s | tr -d ' ')")"
    add model_fb_us "$(calc "1e6 / $(jf "$l" fwd_bwd_examples_per_cpu_s | tr -d ' ')")"
}

# -------------------------------------------------------- 2. PS per key
# start_ps THREADS: one embedding PS on CPU 0 (job file $T/sc-ps.yaml); sets PS_PID
start_ps() {
    cat >"$T/sc-ps.yaml" <<YAML
job: {run_dir: $T/sc-psrun}
cluster:
  embedding: [tcp://127.0.0.1:$(bench_port)]
  sync: []
  trainers: [tcp://127.0.0.1:$(bench_port)]
ps: {threads: $1}
tables: {admit_after: 0}
YAML
    taskset -c 0 bin/shadow-ps -c "$T/sc-ps.yaml" --role embedding --shard 0 >"$T/sc-ps.log" 2>&1 &
    PS_PID=$!
    local i
    for i in $(seq 100); do grep -q "ready:" "$T/sc-ps.log" && return 0; sleep 0.1; done
    echo "scaling-bench: the PS did not start" >&2; cat "$T/sc-ps.log" >&2; exit 1
}
stop_ps() { kill -TERM "$PS_PID"; wait "$PS_PID" 2>/dev/null; }
# pb OP KEYS_PER_REQUEST CLIENTS: ps_bench on CPU 1 against that PS; sets D to
# "PS_CPU_S KEYS REQUESTS CLIENT_CPU_S CLIENT_IO_CPU_S PS_IO_CPU_S" of that
# run (the PS's figures from its stats before and after)
pb() {
    local s0 s1 k q out
    if [ "$1" = push ]; then k=keys_pushed; q=req_push; else k=keys_looked_up; q=req_lookup; fi
    s0=$(bin/shadow-ctl -c "$T/sc-ps.yaml" -j stats 2>/dev/null)
    out=$(timeout 60 taskset -c 1 "$BUILD/bench/ps_bench" -c "$T/sc-ps.yaml" rows --op "$1" \
        --keys-per-request "$2" --clients "$3" --seconds 1) ||
        { stop_ps; echo "scaling-bench: ps_bench failed" >&2; exit 1; }
    s1=$(bin/shadow-ctl -c "$T/sc-ps.yaml" -j stats 2>/dev/null)
    d() { calc "$(jf "$s1" "$1") - $(jf "$s0" "$1")"; }
    D="$(d cpu_s) $(d $k) $(d $q) $(jf "$out" cpu_s) $(jf "$out" cpu_zmq_io_s) $(d cpu_zmq_io_s)"
}
# PS CPU per key (requests of 4096 and of 64 keys, one client: the solution
# of CPU = keys x per_key + requests x per_request), per request when busy
# (16 clients with 16 keys each keep requests queued: no thread sleeps
# between two), the client's CPU per request then, and the proxy's (main
# thread of a PS with 2 service threads) per request.
ps_costs() {
    local op ca ka qa cb kb qb det pk pr c k q cl ci pi
    start_ps 1
    pb push 4096 1   # materializes the key space: the lookups below read
    for op in push lookup; do
        pb $op 4096 1; read -r ca ka qa _ <<<"$D"
        pb $op 64 1; read -r cb kb qb _ <<<"$D"
        det=$(calc "$ka * $qb - $kb * $qa")
        pk=$(calc "($ca * $qb - $cb * $qa) / $det * 1e6")
        pr=$(calc "($ka * $cb - $kb * $ca) / $det * 1e6")
        add "psb_${op}_key_us" "$pk"; add "psb_${op}_req_idle_us" "$pr"
        pb $op 16 16; read -r c k q cl ci pi <<<"$D"
        add "psb_${op}_req_busy_us" "$(calc "($c - $k * $pk / 1e6) / $q * 1e6")"
        add "psb_${op}_client_req_busy_us" "$(calc "$cl / $q * 1e6")"
        add "psb_${op}_client_io_req_busy_us" "$(calc "$ci / $q * 1e6")"
        add "psb_${op}_io_share_busy" "$(calc "$pi / $c")"
        add "psb_${op}_busy_share" "$c"
    done
    stop_ps
    start_ps 2
    pb push 4096 1; pb push 16 16; pb lookup 16 16
    stop_ps
    local main n
    main=$(sed -n 's/.*main and other \([0-9.]*\) s.*/\1/p' "$T/sc-ps.log" | tail -n 1)
    n=$(bench_field "$T/sc-ps.stats.json" req_lookup)
    n=$(calc "$n + $(bench_field "$T/sc-ps.stats.json" req_push)")
    add psb_proxy_req_busy_us "$(calc "${main:-0} / $n * 1e6")"
}

# ------------------------------------------------------------ 3. jobs
# pin_bin NAME PS_CPUS TRAINER_CPUS: a bin folder for shadow-launch --bin whose
# shadow-ps and shadow-trainer run under taskset (exec: same pid)
pin_bin() {
    local d=$T/sc-bin-$1 b
    mkdir -p "$d"
    ln -sf "$PWD/bin/shadow-ctl" "$d/shadow-ctl"
    for b in ps:$2 trainer:$3; do
        printf '#!/bin/sh\nexec taskset -c %s "%s" "$@"\n' "${b#*:}" "$PWD/bin/shadow-${b%%:*}" \
            >"$d/shadow-${b%%:*}"
        chmod +x "$d/shadow-${b%%:*}"
    done
    echo "$d"
}
# job_yaml N E: $T/sc-job.yaml with E embedding PSs, 1 sync PS, N trainers
job_yaml() { bench_job_yaml "$T/sc-job.yaml" scaling "$T/sc-run" "$1" "$2"; }

# sum_ps KEY: KEY summed over the embedding PSs' "stats at exit" lines
sum_ps() { bench_ps_exit_sum "$T/sc-run" embedding "$1"; }
# sum_cpu FIELD: 1 total, 2 service, 3 I/O, 4 main and other, over the embedding PSs
sum_cpu() {
    local f s=0 v
    for f in "$T"/sc-run/logs/ps-embedding-*.log; do
        v=$(sed -n 's/.* cpu: \([0-9.]*\) s total, service threads \([0-9.]*\) s, ZeroMQ I\/O \([0-9.]*\) s, main and other \([0-9.]*\) s.*/\1 \2 \3 \4/p' "$f" | tail -n 1 | cut -d' ' -f"$1")
        s=$(calc "$s + ${v:-0}")
    done
    echo "$s"
}
# sum_tr KEY: KEY summed over the trainers' results
sum_tr() { bench_tr_sum "$T/sc-run" "$1"; }

# job LABEL N W E THREADS PLACE [--set ...]: one job; PLACE is split (PSs on
# CPU 0, trainers on CPU 1), one (all on CPU 0) or free (unpinned). Adds its
# per-example figures to V[LABEL|...] and prints a scaling_job line.
job() {
    local label=$1 n=$2 w=$3 e=$4 th=$5 place=$6 bindir t u s wall ex; shift 6
    case $place in
        split) bindir=$(pin_bin split 0 1) ;;
        one) bindir=$(pin_bin one 0 0) ;;
        *) bindir=$PWD/bin ;;
    esac
    job_yaml "$n" "$e"
    rm -rf "$T/sc-run"
    [ "$n" = 1 ] && set -- --set sync.algorithm=none "$@"
    TIMEFORMAT="%R %U %S"
    t=$( { time timeout 300 scripts/shadow-launch "$T/sc-job.yaml" --quiet --no-plots --bin "$bindir" \
        --set trainer.workers="$w" --set trainer.max_examples="$BUDGET" --set trainer.epochs=1 \
        --set ps.threads="$th" "$@" >"$T/sc-launch.log" 2>&1; } 2>&1 ) ||
        { echo "scaling-bench: job $label failed" >&2; tail -n 20 "$T/sc-launch.log" >&2; exit 1; }
    read -r wall u s <<<"$(echo "$t" | tail -n 1)"
    local R=$T/sc-run/result.json
    ex=$(bench_field "$R" examples)
    local eps cpu ps_tot ps_svc ps_io ps_main ckpt tr_cpu tw tio tsh tot lk pu rl rp bi bo ur
    eps=$(bench_field "$R" eps)
    cpu=$(calc "$u + $s")
    ps_tot=$(sum_cpu 1); ps_svc=$(sum_cpu 2); ps_io=$(sum_cpu 3); ps_main=$(sum_cpu 4)
    ckpt=$(calc "$(sum_ps ckpt_cpu_us) / 1e6")
    tr_cpu=$(sum_tr cpu_s); tw=$(sum_tr cpu_workers_s); tio=$(sum_tr cpu_zmq_io_s)
    tsh=$(sum_tr cpu_shadow_s); tot=$(sum_tr cpu_other_s)
    lk=$(sum_ps keys_looked_up); pu=$(sum_ps keys_pushed)
    rl=$(sum_ps req_lookup); rp=$(sum_ps req_push); bi=$(sum_ps bytes_in); bo=$(sum_ps bytes_out)
    ur=$(calc "$(sum_tr keys_unique_ratio) / $n")
    # the busiest shard's keys against the mean (hash sharding's imbalance)
    local imb
    imb=$(for f in "$T"/sc-run/logs/ps-embedding-*.stats.json; do
              bench_field "$f" keys_looked_up
          done | awk '{ s += $1; if ($1 > m) m = $1 } END { printf "%.4f", m * NR / s }')
    local f trwall=0
    for f in "$T"/sc-run/result-trainer-*.json; do
        trwall=$(calc "$(bench_field "$f" wall_s) > $trwall ? $(bench_field "$f" wall_s) : $trwall")
    done
    local k
    declare -A F=(
        [eps]=$eps [examples_per_cpu_s]=$(calc "$ex / $cpu")
        [examples_per_proc_cpu_s]=$(calc "$ex / ($ps_tot + $tr_cpu)")
        [tr_worker_us]=$(calc "$tw / $ex * 1e6") [tr_io_us]=$(calc "$tio / $ex * 1e6")
        [tr_shadow_us]=$(calc "$tsh / $ex * 1e6") [tr_other_us]=$(calc "$tot / $ex * 1e6")
        [ps_svc_us]=$(calc "($ps_svc - $ckpt) / $ex * 1e6") [ps_io_us]=$(calc "$ps_io / $ex * 1e6")
        [ps_main_us]=$(calc "$ps_main / $ex * 1e6") [ps_ckpt_s]=$ckpt
        [ps_us]=$(calc "($ps_tot - $ckpt) / $ex * 1e6") [tr_us]=$(calc "$tr_cpu / $ex * 1e6")
        [ps_busy]=$(calc "$ps_tot / ($trwall * $e)") [tr_busy]=$(calc "$tr_cpu / ($trwall * $n)")
        [keys_looked_up_per_example]=$(calc "$lk / $ex") [keys_pushed_per_example]=$(calc "$pu / $ex")
        [requests_per_example]=$(calc "($rl + $rp) / $ex") [proxy_us_per_request]=$(calc "$ps_main / ($rl + $rp) * 1e6")
        [bytes_to_ps_per_example]=$(calc "$bi / $ex") [bytes_from_ps_per_example]=$(calc "$bo / $ex")
        [keys_unique_ratio]=$ur [shard_imbalance]=$imb
        [ps_wait_share]=$(calc "$(sum_tr ps_wait_s) / ($(sum_tr wall_s) * $w)")
        [cpu_s]=$cpu [wall_s]=$wall [examples]=$ex
        [req_lookup]=$rl [req_push]=$rp [keys_looked_up]=$lk [keys_pushed]=$pu [bytes_in]=$bi [bytes_out]=$bo)
    local out="{\"bench\":\"scaling_job\",\"shape\":\"$label\",\"trainers\":$n,\"workers\":$w,\"ps\":$e,\"ps_threads\":$th,\"place\":\"$place\""
    for k in "${!F[@]}"; do
        add "$label|$k" "${F[$k]}"
        out="$out,\"$k\":${F[$k]}"
    done
    echo "$out}"
}

# ------------------------------------------------------------ 4. sync rounds
# sync_job LABEL N ALGO TOP_WIDTH
sync_job() {
    local label=$1 n=$2 algo=$3 top=$4 f rounds=0 cpu=0 lat=0 m
    job_yaml "$n" 1
    rm -rf "$T/sc-run"
    timeout 300 scripts/shadow-launch "$T/sc-job.yaml" --quiet --no-plots --set trainer.workers=1 \
        --set trainer.max_examples="$SYNC_BUDGET" --set trainer.epochs=1 \
        --set sync.algorithm="$algo" --set sync.cpu_share=0 --set "model.top_mlp=[$top, 1]" \
        >"$T/sc-launch.log" 2>&1 ||
        { echo "scaling-bench: sync job $label failed" >&2; tail -n 20 "$T/sc-launch.log" >&2; exit 1; }
    m=$(bench_field "$T/sc-run/result-trainer-0.json" dense_params)
    rounds=$(sum_tr sync_rounds); cpu=$(sum_tr sync_cpu_s); lat=$(calc "$(sum_tr sync_latency_p50_ms) / $n")
    local us out ps_us=0 ps_b=0 st
    us=$(calc "$cpu / $rounds * 1e6")
    if [ "$algo" = s-easgd ]; then
        f=$T/sc-run/logs/ps-sync-0.log
        st=$(cat "$T/sc-run/logs/ps-sync-0.stats.json")
        local pc el
        pc=$(sed -n 's/.* cpu: \([0-9.]*\) s total.*/\1/p' "$f" | tail -n 1)
        el=$(jf "$st" req_elastic)
        ps_us=$(calc "$pc / $el * 1e6"); ps_b=$(calc "($(jf "$st" bytes_in) + $(jf "$st" bytes_out)) / $el")
        add "$label|ps_us_per_round" "$ps_us"; add "$label|ps_bytes_per_round" "$ps_b"
    fi
    add "$label|us_per_round" "$us"; add "$label|latency_ms" "$lat"; add "$label|floats" "$m"
    echo "{\"bench\":\"scaling_sync\",\"setting\":\"$label\",\"trainers\":$n,\"algorithm\":\"$algo\",\"dense_floats\":$m,\"rounds\":$rounds,\"shadow_us_per_round\":$us,\"latency_p50_ms\":$lat,\"sync_ps_us_per_round\":$ps_us,\"sync_ps_bytes_per_round\":$ps_b}"
}

# shapes: LABEL N W E THREADS PLACE
FIT=("1x1 E1|1 1 1 1 split" "1x1 E2|1 1 2 1 split" "1x1 E4|1 1 4 1 split")
CHECK=("1x1 E1 2thr|1 1 1 2 split" "1x2 E2|1 2 2 1 split" "2x1 E2|2 1 2 1 split"
       "2x1 E4|2 1 4 1 split" "1x1 E2 one core|1 1 2 1 one" "2x2 E2 unpinned|2 2 2 1 free")
SYNCS=("s-ma 64|2 s-ma 64" "s-ma 256|2 s-ma 256" "s-ma 1024|2 s-ma 1024" "s-ma 64 N4|4 s-ma 64"
       "s-easgd 64|2 s-easgd 64" "s-easgd 256|2 s-easgd 256" "s-easgd 1024|2 s-easgd 1024")
for ((rep = 0; rep < REPS; rep++)); do
    model
    ps_costs
    for sh in "${FIT[@]}" "${CHECK[@]}"; do
        # shellcheck disable=SC2086
        job "${sh%%|*}" ${sh#*|}
    done
    for sh in "${SYNCS[@]}"; do
        # shellcheck disable=SC2086
        sync_job "${sh%%|*}" ${sh#*|}
    done
done

# ------------------------------------------------------------ constants
# least-squares line through "x y" pairs: prints "intercept slope"
fit() { awk '{ n++; sx += $1; sy += $2; sxx += $1 * $1; sxy += $1 * $2 }
    END { b = (n * sxy - sx * sy) / (n * sxx - sx * sx); printf "%.6g %.6g", (sy - b * sx) / n, b }'; }
# slope of a line through the origin
fit0() { awk '{ sxx += $1 * $1; sxy += $1 * $2 } END { printf "%.6g", sxy / sxx }'; }
# every run of the FIT shapes: "requests_per_example KEY" (pairs) or KEY (pooled)
pairs() {
    local sh i x y
    for sh in "${FIT[@]}"; do
        read -ra x <<<"${V[${sh%%|*}|requests_per_example]}"; read -ra y <<<"${V[${sh%%|*}|$1]}"
        for i in "${!x[@]}"; do echo "${x[$i]} ${y[$i]}"; done
    done
}
pooled() { local sh; for sh in "${FIT[@]}"; do echo "${V[${sh%%|*}|$1]}"; done | median; }
read -r io0 ior <<<"$(pairs tr_io_us | fit)"
read -r ps0 psr <<<"$(pairs ps_us | fit)"
IO_SHARE=$(for sh in "${FIT[@]}"; do l=${sh%%|*}; calc "$(med "$l|ps_io_us") / ($(med "$l|ps_io_us") + $(med "$l|ps_svc_us"))"; echo; done | median)
KPE=$(med "1x1 E2|keys_pushed_per_example")
RD=17   # floats per row: embedding_dim 16 + the first-order weight
# header bytes per request: what bytes_in holds beyond the key and gradient
# arrays (bytes_out counts reply arrays only; replies carry a header of the
# same kind, so the model charges one each way)
HDR=$(calc "($(med "1x1 E2|bytes_in") - $(med "1x1 E2|keys_looked_up") * 8 - $(med "1x1 E2|keys_pushed") * (8 + 4 * $RD)) / ($(med "1x1 E2|req_lookup") + $(med "1x1 E2|req_push"))")
MODEL=$(med model_us); WORKER=$(pooled tr_worker_us)
# s-ma: shadow CPU per round = 2(N-1) x per message + M x per float; the
# message cost from 4 against 2 trainers, the float cost through the origin
MA_MSG=$(calc "($(med "s-ma 64 N4|us_per_round") - $(med "s-ma 64|us_per_round")) / 4")
MA_MSG=$(calc "$MA_MSG > 0 ? $MA_MSG : 0")
MAF=$(for z in 64 256 1024; do echo "$(med "s-ma $z|floats") $(calc "$(med "s-ma $z|us_per_round") - 2 * $MA_MSG")"; done | fit0)
EAF=$(for z in 64 256 1024; do echo "$(med "s-easgd $z|floats") $(med "s-easgd $z|us_per_round")"; done | fit0)
EPF=$(for z in 64 256 1024; do echo "$(med "s-easgd $z|floats") $(med "s-easgd $z|ps_us_per_round")"; done | fit0)
LATF=$(for z in 64 256 1024; do echo "$(med "s-ma $z|floats") $(med "s-ma $z|latency_ms")"; done | fit0)
# the trainer's ZeroMQ I/O thread per byte (its per-example cost at no
# requests over the bytes it moves), charged to a round's sync traffic
IOB=$(calc "$io0 / ($KPE * (16 + 8 * $RD))")
M0=$(med "s-ma 64|floats")
SHARE=0.02   # sync.cpu_share's default
SYNC_CORE=$(calc "$SHARE * (1 + 2 * 4 * $M0 * $IOB / (2 * $MA_MSG + $M0 * $MAF))")
RQB=$(calc "($(med psb_lookup_req_busy_us) + $(med psb_push_req_busy_us)) / 2")
CQB=$(calc "($(med psb_lookup_client_req_busy_us) + $(med psb_push_client_req_busy_us)) / 2")
CIB=$(calc "($(med psb_lookup_client_io_req_busy_us) + $(med psb_push_client_io_req_busy_us)) / 2")
PIB=$(calc "($(med psb_lookup_io_share_busy) + $(med psb_push_io_share_busy)) / 2")
RQI=$(calc "($(med psb_lookup_req_idle_us) + $(med psb_push_req_idle_us)) / 2")
CONST="{\"bench\":\"scaling_constants\",\"reps\":$REPS,\"budget\":$BUDGET,\"batch\":128,\"fields\":26,\"row_floats\":$RD"
CONST="$CONST,\"model_us\":$MODEL,\"model_fwd_bwd_us\":$(med model_fb_us),\"worker_us\":$WORKER"
CONST="$CONST,\"client_us\":$(calc "$WORKER - $MODEL"),\"tr_io_us_0\":$io0,\"tr_io_us_req\":$ior"
CONST="$CONST,\"tr_other_us\":$(pooled tr_other_us),\"ps_us_0\":$ps0,\"ps_us_req\":$psr,\"ps_io_share\":$IO_SHARE"
CONST="$CONST,\"ps_proxy_us_req\":$(med "1x1 E1 2thr|proxy_us_per_request")"
CONST="$CONST,\"psb_lookup_key_us\":$(med psb_lookup_key_us),\"psb_push_key_us\":$(med psb_push_key_us)"
CONST="$CONST,\"psb_req_idle_us\":$RQI,\"psb_req_busy_us\":$RQB,\"psb_client_req_busy_us\":$CQB,\"psb_client_io_req_busy_us\":$CIB,\"psb_io_share_busy\":$PIB"
CONST="$CONST,\"psb_proxy_req_busy_us\":$(med psb_proxy_req_busy_us),\"psb_busy_share\":$(med psb_lookup_busy_share)"
CONST="$CONST,\"keys_per_example\":$KPE,\"keys_unique_ratio\":$(med "1x1 E2|keys_unique_ratio")"
CONST="$CONST,\"shard_imbalance_e4\":$(med "1x1 E4|shard_imbalance")"
CONST="$CONST,\"bytes_to_ps_per_key\":$((8 + 8 + 4 * RD)),\"bytes_from_ps_per_key\":$((4 * RD)),\"header_bytes\":$HDR"
CONST="$CONST,\"bytes_to_ps_per_example\":$(med "1x1 E2|bytes_to_ps_per_example"),\"bytes_from_ps_per_example\":$(med "1x1 E2|bytes_from_ps_per_example")"
CONST="$CONST,\"dense_floats\":$M0,\"tr_io_us_per_byte\":$IOB,\"cpu_share\":$SHARE,\"sync_core\":$SYNC_CORE"
CONST="$CONST,\"ma_round_us_msg\":$MA_MSG,\"ma_round_us_float\":$MAF,\"ma_latency_ms_float\":$LATF"
CONST="$CONST,\"ma_latency_ms_n2\":$(med "s-ma 64|latency_ms"),\"ma_latency_ms_n4\":$(med "s-ma 64 N4|latency_ms")"
CONST="$CONST,\"easgd_round_us_float\":$EAF,\"easgd_ps_us_float\":$EPF"
CONST="$CONST,\"easgd_ps_bytes_per_round\":$(med "s-easgd 64|ps_bytes_per_round"),\"net_step_us\":50,\"wire_efficiency\":0.94}"
echo "$CONST"
echo "$CONST" >"$T/sc-constants.json"

# ------------------------------------------------------------ check
# Predicted for idle cores (CPU 0 and CPU 1 wholly ours), once with the
# per-request costs of light load (the 1 x 1 fit) and once with those of a
# busy PS (ps_bench): more requests in flight need fewer thread wake-ups
# each, so a shape with more workers should land between the two. The
# machine is shared, so measured examples/s fall short of the prediction by
# about the share of the bottleneck's cores that other users took;
# examples per CPU-second do not depend on that share.
for sh in "${FIT[@]}" "${CHECK[@]}"; do
    l=${sh%%|*}; read -r n w e th place <<<"${sh#*|}"
    case $place in
        split) where="split 1 1" ;;
        one) where="shared 1" ;;
        *) where="shared 2" ;;
    esac
    # shellcheck disable=SC2086
    pl=$(bench/scaling-model.sh "$T/sc-constants.json" predict light "$n" "$w" "$e" "$th" $where)
    # shellcheck disable=SC2086
    pb=$(bench/scaling-model.sh "$T/sc-constants.json" predict busy "$n" "$w" "$e" "$th" $where)
    me=$(med "$l|eps"); mc=$(med "$l|examples_per_proc_cpu_s")
    role=check; [[ " ${FIT[*]} " == *"$l|"* ]] && role=fit
    echo "{\"bench\":\"scaling_check\",\"shape\":\"$l\",\"role\":\"$role\",\"place\":\"$place\",\"predicted_eps\":$(jf "$pl" eps),\"predicted_eps_busy\":$(jf "$pb" eps),\"measured_eps\":$me,\"eps_ratio\":$(calc "$me / $(jf "$pl" eps)"),\"limit\":$(jf "$pl" limit),\"measured_trainer_core_share\":$(med "$l|tr_busy"),\"measured_ps_core_share\":$(med "$l|ps_busy"),\"predicted_examples_per_cpu_s\":$(jf "$pl" examples_per_cpu_s),\"predicted_examples_per_cpu_s_busy\":$(jf "$pb" examples_per_cpu_s),\"measured_examples_per_cpu_s\":$mc,\"cpu_ratio\":$(calc "$mc / $(jf "$pl" examples_per_cpu_s)"),\"cpu_ratio_busy\":$(calc "$mc / $(jf "$pb" examples_per_cpu_s)"),\"measured_examples_per_cpu_s_with_launcher\":$(med "$l|examples_per_cpu_s"),\"eps_runs\":[$(echo ${V[$l|eps]} | tr ' ' ',')],\"examples_per_cpu_s_runs\":[$(echo ${V[$l|examples_per_proc_cpu_s]} | tr ' ' ',')]}"
done
