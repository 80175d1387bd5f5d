"""The explicit build step of the methods that read more than the index: merge-variant
hypergraphs (``merge_full``, ``merge_none``, STITCH-RAG Table 8), the CODA system
(``coda*``, CodaRAG §3) and the consolidated-name hypergraph (``stitch_consolidated``).

    hyperrag build-methods INDEX [STRUCTURE ...]          # CLI
    build_prebuilt(index, STRUCTURES).save(INDEX)         # API
    Retriever(index, emb, prebuilt=load_prebuilt(INDEX))

Saved under ``<index>/prebuilt/`` (re-saving the index replaces its folder, so a
prebuilt structure never outlives the index it was built from). Query code only loads
what is here and raises :class:`MissingPrebuilt` naming the command when a method's
structure is absent. Build side: imports no query code. docs/architecture.md §7.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from .hypergraph import ARRAY_FIELDS, MERGES, Hypergraph, build_hypergraph

#: the structures the build step makes; a method's ``needs`` names some of them
STRUCTURES = ("merge_full", "merge_none", "merge_semi", "coda", "consolidated")
FOLDER = "prebuilt"
GENERATION = "GENERATION"  # the index generation the structures were built from
_TEXTS = ("node_name", "node_desc", "edge_text", "group_key")


class MissingPrebuilt(ValueError):
    """A method needs a structure the build step has not made for this index."""


@dataclass(eq=False)
class VariantGraph:
    """A hypergraph over the index's chunks and hyperedges with other entity states (a
    merge variant or consolidated name groups), and its node vectors.
    ``index_nodes``: the node rows are the index's own (its ANN serves the candidates)."""

    graph: Hypergraph
    node_vec: np.ndarray
    index_nodes: bool = False


@dataclass(eq=False)
class Prebuilt:
    """What the build step made for one index: variant graphs by structure name and the
    CODA system (``hyperrag_fast.coda.system.CodaSystem``) or None."""

    graphs: dict[str, VariantGraph] = field(default_factory=dict)
    coda: object | None = None

    def has(self, structure: str) -> bool:
        return structure in self.graphs or (structure == "coda" and self.coda is not None)

    def save(self, index_dir: str | os.PathLike) -> Path:
        """Write under ``<index>/prebuilt/``, stamped with the index generation they were
        built from: after ``add``/``delete`` publishes a new one they count as absent."""
        root = Path(index_dir) / FOLDER
        gen = _generation(index_dir)
        stamp = root / GENERATION
        if stamp.is_file() and stamp.read_text(encoding="utf-8").strip() != gen:
            shutil.rmtree(root)  # built for another generation of the index
        for name, vg in self.graphs.items():
            _save_graph(root / name, vg)
        if self.coda is not None:
            self.coda.save(root / "coda")
        root.mkdir(parents=True, exist_ok=True)
        stamp.write_text(gen + "\n", encoding="utf-8")
        return root


def merge_variant(index, merge: str) -> VariantGraph:
    """The index's extractions under another merge strategy (STITCH-RAG Definitions 2-3);
    node descriptions change, so their vectors are embedded with the index's embedder."""
    if merge not in MERGES:
        raise ValueError(f"merge must be one of {MERGES}, got {merge!r}")
    if merge == index.merge:
        return VariantGraph(index.graph, index.node_vec, True)
    if index.embedder is None:
        raise ValueError(f"merge={merge!r} needs the index's embedder to embed the merged "
                         "descriptions; load the index with one")
    g = build_hypergraph(index.extractions, merge=merge)
    return VariantGraph(g, np.asarray(index.embedder.embed(g.node_desc), dtype=np.float32))


def build_prebuilt(index, structures: Sequence[str] = STRUCTURES, coda=None,
                   have: Prebuilt | None = None) -> Prebuilt:
    """Build ``structures`` for ``index`` (those in ``have`` are kept as they are).
    ``coda``: a CODA system built elsewhere (e.g. from LLM extractions) to use instead
    of the offline one; "consolidated" follows its merge table."""
    unknown = sorted(set(structures) - set(STRUCTURES))
    if unknown:
        raise ValueError(f"unknown structure(s) {unknown}; known: {STRUCTURES}")
    out = Prebuilt(dict(have.graphs) if have else {}, have.coda if have else None)
    if coda is not None:
        out.coda = coda
    for s in structures:
        if s.startswith("merge_") and s not in out.graphs:
            out.graphs[s] = merge_variant(index, s[len("merge_"):])
    if ("coda" in structures or "consolidated" in structures) and out.coda is None:
        from .coda.system import build_coda
        out.coda = build_coda(index)
    if "consolidated" in structures and ("consolidated" not in out.graphs or coda is not None):
        from .coda.system import consolidated_hypergraph
        g, nv, reused = consolidated_hypergraph(index, out.coda.table)
        out.graphs["consolidated"] = VariantGraph(g, nv, reused)
    return out


def load_prebuilt(index_dir: str | os.PathLike, structures: Sequence[str] | None = None) -> Prebuilt:
    """What the build step saved for the index at ``index_dir`` (empty if nothing): the
    given ``structures`` when saved, or all of them (None)."""
    root = Path(index_dir) / FOLDER
    out = Prebuilt()
    stamp = root / GENERATION
    if not stamp.is_file() or stamp.read_text(encoding="utf-8").strip() != _generation(index_dir):
        return out  # none, or built for an earlier generation of the index
    want = STRUCTURES if structures is None else structures
    for name in want:
        if name != "coda" and (root / name / "graph.json").is_file():
            out.graphs[name] = _load_graph(root / name)
    if "coda" in want and (root / "coda" / "raw.json").is_file():
        from .coda.system import load_coda
        out.coda = load_coda(root / "coda")
    return out


def ensure_prebuilt(index_dir: str | os.PathLike, index, structures: Sequence[str]) -> Prebuilt:
    """Load what is saved, build and save what ``structures`` still lacks; returns what
    is saved now, loaded."""
    have = load_prebuilt(index_dir, structures)
    missing = [s for s in structures if not have.has(s)]
    if not missing:
        return have
    out = build_prebuilt(index, missing, have=have)
    Prebuilt({k: v for k, v in out.graphs.items() if k in missing},
             out.coda if "coda" in missing else None).save(index_dir)
    return load_prebuilt(index_dir, structures)  # what a later process loads


def _generation(index_dir: str | os.PathLike) -> str:
    from .store import current_generation
    return current_generation(index_dir) or ""


def _save_graph(d: Path, vg: VariantGraph) -> None:
    d.mkdir(parents=True, exist_ok=True)
    g = vg.graph
    np.savez(d / "arrays.npz", node_vec=np.ascontiguousarray(vg.node_vec, np.float32), **g.arrays())
    meta = {"merge": g.merge, "n_chunks": g.n_chunks, "index_nodes": vg.index_nodes,
            **{k: getattr(g, k) for k in _TEXTS}}
    tmp = d / "graph.json.tmp"
    tmp.write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, d / "graph.json")


def _load_graph(d: Path) -> VariantGraph:
    meta = json.loads((d / "graph.json").read_text(encoding="utf-8"))
    with np.load(d / "arrays.npz") as z:
        arrs = {k: np.ascontiguousarray(z[k]) for k in ARRAY_FIELDS}
        nv = np.ascontiguousarray(z["node_vec"])
    g = Hypergraph(merge=meta["merge"], n_chunks=meta["n_chunks"], **arrs,
                   **{k: meta[k] for k in _TEXTS})
    return VariantGraph(g, nv, meta["index_nodes"])
