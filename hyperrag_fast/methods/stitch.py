"""STITCH and its variants (STITCH-RAG §3.3 Alg. 1; Tables 2, 3, 8, 9), one function each.

:func:`run_stitch` is the whole query: candidates (dense top-K_V states and top-K_C
chunks, plus the BM25 chunks and question-name seeds when enabled), then the compiled
STIBP + projection + PPR of :class:`~hyperrag_fast.engine.StitchEngine`. Every variant
is ``run_stitch`` with one component changed; ``stitch`` takes the options as given
(default: ``config.TUNED``), ``stitch_paper`` the paper's (``config.PAPER``).
docs/architecture.md §4-§5.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..config import BRIDGE_TITLE_SOURCES, TOP_LINKS, DEFAULT_METHOD, HybridOptions, QueryOptions, StitchOptions
from ..engine import chain_links, csr_rows, later_rounds, run_starts, style_split, term_cover, unique
from ..kernels.links import member_of
from ..lexical import question_groups, top_links
from .base import OWN, MethodOutput, QueryState, missing
from ..settings import CHAIN_LINKS
from .offpreset import (_best_per_title, dense_hops, gated_top, graph_weight,  # noqa: F401
                        hop_dense, mmr_top, more_link_features, page_capped, title_best,
                        wide_pool)


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def run_stitch(state: QueryState, q: np.ndarray, text: str, stitch: StitchOptions,
               hybrid: HybridOptions, o: QueryOptions, detail: bool, key: str = OWN,
               method: str = DEFAULT_METHOD) -> MethodOutput:
    """Candidates, then Alg. 1 lines 2-31 on the engine ``key`` (the index's own graph or
    a prebuilt one). No hyperedge candidates E0 are searched: Alg. 1 reads S(e) only for
    hyperedges of activated or bridged states, which the kernel scores on demand."""
    if o.stitch.top_k > o.k_chunks:  # C_q grows from the k_chunks candidates: it may hold fewer
        raise ValueError(f"top_k={o.stitch.top_k} > k_chunks={o.k_chunks}: method {method!r} ranks "
                         f"only chunks reached from its k_chunks candidates; raise k_chunks "
                         f"(--k-chunks) to at least top_k")
    eng = state.engines.get(key)
    if eng is None:
        raise missing(method, key)
    t0 = time.perf_counter()
    v0, _ = state.node_search[key].search(q, o.k_nodes)
    c0, _ = state.index.ann["chunk_vec"].search(q, o.k_chunks)
    dense = c0
    bonus = np.zeros(c0.shape[0])
    b_ids, b_s = np.empty(0, np.int64), np.empty(0)
    if hybrid.k_bm25 > 0 and hybrid.bm25_weight > 0 and state.bm25 is not None:
        b_ids, b_s = state.bm25.top_k(text, hybrid.k_bm25)
        if b_ids.size:
            c0 = np.concatenate([c0, b_ids])
            bonus = np.concatenate([bonus, hybrid.bm25_weight * b_s / b_s.max()])
    seeds, groups = np.empty(0, np.int64), []
    named, share = np.empty(0, np.int64), np.empty(0)
    if hybrid.seeds != "none":
        lk = state.lookups[key]
        groups = question_groups(text, lk, hybrid.seeds, hybrid.ngram_min_words, hybrid.title_words)
        seeds = lk.seed_nodes(groups, hybrid.seed_max_group)
    if hybrid.title_chunks > 0 or (hybrid.hop_titles and hybrid.hop_chunks > 0) or hybrid.rank_split != "off":
        named, share = title_shares(eng, q, state.lookups[key].titles.chunks_named_in(
            text, hybrid.ngram_min_words), hybrid.title_top)
        if hybrid.title_chunks > 0:
            c0 = np.concatenate([c0, named])
            bonus = np.concatenate([bonus, hybrid.title_chunks * share])
    cand_ms = _ms(t0)
    t0 = time.perf_counter()
    r = eng.query(q, v0, c0, stitch, chunk_bonus=bonus, seed_nodes=seeds,
                  seed_values=np.full(seeds.shape[0], hybrid.seed_value), detail=detail)
    bridged, r1 = False, r
    n_src = hybrid.hop_bridge_chunks if hybrid.hop_bridge > 0 else 0
    sources = [c for c, s in zip(r.chunk_ids[:n_src].tolist(), r.scores[:n_src].tolist())
               if c == r.chunk_ids[0] or s >= hybrid.hop_bridge_near * r.scores[0]]
    if hybrid.hop_bridge > 0 and hybrid.hop_bridge_titles and named.size:
        sources += [c for c in _best_per_title(state.lookups[key], named, share) if c not in sources]
    for j, t in enumerate(sources):
        b_c, b_v = bridge_chunks(eng, q, t, _named_groups(state.lookups[key], text, t),
                                 hybrid.hop_bridge_max)  # the first round's top chunks' new names
        if b_c.size:
            c0 = np.concatenate([c0, b_c])
            bonus = np.concatenate([bonus, hybrid.hop_bridge * hybrid.hop_bridge_decay ** j * b_v])
            bridged = True
    if max(hybrid.hop_dense, hybrid.hop_query, hybrid.hop_query_bm25) > 0 and r.chunk_ids.size:
        d_c, d_v = dense_hops(state, eng, q, text, int(r.chunk_ids[0]), hybrid, lambda t: bridge_groups(
            eng, q, t, _named_groups(state.lookups[key], text, t)))  # offpreset.py
        if d_c.size:
            c0, bonus, bridged = np.concatenate([c0, d_c]), np.concatenate([bonus, d_v]), True
    if hybrid.wide_chunks > o.k_chunks:  # candidate recall (offpreset.py)
        w_c = wide_pool(state, q, r.cq_prior, o.k_chunks, hybrid.wide_chunks, hybrid.wide_flat)
        if w_c.size:
            c0, bonus, bridged = np.concatenate([c0, w_c]), np.concatenate([bonus, np.zeros(w_c.size)]), True
            dense = np.concatenate([dense, w_c])
    if hybrid.hop_chunks > 0 or bridged:
        hop, hop_v = np.empty(0, np.int64), np.empty(0)
        if hybrid.hop_chunks > 0:
            top = r.chunk_ids[:hybrid.hop_chunks]
            if hybrid.hop_titles and named.size:
                top = unique(np.concatenate([top, named]))
            hop, hop_v = hop_seeds(eng, q, top, seeds, hybrid)
        if hop.size or bridged:
            seeds = np.concatenate([seeds, hop])
            values = np.concatenate([np.full(seeds.shape[0] - hop.shape[0], hybrid.seed_value),
                                     hop_v])
            r = eng.query(q, v0, c0, stitch, chunk_bonus=bonus, seed_nodes=seeds,
                          seed_values=values, detail=detail)
    if bridged and hybrid.hop_rounds > 1:
        lk = state.lookups[key]
        r, c0, seeds = later_rounds(
            eng, q, v0, (c0, bonus), (seeds, values), r, stitch, hybrid, detail, set(sources),
            lambda t: bridge_chunks(eng, q, t, _named_groups(lk, text, t), hybrid.hop_bridge_max),
            lambda t, s: hop_seeds(eng, q, np.asarray([t], np.int64), s, hybrid),
            lambda ids: term_cover(state.bm25, text, ids))
    ids, scores, X = r.chunk_ids, r.scores, None
    if hybrid.rank_weights or detail:
        X = rank_features(r.cq, r.cq_sim, r.cq_score, r.cq_prior, r.cq_pi, dense, (b_ids, b_s),
                          (named, share))
        if hybrid.rank_links:
            X = np.column_stack([X, link_features(eng, state.lookups[key], q, r, r1, np.asarray(
                groups, np.int64), hybrid.rank_links, (named, share), state.bm25, text)])
        X = style_split(graph_mixed(X, hybrid.graph_mix), named.size == 0, len(hybrid.rank_links), hybrid.rank_split)
        if hybrid.rank_weights:
            ids, scores = fused_top(r.cq, X, hybrid.rank_weights,
                                    r.cq.shape[0] if hybrid.mmr > 0 else stitch.top_k)
            if hybrid.mmr > 0:
                ids, scores = mmr_top(eng, ids, scores, hybrid.mmr, stitch.top_k)
    if hybrid.graph_gate and not hybrid.rank_weights:
        ids, scores = gated_top(r.cq, r.cq_prior, r.cq_pi, stitch.top_k)
    if hybrid.title_max > 0:
        ranked, s_all = _final_order(r, X, hybrid)
        ids, scores = page_capped(ranked, s_all, state.lookups[key].titles.pages(),
                                  hybrid.title_max, stitch.top_k)
    graph_ms = _ms(t0)
    d = None
    if detail:
        d = {k: getattr(r, k) for k in r.__dataclass_fields__ if k not in ("chunk_ids", "scores")}
        d.update(cand_nodes=v0, cand_chunks=c0, seed_nodes=seeds, graph=key, features=X)
    return MethodOutput(ids, scores, d, cand_ms, graph_ms)


# --------------------------------------------------------------- calibrated final ranking
# ``HybridOptions.rank_weights`` (docs/architecture.md §5): every chunk of C_q gets
# per-query normalised features; the final score is one dot product with weights learned
# on the dev families (``benchmarks/train_ranker.py``).
#: feature names, in column order (the weights vector is [bias, *weights])
FEATURES = ("prior", "ppr", "ppr_rank", "prior_rank", "dense_rank", "sim_gap", "stibp",
            "bm25", "title")


def _recip_rank(v: np.ndarray) -> np.ndarray:
    """1 / (1 + rank) of each entry by descending value (stable: ties keep C_q order)."""
    order = np.argsort(-v, kind="stable")
    rr = np.empty(v.shape[0])
    rr[order] = 1.0 / (1.0 + np.arange(v.shape[0]))
    return rr


def _share(v: np.ndarray) -> np.ndarray:
    m = v.max() if v.size else 0.0
    return v / m if m > 0 else np.zeros_like(v, dtype=np.float64)


def _lookup(cq: np.ndarray, ids: np.ndarray, values: np.ndarray,
            pos: dict[int, int] | None = None) -> np.ndarray:
    """values[j] at the C_q rows holding ids[j] (the largest when an id repeats), else 0;
    ``pos``: {chunk id: its C_q row}, when the caller made it already."""
    out = np.zeros(cq.shape[0])
    if ids.size:
        if pos is None:
            pos = {c: i for i, c in enumerate(cq.tolist())}
        for c, x in zip(ids.tolist(), np.asarray(values, np.float64).tolist()):
            i = pos.get(c)
            if i is not None and x > out[i]:
                out[i] = x
    return out


def rank_features(cq: np.ndarray, sim: np.ndarray, score: np.ndarray, prior: np.ndarray,
                  pi: np.ndarray, dense: np.ndarray, bm25: tuple[np.ndarray, np.ndarray],
                  title: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The (|C_q|, len(FEATURES)) feature matrix of one query: ``dense`` = the chunk
    candidates in similarity order; ``bm25`` = (ids, scores); ``title`` = (ids, shares)."""
    pos = {c: i for i, c in enumerate(cq.tolist())}  # one map for the three lookups
    dense_rr = _lookup(cq, dense, 1.0 / (1.0 + np.arange(dense.shape[0])), pos)
    b_ids, b_s = bm25
    bm = _lookup(cq, b_ids, _share(np.asarray(b_s, np.float64)), pos) if b_ids.size else np.zeros(cq.shape[0])
    t_ids, t_s = title
    return np.column_stack([
        _share(prior), _share(pi), _recip_rank(pi), _recip_rank(prior), dense_rr,
        sim - (sim.max() if sim.size else 0.0), _share(np.log1p(np.maximum(score, 0.0))), bm,
        _lookup(cq, t_ids, t_s, pos)])


def link_features(eng, lk, q, r, r1, qgroups: np.ndarray, names: tuple[str, ...],
                  title=None, bm25=None, text: str = "") -> np.ndarray:
    """``HybridOptions.rank_links``' columns in the order of ``names``: the bridge titles of the
    first round's top chunks (``lexical.GroupLookup.bridge_titles``), a named page's best
    paragraph (``offpreset.title_best``; ``title`` = (named chunks, shares)), ``lexical.top_links``
    (with the question's ``text`` and ``bm25``) and the columns off in both presets
    (``offpreset.more_link_features``); docs/architecture.md §5."""
    r1_top = np.asarray(r1.cq, np.int64)[np.argsort(-np.asarray(r1.cq_pi), kind="stable")]
    cols = dict(zip(("bridge_title", "bridge_title_words"), lk.bridge_titles(
        np.asarray(r.cq, np.int64), r1_top[:BRIDGE_TITLE_SOURCES], qgroups)))
    if "title_best" in names:
        named, share = title if title is not None else (np.empty(0, np.int64), np.empty(0))
        pages = lk.titles.pages() if lk.titles is not None else np.full(eng.graph.n_chunks, -1, np.int64)
        cols["title_best"] = title_best(np.asarray(r.cq, np.int64), named, share, pages)
    if any(n in TOP_LINKS for n in names) and r1_top.size:
        t0 = int(r1_top[0])
        cols.update(top_links(eng, bm25, text, q, np.asarray(r.cq, np.int64), t0, names, lambda: bridge_groups(
            eng, q, t0, _named_groups(lk, text, t0))))
    cols.update({n: np.zeros(len(r.cq)) for n in names if n in TOP_LINKS and n not in cols})
    if any(n in CHAIN_LINKS for n in names) and r1_top.size:  # engine.chain_links
        cols.update(chain_links(eng, bm25, text, q, r, int(r1_top[0]), names, lambda t, t0: bridge_groups(
            eng, q, t, np.union1d(_named_groups(lk, text, t), eng.graph.node_group[eng.graph.chunk_nodes[
                eng.graph.chunk_ptr[t0]:eng.graph.chunk_ptr[t0 + 1]]]))))
    if any(n not in cols for n in names):
        cols.update(more_link_features(eng, lk, q, r, r1_top, qgroups, cols))
    return np.column_stack([cols[n] for n in names])


def fused_top(cq: np.ndarray, X: np.ndarray, weights: tuple[float, ...],
              top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k C_q chunks by bias + X @ w (stable: ties keep C_q order)."""
    w = np.asarray(weights, np.float64)
    if w.shape[0] != X.shape[1] + 1:  # e.g. weights trained without the rank_links columns
        raise ValueError(f"rank_weights: {w.shape[0]} weights for {X.shape[1]} features + bias")
    s = X @ w[1:] + w[0]
    order = np.argsort(-s, kind="stable")[:top_k]
    return cq[order].astype(np.int64), s[order]


def _final_order(r, X, hybrid: HybridOptions) -> tuple[np.ndarray, np.ndarray]:
    """Every C_q chunk in the final order (the ranker's, the gate's or PPR's) with its score."""
    n = r.cq.shape[0]
    if hybrid.rank_weights:
        return fused_top(r.cq, X, hybrid.rank_weights, n)
    if hybrid.graph_gate:
        return gated_top(r.cq, r.cq_prior, r.cq_pi, n)
    pi = np.asarray(r.cq_pi, np.float64)
    order = np.argsort(-pi, kind="stable")
    return np.asarray(r.cq, np.int64)[order], pi[order]


def title_shares(eng, q: np.ndarray, titled: list[np.ndarray],
                 top: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The chunks of the titles the question names, each with its share of its title's
    prior term (``HybridOptions.title_chunks``): max(0, sim(q, c)) over the title's chunks,
    normalised to sum 1 (equal shares when no chunk is similar). ``top`` > 0 keeps only
    each title's ``top`` chunks most similar to q (a page of many paragraphs lifts the
    paragraph the question is about; a title with one chunk is unchanged)."""
    if not titled:
        return np.empty(0, np.int64), np.empty(0)
    shares = []
    if top > 0:
        titled = [ids if ids.shape[0] <= top else ids[np.sort(np.argsort(
            -(eng.chunk_vec[ids] * q.astype(eng.chunk_vec.dtype)).sum(axis=1), kind="stable")[:top])]
            for ids in titled]
    for ids in titled:
        w = np.maximum((eng.chunk_vec[ids] * q.astype(eng.chunk_vec.dtype)).sum(axis=1), 0.0)
        shares.append(w / w.sum() if w.sum() > 0 else np.full(ids.shape[0], 1.0 / ids.shape[0]))
    return np.concatenate(titled), np.concatenate(shares).astype(np.float64)


def _named_groups(lk, text: str, t: int) -> np.ndarray:
    """The name groups the question names (any n-gram) and the group of chunk ``t``'s own
    title: a bridge is a name the first hop adds (``hop_bridge``)."""
    got = lk.text_groups(text, 1)
    own = lk.groups_of_keys([lk.titles.page_key(t)]) if lk.titles is not None else []
    return np.asarray(sorted(set(got).union(own)) if own else got, np.int64)


def bridge_groups(eng, q: np.ndarray, t: int, named: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bridge names of chunk ``t`` (``HybridOptions.hop_bridge``): its name groups g
    not in ``named``, each weighted w_g ln(1 + N_C / n_g) / ln(1 + N_C) (n_g: the group's
    chunks; w_g: max(0, sim(q, v)) of g's best state in ``t`` over ``t``'s best state, the
    ``hop_weight="sim"`` rule), as (groups ascending, weights)."""
    g = eng.graph
    t_nodes = g.chunk_nodes[g.chunk_ptr[t]:g.chunk_ptr[t + 1]]
    t_groups = g.node_group[t_nodes]
    keep = ~member_of(np.ascontiguousarray(t_groups, np.int64), np.ascontiguousarray(named, np.int64))  # np.isin, no sort
    if not keep.any():
        return np.empty(0, np.int64), np.empty(0)
    sim = np.maximum((eng.node_vec[t_nodes].astype(np.float64) * q).sum(axis=1), 0.0)
    sim = sim / sim.max() if sim.max() > 0 else np.ones_like(sim)
    gk, sk = t_groups[keep].astype(np.int64), sim[keep]
    n = float(g.n_chunks)
    w = sk * np.log1p(n / np.maximum(g.group_chunks[gk], 1)) / math.log1p(n)
    grp = unique(gk)
    best = np.zeros(grp.shape[0])
    np.maximum.at(best, np.searchsorted(grp, gk), w)
    return grp, best


def bridge_chunks(eng, q: np.ndarray, t: int, named: np.ndarray, max_group: float
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``HybridOptions.hop_bridge``'s candidates: the chunks (other than ``t``) of the
    bridge groups of chunk ``t`` (:func:`bridge_groups`) spanning at most ``max_group``
    chunks, each with its group's weight x max(0, sim(q, c)) (the largest over its groups;
    a chunk whose weight is 0 is left out), ordered by its first such group, then by id."""
    g = eng.graph
    grp, wg = bridge_groups(eng, q, t, named)
    ok = g.group_chunks[grp] <= max_group
    nodes, gi = csr_rows(g.group_ptr, g.group_nodes, grp[ok])
    cs, ni = csr_rows(g.nc_ptr, g.nc_chunks, nodes)
    o = np.lexsort((gi[ni], cs))  # by chunk, then group; t itself left out
    o = o[cs[o] != t]
    cs, gi = cs[o].astype(np.int64), gi[ni][o]
    if cs.size:  # one similarity per chunk, one weight per (group, chunk); zeros dropped
        start = run_starts(cs)
        sim = np.maximum((eng.chunk_vec[cs[start]].astype(np.float64) * q).sum(axis=1), 0.0)
        v = wg[ok][gi] * np.repeat(sim, np.diff(np.append(start, cs.shape[0])))
        cs, gi, v = cs[v > 0], gi[v > 0], v[v > 0]
    if not cs.size:
        return np.empty(0, np.int64), np.empty(0)
    start = run_starts(cs)
    ids, first, best = cs[start], gi[start], np.maximum.reduceat(v, start)
    order = np.lexsort((ids, first))
    return ids[order], best[order]


def hop_seeds(eng, q: np.ndarray, top: np.ndarray, seeds: np.ndarray,
              hybrid: HybridOptions) -> tuple[np.ndarray, np.ndarray]:
    """Second-round seeds (``HybridOptions.hop_chunks``): every state of the rare name
    groups (<= ``hop_max_group`` chunks) met in the chunks ``top``, not seeded already,
    with value hop_value x weight (the best weight of the group's states in ``top``)."""
    g = eng.graph
    nodes = np.concatenate([g.chunk_nodes[g.chunk_ptr[c]:g.chunk_ptr[c + 1]] for c in top]
                           ) if len(top) else np.empty(0, np.int64)
    if not nodes.size:
        return np.empty(0, np.int64), np.empty(0)
    if hybrid.hop_weight == "sim":
        # elementwise, not a BLAS mat-vec: no BLAS thread pool on the query path (README)
        w = np.maximum((eng.node_vec[nodes] * q.astype(eng.node_vec.dtype)).sum(axis=1),
                       0.0).astype(np.float64)
        w = w / w.max() if w.max() > 0 else w
    else:
        w = np.ones(nodes.shape[0])
    groups = g.node_group[nodes]
    best: dict[int, float] = {}
    for grp, x in zip(groups.tolist(), w.tolist()):
        if g.group_chunks[grp] <= hybrid.hop_max_group and x > best.get(grp, 0.0):
            best[grp] = x
    if hybrid.hop_idf > 0:  # a name of many chunks lifts each less (HybridOptions.hop_idf)
        n = float(g.n_chunks)
        best = {grp: x * (math.log1p(n / float(g.group_chunks[grp])) / math.log1p(n)) ** hybrid.hop_idf
                for grp, x in best.items()}
    seeded = set(seeds.tolist())
    out_n, out_v = [], []
    for grp, x in best.items():
        for v in g.group_nodes[g.group_ptr[grp]:g.group_ptr[grp + 1]].tolist():
            if v not in seeded:
                out_n.append(v)
                out_v.append(hybrid.hop_value * x)
    return np.asarray(out_n, np.int64), np.asarray(out_v, np.float64)


def stitch(state, q, text, o: QueryOptions, detail):
    """STITCH with the given (default: dev-tuned) options and signals."""
    return run_stitch(state, q, text, o.stitch, o.hybrid, o, detail)


# ------------------------------------------------------- graph floor (graph_mix)
def mix_weight(prior_share: np.ndarray, pi_share: np.ndarray, mode: str) -> float:
    """``HybridOptions.graph_mix``'s per-query graph weight g from the ranker's prior and
    PPR share columns (value / the query's max, so max / sum = 1 / sum of the column):
    "prior_flat" 1 - max I / sum I; "ppr_focus" min(1, (max pi / sum pi) / (max I / sum I));
    "prior_only" 0."""
    sp, si = float(np.sum(prior_share)), float(np.sum(pi_share))
    if mode == "prior_only":
        return 0.0
    if mode == "prior_flat":
        return 1.0 - 1.0 / sp if sp > 0 else 1.0
    if mode == "ppr_focus":
        return min(1.0, sp / si) if sp > 0 and si > 0 else 1.0
    raise ValueError(f"graph_mix {mode!r}")


def graph_mixed(X: np.ndarray, mode: str) -> np.ndarray:
    """The ranker's features with the graph columns (1: PPR share, 2: PPR rank) moved
    towards the prior's (0: share, 3: rank) by the per-query weight g of :func:`mix_weight`:
    g x graph + (1 - g) x prior (``HybridOptions.graph_mix``; "off": X unchanged)."""
    if mode == "off" or X.shape[0] == 0:
        return X
    g = mix_weight(X[:, 0], X[:, 1], mode)
    X = np.array(X, np.float64)
    X[:, 1] = g * X[:, 1] + (1.0 - g) * X[:, 0]
    X[:, 2] = g * X[:, 2] + (1.0 - g) * X[:, 3]
    return X
