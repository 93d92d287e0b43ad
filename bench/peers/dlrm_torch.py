#!/usr/bin/env python3
"""dlrm_torch.py - a plain PyTorch DLRM, the peer of ShadowSync's default model.

Same shape as conf/local.yaml: bottom MLP 13 -> 64 -> 16 (ReLU after each
layer), one 16-dim embedding per categorical field (26), the pairwise dot
products of the 27 vectors (bottom output + 26 embeddings) concatenated with
the bottom output, top MLP -> 64 (ReLU) -> 1, sigmoid + binary cross-entropy.

Training: dense parameters by SGD, embeddings by sparse Adagrad, both lr 0.1
by default; Hogwild: --procs processes (torch.multiprocessing, fork) share the
parameters and the Adagrad state, one torch thread each, and take turns over
the batches in file order (batch i goes to process i % procs), so the data
are seen in their (chronological) order. Each field has an exact vocabulary
built from the training rows; a value never seen in training (or seen fewer
than --min-count times) shares the field's row 0.

Learning rates: with --grid-lr and --grid-emb-lr (lists), every pair is
trained on the training rows less a validation split (--valid-fraction of
them, chosen by a hash of each line's fields: the same rows in every run) and
scored there; the pair with the lowest validation logloss is then trained
on all training rows. The eval file is never read to choose.

Prints one JSON line: peer, seed, eval_ne, eval_auc, eval_logloss,
eval_calibration, examples, train_s, eps (= training examples / training
wall seconds, file parsing not counted), train_cpu_s (user + system CPU of
the training processes) and examples_per_cpu_s, comparable with the figure
bench/throughput-bench.sh gives for our whole job.
"""
import os
import resource
import sys
import time
from collections import Counter

import numpy as np
import torch
import torch.multiprocessing as mp
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ctrdata  # noqa: E402


def build_vocab(train_cats, min_count):
    """Per field, a dict value -> row (1..); row 0 is unseen/rare."""
    vocabs = []
    for col in train_cats:
        counts = Counter(col)
        keep = sorted(v for v, c in counts.items() if c >= min_count)
        vocabs.append({v: i + 1 for i, v in enumerate(keep)})
    return vocabs


def encode(cats, vocabs, offsets):
    """Global embedding rows [n, 26] (int64) of the categorical values."""
    cols = [np.fromiter((v.get(x, 0) for x in col), np.int64, len(col)) + off
            for col, v, off in zip(cats, vocabs, offsets)]
    return np.stack(cols, axis=1)


class DLRM(nn.Module):
    def __init__(self, n_rows, dim=16, bottom=(64, 16), top=(64, 1), init_scale=0.05):
        super().__init__()
        # all 26 tables in one (field offsets are added to the row ids)
        self.emb = nn.Embedding(n_rows, dim, sparse=True)
        nn.init.uniform_(self.emb.weight, -init_scale, init_scale)
        layers, n_in = [], ctrdata.N_DENSE
        for w in bottom:  # ReLU after every bottom layer
            layers += [nn.Linear(n_in, w), nn.ReLU()]
            n_in = w
        self.bottom = nn.Sequential(*layers)
        n_vec = 1 + ctrdata.N_CAT
        li, lj = torch.tril_indices(n_vec, n_vec, offset=-1)  # every pair i > j
        self.register_buffer("li", li)
        self.register_buffer("lj", lj)
        layers, n_in = [], dim + li.numel()
        for k, w in enumerate(top):  # ReLU after every top layer but the last
            layers.append(nn.Linear(n_in, w))
            if k + 1 < len(top):
                layers.append(nn.ReLU())
            n_in = w
        self.top = nn.Sequential(*layers)

    def forward(self, dense, rows):
        h = self.bottom(dense)                               # [B, dim]
        z = torch.cat([h.unsqueeze(1), self.emb(rows)], 1)   # [B, 27, dim]
        dots = torch.bmm(z, z.transpose(1, 2))[:, self.li, self.lj]  # [B, 351]
        return self.top(torch.cat([h, dots], 1)).squeeze(1)  # logits [B]


def worker(rank, args, model, opts, data):
    """One Hogwild process: its share of the batches, in file order."""
    torch.set_num_threads(1)
    torch.manual_seed(args.seed * 1000 + rank)
    labels, dense, rows = data
    n, b = len(labels), args.batch
    loss_fn = nn.BCEWithLogitsLoss()
    for _ in range(args.epochs):
        for k, start in enumerate(range(0, n, b)):
            if k % args.procs != rank:
                continue
            sl = slice(start, start + b)
            loss = loss_fn(model(dense[sl], rows[sl]), labels[sl])
            for o in opts:
                o.zero_grad(set_to_none=True)
            loss.backward()
            for o in opts:
                o.step()


def train(args, tdata, n_rows, lr, emb_lr):
    """A fresh model trained on tdata (Hogwild, args.procs processes);
    returns (model, train seconds, CPU seconds of the processes)."""
    torch.manual_seed(args.seed)
    model = DLRM(n_rows)
    model.share_memory()
    dense_params = [q for name, q in model.named_parameters() if not name.startswith("emb.")]
    opts = [torch.optim.SGD(dense_params, lr=lr),
            torch.optim.Adagrad([model.emb.weight], lr=emb_lr)]
    opts[1].share_memory()  # the Adagrad accumulators are shared too (Hogwild)
    ctx = mp.get_context("fork")  # children inherit model, optimizers and data
    t0 = time.perf_counter()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    procs = [ctx.Process(target=worker, args=(r, args, model, opts, tdata))
             for r in range(args.procs)]
    for q in procs:
        q.start()
    for q in procs:
        q.join()
    train_s = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the joined (waited) processes
    cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    if any(q.exitcode != 0 for q in procs):
        sys.exit("dlrm_torch: a training process failed")
    return model, train_s, cpu_s


def choose_lr(args, tr, vocab_of):
    """(lr, emb_lr) of the grid with the lowest logloss on a validation split
    of the training rows (the eval file is not read), and the grid's scores."""
    grid = [(float(a), float(b)) for a in args.grid_lr.split(",")
            for b in args.grid_emb_lr.split(",")]
    if len(grid) == 1:
        return grid[0], {}
    is_valid = ctrdata.valid_mask(tr, args.valid_fraction)
    fit_rows, val_rows = tr.subset(~is_valid), tr.subset(is_valid)
    vocabs, sizes, offsets = vocab_of(fit_rows)
    fdata = (torch.from_numpy(fit_rows.labels), torch.from_numpy(fit_rows.dense),
             torch.from_numpy(encode(fit_rows.cats, vocabs, offsets)))
    v_dense = torch.from_numpy(val_rows.dense)
    v_rows = torch.from_numpy(encode(val_rows.cats, vocabs, offsets))
    scores = {}
    for lr, emb_lr in grid:
        model, _, _ = train(args, fdata, int(sum(sizes)), lr, emb_lr)
        scores[lr, emb_lr] = ctrdata.metrics(val_rows.labels,
                                             predict(model, v_dense, v_rows))["eval_logloss"]
    best = min(grid, key=lambda g: scores[g])
    return best, {"%g/%g" % g: round(v, 5) for g, v in scores.items()}


def predict(model, dense, rows, batch=8192):
    with torch.no_grad():
        return torch.cat([torch.sigmoid(model(dense[i:i + batch], rows[i:i + batch]))
                          for i in range(0, len(dense), batch)]).numpy()


def main():
    p = ctrdata.common_args(__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=1, help="passes over the training rows (1)")
    p.add_argument("--batch", type=int, default=128, help="examples per batch (128)")
    p.add_argument("--procs", type=int, default=2, help="Hogwild processes (2)")
    p.add_argument("--lr", type=float, default=0.1, help="dense SGD learning rate (0.1)")
    p.add_argument("--emb-lr", type=float, default=0.1, help="embedding Adagrad learning rate (0.1)")
    p.add_argument("--grid-lr", default=None,
                   help="dense learning rates to choose from on the validation split "
                        "(comma-separated; default: --lr only)")
    p.add_argument("--grid-emb-lr", default=None,
                   help="embedding learning rates to choose from (default: --emb-lr only)")
    p.add_argument("--valid-fraction", type=float, default=0.1,
                   help="share of the training rows the grid is scored on (0.1)")
    p.add_argument("--min-count", type=int, default=1,
                   help="values seen fewer times in training share row 0 (1: none do)")
    args = p.parse_args()
    args.grid_lr = args.grid_lr or repr(args.lr)
    args.grid_emb_lr = args.grid_emb_lr or repr(args.emb_lr)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.set_num_threads(1)

    tr = ctrdata.read_criteo(args.train, args.train_rows)
    ev = ctrdata.read_criteo(args.eval, args.eval_rows, last=True)

    def vocab_of(rows):
        vocabs = build_vocab(rows.cats, args.min_count)
        sizes = [len(v) + 1 for v in vocabs]
        return vocabs, sizes, np.concatenate([[0], np.cumsum(sizes)[:-1]])

    t0 = time.perf_counter()
    (lr, emb_lr), grid_scores = choose_lr(args, tr, vocab_of)
    grid_s = time.perf_counter() - t0
    vocabs, sizes, offsets = vocab_of(tr)
    tdata = (torch.from_numpy(tr.labels), torch.from_numpy(tr.dense),
             torch.from_numpy(encode(tr.cats, vocabs, offsets)))
    e_dense = torch.from_numpy(ev.dense)
    e_rows = torch.from_numpy(encode(ev.cats, vocabs, offsets))
    model, train_s, cpu_s = train(args, tdata, int(sum(sizes)), lr, emb_lr)

    m = ctrdata.metrics(ev.labels, predict(model, e_dense, e_rows))
    examples = len(tr) * args.epochs
    ctrdata.emit("pytorch-dlrm", args.seed, m, examples, train_s, train_cpu_s=round(cpu_s, 3),
                 examples_per_cpu_s=round(examples / cpu_s, 1) if cpu_s > 0 else None,
                 lr=lr, emb_lr=emb_lr, grid_s=round(grid_s, 3), grid_valid_logloss=grid_scores)


if __name__ == "__main__":
    main()
