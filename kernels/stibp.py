"""STIBP: activation, spatial and temporal bridging, aggregation (STITCH-RAG §3.3, Alg. 1 l.1-22).

State lives in a per-thread scratch (see :mod:`.scratch`): dense arrays sized to the
corpus, allocated once, of which a query dirties only what it touches and resets
afterwards. Work per query is proportional to the activated hyperedges and groups.

Per-element helpers take plain arrays, never the index / scratch tuples: the kernels
take each tuple item once, outside their loops (an item taken inside a loop or in an
out-of-line helper costs an atomic NRT incref/decref per array, per element).
S(e) and sim(q, c) are cached per query in scratch arrays (NaN = not computed yet); the
first read computes the dot product and lists the entry for the reset. The hot loops
write that read out in place rather than calling a helper.
Embedding rows are read at random, so they are prefetched ``AHEAD`` elements early.
"""
from __future__ import annotations

import numpy as np

from . import params as P
from .layout import N_TOUCHED_EDGES, N_TOUCHED_NODES, N_TOUCHED_SIMS
from ._config import jit
from .prefetch import prefetch_at, prefetch_row

#: how many elements ahead the random embedding reads are prefetched
AHEAD = 8


@jit
def dot_row(q, mat, i):
    """sim(q, mat[i]) in float64 (rows are L2-normalised, so this is the cosine).

    Four independent accumulators in a fixed order: deterministic, and the CPU can
    overlap them (fastmath stays off, so a single-accumulator loop would serialise)."""
    n = q.shape[0]
    s0 = s1 = s2 = s3 = 0.0
    j = 0
    while j + 4 <= n:
        s0 += np.float64(q[j]) * np.float64(mat[i, j])
        s1 += np.float64(q[j + 1]) * np.float64(mat[i, j + 1])
        s2 += np.float64(q[j + 2]) * np.float64(mat[i, j + 2])
        s3 += np.float64(q[j + 3]) * np.float64(mat[i, j + 3])
        j += 4
    while j < n:
        s0 += np.float64(q[j]) * np.float64(mat[i, j])
        j += 1
    return (s0 + s1) + (s2 + s3)


@jit
def touch(v, flag, touched, cnt):
    """List node v once per query (``flag`` marks it) so that the reset finds it."""
    if flag[v] == 0:
        flag[v] = 1
        touched[cnt[N_TOUCHED_NODES]] = v
        cnt[N_TOUCHED_NODES] += 1


@jit
def decay(kind, x):
    """f(alpha*dt): 0 exp(-tanh x) in (1/e, 1] (paper), 1 exp(-x), 2 sigmoid gate 2/(1+e^x)."""
    if kind == P.DECAY_TANH:
        return np.exp(-np.tanh(x))
    if kind == P.DECAY_EXP:
        return np.exp(-x)
    return 2.0 / (1.0 + np.exp(x))


@jit
def activate(ix, sc, q, cand_nodes, seed_nodes, seed_values, delta):
    """A(v) = sim(q, v_des) if > delta over the candidates V0 (Alg. 1 l.2-4); seeds
    raise A(v) to at least their value. Returns the number of activated nodes, which
    are ``sc.touched_nodes[:n]``."""
    node_vec = ix.node_vec
    A, flag, touched, cnt = sc.A, sc.node_flag, sc.touched_nodes, sc.counters
    n = cand_nodes.shape[0]
    for i in range(-AHEAD, n):
        if i + AHEAD < n:
            prefetch_row(node_vec, cand_nodes[i + AHEAD])
        if i < 0:
            continue
        v = cand_nodes[i]
        s = dot_row(q, node_vec, v)
        if s > delta:
            touch(v, flag, touched, cnt)
            if s > A[v]:
                A[v] = s
    for i in range(seed_nodes.shape[0]):
        v = seed_nodes[i]
        if seed_values[i] > 0.0:
            touch(v, flag, touched, cnt)
            if seed_values[i] > A[v]:
                A[v] = seed_values[i]
    return cnt[N_TOUCHED_NODES]


@jit
def prefetch_edges(v, node_ptr, node_edges, edge_vec, ecache):
    """Prefetch the vectors of v's hyperedges whose S(e) is not cached yet."""
    for j in range(np.uint64(node_ptr[v]), np.uint64(node_ptr[v + 1])):
        e = node_edges[j]
        if ecache[e] != ecache[e]:
            prefetch_row(edge_vec, e)


@jit
def spatial(ix, sc, q, n_active):
    """a_space(v) = max over activated u, hyperedges e containing u and v != u of
    A(u) * S(e), floored at 0 (Alg. 1 l.9-14)."""
    edge_ptr, edge_nodes, node_ptr, node_edges, edge_vec = ix.edge_ptr, ix.edge_nodes, ix.node_ptr, ix.node_edges, ix.edge_vec
    A, sp, flag, touched, cnt = sc.A, sc.a_space, sc.node_flag, sc.touched_nodes, sc.counters
    ecache, etouched = sc.edge_S, sc.touched_edges
    h = AHEAD // 2
    for i in range(-h, n_active):
        if i + h < n_active:
            prefetch_edges(touched[i + h], node_ptr, node_edges, edge_vec, ecache)
        if i < 0:
            continue
        u = touched[i]
        for j in range(np.uint64(node_ptr[u]), np.uint64(node_ptr[u + 1])):
            e = node_edges[j]
            s = ecache[e]  # S(e), cached per query (module docstring)
            if s != s:
                s = dot_row(q, edge_vec, e)
                ecache[e] = s
                etouched[cnt[N_TOUCHED_EDGES]] = e
                cnt[N_TOUCHED_EDGES] += 1
            val = A[u] * s
            if val <= 0.0:
                continue
            for k in range(np.uint64(edge_ptr[e]), np.uint64(edge_ptr[e + 1])):
                v = edge_nodes[k]
                if v != u:
                    if flag[v] == 0:  # touch(v)
                        flag[v] = 1
                        touched[cnt[N_TOUCHED_NODES]] = v
                        cnt[N_TOUCHED_NODES] += 1
                    if val > sp[v]:
                        sp[v] = val


@jit
def temporal(ix, sc, q, n_src, decay_kind, max_group, from_space):
    """a_time(v) = max over sources u with phi(u) = phi(v), v != u, of
    s(u) * S(e_v) * f(alpha_u |t_u - t_v|) * sim(q, c_v), floored at 0 (Alg. 1 l.15-20).
    Paper: the sources are the activated nodes and s(u) = A(u) (``from_space`` = 0).
    With ``from_space`` = beta > 0 the spatially bridged nodes are sources too, with
    s(u) = max(A(u), beta * a_space(u)) (our two-hop option: a name mentioned beside an
    activated one reaches its other states). ``n_src``: nodes ``sc.touched_nodes[:n_src]`` to consider.
    Groups with more than ``max_group`` members are skipped (inf: none).

    Exact and bounded: each eligible group is scanned once; for a member v the sources
    of its group are tried in decreasing s(u) and the scan stops once s(u) cannot beat
    the best so far (f <= 1). g_v = S(e_v) sim(q, c_v) factors out of the max and is
    computed in a second pass over the members, in the same order, with what it reads
    prefetched (members are scattered over the corpus).
    """
    node_chunk, node_group, group_ptr, group_nodes, group_alpha = ix.node_chunk, ix.node_group, ix.group_ptr, ix.group_nodes, ix.group_alpha
    node_ptr, node_edges, edge_vec, chunk_vec = ix.node_ptr, ix.node_edges, ix.edge_vec, ix.chunk_vec
    A, sp, tm, g, flag, touched = sc.A, sc.a_space, sc.a_time, sc.g_cache, sc.node_flag, sc.touched_nodes
    ecache, etouched, ccache, ctouched, cnt = sc.edge_S, sc.touched_edges, sc.chunk_sim, sc.touched_sims, sc.counters
    src = np.empty(n_src, dtype=np.int64)
    strength = np.empty(n_src, dtype=np.float64)
    m = 0
    for i in range(n_src):
        u = touched[i]
        gid = node_group[u]
        size = group_ptr[gid + 1] - group_ptr[gid]
        if size >= 2 and size <= max_group:
            s_u = max(A[u], from_space * sp[u])
            if s_u > 0.0:
                src[m] = u
                strength[m] = s_u
                m += 1
    if m == 0:
        return
    order = np.argsort(-strength[:m], kind="mergesort")
    src = src[:m][order]
    strength = strength[:m][order]
    order = np.argsort(node_group[src], kind="mergesort")
    src = src[order]
    strength = strength[order]
    total = 0
    for i in range(m):
        gid = node_group[src[i]]
        if i == 0 or node_group[src[i - 1]] != gid:
            total += group_ptr[gid + 1] - group_ptr[gid]
    # 1. per member v of each eligible group: best = max_u A(u) f(alpha |t_u - t_v|)
    pend = np.empty(total, dtype=np.int64)
    pbest = np.empty(total, dtype=np.float64)
    n_p = 0
    i = 0
    while i < m:
        gid = node_group[src[i]]
        j = i
        while j < m and node_group[src[j]] == gid:
            j += 1
        alpha = group_alpha[gid]
        for k in range(np.uint64(group_ptr[gid]), np.uint64(group_ptr[gid + 1])):
            v = group_nodes[k]
            tv = np.float64(node_chunk[v])
            best = 0.0
            for t in range(i, j):
                if strength[t] <= best:
                    break
                u = src[t]
                if u == v:
                    continue
                val = strength[t] * decay(decay_kind, alpha * abs(np.float64(node_chunk[u]) - tv))
                if val > best:
                    best = val
            if best > 0.0:
                pend[n_p] = v
                pbest[n_p] = best
                n_p += 1
        i = j
    # 2. a_time(v) = best * g_v, prefetched in a pipeline: 4 AHEAD on, v's own entries;
    # 2 AHEAD on, its cached sims; AHEAD on, the embedding rows still needed.
    for t in range(-4 * AHEAD, n_p):
        t2 = t + 4 * AHEAD
        if t2 < n_p:
            v = pend[t2]
            prefetch_at(node_ptr, v)
            prefetch_at(node_chunk, v)
            prefetch_at(g, v)
            prefetch_at(flag, v)
            prefetch_at(tm, v)
        t1 = t + 2 * AHEAD
        if 0 <= t1 < n_p:
            v = pend[t1]
            if g[v] != g[v]:
                prefetch_at(ccache, node_chunk[v])
                for jj in range(np.uint64(node_ptr[v]), np.uint64(node_ptr[v + 1])):
                    prefetch_at(ecache, node_edges[jj])
        t0 = t + AHEAD
        if 0 <= t0 < n_p:
            v = pend[t0]
            if g[v] != g[v]:
                c = node_chunk[v]
                if ccache[c] != ccache[c]:
                    prefetch_row(chunk_vec, c)
                prefetch_edges(v, node_ptr, node_edges, edge_vec, ecache)
        if t < 0:
            continue
        v = pend[t]
        x = g[v]  # g_v = S(e_v) sim(q, c_v), cached per query in g
        if x != x:
            best = -np.inf
            for jj in range(np.uint64(node_ptr[v]), np.uint64(node_ptr[v + 1])):
                e = node_edges[jj]
                s = ecache[e]
                if s != s:
                    s = dot_row(q, edge_vec, e)
                    ecache[e] = s
                    etouched[cnt[N_TOUCHED_EDGES]] = e
                    cnt[N_TOUCHED_EDGES] += 1
                if s > best:
                    best = s
            if best == -np.inf:
                x = 0.0
            else:
                c = node_chunk[v]
                s = ccache[c]
                if s != s:
                    s = dot_row(q, chunk_vec, c)
                    ccache[c] = s
                    ctouched[cnt[N_TOUCHED_SIMS]] = c
                    cnt[N_TOUCHED_SIMS] += 1
                x = best * s
            g[v] = x
        val = pbest[t] * x
        if flag[v] == 0:  # touch(v): listed for the reset (g_v is cached)
            flag[v] = 1
            touched[cnt[N_TOUCHED_NODES]] = v
            cnt[N_TOUCHED_NODES] += 1
        if val > tm[v]:
            tm[v] = val


@jit
def run_stibp(ix, sc, q, cand_nodes, seed_nodes, seed_values, prm):
    """Steps 2-5 of docs/architecture.md §4; the aggregate a(v) is :func:`aggregate`. Returns the
    number of activated nodes."""
    n_active = activate(ix, sc, q, cand_nodes, seed_nodes, seed_values, prm[P.DELTA])
    if prm[P.SPATIAL] != 0:
        spatial(ix, sc, q, n_active)
    if prm[P.TEMPORAL] != 0:
        beta = prm[P.TEMPORAL_FROM_SPACE]
        n_src = sc.counters[N_TOUCHED_NODES] if beta > 0.0 else n_active
        temporal(ix, sc, q, n_src, int(prm[P.DECAY]), prm[P.TEMPORAL_MAX_GROUP], beta)
    return n_active


@jit
def aggregate(sc, v, div):
    """a(v) = (A(v) + a_space(v) + a_time(v)) / div (paper: div = 3, the mean); inner
    loops write this out on the scratch arrays (module docstring)."""
    return (sc.A[v] + sc.a_space[v] + sc.a_time[v]) / div
