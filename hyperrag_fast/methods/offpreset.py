"""Options of ``run_stitch`` that are off in both presets (docs/architecture.md §5;
issue 21, each measured beside the presets): the per-page cap (``title_max``), maximal
marginal relevance over the ranker's order (``mmr``), bridge sources from named titles
(``hop_bridge_titles``), the dense search moved towards the first hop (``hop_dense``),
a second retrieval from the question and the first hop's bridge name (``hop_query``)
and a wider second-round pool (``wide_chunks``). Kept out of ``stitch.py`` so the default
query route stays in its five modules (tests/test_layout.py); further bridge rounds
(``hop_rounds``) and the chain columns, in the bge-small / MiniLM presets since session 19,
live in ``engine.py``.
"""
from __future__ import annotations

import numpy as np

from ..engine import chunk_group_best, recip_rank as _rr


def _best_per_title(lk, named: np.ndarray, share: np.ndarray) -> list[int]:
    """Of the chunks of the titles the question names, each title's chunk of the largest
    share (the paragraph most similar to q): ``HybridOptions.hop_bridge_titles``' sources."""
    pages = lk.titles.pages()
    best: dict[int, tuple[float, int]] = {}
    for c, x in zip(named.tolist(), share.tolist()):
        p = int(pages[c])
        if p not in best or x > best[p][0]:
            best[p] = (x, int(c))
    return [c for _, c in best.values()]


def hop_dense(state, eng, q: np.ndarray, t: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``HybridOptions.hop_dense``: the ``k`` chunks nearest to q + v(t) (the question moved
    towards the first hop's top chunk ``t``, normalised; t itself left out), each with
    max(0, sim(q + v(t), c)) - the next hop's passage resembles the first hop's, not q."""
    v = q.astype(np.float64) + eng.chunk_vec[t].astype(np.float64)
    n = float(np.sqrt((v * v).sum()))
    if not n > 0:
        return np.empty(0, np.int64), np.empty(0)
    ids, sims = state.index.ann["chunk_vec"].search((v / n).astype(np.float32), k + 1)
    keep = ids != t
    return ids[keep][:k].astype(np.int64), np.maximum(sims[keep][:k].astype(np.float64), 0.0)


def wide_pool(state, q: np.ndarray, prior: np.ndarray, k_chunks: int, wide: int,
              flat: float) -> np.ndarray:
    """``HybridOptions.wide_chunks`` (candidate recall, docs/architecture.md §5): the chunks
    ranked k_chunks..wide by similarity to q when the first round's prior p over C_q is
    flat (max p <= ``flat``), else none; they join the second round with the paper's prior."""
    p = np.asarray(prior, np.float64)
    if wide <= k_chunks or not p.size or p.max() / max(p.sum(), 1e-300) > flat:
        return np.empty(0, np.int64)
    return np.asarray(state.index.ann["chunk_vec"].search(q, wide)[0], np.int64)[k_chunks:]


def hop_query(state, eng, text: str, t: int, k: int, bm25: bool,
              bridges) -> tuple[np.ndarray, np.ndarray]:
    """``HybridOptions.hop_query`` / ``hop_query_bm25``: the ``k`` chunks (t left out) best
    for the string "question bridge", bridge = the name of chunk ``t``'s bridge group of
    the largest weight (``bridges(t)`` = ``stitch.bridge_groups``' (groups, weights)); the
    embedded string's nearest chunks with max(0, sim), or its BM25 top with s / max(s)."""
    grp, w = bridges(t)
    none = (np.empty(0, np.int64), np.empty(0))
    if not grp.size or (bm25 and state.bm25 is None):
        return none
    g = eng.graph
    nodes = g.chunk_nodes[g.chunk_ptr[t]:g.chunk_ptr[t + 1]]
    best = int(grp[int(np.argmax(w))])
    query = f"{text} {g.node_name[int(nodes[g.node_group[nodes] == best][0])]}"
    if not bm25 and state.embedder is None:
        raise ValueError("hop_query embeds a second query: this query state has no embedder")
    if bm25:
        ids, s = state.bm25.top_k(query, k + 1)
        s = s / s.max() if s.size and s.max() > 0 else s
    else:
        v = np.asarray(state.embedder.embed([query]), np.float32).reshape(-1)
        ids, s = state.index.ann["chunk_vec"].search(v, k + 1)
        s = np.maximum(np.asarray(s, np.float64), 0.0)
    keep = ids != t
    return np.asarray(ids)[keep][:k].astype(np.int64), np.asarray(s, np.float64)[keep][:k]


def dense_hops(state, eng, q: np.ndarray, text: str, t: int, hybrid,
               bridges) -> tuple[np.ndarray, np.ndarray]:
    """The candidates of ``hop_dense`` and ``hop_query`` / ``hop_query_bm25`` from the first
    round's top chunk ``t``, each with its prior term (weight x value)."""
    ids, vals = [np.empty(0, np.int64)], [np.empty(0)]
    if hybrid.hop_dense > 0:
        c, v = hop_dense(state, eng, q, t, hybrid.hop_dense)
        ids.append(c)
        vals.append(hybrid.hop_dense_weight * v)
    for k, bm25 in ((hybrid.hop_query, False), (hybrid.hop_query_bm25, True)):
        if k > 0:
            c, v = hop_query(state, eng, text, t, k, bm25, bridges)
            ids.append(c)
            vals.append(hybrid.hop_query_weight * v)
    return np.concatenate(ids), np.concatenate(vals)


def mmr_top(eng, ranked: np.ndarray, scores: np.ndarray, mu: float,
            top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """``HybridOptions.mmr``: the top-k of ``ranked`` (best first) chosen greedily by the
    score's share of its range minus mu x the largest cosine to a chunk already chosen
    (maximal marginal relevance: the hops of one question are different passages)."""
    n = ranked.shape[0]
    if n == 0:
        return ranked, scores
    s = np.asarray(scores, np.float64)
    span = s.max() - s.min()
    rel = (s - s.min()) / span if span > 0 else np.ones(n)
    V = eng.chunk_vec[ranked].astype(np.float64)
    red = np.full(n, -np.inf)
    left = np.ones(n, bool)
    out = []
    for _ in range(min(top_k, n)):
        m = np.where(left, rel - mu * np.maximum(red, 0.0), -np.inf)
        i = int(np.argmax(m))
        out.append(i)
        left[i] = False
        red = np.maximum(red, (V * V[i]).sum(axis=1))
    o = np.asarray(out, np.int64)
    return ranked[o].astype(np.int64), s[o]


def page_capped(ranked: np.ndarray, scores: np.ndarray, pages: np.ndarray, cap: int,
                top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top-k of ``ranked`` (best first) once every chunk whose page already has ``cap``
    chunks above it moves after the others, order kept within both parts
    (``HybridOptions.title_max``); ``pages[c]`` = chunk c's page id (-1: no title)."""
    seen: dict[int, int] = {}
    keep, later = [], []
    for i, c in enumerate(ranked.tolist()):
        p = int(pages[c])
        n = seen.get(p, 0) if p >= 0 else 0
        (keep if n < cap else later).append(i)
        if p >= 0:
            seen[p] = n + 1
    order = np.asarray(keep + later, np.int64)[:top_k]
    return ranked[order].astype(np.int64), np.asarray(scores, np.float64)[order]


def _share(v: np.ndarray) -> np.ndarray:
    m = v.max() if v.size else 0.0
    return v / m if m > 0 else np.zeros_like(v, dtype=np.float64)


def graph_weight(prior: np.ndarray) -> float:
    """``HybridOptions.graph_gate``'s per-query graph weight: 1 - max(prior) / sum(prior)
    (0 when the prior sits on one chunk, towards 1 when it is flat)."""
    tot = float(prior.sum()) if prior.size else 0.0
    return 1.0 - float(prior.max()) / tot if tot > 0 else 1.0


def gated_top(cq: np.ndarray, prior: np.ndarray, pi: np.ndarray,
              top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k C_q chunks by (1 - g) prior share + g PPR share, g = :func:`graph_weight`
    (stable: ties keep C_q order)."""
    prior, pi = np.asarray(prior, np.float64), np.asarray(pi, np.float64)
    g = graph_weight(prior)
    s = (1.0 - g) * _share(prior) + g * _share(pi)
    order = np.argsort(-s, kind="stable")[:top_k]
    return cq[order].astype(np.int64), s[order]


def _at(cq: np.ndarray, ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    """values[j] at the C_q rows holding ids[j] (the largest for a repeated id), else 0."""
    pos = {c: i for i, c in enumerate(cq.tolist())}
    out = np.zeros(cq.shape[0])
    for c, x in zip(ids.tolist(), np.asarray(values, np.float64).tolist()):
        i = pos.get(c)
        if i is not None and x > out[i]:
            out[i] = x
    return out


def more_link_features(eng, lk, q, r, r1_top, qgroups, cols, m: int = 3) -> dict:
    """The ``rank_links`` columns measured beside the shipped ones and off in both presets
    (issue 21, ``benchmarks/experiments/rank_links.py``): q_names (question name groups in
    the chunk, / 3, at most 1), r1_link (non-question names
    shared with the first round's top ``m`` chunks), r1_rank, page_rank / page_count (rank by
    sim(q, c) within its page in C_q, 1 / its page's C_q chunks), pi_mass / prior_mass (share
    of the query's total), sim_rank, top_page (the first round's top chunk's page),
    bridge_title_top (bridge_title on a page's best paragraph), top_sim / hop_sim (cosine to
    the top chunk / to q + it) and bridge_title_final (bridge_title from the final round's
    PPR top ``m``). ``cols``: the shipped columns, computed already."""
    g, cq = eng.graph, np.asarray(r.cq, np.int64)
    n, sim, pi, prior = cq.shape[0], np.asarray(r.cq_sim), np.asarray(r.cq_pi), np.asarray(r.cq_prior)
    out = {}
    row = np.repeat(np.arange(n), np.diff(g.chunk_ptr)[cq])
    grp = g.node_group[np.concatenate([g.chunk_nodes[g.chunk_ptr[c]:g.chunk_ptr[c + 1]] for c in cq.tolist()]
                                      ) if n else np.empty(0, np.int64)].astype(np.int64)
    key = np.unique(row * (g.n_groups + 1) + grp) if grp.size else grp
    r_u, g_u = key // (g.n_groups + 1), key % (g.n_groups + 1)
    qn = np.isin(g_u, qgroups)
    out["q_names"] = np.minimum(np.bincount(r_u[qn], minlength=n), 3.0) / 3.0
    out["r1_rank"] = _at(cq, r1_top, 1.0 / (1.0 + np.arange(r1_top.shape[0])))
    pages = lk.titles.pages() if lk.titles is not None else np.full(g.n_chunks, -1, np.int64)
    link = np.zeros(n)
    for j, t in enumerate(r1_top[:m].tolist()):
        own = lk.groups_of_keys([lk.titles.page_key(t)]) if lk.titles is not None else []
        tg = np.setdiff1d(g.node_group[g.chunk_nodes[g.chunk_ptr[t]:g.chunk_ptr[t + 1]]].astype(np.int64),
                          np.concatenate([qgroups, np.asarray(own, np.int64)]))
        cnt = np.bincount(r_u[np.isin(g_u, tg) & ~qn], minlength=n).astype(np.float64)
        cnt[cq == t] = 0.0
        link = np.maximum(link, np.minimum(cnt, 2.0) / 2.0 / (1.0 + j))
    out["r1_link"] = link
    pg = pages[cq]
    page_rank, page_count = np.ones(n), np.ones(n)
    for p in np.unique(pg[pg >= 0]).tolist():
        idx = np.flatnonzero(pg == p)
        if idx.size > 1:
            page_rank[idx[np.argsort(-sim[idx], kind="stable")]] = 1.0 / (1.0 + np.arange(idx.size))
            page_count[idx] = 1.0 / idx.size
    out["page_rank"], out["page_count"] = page_rank, page_count
    t0 = int(r1_top[0]) if r1_top.size else -1
    out["top_page"] = ((pg == pages[t0]) & (pg >= 0) & (cq != t0)).astype(np.float64) if t0 >= 0 else np.zeros(n)
    tot_pi, tot_p = float(np.sum(pi)), float(np.sum(prior))
    out["pi_mass"] = pi / tot_pi if tot_pi > 0 else np.zeros(n)
    out["prior_mass"] = prior / tot_p if tot_p > 0 else np.zeros(n)
    out["sim_rank"] = _rr(sim)
    out["bridge_title_top"] = cols["bridge_title"] * (page_rank == 1.0)
    cv = eng.chunk_vec[cq].astype(np.float64)
    top_sim = cv @ eng.chunk_vec[t0].astype(np.float64) if t0 >= 0 else np.zeros(n)
    top_sim[cq == t0] = 0.0
    hv = q + eng.chunk_vec[t0].astype(np.float64) if t0 >= 0 else np.asarray(q, np.float64)
    hop_sim = cv @ (hv / max(float(np.sqrt(hv @ hv)), 1e-12))
    out["top_sim"], out["hop_sim"] = top_sim, hop_sim - hop_sim.max()
    fin = cq[np.argsort(-pi, kind="stable")][:m]
    out["bridge_title_final"] = lk.bridge_titles(cq, fin, qgroups)[0]
    return out


def title_best(cq: np.ndarray, named: np.ndarray, share: np.ndarray, pages: np.ndarray) -> np.ndarray:
    """The "title_best" link column: a C_q chunk of a page the question names scores its
    title share over the best share among that page's named chunks (1 on the paragraph
    most similar to q, whatever the page's size; a one-paragraph page 1), else 0."""
    out = np.zeros(cq.shape[0])
    if not named.size:
        return out
    best: dict[int, float] = {}
    for c, x in zip(named.tolist(), np.asarray(share, np.float64).tolist()):
        p = int(pages[c])
        best[p] = max(best.get(p, 0.0), x)
    rel = [x / best[int(pages[c])] if best[int(pages[c])] > 0 else 1.0
           for c, x in zip(named.tolist(), np.asarray(share, np.float64).tolist())]
    return _at(cq, named, np.asarray(rel))
