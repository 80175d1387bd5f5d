"""Slow, obviously-correct twins of the STITCH kernels (plain Python / NumPy / SciPy).

They read the Hypergraph through dense matrices and loop over the definitions of
docs/architecture.md §4 literally; tests compare the compiled kernels against them.
"""
from __future__ import annotations

import math
from collections import deque

import numpy as np
import scipy.sparse as sp


def dense_views(g):
    """Incidence H (nodes x edges), membership Z (nodes x chunks), group one-hot Gm."""
    H = np.zeros((g.n_nodes, g.n_edges), dtype=bool)
    for e in range(g.n_edges):
        H[g.edge_nodes[g.edge_ptr[e]:g.edge_ptr[e + 1]], e] = True
    Z = np.zeros((g.n_nodes, g.n_chunks), dtype=bool)
    for v in range(g.n_nodes):
        Z[v, g.nc_chunks[g.nc_ptr[v]:g.nc_ptr[v + 1]]] = True
    Gm = np.zeros((g.n_nodes, g.n_groups), dtype=bool)
    Gm[np.arange(g.n_nodes), g.node_group] = True
    return H, Z, Gm


def decay(kind, x):
    if kind == "tanh":
        return math.exp(-math.tanh(x))
    if kind == "exp":
        return math.exp(-x)
    return 2.0 / (1.0 + math.exp(x))


def stibp_twin(g, node_vec, edge_vec, chunk_vec, q, cand_nodes, opts, seeds=(), seed_values=()):
    """A, a_space, a_time over all nodes (Alg. 1 lines 2-21, docs/architecture.md §4 steps 2-5)."""
    q = np.asarray(q, dtype=np.float64)
    H, Z, Gm = dense_views(g)
    A = np.zeros(g.n_nodes)
    for v in cand_nodes:
        s = float(node_vec[v].astype(np.float64) @ q)
        if s > opts.delta:
            A[v] = max(A[v], s)
    for v, s in zip(seeds, seed_values):
        A[v] = max(A[v], s)
    S = edge_vec.astype(np.float64) @ q
    csim = chunk_vec.astype(np.float64) @ q
    sizes = np.bincount(g.node_group, minlength=g.n_groups)
    n_bar = sizes.mean() if sizes.size else 1.0
    space = np.zeros(g.n_nodes)
    time = np.zeros(g.n_nodes)
    if opts.spatial:
        for u in np.flatnonzero(A > 0):
            for e in np.flatnonzero(H[u]):
                for v in np.flatnonzero(H[:, e]):
                    if v != u:
                        space[v] = max(space[v], A[u] * S[e])
    beta = getattr(opts, "temporal_from_space", 0.0)
    strength = np.maximum(A, beta * space)  # sources: activated (+ bridged when beta > 0)
    if opts.temporal:
        for u in np.flatnonzero(strength > 0):
            members = np.flatnonzero(g.node_group == g.node_group[u])
            n_u = len(members)
            if n_u > opts.temporal_max_group:
                continue
            alpha = {"ratio": n_u / n_bar, "log": math.log1p(n_u / n_bar),
                     "fixed": opts.alpha_value}[opts.alpha]
            for v in members:
                if v == u:
                    continue
                dt = abs(int(g.node_chunk[u]) - int(g.node_chunk[v]))
                S_ev = max(S[e] for e in np.flatnonzero(H[v]))
                val = strength[u] * S_ev * decay(opts.decay, alpha * dt) * csim[g.node_chunk[v]]
                time[v] = max(time[v], val)
    return A, space, time


def prior_twin(g, chunk_vec, q, a, cand_chunks, opts, bonus=None):
    """C_q (sorted), Score and the normalised prior p (Alg. 1 lines 23-28)."""
    H, Z, Gm = dense_views(g)
    csim = chunk_vec.astype(np.float64) @ np.asarray(q, dtype=np.float64)
    cq = set(int(c) for c in cand_chunks)
    for v in np.flatnonzero(a > 0):
        cq.update(int(c) for c in np.flatnonzero(Z[v]))
    cq = np.array(sorted(cq), dtype=np.int64)
    sizes = np.bincount(g.node_group, minlength=g.n_groups).astype(np.float64)
    gchunks = (Gm.T.astype(int) @ Z.astype(int) > 0).sum(axis=1)
    if opts.group_weight == "log1p":
        w = np.log1p(sizes)
    else:  # "idf"
        w = np.log(g.n_chunks / np.maximum(gchunks, 1))
    score = np.array([sum(a[v] * w[g.node_group[v]] for v in np.flatnonzero(Z[:, c]) if a[v] > 0)
                      for c in cq], dtype=np.float64)
    if opts.prior == "continuous":
        I = opts.lam * np.maximum(0.0, csim[cq]) + np.log1p(score)
        if bonus is not None:
            for c, b in zip(cand_chunks, bonus):
                I[np.searchsorted(cq, c)] += b
    else:
        I = (score > 0).astype(np.float64)
    p = I / I.sum() if I.sum() > 0 else np.full(len(cq), 1.0 / max(len(cq), 1))
    return cq, score, p, csim[cq]


def chunk_graph_twin(g, cq, opts):
    """Dense weighted adjacency W over C_q (W[i, j] = weight of edge i-j, no diagonal)."""
    H, Z, Gm = dense_views(g)
    B = (Z.T.astype(int) @ Gm.astype(int) > 0)  # chunk x group
    gchunks = B.sum(axis=0)
    keep = gchunks <= opts.graph_max_group
    B = B[cq][:, keep].astype(np.float64)
    if opts.graph_weight == "uniform":
        W = (B @ B.T > 0).astype(np.float64)
    else:
        W = (B / gchunks[keep]) @ B.T
    np.fill_diagonal(W, 0.0)
    return W


def transition(W):
    """Column-normalised P with self-loops on dangling nodes (P[j, i] = W[i, j] / sum_j W[i, j])."""
    m = W.shape[0]
    P = np.zeros((m, m))
    for i in range(m):
        s = W[i].sum()
        if s == 0:
            P[i, i] = 1.0
        else:
            P[:, i] = W[i] / s
    return P


def ppr_exact(P, p, d):
    """pi = (1 - d) (I - d P)^{-1} p by a direct sparse solve."""
    m = P.shape[0]
    return sp.linalg.spsolve(sp.csc_matrix(np.eye(m) - d * P), (1 - d) * p) if m else p.copy()


def ppr_power_twin(P, p, d, tol, max_iter):
    x, it = p.copy(), 0
    for it in range(1, max_iter + 1):
        new = (1 - d) * p + d * (P @ x)
        diff = np.max(np.abs(new - x)) if len(x) else 0.0
        x = new
        if diff < tol:
            break
    return x, it


def power_topk_bound(x, prev, p, d):
    """The per-entry error bound of ``ppr_power_topk`` after the sweep prev -> x:
    (d / (1 - d) ||x - prev||_1 + |sum x - sum p|) / 2 + 1e-12."""
    c = d / (1 - d)
    return 0.5 * (c * np.abs(x - prev).sum() + abs(x.sum() - p.sum())) + 1e-12


def ranked(pi, cq, k):
    """Top-k chunk ids by pi, ties by chunk id."""
    order = sorted(range(len(cq)), key=lambda i: (-pi[i], cq[i]))[:k]
    return np.array([cq[i] for i in order], dtype=np.int64)


def check_power_topk(out, P, p, d, tol, k, max_iter=10_000):
    """Assert that ``out`` = (x, sweeps, b, certified) of a certified-top-k power iteration
    is the twin's iterate after as many sweeps, that b is the stated bound and holds
    against the exact solve, and that a certified stop has the exact top-k in order
    (else the paper's rule or the sweep cap stopped it). Returns x's top-k order."""
    x, its, bound, certified = out
    y, _ = ppr_power_twin(P, p, d, 0.0, its)
    np.testing.assert_allclose(x, y, atol=1e-13, rtol=0)
    prev, _ = ppr_power_twin(P, p, d, 0.0, its - 1)
    assert abs(bound - power_topk_bound(y, prev, p, d)) <= 1e-12
    exact = ppr_exact(P, p, d)
    assert np.all(np.abs(exact - x) <= bound + 1e-13), "error over the stated bound"
    order_x = sorted(range(len(p)), key=lambda i: (-x[i], i))[:k]
    if certified:
        assert k > 0
        assert order_x == sorted(range(len(p)), key=lambda i: (-exact[i], i))[:k]
    else:
        assert np.max(np.abs(x - prev)) < tol or its == max_iter
    return order_x


def csr_of(W):
    """(ptr, nbr, w, wsum) of the dense weighted adjacency W (row i: the arcs out of i)."""
    m = W.shape[0]
    ptr = np.zeros(m + 1, dtype=np.int64)
    nbr, w = [], []
    for i in range(m):
        js = np.flatnonzero(W[i])
        nbr.extend(js)
        w.extend(W[i, js])
        ptr[i + 1] = len(nbr)
    return ptr, np.array(nbr, dtype=np.int32), np.array(w, dtype=np.float64), W.sum(axis=1)




def local_push_twin(ptr, nbr, w, wsum, seeds, vals, d, eps_min, shrink, k, sym, pass_min=None, jump=8.0,
                    refine=0.125):
    """Plain-Python transcription of ``kernels.ppr_local.local_push_topk``'s schedule (the
    same scaled residual s = r / wsum and the same operations, so the same floats): rounds
    at a threshold eps starting at max s / shrink; a round pushes every node with s > eps,
    FIFO until it has pushed or queued ``pass_min`` nodes, then (every node touched, in id
    order; from the start once every node is touched) in passes over the nodes in id order
    until none is above eps (a pass that pushed
    fewer than pass_min / TAIL_DIVISOR nodes hands the rest of its round to a FIFO); with k > 0 it stops after the first round whose top-k
    (by the lower bound x + (1 - d) r) is separated by the widths of :func:`push_bounds`
    (untouched nodes outside the top taking the largest wsum, as the kernel does), or by
    the refined bounds of :func:`refine_twin`, else the
    next eps is eps / shrink, or rho* (:func:`push_rho_star`, or the refined one) when smaller, but at least
    eps / jump; down to ``eps_min``; ``refine``: the kernel's refinement budget. Returns (x, r, eps, pushes, touched, lo, top, b) with
    dense x (the pushed mass), r, lo (the returned lower bounds: x + (1 - d) r, refined
    for the contenders of the last certificate) and b (their widths), and the top-k."""
    from hyperrag_fast.kernels.ppr_certify import REFINE_CAP, REFINE_DEPTH
    from hyperrag_fast.kernels.ppr_local import TAIL_DIVISOR
    n = len(wsum)
    pass_min = max(1, int(np.ceil(n * 0.25))) if pass_min is None else pass_min
    x, s = np.zeros(n), np.zeros(n)
    order, seen = [], set()
    work = [0]

    def touch(u):
        if u not in seen:
            seen.add(u)
            order.append(u)

    def push(u):
        su, s[u] = s[u], 0.0
        x[u] += (1.0 - d) * su * wsum[u]
        work[0] += int(ptr[u + 1] - ptr[u])
        crossed = []
        for kx in range(ptr[u], ptr[u + 1]):
            j = int(nbr[kx])
            touch(j)
            if wsum[j] == 0:  # dangling: keeps what it receives
                x[j] += d * su * w[kx]
                continue
            old = s[j]
            s[j] = old + d * su * (w[kx] / wsum[j])
            if s[j] > eps and not old > eps:
                crossed.append(j)
        return crossed

    for u, v in zip(seeds, vals):
        touch(u)
        if wsum[u] > 0:
            s[u] += v / wsum[u]
        else:
            x[u] += v
    eps = max(max(s, default=0.0) / shrink, eps_min)
    pushes = 0
    wprev = 0
    while True:
        queue = deque(u for u in order if s[u] > eps) if len(seen) < n else deque([None])
        done = 0
        while queue and queue[0] is not None and done + len(queue) < pass_min:
            u = queue.popleft()
            pushes += 1
            done += 1
            queue.extend(push(u))
        if queue:
            for u in range(n):  # global: every node joins the touched list
                touch(u)
            while np.any(s > eps):
                npass = 0
                for u in range(n):
                    if s[u] > eps:
                        npass += 1
                        push(u)
                pushes += npass
                if np.any(s > eps) and npass < pass_min // TAIL_DIVISOR:  # the rest FIFO
                    queue = deque(u for u in range(n) if s[u] > eps)
                    while queue:
                        u = queue.popleft()
                        pushes += 1
                        queue.extend(push(u))
        r = s * wsum
        lo = x + (1.0 - d) * s * wsum  # the kernel's rounding
        b = _kernel_bounds(r, wsum, d, sym, seen, lo, k) if k > 0 else push_bounds(r, wsum, d, sym) * (1 + 1e-9) + 1e-12
        top = sorted(range(n), key=lambda i: (-lo[i], i))[:k]
        cert, rstar = False, 0.0
        if k > 0:
            cert = top_certified(lo, b, k)
            rstar = push_rho_star(lo, wsum, d, k, seen) if sym else 0.0
            rho = max((s[u] for u in seen), default=0.0)
            untouched_out = any(i not in seen for i in range(n) if i not in top)
            b_un = float(b[[i for i in range(n) if i not in seen][0]]) if untouched_out else -1.0
            if (not cert and sym and d > 0 and b_un < lo[top[-1]] and all(u in seen for u in top)):
                ref = refine_twin(ptr, nbr, w, wsum, s, lo, b, top, seen, d, rho, refine * (work[0] - wprev),
                                  REFINE_CAP, REFINE_DEPTH)
                if ref is not None:
                    cert, rstar, top, cont = ref
                    lo, b = lo.copy(), b.copy()
                    for u, (lv, bv) in cont.items():
                        lo[u], b[u] = lv, bv
            wprev = work[0]
        if cert or eps <= eps_min:
            return x, r, eps, pushes, np.array(order, dtype=np.int64), lo, top, b
        nxt = eps / shrink
        if k > 0 and sym:
            if 0 < rstar < nxt:
                nxt = max(rstar, eps / jump)
        eps = max(nxt, eps_min)


def refine_twin(ptr, nbr, w, wsum, s, lo, b, top, seen, d, rho, allowed, cap, max_depth):
    """The refined certificate (docs/architecture.md §4, "Refined bounds") written from its
    definition: contenders = the top and the touched nodes whose plain upper bound reaches
    the k-th lower bound; each whose plain interval overlaps another contender's (one of
    the two in the top) gets [lo + A, lo + A + d^L wsum rho] with
    A = sum_{t=1}^{L-1} (1 - d) d^t (P^t r)(v) summed over the paths of its neighbourhood,
    L the deepest with refined contenders * mean degree^(L - 1) <= ``allowed``. Returns None when
    not refined, else (certified, rho*, top, {contender: (lower bound, width)})."""
    k = len(top)
    n = len(wsum)
    lk = lo[top[-1]]
    rest = [u for u in sorted(seen) if u not in top and lo[u] + b[u] >= lk]
    cont = list(top) + rest
    if len(cont) > cap:
        return None
    topset = set(top)
    need = [u for u in cont if any(q != u and (u in topset or q in topset)
                                   and not (lo[u] > lo[q] + b[q] or lo[q] > lo[u] + b[u]) for q in cont)]
    avgdeg = ptr[n] / n
    depth = max_depth
    while depth > 1:
        cost = float(len(need))
        for _ in range(depth - 1):
            cost *= avgdeg
        if cost <= allowed:
            break
        depth -= 1
    if depth < 2:
        return None
    dl = 1.0
    for _ in range(depth):
        dl *= d
    wn = np.array([w[a] / wsum[nbr[a]] if wsum[nbr[a]] > 0 else -w[a] for a in range(len(nbr))])

    def paths(v, level):  # sum over paths v -> j of P[v, j] (r(j) + d * paths(j, level - 1))
        acc = 0.0
        for a in range(ptr[v], ptr[v + 1]):
            if not wn[a] > 0:
                continue
            j = int(nbr[a])
            inner = s[j] * wsum[j]
            if level > 1:
                inner += d * paths(j, level - 1)
            acc += wn[a] * inner
        return acc

    c = 1.0 - d
    val = {u: (lo[u], b[u]) for u in cont}
    fac = {u: d for u in cont}
    for u in need:
        val[u] = (lo[u] + c * d * paths(u, depth - 1), (dl * wsum[u] * rho) * (1.0 + 1e-9) + 1e-12)
        fac[u] = dl
    ranked = sorted(cont, key=lambda u: (-val[u][0], u))
    ok = all(val[ranked[j]][0] > max(val[v][0] + val[v][1] for v in ranked[j + 1:]) for j in range(k)
             if ranked[j + 1:])
    best = np.inf

    def gap(above, below, dw):
        nonlocal best
        if dw <= 0:
            return
        best = 0.0 if not above > below else min(best, (above - below) / dw)

    for j in range(len(ranked) - 1, -1, -1):
        v = ranked[j]
        if j >= k:
            gap(val[ranked[k - 1]][0], val[v][0], fac[v] * wsum[v])
        else:
            for i in range(j):
                gap(val[ranked[i]][0], val[v][0], fac[v] * wsum[v])
    return ok, (best if best < np.inf else 0.0), ranked[:k], val


def push_rho_star(lo, wsum, d, k, seen):
    """The largest rho under which the lower bounds ``lo`` would be separated by the widths
    d wsum(v) rho: each top-k entry (ties by lower id) above every later node's lo + width,
    untouched nodes outside the top at the largest wsum; 0 when some pair cannot be
    (a later node's lo not below); nodes of wsum 0 (width 0) ask nothing."""
    if d == 0:
        return 0.0
    n = len(lo)
    order = sorted(range(n), key=lambda i: (-lo[i], i))
    top, rest = order[:k], order[k:]
    best = np.inf

    def need(above, below, wv):
        nonlocal best
        if d * wv <= 0:
            return
        best = 0.0 if not above > below else min(best, (above - below) / (d * wv))

    lk = lo[top[-1]]
    if any(i not in seen for i in rest):
        need(lk, 0.0, np.max(wsum, initial=0.0))
    for i in rest:
        if i in seen:
            need(lk, lo[i], wsum[i])
    for j in range(len(top) - 1, -1, -1):
        for i in range(j):
            need(lo[top[i]], lo[top[j]], wsum[top[j]])
    return best if best < np.inf else 0.0


def _kernel_bounds(r, wsum, d, sym, seen, lo, k):
    """:func:`push_bounds` with the kernel's rounding slack; untouched nodes outside the
    top-k of ``lo`` at max wsum (the kernel's one bound for all of them)."""
    wmax = np.max(wsum, initial=0.0)
    top = set(sorted(range(len(lo)), key=lambda i: (-lo[i], i))[:k])
    ws = np.array([wsum[i] if i in seen or i in top else wmax for i in range(len(wsum))])
    return push_bounds(r, ws, d, sym, rho=_rho(r, wsum)) * (1 + 1e-9) + 1e-12


def _rho(r, wsum):
    pos = wsum > 0
    return np.max(r[pos] / wsum[pos], initial=0.0)


def push_bounds(r, wsum, d, sym, rho=None):
    """Width b(v) of [lo(v), lo(v) + b(v)], lo = x + (1 - d) r, for residual r
    (docs/architecture.md §4, local push): d R, and on a symmetric graph also
    d wsum(v) rho with rho = max r / wsum."""
    rho = _rho(r, wsum) if rho is None else rho
    b = np.full(len(wsum), d * r.sum())
    if sym:
        b = np.minimum(b, d * wsum * rho)
    return b


def top_certified(x, b, k):
    """Whether the top-k of x (ties by lower id) is separated: each entry's x above x + b of
    every node ranked after it."""
    order = sorted(range(len(x)), key=lambda i: (-x[i], i))
    top, rest = order[:k], order[k:]
    for j, u in enumerate(top):
        after = top[j + 1:] + rest
        if after and not x[u] > max(x[v] + b[v] for v in after):
            return False
    return True
