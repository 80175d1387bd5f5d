"""CODA retrieval (CodaRAG §3.3-3.4): entry finding, three association pathways,
interference elimination, alignment to source chunks.

* **Entry finding.** LLM path: low-level keywords matched to entities and high-level
  keywords to relations (LightRAG) through a :class:`KeywordExtractor`. Offline
  stand-in: the query itself -> its ``k_entry`` nearest entities and relations.
* **Semantic association** (kernel ``semantic_expand``): one hop from the entry
  entities; arc u -r-> v scores ``alpha * sim(q, r) + beta * sim(q, v)`` (alpha 0.5,
  beta 0.4) and is pruned below tau = 0.35. The paper's formula did not survive
  text extraction; this linear reading is ours (relation weight above entity weight,
  as §4 motivates).
* **Contextualized association**: PPR (d 0.85, kernels/ppr.py) seeded on the entry
  entities in proportion to max(0, sim); top-``k_context`` entities and the relations
  induced among them.
* **Query cost** (ours, docs/architecture.md §7 "CODA query cost"): ``sims="lazy"``
  (coda/fast.py) scores only what is read, ``ppr_solver="local"`` is the local push to
  ``ppr_eps``; ``CODA_PAPER`` / ``config.CODA_EXACT`` keep the full scans and power PPR.
* **Functional association**: entities whose FastRP rows are closest (max cosine)
  to an entry's; top ``k_functional`` non-entry entities.
* **Interference elimination.** LLM path: an :class:`InterferenceFilter`. Offline
  stand-in: entries are kept, and of the other items only the top ``elim_keep_frac``
  by query similarity (entities and relations ranked separately), and only those
  with similarity >= ``elim_min_sim``.
* **Alignment** (kernel ``align_chunks``): source chunks of the kept items, ranked by
  how many kept items occur in them, ties by best item similarity, then chunk id.

Ours (docs/architecture.md §7, each a named option; ``PAPER`` keeps the mechanisms
above): ``elim_calibration="zscore"`` keeps a non-entry item when its similarity is at
least ``elim_min_z`` standard deviations above the mean similarity of all entities
(relations) to this query, so the cut adapts to each embedder's similarity scale;
``align="relevance"`` scores a chunk by ``dense_weight * sim(q, chunk) +
lexical_weight * bm25 / max bm25 + graph_weight * sum of w(x)`` over the kept items x
in it, ``w(x) = max(0, z(x)) / (1 + ln |chunks(x)|)``: an association counts as much as
the question's relevance to the item, and a hub item spread over many chunks little.
Candidates: the kept items' chunks and the ``dense_pool`` nearest chunks.
``fact_weight`` adds ``fact_weight * max sim(q, s)`` over the chunk's sentences ``s``
(the index's sentence vectors: a chunk vector of a 1,200-character passage is cut at the
embedder's window, a sentence is not). ``dedup_sim``: a candidate whose cosine with a
chosen chunk exceeds it is skipped (the same text repeated in a corpus). ``diversity``
(maximal marginal relevance): chunks are chosen one at a time by score minus
``diversity`` x their largest cosine (floored at 0) with a chunk already chosen, so a
passage repeating the evidence of a chosen one gives way to one carrying other evidence.
``cover_weight`` (question-term coverage, session 13): chunks are chosen one at a time by
score plus ``cover_weight`` x the idf share of the question's BM25 terms they hold that
no chosen chunk holds, so a question about two things gets passages on both.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from ..ann import top_k_desc
from ..blas import query_blas
from ..embed.base import Embedder
from ..engine import csr_positions
from ..kernels.coda_assoc import (align_chunks, functional_topk_coded, induced_relations,
                                  semantic_expand, weighted_chunks)
from ..kernels.ppr import ppr_power, ppr_push
from ..ppr import LocalPush
from ..kernels.coda_query import max_chunks_marked, top_k_untied
from ..kernels.dense import icode_topk
from .fast import (Facts, QuerySims, Rows, chunk_sims, codes, first_paths, gather_sims,
                   graph_sims, not_in_sorted, prior_at)
from .select import add_lexical, select, select_lazy_facts
from ..config import CODA_PAPER, CodaOptions  # noqa: F401  (configuration; re-exported)

PAPER = CODA_PAPER  # the published mechanisms (config.CODA_PAPER)
from .graph import CodaGraph


def _z(sim: np.ndarray) -> np.ndarray:
    """Similarities standardised over all items for this query (0 when constant)."""
    if sim.size == 0:
        return sim
    sd = float(sim.std())
    return (sim - float(sim.mean())) / sd if sd > 0 else np.zeros_like(sim)


class KeywordExtractor(Protocol):
    """LLM entry cues: ``keywords(query) -> (low_level, high_level)`` (LightRAG)."""

    def keywords(self, query: str) -> tuple[list[str], list[str]]: ...


class InterferenceFilter(Protocol):
    """LLM interference elimination: boolean keep masks for the given item texts."""

    def filter(self, query: str, entities: Sequence[str], relations: Sequence[str]
               ) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass
class CodaResult:
    chunk_ids: np.ndarray
    scores: np.ndarray
    detail: dict


PATHS = ("entry", "semantic", "contextual", "functional")  # the items' path codes


class CodaRetriever:
    """Query-time CODA over one :class:`CodaGraph`. ``embedder`` is needed only for LLM
    keywords; ``chunk_vec`` for ``fill_dense`` and the relevance alignment;
    ``sent_vec``/``sent_chunk`` (sentence vectors and their chunk) for ``fact_weight``.
    Read-only, thread-safe."""

    def __init__(self, graph: CodaGraph, embedder: Embedder | None = None,
                 keywords: KeywordExtractor | None = None,
                 eliminator: InterferenceFilter | None = None,
                 chunk_vec: np.ndarray | None = None, sent_vec: np.ndarray | None = None,
                 sent_chunk: np.ndarray | None = None, chunk_text=None) -> None:
        self.g = graph
        self.chunk_text = chunk_text  # chunk id -> passage: window_weight (coda/windows.py)
        self.sent_vec, self.sent_chunk = sent_vec, sent_chunk
        self.embedder = embedder
        self.keywords = keywords
        self.eliminator = eliminator
        self.chunk_vec = chunk_vec
        # FastRP rows transposed, contiguous: the product with the entries' rows reads
        # them in order (2Wiki, 40k x 128: 3.8 vs 7.9 ms, the same floats)
        self._frp_t = np.ascontiguousarray(graph.frp.T)
        self._frp = np.ascontiguousarray(graph.frp, np.float32)
        self._all_ents = np.arange(graph.n_entities, dtype=np.int64)
        self._rows_: Rows | None = None  # per-thread zeroed rows (coda/fast.py), on first use
        self._lp: LocalPush | None = None  # ppr_solver="local", made on first use
        self._gsims = None  # sims="lazy" (coda/fast.py), made on first use
        self._ccodes = None  # sims="lazy": _dense_pool
        self._facts = (Facts(sent_vec, sent_chunk, graph.n_chunks)  # chunk -> its sentences
                       if sent_chunk is not None else None)
        if keywords is not None and embedder is None:
            raise ValueError("LLM keywords need an embedder to match them to the graph")
        rows = np.repeat(np.arange(graph.n_entities), np.diff(graph.adj_ptr))
        self.wsum = np.bincount(rows, weights=graph.adj_w, minlength=graph.n_entities
                                ).astype(np.float64)

    @property
    def _rows(self) -> Rows:  # made on first use (a benign race, as _local_push)
        self._rows_ = self._rows_ or Rows(self.g.n_entities, self.g.n_relations, self.g.n_chunks)
        return self._rows_

    def _local_push(self) -> LocalPush:
        if self._lp is None:  # a benign race: two threads may both build it
            g = self.g
            self._lp = LocalPush(g.adj_ptr, g.adj_nbr, g.adj_w, self.wsum)
        return self._lp

    # ------------------------------------------------------------- entries
    def entries(self, q: np.ndarray, text: str, ent_sim: np.ndarray, rel_sim: np.ndarray,
                o: CodaOptions) -> tuple[np.ndarray, np.ndarray, dict]:
        """Entry entities and relations (CodaRAG §3.3 Entry Finding)."""
        if self.keywords is None:
            return (top_k_desc(ent_sim, o.k_entry), top_k_desc(rel_sim, o.k_entry_relations),
                    {"entry_mode": "offline: query embedding"})
        low, high = self.keywords.keywords(text)
        info = {"entry_mode": "llm keywords", "low_keywords": low, "high_keywords": high}

        def match(words: list[str], mat: np.ndarray, k: int, fallback: np.ndarray) -> np.ndarray:
            if not words or mat.shape[0] == 0:
                return top_k_desc(fallback, k)
            kv = np.asarray(self.embedder.embed([", ".join(words)]), np.float32)[0]
            return top_k_desc(mat @ kv, k)

        return (match(low, self.g.ent_vec, o.k_entry, ent_sim),
                match(high, self.g.rel_vec, o.k_entry_relations, rel_sim), info)

    # ----------------------------------------------------------- retrieval
    def retrieve(self, q: np.ndarray, text: str, top_k: int, o: CodaOptions | None = None,
                 detail: bool = False, bm25=None) -> CodaResult:
        """Top ``top_k`` chunks; ``bm25`` (the index's BM25) feeds ``lexical_weight``. Its
        products run on ``config.QUERY_BLAS_THREADS`` BLAS threads (:mod:`hyperrag_fast.blas`)."""
        o = o or CodaOptions()
        q = np.asarray(q, np.float32).reshape(-1)
        S = None
        try:
            with query_blas():  # QuerySims' moment products too
                S = QuerySims(graph_sims(self), q) if o.sims == "lazy" and self.keywords is None else None
                return self._retrieve(q, text, top_k, o, detail, bm25, S)
        finally:
            if S is not None:
                S.release()

    def _retrieve(self, q, text, top_k, o, detail, bm25, S) -> CodaResult:
        g = self.g
        if S is not None:  # similarities only where read (coda/fast.py)
            ent_sim, rel_sim = S.ent, S.rel
            e0, r0 = S.top_entities(o.k_entry), S.top_relations(o.k_entry_relations)
            info = {"entry_mode": "offline: query embedding"}
        else:
            ent_sim = (g.ent_vec @ q).astype(np.float64)
            rel_sim = (g.rel_vec @ q).astype(np.float64)
            e0, r0, info = self.entries(q, text, ent_sim, rel_sim, o)
        ents, rels = [(e0, 0)], [(r0, 0)]  # (ids, path code) in path order

        if o.semantic and e0.size:
            if S is not None:
                S.fill_arcs(g.adj_ptr, g.adj_nbr, g.adj_rel, e0)
            se, _, sr, _ = semantic_expand(g.adj_ptr, g.adj_nbr, g.adj_rel, ent_sim, rel_sim,
                                           e0, o.alpha, o.beta, o.tau)
            ents.append((se, 1))
            rels.append((sr, 1))
        touched = None  # entities the local push reached (functional_scope="touched")
        if o.contextual and e0.size and o.k_context:
            pe = np.maximum(ent_sim[e0], 0.0) + 1e-12
            if o.ppr_solver == "local":  # local push to threshold ppr_eps (ppr.LocalPush)
                res = self._local_push().approx_sparse(e0, prior_at(self._rows.prior, e0, pe),
                                                       o.ppr_d, o.ppr_eps)
                sel, tied = top_k_untied(res.x, o.k_context)  # top_k_desc's ids when untied
                sel = top_k_desc(res.x, o.k_context) if tied else sel
                ce = res.ids[sel[res.x[sel] > 0]]
                touched = res.ids
            else:
                p = np.zeros(g.n_entities)
                p[e0] = pe
                p /= p.sum()
                if o.ppr_solver == "push":
                    pi, _, _ = ppr_push(g.adj_ptr, g.adj_nbr, g.adj_w, self.wsum, p, o.ppr_d, o.ppr_tol)
                else:
                    pi, _ = ppr_power(g.adj_ptr, g.adj_nbr, g.adj_w, self.wsum, p, o.ppr_d,
                                      o.ppr_tol, 1000)
                ce = top_k_desc(pi, o.k_context)
                ce = ce[pi[ce] > 0]
            ents.append((ce, 2))
            rels.append((induced_relations(g.adj_ptr, g.adj_nbr, g.adj_rel, ce), 2))
        if o.functional and e0.size and o.k_functional and g.frp.shape[1]:
            if S is not None:  # compiled, no score vector; int8 bounds first (fast.py)
                rows = (touched if o.functional_scope == "touched" and touched is not None
                        else self._all_ents)
                fe, _ = functional_topk_coded(self._frp, *S.gs.frp_codes, e0, o.k_functional, rows)
            else:
                fs = (g.frp[e0] @ self._frp_t).max(axis=0).astype(np.float64)
                fe = top_k_desc(fs, o.k_functional, exclude=e0)
                fe = fe[fs[fe] > 0]
            ents.append((fe, 3))

        (E, ents), (R, rels) = first_paths(ents, self._rows.ent), first_paths(rels, self._rows.rel)
        keep_e, keep_r = np.ones(E.size, bool), np.ones(R.size, bool)
        ez = rz = None
        if S is not None:
            S.fill(E, R)
        if o.elim_calibration == "zscore" or o.align == "relevance":  # z of E, R in order
            ez, rz = S.z(E, R) if S is not None else (_z(ent_sim)[E], _z(rel_sim)[R])
        if o.elimination:
            keep_e, keep_r, how = self._eliminate(text, E, R, ents, rels, ent_sim, rel_sim, o,
                                                  ez, rz)
            info["elimination"] = how
        KE, KR = E[keep_e], R[keep_r]
        if o.align == "relevance":
            ids, scores = self._relevance(q, text, KE, KR, ez[keep_e], rz[keep_r], top_k, o, bm25)
            cnt = best = np.zeros(0)
            n_aligned = ids.size
            return CodaResult(ids, scores, self._detail(detail, info, e0, r0, E, R, ents, rels,
                                                         KE, KR, cnt, best, n_aligned))
        ids, cnt, best = align_chunks(g.ent_chunk_ptr, g.ent_chunks, g.rel_chunk_ptr,
                                      g.rel_chunks, KE, ent_sim[KE], KR, rel_sim[KR], g.n_chunks)
        ids, scores = ids[:top_k], cnt[:top_k].astype(np.float64)
        n_aligned = ids.size
        if o.fill_dense and ids.size < top_k and self.chunk_vec is not None:
            dense = top_k_desc(self.chunk_vec @ q, top_k + ids.size)
            extra = dense[~np.isin(dense, ids)][:top_k - ids.size]
            ids = np.concatenate([ids, extra])
            scores = np.concatenate([scores, np.zeros(extra.size)])
        return CodaResult(ids.astype(np.int64), scores,
                          self._detail(detail, info, e0, r0, E, R, ents, rels, KE, KR, cnt,
                                       best, n_aligned))

    @staticmethod
    def _detail(detail, info, e0, r0, E, R, ents, rels, KE, KR, cnt, best, n_aligned) -> dict:
        if not detail:
            return {}
        return dict(info, entry_entities=e0, entry_relations=r0,
                    entities=E, entity_path=[PATHS[c] for c in ents],
                    relations=R, relation_path=[PATHS[c] for c in rels],
                    kept_entities=KE, kept_relations=KR, chunk_count=cnt[:n_aligned],
                    chunk_best=best[:n_aligned], n_aligned=n_aligned)

    def _relevance(self, q, text, KE, KR, zke, zkr, top_k, o, bm25):
        """``align="relevance"`` (module docstring): chunk ids and scores, best first;
        ``zke`` / ``zkr``: the z-scores of ``KE`` / ``KR``."""
        g = self.g
        ne = (g.ent_chunk_ptr[KE + 1] - g.ent_chunk_ptr[KE]).astype(np.float64)
        nr = (g.rel_chunk_ptr[KR + 1] - g.rel_chunk_ptr[KR]).astype(np.float64)
        we = np.maximum(zke, 0.0) / (1.0 + np.log(np.maximum(ne, 1.0)))
        wr = np.maximum(zkr, 0.0) / (1.0 + np.log(np.maximum(nr, 1.0)))
        if o.align_items == "relations":
            KE, we = KE[:0], we[:0]
        if o.align_pool == "max":  # kernels/coda_assoc.py max_chunks' arrays
            ids, gw = max_chunks_marked(g.ent_chunk_ptr, g.ent_chunks, g.rel_chunk_ptr,
                                        g.rel_chunks, KE, we, KR, wr, self._rows.chunk,
                                        self._rows.chunk_w)
        else:
            ids, gw = weighted_chunks(g.ent_chunk_ptr, g.ent_chunks, g.rel_chunk_ptr,
                                      g.rel_chunks, KE, we, KR, wr)
        score, n0 = o.graph_weight * gw, ids.size  # ids[:n0] ascending
        if self.chunk_vec is not None and (o.dense_weight > 0 or o.dense_pool):
            lazy, cs = o.sims == "lazy", None
            if o.dense_pool:
                pool = self._dense_pool(q, o.dense_pool) if lazy else None
                if pool is None:
                    cs = chunk_sims(self.chunk_vec, q) if lazy else self.chunk_vec @ q
                    pool = top_k_desc(cs, o.dense_pool)
                extra = pool[not_in_sorted(pool, ids)]
                ids = np.concatenate([ids, extra])
                score = np.concatenate([score, np.zeros(extra.size)])
            # lazy: the candidates' dots only (the same float32 dots as the full scan's)
            score = score + o.dense_weight * (gather_sims(self._chunk_codes()[3], ids, q)
                                              if cs is None else cs[ids].astype(np.float64))
        if o.lexical_weight > 0 and bm25 is not None:  # coda/select.py add_lexical
            ids, score = add_lexical(bm25, text, ids, score, n0, top_k, o, self.chunk_vec, q)
        if o.window_weight > 0 and bm25 is not None and self.chunk_text is not None:
            from .windows import window_scores  # only a query with the option reads texts
            score = score + o.window_weight * window_scores(self, bm25, text, ids)
        cover = o.cover_weight > 0 and bm25 is not None and self.chunk_vec is not None
        post, n_docs = (bm25.postings(text), bm25.n_docs) if cover else (None, 0)
        if o.fact_weight > 0 and self.sent_vec is not None and ids.size:
            if o.sims == "lazy":  # best sentences only where the selection can reach
                f = self._facts
                pos, sc = select_lazy_facts(self.chunk_vec, ids, score, top_k, o, post, n_docs,
                                            lambda c: f.best(q, c), f.upper(q, ids),
                                            lambda c: f.bounds(q, c))
                return ids[pos].astype(np.int64), sc
            score = score + o.fact_weight * self._best_sentence(q, ids)
        o_ = select(self.chunk_vec, ids, score, top_k, o, post, n_docs)
        return ids[o_].astype(np.int64), score[o_]

    def _chunk_codes(self):
        """(int8 codes, scales, code L1 norms, float32 rows) of ``chunk_vec`` (made on
        first use; a benign race: two threads may both make them)."""
        if self._ccodes is None:
            cv = np.ascontiguousarray(np.asarray(self.chunk_vec), np.float32)
            self._ccodes = (*codes(cv), cv)
        return self._ccodes

    def _dense_pool(self, q, k: int) -> np.ndarray | None:
        """``top_k_desc(chunk_vec @ q, k)`` from the int8 codes (kernels/dense.py
        ``icode_topk``: the exact ordered top-k); None when the k-th and (k+1)-th chunks
        tie, where ``top_k_desc`` keeps NumPy's argpartition choice (the caller then scans)."""
        C, sc, l1, cv = self._chunk_codes()
        if cv.shape[0] <= k:
            return None
        ids, s = np.empty(k + 1, np.int64), np.empty(k + 1, np.float32)
        icode_topk(C, sc, l1, cv, np.ascontiguousarray(q, np.float32), k + 1, ids, s)
        return None if s[k - 1] == s[k] else ids[:k]

    def _best_sentence(self, q, ids) -> np.ndarray:
        """max sim(q, s) over the sentences s of each chunk in ``ids`` (-1 when none): only
        those sentences' vectors are read (``sims="lazy"``: ``Facts.best``, coda/fast.py)."""
        pos, owner = csr_positions(self._facts.ptr, ids)
        sims = (np.asarray(self.sent_vec)[self._facts.order[pos]] @ q).astype(np.float64)
        best = np.full(ids.size, -1.0)
        np.maximum.at(best, owner, sims)
        return best

    def _eliminate(self, text, E, R, ents, rels, ent_sim, rel_sim, o, ez=None, rz=None):
        if self.eliminator is not None:
            ke, kr = self.eliminator.filter(text, [self.g.entity_text(int(e)) for e in E],
                                            [self.g.relation_text(int(r)) for r in R])
            return np.asarray(ke, bool), np.asarray(kr, bool), "llm"
        if o.elim_calibration == "zscore":  # ez, rz: the z-scores of E, R in order
            def keepz(path, z):  # path: the items' path codes (0: entry)
                return (path == 0) | (z >= o.elim_min_z)
            return (keepz(ents, ez), keepz(rels, rz),
                    f"offline: z-score >= {o.elim_min_z} over this query's similarities")

        def keep(ids, path, sim):
            k = path == 0
            rest = np.flatnonzero(~k)
            n_keep = math.ceil(o.elim_keep_frac * rest.size)
            if n_keep:
                s = sim[ids[rest]]
                top = rest[np.lexsort((ids[rest], -s))[:n_keep]]
                k[top[sim[ids[top]] >= o.elim_min_sim]] = True
            return k

        return keep(E, ents, ent_sim), keep(R, rels, rel_sim), "offline: top fraction by query similarity"
