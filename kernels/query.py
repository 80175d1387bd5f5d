"""One STITCH query, STITCH-RAG Alg. 1 (docs/architecture.md §4 steps 2-6), in one compiled call."""
from __future__ import annotations

import numpy as np

from . import params as P
from .layout import N_TOUCHED_EDGES, N_TOUCHED_NODES, QueryOut
from ._config import jit
from .chunk_graph import chunk_graph, chunk_groups
from .ppr import ppr_power_topk, topk_desc
from .ppr_factored import ppr_factored_topk
from .ppr_local import local_push_dense
from .projection import chunk_prior, project_scores, query_chunk_set
from .scratch import reset_scratch
from .stibp import aggregate, run_stibp


@jit
def _node_detail(sc, div):
    cnt = sc.counters
    n = cnt[N_TOUCHED_NODES]
    ids = sc.touched_nodes[:n].copy()
    out = np.empty((4, n), dtype=np.float64)
    for i in range(n):
        v = ids[i]
        out[0, i] = sc.A[v]
        out[1, i] = sc.a_space[v]
        out[2, i] = sc.a_time[v]
        out[3, i] = aggregate(sc, v, div)
    return ids, out


@jit
def _edge_detail(sc):
    n = sc.counters[N_TOUCHED_EDGES]
    ids = sc.touched_edges[:n].copy()
    vals = np.empty(n, dtype=np.float64)
    for i in range(n):
        vals[i] = sc.edge_S[ids[i]]
    return ids, vals


@jit
def _outside(ids, n):
    for i in range(ids.shape[0]):
        if ids[i] < 0 or ids[i] >= n:
            return True
    return False


@jit
def check_inputs(q, cand_nodes, cand_chunks, seed_nodes, n_nodes, n_chunks):
    """0 if the query inputs are valid, else which one is not: 1 q holds NaN / inf,
    2 cand_nodes, 3 cand_chunks, 4 seed_nodes hold an id outside the index (one compiled
    pass instead of one NumPy reduction per check: less time under the GIL)."""
    for i in range(q.shape[0]):
        if not np.isfinite(q[i]):
            return 1
    if _outside(cand_nodes, n_nodes):
        return 2
    if _outside(cand_chunks, n_chunks):
        return 3
    if _outside(seed_nodes, n_nodes):
        return 4
    return 0


@jit
def stitch_query(ix, sc, q, cand_nodes, cand_chunks, chunk_bonus, seed_nodes, seed_values, prm, detail):
    """Top-k chunks for one query vector (STITCH-RAG Alg. 1 lines 2-31).

    ``ix``: :class:`~.layout.IndexArrays`; ``sc``: this thread's :class:`~.layout.Scratch`;
    ``prm``: the float64 vector of :mod:`.params`. Returns a :class:`~.layout.QueryOut`
    (stats: |C_q|, graph size (arrows; chunk-group incidences for the factored PPR), PPR
    iterations or pushes, touched nodes). Without ``detail`` the node and edge arrays are
    empty.
    """
    div = prm[P.AGG_DIV]
    run_stibp(ix, sc, q, cand_nodes, seed_nodes, seed_values, prm)
    cq = query_chunk_set(ix, sc, cand_chunks, div)
    score = project_scores(ix, sc, div)
    prior, sims = chunk_prior(ix, sc, q, cq, score, cand_chunks, chunk_bonus, prm)
    kind = int(prm[P.PPR])
    stats = np.zeros(4, dtype=np.int64)
    stats[0] = cq.shape[0]
    stats[3] = sc.counters[N_TOUCHED_NODES]
    if kind == P.PPR_NONE:
        pi = prior.copy()
    elif kind == P.PPR_FACTORED:
        cg_ptr, cg, gptr, members, gn = chunk_groups(ix, sc, cq, prm[P.GRAPH_MAX_GROUP])
        stats[1] = cg.shape[0]
        pi, its, _b, _cert = ppr_factored_topk(cg_ptr, cg, gptr, members, 1.0 / gn, prior, prm[P.DAMPING],
                                               prm[P.TOL], int(prm[P.MAX_ITER]), int(prm[P.TOPK]))
        stats[2] = its
    else:
        ptr, nbr, w, wsum = chunk_graph(ix, sc, cq, prm[P.GRAPH_MAX_GROUP], int(prm[P.GRAPH_WEIGHT]))
        stats[1] = nbr.shape[0]
        m = prior.shape[0]
        if kind == P.PPR_AUTO:  # the measured rule of config.ppr_solver
            nnz = 0
            for i in range(m):
                nnz += prior[i] > 0.0
            push = m >= prm[P.PUSH_MIN_CHUNKS] and nnz <= prm[P.PUSH_MAX_FRACTION] * m
            kind = P.PPR_PUSH if push else P.PPR_POWER
        if kind == P.PPR_POWER:
            pi, its, _b, _cert = ppr_power_topk(ptr, nbr, w, wsum, prior, prm[P.DAMPING], prm[P.TOL],
                                                int(prm[P.MAX_ITER]), int(prm[P.TOPK]))
            stats[2] = its
        else:  # local push; the chunk graph is symmetric by construction (w_ij = w_ji)
            pi, _cert, pushes, _bmax = local_push_dense(ptr, nbr, w, wsum, prior, prm[P.DAMPING], prm[P.TOL],
                                                        int(prm[P.TOPK]), True)
            stats[2] = pushes
    order = topk_desc(pi, int(prm[P.TOPK]))
    top_ids = cq[order].astype(np.int64)
    top_scores = pi[order]
    chunk_detail = np.empty((4, cq.shape[0]), dtype=np.float64)
    chunk_detail[0] = sims
    chunk_detail[1] = score
    chunk_detail[2] = prior
    chunk_detail[3] = pi
    if detail:
        node_ids, node_detail = _node_detail(sc, div)
        edge_ids, edge_vals = _edge_detail(sc)
    else:
        node_ids, node_detail = np.empty(0, dtype=np.int32), np.empty((4, 0), dtype=np.float64)
        edge_ids, edge_vals = np.empty(0, dtype=np.int32), np.empty(0, dtype=np.float64)
    reset_scratch(sc, cq)
    return QueryOut(top_ids, top_scores, cq, chunk_detail, node_ids, node_detail, edge_ids, edge_vals, stats)
