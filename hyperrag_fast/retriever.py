"""The public entry point: :class:`Retriever` embeds the query, runs the named method
from the registry and returns ranked chunks.

The route of a query (docs/architecture.md §1): ``retriever`` -> ``methods.stitch``
(candidates via ``ann`` and ``lexical``) -> ``engine`` -> compiled kernels. Options
and presets are in :mod:`hyperrag_fast.config`; the methods, in :mod:`hyperrag_fast.methods`,
never import this module.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from .config import QueryOptions, preset_for
from .embed.base import Embedder
from .reader import IndexReader, check_embedder
from .methods import METHODS, CodaSetup, MethodOutput, query_state, register_method

__all__ = ["Retriever", "QueryOptions", "RetrievalResult", "RetrievedChunk", "MethodOutput",
           "METHODS", "register_method"]


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


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def _method(name: str):
    fn = METHODS.get(name)
    if fn is None:
        raise ValueError(f"unknown method {name!r}; registered: {sorted(METHODS)}")
    return fn


class Retriever:
    """Answers queries against one opened index: an :class:`~hyperrag_fast.reader.IndexReader`
    (``IndexReader.open(path)``, all a query process imports) or a ``HyperIndex`` (which
    extends it; make a new Retriever after ``index.add``/``delete``). ``prebuilt``: what the explicit build step made
    for methods that need more than the index (``hyperrag_fast.prebuilt.load_prebuilt``);
    ``coda``: CODA's query-side options and LLM steps. ``options`` default: the preset of
    the index's embedder (``config.preset_for``). Thread-safe: the engine keeps
    per-thread scratch, searches only read shared arrays."""

    def __init__(self, index: IndexReader, embedder: Embedder | None = None,
                 options: QueryOptions | None = None, prebuilt=None,
                 coda: CodaSetup | None = None) -> None:
        embedder = embedder or index.embedder
        if embedder is None:
            raise ValueError("Retriever needs an embedder (the index was loaded without one)")
        check_embedder(embedder, index.embedder_name, index.embedder_dim, "the index")
        self.index = index
        self.embedder = embedder
        self.options = options or preset_for(index.embedder_name)
        self.state = query_state(index, prebuilt, coda, embedder)

    def warmup(self) -> None:
        """Compile/load the kernels and run the configured method (and ``dense``) once, so
        a service pays no JIT cost on its first request."""
        self.state.engine.warmup(self.options.stitch)
        q = self.embedder.embed(["warmup"])[0]
        _method(self.options.method)
        for name in dict.fromkeys((self.options.method, "dense")):
            self._run(q, "warmup", replace(self.options, method=name), False)

    def _embed(self, queries: Sequence[str]) -> np.ndarray:
        vecs = np.asarray(self.embedder.embed(list(queries)), dtype=np.float32)
        if vecs.shape != (len(queries), self.index.embedder_dim):
            raise ValueError(f"embedder returned shape {vecs.shape}")
        return vecs

    def _run(self, q: np.ndarray, text: str, o: QueryOptions, detail: bool) -> MethodOutput:
        return _method(o.method)(self.state, q, text, o, detail)

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
        _method(o.method)
        if not queries:
            return []
        if any(not isinstance(t, str) or not t.strip() for t in queries):
            raise ValueError("empty query: every query must be a non-blank string")
        t0 = time.perf_counter()
        Q = self._embed(queries)
        embed_ms = _ms(t0) / len(queries)
        return [self._result(text, self._run(q, text, o, detail), embed_ms)
                for text, q in zip(queries, Q)]
