"""Reference rows of the quality table: dense chunk cosine and BM25 (STITCH-RAG Table 2)."""
from __future__ import annotations

import time

import numpy as np

from ..config import QueryOptions
from .base import MethodOutput, QueryState


def dense(state: QueryState, q: np.ndarray, text: str, o: QueryOptions, detail: bool) -> MethodOutput:
    """Chunk cosine only, exact top-k (the dense baseline)."""
    t0 = time.perf_counter()
    ids, sims = state.index.ann["chunk_vec"].search(q, o.stitch.top_k, exact=True)
    return MethodOutput(ids, sims, {} if detail else None, (time.perf_counter() - t0) * 1e3, 0.0)


def bm25(state: QueryState, q: np.ndarray, text: str, o: QueryOptions, detail: bool) -> MethodOutput:
    """BM25 over the chunk passages (lexical reference row); fewer than k chunks when
    fewer share a term with the query."""
    t0 = time.perf_counter()
    if state.bm25 is None:
        ids, s = np.empty(0, np.int64), np.empty(0)
    else:
        ids, s = state.bm25.top_k(text, o.stitch.top_k)
    return MethodOutput(ids, s, {} if detail else None, (time.perf_counter() - t0) * 1e3, 0.0)


METHODS = {"dense": dense, "bm25": bm25}
