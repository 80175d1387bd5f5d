"""BM25 query kernel: sum the document-term weight columns of the query's terms and keep
the k best documents (the lexical prior term, docs/architecture.md §5), compiled and GIL-free."""
from __future__ import annotations

import numpy as np

from ._config import jit
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
