"""What every retrieval method shares: its output and the per-index query state.

A method is a plain function ``(state, qvec, query_text, options, detail) ->
MethodOutput``. The :class:`QueryState` is made once per :class:`~hyperrag_fast.retriever.
Retriever` by :func:`hyperrag_fast.methods.query_state`: it holds only ready structures
(engines, candidate searches, name lookups, BM25), so no method builds anything on a
query. docs/architecture.md §1.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..ann import VectorIndex
from ..config import QueryOptions
from ..engine import StitchEngine
from ..lexical import BM25, GroupLookup
from ..prebuilt_reader import MissingPrebuilt

#: engine / candidate-search key of the index's own hypergraph
OWN = "index"


@dataclass
class MethodOutput:
    """What a method returns: chunk rows (int) best first, their scores, optional detail,
    and the time it spent on candidate search and on graph work (ms)."""

    chunk_ids: np.ndarray
    scores: np.ndarray
    detail: dict[str, Any] | None = None
    candidates_ms: float = 0.0
    graph_ms: float = 0.0


@dataclass(eq=False)
class QueryState:
    """Read-only query-time state of one index (safe to read from many threads).

    ``engines`` / ``node_search`` / ``lookups`` are keyed by :data:`OWN` or a prebuilt
    structure name (``merge_full``, ``merge_none``, ``consolidated``); ``bm25`` is None
    when the chunks have no indexable term; ``coda`` is the bound CODA retriever (or None);
    ``embedder``: the retriever's query embedder."""

    index: Any
    engine: StitchEngine
    engines: dict[str, StitchEngine]
    node_search: dict[str, VectorIndex]
    lookups: dict[str, GroupLookup]
    bm25: BM25 | None
    coda: Any = None
    embedder: Any = None


Method = Callable[[QueryState, np.ndarray, str, QueryOptions, bool], MethodOutput]


def missing(method: str, structure: str) -> MissingPrebuilt:
    return MissingPrebuilt(
        f"method {method!r} needs the prebuilt structure {structure!r}, which this index "
        f"does not have: run `hyperrag build-methods INDEX {method}` (API: "
        f"hyperrag_fast.prebuilt.build_prebuilt(index, [{structure!r}]).save(INDEX)) and "
        f"load it with Retriever(index, prebuilt=load_prebuilt(INDEX)); a prebuilt/ folder "
        f"an earlier version saved beside the generations is not read: `hyperrag upgrade "
        f"INDEX` adopts it after validating it)")
