#!/usr/bin/env python3
# Where a job's CPU went, from `perf script -F pid,tid,comm,ip,sym,dso` of a
# job recorded with `perf record -e cpu-clock -g` (bench/job-profile.sh):
# each sample goes to its thread's role (by the thread's name and its
# process's), and a worker's or an eval thread's sample to a part by its
# leaf function. Prints one JSON line: us of CPU per trained example by
# role, then by part for the workers and for the eval threads.
#   job-parts.py EXAMPLES HZ < perf-script-output
import json
import re
import sys

# leaf symbol (or library) -> part, first match wins
PARTS = [
    ("split", r"tr_split|ss_hash_bytes|s_verdict"),
    ("read", r"tr_reader_read|^read$|__libc_read|_copy_to_iter|filemap_|copy_page_to_iter"),
    ("parse", r"s_criteo|s_vec_scan|tr_parse|__memchr|tr_rows_add|__ieee754_log_fma|strto"),
    ("dedup", r"tr_dedup"),
    ("merge", r"s_merge"),
    ("pool", r"s_pool|s_copy512|tr_bag_pool|tr_bag_rows|tr_client_lookup_rows"),
    ("spread", r"s_spread|s_axpy"),
    ("interact_fwd", r"s_interact_fwd"),
    ("interact_bwd", r"s_interact_bwd"),
    ("bf16", r"s_to_bf16|s_bf16"),
    ("update", r"tr_hogwild|s_adagrad512"),
    ("products", r"^\[unknown\] \(/tmp/perf-|libdnnl|libopenblas|tr_gemm|sgemm|brgemm|dnnl"),
    ("model_own", r"s_bias|s_relu|s_colsum|s_forward|tr_model|s_first|__log1p|__ieee754_exp"),
    ("client", r"tr_client|s_value_rows|s_row_of|s_slot_release|s_await|s_wait|s_send|"
               r"s_recv|s_io|ss_conn|ss_msg|libzmq|protobuf|zmq_|pthread_|futex|s_release|"
               r"s_contribute"),
    ("alloc", r"jemalloc|malloc|free|operator new"),
    ("copies", r"__memmove|__memset|memcpy"),
    ("kernel", r"\[kernel\.kallsyms\]"),
]
PARTS_RE = [(n, re.compile(p)) for n, p in PARTS]


def role(comm, main_comm):
    if main_comm == "shadow-ps":
        return "ps"
    if main_comm != "shadow-trainer":
        return "rest"
    for pre, r in (("worker-", "workers"), ("eval-", "eval"), ("ZMQbg/IO", "zmq_io"),
                   ("shadow", "shadow"), ("zap", "zap"), ("admin", "admin")):
        if comm.startswith(pre) and (pre != "shadow" or comm == "shadow"):
            return r
    if comm == "shadow-trainer":
        return "main_or_pool"
    return "trainer_other"


def part(leaf):
    if leaf.startswith("kernel:"):
        return leaf
    for n, r in PARTS_RE:
        if r.search(leaf):
            return n
    return "other"


def main():
    examples, hz = float(sys.argv[1]), float(sys.argv[2])
    per = 1e6 / hz / examples  # us per example of one sample
    samples = []  # (pid, tid, comm, leaf); a kernel leaf: "kernel:" + its user frame's part
    head, leaf = None, None

    def done():
        if head:
            samples.append(head + (leaf or "?",))

    for line in sys.stdin:
        if not line.strip():
            done()
            head, leaf = None, None
            continue
        if not line.startswith((" ", "\t")):
            m = re.match(r"\s*(\S.*?)\s+(\d+)/(\d+)\s*$", line.rstrip())
            if m:
                head = (int(m.group(2)), int(m.group(3)), m.group(1))
            continue
        if not head:
            continue
        fr = line.strip().split(None, 1)[1] if len(line.split()) > 1 else "?"
        if leaf is None:
            leaf = fr
        elif leaf.endswith("([kernel.kallsyms])") and "kallsyms" not in fr:
            leaf = "kernel:" + part(fr)
    done()
    mains = {}
    for pid, tid, comm, _ in samples:
        if pid == tid:
            mains[pid] = comm
    roles, wparts, eparts, tids, others = {}, {}, {}, {}, {}
    for pid, tid, comm, lf in samples:
        r = role(comm, mains.get(pid, ""))
        roles[r] = roles.get(r, 0) + per
        if r == "main_or_pool":
            k = "main" if pid == tid else "pool"
            roles.pop(r)
            roles[k] = roles.get(k, 0) + per
        if r in ("workers", "eval"):
            d = wparts if r == "workers" else eparts
            p = part(lf)
            d[p] = d.get(p, 0) + per
            if r == "workers" and p == "other":
                others[lf] = others.get(lf, 0) + per
        tids.setdefault(r, set()).add(tid)
    rnd = lambda d: {k: round(v, 4) for k, v in sorted(d.items(), key=lambda x: -x[1])}
    print(json.dumps({"us_per_example": rnd(roles), "total": round(sum(roles.values()), 4),
                      "workers": rnd(wparts), "eval": rnd(eparts),
                      "threads": {k: len(v) for k, v in tids.items()},
                      "workers_other_top": dict(list(rnd(others).items())[:8])}))


main()
