"""Distinct rows of a vector matrix, block by block (docs/architecture.md §10).

Entity states that share one description have identical vectors; the HNSW index holds
each distinct row once and a query expands hits to every equal row. Rows are hashed
a block at a time (a 64-bit multiply-add hash of their bytes), grouped by hash, and every
row is then compared byte for byte with its group's first row, so the result is exact
(on a hash collision the exact method runs instead).
"""
from __future__ import annotations

import numpy as np

from ..ann import DistinctRows
from ..mmaps import release

BLOCK = 16384


def _multipliers(words: int) -> np.ndarray:
    rng = np.random.default_rng(0x5EED)
    return rng.integers(1, 2**63, size=words, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


def _row_hashes(v: np.ndarray) -> np.ndarray:
    n, d = v.shape
    width = d * v.dtype.itemsize
    pad = (-width) % 8
    mult = _multipliers((width + pad) // 8)
    out = np.empty(n, np.uint64)
    for b in range(0, n, BLOCK):
        raw = np.ascontiguousarray(v[b:b + BLOCK]).view(np.uint8).reshape(-1, width)
        if pad:
            raw = np.concatenate([raw, np.zeros((raw.shape[0], pad), np.uint8)], axis=1)
        words = raw.view(np.uint64)
        with np.errstate(over="ignore"):
            h = (words * mult).sum(axis=1, dtype=np.uint64)
            h ^= h >> np.uint64(29)
        out[b:b + BLOCK] = h
        release(v)
    return out


def _from_labels(first: np.ndarray, inverse: np.ndarray) -> DistinctRows:
    order = np.argsort(first, kind="stable")  # distinct ids in order of first occurrence
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    group = rank[inverse.ravel()]
    ids = np.argsort(group, kind="stable").astype(np.int64)
    ptr = np.concatenate([[0], np.cumsum(np.bincount(group, minlength=order.shape[0]))])
    return DistinctRows(first[order].astype(np.int64), ptr.astype(np.int64), ids)


def distinct_rows_exact(v: np.ndarray) -> DistinctRows:
    """Reference: np.unique over the rows' bytes (holds the whole matrix)."""
    if v.shape[0] == 0:
        return DistinctRows(np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.int64))
    rows = np.ascontiguousarray(v).view(np.dtype((np.void, v.dtype.itemsize * v.shape[1]))).ravel()
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    return _from_labels(first, inverse)


def distinct_rows(v: np.ndarray) -> DistinctRows:
    """Same result as :func:`distinct_rows_exact`, reading ``v`` a block at a time."""
    if v.shape[0] == 0:
        return distinct_rows_exact(v)
    h = _row_hashes(v)
    _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    for b in range(0, v.shape[0], BLOCK):
        rep = first[inverse[b:b + BLOCK]]
        same = np.array_equal(np.asarray(v[b:b + BLOCK]), np.asarray(v[rep]))
        release(v)
        if not same:
            return distinct_rows_exact(np.asarray(v))
    return _from_labels(first, inverse)
