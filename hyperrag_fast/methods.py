"""The retrieval methods of the quality table (STITCH-RAG Tables 2, 3, 8, 9), registered
by name in the retriever's method registry, all on the same saved index.

Our tuned ``stitch`` is the paper's algorithm with constants chosen on the 2Wiki dev
split plus the switchable options of DESIGN §8 that won there (``TUNED``); every
ablation switches one component of ``stitch`` off. ``stitch_paper`` is the method as
published. Budgets K_V, K_E, K_C come from the query options in every case.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from .ann import AnnParams, VectorIndex
from .bm25 import BM25
from .chunking import chunk_passage
from .engine import StitchEngine
from .hybrid import GroupLookup, HybridOptions, question_groups, spacy_entity_texts
from .hypergraph import build_hypergraph
from .options import StitchOptions
from .retriever import MethodOutput, QueryOptions, RetrieverState, register_method


@dataclass(frozen=True)
class Variant:
    """How one method departs from the query options it is given."""

    stitch: Callable[[StitchOptions], StitchOptions]
    hybrid: Callable[[HybridOptions], HybridOptions]
    merge: str = "semi"


class Resources:
    """Per-index lazily built helpers: BM25, group lookups, question NER, merge variants."""

    def __init__(self, state: RetrieverState) -> None:
        self.state = state
        self._lock = threading.Lock()
        self._bm25: BM25 | None = None
        self._lookups: dict[str, GroupLookup] = {}
        self._engines: dict[str, StitchEngine] = {"semi": state.engine}
        self._node_search: dict[str, tuple[StitchEngine, VectorIndex]] = {}
        self._ner = None

    def bm25(self) -> BM25:
        with self._lock:
            if self._bm25 is None:
                self._bm25 = BM25([chunk_passage(c) for c in self.state.index.chunks])
            return self._bm25

    def engine(self, merge: str) -> StitchEngine:
        """The engine over the index's own hypergraph, or one rebuilt from the stored
        extractions with another merge strategy (node descriptions change, so their
        vectors are embedded with the index's embedder)."""
        with self._lock:
            eng = self._engines.get(merge)
            if eng is None:
                idx = self.state.index
                if merge == idx.merge:
                    eng = self.state.engine
                else:
                    if idx.embedder is None:
                        raise ValueError(f"merge={merge!r} needs the index's embedder to embed "
                                         "the merged descriptions; load the index with one")
                    g = build_hypergraph(idx.extractions, merge=merge)
                    node_vec = np.asarray(idx.embedder.embed(g.node_desc), dtype=np.float32)
                    eng = StitchEngine(g, node_vec, idx.edge_vec, idx.chunk_vec)
                self._engines[merge] = eng
            return eng

    def add_engine(self, key: str, eng: StitchEngine, node_search: VectorIndex | None = None) -> None:
        """Register (or replace) an engine built elsewhere, e.g. over consolidated name
        groups, under ``key`` so that :func:`run_stitch` can use it with every query-side
        signal; without ``node_search`` its candidates come from an exact search over its
        node vectors. Helpers derived from a replaced engine are rebuilt on next use."""
        with self._lock:
            if self._engines.get(key) is not eng:
                self._engines[key] = eng
                self._node_search.pop(key, None)
                self._lookups.pop(key, None)
            if node_search is not None and key not in self._node_search:
                self._node_search[key] = (eng, node_search)

    def node_search(self, merge: str) -> VectorIndex:
        """Candidate search over the entity states of the engine for ``merge``: the index's
        own ANN, or an exact search over a variant graph's node vectors."""
        if merge == self.state.index.merge:
            return self.state.index.ann["node_vec"]
        eng = self.engine(merge)
        with self._lock:
            got = self._node_search.get(merge)
            if got is None or got[0] is not eng:
                got = self._node_search[merge] = (eng, VectorIndex(eng.node_vec, AnnParams(backend="exact")))
            return got[1]

    def lookup(self, merge: str) -> GroupLookup:
        eng = self.engine(merge)
        with self._lock:
            lk = self._lookups.get(merge)
            if lk is None or lk.graph is not eng.graph:
                lk = self._lookups[merge] = GroupLookup(eng.graph)
            return lk

    def ner(self):
        with self._lock:
            if self._ner is None:
                from .extract.offline import OfflineExtractor

                self._ner = spacy_entity_texts(OfflineExtractor().nlp)
            return self._ner


def resources(state: RetrieverState) -> Resources:
    res = state.cache.get("methods")
    if res is None:
        res = state.cache.setdefault("methods", Resources(state))
    return res


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def run_stitch(state: RetrieverState, q: np.ndarray, text: str, stitch: StitchOptions,
               hybrid: HybridOptions, o: QueryOptions, detail: bool, merge: str = "semi") -> MethodOutput:
    """DESIGN §3: candidates (dense, plus BM25 and question-entity seeds if enabled), then
    the compiled STIBP + projection + PPR. No hyperedge candidates E0 are searched:
    Alg. 1 reads S(e) only for hyperedges of activated or bridged states, which the
    kernel scores on demand, so E0 cannot change the result (``k_edges`` is unused)."""
    if o.top_k > o.k_chunks:  # C_q grows from the k_chunks candidates: it may hold fewer
        raise ValueError(f"top_k={o.top_k} > k_chunks={o.k_chunks}: method {o.method!r} ranks "
                         f"only chunks reached from its k_chunks candidates; raise k_chunks "
                         f"(--k-chunks) to at least top_k")
    res = resources(state)
    eng = res.engine(merge)
    t0 = time.perf_counter()
    ann = state.index.ann
    v0, _ = res.node_search(merge).search(q, o.k_nodes)
    c0, _ = ann["chunk_vec"].search(q, o.k_chunks)
    bonus = np.zeros(c0.shape[0])
    if hybrid.k_bm25 > 0 and hybrid.bm25_weight > 0:
        b_ids, b_s = res.bm25().top_k(text, hybrid.k_bm25)
        if b_ids.size:
            c0 = np.concatenate([c0, b_ids])
            bonus = np.concatenate([bonus, hybrid.bm25_weight * b_s / b_s.max()])
    seeds = np.empty(0, np.int64)
    if hybrid.seeds != "none":
        lk = res.lookup(merge)
        groups = question_groups(text, lk, hybrid.seeds, res.ner() if "ner" in hybrid.seeds else None,
                                 hybrid.seed_skip_labels, hybrid.ngram_min_words)
        seeds = lk.seed_nodes(groups, hybrid.seed_max_group)
    cand_ms = _ms(t0)
    t0 = time.perf_counter()
    r = eng.query(q, v0, c0, stitch, chunk_bonus=bonus, seed_nodes=seeds,
                  seed_values=np.full(seeds.shape[0], hybrid.seed_value), detail=detail)
    graph_ms = _ms(t0)
    d = None
    if detail:
        d = {k: getattr(r, k) for k in r.__dataclass_fields__ if k not in ("chunk_ids", "scores")}
        d.update(cand_nodes=v0, cand_chunks=c0, seed_nodes=seeds, merge=merge)
    return MethodOutput(r.chunk_ids, r.scores, d, cand_ms, graph_ms)


def _variant_method(v: Variant, doc: str):
    def method(state, q, text, o: QueryOptions, detail):
        return run_stitch(state, q, text, v.stitch(o.stitch), v.hybrid(o.hybrid), o, detail, v.merge)
    method.__doc__ = doc
    return method


_same = lambda x: x  # noqa: E731
_off = lambda h: HybridOptions()  # noqa: E731


def paper_options(s: StitchOptions) -> StitchOptions:
    """STITCH-RAG §3.3 constants, keeping only the caller's top_k."""
    return StitchOptions.paper(top_k=s.top_k)


VARIANTS: dict[str, tuple[Variant, str]] = {
    "stitch": (Variant(_same, _same), "STITCH with the given (default: dev-tuned) options and signals."),
    "stitch_paper": (Variant(paper_options, _off), "STITCH-RAG exactly as published (§3.3, Alg. 1)."),
    "no_stibp": (Variant(lambda s: s.replace(spatial=False, temporal=False), _same),
                 "w/o STIBP (Table 3): activation only, no spatial or temporal bridging."),
    "no_ppr": (Variant(lambda s: s.replace(ppr="none"), _same), "w/o PPR (Table 3): rank by the prior."),
    "no_spatial": (Variant(lambda s: s.replace(spatial=False), _same), "w/o spatial channel (Table 3)."),
    "no_temporal": (Variant(lambda s: s.replace(temporal=False), _same), "w/o temporal channel (Table 3)."),
    "binary_prior": (Variant(lambda s: s.replace(prior="binary"), _same),
                     "binary-only prior (Table 3): I(c) = 1[Score(c) > 0]."),
    "merge_semi": (Variant(_same, _same, "semi"), "semi-merge hypergraph (Table 8; = stitch)."),
    "merge_full": (Variant(_same, _same, "full"), "full-merge hypergraph (Table 8): one node per name."),
    "merge_none": (Variant(_same, _same, "none"), "no-merge hypergraph (Table 8): no name links."),
    "decay_tanh": (Variant(lambda s: s.replace(decay="tanh"), _same), "decay exp(-tanh(a dt)) (Table 9)."),
    "decay_exp": (Variant(lambda s: s.replace(decay="exp"), _same), "decay exp(-a dt) (Table 9)."),
    "decay_sigmoid": (Variant(lambda s: s.replace(decay="sigmoid"), _same), "sigmoid decay (Table 9)."),
    "binary_ppr": (Variant(lambda s: StitchOptions.paper(top_k=s.top_k, spatial=False, temporal=False,
                                                         prior="binary"),
                           lambda h: HybridOptions(seeds=h.seeds if h.seeds != "none" else "ngram",
                                                   seed_max_group=h.seed_max_group,
                                                   ngram_min_words=h.ngram_min_words,
                                                   seed_skip_labels=h.seed_skip_labels)),
                   "LinearRAG/HippoRAG-style binary-seed PPR: states matched by the query (name "
                   "match, or dense sim > delta) seeded with 1, others 0; same chunk graph, "
                   "PPR d = 0.85 (STITCH-RAG §2, Table 2)."),
}


def bm25_method(state, q, text, o: QueryOptions, detail) -> MethodOutput:
    """BM25 over the chunk passages (lexical reference row); fewer than k chunks when
    fewer share a term with the query."""
    t0 = time.perf_counter()
    ids, s = resources(state).bm25().top_k(text, o.top_k)
    return MethodOutput(ids, s, {} if detail else None, _ms(t0), 0.0)


def register_all() -> None:
    for name, (variant, doc) in VARIANTS.items():
        register_method(name, _variant_method(variant, doc))
    register_method("bm25", bm25_method)


register_all()
