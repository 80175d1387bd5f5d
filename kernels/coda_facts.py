"""CODA's ``fact_weight`` term (coda/retrieve.py module docstring; docs/architecture.md
§7): a chunk's best sentence similarity, in one compiled pass over the sentences read."""
from __future__ import annotations

import numpy as np

from ._config import dot_jit, jit
from .prefetch import prefetch_row

SENT_AHEAD = 4  # sentence rows asked for ahead (a hint, no effect on results)


@dot_jit
def _dot(V, r, q):
    """<V[r], q> in float32 (sums reassociated: the same loop as kernels/dense.py
    ``dot_gather``, so the same floats)."""
    s = np.float32(0.0)
    for j in range(V.shape[1]):
        s += V[r, j] * q[j]
    return s


@jit
def best_sentences(V, ptr, order, chunks, q, out):
    """``out[i]`` = the largest float32 <V[s], q> (as float64) over the sentences s =
    ``order[ptr[c]:ptr[c + 1]]`` of chunk ``c = chunks[i]``, at least -1 (-1 when it has
    none; NaN propagates as in ``np.maximum``). ``V`` C-contiguous."""
    n = chunks.shape[0]
    if n == 0:
        return
    # the rows in reading order, each asked for SENT_AHEAD rows before its dot
    tot = 0
    for i in range(n):
        tot += ptr[chunks[i] + 1] - ptr[chunks[i]]
    rows = np.empty(tot, dtype=np.int64)
    t = 0
    for i in range(n):
        for p in range(ptr[chunks[i]], ptr[chunks[i] + 1]):
            rows[t] = order[p]
            t += 1
    for t in range(min(SENT_AHEAD, tot)):
        prefetch_row(V, rows[t])
    t = 0
    for i in range(n):
        b = -1.0
        for _ in range(ptr[chunks[i]], ptr[chunks[i] + 1]):
            if t + SENT_AHEAD < tot:
                prefetch_row(V, rows[t + SENT_AHEAD])
            s = np.float64(_dot(V, rows[t], q))
            if not s <= b:  # s > b, or NaN (np.maximum keeps a NaN)
                b = s
            t += 1
        out[i] = b


@jit
def dot_gather_ahead(V, rows, q, out):
    """``out[i] = <V[rows[i]], q>`` in float32, as kernels/dense.py ``dot_gather`` (the
    same floats), each row asked for SENT_AHEAD rows before its dot. ``V`` C-contiguous."""
    n = rows.shape[0]
    for t in range(min(SENT_AHEAD, n)):
        prefetch_row(V, rows[t])
    for t in range(n):
        if t + SENT_AHEAD < n:
            prefetch_row(V, rows[t + SENT_AHEAD])
        out[t] = _dot(V, rows[t], q)
