"""Query orchestration: embed -> candidates -> method -> ranked chunks (DESIGN §2, §3).

A retrieval *method* is a function ``(state, qvec, query_text, options) -> MethodOutput``
registered under a name with :func:`register_method`; "dense" (chunk cosine, exact) ships
here, "stitch", its ablations and the reference rows in :mod:`hyperrag_fast.methods`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from . import presets
from .embed.base import Embedder
from .engine import StitchEngine
from .hybrid import HybridOptions
from .index import HyperIndex, check_embedder
from .options import StitchOptions


@dataclass(frozen=True)
class QueryOptions:
    """STITCH options, the query-side signals of DESIGN §8 (``hybrid``), candidate budgets
    K_V (k_nodes), K_E (k_edges), K_C (k_chunks) (DESIGN §3 step 1) and the method name.
    ``top_k`` is ``stitch.top_k``. The defaults are the dev-tuned ``stitch``
    (``hyperrag_fast.presets``); ``StitchOptions.paper()`` is the published method."""

    stitch: StitchOptions = field(default_factory=lambda: presets.TUNED_STITCH)
    hybrid: HybridOptions = field(default_factory=lambda: presets.TUNED_HYBRID)
    k_nodes: int = presets.TUNED_K_NODES
    k_edges: int = 50
    k_chunks: int = presets.TUNED_K_CHUNKS
    method: str = "stitch"

    def __post_init__(self) -> None:
        for name in ("k_nodes", "k_edges", "k_chunks"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
        if self.method not in methods_registry():
            raise ValueError(f"unknown method {self.method!r}; registered: {sorted(METHODS)}")

    @property
    def top_k(self) -> int:
        return self.stitch.top_k

    def with_top_k(self, k: int) -> "QueryOptions":
        return replace(self, stitch=self.stitch.replace(top_k=k))


@dataclass(frozen=True)
class RetrievedChunk:
    chunk_id: str
    doc_id: str
    title: str
    text: str
    score: float
    start: int
    end: int


@dataclass
class RetrievalResult:
    """Ranked chunks, timings in ms (embed_ms, candidates_ms, graph_ms) and, when asked,
    the method's intermediates in ``detail``."""

    query: str
    chunks: list[RetrievedChunk]
    timings: dict[str, float]
    detail: dict[str, Any] | None = None


@dataclass
class MethodOutput:
    """What a method returns: chunk rows (int) best first, their scores, optional detail,
    and the time it spent on candidate search and on graph work."""

    chunk_ids: np.ndarray
    scores: np.ndarray
    detail: dict[str, Any] | None = None
    candidates_ms: float = 0.0
    graph_ms: float = 0.0


@dataclass
class RetrieverState:
    """Read-only query-time state shared by methods (safe to read from many threads)."""

    index: HyperIndex
    engine: StitchEngine
    cache: dict[str, Any] = field(default_factory=dict)  # per-index helpers built lazily


Method = Callable[[RetrieverState, np.ndarray, str, QueryOptions, bool], MethodOutput]
METHODS: dict[str, Method] = {}


def methods_registry() -> dict[str, Method]:
    """The registry, with the methods of the quality table (``hyperrag_fast.methods``) and
    CODA's (``hyperrag_fast.coda.methods``) loaded."""
    from . import methods  # noqa: F401  (registers on first import)
    from .coda import methods as _coda  # noqa: F401

    return METHODS


def register_method(name: str, fn: Method) -> Method:
    """Register ``fn(state, qvec, query_text, options, detail) -> MethodOutput``."""
    METHODS[name] = fn
    return fn


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def dense_method(state: RetrieverState, q: np.ndarray, text: str, o: QueryOptions,
                 detail: bool) -> MethodOutput:
    """Chunk cosine only, exact top-k (the dense baseline of DESIGN §1)."""
    t0 = time.perf_counter()
    ids, sims = state.index.ann["chunk_vec"].search(q, o.top_k, exact=True)
    return MethodOutput(ids, sims, {} if detail else None, _ms(t0), 0.0)


register_method("dense", dense_method)


class Retriever:
    """Answers queries against one :class:`HyperIndex` snapshot (make a new Retriever
    after ``index.add``/``delete``). Thread-safe: the engine keeps per-thread scratch,
    searches only read shared arrays."""

    def __init__(self, index: HyperIndex, embedder: Embedder | None = None,
                 options: QueryOptions | None = None) -> None:
        embedder = embedder or index.embedder
        if embedder is None:
            raise ValueError("Retriever needs an embedder (the index was loaded without one)")
        check_embedder(embedder, index.embedder_name, index.embedder_dim, "the index")
        self.index = index
        self.embedder = embedder
        self.options = options or QueryOptions()
        self.state = RetrieverState(index, StitchEngine(index.graph, index.node_vec,
                                                        index.edge_vec, index.chunk_vec))

    def warmup(self) -> None:
        """Compile/load the kernels and run the configured method (and ``dense``) once, so
        a service pays no JIT or lazy-build cost on its first request."""
        self.state.engine.warmup(self.options.stitch)
        q = self.embedder.embed(["warmup"])[0]
        for name in dict.fromkeys((self.options.method, "dense")):
            self._run(q, "warmup", replace(self.options, method=name), False)

    def _embed(self, queries: Sequence[str]) -> np.ndarray:
        vecs = np.asarray(self.embedder.embed(list(queries)), dtype=np.float32)
        if vecs.shape != (len(queries), self.index.embedder_dim):
            raise ValueError(f"embedder returned shape {vecs.shape}")
        return vecs

    def _run(self, q: np.ndarray, text: str, o: QueryOptions, detail: bool) -> MethodOutput:
        return METHODS[o.method](self.state, q, text, o, detail)

    def _result(self, text: str, out: MethodOutput, embed_ms: float) -> RetrievalResult:
        chunks = self.index.chunks
        got = [RetrievedChunk(c.chunk_id, c.doc_id, c.title, c.text, float(s), c.start, c.end)
               for c, s in ((chunks[int(i)], s) for i, s in zip(out.chunk_ids, out.scores))]
        t = {"embed_ms": embed_ms, "candidates_ms": out.candidates_ms, "graph_ms": out.graph_ms}
        return RetrievalResult(text, got, t, out.detail)

    def retrieve(self, query: str, options: QueryOptions | None = None,
                 detail: bool = False) -> RetrievalResult:
        """Top ``options.top_k`` chunks for one query."""
        return self.retrieve_batch([query], options, detail)[0]

    def retrieve_batch(self, queries: Sequence[str], options: QueryOptions | None = None,
                       detail: bool = False) -> list[RetrievalResult]:
        """Embed all queries in one call, then rank each; ``embed_ms`` is the per-query share."""
        if isinstance(queries, str):
            raise TypeError("retrieve_batch takes a list of queries, not a string")
        o = options or self.options
        if o.method not in methods_registry():
            raise ValueError(f"unknown method {o.method!r}; registered: {sorted(METHODS)}")
        if not queries:
            return []
        if any(not isinstance(t, str) or not t.strip() for t in queries):
            raise ValueError("empty query: every query must be a non-blank string")
        t0 = time.perf_counter()
        Q = self._embed(queries)
        embed_ms = _ms(t0) / len(queries)
        return [self._result(text, self._run(q, text, o, detail), embed_ms)
                for text, q in zip(queries, Q)]
