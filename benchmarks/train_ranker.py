"""The calibrated final ranking (``HybridOptions.rank_weights``): a logistic regression
over the per-chunk features of ``methods.stitch.FEATURES`` (docs/architecture.md §5).

Used by ``quality_search.py``: :func:`collect` runs ``stitch`` with ``detail`` on one
family's questions and keeps every C_q chunk's features with its label (gold or not);
:func:`fit` trains on the chosen families (each family weighs the same, each question
the same within it) and returns ``(bias, *weights)`` for the raw features, the
standardisation folded in, so a query pays one dot product.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from hyperrag_fast.config import QueryOptions
from hyperrag_fast.methods import METHODS


def collect(bench, o: QueryOptions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X, y, question index) over every C_q chunk of every question of ``bench``."""
    o = replace(o, hybrid=replace(o.hybrid, rank_weights=()))
    fn, state, passages = METHODS[o.method], bench.r.state, bench.ds.passages
    xs, ys, qs = [], [], []
    for i, (v, q, gold) in enumerate(zip(bench.qvecs, bench.ds.questions, bench.golds)):
        out = fn(state, v, q.question, o, True)
        cq, X = np.asarray(out.detail["cq"]), out.detail["features"]
        xs.append(X)
        ys.append(np.array([passages[int(c)] in gold for c in cq], dtype=np.float64))
        qs.append(np.full(cq.shape[0], i))
    return np.concatenate(xs), np.concatenate(ys), np.concatenate(qs)


def fit(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], c: float = 1.0) -> tuple[float, ...]:
    """Weights (bias, *w) of a logistic regression on ``parts`` (one per family)."""
    from sklearn.linear_model import LogisticRegression
    X = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    sw = []
    for X_, y_, q_ in parts:  # each family 1, each question 1 within it, positives balanced
        n_q = len(np.unique(q_))
        per_q = np.bincount(q_.astype(np.int64))[q_.astype(np.int64)]
        w = 1.0 / (n_q * per_q)
        pos = y_ > 0
        w = np.where(pos, w * (w[~pos].sum() / max(w[pos].sum(), 1e-12)), w)
        sw.append(w)
    sw = np.concatenate(sw)
    sw = sw / sw.mean()
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    m = LogisticRegression(C=c, max_iter=2000).fit((X - mu) / sd, y, sample_weight=sw)
    w = m.coef_[0] / sd
    b = float(m.intercept_[0] - (w * mu).sum())
    return tuple(round(float(x), 6) for x in (b, *w))
