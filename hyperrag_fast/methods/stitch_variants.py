"""STITCH's named variants (STITCH-RAG §3.3 Alg. 1; Tables 2, 3, 8, 9): each is
:func:`~hyperrag_fast.methods.stitch.run_stitch` with one component changed, and the paper's
method as published (``stitch_paper``); the default ``stitch`` lives in :mod:`.stitch`,
the only one on the default query route. docs/architecture.md §4-§5.
"""
from __future__ import annotations

from ..config import PAPER_HYBRID, HybridOptions, QueryOptions, StitchOptions
from .base import OWN
from .stitch import run_stitch, stitch


def stitch_paper(state, q, text, o: QueryOptions, detail):
    """STITCH-RAG exactly as published (§3.3, Alg. 1): the paper's constants, no signals;
    only the caller's top_k and budgets are kept."""
    return run_stitch(state, q, text, StitchOptions.paper(top_k=o.stitch.top_k), PAPER_HYBRID,
                      o, detail, method="stitch_paper")


def _switch(name: str, doc: str, **changes):
    def method(state, q, text, o: QueryOptions, detail):
        return run_stitch(state, q, text, o.stitch.replace(**changes), o.hybrid, o, detail, method=name)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = doc
    return method


no_stibp = _switch("no_stibp", "w/o STIBP (Table 3): activation only, no spatial or temporal bridging.",
                   spatial=False, temporal=False)
no_ppr = _switch("no_ppr", "w/o PPR (Table 3): rank by the prior.", ppr="none")
no_spatial = _switch("no_spatial", "w/o spatial channel (Table 3).", spatial=False)
no_temporal = _switch("no_temporal", "w/o temporal channel (Table 3).", temporal=False)
binary_prior = _switch("binary_prior", "binary-only prior (Table 3): I(c) = 1[Score(c) > 0].",
                       prior="binary")
decay_tanh = _switch("decay_tanh", "decay exp(-tanh(a dt)) (Table 9).", decay="tanh")
decay_exp = _switch("decay_exp", "decay exp(-a dt) (Table 9).", decay="exp")
decay_sigmoid = _switch("decay_sigmoid", "sigmoid decay (Table 9).", decay="sigmoid")


def _merge(m: str, doc: str):
    def method(state, q, text, o: QueryOptions, detail):
        key = OWN if m == state.index.merge else f"merge_{m}"
        return run_stitch(state, q, text, o.stitch, o.hybrid, o, detail, key, f"merge_{m}")
    method.__name__ = method.__qualname__ = f"merge_{m}"
    method.__doc__ = doc
    return method


merge_semi = _merge("semi", "semi-merge hypergraph (Table 8; = stitch on a semi-merged index).")
merge_full = _merge("full", "full-merge hypergraph (Table 8): one node per name (prebuilt).")
merge_none = _merge("none", "no-merge hypergraph (Table 8): no name links (prebuilt).")


def binary_ppr(state, q, text, o: QueryOptions, detail):
    """LinearRAG/HippoRAG-style binary-seed PPR: states matched by the query (name match,
    or dense sim > delta) seeded with 1, others 0; same chunk graph, PPR d = 0.85
    (STITCH-RAG §2, Table 2)."""
    h = o.hybrid
    s = StitchOptions.paper(top_k=o.stitch.top_k, spatial=False, temporal=False, prior="binary")
    hy = HybridOptions.paper(seeds="ngram", seed_max_group=h.seed_max_group,
                             ngram_min_words=h.ngram_min_words)
    return run_stitch(state, q, text, s, hy, o, detail, method="binary_ppr")


#: name -> method, in the order of the quality table
METHODS = {f.__name__: f for f in (
    stitch, stitch_paper, no_stibp, no_ppr, no_spatial, no_temporal, binary_prior,
    merge_semi, merge_full, merge_none, decay_tanh, decay_exp, decay_sigmoid, binary_ppr)}


def needs(name: str, index_merge: str) -> tuple[str, ...]:
    """Prebuilt structures method ``name`` reads on an index built with ``index_merge``."""
    if name.startswith("merge_") and name[len("merge_"):] != index_merge:
        return (name,)
    return ()
