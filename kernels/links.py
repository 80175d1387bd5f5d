"""Small compiled steps of the ranker's link columns (docs/architecture.md §5, "Ranker
features inside C_q"): membership in a short id list and a chunk's best name-group weight,
one pass each instead of NumPy calls over broadcast or scattered temporaries."""
from __future__ import annotations

import numpy as np

from ._config import inline_jit, jit
from .lexical import lower_bound


@inline_jit
def _has(b, x):
    """Whether ``x`` is in the short, unsorted ``b`` (compared in order, first hit stops)."""
    for j in range(b.shape[0]):
        if b[j] == x:
            return True
    return False


@jit
def member_of(a, b):
    """``np.isin(a, b)`` for a short ``b``: every pair compared, no sort."""
    out = np.zeros(a.shape[0], dtype=np.bool_)
    for i in range(a.shape[0]):
        out[i] = _has(b, a[i])
    return out


@jit
def group_best(chunk_ptr, chunk_nodes, node_group, chunks, groups, weights):
    """Per chunk of ``chunks``: the largest ``weights[k]`` over its nodes' name groups
    found in the ascending, distinct ``groups``, and 0 (the start value of each row) when
    none is or all are below it."""
    top = np.zeros(chunks.shape[0])
    m = groups.shape[0]
    if m == 0:
        return top
    for i in range(chunks.shape[0]):
        c = chunks[i]
        for p in range(chunk_ptr[c], chunk_ptr[c + 1]):
            x = node_group[chunk_nodes[p]]
            j = lower_bound(groups, 0, m, x)
            if j < m and groups[j] == x and weights[j] > top[i]:
                top[i] = weights[j]
    return top


@jit
def title_hits(gid, gram_groups, owner, up, tg, name_pages, page_t, w, best_e, best_w):
    """One bridge source t of ``lexical.GroupLookup.bridge_titles`` (its weight ``w``, its
    page ``page_t``, its bridge names ``tg``) over C_q's distinct pages ``up``: a page other
    than t's whose title group ``gid[u]`` is in ``tg`` raises ``best_e[u]`` to w; one whose
    title group is, or a title n-gram's group (``gram_groups``, page ``owner``) is, or that
    is one of ``name_pages`` (the pages a name of ``tg`` holds as n-gram) raises ``best_w[u]``."""
    n = up.shape[0]
    hit = np.zeros(n, dtype=np.bool_)
    for k in range(gram_groups.shape[0]):
        if _has(tg, gram_groups[k]):
            hit[owner[k]] = True
    for u in range(n):
        if up[u] == page_t:
            continue
        e = _has(tg, gid[u])
        wd = e or hit[u] or _has(name_pages, up[u])
        if e and w > best_e[u]:
            best_e[u] = w
        if wd and w > best_w[u]:
            best_w[u] = w
