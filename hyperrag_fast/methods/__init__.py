"""The method registry: every retrieval method by name, assembled explicitly from the three
family modules (:mod:`.baselines`, :mod:`.stitch_variants`, :mod:`.coda`); importing it registers
nothing anywhere else. The query layer (``retriever``) imports this package; no method
imports the query layer. docs/architecture.md §1.

:func:`query_state` makes the read-only per-index state the methods share, from the index
and what the build step made (:mod:`hyperrag_fast.prebuilt`).
"""
from __future__ import annotations

from ..ann import VectorIndex
from ..config import DEFAULT_MERGE, AnnParams
from ..engine import StitchEngine
from ..lexical import BM25, GroupLookup, TitleLookup
from ..texts import chunk_titles
from . import baselines, coda, stitch_variants
from .base import OWN, Method, MethodOutput, MissingPrebuilt, QueryState
from .coda import CodaSetup

#: name -> method function; add your own with :func:`register_method`
METHODS: dict[str, Method] = {**baselines.METHODS, **stitch_variants.METHODS, **coda.METHODS}

__all__ = ["METHODS", "Method", "MethodOutput", "MissingPrebuilt", "QueryState", "CodaSetup",
           "register_method", "get_method", "needs", "query_state"]


def register_method(name: str, fn: Method) -> Method:
    """Add (or replace) method ``name``: ``fn(state, qvec, query_text, options, detail)``."""
    METHODS[name] = fn
    return fn


def get_method(name: str) -> Method:
    """The method registered as ``name``; ValueError naming the registered ones."""
    fn = METHODS.get(name)
    if fn is None:
        raise ValueError(f"unknown method {name!r}; registered: {sorted(METHODS)}")
    return fn


def needs(name: str, index_merge: str = DEFAULT_MERGE) -> tuple[str, ...]:
    """The prebuilt structures (``hyperrag_fast.prebuilt.STRUCTURES``) method ``name`` reads."""
    get_method(name)
    return stitch_variants.needs(name, index_merge) + coda.needs(name)


def query_state(index, prebuilt=None, coda_setup: CodaSetup | None = None,
                embedder=None) -> QueryState:
    """The query state of ``index``: its engine, candidate searches, name lookups and BM25,
    plus an engine per prebuilt hypergraph and the bound CODA system when given."""
    eng = StitchEngine(index.graph, index.node_vec, index.edge_vec, index.chunk_vec)
    engines = {OWN: eng}
    node_search = {OWN: index.ann["node_vec"]}
    for key, vg in (prebuilt.graphs.items() if prebuilt is not None else ()):
        engines[key] = StitchEngine(vg.graph, vg.node_vec, index.edge_vec, index.chunk_vec)
        node_search[key] = (index.ann["node_vec"] if vg.index_nodes
                            else VectorIndex(engines[key].node_vec, AnnParams(backend="exact")))
    titles = TitleLookup(lambda: chunk_titles(index.chunks))  # read once, on first use
    lookups = {k: GroupLookup(e.graph, titles) for k, e in engines.items()}
    bm25 = BM25(index.bm25) if index.bm25.terms else None  # no term: empty or stop words only
    bound = None
    if prebuilt is not None and prebuilt.coda is not None:
        bound = coda.bind(index, prebuilt.coda, coda_setup, embedder)
    return QueryState(index, eng, engines, node_search, lookups, bm25, bound, embedder=embedder)
