"""FastRP node embeddings (Chen et al. 2019; CodaRAG §3.3 functional association).

Very sparse random projection R (built by the caller) propagated through the
row-normalised weighted adjacency S = D^-1 A: N_1 = S R, N_i = S N_{i-1}; each
N_i is optionally L2-normalised per row, and the embedding is sum_i a_i N_i.
A node with no neighbour (row sum 0) gets a zero row in every N_i.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from ._config import pjit


@pjit
def fastrp(ptr, nbr, w, proj, iter_weights, normalize):
    """FastRP over the CSR graph ``(ptr, nbr, w)`` (weights >= 0) and the n x d
    projection ``proj``; returns sum_i iter_weights[i] * N_i (float64, n x d)."""
    n = ptr.shape[0] - 1
    d = proj.shape[1]
    cur = np.ascontiguousarray(proj.astype(np.float64))
    nxt = np.zeros((n, d), dtype=np.float64)
    out = np.zeros((n, d), dtype=np.float64)
    for it in range(iter_weights.shape[0]):
        a = iter_weights[it]
        for u in prange(n):
            s = 0.0
            for k in range(ptr[u], ptr[u + 1]):
                s += w[k]
            for j in range(d):
                nxt[u, j] = 0.0
            if s > 0.0:
                for k in range(ptr[u], ptr[u + 1]):
                    f = w[k] / s
                    v = nbr[k]
                    for j in range(d):
                        nxt[u, j] += f * cur[v, j]
            if normalize:
                nrm = 0.0
                for j in range(d):
                    nrm += nxt[u, j] * nxt[u, j]
                if nrm > 0.0:
                    nrm = np.sqrt(nrm)
                    for j in range(d):
                        nxt[u, j] /= nrm
            for j in range(d):
                out[u, j] += a * nxt[u, j]
        for u in prange(n):
            for j in range(d):
                cur[u, j] = nxt[u, j]
    return out
