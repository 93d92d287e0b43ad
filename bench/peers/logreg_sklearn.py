#!/usr/bin/env python3
"""logreg_sklearn.py - hashed logistic regression, the linear peer.

Features: the 26 categorical values as "field=value" tokens hashed by
sklearn's FeatureHasher into 2^20 columns (an empty value is a token of its
own), plus the 13 dense values log(1 + max(v, 0)) (missing = 0), scaled by
their largest value in the training rows. Model: sklearn LogisticRegression
(L2, liblinear dual solver). Its inverse regularization strength C is chosen from a small
grid by 3-fold cross-validation (mean logloss) on the training rows only,
then the model is fitted on all training rows with that C.

Prints one JSON line: peer, seed, eval_ne, eval_auc, eval_logloss,
eval_calibration, examples, train_s, eps (= training examples / seconds of
the final fit; the cross-validation is reported apart as cv_s), C.
"""
import os
import sys
import time

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction import FeatureHasher
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ctrdata  # noqa: E402


def features(rows, hasher, scale):
    """Sparse design matrix: hashed categorical tokens, then scaled dense values."""
    tokens = (["C%d=%s" % (j + 1, v) for j, v in enumerate(vals)] for vals in zip(*rows.cats))
    return sp.hstack([hasher.transform(tokens), sp.csr_matrix(rows.dense / scale)]).tocsr()


def fit(X, y, C, max_iter):
    # liblinear's dual coordinate descent: the same optimum as lbfgs here (more
    # columns than rows) in a tenth of the time
    return LogisticRegression(C=C, solver="liblinear", dual=True, max_iter=max_iter,
                              tol=1e-4).fit(X, y)


def main():
    p = ctrdata.common_args(__doc__.split("\n\n")[0])
    p.add_argument("--bits", type=int, default=20, help="hash into 2^BITS columns (20)")
    p.add_argument("--grid", default="0.01,0.03,0.1,0.3,1",
                   help="values of C tried by the cross-validation (0.01,0.03,0.1,0.3,1)")
    p.add_argument("--folds", type=int, default=3, help="cross-validation folds (3)")
    p.add_argument("--max-iter", type=int, default=300, help="solver iterations at most (300)")
    args = p.parse_args()

    tr = ctrdata.read_criteo(args.train, args.train_rows)
    ev = ctrdata.read_criteo(args.eval, args.eval_rows, last=True)
    hasher = FeatureHasher(n_features=2 ** args.bits, input_type="string")
    scale = np.maximum(tr.dense.max(axis=0), 1.0)  # from the training rows only
    X, y = features(tr, hasher, scale), tr.labels
    Xe = features(ev, hasher, scale)
    # Drop the columns no training row uses: with an L2 penalty their weights
    # are exactly 0, so the model is the same, and the solver runs much faster.
    used = np.unique(X.indices)
    X, Xe = X[:, used], Xe[:, used]

    # choose C on the training rows only: mean held-out logloss over the folds
    t0 = time.perf_counter()
    grid = [float(c) for c in args.grid.split(",")]
    folds = list(StratifiedKFold(args.folds, shuffle=True, random_state=args.seed).split(X, y))
    cv = {}
    for C in grid:
        cv[C] = np.mean([log_loss(y[te], fit(X[tr_i], y[tr_i], C, args.max_iter)
                                  .predict_proba(X[te])[:, 1], labels=[0, 1])
                         for tr_i, te in folds])
    best = min(grid, key=cv.get)
    cv_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    model = fit(X, y, best, args.max_iter)
    train_s = time.perf_counter() - t0

    m = ctrdata.metrics(ev.labels, model.predict_proba(Xe)[:, 1])
    ctrdata.emit("logreg-sklearn", args.seed, m, len(tr), train_s, C=best,
                 cv_s=round(cv_s, 3), cv_logloss={str(c): round(v, 5) for c, v in cv.items()})


if __name__ == "__main__":
    main()
