"""Top-k certificate of the local push (kernels/ppr_local.py; docs/architecture.md §4,
"Local push" and "Refined bounds").

After a round at threshold eps, every node's exact score lies in [lo(v), lo(v) + b(v)]
(lo = x + (1 - d) r; b = d min(wsum(v) rho, R) on a symmetric graph, d R on any graph).
:func:`_certify` finds the top-k of lo and checks that each entry's lo exceeds the upper
bound of every node ranked after it; when it does not (symmetric graphs), :func:`_refine`
tightens the bounds of the few contenders by summing the residual over their
neighbourhood (:func:`_expand`): pi(v) = lo(v) + sum_{t=1}^{L-1} (1 - d) d^t (P^t r)(v)
+ d^L (P^L C)(v), with 0 <= (P^L C)(v) <= wsum(v) rho.
"""
from __future__ import annotations

import numpy as np

from ._config import jit

TOUCHED = np.uint8(1)
TOP = np.uint8(4)
NOT_TOP = np.uint8(0xFB)
SLACK = 1e-12
#: refined certificate: at most this many contenders, expanded at most REFINE_DEPTH - 1
#: arcs deep (the cost each round may spend is set by the caller: ppr_local.REFINE_BUDGET)
REFINE_CAP = 64
REFINE_DEPTH = 4


@jit
def _bound(wu, sym, d, rsum, rho):
    """Width b(v) above the lower bound x(v) + (1 - d) r(v) for a node of weighted degree
    ``wu`` (module docstring), with the rounding slack."""
    b = d * rsum
    if sym:
        b2 = d * wu * rho
        if b2 < b:
            b = b2
    return b * (1.0 + 1e-9) + SLACK


@jit
def _certify(ptr, nbr, wn, x, s, wsum, wmax, sym, d, eps, flag, touched, nt, n, kk, top, cand, work, avgdeg,
             cid, clo, cb):
    """Fill ``top`` with the kk best nodes by (lower bound x + (1 - d) r desc, id asc);
    return whether each one's lower bound exceeds the upper bound of every node after it,
    rho*: the largest rho under which the current lower bounds would be separated by the
    symmetric widths d wsum rho (0: they cannot be), R, rho and the number of refined
    contenders (:func:`_refine`, tried when the plain bounds do not separate; their
    bounds in ``cid`` / ``clo`` / ``cb``, and ``top`` then their order). Called after a
    round at ``eps`` (every r(u) <= eps wsum(u)): on a symmetric graph a node whose lower
    bound is below the running k-th by more than d wmax eps can neither reach the top nor
    set rho* under eps, so only the others are kept (in ``cand``) for the second pass."""
    c = 1.0 - d
    tx = np.full(kk, -1.0)
    nfill = 0
    nc = 0
    rsum = 0.0
    rho = 0.0
    margin = (d * wmax * eps) * (1.0 + 1e-9) + SLACK
    for t in range(nt):
        u = touched[t]
        su = s[u]
        rsum += su * wsum[u]
        if su > rho:
            rho = su
        v = x[u] + c * su * wsum[u]
        if not sym or nfill < kk or v + margin >= tx[kk - 1]:
            cand[nc] = u
            nc += 1
        if nfill == kk and not (v > tx[kk - 1] or (v == tx[kk - 1] and u < top[kk - 1])):
            continue
        j = nfill if nfill < kk else kk - 1
        while j > 0 and (tx[j - 1] < v or (tx[j - 1] == v and top[j - 1] > u)):
            tx[j] = tx[j - 1]
            top[j] = top[j - 1]
            j -= 1
        tx[j] = v
        top[j] = u
        if nfill < kk:
            nfill += 1
    # untouched nodes (x = 0) of lowest id fill the top and precede touched ones with x = 0
    i = 0
    while i < n and kk > 0 and (nfill < kk or (tx[kk - 1] == 0.0 and top[kk - 1] > i)):
        if flag[i] == 0:
            j = nfill if nfill < kk else kk - 1
            while j > 0 and tx[j - 1] == 0.0 and top[j - 1] > i:
                tx[j] = tx[j - 1]
                top[j] = top[j - 1]
                j -= 1
            tx[j] = 0.0
            top[j] = i
            if nfill < kk:
                nfill += 1
        i += 1
    # best upper bound among the nodes outside the top, and rho*
    for j in range(kk):
        flag[top[j]] |= TOP
    lk = tx[kk - 1]
    rstar = np.inf if d > 0.0 else 0.0
    hi_rest = -1.0
    b_un = -1.0
    if nt + _untouched_in(flag, top, kk) < n:
        b_un = _bound(wmax, sym, d, rsum, rho)
        hi_rest = b_un
        rstar = _rstar(rstar, lk, 0.0, d * wmax)
    for t in range(nc):
        u = cand[t]
        if (flag[u] & TOP) == 0:
            lo = x[u] + c * s[u] * wsum[u]
            h = lo + _bound(wsum[u], sym, d, rsum, rho)
            if h > hi_rest:
                hi_rest = h
            rstar = _rstar(rstar, lk, lo, d * wsum[u])
    ok = True
    hi = hi_rest
    for j in range(kk - 1, -1, -1):
        u = top[j]
        if not tx[j] > hi:
            ok = False
        h = tx[j] + _bound(wsum[u], sym, d, rsum, rho)
        if h > hi:
            hi = h
        for i in range(j):
            rstar = _rstar(rstar, tx[i], tx[j], d * wsum[u])
    ncr = 0
    if not ok and sym and d > 0.0 and kk > 0 and b_un < lk and _untouched_in(flag, top, kk) == 0:
        ok, rstar, ncr = _refine(ptr, nbr, wn, x, s, wsum, d, rsum, rho, flag, top, tx, cand, nc, kk, work,
                                 avgdeg, cid, clo, cb, rstar)
    for j in range(kk):
        flag[top[j]] &= NOT_TOP
    for j in range(kk if ncr > 0 else 0):  # the refined order
        top[j] = cid[j]
    return ok, (rstar if rstar < np.inf else 0.0), rsum, rho, ncr


@jit
def _refine(ptr, nbr, wn, x, s, wsum, d, rsum, rho, flag, top, tx, cand, nc, kk, work, avgdeg, cid, clo, cb,
            rstar):
    """Refined certificate on a symmetric graph (docs/architecture.md §4, "Refined
    bounds"): the contenders are the top and every candidate whose upper bound reaches the
    k-th lower bound; those whose plain interval overlaps another contender's (one of the
    two in the top) get [lo + A_L(v), lo + A_L(v) + d^L wsum(v) rho], A_L(v) =
    sum_{t=1}^{L-1} (1 - d) d^t (P^t r)(v), L the deepest (at most REFINE_DEPTH) whose
    cost, refined contenders * mean degree ** (L - 1), stays within ``work``; every other
    node keeps its plain bounds (those outside the contenders are below the k-th). Returns
    (certified, rho* of the refined widths, contenders stored: 0 when not refined), the
    contenders sorted by refined lower bound (ties by lower id) in ``cid``."""
    c = 1.0 - d
    lk = tx[kk - 1]
    nct = 0
    hi_nc = -1.0  # best upper bound of the candidates left out (all below lk)
    for j in range(kk):
        if nct < REFINE_CAP:
            cid[nct] = top[j]
        nct += 1
    for t in range(nc):
        u = cand[t]
        if (flag[u] & TOP) == 0:
            h = x[u] + c * s[u] * wsum[u] + _bound(wsum[u], True, d, rsum, rho)
            if h >= lk:
                if nct < REFINE_CAP:
                    cid[nct] = u
                nct += 1
            elif h > hi_nc:
                hi_nc = h
    if nct > REFINE_CAP:
        return False, rstar, 0
    # only a contender whose plain interval overlaps that of another, one of the two in
    # the top, needs the refinement (the others are separated already)
    plo = np.empty(nct)
    phi = np.empty(nct)
    for i in range(nct):
        u = cid[i]
        plo[i] = x[u] + c * s[u] * wsum[u]
        phi[i] = plo[i] + _bound(wsum[u], True, d, rsum, rho)
    need = np.zeros(nct, dtype=np.bool_)
    nneed = 0
    for i in range(nct):
        for q in range(nct):
            if q != i and (i < kk or q < kk) and not (plo[i] > phi[q] or plo[q] > phi[i]):
                need[i] = True
                nneed += 1
                break
    depth = REFINE_DEPTH
    while depth > 1:
        cost = float(nneed)
        for _ in range(depth - 1):
            cost *= avgdeg
        if cost <= work:
            break
        depth -= 1
    if depth < 2:
        return False, rstar, 0
    dl = 1.0
    for _ in range(depth):
        dl *= d
    fac = np.empty(nct)  # width per unit wsum rho: d^L refined, d plain
    for i in range(nct):
        u = cid[i]
        if need[i]:
            v = plo[i] + c * d * _expand(ptr, nbr, wn, s, wsum, d, u, depth - 1)
            b = (dl * wsum[u] * rho) * (1.0 + 1e-9) + SLACK
            fw = dl
        else:
            v = plo[i]
            b = _bound(wsum[u], True, d, rsum, rho)
            fw = d
        j = i
        while j > 0 and (clo[j - 1] < v or (clo[j - 1] == v and cid[j - 1] > u)):
            clo[j] = clo[j - 1]
            cb[j] = cb[j - 1]
            cid[j] = cid[j - 1]
            fac[j] = fac[j - 1]
            j -= 1
        clo[j] = v
        cb[j] = b
        cid[j] = u
        fac[j] = fw
    ok = True
    hi = hi_nc
    rs = np.inf
    for j in range(nct - 1, -1, -1):
        if j < kk and not clo[j] > hi:
            ok = False
        h = clo[j] + cb[j]
        if h > hi:
            hi = h
        dw = fac[j] * wsum[cid[j]]
        if j >= kk:
            rs = _rstar(rs, clo[kk - 1], clo[j], dw)
        else:
            for i in range(j):
                rs = _rstar(rs, clo[i], clo[j], dw)
    return ok, rs, nct


@jit
def _expand(ptr, nbr, wn, s, wsum, d, v, depth):
    """sum_{t=1}^{depth} d^(t-1) (P^t r)(v) (depth <= 3) on a symmetric graph, where
    P[v, j] = w_vj / wsum_j = wn of the arc v -> j (arcs into dangling nodes carry 0)."""
    acc = 0.0
    for a in range(ptr[v], ptr[v + 1]):
        wa = wn[a]
        if not wa > 0.0:
            continue
        j = nbr[a]
        inner = s[j] * wsum[j]
        if depth >= 2:
            in2 = 0.0
            for b in range(ptr[j], ptr[j + 1]):
                wb = wn[b]
                if not wb > 0.0:
                    continue
                i = nbr[b]
                in3 = s[i] * wsum[i]
                if depth >= 3:
                    in4 = 0.0
                    for e in range(ptr[i], ptr[i + 1]):
                        we = wn[e]
                        if we > 0.0:
                            h = nbr[e]
                            in4 += we * (s[h] * wsum[h])
                    in3 += d * in4
                in2 += wb * in3
            inner += d * in2
        acc += wa * inner
    return acc


@jit
def _residual(s, wsum, touched, nt):
    """(R, rho): the residual mass sum r = sum s wsum and max s over the touched nodes."""
    rsum = 0.0
    rho = 0.0
    for t in range(nt):
        u = touched[t]
        su = s[u]
        rsum += su * wsum[u]
        if su > rho:
            rho = su
    return rsum, rho


@jit
def _rstar(rstar, above, below, dw):
    """min(rstar, the rho at which d wsum rho = above - below); 0 when below >= above; a
    node of width 0 (dw = 0) asks nothing."""
    if dw <= 0.0:
        return rstar
    if not above > below:
        return 0.0
    r = (above - below) / dw
    return r if r < rstar else rstar


@jit
def _untouched_in(flag, top, kk):
    """How many of the top entries are untouched nodes (flag without TOUCHED)."""
    c = 0
    for j in range(kk):
        if (flag[top[j]] & TOUCHED) == 0:
            c += 1
    return c
