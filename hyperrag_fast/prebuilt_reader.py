"""What the explicit build step saved beside an index, opened for queries: merge-variant
hypergraphs (``merge_full``, ``merge_none``, STITCH-RAG Table 8), the CODA system
(``coda*``, CodaRAG §3) and the consolidated-name hypergraph (``stitch_consolidated``).

Saved under ``<index>/prebuilt/`` by :mod:`hyperrag_fast.prebuilt` (the build step, the
write side); query code only loads what is there and raises :class:`MissingPrebuilt`
naming the command when a method's structure is absent. docs/architecture.md §1, §7.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from .hypergraph import ARRAY_FIELDS, Hypergraph

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


def _generation(index_dir: str | os.PathLike) -> str:
    from .store import current_generation
    return current_generation(index_dir) or ""


def _load_graph(d: Path) -> VariantGraph:
    meta = json.loads((d / "graph.json").read_text(encoding="utf-8"))
    with np.load(d / "arrays.npz") as z:
        arrs = {k: np.ascontiguousarray(z[k]) for k in ARRAY_FIELDS}
        nv = np.ascontiguousarray(z["node_vec"])
    g = Hypergraph(merge=meta["merge"], n_chunks=meta["n_chunks"], **arrs,
                   **{k: meta[k] for k in _TEXTS})
    return VariantGraph(g, nv, meta["index_nodes"])
