"""The CODA system of a :class:`~hyperrag_fast.index.HyperIndex` (CodaRAG §3): build, save,
load, and the consolidated-name hypergraph ``stitch_consolidated`` reads.

Build side: nothing here imports query code. :func:`build_coda` makes the system
explicitly (offline from the index's own extractions by default, or from LLM
``chunk_kgs``); ``hyperrag build-methods`` / :mod:`hyperrag_fast.prebuilt` save it beside
the index and the query side loads it. Texts already embedded in the index (sentences)
are reused; entity names are embedded with ``index.embedder`` when present (else entity
vectors come from their sentences only). docs/architecture.md §7.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..embed.base import Embedder
from ..indexing.hypergraph import build_hypergraph
from .consolidate import (MergeJudge, MergeTable, alias_pairs, consolidated_group_of,
                          merge_entities, spacy_types)
from .graph import CodaGraph, FastRPParams, consolidate
from .raw_kg import ChunkKG, RawKG, chunk_kgs_from_extractions, load_raw, raw_vectors, save_raw

MERGE_FILE = "merge_table.json"


@dataclass(eq=False)
class CodaSystem:
    """Raw KG + raw vectors + merge table -> consolidated graph (reassembled whenever the
    table changes: :meth:`apply`)."""

    raw: RawKG
    raw_ent_vec: np.ndarray
    raw_rel_vec: np.ndarray
    table: MergeTable
    meta: dict = field(default_factory=dict)
    frp: FastRPParams = field(default_factory=FastRPParams)
    graph: CodaGraph | None = None

    def __post_init__(self) -> None:
        if self.graph is None:
            self.apply()

    def apply(self, table: MergeTable | None = None) -> CodaGraph:
        """(Re)assemble the consolidated graph from the raw KG under ``table``."""
        if table is not None:
            self.table = table
        self.graph = consolidate(self.raw, self.raw_ent_vec, self.raw_rel_vec,
                                 self.table.group_of(), self.frp)
        return self.graph

    def save(self, path: str | Path) -> Path:
        """Write the raw KG, its vectors, ``meta.json`` and ``merge_table.json``."""
        d = save_raw(path, self.raw, self.raw_ent_vec, self.raw_rel_vec, self.meta)
        self.table.save(d / MERGE_FILE)
        return d


def load_coda(path: str | Path, table: MergeTable | None = None,
              frp: FastRPParams | None = None) -> CodaSystem:
    """Load a saved system; the saved merge table (or ``table``) is applied now."""
    raw, ev, rv, meta = load_raw(path)
    t = table or MergeTable.load(Path(path) / MERGE_FILE)
    return CodaSystem(raw, ev, rv, t, meta, frp or FastRPParams())


def known_vectors(index) -> dict[str, np.ndarray]:
    """text -> vector for every description and sentence the index already embedded."""
    known: dict[str, np.ndarray] = {}
    g = index.graph
    known.update(zip(g.edge_text, index.edge_vec))
    known.update(zip(g.node_desc, index.node_vec))
    return known


def offline_types(index) -> tuple[Callable[[str], str], list[str]] | None:
    """Offline type discovery: spaCy NER labels over the index's chunk texts (the label
    inventory, most frequent label per name); None when spaCy or its model is missing."""
    try:
        from ..extract.offline import OfflineExtractor
        nlp = OfflineExtractor().nlp
    except ImportError:
        return None
    types, inventory = spacy_types((c.text for c in index.chunks), nlp)
    return types.get, [t for t, _ in inventory.most_common()]


def build_coda(index, chunk_kgs: Sequence[ChunkKG] | None = None,
               embedder: Embedder | None = None, judge: MergeJudge | None = None,
               type_of: Callable[[str], str] | None = None, gate: float = 0.85,
               high_gate: float = 0.95, k_candidates: int = 10,
               frp: FastRPParams | None = None, types: Sequence[str] = (),
               use_spacy_types: bool = True, aliases: bool = True) -> CodaSystem:
    """CODA system of ``index``: raw KG (from ``chunk_kgs`` — e.g. the LLM path's
    ``LLMKGExtractor.extract(index.chunks)`` — or offline from ``index.extractions``),
    vectors, merging (``judge`` or the offline rule) and the consolidated graph.
    Offline entity types: ``type_of(key)``, else spaCy labels (:func:`offline_types`)
    when ``use_spacy_types`` and spaCy is installed, else ``"entity"``. ``aliases``
    (ours): also merge the abbreviation / "also known as" aliases found in the chunk
    texts (:func:`~.consolidate.alias_pairs`); False = the published merging only."""
    t0 = time.perf_counter()
    if chunk_kgs is None:
        if type_of is None and use_spacy_types:
            got = offline_types(index)
            if got is not None:
                type_of, types = got
        chunk_kgs = chunk_kgs_from_extractions(index.extractions, type_of)
        source = "offline"
    else:
        source = "given"
    if len(chunk_kgs) != index.n_chunks:
        raise ValueError(f"{len(chunk_kgs)} chunk KGs for {index.n_chunks} chunks")
    raw = RawKG.from_chunk_kgs(chunk_kgs)
    emb = embedder or index.embedder
    ev, rv = raw_vectors(raw, emb, known_vectors(index), index.embedder_dim)
    found = alias_pairs(c.text for c in index.chunks) if aliases else None
    table = merge_entities(raw, ev, judge, gate, high_gate, k_candidates, found)
    meta = {"source": source, "embedder": index.embedder_name, "types": list(types),
            "judge": getattr(judge, "name", "offline_rule"), "gate": gate,
            "high_gate": high_gate, "k_candidates": k_candidates, "aliases": aliases,
            "n_alias_merges": sum(r.source == "alias" for r in table.rows),
            "names_embedded": emb is not None, "extraction_errors": raw.errors[:100],
            "n_extraction_errors": len(raw.errors)}
    sys_ = CodaSystem(raw, ev, rv, table, meta, frp or FastRPParams())
    sys_.meta["build_s"] = round(time.perf_counter() - t0, 3)
    return sys_


def consolidated_hypergraph(index, table: MergeTable, embedder: Embedder | None = None):
    """The index's hypergraph rebuilt with consolidated name groups (phi = merged entity
    id, CodaRAG §3.2) and its node vectors, for method ``stitch_consolidated``.

    Under semi-merge a node is one (chunk, group): merging two names that occur in
    the same chunk fuses their states, changing node count/order and descriptions.
    Node vectors are reused when the node names are unchanged, else looked up by
    description text and the new texts embedded (needs an embedder). Returns (graph,
    node vectors, whether the index's node rows were reused as they are)."""
    g = build_hypergraph(index.extractions, merge=index.merge,
                         group_of=consolidated_group_of(table))
    if g.node_name == index.graph.node_name and g.node_desc == index.graph.node_desc:
        nv, reused = index.node_vec, True
    else:
        reused = False
        from .raw_kg import embed_known
        emb = embedder or index.embedder
        nv, found = embed_known(g.node_desc, emb, known_vectors(index), index.embedder_dim)
        if not found.all():
            raise ValueError("consolidated groups fuse states into new descriptions; "
                             "an embedder is needed (pass embedder= or load the index with one)")
    return g, nv, reused
