"""One STITCH query replayed stage by stage, each stage timed (docs/architecture.md §4
steps 2-6): what ``benchmarks/bench_profile.py`` and ``bench_bandwidth.py`` measure.

``kernels.query.stitch_query`` runs the stages in one compiled call; :func:`query_stages`
calls the same compiled stage functions one by one from Python, in the same order and with
the same PPR choice, so each stage can be timed (each call pays a Numba dispatch, which
the profile measures and reports). tests/test_kernels_twins.py checks that it returns the
kernel's top-k, ids and scores, for every PPR solver.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .config import StitchOptions
from .engine import StitchEngine, kernel_params
from .kernels import params as P
from .kernels.chunk_graph import chunk_graph, chunk_groups
from .kernels.layout import N_TOUCHED_NODES
from .kernels.ppr import ppr_power_topk, topk_desc
from .kernels.ppr_factored import ppr_factored_topk
from .kernels.ppr_local import local_push_dense
from .kernels.projection import chunk_prior, project_scores, query_chunk_set
from .kernels.scratch import reset_scratch
from .kernels.stibp import activate, spatial, temporal

STAGES = ("activate", "spatial", "temporal", "query_chunk_set", "project_scores", "chunk_prior",
          "chunk_graph", "ppr", "topk_reset")


@dataclass(frozen=True)
class StagedQuery:
    """Seconds per stage (in :data:`STAGES` order), the top-k ids and scores, and sizes:
    activated nodes, |C_q|, chunk-graph arrows (chunk-group incidences when factored) and
    PPR iterations / pushes."""

    seconds: np.ndarray
    chunk_ids: np.ndarray
    scores: np.ndarray
    info: dict


def _ppr_kind(prior: np.ndarray, prm: np.ndarray) -> int:
    """The solver the kernel runs: ``ppr="auto"`` resolved by the measured rule."""
    kind = int(prm[P.PPR])
    if kind == P.PPR_AUTO:
        m = prior.shape[0]
        push = m >= prm[P.PUSH_MIN_CHUNKS] and int((prior > 0.0).sum()) <= prm[P.PUSH_MAX_FRACTION] * m
        kind = P.PPR_PUSH if push else P.PPR_POWER
    return kind


def query_stages(eng: StitchEngine, q, cand_nodes, cand_chunks, options: StitchOptions,
                 chunk_bonus=None, seed_nodes=None, seed_values=None,
                 clock: Callable[[], float] = time.perf_counter) -> StagedQuery:
    """:meth:`StitchEngine.query` (same inputs, no detail) stage by stage, timed by ``clock``."""
    q, cn, cc, bonus, sn, sv = eng.inputs(q, cand_nodes, cand_chunks, chunk_bonus,
                                          seed_nodes, seed_values)
    ix, sc, prm = eng.index_arrays(options), eng._scratch(), kernel_params(options)
    div = prm[P.AGG_DIV]
    t = [clock()]
    n_act = activate(ix, sc, q, cn, sn, sv, prm[P.DELTA])
    t.append(clock())
    if prm[P.SPATIAL] != 0:
        spatial(ix, sc, q, n_act)
    t.append(clock())
    if prm[P.TEMPORAL] != 0:  # as kernels.stibp.run_stibp
        beta = prm[P.TEMPORAL_FROM_SPACE]
        n_src = sc.counters[N_TOUCHED_NODES] if beta > 0.0 else n_act
        temporal(ix, sc, q, n_src, int(prm[P.DECAY]), prm[P.TEMPORAL_MAX_GROUP], beta)
    t.append(clock())
    cq = query_chunk_set(ix, sc, cc, div)
    t.append(clock())
    score = project_scores(ix, sc, div)
    t.append(clock())
    prior, _ = chunk_prior(ix, sc, q, cq, score, cc, bonus, prm)
    t.append(clock())
    kind, d, tol, k = int(prm[P.PPR]), prm[P.DAMPING], prm[P.TOL], int(prm[P.TOPK])
    arcs = work = 0
    if kind == P.PPR_NONE:
        t.append(clock())
        pi = prior.copy()
    elif kind == P.PPR_FACTORED:
        cg_ptr, cg, gptr, members, gn = chunk_groups(ix, sc, cq, prm[P.GRAPH_MAX_GROUP])
        t.append(clock())
        arcs = cg.shape[0]
        pi, work, _b, _c = ppr_factored_topk(cg_ptr, cg, gptr, members, 1.0 / gn, prior, d, tol,
                                             int(prm[P.MAX_ITER]), k)
    else:
        ptr, nbr, w, wsum = chunk_graph(ix, sc, cq, prm[P.GRAPH_MAX_GROUP], int(prm[P.GRAPH_WEIGHT]))
        t.append(clock())
        arcs = nbr.shape[0]
        if _ppr_kind(prior, prm) == P.PPR_POWER:
            pi, work, _b, _c = ppr_power_topk(ptr, nbr, w, wsum, prior, d, tol, int(prm[P.MAX_ITER]), k)
        else:
            pi, _c, work, _b = local_push_dense(ptr, nbr, w, wsum, prior, d, tol, k, True)
    t.append(clock())
    order = topk_desc(pi, k)
    ids, scores = cq[order].astype(np.int64), pi[order]
    reset_scratch(sc, cq)
    t.append(clock())
    return StagedQuery(np.diff(t), ids, scores, {"n_active": int(n_act), "cq": int(cq.shape[0]),
                                                 "arcs": int(arcs), "ppr_work": int(work)})
