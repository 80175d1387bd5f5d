"""CODA's ``fact_weight`` term (coda/retrieve.py module docstring; docs/architecture.md
§7): a chunk's best sentence similarity, in one compiled pass over the sentences read,
and an upper bound of it from the sentences' int8 codes (session 20)."""
from __future__ import annotations

import numpy as np

from ._config import dot_jit, jit
from .dense import _icode_err, _quantize_query
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
def _sentence_rows(ptr, order, chunks):
    """The sentence rows ``order[ptr[c]:ptr[c + 1]]`` of the chunks ``c`` in turn."""
    tot = 0
    for i in range(chunks.shape[0]):
        tot += ptr[chunks[i] + 1] - ptr[chunks[i]]
    rows = np.empty(tot, dtype=np.int64)
    t = 0
    for i in range(chunks.shape[0]):
        for p in range(ptr[chunks[i]], ptr[chunks[i] + 1]):
            rows[t] = order[p]
            t += 1
    return rows


@jit
def best_sentences(V, ptr, order, chunks, q, out):
    """``out[i]`` = the largest float32 <V[s], q> (as float64) over the sentences s =
    ``order[ptr[c]:ptr[c + 1]]`` of chunk ``c = chunks[i]``, at least -1 (-1 when it has
    none; NaN propagates as in ``np.maximum``). ``V`` C-contiguous."""
    n = chunks.shape[0]
    if n == 0:
        return
    # the rows in reading order, each asked for SENT_AHEAD rows before its dot
    rows = _sentence_rows(ptr, order, chunks)
    tot = rows.shape[0]
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


@jit
def _icode_dots_ahead(C, rows, qc, out):
    """``out[t]`` = <C[rows[t]], qc> over int8 codes, summed exactly in int32
    (kernels/dense.py ``_icode_dots``), each row asked for SENT_AHEAD rows before."""
    n = rows.shape[0]
    for t in range(min(SENT_AHEAD, n)):
        prefetch_row(C, rows[t])
    for t in range(n):
        if t + SENT_AHEAD < n:
            prefetch_row(C, rows[t + SENT_AHEAD])
        r = rows[t]
        s = np.int32(0)
        for j in range(C.shape[1]):
            s += np.int16(C[r, j]) * np.int16(qc[j])
        out[t] = s


@jit
def sentence_bounds(C, scale, l1, ptr, order, chunks, q, out):
    """``out[i]`` >= :func:`best_sentences`' ``out[i]`` from the sentences' int8 codes
    (kernels/dense.py ``quantize_rows``, ``code_l1``; the query quantized as in
    ``icode_topk``): the largest ``scale[s] sq <C[s], qc> + e_s`` over the sentences s of
    chunk ``chunks[i]``, with ``icode_topk``'s bound ``e_s`` on |<V[s], q> - scale[s] sq
    <C[s], qc>|, at least -1 (-1 when it has none). A quarter of the bytes of the rows."""
    n = chunks.shape[0]
    if n == 0:
        return
    qc, sq, q1 = _quantize_query(q)
    rows = _sentence_rows(ptr, order, chunks)
    a = np.empty(rows.shape[0], dtype=np.int32)
    _icode_dots_ahead(C, rows, qc, a)
    t = 0
    for i in range(n):
        b = -1.0
        for _ in range(ptr[chunks[i]], ptr[chunks[i] + 1]):
            r = rows[t]
            u = scale[r] * sq * a[t] + _icode_err(scale, l1, r, sq, q1)
            if u > b:
                b = u
            t += 1
        out[i] = b
