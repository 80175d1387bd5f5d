"""STIBP: activation, spatial and temporal bridging, aggregation (STITCH-RAG §3.3, Alg. 1 l.1-22).

State lives in a per-thread scratch (see :mod:`.scratch`): dense arrays sized to the
corpus, allocated once, of which a query dirties only what it touches and resets
afterwards. Work per query is proportional to the activated hyperedges and groups.
"""
from __future__ import annotations

import numpy as np

from . import params as P
from ._config import jit


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
def cached_dot(i, q, mat, cache, touched, cnt, slot):
    """sim(q, mat[i]) computed once per query: cached in ``cache``, listed in ``touched``."""
    s = cache[i]
    if s != s:
        s = dot_row(q, mat, i)
        cache[i] = s
        touched[cnt[slot]] = i
        cnt[slot] += 1
    return s


@jit
def edge_sim(e, q, edge_vec, sc):
    """S(e) = sim(q, e), cached per query."""
    return cached_dot(e, q, edge_vec, sc[6], sc[7], sc[14], 1)


@jit
def chunk_sim(c, q, chunk_vec, sc):
    """sim(q, c), cached per query."""
    return cached_dot(c, q, chunk_vec, sc[8], sc[9], sc[14], 2)


@jit
def touch_node(v, sc):
    flag, touched, cnt = sc[4], sc[5], sc[14]
    if flag[v] == 0:
        flag[v] = 1
        touched[cnt[0]] = v
        cnt[0] += 1


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
    are ``sc[5][:n]``."""
    node_vec = ix[13]
    A = sc[0]
    for i in range(cand_nodes.shape[0]):
        v = cand_nodes[i]
        s = dot_row(q, node_vec, v)
        if s > delta:
            touch_node(v, sc)
            if s > A[v]:
                A[v] = s
    for i in range(seed_nodes.shape[0]):
        v = seed_nodes[i]
        if seed_values[i] > 0.0:
            touch_node(v, sc)
            if seed_values[i] > A[v]:
                A[v] = seed_values[i]
    return sc[14][0]


@jit
def spatial(ix, sc, q, n_active):
    """a_space(v) = max over activated u, hyperedges e containing u and v != u of
    A(u) * S(e), floored at 0 (Alg. 1 l.9-14)."""
    edge_ptr, edge_nodes, node_ptr, node_edges, edge_vec = ix[4], ix[5], ix[6], ix[7], ix[14]
    A, sp, touched = sc[0], sc[1], sc[5]
    for i in range(n_active):
        u = touched[i]
        for j in range(node_ptr[u], node_ptr[u + 1]):
            e = node_edges[j]
            val = A[u] * edge_sim(e, q, edge_vec, sc)
            if val <= 0.0:
                continue
            for k in range(edge_ptr[e], edge_ptr[e + 1]):
                v = edge_nodes[k]
                if v != u:
                    touch_node(v, sc)
                    if val > sp[v]:
                        sp[v] = val


@jit
def node_gain(v, ix, sc, q):
    """g_v = S(e_v) * sim(q, c_v), S(e_v) the max S over v's hyperedges; cached per query."""
    g = sc[3]
    x = g[v]
    if x != x:
        node_chunk, node_ptr, node_edges, edge_vec, chunk_vec = ix[0], ix[6], ix[7], ix[14], ix[15]
        best = -np.inf
        for j in range(node_ptr[v], node_ptr[v + 1]):
            s = edge_sim(node_edges[j], q, edge_vec, sc)
            if s > best:
                best = s
        if best == -np.inf:
            x = 0.0
        else:
            x = best * chunk_sim(node_chunk[v], q, chunk_vec, sc)
        g[v] = x
        touch_node(v, sc)  # so that the reset clears the cached gain
    return x


@jit
def temporal(ix, sc, q, n_src, decay_kind, max_group, from_space):
    """a_time(v) = max over sources u with phi(u) = phi(v), v != u, of
    s(u) * S(e_v) * f(alpha_u |t_u - t_v|) * sim(q, c_v), floored at 0 (Alg. 1 l.15-20).
    Paper: the sources are the activated nodes and s(u) = A(u) (``from_space`` = 0).
    With ``from_space`` = beta > 0 the spatially bridged nodes are sources too, with
    s(u) = max(A(u), beta * a_space(u)) (our two-hop option: a name mentioned beside an
    activated one reaches its other states). ``n_src``: nodes ``sc[5][:n_src]`` to consider.
    Groups with more than ``max_group`` members are skipped (inf: none).

    Exact and bounded: each eligible group is scanned once; for a member v the sources
    of its group are tried in decreasing s(u) and the scan stops once s(u) cannot beat
    the best so far (f <= 1). g_v = S(e_v) sim(q, c_v) factors out of the max.
    """
    node_chunk, node_group, group_ptr, group_nodes, group_alpha = ix[0], ix[1], ix[8], ix[9], ix[17]
    A, sp, tm, touched = sc[0], sc[1], sc[2], sc[5]
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
    i = 0
    while i < m:
        gid = node_group[src[i]]
        j = i
        while j < m and node_group[src[j]] == gid:
            j += 1
        alpha = group_alpha[gid]
        for k in range(group_ptr[gid], group_ptr[gid + 1]):
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
                val = best * node_gain(v, ix, sc, q)
                if val > 0.0:
                    touch_node(v, sc)
                    if val > tm[v]:
                        tm[v] = val
        i = j


@jit
def run_stibp(ix, sc, q, cand_nodes, seed_nodes, seed_values, prm):
    """Steps 2-5 of DESIGN §3; the aggregate a(v) is :func:`aggregate`. Returns the
    number of activated nodes."""
    n_active = activate(ix, sc, q, cand_nodes, seed_nodes, seed_values, prm[P.DELTA])
    if prm[P.SPATIAL] != 0:
        spatial(ix, sc, q, n_active)
    if prm[P.TEMPORAL] != 0:
        beta = prm[P.TEMPORAL_FROM_SPACE]
        n_src = sc[14][0] if beta > 0.0 else n_active
        temporal(ix, sc, q, n_src, int(prm[P.DECAY]), prm[P.TEMPORAL_MAX_GROUP], beta)
    return n_active


@jit
def aggregate(sc, v, div):
    """a(v) = (A(v) + a_space(v) + a_time(v)) / div (paper: div = 3, the mean)."""
    return (sc[0][v] + sc[1][v] + sc[2][v]) / div
