"""STITCH query engine: validates inputs, keeps one scratch per thread, calls the kernel.

The engine sees vectors and candidate ids only; candidate search (ANN / exact / BM25)
and query embedding happen before it (docs/architecture.md §4 step 1). The arrays it
hands the kernel are the NamedTuples of ``kernels.layout``. Also the query steps over the
engine that the presets run (docs/architecture.md §5): further bridge rounds
(:func:`later_rounds`, gated by :func:`term_cover`), the chain columns (:func:`chain_links`)
and the question-style split of the ranker's columns (:func:`style_split`).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, replace

import numpy as np

from .hypergraph import ARRAY_FIELDS, Hypergraph
from .config import PUSH_MAX_FRACTION, PUSH_MIN_CHUNKS, STIBP_DIVISOR, StitchOptions
from .kernels import params as P
from .kernels.layout import IndexArrays
from .kernels.lexical import held_terms, residual_terms
from .kernels.links import group_best
from .kernels.query import check_inputs, stitch_query
from .kernels.scratch import new_scratch

_EMPTY_I = np.empty(0, dtype=np.int64)
_EMPTY_F = np.empty(0, dtype=np.float64)
_EMPTY_PTR = np.zeros(1, dtype=np.int64)
_CACHE_MAX = 16  # derived arrays / kernel parameters kept per engine (distinct options)


def unique(a: np.ndarray) -> np.ndarray:
    """``np.unique`` of a 1-D integer array (its sorted distinct values, its dtype),
    without importing ``numpy.ma`` as ``np.unique`` does (~8 ms of a cold query)."""
    s = np.sort(a)
    return s[np.concatenate([[True], s[1:] != s[:-1]])] if s.size else s


def csr_positions(ptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions ``ptr[r]..ptr[r + 1] - 1`` of every r in ``rows``, concatenated in that
    order, and the position in ``rows`` each came from (no Python loop)."""
    s = ptr[rows].astype(np.int64)
    n = ptr[rows + 1] - s
    owner = np.repeat(np.arange(rows.shape[0]), n)
    return np.arange(owner.shape[0]) + (s - (np.cumsum(n) - n))[owner], owner


def csr_rows(ptr: np.ndarray, values: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR entries ``values[ptr[r]:ptr[r + 1]]`` of every r in ``rows``, concatenated in
    that order, and the position in ``rows`` each came from (one gather)."""
    pos, owner = csr_positions(ptr, rows)
    return values[pos], owner


def chunk_group_best(g, chunks: np.ndarray, groups: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per chunk of ``chunks``: the largest ``weights[k]`` over its nodes' name groups found
    in the sorted ``groups`` (0 when none; docs/architecture.md §5, "Ranker features inside C_q")."""
    return group_best(g.chunk_ptr, g.chunk_nodes, g.node_group, np.ascontiguousarray(chunks, np.int64),
                      np.ascontiguousarray(groups, np.int64), np.ascontiguousarray(weights, np.float64))


def recip_rank(v: np.ndarray) -> np.ndarray:
    """1 / (1 + rank) by descending value (stable)."""
    out = np.empty(v.shape[0])
    out[np.argsort(-v, kind="stable")] = 1.0 / (1.0 + np.arange(v.shape[0]))
    return out


def idf_postings(bm25, text: str, log1p=np.log1p) -> tuple[np.ndarray, ...]:
    """``bm25.term_postings(text)`` (indptr, indices, terms: the question's postings, no
    copy) and per term its weight ``log1p(N / df)`` with the given ``log1p`` (``np.log1p``
    and ``math.log1p`` may differ in the last bit: each column keeps its own); no terms
    without a BM25 index."""
    if bm25 is None:
        return _EMPTY_PTR, _EMPTY_I, _EMPTY_I, _EMPTY_F
    ptr, idx, terms = bm25.term_postings(text)
    n = bm25.n_docs
    w = [float(log1p(n / max(df, 1))) for df in (ptr[terms + 1] - ptr[terms]).tolist()]
    return ptr, idx, terms, np.array(w, np.float64)


def term_cover(bm25, text: str, ids) -> float:
    """The idf-weighted share (ln(1 + N / df)) of the distinct known terms of ``text`` that
    at least one document of ``ids`` holds (``HybridOptions.hop_round_cover``; 1 with no
    term or no BM25 index)."""
    held, tot = held_terms(*idf_postings(bm25, text), np.ascontiguousarray(ids, np.int64))
    return held / tot if tot > 0 else 1.0


def later_rounds(eng, q, v0, cands, seeded, r, stitch, hybrid, detail, used, bridge, seed, cover=None):
    """``HybridOptions.hop_rounds`` > 1: each further round takes the best chunk t of the
    last ranking not used as a bridge source yet, adds its bridge names' chunks
    (``bridge(t)`` = ``stitch.bridge_chunks``' (ids, weights); prior term hop_bridge x
    weight) and its rare names as seeds (``seed(t, seeds)`` = ``stitch.hop_seeds``), and
    runs STITCH again on the grown candidates: a chain of passages each naming the next
    (a 3-4 hop question) is followed one link per round; with ``hop_round_cover`` < 1 a round
    runs only while ``cover(ids)`` (:func:`term_cover`) of the last ranking's two top chunks is
    at most hop_round_cover (a chain whose top two already hold the question stops)."""
    (c0, bonus), (seeds, values) = cands, seeded
    for _ in range(hybrid.hop_rounds - 1):
        if hybrid.hop_round_cover < 1.0 and cover is not None and cover(r.chunk_ids[:2]) > hybrid.hop_round_cover:
            break
        t = next((int(c) for c in r.chunk_ids.tolist() if int(c) not in used), None)
        if t is None:
            break
        used.add(t)
        b_c, b_v = bridge(t)
        hop, hop_v = seed(t, seeds)
        if not b_c.size and not hop.size:
            continue
        c0 = np.concatenate([c0, b_c])
        bonus = np.concatenate([bonus, hybrid.hop_bridge * b_v])
        seeds, values = np.concatenate([seeds, hop]), np.concatenate([values, hop_v])
        r = eng.query(q, v0, c0, stitch, chunk_bonus=bonus, seed_nodes=seeds,
                      seed_values=values, detail=detail)
    return r, c0, seeds


def chain_links(eng, bm25, text: str, q: np.ndarray, r, t0: int, names, bridge) -> dict:
    """``settings.CHAIN_LINKS`` columns of ``names`` (issue 21, session 18; docs/architecture.md
    §5, "Ranker features inside C_q"): the later hops of a chain q -> t0 -> t1 -> ..., t1 = the
    final round's best chunk by PPR other than t0 (rows t0 and t1 0). hop2_rank = 1 / (1 +
    rank) in C_q of sim(c, normalize(q + v(t0) + v(t1))); residual_cover2 = the idf share of
    the question's terms a chunk holds and both t0 and t1 lack; chain_bridge = the largest
    weight of t1's bridge groups (``bridge(t1)`` = ``stitch.bridge_groups`` with t0's groups
    named too) among the chunk's name groups."""
    cq, pi, g = np.asarray(r.cq, np.int64), np.asarray(r.cq_pi), eng.graph
    order = cq[np.argsort(-pi, kind="stable")]
    t1 = next((int(c) for c in order.tolist() if c != t0), -1)
    own, n, out = (cq == t0) | (cq == t1), cq.shape[0], {}
    if t1 < 0:
        return {k: np.zeros(n) for k in names if k in ("hop2_rank", "residual_cover2", "chain_bridge")}
    if "hop2_rank" in names:
        hv = np.asarray(q, np.float64) + eng.chunk_vec[t0].astype(np.float64) + eng.chunk_vec[t1].astype(np.float64)
        hs = eng.chunk_vec[cq].astype(np.float64) @ (hv / max(float(np.sqrt(hv @ hv)), 1e-12))
        hs[own] = -np.inf
        out["hop2_rank"] = np.where(own, 0.0, recip_rank(hs))
    if "residual_cover2" in names:  # BM25.residual_cover's loop with two sources (np.log1p: the grid's floats)
        res = np.zeros(n)
        tot = residual_terms(*idf_postings(bm25, text), np.append(cq, [t0, t1]), 2, res)
        out["residual_cover2"] = np.where(own, 0.0, res / tot if tot > 0 else res)
    if "chain_bridge" in names:
        out["chain_bridge"] = np.where(own, 0.0, chunk_group_best(g, cq, *bridge(t1, t0)))
    return out


def style_split(X: np.ndarray, unnamed: bool, n_links: int, mode: str) -> np.ndarray:
    """``HybridOptions.rank_split`` (session 20; docs/architecture.md §5, "Question style split"):
    X with its columns ("all") or its last ``n_links`` columns ("links") appended once more,
    times u = 1 when the question names no page title, else 0 ("off": X unchanged)."""
    if mode == "off":
        return X
    extra = X if mode == "all" else X[:, X.shape[1] - n_links:]
    return np.column_stack([X, extra * float(unnamed)])


def split_names(names: tuple[str, ...], n_links: int, mode: str) -> tuple[str, ...]:
    """The ranker's column names after :func:`style_split` (a copy is "unnamed:" + name)."""
    if mode == "off":
        return names
    return names + tuple("unnamed:" + n for n in (names if mode == "all" else names[len(names) - n_links:]))


def run_starts(a: np.ndarray) -> np.ndarray:
    """Where each run of equal values of the sorted, non-empty array ``a`` starts."""
    return np.flatnonzero(np.concatenate([[True], a[1:] != a[:-1]]))


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
        self.graph = plain_arrays(graph)
        self.node_vec = _vectors("node_vec", node_vec, graph.n_nodes)
        self.edge_vec = _vectors("edge_vec", edge_vec, graph.n_edges)
        self.chunk_vec = _vectors("chunk_vec", chunk_vec, graph.n_chunks)
        dims = {m.shape[1] for m in (self.node_vec, self.edge_vec, self.chunk_vec)}
        if len(dims) != 1:
            raise ValueError(f"node, edge and chunk vectors differ in dimension: {sorted(dims)}")
        self.dim = dims.pop()
        self.n_nodes, self.n_chunks = graph.n_nodes, graph.n_chunks
        self._local = threading.local()
        self._weights: dict[tuple, tuple] = {}
        self._arrays: dict[tuple, IndexArrays] = {}
        self._params: dict[tuple, np.ndarray] = {}  # kernel_params per options and auto-PPR table
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
            _keep(self._lock, self._weights, key, got)
        return got

    def index_arrays(self, opts: StitchOptions) -> IndexArrays:
        """The arrays the query kernel reads, with the group weights of ``opts`` (made once
        per weighting)."""
        key = (opts.group_weight, opts.alpha, opts.alpha_value)
        ix = self._arrays.get(key)
        if ix is None:
            ix = _keep(self._lock, self._arrays, key, self._index_arrays(opts))
        return ix

    def _index_arrays(self, opts: StitchOptions) -> IndexArrays:
        g = self.graph
        gw, ga = self._derived(opts)
        a = np.asarray  # memory maps as plain views: Numba types those in C (same types)
        return IndexArrays(
            node_chunk=a(g.node_chunk), node_group=a(g.node_group), nc_ptr=a(g.nc_ptr),
            nc_chunks=a(g.nc_chunks), edge_ptr=a(g.edge_ptr), edge_nodes=a(g.edge_nodes),
            node_ptr=a(g.node_ptr), node_edges=a(g.node_edges), group_ptr=a(g.group_ptr),
            group_nodes=a(g.group_nodes), chunk_ptr=a(g.chunk_ptr), chunk_nodes=a(g.chunk_nodes),
            group_chunks=a(g.group_chunks), node_vec=a(self.node_vec), edge_vec=a(self.edge_vec),
            chunk_vec=a(self.chunk_vec), group_weight=gw, group_alpha=ga)

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
        options: StitchOptions,
        chunk_bonus=None,
        seed_nodes=None,
        seed_values=None,
        detail: bool = False,
    ) -> StitchResult:
        """Rank chunks for query vector ``q`` given the candidate entity states V0 and
        chunks C0 (``chunk_bonus`` adds a per-candidate term to the prior I(c);
        ``seed_nodes`` get A(v) >= ``seed_values``). ``options`` is required: the
        presets are in :mod:`hyperrag_fast.config`."""
        q, cn, cc, bonus, sn, sv = self.inputs(q, cand_nodes, cand_chunks, chunk_bonus,
                                               seed_nodes, seed_values)
        key = (options, PUSH_MIN_CHUNKS, PUSH_MAX_FRACTION)  # all that kernel_params reads
        prm = self._params.get(key)
        if prm is None:  # one vector per options (a query runs the kernel two or three times)
            prm = _keep(self._lock, self._params, key, kernel_params(options))
        o = stitch_query(self.index_arrays(options), self._scratch(), q, cn, cc, bonus, sn, sv, prm, detail)
        cd, nd = o.chunk_detail, o.node_detail
        return StitchResult(o.top_ids, o.top_scores, o.cq, cd[0], cd[1], cd[2], cd[3], o.node_ids,
                            nd[0], nd[1], nd[2], nd[3], o.edge_ids, o.edge_S, o.stats)

    def inputs(self, q, cand_nodes, cand_chunks, chunk_bonus=None, seed_nodes=None,
               seed_values=None) -> tuple[np.ndarray, ...]:
        """The query's inputs as the kernel takes them (contiguous, typed), checked:
        ValueError names a wrong dimension, a NaN / inf, an id outside the index or a
        length that does not match."""
        q = np.ascontiguousarray(q, dtype=self.node_vec.dtype).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"query vector has dimension {q.shape[0]}, index has {self.dim}")
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
        bad = check_inputs(q, cn, cc, sn, self.n_nodes, self.n_chunks)
        if bad:
            if bad == 1:
                raise ValueError("query vector holds NaN or inf")
            name, n = {2: ("cand_nodes", self.n_nodes), 3: ("cand_chunks", self.n_chunks),
                       4: ("seed_nodes", self.n_nodes)}[bad]
            raise ValueError(f"{name} holds ids outside [0, {n})")
        return q, cn, cc, bonus, sn, sv

    def warmup(self, options: StitchOptions) -> None:
        """Compile (or load from cache) and run one query, so a service pays no JIT
        cost on its first real request."""
        g = self.graph
        q = self.chunk_vec[0] if g.n_chunks else np.zeros(self.dim, self.node_vec.dtype)
        self.query(q, np.arange(min(g.n_nodes, 4)), np.arange(min(g.n_chunks, 4)), options)
        self.query(q, np.arange(min(g.n_nodes, 4)), np.arange(min(g.n_chunks, 4)), options, detail=True)


def _keep(lock, cache: dict, key, value):
    """``cache[key] = value``, the oldest entry dropped past ``_CACHE_MAX`` (a service that
    sees many distinct options keeps a bounded set of derived arrays)."""
    with lock:
        while len(cache) >= _CACHE_MAX:
            cache.pop(next(iter(cache)))
        cache[key] = value
    return value


def plain_arrays(graph: Hypergraph) -> Hypergraph:
    """``graph`` with its arrays as plain ndarray views of the same memory (no copy): a
    slice of a memory map is a new ``np.memmap`` (about a microsecond of Python each), and
    the query's Python steps (hop seeds, bridges, name seeds) take hundreds of slices."""
    if not any(type(getattr(graph, k)) is not np.ndarray for k in ARRAY_FIELDS):
        return graph
    return replace(graph, **{k: np.asarray(getattr(graph, k)) for k in ARRAY_FIELDS})


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


_DECAYS = {"tanh": P.DECAY_TANH, "exp": P.DECAY_EXP, "sigmoid": P.DECAY_SIGMOID}
_PPRS = {"none": P.PPR_NONE, "power": P.PPR_POWER, "push": P.PPR_PUSH, "factored": P.PPR_FACTORED,
         "auto": P.PPR_AUTO}
_GRAPH_WEIGHTS = {"uniform": 0, "inverse_size": 1}
_PRIORS = {"continuous": 0, "binary": 1}


def kernel_params(o: StitchOptions) -> np.ndarray:
    """The float64 vector the query kernel reads (layout: ``kernels.params``)."""
    p = np.zeros(P.N_PARAMS, dtype=np.float64)
    p[P.DELTA], p[P.LAMBDA], p[P.DAMPING] = o.delta, o.lam, o.damping
    p[P.DECAY] = _DECAYS[o.decay]
    p[P.SPATIAL], p[P.TEMPORAL] = float(o.spatial), float(o.temporal)
    p[P.AGG_DIV] = STIBP_DIVISOR
    p[P.PRIOR] = _PRIORS[o.prior]
    p[P.TEMPORAL_MAX_GROUP] = o.temporal_max_group
    p[P.TEMPORAL_FROM_SPACE] = o.temporal_from_space
    p[P.GRAPH_MAX_GROUP] = o.graph_max_group
    p[P.GRAPH_WEIGHT] = _GRAPH_WEIGHTS[o.graph_weight]
    p[P.PPR] = _PPRS[o.ppr]
    p[P.TOL], p[P.MAX_ITER], p[P.TOPK] = o.tol, o.max_iter, o.top_k
    # ppr="auto": the table of config.ppr_solver, read here (no config call on the query route)
    p[P.PUSH_MIN_CHUNKS] = PUSH_MIN_CHUNKS
    p[P.PUSH_MAX_FRACTION] = next((f for d_max, f in PUSH_MAX_FRACTION if o.damping <= d_max), 0.0)
    return p


def group_weights(kind: str, group_sizes: np.ndarray, group_chunks: np.ndarray, n_chunks: int) -> np.ndarray:
    """Per-group projection weight w(g): ln(1 + N_g) (paper) or IDF ln(N_C / chunks of g)."""
    if kind == "log1p":
        return np.log1p(group_sizes.astype(np.float64))
    if kind == "idf":
        return np.log(max(n_chunks, 1) / np.maximum(group_chunks, 1).astype(np.float64))
    raise ValueError(f"group weight must be 'log1p' or 'idf', got {kind!r}")


def group_alphas(kind: str, value: float, group_sizes: np.ndarray) -> np.ndarray:
    """Per-group decay rate alpha: n_u / n_bar (paper), fixed, or ln(1 + n_u / n_bar)."""
    n_bar = float(group_sizes.mean()) if group_sizes.size else 1.0
    ratio = group_sizes.astype(np.float64) / max(n_bar, 1e-12)
    if kind == "ratio":
        return ratio
    if kind == "log":
        return np.log1p(ratio)
    return np.full(group_sizes.shape[0], float(value))
