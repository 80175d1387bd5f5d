"""CODA associative navigation kernels over the entity-relation CSR (CodaRAG §3.3-3.4).

The entity adjacency is ``(ptr, nbr, rel)``: row u lists neighbours nbr[k] reached
through relation rel[k]. Similarities to the query are precomputed per entity and
relation by the caller; these kernels only walk the arrays.
"""
from __future__ import annotations

import numpy as np

from ._config import dot_jit, jit
from .dense import CODE_SLACK, _better, offer
from .prefetch import prefetch_row

FRP_AHEAD = 8  # rows asked for ahead in functional_topk (a hint, no effect on results)


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
def _gather_chunks(ptr, chunks, items, scores, out_c, out_s, k):
    """Append (chunk, item score) for every source chunk of every item; returns the new fill."""
    for i in range(items.shape[0]):
        x = items[i]
        for j in range(ptr[x], ptr[x + 1]):
            out_c[k] = chunks[j]
            out_s[k] = scores[i]
            k += 1
    return k


@jit
def n_item_chunks(ent_ptr, rel_ptr, ents, rels):
    """How many (chunk, item) pairs the kept entities and relations have."""
    n = 0
    for i in range(ents.shape[0]):
        n += ent_ptr[ents[i] + 1] - ent_ptr[ents[i]]
    for i in range(rels.shape[0]):
        n += rel_ptr[rels[i] + 1] - rel_ptr[rels[i]]
    return n


@jit
def _gather_sorted(ent_ptr, ent_chunks, rel_ptr, rel_chunks, ents, ent_score, rels, rel_score):
    """(chunk, item score) pairs of every kept item and their stable order by chunk id."""
    n = n_item_chunks(ent_ptr, rel_ptr, ents, rels)
    pc = np.empty(n, dtype=np.int64)
    ps = np.empty(n)
    k = _gather_chunks(ent_ptr, ent_chunks, ents, ent_score, pc, ps, 0)
    _gather_chunks(rel_ptr, rel_chunks, rels, rel_score, pc, ps, k)
    return pc, ps, np.argsort(pc, kind="mergesort")


@jit
def align_chunks(ent_ptr, ent_chunks, rel_ptr, rel_chunks, ents, ent_score, rels, rel_score,
                 n_chunks):
    """Source chunks of the kept entities and relations (CodaRAG §3.4), ranked by how
    many kept items occur in them (desc), ties by the best item score (desc), then by
    chunk id. Returns (chunk ids, occurrence counts, best scores) in that order.
    Work and memory are proportional to the kept items' chunk lists, not to ``n_chunks``."""
    pc, ps, o = _gather_sorted(ent_ptr, ent_chunks, rel_ptr, rel_chunks, ents, ent_score,
                               rels, rel_score)
    n = pc.shape[0]
    ids_all = np.empty(n, dtype=np.int64)
    count_all = np.zeros(n, dtype=np.int64)
    best_all = np.full(n, -np.inf)
    nz = -1
    last = -1
    for t in range(n):
        c = pc[o[t]]
        if c != last:
            nz += 1
            ids_all[nz] = c
            last = c
        count_all[nz] += 1
        if ps[o[t]] > best_all[nz]:
            best_all[nz] = ps[o[t]]
    nz += 1
    ids = ids_all[:nz]
    count = count_all[:nz]
    best = best_all[:nz]
    # stable sorts: by id (already), then best desc, then count desc
    o = np.argsort(-best, kind="mergesort")
    o = o[np.argsort(-count[o], kind="mergesort")]
    return ids[o].copy(), count[o].copy(), best[o].copy()


@jit
def _pool_chunks(ent_ptr, ent_chunks, rel_ptr, rel_chunks, ents, ent_w, rels, rel_w, use_max):
    """Every source chunk of the kept items (ascending) with the sum (``use_max``: the
    largest, floored at 0) of their weights."""
    pc, ps, o = _gather_sorted(ent_ptr, ent_chunks, rel_ptr, rel_chunks, ents, ent_w, rels, rel_w)
    n = pc.shape[0]
    ids = np.empty(n, dtype=np.int64)
    tot = np.zeros(n)
    nz = -1
    last = -1
    for t in range(n):
        c = pc[o[t]]
        if c != last:
            nz += 1
            ids[nz] = c
            last = c
        if use_max:
            tot[nz] = max(tot[nz], ps[o[t]])
        else:
            tot[nz] += ps[o[t]]
    nz += 1
    return ids[:nz].copy(), tot[:nz].copy()


@jit
def weighted_chunks(ent_ptr, ent_chunks, rel_ptr, rel_chunks, ents, ent_w, rels, rel_w):
    """Relevance alignment (ours, docs/architecture.md §7): every source chunk of the
    kept items with the sum of their weights. Returns (chunk ids ascending, summed
    weights). Work and memory are proportional to the items' chunk lists."""
    return _pool_chunks(ent_ptr, ent_chunks, rel_ptr, rel_chunks, ents, ent_w, rels, rel_w, False)


@jit
def max_chunks(ent_ptr, ent_chunks, rel_ptr, rel_chunks, ents, ent_w, rels, rel_w):
    """``align_pool="max"`` (docs/architecture.md §7): every source chunk of the kept
    items (ascending) with the largest of their weights, floored at 0."""
    return _pool_chunks(ent_ptr, ent_chunks, rel_ptr, rel_chunks, ents, ent_w, rels, rel_w, True)


@dot_jit
def _max_dot(V, E, i):
    """max_j <E[j], V[i]> in float32 (sums reassociated, as kernels/dense.py's dots)."""
    best = -np.inf
    for j in range(E.shape[0]):
        s = np.float32(0.0)
        for t in range(V.shape[1]):
            s += E[j, t] * V[i, t]
        if s > best:
            best = s
    return best


@jit
def _rows_in_order(n, rows, entries, on):
    """(the distinct ``rows`` not in ``entries``, ascending, in ``idx[:c0]``; c0), c0 = 0
    when not ``on``."""
    take = np.zeros(n, dtype=np.bool_)
    for t in range(rows.shape[0]):
        take[rows[t]] = True
    for j in range(entries.shape[0]):
        take[entries[j]] = False
    idx = np.empty(rows.shape[0], dtype=np.int64)
    c0 = 0
    for i in range(n if on else 0):
        if take[i]:
            idx[c0] = i
            c0 += 1
    return idx, c0


@jit
def functional_topk(frp, entries, k, rows):
    """Functional association without a dense score vector (``sims="lazy"``,
    docs/architecture.md §7): the ``k`` rows i of ``rows`` (repeats allowed; outside ``entries``)
    with the largest positive max_j <frp[entries[j]], frp[i]>, score descending, ties by
    lower id, in one pass (float32 FastRP rows). Returns (ids int64, scores float64)."""
    n, d = frp.shape
    m = entries.shape[0]
    E = np.empty((m, d), dtype=np.float32)
    for j in range(m):
        E[j] = frp[entries[j]]
    # rows in id order (the selection is order-free: score, then id): the FastRP rows are
    # read forward through memory (2Wiki: 1.7 -> 1.3 ms), each asked for FRP_AHEAD rows
    # before its dots (kernels/prefetch.py; 2Wiki: 0.95 -> 0.75 ms)
    idx, c0 = _rows_in_order(n, rows, entries, k > 0)
    kk = max(k, 1)
    ids = np.empty(kk, dtype=np.int64)
    s = np.empty(kk, dtype=np.float32)
    c = 0
    for t in range(min(FRP_AHEAD, c0)):
        prefetch_row(frp, idx[t])
    for t in range(c0):
        if t + FRP_AHEAD < c0:
            prefetch_row(frp, idx[t + FRP_AHEAD])
        i = idx[t]
        b = _max_dot(frp, E, i)
        if b > 0 and (c < k or _better(b, i, s[k - 1], ids[k - 1])):
            c = offer(b, i, c, k, ids, s)
    return ids[:c].copy(), s[:c].astype(np.float64)


@jit
def _icode_rows(C, rows, Q, out):
    """``out[t, j]`` = <C[rows[t]], Q[j]> over int8 codes, summed exactly in int32 (as
    kernels/dense.py ``_icode_dots``); ``rows`` ascending, read forward (asking for them
    ahead made it 2.5x slower on 2Wiki's FastRP codes)."""
    m, d = Q.shape
    row = np.empty(d, dtype=np.int16)
    for t in range(rows.shape[0]):
        i = rows[t]
        for u in range(d):
            row[u] = C[i, u]
        for j in range(m):
            a = np.int32(0)
            for u in range(d):
                a += row[u] * np.int16(Q[j, u])
            out[t, j] = a


@jit
def functional_topk_coded(frp, C, scale, l1, entries, k, rows):
    """:func:`functional_topk`'s ids and scores, the rows first bounded from int8 codes
    (``C``, ``scale``, ``l1``: kernels/dense.py ``quantize_rows`` and ``code_l1`` of
    ``frp``; the entry rows quantized with one step ``sq`` = their max |x| / 127, so each
    score is within ``scale[i] (max_j |E[j]|_1 + sq l1[i]) / 2 + CODE_SLACK`` of
    ``scale[i] sq <C[i], Q[j]>``, ``icode_topk``'s bound): only the rows whose upper bound
    reaches the k-th best lower bound are scored in float32, and those include every row
    of the result (``icode_topk``'s argument), so the same ids and floats, from a quarter
    of the bytes (session 20)."""
    n, d = frp.shape
    m = entries.shape[0]
    E = np.empty((m, d), dtype=np.float32)
    qmax = q1 = 0.0
    for j in range(m):
        E[j] = frp[entries[j]]
        r1 = 0.0
        for u in range(d):
            qmax = max(qmax, abs(E[j, u]))
            r1 += abs(E[j, u])
        q1 = max(q1, r1)
    sq = qmax / 127.0 if qmax > 0 else 1.0
    Q = np.empty((m, d), dtype=np.int8)
    for j in range(m):
        for u in range(d):
            Q[j, u] = np.int8(min(127.0, max(-127.0, np.rint(E[j, u] / sq))))
    idx, c0 = _rows_in_order(n, rows, entries, k > 0 and m > 0)  # as functional_topk
    A = np.empty((c0, m), dtype=np.int32)
    _icode_rows(C, idx[:c0], Q, A)
    mx = np.empty(c0)
    for t in range(c0):
        a = A[t, 0]
        for j in range(1, m):
            a = max(a, A[t, j])
        mx[t] = a
    kk = max(k, 1)
    lo_ids, lo_s = np.empty(kk, dtype=np.int64), np.empty(kk)
    c = 0
    for t in range(c0):  # the k best lower bounds
        i = idx[t]
        lo = scale[i] * sq * mx[t] - (scale[i] * 0.5 * (q1 + sq * l1[i]) + CODE_SLACK)
        if c < k or lo > lo_s[k - 1]:
            c = offer(lo, i, c, k, lo_ids, lo_s)
    floor = lo_s[k - 1] if c == k else -np.inf
    ids = np.empty(kk, dtype=np.int64)
    s = np.empty(kk, dtype=np.float32)
    c = 0
    for t in range(c0):
        i = idx[t]
        hi = scale[i] * sq * mx[t] + (scale[i] * 0.5 * (q1 + sq * l1[i]) + CODE_SLACK)
        if hi >= floor and hi > 0:
            b = _max_dot(frp, E, i)
            if b > 0 and (c < k or _better(b, i, s[k - 1], ids[k - 1])):
                c = offer(b, i, c, k, ids, s)
    return ids[:c].copy(), s[:c].astype(np.float64)
