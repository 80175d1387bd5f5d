"""Options of ``run_stitch`` that are off in both presets (docs/architecture.md §5;
issue 21, each measured beside the presets): the per-page cap (``title_max``), maximal
marginal relevance over the ranker's order (``mmr``), bridge sources from named titles
(``hop_bridge_titles``), the dense search moved towards the first hop (``hop_dense``),
a second retrieval from the question and the first hop's bridge name (``hop_query``)
and further bridge rounds (``hop_rounds``). Kept out of ``stitch.py`` so the default
query route stays in its five modules (tests/test_layout.py).
"""
from __future__ import annotations

import numpy as np


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


def later_rounds(eng, q, v0, cands, seeded, r, stitch, hybrid, detail, used, bridge, seed):
    """``HybridOptions.hop_rounds`` > 1: each further round takes the best chunk t of the
    last ranking not used as a bridge source yet, adds its bridge names' chunks
    (``bridge(t)`` = ``stitch.bridge_chunks``' (ids, weights); prior term hop_bridge x
    weight) and its rare names as seeds (``seed(t, seeds)`` = ``stitch.hop_seeds``), and
    runs STITCH again on the grown candidates: a chain of passages each naming the next
    (a 3-4 hop question) is followed one link per round."""
    (c0, bonus), (seeds, values) = cands, seeded
    for _ in range(hybrid.hop_rounds - 1):
        t = next((int(c) for c in r.chunk_ids.tolist() if int(c) not in used), None)
        if t is None:
            break
        used.add(t)
        b_c, b_v = bridge(t)
        hop, hop_v = seed(t, seeds)
        if not b_c.size and not hop.size:
            continue
        c0 = np.concatenate([c0, b_c])
        bonus = np.concatenate([bonus, hybrid.hop_bridge * b_v])
        seeds, values = np.concatenate([seeds, hop]), np.concatenate([values, hop_v])
        r = eng.query(q, v0, c0, stitch, chunk_bonus=bonus, seed_nodes=seeds,
                      seed_values=values, detail=detail)
    return r, c0, seeds
