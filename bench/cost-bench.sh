#!/usr/bin/env bash
# Request-tax benchmark (issue 19): what one trained example costs the whole
# job as the cluster grows, on the same data (planted, COST_ROWS rows, one
# epoch, no eval), every trainer with COST_WORKERS workers (default 1):
#   ps1 ps2 ps4 ps8   1, 2, 4, 8 embedding PSs (1 service thread), 2 trainers
#   tr1 tr2 tr4       1, 2, 4 trainers, 2 embedding PSs
# Cost = CPU seconds (user + system) / examples trained, two ways:
#   job_us   every process of the job: bash's `time` of shadow-launch, which
#            waits for every process it starts (PSs, trainers, shadow-ctl,
#            its own shell), so their times add up in its children's rusage
#   procs_us the daemons alone: the PSs' "cpu: ... total" log lines plus the
#            trainers' cpu_s
# Shapes run interleaved, REPS repetitions, medians. With COST_BASE=DIR (a
# checkout with its own bin/ and scripts/, e.g. main built in a scratch
# worktree) every run of a shape here is paired with the same shape there,
# so before and after come from one run. COST_SETS="k=v k=v" adds --set to
# every job of this checkout (e.g. cluster.transport=tcp). JSON lines on stdout: cost_job
# (one per run), cost_shape (medians per shape and build), cost_ratio
# (ps8/ps1 and tr4/tr1 per build; after/before per shape with COST_BASE).
# COST_SHAPES="ps1 ps8" runs a subset (the ratios need ps1, ps8, tr1, tr4).
# About 3 minutes on 2 cores with REPS=3 (twice that with COST_BASE).
# Arg: scratch dir.
set -u
cd "$(dirname "$0")/.."
T=$1; REPS=${REPS:-3}; ROWS=${COST_ROWS:-200000}
. bench/bench-lib.sh
bench_data "$ROWS" 1000
SHAPES=(${COST_SHAPES:-ps1 ps2 ps4 ps8 tr1 tr2 tr4})
BUILDS=(here)
[ -n "${COST_BASE:-}" ] && BUILDS=(base here)
declare -A V
add() { V[$1]="${V[$1]:-} $2"; }
med() { if [ -n "${V[$1]:-}" ]; then echo "${V[$1]}" | median; else echo 0; fi; }
calc() {  # an awk expression; null where it has no value (a shape not run)
    awk "BEGIN { v = ($1); if (v != v || v == v + 1) print \"null\"; else printf \"%.6g\", v }" \
        2>/dev/null || printf null
}
root() { [ "$1" = base ] && echo "$COST_BASE" || echo "$PWD"; }

# job_yaml N E: $T/cost-job.yaml with E embedding PSs and N trainers (the
# launcher gives them endpoints: free ports, or ipc:// on one host)
job_yaml() { bench_job_yaml "$T/cost-job.yaml" cost "$T/cost-run" "$1" "$2"; }

# ps_cpu: the embedding and sync PSs' CPU seconds, from their exit log lines
ps_cpu() {
    local f
    for f in "$T"/cost-run/logs/ps-*.log; do
        sed -n 's/.* cpu: \([0-9.]*\) s total.*/\1/p' "$f" | tail -n 1
    done | awk '{ s += $1 } END { printf "%.6f\n", s }'
}

# job BUILD SHAPE: one job; adds its costs to V[BUILD|SHAPE|...], prints a cost_job line
job() {
    local b=$1 shape=$2 n e r t wall u s ex sets=()
    case $shape in
        ps*) n=2; e=${shape#ps} ;;
        tr*) n=${shape#tr}; e=2 ;;
    esac
    r=$(root "$b")
    job_yaml "$n" "$e"
    rm -rf "$T/cost-run"
    [ "$n" = 1 ] && sets+=(--set sync.algorithm=none)
    [ "$b" = here ] && for kv in ${COST_SETS:-}; do sets+=(--set "$kv"); done
    TIMEFORMAT="%R %U %S"
    t=$( { time timeout 600 "$r/scripts/shadow-launch" "$T/cost-job.yaml" --quiet $(bench_noplots "$r") --bin "$r/bin" \
        --set trainer.workers="${COST_WORKERS:-1}" --set trainer.epochs=1 --set ps.threads=1 "${sets[@]}" \
        >"$T/cost-launch.log" 2>&1; } 2>&1 ) ||
        { echo "cost-bench: job $b/$shape failed" >&2; tail -n 20 "$T/cost-launch.log" >&2; exit 1; }
    read -r wall u s <<<"$(echo "$t" | tail -n 1)"
    ex=$(bench_field "$T/cost-run/result.json" examples)
    local job_us procs_us req
    job_us=$(calc "($u + $s) / $ex * 1e6")
    procs_us=$(calc "($(ps_cpu) + $(bench_tr_sum "$T/cost-run" cpu_s)) / $ex * 1e6")
    req=$(calc "($(bench_ps_exit_sum "$T/cost-run" embedding req_lookup) + \
                 $(bench_ps_exit_sum "$T/cost-run" embedding req_push)) / $ex")
    add "$b|$shape|job_us" "$job_us"; add "$b|$shape|procs_us" "$procs_us"
    add "$b|$shape|eps" "$(bench_field "$T/cost-run/result.json" eps)"
    echo "{\"bench\":\"cost_job\",\"build\":\"$b\",\"shape\":\"$shape\",\"trainers\":$n,\"ps\":$e,\"examples\":$ex,\"wall_s\":$wall,\"job_cpu_s\":$(calc "$u + $s"),\"job_us_per_example\":$job_us,\"procs_us_per_example\":$procs_us,\"requests_per_example\":$req}"
}

for ((rep = 0; rep < REPS; rep++)); do
    for shape in "${SHAPES[@]}"; do
        for b in "${BUILDS[@]}"; do job "$b" "$shape"; done
    done
done
for b in "${BUILDS[@]}"; do
    for shape in "${SHAPES[@]}"; do
        echo "{\"bench\":\"cost_shape\",\"build\":\"$b\",\"shape\":\"$shape\",\"reps\":$REPS,\"job_us_per_example\":$(med "$b|$shape|job_us"),\"procs_us_per_example\":$(med "$b|$shape|procs_us"),\"eps\":$(med "$b|$shape|eps")}"
    done
    echo "{\"bench\":\"cost_ratio\",\"build\":\"$b\",\"job_ps8_vs_ps1\":$(calc "$(med "$b|ps8|job_us") / $(med "$b|ps1|job_us")"),\"job_tr4_vs_tr1\":$(calc "$(med "$b|tr4|job_us") / $(med "$b|tr1|job_us")"),\"procs_ps8_vs_ps1\":$(calc "$(med "$b|ps8|procs_us") / $(med "$b|ps1|procs_us")"),\"procs_tr4_vs_tr1\":$(calc "$(med "$b|tr4|procs_us") / $(med "$b|tr1|procs_us")"),\"target\":1.15}"
done
if [ -n "${COST_BASE:-}" ]; then
    for shape in "${SHAPES[@]}"; do
        echo "{\"bench\":\"cost_ratio\",\"shape\":\"$shape\",\"job_here_vs_base\":$(calc "$(med "here|$shape|job_us") / $(med "base|$shape|job_us")"),\"procs_here_vs_base\":$(calc "$(med "here|$shape|procs_us") / $(med "base|$shape|procs_us")")}"
    done
fi
