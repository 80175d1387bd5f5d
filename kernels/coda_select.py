"""CODA's question-term coverage selection (``cover_weight``, coda/retrieve.py module
docstring; docs/architecture.md §7) as one compiled greedy over candidate positions."""
from __future__ import annotations

import numpy as np

from ._config import dot_jit, jit


@dot_jit
def _cos(V, a, b):
    """<V[a], V[b]> in float32 (sums reassociated, as kernels/dense.py's dots)."""
    s = np.float32(0.0)
    for t in range(V.shape[1]):
        s += V[a, t] * V[b, t]
    return s


@jit
def cover_greedy(held, w, score, ids, lam, top_k, V, limit):
    """Positions chosen one at a time by ``score + lam * (sum of w[t] over the terms t
    the candidate holds that no chosen one holds)`` (ties by lower id), skipping a
    candidate whose cosine (rows ``ids`` of ``V``) with a chosen one exceeds ``limit``
    (when > 0); up to ``top_k``. ``held``: (n, terms) bool, C-order."""
    n, T = held.shape
    covered = np.zeros(T, dtype=np.bool_)
    free = np.ones(n, dtype=np.bool_)
    val = np.empty(n)
    chosen = np.empty(max(min(top_k, n), 0), dtype=np.int64)
    c = 0
    while c < chosen.shape[0]:
        left = False
        for i in range(n):
            if free[i]:
                g = 0.0
                for t in range(T):
                    if held[i, t] and not covered[t]:
                        g += w[t]
                val[i] = score[i] + lam * g
                left = True
        if not left:
            break
        while True:  # the free candidates best first, until one is not a near-duplicate
            j = -1
            for i in range(n):
                if free[i] and (j < 0 or val[i] > val[j] or (val[i] == val[j] and ids[i] < ids[j])):
                    j = i
            if j < 0:
                break
            free[j] = False
            ok = True
            if limit > 0:
                for a in range(c):
                    if _cos(V, ids[j], ids[chosen[a]]) > limit:
                        ok = False
                        break
            if ok:
                chosen[c] = j
                c += 1
                for t in range(T):
                    if held[j, t]:
                        covered[t] = True
                break
    return chosen[:c].copy()
