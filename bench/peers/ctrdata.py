"""ctrdata.py - Criteo TSV reading and quality metrics shared by the peers.

Reads the same features ShadowSync reads (DESIGN.md section 6):
  label <TAB> I1..I13 <TAB> C1..C26
  * dense value v -> log(1 + max(v, 0)); a missing value is 0;
  * a categorical value is kept as its string; an empty one is a value of
    its own (""); short lines (stripped trailing tabs) read as empty fields;
  * a line with a bad label or a bad integer is skipped and counted.
and scores predictions the way ShadowSync does: logloss with predictions
clipped to [1e-7, 1 - 1e-7], NE = logloss / entropy of the scored set's own
click rate, exact AUC (ties count one half), calibration = mean prediction
/ mean label.
"""
import argparse
import hashlib
import json
import math
import sys

import numpy as np

N_DENSE = 13
N_CAT = 26
CLIP = 1e-7  # as TR_EVAL_CLIP in trainer/tr_eval.h


class Rows:
    """Parsed rows: labels (float32 [n]), dense (float32 [n, 13]) and
    cats (list of 26 lists of strings, one per field)."""

    def __init__(self, labels, dense, cats, bad):
        self.labels, self.dense, self.cats, self.bad = labels, dense, cats, bad

    def __len__(self):
        return len(self.labels)

    def subset(self, mask):
        """The rows where mask (bool [n]) is true, as new Rows."""
        idx = np.flatnonzero(mask)
        return Rows(self.labels[idx], self.dense[idx],
                    [[col[i] for i in idx] for col in self.cats], 0)


def valid_mask(rows, fraction):
    """bool [n]: the rows of a validation split of about fraction of them,
    chosen by a hash of each row's fields (the same rows in every run and
    for every peer; independent of the seed and of the row order)."""
    out = np.zeros(len(rows), dtype=bool)
    limit = int(fraction * 2 ** 64)
    for i in range(len(rows)):
        text = "%g|%s|%s" % (rows.labels[i], ",".join("%.6g" % d for d in rows.dense[i]),
                             "\t".join(col[i] for col in rows.cats))
        h = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        out[i] = h < limit
    return out


def _take(lines, n, last):
    """The first n lines (or the last n when last), or all when n is None."""
    if n is None:
        return lines
    return lines[-n:] if last else lines[:n]


def read_criteo(path, rows=None, last=False):
    """Read a Criteo TSV file; rows=N keeps the first N lines (last=True: the
    last N lines). Bad lines are skipped and counted in Rows.bad."""
    with open(path, "r", encoding="ascii", errors="replace") as f:
        lines = _take(f.read().splitlines(), rows, last)
    labels, dense, cats, bad = [], [], [[] for _ in range(N_CAT)], 0
    width = 1 + N_DENSE + N_CAT
    for line in lines:
        f = line.split("\t")
        if len(f) > width or f[0] not in ("0", "1"):
            bad += 1
            continue
        f += [""] * (width - len(f))
        try:
            d = [math.log1p(max(int(v), 0)) if v else 0.0 for v in f[1:1 + N_DENSE]]
        except ValueError:
            bad += 1
            continue
        labels.append(float(f[0]))
        dense.append(d)
        for j in range(N_CAT):
            cats[j].append(f[1 + N_DENSE + j])
    if not labels:
        sys.exit("%s: no good example read" % path)
    return Rows(np.asarray(labels, np.float32),
                np.asarray(dense, np.float32).reshape(-1, N_DENSE), cats, bad)


def entropy(p):
    """Binary entropy (nats) of a click rate p; 0 at p = 0 or 1."""
    if p <= 0.0 or p >= 1.0:
        return 0.0
    return -(p * math.log(p) + (1.0 - p) * math.log1p(-p))


def auc(labels, preds):
    """Exact ROC AUC with ties counted one half (rank-sum formula)."""
    from scipy.stats import rankdata
    y = np.asarray(labels) > 0.5
    pos, neg = int(y.sum()), int((~y).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    r = rankdata(np.asarray(preds, np.float64))  # average ranks for ties
    return float((r[y].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def metrics(labels, preds):
    """logloss, NE, AUC and calibration of predictions (probabilities)."""
    y = np.asarray(labels, np.float64)
    q = np.clip(np.asarray(preds, np.float64), CLIP, 1.0 - CLIP)
    logloss = float(np.mean(-(y * np.log(q) + (1.0 - y) * np.log1p(-q))))
    rate = float(y.mean())
    h = entropy(rate)
    return {
        "eval_ne": logloss / h if h > 0 else float("nan"),
        "eval_auc": auc(y, q),
        "eval_logloss": logloss,
        "eval_calibration": float(np.mean(preds)) / rate if rate > 0 else float("nan"),
    }


def common_args(description):
    """The arguments every peer takes."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--train", required=True, help="training file, Criteo TSV")
    p.add_argument("--eval", required=True, help="evaluation file, Criteo TSV")
    p.add_argument("--train-rows", type=int, default=None,
                   help="use only the FIRST N rows of --train (default: all)")
    p.add_argument("--eval-rows", type=int, default=None,
                   help="use only the LAST N rows of --eval (default: all)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    return p


def emit(peer, seed, m, examples, train_s, **extra):
    """Print the one JSON result line."""
    out = {"peer": peer, "seed": seed}
    out.update({k: round(v, 6) for k, v in m.items()})
    out.update({"examples": int(examples), "train_s": round(train_s, 3),
                "eps": round(examples / train_s, 1) if train_s > 0 else None})
    out.update(extra)
    print(json.dumps(out), flush=True)
