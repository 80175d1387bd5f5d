"""The calibrated final ranking (``HybridOptions.rank_weights``, docs/architecture.md §5).

After the last STITCH round every chunk of C_q gets a small vector of per-query
normalised features (:data:`FEATURES`): its prior and PPR score as shares of the query's
best and as reciprocal ranks, its dense rank, its similarity, its STIBP projection score,
its BM25 and named-title terms. The final score is one dot product with weights learned
by a logistic regression on the dev families (``benchmarks/train_ranker.py``), so a
query whose graph adds nothing keeps the ordering its prior and dense ranks give.
"""
from __future__ import annotations

import numpy as np

#: feature names, in column order (the weights vector is [bias, *weights])
FEATURES = ("prior", "ppr", "ppr_rank", "prior_rank", "dense_rank", "sim_gap", "stibp",
            "bm25", "title")


def _recip_rank(v: np.ndarray) -> np.ndarray:
    """1 / (1 + rank) of each entry by descending value (stable: ties keep C_q order)."""
    order = np.argsort(-v, kind="stable")
    rr = np.empty(v.shape[0])
    rr[order] = 1.0 / (1.0 + np.arange(v.shape[0]))
    return rr


def _share(v: np.ndarray) -> np.ndarray:
    m = v.max() if v.size else 0.0
    return v / m if m > 0 else np.zeros_like(v, dtype=np.float64)


def _lookup(cq: np.ndarray, ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    """values[j] at the C_q rows holding ids[j] (the largest when an id repeats), else 0."""
    out = np.zeros(cq.shape[0])
    if ids.size:
        pos = {int(c): i for i, c in enumerate(cq.tolist())}
        for c, x in zip(ids.tolist(), np.asarray(values, np.float64).tolist()):
            i = pos.get(int(c))
            if i is not None and x > out[i]:
                out[i] = x
    return out


def rank_features(cq: np.ndarray, sim: np.ndarray, score: np.ndarray, prior: np.ndarray,
                  pi: np.ndarray, dense: np.ndarray, bm25: tuple[np.ndarray, np.ndarray],
                  title: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The (|C_q|, len(FEATURES)) feature matrix of one query: ``dense`` = the chunk
    candidates in similarity order; ``bm25`` = (ids, scores); ``title`` = (ids, shares)."""
    dense_rr = _lookup(cq, dense, 1.0 / (1.0 + np.arange(dense.shape[0])))
    b_ids, b_s = bm25
    bm = _lookup(cq, b_ids, _share(np.asarray(b_s, np.float64))) if b_ids.size else np.zeros(cq.shape[0])
    t_ids, t_s = title
    return np.column_stack([
        _share(prior), _share(pi), _recip_rank(pi), _recip_rank(prior), dense_rr,
        sim - (sim.max() if sim.size else 0.0), _share(np.log1p(np.maximum(score, 0.0))), bm,
        _lookup(cq, t_ids, t_s)])


def fused_top(cq: np.ndarray, X: np.ndarray, weights: tuple[float, ...],
              top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k C_q chunks by bias + X @ w (stable: ties keep C_q order)."""
    w = np.asarray(weights, np.float64)
    s = X @ w[1:] + w[0]
    order = np.argsort(-s, kind="stable")[:top_k]
    return cq[order].astype(np.int64), s[order]
