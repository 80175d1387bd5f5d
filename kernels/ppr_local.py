"""Local forward push with a per-node residual threshold and a certified top-k
(docs/architecture.md §4, "Local push"; the idea of FORA / TopPPR-style top-k PPR).

Same PPR as :mod:`.ppr`: pi = (1 - d) p + d P pi, P[j, i] = w_ij / wsum_i, a node with
``wsum == 0`` keeps its mass. Push keeps the invariant pi = x + sum_u r(u) pi_u with
x, r >= 0 (pi_u: the PPR vector of e_u, summing to 1, pi_u(u) >= 1 - d). A node u is
pushed while r(u) > eps * wsum(u), so after a round at threshold eps every residual is at
most eps * wsum(u) and the work is about 1 / (eps (1 - d)) weighted degree, whatever the
graph size. With rho = max_u r(u) / wsum(u) and R = sum_u r(u), every node's true score
lies in [lo(v), lo(v) + b(v)] with lo(v) = x(v) + (1 - d) r(v) and

    b(v) = d min(wsum(v) rho, R)  on a symmetric w,   b(v) = d R  on any graph  (+ slack)

(reversibility: pi_u(v) wsum(u) = pi_v(u) wsum(v); pi_u(v) <= d for u != v). Hence
b(v) <= d eps wsum(v) on a symmetric graph (the approximate mode's stated bound).

The top-k of lo is certified equal to the exact solve's, in order, when each of its
entries' lo exceeds lo + b of every node ranked after it (untouched nodes: lo = 0,
b = d min(wmax rho, R)). Otherwise the next threshold is rho*, the rho under which the
current lower bounds would be separated (symmetric graphs), at most eps / ``shrink`` and
at least eps / ``jump``; the push continues from where it stopped, down to ``eps_min``;
an order that is still not separated is returned with ``certified`` False.

A round pushes FIFO while it is local; once it has pushed or queued ``pass_min`` nodes
the push is global: every untouched node joins the touched list (in id order) and the
round runs as passes over the nodes in id order (the arcs then read in storage order, not
at random, with no touch bookkeeping: on the 10k-chunk graph at d = .85 a half to a fifth
of the FIFO's time per arc).

Scratch (``x``, ``s``: float64 zeros; ``flag``: uint8 zeros; ``touched``: int32, n + 1
slots; ``queue``: int32, n slots) is reset before return by the touched list: a call costs what
it touches plus reading ``p`` once when the prior is given dense.
"""
from __future__ import annotations

import numpy as np

from ._config import jit

TOUCHED = np.uint8(1)
TOP = np.uint8(4)
NOT_TOP = np.uint8(0xFB)
SLACK = 1e-12
#: a round that pushes or queues at least this share of the nodes runs as node-order
#: passes (measured: docs/architecture.md §4)
PASS_FRACTION = 0.25
#: largest threshold divisor between rounds of the certified mode (the divisor when rho*
#: says nothing: a tie, a directed graph) and of the approximate mode
SHRINK = 2.0
#: smallest threshold divisor between rounds when rho* asks for more
JUMP = 8.0


@jit
def pass_threshold(n):
    """Round pushes from which a round runs as node-order passes (PASS_FRACTION of n)."""
    return max(1, int(np.ceil(n * PASS_FRACTION)))


@jit
def arc_scale(ptr, nbr, w, wsum):
    """Per-arc weights w_ij / wsum_j (the push updates r(j) / wsum(j) directly); an arc into a
    dangling node j (wsum_j = 0) gets -w_ij: that node keeps the mass it receives."""
    wn = np.empty(w.shape[0], dtype=np.float64)
    for k in range(w.shape[0]):
        wj = wsum[nbr[k]]
        wn[k] = w[k] / wj if wj > 0.0 else -w[k]
    return wn


@jit
def local_push_topk(ptr, nbr, wn, wsum, wmax, sym, seeds, seed_val, d, eps0, eps_min, shrink, jump, k,
                    pass_min, x, s, flag, touched, queue):
    """Push from r = sum seed_val[i] e_{seeds[i]} (seeds distinct, values >= 0) on the
    graph (ptr, nbr) with arc weights ``wn`` = :func:`arc_scale` and row sums ``wsum``.

    Residuals are kept scaled, s(u) = r(u) / wsum(u), so a push reads no degree per arc;
    a dangling node absorbs what it receives at once. ``eps0``: first threshold (<= 0: the
    largest seed ratio r / wsum, over ``shrink``); ``k`` 0: push down to ``eps_min`` by
    ``shrink`` (approximate mode, no certificate). Rounds, passes and the threshold
    schedule: module docstring.
    Returns (ids, xs, bs, b_rest, top, certified, eps, pushes, R, rho): the touched nodes
    in touch order with their lower bounds xs (pushed mass plus (1 - d) r) and widths bs,
    the width b_rest of every untouched node (lower bound 0), the top-k of the lower bounds
    (ties by lower id, padded with untouched nodes), whether its order is certified, the
    last threshold, the number of pushes, R and rho.
    """
    n = wsum.shape[0]
    nt = 0
    for t in range(seeds.shape[0]):
        u = seeds[t]
        if flag[u] == 0:
            flag[u] = TOUCHED
            touched[nt] = u
            nt += 1
        if wsum[u] > 0.0:
            s[u] += seed_val[t] / wsum[u]
        else:
            x[u] += seed_val[t]
    if eps0 <= 0.0:
        eps0 = 0.0
        for t in range(nt):
            if s[touched[t]] > eps0:
                eps0 = s[touched[t]]
        eps0 /= shrink
    eps = max(eps0, eps_min)
    pushes = 0
    kk = min(k, n)
    top = np.empty(kk, dtype=np.int64)
    certified = False
    rsum = 0.0
    rho = 0.0
    c = 1.0 - d
    while True:
        # one round at threshold eps: FIFO over every node above it (a node joins the queue
        # when its residual crosses eps and leaves it when pushed) until the round has
        # pushed or queued pass_min nodes, then passes over the nodes in id order until no
        # residual is above eps
        head = 0
        size = 0
        for t in range(nt):
            u = touched[t]
            if s[u] > eps:
                queue[size] = u
                size += 1
        done = 0
        while size > 0 and done + size < pass_min:
            u = queue[head]
            head += 1
            if head == n:
                head = 0
            size -= 1
            done += 1
            su = s[u]
            s[u] = 0.0
            pushes += 1
            x[u] += c * su * wsum[u]
            f = d * su
            for kx in range(np.uint64(ptr[u]), np.uint64(ptr[u + 1])):
                j = np.uint32(nbr[kx])
                a = wn[kx]
                old = s[j]
                touched[nt] = j  # kept only if j is new (branch-free)
                nt += 1 - flag[j]
                flag[j] = TOUCHED
                if a < 0.0:  # dangling: keeps all the mass it receives
                    x[j] -= f * a
                    continue
                new = old + f * a
                s[j] = new
                if new > eps and not old > eps:
                    tail = head + size
                    if tail >= n:
                        tail -= n
                    queue[tail] = j
                    size += 1
        again = size > 0
        if again and nt < n:  # global from here on: every node joins the touched list
            for i in range(n):
                if flag[i] == 0:
                    flag[i] = TOUCHED
                    touched[nt] = i
                    nt += 1
        while again:
            again = False
            for u in range(n):
                su = s[u]
                if not su > eps:
                    continue
                s[u] = 0.0
                pushes += 1
                x[u] += c * su * wsum[u]
                f = d * su
                for kx in range(np.uint64(ptr[u]), np.uint64(ptr[u + 1])):
                    j = np.uint32(nbr[kx])
                    a = wn[kx]
                    old = s[j]
                    if a < 0.0:
                        x[j] -= f * a
                        continue
                    new = old + f * a
                    s[j] = new
                    again |= (new > eps) & (j <= u)
        last = eps <= eps_min
        nxt = eps / shrink
        if kk > 0:
            certified, rstar, rsum, rho = _certify(x, s, wsum, wmax, sym, d, flag, touched, nt, n, kk, top)
            if sym and rstar > 0.0 and rstar < nxt:
                nxt = max(rstar, eps / jump)
        elif last:
            rsum = 0.0
            rho = 0.0
            for t in range(nt):
                u = touched[t]
                su = s[u]
                rsum += su * wsum[u]
                if su > rho:
                    rho = su
        if certified or last:
            break
        eps = max(nxt, eps_min)
    ids = touched[:nt].astype(np.int64)
    xs = np.empty(nt, dtype=np.float64)
    bs = np.empty(nt, dtype=np.float64)
    for t in range(nt):
        u = touched[t]
        xs[t] = x[u] + c * s[u] * wsum[u]
        bs[t] = _bound(wsum[u], sym, d, rsum, rho)
        x[u] = 0.0
        s[u] = 0.0
        flag[u] = 0
    b_rest = _bound(wmax, sym, d, rsum, rho)
    return ids, xs, bs, b_rest, top, certified, eps, pushes, rsum, rho


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
def _certify(x, s, wsum, wmax, sym, d, flag, touched, nt, n, kk, top):
    """Fill ``top`` with the kk best nodes by (lower bound x + (1 - d) r desc, id asc);
    return whether each one's lower bound exceeds the upper bound of every node after it,
    rho*: the largest rho under which the current lower bounds would be separated by the
    symmetric widths d wsum rho (0: they cannot be), R and rho."""
    c = 1.0 - d
    tx = np.full(kk, -1.0)
    nfill = 0
    rsum = 0.0
    rho = 0.0
    for t in range(nt):
        u = touched[t]
        su = s[u]
        rsum += su * wsum[u]
        if su > rho:
            rho = su
        v = x[u] + c * su * wsum[u]
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
    if nt + _untouched_in(flag, top, kk) < n:
        hi_rest = _bound(wmax, sym, d, rsum, rho)
        rstar = _rstar(rstar, lk, 0.0, d * wmax)
    for t in range(nt):
        u = touched[t]
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
    for j in range(kk):
        flag[top[j]] &= NOT_TOP
    return ok, (rstar if rstar < np.inf else 0.0), rsum, rho


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


@jit
def local_push_prior(ptr, nbr, wn, wsum, wmax, sym, p, d, eps0, eps_min, shrink, jump, k, pass_min,
                     x, s, flag, touched, queue):
    """:func:`local_push_topk` from a dense prior ``p``: its nonzeros are found here (one
    read of p, no Python step between). Returns (bad, the kernel's tuple); ``bad``: some
    value of p is negative or not finite (then nothing is pushed)."""
    nnz = 0
    bad = False
    for i in range(p.shape[0]):
        v = p[i]
        if v != 0.0:
            nnz += 1
            if not (v > 0.0 and v < np.inf):
                bad = True
    if bad:
        nnz = 0
    seeds = np.empty(nnz, dtype=np.int64)
    vals = np.empty(nnz, dtype=np.float64)
    t = 0
    for i in range(p.shape[0] if nnz > 0 else 0):
        if p[i] != 0.0:
            seeds[t] = i
            vals[t] = p[i]
            t += 1
    return bad, local_push_topk(ptr, nbr, wn, wsum, wmax, sym, seeds, vals, d, eps0, eps_min, shrink, jump, k,
                                pass_min, x, s, flag, touched, queue)


@jit
def local_push_dense(ptr, nbr, w, wsum, p, d, eps_min, k, sym):
    """:func:`local_push_topk` from a dense prior ``p`` on a small graph (the query path's
    C_q), with its own scratch. Returns (lower bounds dense, certified, pushes, width max)."""
    n = wsum.shape[0]
    nnz = 0
    for i in range(n):
        if p[i] != 0.0:
            nnz += 1
    seeds = np.empty(nnz, dtype=np.int64)
    vals = np.empty(nnz, dtype=np.float64)
    t = 0
    for i in range(n):
        if p[i] != 0.0:
            seeds[t] = i
            vals[t] = p[i]
            t += 1
    wmax = 0.0
    for i in range(n):
        if wsum[i] > wmax:
            wmax = wsum[i]
    x = np.zeros(n, dtype=np.float64)
    s = np.zeros(n, dtype=np.float64)
    flag = np.zeros(n, dtype=np.uint8)
    touched = np.empty(n + 1, dtype=np.int32)
    queue = np.empty(n, dtype=np.int32)
    ids, xs, bs, b_rest, _top, cert, _eps, pushes, _R, _rho = local_push_topk(
        ptr, nbr, arc_scale(ptr, nbr, w, wsum), wsum, wmax, sym, seeds, vals, d, 0.0, eps_min, SHRINK, JUMP, k,
        pass_threshold(n), x, s, flag, touched, queue)
    bmax = b_rest if ids.shape[0] < n else 0.0
    for t in range(ids.shape[0]):
        x[ids[t]] = xs[t]
        if bs[t] > bmax:
            bmax = bs[t]
    return x, cert, pushes, bmax
