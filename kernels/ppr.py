"""Personalized PageRank on a small CSR graph: pi = (1 - d) p + d P pi (STITCH-RAG §3.3).

Arc loops run over unsigned bounds and neighbour ids are read as unsigned: Numba then
emits no negative-index wraparound test per element (one dense sweep: 0.72 -> 0.50 ns
per arc at 1k nodes, 2.08 -> 1.79 at 100k, ``benchmarks/results/kernel_micro.json``; same
operations in the same order, same results).

The graph is given by out-neighbour rows ``(ptr, nbr, w)`` and row sums ``wsum``;
P[j, i] = w_ij / wsum[i] (column-normalised), and a node with ``wsum == 0`` keeps its
mass (self-loop, P[i, i] = 1), so P is column-stochastic.
"""
from __future__ import annotations

import numpy as np

from ._config import inline_jit, jit
from .dense import offer


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
                for k in range(np.uint64(ptr[i]), np.uint64(ptr[i + 1])):
                    new[np.uint32(nbr[k])] += f * w[k]
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
def ppr_power_topk(ptr, nbr, w, wsum, p, d, tol, max_iter, k):
    """Power iteration x_{t+1} = (1 - d) p + d P x_t from x_0 = p (STITCH-RAG §3.3) with
    a certified top-k early stop.

    Bound: the error contracts by d per sweep in L1 (P column-stochastic), hence
    ||x_t - pi||_1 <= d / (1 - d) ||x_t - x_{t-1}||_1, and since sum(pi) = sum(p) every
    entry is off by at most b = (that + |sum x_t - sum p|) / 2 (+ 1e-12 for rounding).
    Stops when k > 0 and the k + 1 largest entries of x_t are more than 2b apart (then pi
    has the same top-k in the same order), else at the paper's rule
    max |x_t - x_{t-1}| < tol, else after ``max_iter`` sweeps.
    The support of x_t only grows (all terms are >= 0); while it is under m / 4 a sweep
    visits only the support (x_t is exactly the dense iterate, zero elsewhere).
    Returns (x, sweeps, b, certified).
    """
    m = p.shape[0]
    x = p.copy()
    if m == 0:
        return x, 0, 0.0, False
    new = np.zeros(m, dtype=np.float64)
    sup, ins, n, psum = support_of(p)
    it = 0
    bound = np.inf
    certified = False
    while it < max_iter:
        it += 1
        if 4 * n < m:  # sparse sweep over the support, which grows by the neighbours reached
            for t in range(n):
                i = sup[t]
                new[i] = (1.0 - d) * p[i]
            n0 = n
            for t in range(n0):
                i = sup[t]
                xi = x[i]
                if xi == 0.0:
                    continue
                if wsum[i] == 0.0:
                    new[i] += d * xi
                    continue
                f = d * xi / wsum[i]
                for kk in range(np.uint64(ptr[i]), np.uint64(ptr[i + 1])):
                    j = np.uint32(nbr[kk])
                    new[j] += f * w[kk]
                    if not ins[j]:
                        ins[j] = True
                        sup[n] = j
                        n += 1
            diff, l1, xsum, xmax = sweep_stats(new, x, sup, n, False)
        else:  # dense sweep
            dense_sweep(ptr, nbr, w, wsum, x, p, d, new)
            diff, l1, xsum, xmax = sweep_stats(new, x, sup, m, True)
        x, new = new, x
        bound, certified = certify(x, l1, xsum, psum, xmax, d, k)
        if certified or diff < tol:
            break
    return x, it, bound, certified


@inline_jit
def dense_sweep(ptr, nbr, w, wsum, x, p, d, new):
    """One dense power-iteration sweep new = (1 - d) p + d P x over all m chunks (scatter
    form; unsigned loop bounds, so Numba emits no wraparound test per element)."""
    m = p.shape[0]
    for i in range(m):
        new[i] = (1.0 - d) * p[i]
    for i in range(m):
        xi = x[i]
        if wsum[i] == 0.0:
            new[i] += d * xi
        elif xi != 0.0:
            f = d * xi / wsum[i]
            for kk in range(np.uint64(ptr[i]), np.uint64(ptr[i + 1])):
                new[np.uint32(nbr[kk])] += f * w[kk]


@inline_jit
def sweep_stats(new, x, sup, n, dense):
    """(max |new - x|, ||new - x||_1, sum new, max new) over the entries ``sup[:n]``, or
    over the first n entries when ``dense``; summed in that order."""
    diff = 0.0
    l1 = 0.0
    xsum = 0.0
    xmax = 0.0
    for t in range(n):
        i = t if dense else sup[t]
        v = new[i]
        dl = abs(v - x[i])
        l1 += dl
        if dl > diff:
            diff = dl
        xsum += v
        if v > xmax:
            xmax = v
    return diff, l1, xsum, xmax


@jit
def support_of(p):
    """(sup, ins, n, psum): the nonzero entries of p listed in ``sup[:n]`` (room for all m)
    and flagged in ``ins``, and sum(p)."""
    m = p.shape[0]
    sup = np.empty(m, dtype=np.int64)
    ins = np.zeros(m, dtype=np.bool_)
    n = 0
    psum = 0.0
    for i in range(m):
        psum += p[i]
        if p[i] != 0.0:
            sup[n] = i
            ins[i] = True
            n += 1
    return sup, ins, n, psum


@jit
def certify(x, l1, xsum, psum, xmax, d, k):
    """(b, certified) after the sweep that produced x (see ``ppr_power_topk``): the entrywise
    bound b = (d / (1 - d) ||x_t - x_{t-1}||_1 + |sum x_t - sum p|) / 2 + 1e-12, and whether
    the k + 1 largest entries are more than 2b apart (k > 0)."""
    b = 0.5 * (d / (1.0 - d) * l1 + abs(xsum - psum)) + 1e-12
    ok = k > 0 and 2.0 * b * min(k, x.shape[0] - 1) < xmax and _top_order_certified(x, 2.0 * b, k)
    return b, ok


@jit
def _top_order_certified(x, res, k):
    """True when the k largest entries of x are separated from each other and from the
    rest by more than ``res``: then, as 0 <= pi - x <= res entrywise, pi has the same
    top-k in the same order."""
    m = x.shape[0]
    kk = min(k + 1, m)
    top = np.full(kk, -np.inf)
    for i in range(m):
        v = x[i]
        if v <= top[kk - 1]:
            continue
        j = kk - 1
        while j > 0 and top[j - 1] < v:
            top[j] = top[j - 1]
            j -= 1
        top[j] = v
    for j in range(kk - 1):
        if not top[j] - top[j + 1] > res:
            return False
    return True


@jit
def ppr_push_topk(ptr, nbr, w, wsum, p, d, tol, k):
    """Forward push (Andersen-Chung-Lang style) from the residual r = p, in rounds of
    decreasing threshold.

    Invariant: pi = x + (1 - d)(I - dP)^{-1} r with x, r >= 0. Because P is
    column-stochastic, **0 <= pi_i - x_i for every i and sum_i (pi_i - x_i) = ||r||_1**:
    each score is low by at most the returned residual. Each round pushes every node whose
    residual exceeds the round's threshold (threshold / 8 per round, down to tol / m),
    so the push stays local on large graphs. It stops when ||r||_1 <= tol, or, if k > 0,
    as soon as the k best entries of x are separated from each other and from the rest
    by more than ||r||_1 — then the top-k of x is the exact top-k of pi, in order.
    A dangling node absorbs its residual at once (its self-loop keeps all mass).
    Returns (x, ||r||_1, pushes).
    """
    m = p.shape[0]
    x = np.zeros(m, dtype=np.float64)
    r = p.copy()
    if m == 0:
        return x, 0.0, 0
    floor = tol / m
    rmax = 0.0
    for i in range(m):
        if r[i] > rmax:
            rmax = r[i]
    thr = max(rmax / 8.0, floor)
    queue = np.empty(m, dtype=np.int64)
    inq = np.zeros(m, dtype=np.bool_)
    pushes = 0
    res = 0.0
    while True:
        head = 0
        size = 0
        for i in range(m):
            if r[i] > thr:
                queue[(head + size) % m] = i
                size += 1
                inq[i] = True
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
            for kk in range(np.uint64(ptr[i]), np.uint64(ptr[i + 1])):
                j = np.uint32(nbr[kk])
                r[j] += f * w[kk]
                if not inq[j] and r[j] > thr:
                    queue[(head + size) % m] = j
                    size += 1
                    inq[j] = True
        res = 0.0
        for i in range(m):
            res += r[i]
        if res <= tol or thr <= floor:
            break
        if k > 0 and _top_order_certified(x, res, k):
            break
        thr = max(thr / 8.0, floor)
    return x, res, pushes


@jit
def ppr_push(ptr, nbr, w, wsum, p, d, tol):
    """:func:`ppr_push_topk` run to ||r||_1 <= tol (no top-k early stop)."""
    return ppr_push_topk(ptr, nbr, w, wsum, p, d, tol, 0)


@jit
def topk_desc(scores, k):
    """Indices of the k largest scores, ties broken by lower index (as a stable sort of
    -scores would; scores finite), by a partial selection: O(m k) worst case, O(m) typical."""
    m = scores.shape[0]
    kk = max(min(k, m), 0)
    idx = np.empty(kk, dtype=np.int64)
    if kk == 0:
        return idx
    top = np.empty(kk, dtype=np.float64)
    n = 0
    for i in range(m):
        if n < kk or scores[i] > top[kk - 1]:  # equal ones keep the lower index already held
            n = offer(scores[i], i, n, kk, idx, top)
    return idx
