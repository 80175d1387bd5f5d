"""CODA methods (CodaRAG §3.3-3.4, Table 2 ablations) and ``stitch_consolidated``.

They read the CODA system the explicit build step made (``hyperrag build-methods``,
:mod:`hyperrag_fast.prebuilt`), bound to the query state by
:func:`hyperrag_fast.methods.query_state`; :class:`CodaSetup` adds the optional LLM
entry / elimination steps and the options. docs/architecture.md §7.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..config import CODA_PAPER, CodaOptions, QueryOptions
from ..records import chunk_passage
from ..settings import CODA_WINDOW_ROW
from .base import MethodOutput, QueryState, missing
from .stitch import run_stitch

if TYPE_CHECKING:
    from ..coda.retrieve import CodaRetriever, InterferenceFilter, KeywordExtractor

#: engine key of the consolidated-name hypergraph
CONSOLIDATED = "consolidated"


@dataclass(frozen=True)
class CodaSetup:
    """Query-side CODA configuration: options (the ablations flip one switch of them) and
    the optional LLM keyword extractor and interference filter."""

    options: CodaOptions = CodaOptions()
    keywords: KeywordExtractor | None = None
    eliminator: InterferenceFilter | None = None


@dataclass(eq=False)
class CodaBinding:
    retriever: CodaRetriever
    options: CodaOptions
    system: object = None
    _raw: CodaRetriever | None = None

    def raw_retriever(self) -> CodaRetriever:
        """A retriever over the raw KG without any merge (the ``coda_base`` row) on the
        unmerged graph the build step saved (``base_graph``), made on first use."""
        if self._raw is None:
            from ..coda.retrieve import CodaRetriever
            r = self.retriever
            self._raw = CodaRetriever(self.system.base_graph, r.embedder, r.keywords,
                                      r.eliminator, r.chunk_vec, r.sent_vec, r.sent_chunk,
                                      r.chunk_text)
        return self._raw


def bind(index, system, setup: CodaSetup | None, embedder=None) -> CodaBinding:
    """A CODA retriever over a loaded system (no building: the graph is the system's)."""
    from ..coda.retrieve import CodaRetriever  # only an index with a CODA system loads it
    s = setup or CodaSetup()
    r = CodaRetriever(system.graph, embedder or index.embedder, s.keywords, s.eliminator,
                      index.chunk_vec, index.edge_vec, index.graph.edge_chunk,
                      lambda c: chunk_passage(index.chunks[int(c)]))  # window_weight only
    return CodaBinding(r, s.options, system)


#: CodaRAG Table 2 "Base": entry finding only (no association, no elimination) on the
#: raw KG, no entity merged
BASE_OFF = {"semantic": False, "contextual": False, "functional": False, "elimination": False}


def _coda_method(name: str, switch: str | None, paper: bool = False, raw: bool = False,
                 **on):
    """``on``: options a variant row turns on (named options, off in ``coda``)."""
    def method(state: QueryState, q: np.ndarray, text: str, o: QueryOptions, detail: bool) -> MethodOutput:
        b = state.coda
        if b is None:
            raise missing(name, "coda")
        base = replace(b.options, align=CODA_PAPER.align, elim_calibration=CODA_PAPER.elim_calibration,
                       lexical_weight=0.0, fact_weight=0.0, dedup_sim=0.0, diversity=0.0, cover_weight=0.0,
                       ppr_solver=CODA_PAPER.ppr_solver, sims=CODA_PAPER.sims,
                       functional_scope=CODA_PAPER.functional_scope) if paper else b.options
        if raw:
            opts = replace(base, **BASE_OFF)
        else:
            # a switch turns a pathway (bool) or a weight (float: cover_weight) off
            opts = base if switch is None else replace(
                base, **{switch: type(getattr(base, switch))(0)})
            opts = replace(opts, **on) if on else opts
        ret = b.raw_retriever() if raw else b.retriever
        t0 = time.perf_counter()
        r = ret.retrieve(q, text, o.stitch.top_k, opts, detail, state.bm25)
        return MethodOutput(r.chunk_ids, r.scores, r.detail if detail else None, 0.0,
                            (time.perf_counter() - t0) * 1e3)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = (f"CODA (CodaRAG §3.3-3.4){' with the published alignment and elimination' if paper else ''}"
                      f"{'' if switch is None else f' without the {switch} step'}"
                      f"{': entry finding only on the unmerged raw KG (Table 2 Base)' if raw else ''}"
                      f"{''.join(f', {k}={v!r}' for k, v in on.items())}.")
    return method


def stitch_consolidated(state: QueryState, q: np.ndarray, text: str, o: QueryOptions,
                        detail: bool) -> MethodOutput:
    """``stitch`` (Alg. 1 with the same options and query-side signals) with phi = merged
    entity id (CodaRAG §3.2): only the name groups differ."""
    return run_stitch(state, q, text, o.stitch, o.hybrid, o, detail, CONSOLIDATED, "stitch_consolidated")


METHODS = {f.__name__: f for f in (
    _coda_method("coda", None), _coda_method("coda_no_semantic", "semantic"),
    _coda_method("coda_no_contextual", "contextual"), _coda_method("coda_no_functional", "functional"),
    _coda_method("coda_no_elimination", "elimination"), _coda_method("coda_no_cover", "cover_weight"),
    _coda_method("coda_paper", None, True),
    _coda_method("coda_paper_no_semantic", "semantic", True),
    _coda_method("coda_paper_no_contextual", "contextual", True),
    _coda_method("coda_paper_no_functional", "functional", True),
    _coda_method("coda_paper_no_elimination", "elimination", True),
    _coda_method("coda_lexical_all", None, lexical_scope="all"),
    _coda_method("coda_window", None, window_weight=CODA_WINDOW_ROW),
    _coda_method("coda_base", None, raw=True), _coda_method("coda_paper_base", None, True, True),
    stitch_consolidated)}


def needs(name: str) -> tuple[str, ...]:
    """Prebuilt structures method ``name`` reads."""
    if name == "stitch_consolidated":
        return ("coda", CONSOLIDATED)
    return ("coda",) if name in METHODS else ()
