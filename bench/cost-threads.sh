#!/usr/bin/env bash
# Where a job's CPU goes, by process role and thread (issue 19): runs the
# BENCH=cost job (bench/cost-bench.sh: planted data, COST_ROWS rows, one
# epoch, ps.threads 1, COST_WORKERS workers per trainer) with E embedding
# PSs and N trainers under `perf sched record`, and prints one line per
# (role, thread kind): CPU milliseconds and times scheduled in (context
# switches), summed over the job's processes, plus the job's requests.
#   bench/cost-threads.sh SCRATCH E [N [ROOT]]
# ROOT: a checkout with bin/ and scripts/ (default this one). Needs perf
# (root, or perf_event_paranoid <= 1) and python3. The job runs slower
# under the recording (every switch is traced): compare shapes recorded the
# same way, not with cost-bench's figures. Thread kinds: main (a process's
# first thread: a PS's service thread 0), worker, shadow, zmq-io (ZeroMQ's
# I/O threads), zap, admin, zmq-reaper, and threads nobody names (OpenBLAS's
# pool in a trainer). docs/scaling.md has a table made with it.
set -u
cd "$(dirname "$0")/.."
T=$1; E=$2; N=${3:-2}; R=${4:-$PWD}
command -v perf >/dev/null && command -v python3 >/dev/null ||
    { echo "cost-threads: needs perf and python3" >&2; exit 1; }
mkdir -p "$T"
. bench/bench-lib.sh
bench_data "${COST_ROWS:-200000}" 1000
O=$T/threads-$E-$N
rm -rf "$O"; mkdir -p "$O"
bench_job_yaml "$O/job.yaml" cost "$O/run" "$N" "$E"
sets=(--set trainer.workers="${COST_WORKERS:-2}" --set trainer.epochs=1 --set ps.threads=1)
[ "$N" = 1 ] && sets+=(--set sync.algorithm=none)
# who is who: the processes' command lines, every 0.1 s (threads are named)
( while :; do ps -e -o pid=,args= >>"$O/procs.txt"; sleep 0.1; done ) &
SNAP=$!
trap 'kill $SNAP 2>/dev/null' EXIT
perf sched record -o "$O/sched.data" -- timeout 600 "$R/scripts/shadow-launch" "$O/job.yaml" \
    --quiet $(bench_noplots "$R") --bin "$R/bin" "${sets[@]}" >"$O/launch.log" 2>"$O/perf.log" ||
    { echo "cost-threads: the job failed" >&2; tail -n 20 "$O/launch.log" >&2; exit 1; }
kill $SNAP 2>/dev/null
perf sched timehist -i "$O/sched.data" -s 2>/dev/null >"$O/timehist.txt"
req=$(awk -v a="$(bench_ps_exit_sum "$O/run" embedding req_lookup)" 'BEGIN { print a }')
echo "job: $E embedding PSs, $N trainers, $(bench_field "$O/run/result.json" examples) examples," \
    "$req lookup requests (load$(uptime | sed 's/.*average[s]*://'))"
python3 - "$O" <<'PY'
import collections, os, re, sys
d = sys.argv[1]
text = open(d + "/timehist.txt").read()
text = text[text.find("Runtime summary"):]
tasks = {}  # tid: (comm, pid, parent, sched-in count, run ms)
for line in text.splitlines():
    m = re.match(r"\s*(.+)\[(\d+)(?:/(\d+))?\]\s+(\d+)\s+(\d+)\s+([\d.]+)", line)
    if m:
        tid = int(m.group(2))
        tasks[tid] = (m.group(1), int(m.group(3) or tid), int(m.group(4)), int(m.group(5)),
                      float(m.group(6)))
parent = {t[1]: t[2] for tid, t in tasks.items() if tid == t[1]}
comm = {tid: t[0] for tid, t in tasks.items()}
# the job: what the timeout started by perf started (perf's child)
roots = [tid for tid, t in tasks.items() if t[0] == "timeout" and tid == t[1]
         and comm.get(t[2]) == "perf"]
if not roots:
    sys.exit("cost-threads: the job's first process is not in the recording")
args = {}
for line in open(d + "/procs.txt"):
    p = line.split(None, 1)
    if len(p) == 2:
        args.setdefault(int(p[0]), p[1].strip())
def in_job(pid):
    for _ in range(64):
        if pid in roots:
            return True
        pid = parent.get(pid)
        if not pid:
            return False
    return False
def role(pid):
    exe = os.path.basename(args.get(pid, "").split(" ")[0])
    if exe == "shadow-ps":
        m = re.search(r"--role (\w+)", args[pid])
        return "ps-" + (m.group(1) if m else "?")
    if exe in ("shadow-trainer", "shadow-ctl", "shadow-super"):
        return exe
    return "launcher and tools"
def kind(name, tid, pid):
    if name.startswith("ZMQbg/IO"):
        return "zmq-io"
    if name.startswith("ZMQbg/Reaper"):
        return "zmq-reaper"
    if tid == pid:
        return "main"
    k = re.sub(r"-\d+$", "", name)
    return k if k in ("worker", "shadow", "zap", "admin", "eval", "metrics") else "unnamed"
agg = collections.defaultdict(lambda: [0.0, 0, 0])
for tid, (name, pid, _, n_in, ms) in tasks.items():
    if in_job(pid):
        a = agg[(role(pid), kind(name, tid, pid))]
        a[0] += ms; a[1] += n_in; a[2] += 1
print("%-20s %-10s %7s %10s %9s" % ("role", "thread", "threads", "cpu_ms", "switches"))
for (r, k), a in sorted(agg.items(), key=lambda x: -x[1][0]):
    print("%-20s %-10s %7d %10.1f %9d" % (r, k, a[2], a[0], a[1]))
print("%-20s %-10s %7s %10.1f %9d" % ("total", "", "", sum(a[0] for a in agg.values()),
                                      sum(a[1] for a in agg.values())))
PY
