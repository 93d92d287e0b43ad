#!/usr/bin/env python3
"""summary.py - mean and std over seeds of the quality bench's runs.

Reads the run lines of bench/quality.sh (JSON, one per run, with dataset,
system, seed, eval_ne, eval_auc, eps, ...), prints one JSON summary line per
(dataset, system) -- mean and sample std of eval_ne, eval_auc and eps over the
seeds, and on ShadowSync's lines the eps ratio ShadowSync / PyTorch DLRM --
and writes a table for gnuplot (--plot-data): one row per dataset, the mean
and std of eval NE of each system, then the Bayes-optimal NE (NaN if unknown).
"""
import argparse
import json
import math
import statistics

OURS, TORCH = "shadowsync", "pytorch-dlrm"
SYSTEMS = [OURS, TORCH, "logreg-sklearn"]


def mean_std(xs):
    """Mean and sample standard deviation (0 for a single value)."""
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", help="file of JSON run lines (other lines are ignored)")
    p.add_argument("--bayes", action="append", default=[], metavar="DATASET=NE",
                   help="Bayes-optimal eval NE of a data set (repeatable)")
    p.add_argument("--plot-data", help="write the gnuplot table here")
    args = p.parse_args()
    bayes = {k: float(v) for k, v in (b.split("=", 1) for b in args.bayes)}

    groups = {}  # (dataset, system) -> run lines, in the order first seen
    with open(args.runs) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "system" in r and "eval_ne" in r and "summary" not in r:
                groups.setdefault((r["dataset"], r["system"]), []).append(r)

    summary = {}
    for (ds, sysname), runs in groups.items():
        s = {"summary": True, "dataset": ds, "system": sysname, "seeds": len(runs)}
        for key in ("eval_ne", "eval_auc", "eps"):
            m, sd = mean_std([float(r[key]) for r in runs])
            s[key + "_mean"], s[key + "_std"] = round(m, 6), round(sd, 6)
        if ds in bayes:
            s["bayes_ne"] = bayes[ds]
        summary[ds, sysname] = s
    for (ds, sysname), s in summary.items():
        if sysname == OURS and (ds, TORCH) in summary:
            t = summary[ds, TORCH]["eps_mean"]
            s["eps_ratio_ours_over_pytorch"] = round(s["eps_mean"] / t, 3) if t else None
        print(json.dumps(s))

    if args.plot_data:
        with open(args.plot_data, "w") as f:
            f.write("# dataset " + " ".join("%s_mean %s_std" % (n, n) for n in SYSTEMS)
                    + " bayes_ne\n")
            for ds in dict.fromkeys(d for d, _ in summary):
                cols = []
                for n in SYSTEMS:
                    s = summary.get((ds, n))
                    cols += [s["eval_ne_mean"], s["eval_ne_std"]] if s else [math.nan] * 2
                cols.append(bayes.get(ds, math.nan))
                f.write(ds + " " + " ".join("NaN" if math.isnan(c) else repr(c) for c in cols)
                        + "\n")


if __name__ == "__main__":
    main()
