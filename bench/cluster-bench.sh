#!/usr/bin/env bash
# Cluster benchmark (issue 8): the default job across "hosts" (network
# namespaces joined by veth pairs and a bridge) against the same job on
# 127.0.0.1, side by side in one run, and the bytes per example that cross
# the network for embedding lookups and pushes and for sync rounds, so that
# docs/scaling.md can predict a real cluster.
#
# Hosts: ps-a runs embedding PS 0 and the sync PS, ps-b embedding PS 1, tr-0
# and tr-1 one trainer each; the bridge lives in a fifth namespace, so every
# address exists only inside namespaces this script creates (10.214.N.0/24,
# N from the pid) and every packet between processes crosses a veth and the
# bridge. Both placements run through scripts/shadow-launch with a bin folder
# whose wrappers start each daemon in its host's namespace (ip netns exec
# keeps the pid, so the launcher's watch and teardown work unchanged).
#
# Each repetition runs loopback and namespaces back to back (order
# alternating), with s-easgd (the default) and s-ma; medians over REPS.
# JSON lines on stdout: cluster_job (one per run), cluster_bench (medians,
# the namespace/loopback ratio, bytes per example). Needs root (namespaces);
# prints a skip line and exits 0 without it.
#   REPS=3  CLUSTER_BUDGET=400000 (examples per trainer)
# Arg: scratch dir.
set -u
cd "$(dirname "$0")/.."
T=$1; REPS=${REPS:-3}; BUDGET=${CLUSTER_BUDGET:-400000}
. bench/bench-lib.sh
calc() { awk "BEGIN { printf \"%.6g\", ($1) }"; }
jf() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" <<<"$1" | head -n 1; }

skip() { echo "{\"bench\":\"cluster_bench\",\"skipped\":\"$1\"}"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "ip (iproute2) not installed"

TAG=ssb$$
NET=10.214.$(( $$ % 250 + 1 ))
HOSTS=(ps-a ps-b tr-0 tr-1)
declare -A ADDR=([ps-a]=$NET.1 [ps-b]=$NET.2 [tr-0]=$NET.11 [tr-1]=$NET.12)
BR=$TAG-br

net_down() {
    local h
    for h in "${HOSTS[@]}"; do ip netns del "$TAG-$h" 2>/dev/null; done
    ip netns del "$BR" 2>/dev/null
}
trap net_down EXIT
net_up() {
    local h i=0
    ip netns add "$BR" || return 1
    ip -n "$BR" link add br0 type bridge || return 1
    ip -n "$BR" link set br0 up
    ip -n "$BR" link set lo up
    for h in "${HOSTS[@]}"; do
        ip netns add "$TAG-$h" || return 1
        ip link add "$TAG-h$i" type veth peer name "$TAG-b$i" || return 1
        ip link set "$TAG-h$i" netns "$TAG-$h"
        ip link set "$TAG-b$i" netns "$BR"
        ip -n "$BR" link set "$TAG-b$i" master br0 up
        ip -n "$TAG-$h" link set lo up
        ip -n "$TAG-$h" addr add "${ADDR[$h]}/24" dev "$TAG-h$i"
        ip -n "$TAG-$h" link set "$TAG-h$i" up
        i=$((i + 1))
    done
    # reachable: a TCP connect to a closed port is refused (not timed out)
    local n=50
    while ((n-- > 0)); do
        ip netns exec "$TAG-tr-0" timeout 1 bash -c "exec 3<>/dev/tcp/${ADDR[ps-b]}/9" 2>&1 |
            grep -q refused && return 0
        sleep 0.2
    done
    return 1
}
net_up || skip "cannot create network namespaces here"

bench_data 1000000 200000

# a bin folder whose daemons run in their host's namespace
NSBIN=$T/cl-bin
mkdir -p "$NSBIN"
cat >"$NSBIN/shadow-ps" <<EOF
#!/bin/sh
# embedding PS 0 and the sync PS on ps-a, embedding PS 1 on ps-b
host=ps-a
case " \$* " in *" --role embedding --shard 1 "*) host=ps-b ;; esac
exec ip netns exec $TAG-\$host "$PWD/bin/shadow-ps" "\$@"
EOF
cat >"$NSBIN/shadow-trainer" <<EOF
#!/bin/sh
host=tr-0
case " \$* " in *" --rank 1 "*) host=tr-1 ;; esac
exec ip netns exec $TAG-\$host "$PWD/bin/shadow-trainer" "\$@"
EOF
cat >"$NSBIN/shadow-ctl" <<EOF
#!/bin/sh
exec ip netns exec $TAG-tr-0 "$PWD/bin/shadow-ctl" "\$@"
EOF
chmod +x "$NSBIN"/*

# job_yaml HOST_OF_PS_A HOST_OF_PS_B HOST_OF_TR0 HOST_OF_TR1: the default job's shape
job_yaml() {
    cat >"$T/cl-job.yaml" <<YAML
job: {name: cluster-bench, run_dir: $T/cl-run}
cluster:
  embedding: [tcp://$1:$(bench_port), tcp://$2:$(bench_port)]
  sync: [tcp://$1:$(bench_port)]
  trainers: [tcp://$3:$(bench_port), tcp://$4:$(bench_port)]
data: {train: [$TRAIN], eval: []}
metrics: {interval_s: 5.0}
YAML
}

ps_stat() { bench_ps_exit_sum "$T/cl-run" "$1" "$2"; }  # ROLE KEY, summed over its PSs
tr_sum() { bench_tr_sum "$T/cl-run" "$1"; }               # KEY, summed over the trainers

declare -A V
add() { V[$1]="${V[$1]:-} $2"; }
med() { if [ -n "${V[$1]:-}" ]; then echo "${V[$1]}" | median; else echo 0; fi; }

# the job file's ports as written (launchers that pick free ports by default
# take --fixed-ports)
FIXED=()
scripts/shadow-launch --help 2>/dev/null | grep -q -- --fixed-ports && FIXED=(--fixed-ports)

# run PLACE ALGO: one job; PLACE is loopback or netns
run() {
    local place=$1 algo=$2 bin=$PWD/bin ex eps lb pb sb ab
    if [ "$place" = netns ]; then
        job_yaml "${ADDR[ps-a]}" "${ADDR[ps-b]}" "${ADDR[tr-0]}" "${ADDR[tr-1]}"; bin=$NSBIN
    else
        job_yaml 127.0.0.1 127.0.0.1 127.0.0.1 127.0.0.1
    fi
    rm -rf "$T/cl-run"
    timeout 300 scripts/shadow-launch "$T/cl-job.yaml" --quiet --bin "$bin" "${FIXED[@]}" \
        --set sync.algorithm="$algo" --set trainer.max_examples="$BUDGET" \
        --set trainer.epochs=1 >"$T/cl-launch.log" 2>&1 ||
        { echo "cluster-bench: $place $algo job failed" >&2; tail -n 20 "$T/cl-launch.log" >&2; exit 1; }
    local R=$T/cl-run/result.json
    ex=$(bench_field "$R" examples); eps=$(bench_field "$R" eps)
    # lookups: keys in, rows out; pushes: keys and gradients in (bytes_in
    # holds both request kinds: lookups carry 8 bytes a key, pushes 8 + 4 x
    # row floats, plus headers)
    lb=$(calc "($(ps_stat embedding bytes_out) + 8 * $(ps_stat embedding keys_looked_up)) / $ex")
    pb=$(calc "($(ps_stat embedding bytes_in) - 8 * $(ps_stat embedding keys_looked_up)) / $ex")
    sb=$(calc "($(ps_stat sync bytes_in) + $(ps_stat sync bytes_out)) / $ex")
    ab=$(calc "$(tr_sum sync_ring_bytes_sent) / $ex")
    add "$place|$algo|eps" "$eps"
    add "$algo|lookup_bytes" "$lb"; add "$algo|push_bytes" "$pb"
    add "$algo|sync_ps_bytes" "$sb"; add "$algo|ring_bytes" "$ab"
    add "$algo|rounds" "$(calc "$(tr_sum sync_rounds) / $ex")"
    echo "{\"bench\":\"cluster_job\",\"place\":\"$place\",\"sync\":\"$algo\",\"examples\":$ex,\"eps\":$eps,\"lookup_bytes_per_example\":$lb,\"push_bytes_per_example\":$pb,\"sync_ps_bytes_per_example\":$sb,\"ring_bytes_per_example\":$ab}"
}

for ((rep = 0; rep < REPS; rep++)); do
    for algo in s-easgd s-ma; do
        if ((rep % 2)); then run netns "$algo"; run loopback "$algo"
        else run loopback "$algo"; run netns "$algo"; fi
    done
done
for algo in s-easgd s-ma; do
    lo=$(med "loopback|$algo|eps"); ns=$(med "netns|$algo|eps")
    echo "{\"bench\":\"cluster_bench\",\"sync\":\"$algo\",\"reps\":$REPS,\"loopback_eps\":$lo,\"netns_eps\":$ns,\"ratio_netns_vs_loopback\":$(calc "$ns / $lo"),\"lookup_bytes_per_example\":$(med "$algo|lookup_bytes"),\"push_bytes_per_example\":$(med "$algo|push_bytes"),\"sync_ps_bytes_per_example\":$(med "$algo|sync_ps_bytes"),\"ring_bytes_per_example\":$(med "$algo|ring_bytes"),\"sync_rounds_per_example\":$(med "$algo|rounds")}"
done
