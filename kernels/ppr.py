"""Personalized PageRank on a small CSR graph: pi = (1 - d) p + d P pi (STITCH-RAG §3.3).

The graph is given by out-neighbour rows ``(ptr, nbr, w)`` and row sums ``wsum``;
P[j, i] = w_ij / wsum[i] (column-normalised), and a node with ``wsum == 0`` keeps its
mass (self-loop, P[i, i] = 1), so P is column-stochastic.
"""
from __future__ import annotations

import numpy as np

from ._config import jit


@jit
def ppr_power(ptr, nbr, w, wsum, p, d, tol, max_iter):
    """Power iteration from pi0 = p until max |pi_t - pi_{t-1}| < tol (the paper's rule).

    Returns (pi, iterations). pi stays non-negative and sums to 1 up to rounding.
    """
    m = p.shape[0]
    x = p.copy()
    new = np.empty(m, dtype=np.float64)
    it = 0
    while it < max_iter:
        it += 1
        for i in range(m):
            new[i] = (1.0 - d) * p[i]
        for i in range(m):
            if wsum[i] == 0.0:
                new[i] += d * x[i]
            else:
                f = d * x[i] / wsum[i]
                for k in range(ptr[i], ptr[i + 1]):
                    new[nbr[k]] += f * w[k]
        diff = 0.0
        for i in range(m):
            dlt = abs(new[i] - x[i])
            if dlt > diff:
                diff = dlt
            x[i] = new[i]
        if diff < tol:
            break
    return x, it


@jit
def ppr_push(ptr, nbr, w, wsum, p, d, tol):
    """Forward push (Andersen-Chung-Lang style) from the residual r = p.

    Invariant: pi = x + (1 - d)(I - dP)^{-1} r with x, r >= 0. Nodes are pushed while
    r_i > tol / m, so at the end ||r||_1 <= tol and, because P is column-stochastic,
    **0 <= pi_i - x_i for every i and sum_i (pi_i - x_i) = ||r||_1 <= tol**: each score
    is low by at most the returned residual. Top-k by x therefore equals top-k by pi
    whenever the k-th and (k+1)-th exact scores differ by more than that residual.
    A dangling node absorbs its residual at once (its self-loop keeps all mass).
    Returns (x, ||r||_1, pushes).
    """
    m = p.shape[0]
    x = np.zeros(m, dtype=np.float64)
    r = p.copy()
    if m == 0:
        return x, 0.0, 0
    thr = tol / m
    queue = np.empty(m, dtype=np.int64)
    inq = np.zeros(m, dtype=np.bool_)
    head = 0
    size = 0
    for i in range(m):
        if r[i] > thr:
            queue[(head + size) % m] = i
            size += 1
            inq[i] = True
    pushes = 0
    while size > 0:
        i = queue[head]
        head = (head + 1) % m
        size -= 1
        inq[i] = False
        ri = r[i]
        if ri <= thr:
            continue
        r[i] = 0.0
        pushes += 1
        if wsum[i] == 0.0:
            x[i] += ri
            continue
        x[i] += (1.0 - d) * ri
        f = d * ri / wsum[i]
        for k in range(ptr[i], ptr[i + 1]):
            j = nbr[k]
            r[j] += f * w[k]
            if not inq[j] and r[j] > thr:
                queue[(head + size) % m] = j
                size += 1
                inq[j] = True
    res = 0.0
    for i in range(m):
        res += r[i]
    return x, res, pushes


@jit
def topk_desc(scores, k):
    """Indices of the k largest scores, ties broken by lower index (stable sort)."""
    order = np.argsort(-scores, kind="mergesort")
    return order[: min(k, scores.shape[0])]
