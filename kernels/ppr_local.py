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
b = d min(wmax rho, R)), or when the refined bounds of the contenders separate it
(:mod:`.ppr_certify`). Otherwise the next threshold is rho*, the rho under which the
current lower bounds would be separated (symmetric graphs), at most eps / ``shrink`` and
at least eps / ``jump``; the push continues from where it stopped, down to ``eps_min``;
an order that is still not separated is returned with ``certified`` False.

A round pushes FIFO while it is local; once it has pushed or queued ``pass_min`` nodes
the push is global: every untouched node joins the touched list (in id order) and the
round runs as passes over the nodes in id order (the arcs then read in storage order, not
at random, with no touch bookkeeping: on the 10k-chunk graph at d = .85 about a third
of the FIFO's time per arc); every later round starts with a pass, and a pass that
pushed fewer than pass_min / TAIL_DIVISOR nodes leaves the rest of its round to a FIFO.

Scratch (``x``, ``s``: float64 zeros; ``flag``: uint8 zeros; ``touched``: int32, n + 1
slots; ``queue``: int32, n slots) is reset before return by the touched list: a call costs what
it touches plus reading ``p`` once when the prior is given dense.
"""
from __future__ import annotations

import numpy as np

from ._config import jit
from .ppr_certify import REFINE_CAP, REFINE_DEPTH, SLACK, TOUCHED, _bound, _certify, _residual  # noqa: F401

#: a round that pushes or queues at least this share of the nodes runs as node-order
#: passes (measured: docs/architecture.md §4)
PASS_FRACTION = 0.25
#: largest threshold divisor between rounds of the certified mode (the divisor when rho*
#: says nothing: a tie, a directed graph; measured: docs/architecture.md §4)
SHRINK = 1.2
#: threshold divisor between rounds of the approximate mode
APPROX_SHRINK = 2.0
#: smallest threshold divisor between rounds when rho* asks for more
JUMP = 8.0
#: a pass that pushes fewer than pass_min / TAIL_DIVISOR nodes ends its round FIFO
TAIL_DIVISOR = 16
#: refined certificate (symmetric graphs; kernels/ppr_certify.py): each round may spend on
#: it this share of the arcs it pushed (so the refinements cost at most that share of the
#: push; measured: docs/architecture.md §4, "Refined bounds")
REFINE_BUDGET = 0.125
REFINED = np.uint8(2)


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
                    pass_min, refine, x, s, flag, touched, queue):
    """Push from r = sum seed_val[i] e_{seeds[i]} (seeds distinct, values >= 0) on the
    graph (ptr, nbr) with arc weights ``wn`` = :func:`arc_scale` and row sums ``wsum``.

    Residuals are kept scaled, s(u) = r(u) / wsum(u), so a push reads no degree per arc;
    a dangling node absorbs what it receives at once. ``eps0``: first threshold (<= 0: the
    largest seed ratio r / wsum, over ``shrink``); ``k`` 0: push down to ``eps_min`` by
    ``shrink`` (approximate mode, no certificate). ``refine``: the share of the arcs pushed
    since the last certificate that its refinement may read (0: plain bounds only; the
    wrappers pass REFINE_BUDGET). Rounds, passes and the threshold schedule: module
    docstring.
    Returns (ids, xs, bs, b_rest, top, certified, eps, pushes, R, rho): the touched nodes
    in touch order with their lower bounds xs (pushed mass plus (1 - d) r; the refined
    ones for the contenders of the last certificate) and widths bs,
    the width b_rest of every untouched node (lower bound 0), the top-k of the lower bounds
    (ties by lower id, padded with untouched nodes), whether its order is certified, the
    last threshold, the number of pushes, R and rho.
    """
    nt = 0
    for t in range(seeds.shape[0]):
        nt = _seed(seeds[t], seed_val[t], wsum, x, s, flag, touched, nt)
    return _run(ptr, nbr, wn, wsum, wmax, sym, nt, d, eps0, eps_min, shrink, jump, k, pass_min, refine, x, s, flag,
                touched, queue)


@jit
def _seed(u, v, wsum, x, s, flag, touched, nt):
    """Add prior mass v at node u (a dangling node keeps it); returns the touched count."""
    if flag[u] == 0:
        flag[u] = TOUCHED
        touched[nt] = u
        nt += 1
    if wsum[u] > 0.0:
        s[u] += v / wsum[u]
    else:
        x[u] += v
    return nt


@jit
def _run(ptr, nbr, wn, wsum, wmax, sym, nt, d, eps0, eps_min, shrink, jump, k, pass_min, refine, x, s, flag, touched,
         queue):
    """:func:`local_push_topk` from its seeded state (the first ``nt`` touched nodes)."""
    n = wsum.shape[0]
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
    work = 0
    wprev = 0
    avgdeg = ptr[n] / n if n > 0 else 0.0
    tail_min = pass_min // TAIL_DIVISOR
    cid = np.empty(REFINE_CAP, dtype=np.int64)
    clo = np.empty(REFINE_CAP, dtype=np.float64)
    cb = np.empty(REFINE_CAP, dtype=np.float64)
    ncr = 0
    while True:
        # one round at threshold eps: FIFO over every node above it (a node joins the queue
        # when its residual crosses eps and leaves it when pushed) until the round has
        # pushed or queued pass_min nodes, then passes over the nodes in id order until no
        # residual is above eps (once every node is touched: passes from the start; a pass
        # that pushed few nodes leaves the rest of the round to a FIFO)
        again = nt == n  # every node touched: passes from the start
        if not again:
            size = 0
            for t in range(nt):
                u = touched[t]
                if s[u] > eps:
                    queue[size] = u
                    size += 1
            size, nt, done, wk = _fifo(ptr, nbr, wn, wsum, x, s, flag, touched, queue, size, nt, pass_min, eps, d)
            pushes += done
            work += wk
            again = size > 0
        if again and nt < n:  # global from here on: every node joins the touched list
            for i in range(n):
                if flag[i] == 0:
                    flag[i] = TOUCHED
                    touched[nt] = i
                    nt += 1
        while again:
            again = False
            npass = 0
            for u in range(n):
                su = s[u]
                if not su > eps:
                    continue
                s[u] = 0.0
                npass += 1
                x[u] += c * su * wsum[u]
                f = d * su
                work += ptr[u + 1] - ptr[u]
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
            pushes += npass
            if again and npass < tail_min:  # a pass that pushed few nodes: the rest FIFO
                size = 0
                for u in range(n):
                    if s[u] > eps:
                        queue[size] = u
                        size += 1
                size, nt, done, wk = _fifo(ptr, nbr, wn, wsum, x, s, flag, touched, queue, size, nt, 2**62, eps, d)
                pushes += done
                work += wk
                again = False
        last = eps <= eps_min
        nxt = eps / shrink
        if kk > 0:
            certified, rstar, rsum, rho, ncr = _certify(ptr, nbr, wn, x, s, wsum, wmax, sym, d, eps, flag, touched,
                                                        nt, n, kk, top, queue, refine * (work - wprev), avgdeg, cid, clo,
                                                        cb)
            wprev = work
            if sym and rstar > 0.0 and rstar < nxt:
                nxt = max(rstar, eps / jump)
        elif last:
            rsum, rho = _residual(s, wsum, touched, nt)
        if certified or last:
            break
        eps = max(nxt, eps_min)
    ids = touched[:nt].astype(np.int64)
    xs = np.empty(nt, dtype=np.float64)
    bs = np.empty(nt, dtype=np.float64)
    for i in range(ncr):  # the refined contenders of the last certificate
        flag[cid[i]] |= REFINED
        queue[cid[i]] = i
    for t in range(nt):
        u = touched[t]
        if flag[u] & REFINED:
            xs[t] = clo[queue[u]]
            bs[t] = cb[queue[u]]
        else:
            xs[t] = x[u] + c * s[u] * wsum[u]
            bs[t] = _bound(wsum[u], sym, d, rsum, rho)
        x[u] = 0.0
        s[u] = 0.0
        flag[u] = 0
    b_rest = _bound(wmax, sym, d, rsum, rho)
    return ids, xs, bs, b_rest, top, certified, eps, pushes, rsum, rho


@jit
def _fifo(ptr, nbr, wn, wsum, x, s, flag, touched, queue, size, nt, limit, eps, d):
    """Push FIFO from the ``size`` nodes queued at the start of ``queue`` (each above eps)
    until none is above eps or ``done`` + queued reaches ``limit``: a node joins the queue
    (a ring of n slots) when its residual crosses eps, and the touched list when it is
    new. Returns (still queued, touched count, pushes, arcs read)."""
    n = wsum.shape[0]
    c = 1.0 - d
    head = 0
    done = 0
    work = 0
    while size > 0 and done + size < limit:
        u = queue[head]
        head += 1
        if head == n:
            head = 0
        size -= 1
        done += 1
        su = s[u]
        s[u] = 0.0
        x[u] += c * su * wsum[u]
        f = d * su
        work += ptr[u + 1] - ptr[u]
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
    return size, nt, done, work


@jit
def local_push_prior(ptr, nbr, wn, wsum, wmax, sym, p, d, eps0, eps_min, shrink, jump, k, pass_min, refine,
                     x, s, flag, touched, queue):
    """:func:`local_push_topk` from a dense prior ``p``: its nonzeros are seeded here, in one
    read of p (no Python step between; ids in increasing order, as ``np.flatnonzero``). Returns (bad, the kernel's tuple); ``bad``: some
    value of p is negative or not finite (then nothing is pushed)."""
    nt = 0
    bad = False
    for i in range(p.shape[0]):
        v = p[i]
        if v != 0.0:
            if not (v > 0.0 and v < np.inf):
                bad = True
                break
            nt = _seed(i, v, wsum, x, s, flag, touched, nt)
    if bad:
        for t in range(nt):
            u = touched[t]
            x[u] = 0.0
            s[u] = 0.0
            flag[u] = 0
        nt = 0
    return bad, _run(ptr, nbr, wn, wsum, wmax, sym, nt, d, eps0, eps_min, shrink, jump, k, pass_min, refine, x, s,
                     flag, touched, queue)


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
        pass_threshold(n), REFINE_BUDGET, x, s, flag, touched, queue)
    bmax = b_rest if ids.shape[0] < n else 0.0
    for t in range(ids.shape[0]):
        x[ids[t]] = xs[t]
        if bs[t] > bmax:
            bmax = bs[t]
    return x, cert, pushes, bmax
