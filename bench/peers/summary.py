#!/usr/bin/env python3
"""summary.py - mean and std over seeds of the quality bench's runs.

Reads the run lines of bench/quality.sh (JSON, one per run, with dataset,
system, seed, eval_ne, eval_auc, eps, ...), prints one JSON summary line per
(dataset, system) -- mean and sample std of eval_ne, eval_auc and eps over the
seeds, the median, min, max and spread (max - min) of eval_ne, and on
ShadowSync's lines the eps ratio ShadowSync / PyTorch DLRM -- writes a table
for gnuplot (--plot-data): one row per dataset, the mean and std of eval NE
of each system, then the Bayes-optimal NE (NaN if unknown); and a Markdown
table of every system (--table): median eval NE, spread, mean +- std, the
single runs, and the bars of issue 24 on the default job's lines.
"""
import argparse
import json
import math
import statistics

OURS, TORCH, LOGREG = "shadowsync", "pytorch-dlrm", "logreg-sklearn"
SYSTEMS = [OURS, TORCH, LOGREG]
SPREAD_BAR = 0.01  # issue 24: max - min of eval NE over the seeds


def mean_std(xs):
    """Mean and sample standard deviation (0 for a single value)."""
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def bars(ds, summary, name=OURS):
    """Issue 24's bars for our job name on data set ds, as text."""
    ours = summary.get((ds, name))
    if not ours:
        return ""
    med = ours["eval_ne_median"]
    need = [LOGREG] if ds == "criteo" else [TORCH, LOGREG]
    run = [n for n in need if (ds, n) in summary]
    beat = "yes" if all(med < summary[ds, n]["eval_ne_median"] for n in run) else "NO"
    if not run:  # nothing to compare with: say so rather than "yes"
        beat = "unknown"
    if len(run) < len(need):
        beat += " (not run: %s)" % ", ".join(n for n in need if n not in run)
    return "median %.4f below %s: %s; spread %.4f %s %.2f" % (
        med, " and ".join(need), beat,
        ours["eval_ne_spread"], "<=" if ours["eval_ne_spread"] <= SPREAD_BAR else ">",
        SPREAD_BAR)


def write_table(path, summary):
    """One Markdown table: every (data set, system), medians and spreads."""
    with open(path, "w") as f:
        f.write("| data | system | median eval NE | spread (max - min) | mean +- std | "
                "runs (by seed) |\n|---|---|---|---|---|---|\n")
        for (ds, n), s in summary.items():
            f.write("| %s | %s | %.4f | %.4f | %.4f +- %.4f | %s |\n" % (
                ds, n, s["eval_ne_median"], s["eval_ne_spread"], s["eval_ne_mean"],
                s["eval_ne_std"], ", ".join("%.4f" % x for x in s["eval_ne_runs"])))
        for ds in dict.fromkeys(d for d, _ in summary):
            for name in (OURS, OURS + "-refit"):
                line = bars(ds, summary, name)
                if line:
                    f.write("\n%s, %s: %s\n" % (ds, name, line))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", help="file of JSON run lines (other lines are ignored)")
    p.add_argument("--bayes", action="append", default=[], metavar="DATASET=NE",
                   help="Bayes-optimal eval NE of a data set (repeatable)")
    p.add_argument("--plot-data", help="write the gnuplot table here")
    p.add_argument("--table", help="write the Markdown table of every system here")
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
        ne = sorted(float(r["eval_ne"]) for r in runs)
        s["eval_ne_median"] = round(statistics.median(ne), 6)
        s["eval_ne_min"], s["eval_ne_max"] = round(ne[0], 6), round(ne[-1], 6)
        s["eval_ne_spread"] = round(ne[-1] - ne[0], 6)
        s["eval_ne_runs"] = [round(float(r["eval_ne"]), 4) for r in runs]
        if ds in bayes:
            s["bayes_ne"] = bayes[ds]
        summary[ds, sysname] = s
    for (ds, sysname), s in summary.items():
        if sysname == OURS and (ds, TORCH) in summary:
            t = summary[ds, TORCH]["eps_mean"]
            s["eps_ratio_ours_over_pytorch"] = round(s["eps_mean"] / t, 3) if t else None
        print(json.dumps(s))

    if args.table:
        write_table(args.table, summary)

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
