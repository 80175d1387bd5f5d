"""BM25 query kernel: sum the document-term weight columns of the query's terms and keep
the k best documents (the lexical prior term, docs/architecture.md §5), compiled and GIL-free;
and the idf-weighted term shares of the ranker's cover columns and the round gate (one
compiled pass over the question's postings instead of NumPy calls per term)."""
from __future__ import annotations

import numpy as np

from ._config import inline_jit, jit
from .dense import topk_ordered


@jit
def bm25_topk(indptr, indices, data, terms, k, acc, seen, out_ids, out_s):
    """Scores s(doc) = sum over ``terms`` (ascending column ids) of the CSC weight matrix
    (indptr, indices, data), accumulated in column order as SciPy's ``sum(axis=1)`` does;
    writes the best min(k, #docs with s > 0) documents, score descending then id ascending,
    to ``out_ids``/``out_s`` and returns their number. ``acc`` (zeros) and ``seen``
    (zeros), both n_docs long, are per-thread scratch, reset before returning."""
    n_touched = 0
    for t in range(terms.shape[0]):
        c = terms[t]
        for p in range(indptr[c], indptr[c + 1]):
            n_touched += 1 - seen[indices[p]]
            seen[indices[p]] = 1
    docs = np.empty(n_touched, dtype=np.int64)
    j = 0
    for t in range(terms.shape[0]):
        c = terms[t]
        for p in range(indptr[c], indptr[c + 1]):
            doc = indices[p]
            if seen[doc] == 1:
                seen[doc] = 2
                docs[j] = doc
                j += 1
            acc[doc] += data[p]
    s = np.empty(n_touched, dtype=np.float64)
    n_pos = 0
    for i in range(n_touched):
        v = acc[docs[i]]
        acc[docs[i]] = 0.0
        seen[docs[i]] = 0
        if v > 0.0:
            s[n_pos] = v
            docs[n_pos] = docs[i]
            n_pos += 1
    kk = min(k, n_pos)
    if kk > 0:
        topk_ordered(s[:n_pos], docs[:n_pos], kk, out_ids, out_s)
    return kk


@inline_jit
def lower_bound(ids, lo, hi, x):
    """The first position in ``ids[lo:hi]`` (ascending) whose value is >= ``x`` (``hi``: none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if ids[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@inline_jit
def _holds(ids, lo, hi, x):
    """Whether ``x`` is in ``ids[lo:hi]`` (ascending): a binary search."""
    i = lower_bound(ids, lo, hi, x)
    return i < hi and ids[i] == x


@jit
def residual_terms(indptr, indices, terms, w, c, n_src, out):
    """Per term ``terms[t]`` (a column of the CSC (indptr, indices), ids ascending) that none
    of the last ``n_src`` entries of ``c`` holds: ``out[i] += w[t]`` for every other entry
    ``c[i]`` holding it, terms in order. Returns sum(w), added in term order
    (``BM25.residual_cover``, ``engine.chain_links``' residual_cover2)."""
    n = c.shape[0] - n_src
    tot = 0.0
    for t in range(terms.shape[0]):
        tot += w[t]
        lo, hi = indptr[terms[t]], indptr[terms[t] + 1]
        src = False
        for j in range(n, c.shape[0]):
            if _holds(indices, lo, hi, c[j]):
                src = True
        if src:
            continue
        for i in range(n):
            if _holds(indices, lo, hi, c[i]):
                out[i] += w[t]
    return tot


@jit
def held_terms(indptr, indices, terms, w, c):
    """(sum of w[t] over the terms that at least one entry of ``c`` holds, sum of w), both
    added in term order; the CSC as :func:`residual_terms` (``engine.term_cover``)."""
    held = 0.0
    tot = 0.0
    for t in range(terms.shape[0]):
        tot += w[t]
        for j in range(c.shape[0]):
            if _holds(indices, indptr[terms[t]], indptr[terms[t] + 1], c[j]):
                held += w[t]
                break
    return held, tot
