"""STITCH query engine: validates inputs, keeps one scratch per thread, calls the kernel.

The engine sees vectors and candidate ids only; candidate search (ANN / exact / BM25)
and query embedding happen before it (DESIGN §3 step 1).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from .hypergraph import Hypergraph
from .kernels.query import check_inputs, stitch_query
from .kernels.scratch import new_scratch
from .options import StitchOptions, group_alphas, group_weights

_EMPTY_I = np.empty(0, dtype=np.int64)
_EMPTY_F = np.empty(0, dtype=np.float64)


@dataclass(frozen=True)
class StitchResult:
    """Top-k chunk ids (best first) and scores; with ``detail`` every intermediate of
    Alg. 1: per touched node A, a_space, a_time, a; per read hyperedge S(e); per chunk
    of C_q sim(q, c), Score, prior p and PPR pi."""

    chunk_ids: np.ndarray
    scores: np.ndarray
    cq: np.ndarray
    cq_sim: np.ndarray
    cq_score: np.ndarray
    cq_prior: np.ndarray
    cq_pi: np.ndarray
    node_ids: np.ndarray
    node_A: np.ndarray
    node_space: np.ndarray
    node_time: np.ndarray
    node_a: np.ndarray
    edge_ids: np.ndarray
    edge_S: np.ndarray
    stats: np.ndarray  # |C_q|, chunk-graph arrows, PPR iterations/pushes, touched nodes


class StitchEngine:
    """Runs STITCH-RAG Alg. 1 (lines 2-31) on one hypergraph and its embeddings.

    Thread-safe: each thread gets its own scratch (corpus-sized, allocated once); the
    kernel releases the GIL, so queries from several threads run in parallel.
    """

    def __init__(self, graph: Hypergraph, node_vec, edge_vec, chunk_vec) -> None:
        self.graph = graph
        self.node_vec = _vectors("node_vec", node_vec, graph.n_nodes)
        self.edge_vec = _vectors("edge_vec", edge_vec, graph.n_edges)
        self.chunk_vec = _vectors("chunk_vec", chunk_vec, graph.n_chunks)
        dims = {m.shape[1] for m in (self.node_vec, self.edge_vec, self.chunk_vec)}
        if len(dims) != 1:
            raise ValueError(f"node, edge and chunk vectors differ in dimension: {sorted(dims)}")
        self.dim = dims.pop()
        self._local = threading.local()
        self._weights: dict[tuple, tuple] = {}
        self._lock = threading.Lock()

    def _derived(self, opts: StitchOptions) -> tuple[np.ndarray, np.ndarray]:
        key = (opts.group_weight, opts.alpha, opts.alpha_value)
        got = self._weights.get(key)
        if got is None:
            g = self.graph
            sizes = g.group_sizes()
            got = (
                group_weights(opts.group_weight, sizes, g.group_chunks, g.n_chunks),
                group_alphas(opts.alpha, opts.alpha_value, sizes),
            )
            with self._lock:
                self._weights[key] = got
        return got

    def kernel_arrays(self, opts: StitchOptions) -> tuple:
        g = self.graph
        gw, ga = self._derived(opts)
        return (g.node_chunk, g.node_group, g.nc_ptr, g.nc_chunks, g.edge_ptr, g.edge_nodes,
                g.node_ptr, g.node_edges, g.group_ptr, g.group_nodes, g.chunk_ptr,
                g.chunk_nodes, g.group_chunks, self.node_vec, self.edge_vec, self.chunk_vec,
                gw, ga)

    def _scratch(self):
        sc = getattr(self._local, "scratch", None)
        if sc is None:
            g = self.graph
            sc = new_scratch(g.n_nodes, g.n_edges, g.n_chunks, max(g.n_groups, 1))
            self._local.scratch = sc
        return sc

    def query(
        self,
        q,
        cand_nodes,
        cand_chunks,
        options: StitchOptions | None = None,
        chunk_bonus=None,
        seed_nodes=None,
        seed_values=None,
        detail: bool = False,
    ) -> StitchResult:
        """Rank chunks for query vector ``q`` given the candidate entity states V0 and
        chunks C0 (``chunk_bonus`` adds a per-candidate term to the prior I(c);
        ``seed_nodes`` get A(v) >= ``seed_values``)."""
        opts = options or StitchOptions()
        q = np.ascontiguousarray(q, dtype=self.node_vec.dtype).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"query vector has dimension {q.shape[0]}, index has {self.dim}")
        g = self.graph
        cn = _ids(cand_nodes)
        cc = _ids(cand_chunks)
        bonus = (np.zeros(cc.shape[0]) if chunk_bonus is None
                 else np.ascontiguousarray(chunk_bonus, dtype=np.float64).reshape(-1))
        if bonus.shape[0] != cc.shape[0]:
            raise ValueError("chunk_bonus must have one value per candidate chunk")
        sn = _EMPTY_I if seed_nodes is None else _ids(seed_nodes)
        sv = (np.ones(sn.shape[0]) if seed_values is None
              else np.ascontiguousarray(seed_values, dtype=np.float64).reshape(-1))
        if sv.shape[0] != sn.shape[0]:
            raise ValueError("seed_values must have one value per seed node")
        bad = check_inputs(q, cn, cc, sn, g.n_nodes, g.n_chunks)
        if bad:
            if bad == 1:
                raise ValueError("query vector holds NaN or inf")
            name, n = {2: ("cand_nodes", g.n_nodes), 3: ("cand_chunks", g.n_chunks),
                       4: ("seed_nodes", g.n_nodes)}[bad]
            raise ValueError(f"{name} holds ids outside [0, {n})")
        out = stitch_query(self.kernel_arrays(opts), self._scratch(), q, cn, cc, bonus, sn, sv,
                           opts.to_params(), detail)
        top, scores, cq, cd, nid, nd, eid, ev, stats = out
        return StitchResult(top, scores, cq, cd[0], cd[1], cd[2], cd[3], nid, nd[0], nd[1],
                            nd[2], nd[3], eid, ev, stats)

    def warmup(self, options: StitchOptions | None = None) -> None:
        """Compile (or load from cache) and run one query, so a service pays no JIT
        cost on its first real request."""
        g = self.graph
        q = self.chunk_vec[0] if g.n_chunks else np.zeros(self.dim, self.node_vec.dtype)
        self.query(q, np.arange(min(g.n_nodes, 4)), np.arange(min(g.n_chunks, 4)), options)
        self.query(q, np.arange(min(g.n_nodes, 4)), np.arange(min(g.n_chunks, 4)), options, detail=True)


def _vectors(name: str, m, n: int) -> np.ndarray:
    m = np.asarray(m)
    if m.ndim != 2 or m.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n}, dim), got {m.shape}")
    if m.dtype not in (np.float32, np.float64):
        m = m.astype(np.float32)
    return np.ascontiguousarray(m)


def _ids(a) -> np.ndarray:
    """int64, contiguous, flat (range-checked in ``check_inputs``)."""
    return np.ascontiguousarray(a, dtype=np.int64).reshape(-1)
