"""Personalized PageRank on the chunk graph in factored form: implicit transitions
through the chunk-group bipartite structure (STITCH-RAG §3.3; issue 4 item 7).

With additive weights, w_ij = sum of gw[l] over the groups l holding both i and j
(i != j; ``graph_weight="inverse_size"``: gw[l] = 1 / corpus chunks of l), P x never
needs the arcs. With y_i = d x_i / wsum_i and S_l = sum_{j in l} y_j:
    (d P x)_i = sum_{l in groups(i)} gw[l] (S_l - y_i),   wsum_i = sum_{l in groups(i)} gw[l] (|l| - 1).
A sweep reads each chunk-group incidence twice instead of every arc once (a group of s
chunks: s incidences, s (s - 1) arcs), and a frequent name costs its size, not its square.
Same iteration, error bound and top-k certificate as ``ppr.ppr_power_topk``; iterates
agree with it to rounding.
"""
from __future__ import annotations

import numpy as np

from ._config import jit
from .ppr import certify, support_of, sweep_stats


@jit
def factored_wsum(gptr, members, gw, m):
    """Weighted degree of every chunk: wsum_i = sum over its groups l of gw[l] (|l| - 1)."""
    wsum = np.zeros(m, dtype=np.float64)
    for g in range(gptr.shape[0] - 1):
        v = gw[g] * (gptr[g + 1] - gptr[g] - 1)
        if v != 0.0:
            for u in range(np.uint64(gptr[g]), np.uint64(gptr[g + 1])):
                wsum[np.uint32(members[u])] += v
    return wsum


@jit
def ppr_factored_topk(cg_ptr, cg, gptr, members, gw, p, d, tol, max_iter, k):
    """Power iteration x_{t+1} = (1 - d) p + d P x_t from x_0 = p on the factored chunk
    graph (``cg``: groups of each chunk, ``members``: chunks of each group, local ids;
    ``gw`` > 0; a chunk whose groups hold no other chunk is dangling and keeps its mass),
    with the certified top-k stop of ``ppr_power_topk``. A sweep runs group by group:
    S_l = sum of y over the members, then each member j gains gw[l] (S_l - y_j), so the
    members are read twice while in cache and singleton groups are skipped. While the
    support of x_t is under m / 4 a sweep visits only the support and the groups it
    reaches. Returns (x, sweeps, b, certified)."""
    m = p.shape[0]
    x = p.copy()
    if m == 0:
        return x, 0, 0.0, False
    ng = gptr.shape[0] - 1
    wsum = factored_wsum(gptr, members, gw, m)
    inv = np.empty(m, dtype=np.float64)
    for i in range(m):
        inv[i] = 0.0 if wsum[i] == 0.0 else d / wsum[i]
    new = np.zeros(m, dtype=np.float64)
    y = np.zeros(m, dtype=np.float64)
    T = np.zeros(ng, dtype=np.float64)
    gl = np.empty(ng, dtype=np.int64)
    gin = np.zeros(ng, dtype=np.bool_)
    sup, ins, n, psum = support_of(p)
    it = 0
    bound = np.inf
    certified = False
    while it < max_iter:
        it += 1
        if 4 * n < m:  # sparse sweep: the support and the groups it reaches
            nt = 0
            for t in range(n):
                i = sup[t]
                new[i] = 0.0
                yi = x[i] * inv[i]
                y[i] = yi
                if yi == 0.0:
                    continue
                for s in range(np.uint64(cg_ptr[i]), np.uint64(cg_ptr[i + 1])):
                    g = cg[s]
                    if not gin[g]:
                        gin[g] = True
                        gl[nt] = g
                        nt += 1
                    T[g] += yi
            for s in range(nt):
                g = gl[s]
                if gptr[g + 1] - gptr[g] > 1:
                    a = T[g]
                    wg = gw[g]
                    for u in range(np.uint64(gptr[g]), np.uint64(gptr[g + 1])):
                        j = np.uint32(members[u])
                        if not ins[j]:
                            ins[j] = True
                            sup[n] = j
                            n += 1
                            new[j] = 0.0
                        new[j] += wg * (a - y[j])
                T[g] = 0.0
                gin[g] = False
            nv = n
        else:  # dense sweep
            for i in range(m):
                y[i] = x[i] * inv[i]
                new[i] = 0.0
            for g in range(ng):
                s0 = gptr[g]
                s1 = gptr[g + 1]
                if s1 - s0 < 2:
                    continue
                a = 0.0
                for u in range(np.uint64(s0), np.uint64(s1)):
                    a += y[np.uint32(members[u])]
                wg = gw[g]
                for u in range(np.uint64(s0), np.uint64(s1)):
                    j = np.uint32(members[u])
                    new[j] += wg * (a - y[j])
            nv = m
        dense = nv == m
        for t in range(nv):
            i = t if dense else sup[t]
            v = (1.0 - d) * p[i] + new[i]
            if wsum[i] == 0.0:
                v += d * x[i]
            new[i] = v
        diff, l1, xsum, xmax = sweep_stats(new, x, sup, nv, dense)
        x, new = new, x
        bound, certified = certify(x, l1, xsum, psum, xmax, d, k)
        if certified or diff < tol:
            break
    return x, it, bound, certified
