"""Chunk selection helpers of CODA's relevance alignment (coda/retrieve.py module
docstring: ``dedup_sim``, ``diversity``, ``cover_weight``;
docs/architecture.md §7)."""
from __future__ import annotations

import numpy as np


def _dedup(chunk_vec, ids, order, top_k, limit) -> np.ndarray:
    """Greedy: walk ``order`` and skip a chunk whose cosine with a chosen one exceeds
    ``limit`` (near-duplicate passages carry no new evidence); up to ``top_k``."""
    chosen: list[int] = []
    chunk_vec = np.asarray(chunk_vec)  # a memmap's rows: plain views (no per-row wrapper)
    for j in order:
        v = chunk_vec[ids[j]]
        if all(float(v @ chunk_vec[ids[c]]) <= limit for c in chosen):
            chosen.append(int(j))
            if len(chosen) == top_k:
                break
    return np.asarray(chosen, np.int64)


def _mmr(chunk_vec, ids, score, top_k, lam, limit) -> np.ndarray:
    """Greedy maximal marginal relevance over candidate positions: each step takes the
    best ``score - lam * max(0, max cosine with the chosen)`` (ties by chunk id),
    skipping a candidate above ``limit`` (when > 0); up to ``top_k`` positions."""
    v = chunk_vec[ids]
    sim = (v @ v.T).astype(np.float64)
    near = np.zeros(ids.size)
    free = np.ones(ids.size, bool)
    chosen: list[int] = []
    while len(chosen) < min(top_k, ids.size):
        val = score - lam * np.maximum(near, 0.0)
        ok = free & ((near <= limit) if limit > 0 and chosen else True)
        if not ok.any():
            break
        cand = np.flatnonzero(ok)
        j = int(cand[np.lexsort((ids[cand], -val[cand]))[0]])
        chosen.append(j)
        free[j] = False
        near = np.maximum(near, sim[:, j])
    return np.asarray(chosen, np.int64)


def _cover(chunk_vec, ids, score, top_k, lam, limit, postings, n_docs) -> np.ndarray:
    """Greedy question-term coverage over candidate positions: each step takes the best
    ``score + lam * (idf share of the question's terms the chunk holds that no chosen
    chunk holds)`` (ties by chunk id), skipping a candidate whose cosine with a chosen
    one exceeds ``limit`` (when > 0); up to ``top_k`` positions. ``postings``: per
    question term, the documents holding it (``BM25.postings``); idf = ln(1 + (N - df +
    0.5) / (df + 0.5)) with ``N = n_docs``."""
    n = ids.size
    if not postings or n == 0:
        order = np.lexsort((ids, -score))
        return _dedup(chunk_vec, ids, order, top_k, limit) if limit > 0 else order[:top_k]
    df = np.array([p.size for p in postings], np.float64)
    w = np.log1p((n_docs - df + 0.5) / (df + 0.5))
    w = w / w.sum() if w.sum() > 0 else w
    held = np.stack([np.isin(ids, p) for p in postings], axis=1)  # (n, terms)
    chunk_vec = np.asarray(chunk_vec)
    covered = np.zeros(len(postings), bool)
    free = np.ones(n, bool)
    chosen: list[int] = []
    while len(chosen) < min(top_k, n) and free.any():
        val = score + lam * (held[:, ~covered] @ w[~covered])
        cand = np.flatnonzero(free)
        for j in cand[np.lexsort((ids[cand], -val[cand]))]:
            free[j] = False
            v = chunk_vec[ids[j]]
            if limit <= 0 or all(float(v @ chunk_vec[ids[c]]) <= limit for c in chosen):
                chosen.append(int(j))
                covered |= held[j]
                break
    return np.asarray(chosen, np.int64)

