"""CODA query bookkeeping without corpus-sized work per query (docs/architecture.md §7,
"CODA query cost"): first occurrences of the associated items, the top-k of the local
push's scores, the kept items' chunks. Each takes a per-thread zeroed scratch row and
leaves it zeroed."""
from __future__ import annotations

import numpy as np

from ._config import jit
from .coda_assoc import n_item_chunks
from .dense import offer


@jit
def first_seen(values, mark):
    """Positions of the first occurrence of each value, in order (``mark``: zeros over the
    value range, left zeroed)."""
    pos = np.empty(values.shape[0], dtype=np.int64)
    c = 0
    for t in range(values.shape[0]):
        v = values[t]
        if mark[v] == 0:
            mark[v] = 1
            pos[c] = t
            c += 1
    for t in range(c):
        mark[values[pos[t]]] = 0
    return pos[:c].copy()


@jit
def top_k_untied(x, k):
    """Positions of the ``k`` largest of ``x`` (all finite), score descending then position
    ascending; an empty array with ``tied`` True when the k-th and (k+1)-th scores are
    equal (which of them is kept is then the caller's rule). Returns (positions, tied)."""
    k = min(k, x.shape[0])
    kk = k + 1
    ids = np.empty(kk, dtype=np.int64)
    s = np.empty(kk)
    c = 0
    for i in range(x.shape[0]):
        if c < kk or x[i] > s[kk - 1]:
            c = offer(x[i], i, c, kk, ids, s)
    if k <= 0:
        return ids[:0].copy(), False
    if c == kk and s[k - 1] == s[k]:
        return ids[:0].copy(), True
    return ids[:k].copy(), False


@jit
def _mark_chunks(ptr, chunks, items, w, mark, best, ids, c):
    """Note the not yet seen source chunks of ``items`` in ``ids[c:]`` and raise ``best``
    to their weights; returns the new fill."""
    for i in range(items.shape[0]):
        x = items[i]
        for j in range(ptr[x], ptr[x + 1]):
            ch = chunks[j]
            if mark[ch] == 0:
                mark[ch] = 1
                ids[c] = ch
                c += 1
            best[ch] = max(best[ch], w[i])
    return c


@jit
def max_chunks_marked(ent_ptr, ent_chunks, rel_ptr, rel_chunks, ents, ent_w, rels, rel_w,
                      mark, best):
    """kernels/coda_assoc.py ``max_chunks``: every source chunk of the kept items
    (ascending) with the largest of their weights, floored at 0, through ``mark`` (uint8)
    and ``best`` (float64) rows over the chunks (zeros, left zeroed), sorting only the
    distinct chunks."""
    ids = np.empty(n_item_chunks(ent_ptr, rel_ptr, ents, rels), dtype=np.int64)
    c = _mark_chunks(ent_ptr, ent_chunks, ents, ent_w, mark, best, ids, 0)
    c = _mark_chunks(rel_ptr, rel_chunks, rels, rel_w, mark, best, ids, c)
    out = np.sort(ids[:c])
    tot = np.empty(c)
    for t in range(c):
        ch = out[t]
        tot[t] = best[ch]
        best[ch] = 0.0
        mark[ch] = 0
    return out, tot
