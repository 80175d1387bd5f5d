"""CODA associative navigation kernels over the entity-relation CSR (CodaRAG §3.3-3.4).

The entity adjacency is ``(ptr, nbr, rel)``: row u lists neighbours nbr[k] reached
through relation rel[k]. Similarities to the query are precomputed per entity and
relation by the caller; these kernels only walk the arrays.
"""
from __future__ import annotations

import numpy as np

from ._config import jit


@jit
def semantic_expand(ptr, nbr, rel, ent_sim, rel_sim, entries, alpha, beta, tau):
    """One-hop semantic association from ``entries``.

    Every arc (u -> v via r) with u an entry scores alpha * rel_sim[r] + beta * ent_sim[v];
    arcs scoring below tau are pruned. Returns (entities, entity scores, relations,
    relation scores): each reached entity / relation once, with its best arc score,
    in order of first reach.
    """
    n = ptr.shape[0] - 1
    m = rel_sim.shape[0]
    best_e = np.full(n, -np.inf)
    best_r = np.full(m, -np.inf)
    ents = np.empty(ptr[n], dtype=np.int64)
    rels = np.empty(ptr[n], dtype=np.int64)
    ne = 0
    nr = 0
    for i in range(entries.shape[0]):
        u = entries[i]
        for k in range(ptr[u], ptr[u + 1]):
            v = nbr[k]
            r = rel[k]
            s = alpha * rel_sim[r] + beta * ent_sim[v]
            if s < tau:
                continue
            if best_e[v] == -np.inf:
                ents[ne] = v
                ne += 1
            if s > best_e[v]:
                best_e[v] = s
            if best_r[r] == -np.inf:
                rels[nr] = r
                nr += 1
            if s > best_r[r]:
                best_r[r] = s
    e_out = ents[:ne].copy()
    r_out = rels[:nr].copy()
    es = np.empty(ne)
    rs = np.empty(nr)
    for i in range(ne):
        es[i] = best_e[e_out[i]]
    for i in range(nr):
        rs[i] = best_r[r_out[i]]
    return e_out, es, r_out, rs


@jit
def induced_relations(ptr, nbr, rel, selected):
    """Relations whose both endpoints are selected (sorted relation ids, no repeats)."""
    n = ptr.shape[0] - 1
    mark = np.zeros(n, dtype=np.bool_)
    for i in range(selected.shape[0]):
        mark[selected[i]] = True
    out = np.empty(ptr[n], dtype=np.int64)
    c = 0
    for i in range(selected.shape[0]):
        u = selected[i]
        for k in range(ptr[u], ptr[u + 1]):
            if mark[nbr[k]]:
                out[c] = rel[k]
                c += 1
    return np.unique(out[:c])


@jit
def align_chunks(ent_ptr, ent_chunks, rel_ptr, rel_chunks, ents, ent_score, rels, rel_score,
                 n_chunks):
    """Source chunks of the kept entities and relations (CodaRAG §3.4), ranked by how
    many kept items occur in them (desc), ties by the best item score (desc), then by
    chunk id. Returns (chunk ids, occurrence counts, best scores) in that order."""
    count = np.zeros(n_chunks, dtype=np.int64)
    best = np.full(n_chunks, -np.inf)
    for i in range(ents.shape[0]):
        e = ents[i]
        for k in range(ent_ptr[e], ent_ptr[e + 1]):
            c = ent_chunks[k]
            count[c] += 1
            if ent_score[i] > best[c]:
                best[c] = ent_score[i]
    for i in range(rels.shape[0]):
        r = rels[i]
        for k in range(rel_ptr[r], rel_ptr[r + 1]):
            c = rel_chunks[k]
            count[c] += 1
            if rel_score[i] > best[c]:
                best[c] = rel_score[i]
    nz = 0
    for c in range(n_chunks):
        if count[c] > 0:
            nz += 1
    ids = np.empty(nz, dtype=np.int64)
    j = 0
    for c in range(n_chunks):
        if count[c] > 0:
            ids[j] = c
            j += 1
    key_b = np.empty(nz)
    key_c = np.empty(nz)
    for i in range(nz):
        key_b[i] = -best[ids[i]]
        key_c[i] = -count[ids[i]]
    # stable sorts: by id (already), then best desc, then count desc
    o = np.argsort(key_b, kind="mergesort")
    ids = ids[o]
    key_c = key_c[o]
    o = np.argsort(key_c, kind="mergesort")
    ids = ids[o]
    cnt = np.empty(nz, dtype=np.int64)
    bs = np.empty(nz)
    for i in range(nz):
        cnt[i] = count[ids[i]]
        bs[i] = best[ids[i]]
    return ids, cnt, bs
