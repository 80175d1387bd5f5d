"""Query-induced chunk set, projection and prior (STITCH-RAG §3.3, Alg. 1 l.23-28)."""
from __future__ import annotations

import numpy as np

from . import params as P
from .layout import N_CQ, N_TOUCHED_NODES, N_TOUCHED_SIMS
from ._config import jit
from .prefetch import prefetch_row
from .stibp import AHEAD, dot_row


@jit
def query_chunk_set(ix, sc, cand_chunks, div):
    """C_q = C0 plus every chunk holding a node with a(v) > 0, sorted by chunk id.

    Sets ``chunk_local[c]`` to each member's position; returns the member ids.
    """
    nc_ptr, nc_chunks = ix.nc_ptr, ix.nc_chunks
    A, sp, tm, touched, local, buf, cnt = sc.A, sc.a_space, sc.a_time, sc.touched_nodes, sc.chunk_local, sc.cq_buf, sc.counters
    m = 0
    for i in range(cand_chunks.shape[0]):
        c = cand_chunks[i]
        if local[c] == -1:
            local[c] = 0
            buf[m] = c
            m += 1
    for i in range(cnt[N_TOUCHED_NODES]):
        v = touched[i]
        if (A[v] + sp[v] + tm[v]) / div > 0.0:  # a(v), stibp.aggregate
            for j in range(np.uint64(nc_ptr[v]), np.uint64(nc_ptr[v + 1])):
                c = nc_chunks[j]
                if local[c] == -1:
                    local[c] = 0
                    buf[m] = c
                    m += 1
    cq = np.sort(buf[:m])
    for i in range(m):
        local[cq[i]] = i
    cnt[N_CQ] = m
    return cq


@jit
def project_scores(ix, sc, div):
    """Score(c) = sum over nodes v in c of a(v) * w(phi(v)); the paper's w is ln(1 + N_v),
    any per-group weight can be passed in ``group_weight``."""
    node_group, nc_ptr, nc_chunks, group_weight = ix.node_group, ix.nc_ptr, ix.nc_chunks, ix.group_weight
    A, sp, tm, touched, local, cnt = sc.A, sc.a_space, sc.a_time, sc.touched_nodes, sc.chunk_local, sc.counters
    score = np.zeros(cnt[N_CQ], dtype=np.float64)
    for i in range(cnt[N_TOUCHED_NODES]):
        v = touched[i]
        a = (A[v] + sp[v] + tm[v]) / div  # a(v), stibp.aggregate
        if a > 0.0:
            w = group_weight[node_group[v]]
            for j in range(np.uint64(nc_ptr[v]), np.uint64(nc_ptr[v + 1])):
                score[local[nc_chunks[j]]] += a * w
    return score


@jit
def chunk_prior(ix, sc, q, cq, score, cand_chunks, chunk_bonus, prm):
    """p(c) = I(c) / sum I over C_q, uniform if that sum is 0, with
    I(c) = lambda max(0, sim(q, c)) + ln(1 + Score(c)) + bonus(c) (continuous, paper)
    or I(c) = 1[Score(c) > 0] (binary prior). Returns (p, sim(q, c) over C_q)."""
    chunk_vec, local = ix.chunk_vec, sc.chunk_local
    m = cq.shape[0]
    sims = np.empty(m, dtype=np.float64)
    cache, ctouched, cnt = sc.chunk_sim, sc.touched_sims, sc.counters
    for i in range(-AHEAD, m):
        if i + AHEAD < m and cache[cq[i + AHEAD]] != cache[cq[i + AHEAD]]:
            prefetch_row(chunk_vec, cq[i + AHEAD])  # rows read at random: fetch ahead
        if i < 0:
            continue
        c = cq[i]
        s = cache[c]  # sim(q, c) cached per query (see kernels.stibp)
        if s != s:
            s = dot_row(q, chunk_vec, c)
            cache[c] = s
            ctouched[cnt[N_TOUCHED_SIMS]] = c
            cnt[N_TOUCHED_SIMS] += 1
        sims[i] = s
    prior = np.zeros(m, dtype=np.float64)
    if prm[P.PRIOR] == 0:
        lam = prm[P.LAMBDA]
        for i in range(m):
            prior[i] = lam * max(0.0, sims[i]) + np.log1p(score[i])
        for i in range(cand_chunks.shape[0]):
            prior[local[cand_chunks[i]]] += chunk_bonus[i]
    else:
        for i in range(m):
            if score[i] > 0.0:
                prior[i] = 1.0
    total = 0.0
    for i in range(m):
        total += prior[i]
    if total > 0.0:
        for i in range(m):
            prior[i] /= total
    elif m > 0:
        prior[:] = 1.0 / m
    return prior, sims
