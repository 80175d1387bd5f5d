"""Small compiled steps of the ranker's link columns (docs/architecture.md §5, "Ranker
features inside C_q"): membership in a short id list and a chunk's best name-group weight,
one pass each instead of NumPy calls over broadcast or scattered temporaries."""
from __future__ import annotations

import numpy as np

from ._config import jit


@jit
def member_of(a, b):
    """``np.isin(a, b)`` for a short ``b``: every pair compared, no sort."""
    out = np.zeros(a.shape[0], dtype=np.bool_)
    for i in range(a.shape[0]):
        x = a[i]
        for j in range(b.shape[0]):
            if b[j] == x:
                out[i] = True
                break
    return out


@jit
def group_best(chunk_ptr, chunk_nodes, node_group, chunks, groups, weights):
    """Per chunk of ``chunks``: the largest ``weights[k]`` over its nodes' name groups
    found in the ascending, distinct ``groups``, and 0 (the start value of each row) when
    none is or all are below it."""
    top = np.zeros(chunks.shape[0])
    m = groups.shape[0]
    if m == 0:
        return top
    for i in range(chunks.shape[0]):
        c = chunks[i]
        for p in range(chunk_ptr[c], chunk_ptr[c + 1]):
            x = node_group[chunk_nodes[p]]
            lo, hi = 0, m
            while lo < hi:
                mid = (lo + hi) >> 1
                if groups[mid] < x:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < m and groups[lo] == x and weights[lo] > top[i]:
                top[i] = weights[lo]
    return top
