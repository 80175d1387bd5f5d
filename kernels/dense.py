"""Exact candidate search (docs/architecture.md §4 step 1): float32 cosines of L2-normalised rows and an
ordered top-k, compiled and GIL-free.

Replaces ``matrix @ q`` on the query path: OpenBLAS's thread pool spins on the other core
after every call, which halved the throughput of two query threads (benchmarks/README.md).
Order: similarity descending, ties by row id ascending.
"""
from __future__ import annotations

import numpy as np

from ._config import dot_jit, inline_jit, jit


@dot_jit
def dot_range(V, b, e, q, out):
    """out[i - b] = <V[i], q> for b <= i < e, in float32 (sums reassociated, see
    ``_config.DOT_OPTIONS``)."""
    d = V.shape[1]
    for i in range(b, e):
        s = np.float32(0.0)
        for j in range(d):
            s += V[i, j] * q[j]
        out[i - b] = s


@dot_jit
def dot_gather(V, rows, q, out):
    """out[i] = <V[rows[i]], q> in float32."""
    d = V.shape[1]
    for i in range(rows.shape[0]):
        r = rows[i]
        s = np.float32(0.0)
        for j in range(d):
            s += V[r, j] * q[j]
        out[i] = s


@jit
def dot_rows(V, q, out):
    """out[i] = <V[i], q> for every row."""
    dot_range(V, 0, V.shape[0], q, out)


@inline_jit
def _better(s, i, t, j):
    return s > t or (s == t and i < j)


@inline_jit
def offer(s, r, n, k, out_ids, out_s):
    """Offer (score s, id r) to the ordered top-k held in ``out_ids[:n]``, ``out_s[:n]``
    (score descending, then id ascending; 0 < k); returns the new n (<= k)."""
    if n == k:
        if not _better(s, r, out_s[k - 1], out_ids[k - 1]):
            return n
        j = k - 1
    else:
        j = n
        n += 1
    while j > 0 and _better(s, r, out_s[j - 1], out_ids[j - 1]):
        out_s[j] = out_s[j - 1]
        out_ids[j] = out_ids[j - 1]
        j -= 1
    out_s[j] = s
    out_ids[j] = r
    return n


@jit
def topk_ordered(scores, ids, k, out_ids, out_s):
    """The k best (score, id) pairs, score descending then id ascending, written to
    ``out_ids[:k]``, ``out_s[:k]`` by partial insertion: O(n k) worst, O(n) typical.
    ``ids`` may come in any order; scores are finite. k <= 0 writes nothing."""
    if k <= 0:
        return
    n = 0
    for i in range(scores.shape[0]):
        s = scores[i]
        r = ids[i]
        if n < k or _better(s, r, out_s[k - 1], out_ids[k - 1]):  # most entries stop here
            n = offer(s, r, n, k, out_ids, out_s)


#: rows scored per block by ``exact_topk`` before they enter the selection
BLOCK = 512


@jit
def exact_topk(V, Q, k, out_ids, out_s):
    """Top-k rows of V for every query row of Q (0 < k <= n): out_ids, out_s of shape (m, k).
    Rows are scored a block at a time and offered to the selection, so the scratch is one
    block, not the corpus."""
    N = V.shape[0]
    buf = np.empty(min(BLOCK, N), dtype=np.float32)
    for r in range(Q.shape[0]):
        q, ids, sims = Q[r], out_ids[r], out_s[r]  # views taken once per query row
        n = 0
        for b in range(0, N, BLOCK):
            e = min(b + BLOCK, N)
            dot_range(V, b, e, q, buf)
            for i in range(b, e):
                s = buf[i - b]
                if n < k or _better(s, i, sims[k - 1], ids[k - 1]):  # most rows stop here
                    n = offer(s, i, n, k, ids, sims)


@jit
def rescore_topk(V, rows, q, k, out_ids, out_s):
    """Top-k of the given rows of V for one query (0 < k <= rows.size), exact float32 cosines."""
    buf = np.empty(rows.shape[0], dtype=np.float32)
    dot_gather(V, rows, q, buf)
    topk_ordered(buf, rows, k, out_ids, out_s)


@jit
def expand_rescore_topk(keys, n_distinct, kd, dup_ptr, dup_ids, V, q, k, out_ids, out_s):
    """Approximate-search hits over distinct rows -> exact top-k over the original rows:
    the distinct ids in ``keys`` within [0, n_distinct) (duplicates and misses dropped),
    each expanded to every row equal to it (``dup_ids[dup_ptr[u]:dup_ptr[u + 1]]``), rescored
    and ordered as ``topk_ordered``. Returns the number of distinct hits; when it is under
    ``kd`` nothing is written (the caller falls back to exact search)."""
    hit = np.empty(keys.shape[0], dtype=np.int64)
    nh = 0
    n_rows = 0
    for i in range(keys.shape[0]):
        u = keys[i]
        if u < 0 or u >= n_distinct:
            continue
        dup = False
        for j in range(nh):
            if hit[j] == u:
                dup = True
                break
        if not dup:
            hit[nh] = u
            nh += 1
            n_rows += dup_ptr[u + 1] - dup_ptr[u]
    if nh < kd:
        return nh
    rows = np.empty(n_rows, dtype=np.int64)
    r = 0
    for j in range(nh):
        u = hit[j]
        for t in range(dup_ptr[u], dup_ptr[u + 1]):
            rows[r] = dup_ids[t]
            r += 1
    rescore_topk(V, rows, q, k, out_ids, out_s)
    return nh


@jit
def all_finite(Q):
    """True when the 2-d array Q holds no NaN or inf."""
    for i in range(Q.shape[0]):
        for j in range(Q.shape[1]):
            if not np.isfinite(Q[i, j]):
                return False
    return True


@jit
def quantize_rows(V, C, scale):
    """Per-row int8 codes: C[i] = round(V[i] / scale[i]), scale[i] = max |V[i]| / 127
    (1 for a zero row), so |V[i, j] - scale[i] C[i, j]| <= scale[i] / 2."""
    for i in range(V.shape[0]):
        m = 0.0
        for j in range(V.shape[1]):
            m = max(m, abs(V[i, j]))
        s = m / 127.0 if m > 0 else 1.0
        scale[i] = s
        for j in range(V.shape[1]):
            C[i, j] = np.int8(min(127.0, max(-127.0, np.rint(V[i, j] / s))))


@dot_jit
def _code_dots(C, scale, q, out):
    """out[i] = scale[i] <C[i], q> (float32, sums reassociated)."""
    for i in range(C.shape[0]):
        s = np.float32(0.0)
        for j in range(C.shape[1]):
            s += np.float32(C[i, j]) * q[j]
        out[i] = s * scale[i]


#: absolute slack on the int8 bound (float32 rounding of the code dots and of the rescore)
CODE_SLACK = 1e-4


@jit
def code_topk(C, scale, V, q, k, out_ids, out_s):
    """Exact ordered top-k of ``V @ q`` (0 < k <= n; as :func:`exact_topk`) from int8
    codes (:func:`quantize_rows`): every row's code score is within
    ``e_i = scale[i] / 2 * |q|_1 + CODE_SLACK`` of its cosine, so only rows whose upper
    bound reaches the k-th best lower bound are rescored from ``V``; a quarter of the
    bytes of a float32 scan is read (docs/architecture.md §7, "CODA query cost").
    Returns the number of rows rescored."""
    n = C.shape[0]
    a = np.empty(n, dtype=np.float32)
    _code_dots(C, scale, q, a)
    q1 = 0.0
    for j in range(q.shape[0]):
        q1 += abs(q[j])
    lo_ids = np.empty(k, dtype=np.int64)
    lo_s = np.empty(k, dtype=np.float64)
    m = 0
    for i in range(n):  # the k best lower bounds
        lo = a[i] - (scale[i] * 0.5 * q1 + CODE_SLACK)
        if m < k or lo > lo_s[k - 1]:
            m = offer(lo, i, m, k, lo_ids, lo_s)
    floor = lo_s[k - 1]
    rows = np.empty(n, dtype=np.int64)
    c = 0
    for i in range(n):
        if a[i] + (scale[i] * 0.5 * q1 + CODE_SLACK) >= floor:
            rows[c] = i
            c += 1
    rescore_topk(V, rows[:c], q, k, out_ids, out_s)
    return c


@jit
def code_l1(C, out):
    """out[i] = sum_j |C[i, j]| (the int8 codes' L1 norms, for :func:`icode_topk`)."""
    for i in range(C.shape[0]):
        t = 0
        for j in range(C.shape[1]):
            t += abs(np.int64(C[i, j]))
        out[i] = t


@jit
def _quantize_query(q):
    """(int8 codes of q, their step sq = max |q| / 127 (1 for q = 0), |q|_1)."""
    d = q.shape[0]
    qmax = 0.0
    q1 = 0.0
    for j in range(d):
        qmax = max(qmax, abs(q[j]))
        q1 += abs(q[j])
    sq = qmax / 127.0 if qmax > 0 else 1.0
    qc = np.empty(d, dtype=np.int8)
    for j in range(d):
        qc[j] = np.int8(min(127.0, max(-127.0, np.rint(q[j] / sq))))
    return qc, sq, q1


@jit
def _icode_dots(C, rows, qc, out):
    """out[t] = <C[rows[t]], qc> over int8 codes, summed exactly in int32 (|sum| < 2**31
    for d < 2**17); a loop of its own, so that LLVM vectorises it."""
    for t in range(rows.shape[0]):
        r = rows[t]
        s = np.int32(0)
        for j in range(C.shape[1]):
            s += np.int16(C[r, j]) * np.int16(qc[j])
        out[t] = s


@inline_jit
def _icode_err(scale, l1, r, sq, q1):
    """Bound on |<V[r], q> - scale[r] sq <C[r], qc>| (:func:`icode_topk`)."""
    return scale[r] * 0.5 * (q1 + sq * l1[r]) + CODE_SLACK


@jit
def icode_topk(C, scale, l1, V, q, k, out_ids, out_s):
    """:func:`code_topk` with the query quantized too (int8 ``qc``, step ``sq`` = max |q| /
    127; docs/architecture.md §7 "CODA query cost"): the code dots are exact integer sums
    (on 2Wiki's 40k x 384 entities 12 vs 20 ns a row), and the bound grows by the
    query's rounding, ``e_i = scale[i] (|q|_1 + sq * l1[i]) / 2 + CODE_SLACK`` with
    ``l1`` = :func:`code_l1` of ``C``. The rows rescored include every row of the exact
    top-k, so ids and scores are :func:`code_topk`'s. Returns the number rescored."""
    n = C.shape[0]
    qc, sq, q1 = _quantize_query(q)
    rows = np.arange(n)
    a = np.empty(n, dtype=np.int32)
    _icode_dots(C, rows, qc, a)
    lo_ids = np.empty(k, dtype=np.int64)
    lo_s = np.empty(k, dtype=np.float64)
    m = 0
    for i in range(n):  # the k best lower bounds
        lo = scale[i] * sq * a[i] - _icode_err(scale, l1, i, sq, q1)
        if m < k or lo > lo_s[k - 1]:
            m = offer(lo, i, m, k, lo_ids, lo_s)
    floor = lo_s[k - 1]
    c = 0
    for i in range(n):
        if scale[i] * sq * a[i] + _icode_err(scale, l1, i, sq, q1) >= floor:
            rows[c] = i
            c += 1
    rescore_topk(V, rows[:c], q, k, out_ids, out_s)
    return c

