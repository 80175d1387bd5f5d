"""Chunk selection helpers of CODA's relevance alignment (coda/retrieve.py module
docstring: ``dedup_sim``, ``diversity``, ``cover_weight``, ``cover_pairs``, ``fact_weight``;
docs/architecture.md §7)."""
from __future__ import annotations

import numpy as np

from ..kernels.coda_select import cover_greedy
from .fast import positions_in


def add_lexical(bm25, text, ids, score, n0, top_k, o, chunk_vec, q):
    """``lexical_weight`` (coda/retrieve.py module docstring): the best
    ``max(dense_pool, top_k)`` BM25 chunks join the candidates ``ids`` (``ids[:n0]``
    ascending; a new one scored ``dense_weight`` x its cosine) and gain ``lexical_weight``
    x BM25 / the best BM25. ``lexical_scope="all"`` (docs/architecture.md §7): every
    candidate gains it, not only those best chunks (one BM25 pass over the question's
    postings). Returns (ids, score)."""
    lid, ls = bm25.top_k(text, max(o.dense_pool, top_k))
    if not len(lid):
        return ids, score
    top = max(float(np.max(ls)), 1e-12)
    ls = np.asarray(ls, np.float64) / top
    lid = np.asarray(lid, np.int64)
    at = positions_in(lid, ids, n0)  # lid's positions in ids (-1: absent)
    extra = lid[at < 0]
    at[at < 0] = ids.size + np.arange(extra.size)
    ids = np.concatenate([ids, extra])
    score = np.concatenate([score, o.dense_weight * (chunk_vec[extra] @ q)
                            if chunk_vec is not None and extra.size else np.zeros(extra.size)])
    if o.lexical_scope == "all":
        return ids, score + o.lexical_weight * (bm25.scores(text, ids) / top)
    score[at] += o.lexical_weight * ls
    return ids, score


def _dedup(chunk_vec, ids, order, top_k, limit) -> np.ndarray:
    """Greedy: walk ``order`` and skip a chunk whose cosine with a chosen one exceeds
    ``limit`` (near-duplicate passages carry no new evidence); up to ``top_k``."""
    chosen: list[int] = []
    chunk_vec = np.asarray(chunk_vec)  # a memmap's rows: plain views (no per-row wrapper)
    for j in order:
        v = chunk_vec[ids[j]]
        if all(float(v @ chunk_vec[ids[c]]) <= limit for c in chosen):
            chosen.append(int(j))
            if len(chosen) == top_k:
                break
    return np.asarray(chosen, np.int64)


def _mmr(chunk_vec, ids, score, top_k, lam, limit) -> np.ndarray:
    """Greedy maximal marginal relevance over candidate positions: each step takes the
    best ``score - lam * max(0, max cosine with the chosen)`` (ties by chunk id),
    skipping a candidate above ``limit`` (when > 0); up to ``top_k`` positions."""
    v = chunk_vec[ids]
    sim = (v @ v.T).astype(np.float64)
    near = np.zeros(ids.size)
    free = np.ones(ids.size, bool)
    chosen: list[int] = []
    while len(chosen) < min(top_k, ids.size):
        val = score - lam * np.maximum(near, 0.0)
        ok = free & ((near <= limit) if limit > 0 and chosen else True)
        if not ok.any():
            break
        cand = np.flatnonzero(ok)
        j = int(cand[np.lexsort((ids[cand], -val[cand]))[0]])
        chosen.append(j)
        free[j] = False
        near = np.maximum(near, sim[:, j])
    return np.asarray(chosen, np.int64)


def _cover(chunk_vec, ids, score, top_k, lam, limit, postings, n_docs, held=None,
           pairs=0.0) -> np.ndarray:
    """Greedy question-term coverage over candidate positions: each step takes the best
    ``score + lam * (idf share of the question's terms the chunk holds that no chosen
    chunk holds)`` (ties by chunk id), skipping a candidate whose cosine with a chosen
    one exceeds ``limit`` (when > 0); up to ``top_k`` positions. ``postings``: per
    question term, the documents holding it (``BM25.postings``); idf = ln(1 + (N - df +
    0.5) / (df + 0.5)) with ``N = n_docs``. ``held``: :func:`_held` of ``ids`` when known.
    ``pairs``: ``cover_pairs`` / ``lam`` (:func:`_pairs`). The greedy is
    kernels/coda_select.py ``cover_greedy``."""
    n = ids.size
    if not postings or n == 0:
        order = np.lexsort((ids, -score))
        return _dedup(chunk_vec, ids, order, top_k, limit) if limit > 0 else order[:top_k]
    held, w = _held(ids, postings, n_docs, pairs) if held is None else held
    V = np.asarray(chunk_vec) if limit > 0 else _NO_ROWS
    return cover_greedy(np.ascontiguousarray(held), w, np.asarray(score, np.float64),
                        np.asarray(ids, np.int64), float(lam), int(top_k), V, float(limit))


_NO_ROWS = np.zeros((1, 1), np.float32)  # cover_greedy's rows when no cosine is read


def _pairs(held, w, ratio) -> tuple[np.ndarray, np.ndarray]:
    """``held`` / ``w`` with one more column per pair of question terms (a candidate holds
    a pair when it holds both), weighted ``ratio`` x idf_a idf_b / (sum over pairs): the
    greedy's ``lam`` x (term share + ``ratio`` x pair share) of what no chosen chunk holds."""
    a, b = np.triu_indices(w.size, 1)
    pw = w[a] * w[b]
    tot = float(pw.sum())
    if ratio <= 0 or tot <= 0:
        return held, w
    return (np.concatenate([held, held[:, a] & held[:, b]], axis=1),
            np.concatenate([w, ratio * pw / tot]))


def _held(ids, postings, n_docs, pairs=0.0) -> tuple[np.ndarray, np.ndarray]:
    """(which question terms each candidate holds (n, terms), the terms' idf shares);
    ``pairs`` > 0: with the term pairs' columns (:func:`_pairs`)."""
    df = np.array([p.size for p in postings], np.float64)
    w = np.log1p((n_docs - df + 0.5) / (df + 0.5))
    w = w / w.sum() if w.sum() > 0 else w
    # np.isin(ids, p) per term, by marking p in one scratch row (no sort per term; 3x
    # faster on 2Wiki than np.unique + searchsorted or a compiled binary search)
    top = max([n_docs, int(ids.max()) + 1 if ids.size else 0]
              + [int(p.max()) + 1 for p in postings if p.size])
    mark = np.zeros(top, bool)
    held = np.empty((ids.size, len(postings)), bool)
    for j, p in enumerate(postings):
        mark[p] = True
        held[:, j] = mark[ids]
        mark[p] = False
    return _pairs(held, w, pairs) if pairs > 0 else (held, w)


def _ratio(o) -> float:
    """``cover_pairs`` relative to ``cover_weight`` (the greedy's ``lam``)."""
    return o.cover_pairs / o.cover_weight if o.cover_pairs > 0 and o.cover_weight > 0 else 0.0


def select(chunk_vec, ids, score, top_k, o, postings, n_docs, held=None) -> np.ndarray:
    """Positions of the chosen candidates, best first: ``_cover`` when ``postings`` is
    not None (``cover_weight``), else ``_mmr`` (``diversity``), ``_dedup`` (``dedup_sim``)
    or the order by score (ties by chunk id). ``held``: :func:`_held` of ``ids`` when known."""
    if postings is not None:
        return _cover(chunk_vec, ids, score, top_k, o.cover_weight, o.dedup_sim, postings, n_docs,
                      held, _ratio(o))
    if o.diversity > 0 and chunk_vec is not None:
        return _mmr(chunk_vec, ids, score, top_k, o.diversity, o.dedup_sim)
    order = np.lexsort((ids, -score))
    if o.dedup_sim > 0 and chunk_vec is not None:
        return _dedup(chunk_vec, ids, order, top_k, o.dedup_sim)
    return order[:top_k]


def select_lazy_facts(chunk_vec, ids, score, top_k, o, postings, n_docs, best_of, upper,
                      bound_of=None):
    """:func:`select` over ``score + fact_weight * best_of(ids)`` (``fact_weight``), with
    ``best_of`` (a chunk's best sentence) computed only for the candidates the selection
    can reach. Each candidate has an upper bound on its value, ``score + fact_weight *
    upper`` (+ ``cover_weight`` x the idf share of all the question terms it holds), or
    the same with ``bound_of`` (a tighter bound, >= ``best_of``, asked only where
    ``upper`` does not settle it) in place of ``upper``; a growing set of candidates is
    selected until every chosen one scores above the bound of every candidate left out.
    The selection only walks candidates whose value is at least a chosen one's score (a
    coverage gain is >= 0), so it walks none left out: the same positions and scores as
    over all candidates, whatever sets are tried. The set starts as the best
    ``max(4 top_k, 32)`` by ``upper``'s bound and takes in every candidate whose bound
    reaches the lowest chosen score (twice as many when too few were chosen);
    ``best_of`` and ``bound_of`` are asked at most once per candidate. ``_mmr`` (a value
    below the score) computes all. Returns (positions, scores)."""
    n = ids.size
    ub = score + o.fact_weight * upper
    held = w = None
    if postings:
        held, w = _held(ids, postings, n_docs, _ratio(o))
        cov = o.cover_weight * (held @ w) + 1e-9
        ub = ub + cov
    rank = np.lexsort((ids, -ub))
    mmr = postings is None and o.diversity > 0 and chunk_vec is not None
    new = rank[:n if mmr else min(n, max(4 * top_k, 32))]
    best, inx = np.empty(n), np.zeros(n, bool)  # best_of of the candidates inx
    tub, tight = np.empty(n), np.zeros(n, bool)  # bound_of's bound of the candidates tight
    while True:
        if new.size:
            best[new] = best_of(ids[new])
            inx[new] = True
        sub = np.flatnonzero(inx)
        sc = score[sub] + o.fact_weight * best[sub]
        pos = select(chunk_vec, ids[sub], sc, top_k, o, postings, n_docs,
                     None if held is None else (held[sub], w))
        if sub.size == n:
            return sub[pos], sc[pos]
        if not pos.size == min(top_k, n) > 0:  # not top_k chosen: twice the set
            out = rank[~inx[rank]]
            new = out[:sub.size]
            continue
        t = sc[pos].min()
        # ub[rank] is descending: the candidates whose bound reaches the lowest chosen score
        new = rank[:int(np.searchsorted(-ub[rank], -t, side="right"))]
        new = new[~inx[new]]
        if bound_of is not None and new.size:
            ask = new[~tight[new]]
            if ask.size:
                tub[ask] = score[ask] + o.fact_weight * bound_of(ids[ask])
                if held is not None:
                    tub[ask] += cov[ask]
                tight[ask] = True
            new = new[tub[new] >= t]
        if new.size == 0:
            return sub[pos], sc[pos]
