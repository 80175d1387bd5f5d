"""FastRP node embeddings (Chen et al. 2019; CodaRAG §3.3 functional association).

Very sparse random projection R (built by the caller) propagated through the
row-normalised weighted adjacency S = D^-1 A: N_1 = S R, N_i = S N_{i-1}; each
N_i is optionally L2-normalised per row, and the embedding is sum_i a_i N_i.
A node with no neighbour (row sum 0) gets a zero row in every N_i.

Near-zero rows (the rule, kept by the twin in tests/test_fastrp.py too): a row of S N_{i-1}
whose norm is at most NORM_TOL times the bound sum_k f_k ||N_{i-1}[v_k]|| (the norm its
terms would give without cancelling) is zero in N_i, not normalised: what is left after
such a cancellation is rounding noise, whose direction depends on the order of the sum
(a weight of 1.4e-45 beside weights of 1 flipped a row to -1.0 where the twin had 0.0).
No other kernel normalises a signed sum: ppr.py / ppr_factored.py divide by row sums of
non-negative weights and projection.py by a total of non-negative priors (no cancellation).
"""
from __future__ import annotations

import numpy as np
from numba import prange

from ._config import jit, pjit

NORM_TOL = 1e-6  # relative: a row cancelled below this share of its terms' norm is zero


@jit
def fastrp(ptr, nbr, w, proj, iter_weights, normalize):
    """FastRP over the CSR graph ``(ptr, nbr, w)`` (weights >= 0) and the n x d
    projection ``proj``; returns sum_i iter_weights[i] * N_i (float64, n x d)."""
    return fastrp_into(ptr, nbr, w, np.ascontiguousarray(proj.astype(np.float64)),
                       iter_weights, normalize)


@pjit
def fastrp_into(ptr, nbr, w, cur, iter_weights, normalize):
    """:func:`fastrp` working in ``cur`` (the float64 C-order projection, overwritten:
    no copy of it), the same values; a build that no longer needs the projection saves
    one n x d float64 matrix (docs/architecture.md §7)."""
    n = ptr.shape[0] - 1
    d = cur.shape[1]
    nxt = np.zeros((n, d), dtype=np.float64)
    out = np.zeros((n, d), dtype=np.float64)
    cnorm = np.zeros(n, dtype=np.float64)
    for it in range(iter_weights.shape[0]):
        a = iter_weights[it]
        if normalize:
            for v in prange(n):
                t = 0.0
                for j in range(d):
                    t += cur[v, j] * cur[v, j]
                cnorm[v] = np.sqrt(t)
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
                nrm = np.sqrt(nrm)
                bound = 0.0
                if s > 0.0:
                    for k in range(ptr[u], ptr[u + 1]):
                        bound += w[k] / s * cnorm[nbr[k]]
                if nrm > NORM_TOL * bound and nrm > 0.0:
                    for j in range(d):
                        nxt[u, j] /= nrm
                else:
                    for j in range(d):
                        nxt[u, j] = 0.0
            for j in range(d):
                out[u, j] += a * nxt[u, j]
        for u in prange(n):
            for j in range(d):
                cur[u, j] = nxt[u, j]
    return out
