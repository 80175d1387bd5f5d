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
from ..mmaps import release, trim_heap
from .consolidate import (MergeJudge, MergeTable, alias_pairs, consolidated_group_of,
                          merge_entities, record_types, spacy_types)
from .graph import (GRAPH_DIR, BASE_DIR, CodaGraph, FastRPParams, consolidate, graph_parts,
                    save_graph, write_graph)
from .kg_vectors import raw_vectors
from .raw_kg import (ChunkKG, RawKG, RowTable, chunk_kgs_from_extractions, load_raw,
                     load_raw_vectors, save_raw)

MERGE_FILE = "merge_table.json"


@dataclass(eq=False)
class CodaSystem:
    """Raw KG + raw vectors + merge table -> consolidated graph (reassembled whenever the
    table changes: :meth:`apply`)."""

    raw: RawKG
    raw_ent_vec: np.ndarray
    raw_rel_vec: RowTable
    table: MergeTable
    meta: dict = field(default_factory=dict)
    frp: FastRPParams = field(default_factory=FastRPParams)
    graph: CodaGraph | None = None
    _base: CodaGraph | None = None
    lazy: bool = False  # no graph assembled until save(release=True) writes them

    def __post_init__(self) -> None:
        if self.graph is None and not self.lazy:
            self.apply()

    @property
    def base_graph(self) -> CodaGraph:
        """The raw KG assembled without any merge (CodaRAG Table 2 Base: ``coda_base``)."""
        if self._base is None:
            self._base = consolidate(self.raw, self.raw_ent_vec, self.raw_rel_vec, None, self.frp)
        return self._base

    def apply(self, table: MergeTable | None = None) -> CodaGraph:
        """(Re)assemble the consolidated graph from the raw KG under ``table``."""
        if table is not None:
            self.table = table
        self.graph = consolidate(self.raw, self.raw_ent_vec, self.raw_rel_vec,
                                 self.table.group_of(), self.frp)
        return self.graph

    def save(self, path: str | Path, release: bool = False,
             written: Callable[[Path], None] | None = None) -> Path:
        """Write the raw KG, its vectors, ``meta.json`` and ``merge_table.json`` (what a
        changed table is applied to) and the assembled graphs a query opens
        (``graph/``: consolidated; ``base_graph/``: no merge). ``release`` (the build
        step; the caller drops the system next): no graph is held (``graph`` is None
        after), each is written array by array as it is assembled, and the raw vectors
        are memory maps of the files just written, read as a graph needs them: the build
        step's peak memory (docs/architecture.md §7). ``written(folder)`` is called as
        the raw files, then each graph's folder, are written (e.g.
        :class:`~hyperrag_fast.publish_linked.SyncBehind`)."""
        d = save_raw(path, self.raw, self.raw_ent_vec, self.raw_rel_vec, self.meta)
        self.table.save(d / MERGE_FILE)
        if written is not None:
            written(d)
        if release:  # the vectors are read back from the files as each graph needs them
            self.graph, self._base = None, None
            self.raw_ent_vec, self.raw_rel_vec = load_raw_vectors(d)
            trim_heap()
        for sub, g, group_of in ((GRAPH_DIR, self.graph, self.table.group_of()),
                                 (BASE_DIR, self._base, None)):
            if g is not None:
                save_graph(d / sub, g)
                continue
            vecs = load_raw_vectors(d) if release else (self.raw_ent_vec, self.raw_rel_vec)
            parts = graph_parts(self.raw, *vecs, group_of, self.frp)
            del vecs  # the maps go once the graph's parts are made
            write_graph(d / sub, self.raw.n_chunks, parts)
            del parts
            trim_heap()
            if written is not None:
                written(d / sub)
        return d


def load_coda(path: str | Path, table: MergeTable | None = None,
              frp: FastRPParams | None = None) -> CodaSystem:
    """Load a saved system; the saved merge table (or ``table``) is applied now."""
    raw, ev, rv, meta = load_raw(path)
    t = table or MergeTable.load(Path(path) / MERGE_FILE)
    return CodaSystem(raw, ev, rv, t, meta, frp or FastRPParams())


def known_vectors(index) -> dict[str, np.ndarray]:
    """text -> vector for every description and sentence the index already embedded (the
    build embeds each distinct text once: a description that is a sentence has that
    sentence's row, so rows of the smaller sentence table are preferred and the state
    rows' pages are read only for descriptions that are not sentences)."""
    g = index.graph
    sentences = set(g.edge_text)
    rows = dict(zip(g.node_desc, range(len(g.node_desc))))
    known: dict[str, np.ndarray] = {t: index.node_vec[i] for t, i in rows.items()
                                    if t not in sentences}
    known.update(zip(g.edge_text, index.edge_vec))
    return known


def _release_vectors(index) -> None:
    """The pages :func:`known_vectors`' lookups read leave the resident set when the
    index's vectors are memory maps (clean pages, read again on the next access)."""
    release(index.node_vec)
    release(index.edge_vec)


def merge_table_of(coda) -> MergeTable:
    """The merge table of a built system, or of a saved one a query opened."""
    if hasattr(coda, "table"):
        return coda.table
    return MergeTable.load(Path(coda.path) / MERGE_FILE)


def offline_types(index) -> tuple[Callable[[str], str], list[str], str] | None:
    """Offline type discovery: spaCy NER labels of the index's chunk texts (the label
    inventory, most frequent label per name), read from the extraction records when the
    build recorded them (``Extraction.ner``), else by running spaCy again; None when
    neither is possible. The third item says which (``meta["types_from"]``)."""
    got = record_types(index.extractions)
    if got is not None:
        return got[0].get, [t for t, _ in got[1].most_common()], "extraction records"
    try:
        from ..extract.offline import OfflineExtractor
        nlp = OfflineExtractor().nlp
    except ImportError:
        return None
    types, inventory = spacy_types((c.text for c in index.chunks), nlp)
    return types.get, [t for t, _ in inventory.most_common()], "spacy re-run"


def build_coda(index, chunk_kgs: Sequence[ChunkKG] | None = None,
               embedder: Embedder | None = None, judge: MergeJudge | None = None,
               type_of: Callable[[str], str] | None = None, gate: float = 0.85,
               high_gate: float = 0.95, k_candidates: int = 10,
               frp: FastRPParams | None = None, types: Sequence[str] = (),
               use_spacy_types: bool = True, aliases: bool = True,
               assemble: bool = True) -> CodaSystem:
    """CODA system of ``index``: raw KG (from ``chunk_kgs`` — e.g. the LLM path's
    ``LLMKGExtractor.extract(index.chunks)`` — or offline from ``index.extractions``),
    vectors, merging (``judge`` or the offline rule) and the consolidated graph.
    Offline entity types: ``type_of(key)``, else spaCy labels (:func:`offline_types`)
    when ``use_spacy_types`` and spaCy is installed, else ``"entity"``. ``aliases``
    (ours): also merge the abbreviation / "also known as" aliases found in the chunk
    texts (:func:`~.consolidate.alias_pairs`); False = the published merging only.
    ``assemble=False``: no graph assembled here (the build step's ``save(release=True)``
    writes them as it assembles them)."""
    t0 = time.perf_counter()
    clock = _Stages()
    types_from = "given" if type_of is not None else "none"
    if chunk_kgs is None:
        if type_of is None and use_spacy_types:
            got = offline_types(index)
            if got is not None:
                type_of, types, types_from = got
        clock("types")
        chunk_kgs = chunk_kgs_from_extractions(index.extractions, type_of)
        source = "offline"
    else:
        source = "given"
    if len(chunk_kgs) != index.n_chunks:
        raise ValueError(f"{len(chunk_kgs)} chunk KGs for {index.n_chunks} chunks")
    raw = RawKG.from_chunk_kgs(chunk_kgs)
    del chunk_kgs
    clock("raw_kg")
    emb = embedder or index.embedder
    ev, rv = raw_vectors(raw, emb, known_vectors(index), index.embedder_dim)
    _release_vectors(index)
    trim_heap()  # the lookup table and the embed calls' buffers are gone
    clock("vectors")
    found = alias_pairs(c.text for c in index.chunks) if aliases else None
    table = merge_entities(raw, ev, judge, gate, high_gate, k_candidates, found)
    clock("merge")
    meta = {"source": source, "embedder": index.embedder_name, "types": list(types),
            "types_from": types_from if source == "offline" else "given",
            "judge": getattr(judge, "name", "offline_rule"), "gate": gate,
            "high_gate": high_gate, "k_candidates": k_candidates, "aliases": aliases,
            "n_alias_merges": sum(r.source == "alias" for r in table.rows),
            "names_embedded": emb is not None, "extraction_errors": raw.errors[:100],
            "n_extraction_errors": len(raw.errors),
            "counts": {"raw_entities": raw.n_entities, "raw_relations": raw.n_relations,
                       "distinct_relation_rows": int(rv.rep.shape[0])}}
    sys_ = CodaSystem(raw, ev, rv, table, meta, frp or FastRPParams(), lazy=not assemble)
    del ev, rv
    clock("graph")
    sys_.meta["build_s"] = round(time.perf_counter() - t0, 3)
    sys_.meta["stages"] = clock.out
    return sys_


class _Stages:
    """Seconds and peak RSS (MB, the process's so far) after each build stage."""

    def __init__(self) -> None:
        self.t, self.out = time.perf_counter(), {}

    def __call__(self, name: str) -> None:
        import resource
        now = time.perf_counter()
        self.out[name] = {"s": round(now - self.t, 3), "peak_rss_mb": round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
        self.t = now


def consolidated_hypergraph(index, table: MergeTable, embedder: Embedder | None = None,
                            blocks: bool = False):
    """The index's hypergraph rebuilt with consolidated name groups (phi = merged entity
    id, CodaRAG §3.2) and its node vectors, for method ``stitch_consolidated``.

    Under semi-merge a node is one (chunk, group): merging two names that occur in
    the same chunk fuses their states, changing node count/order and descriptions.
    Node vectors are reused when the node names are unchanged, else looked up by
    description text and the new texts embedded (needs an embedder). Returns (graph,
    node vectors, whether the index's node rows were reused as they are). ``blocks``:
    looked-up vectors come as a :class:`~.kg_vectors.KnownRows` (made a block at a time
    as a writer streams them; the build step's peak, docs/architecture.md §7)."""
    g = build_hypergraph(index.extractions, merge=index.merge,
                         group_of=consolidated_group_of(table))
    if g.node_name == index.graph.node_name and g.node_desc == index.graph.node_desc:
        return g, index.node_vec, True
    from .kg_vectors import KnownRows, embed_known, embed_missing
    emb = embedder or index.embedder
    known = known_vectors(index)
    if embed_missing(g.node_desc, emb, known):
        raise ValueError("consolidated groups fuse states into new descriptions; "
                         "an embedder is needed (pass embedder= or load the index with one)")
    if blocks:
        return g, KnownRows(g.node_desc, known, index.embedder_dim,
                            lambda: _release_vectors(index)), False
    nv, _ = embed_known(g.node_desc, None, known, index.embedder_dim)
    _release_vectors(index)
    return g, nv, False
