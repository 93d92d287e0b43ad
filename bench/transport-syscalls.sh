#!/usr/bin/env bash
# The transport's system calls in make run's job (issue 20, docs/per-core.md
# "The transport, eleventh pass"): the job of bench/throughput-bench.sh
# (planted, 1M rows, 2 trainers x 2 workers, ipc://) under `perf record` of
# a few syscalls' entries and the context switches, each counted per thread
# role (the trainers' ZeroMQ I/O threads, their workers, the PSs' I/O
# threads, their service threads, the rest) and divided by the lookup
# requests the embedding PSs served (req_lookup: PUSH_LOOKUP, and a few lone
# LOOKUPs; a round's request to a PS is one of them). Trees side by side,
# interleaved, REPS times.
#   bench/transport-syscalls.sh SCRATCH TREE [TREE ...]
# TREE: a checkout with bin/ and scripts/ built (. for this one). ROWS=1000000
# REPS=1. One JSON line per job on stdout. Needs perf (root, or
# perf_event_paranoid <= 1) and python3.
set -u
cd "$(dirname "$0")/.."
T=$1; shift
REPS=${REPS:-1}; ROWS=${ROWS:-1000000}
command -v perf >/dev/null && command -v python3 >/dev/null ||
    { echo "transport-syscalls: needs perf and python3" >&2; exit 1; }
mkdir -p "$T"
. bench/bench-lib.sh
calc() { awk "BEGIN { printf \"%.6g\", ($1) }"; }
bench_data "$ROWS" 200000
EV=""
for s in sendto recvfrom epoll_wait getpid poll write read; do
    EV="$EV${EV:+,}syscalls:sys_enter_$s"
done
EV="$EV,context-switches"

one() {
    local tree=$1 rd=$T/sys-$2 req load
    rm -rf "$rd"
    bench_shape "$tree"
    perf record -q -c 1 -e "$EV" -o "$rd.data" -- \
        "$tree/scripts/shadow-launch" "$tree/conf/local.yaml" --quiet $(bench_noplots "$tree") \
        --set "job.run_dir=$rd" --set "data.train=$TRAIN" --set "data.eval=$EVAL" \
        "${SHAPE_ARGS[@]}" >"$rd.log" 2>&1 || { echo "transport-syscalls: $2 job failed (see $rd.log)" >&2; return 1; }
    load=$(cut -d' ' -f1 /proc/loadavg)
    req=$(bench_ps_exit_sum "$rd" embedding req_lookup)
    perf script -i "$rd.data" --show-task-events -F pid,tid,comm,event 2>/dev/null |
        python3 -c '
import json, re, sys
req, tree, load = float(sys.argv[1]), sys.argv[2], sys.argv[3]
exe, counts = {}, {}
for line in sys.stdin:
    m = re.search(r"PERF_RECORD_COMM exec: (\S+):(\d+)/", line)
    if m:
        exe[int(m.group(2))] = m.group(1)
        continue
    if "PERF_RECORD" in line:
        continue
    m = re.match(r"\s*(\S.*?)\s+(\d+)/(\d+)\s+(\S+?):?\s*$", line)
    if m:
        counts.setdefault((int(m.group(2)), m.group(1), m.group(4)), 0)
        counts[(int(m.group(2)), m.group(1), m.group(4))] += 1
def role(pid, comm):
    p = {"shadow-ps": "ps", "shadow-trainer": "trainer"}.get(exe.get(pid, ""), "other")
    if p == "other":
        return "other"
    if comm.startswith("ZMQbg/IO"):
        return p + "_zmq_io"
    if p == "trainer" and comm.startswith("worker-"):
        return "trainer_workers"
    if p == "ps":
        return "ps_" + re.sub(r"[-/]?\d+$", "", comm)
    return p + "_rest"
out = {}
for (pid, comm, ev), n in counts.items():
    r = out.setdefault(role(pid, comm), {})
    ev = ev.replace("syscalls:sys_enter_", "")
    r[ev] = r.get(ev, 0) + n
per = {r: {e: round(n / req, 2) for e, n in sorted(d.items())} for r, d in sorted(out.items())}
cs = sum(d.get("context-switches", 0) for d in out.values())
print(json.dumps({"tree": tree, "load": float(load), "requests": int(req),
                  "context_switches_per_request": round(cs / req, 2), "per_request": per}))
' "$req" "$2" "$load"
    rm -f "$rd.data"
}

for ((rep = 0; rep < REPS; rep++)); do
    i=0
    for tree in "$@"; do
        one "$tree" "$i-$rep" || exit 1
        i=$((i + 1))
    done
done
