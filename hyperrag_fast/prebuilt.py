"""The explicit build step of the methods that read more than the index: merge-variant
hypergraphs (``merge_full``, ``merge_none``, STITCH-RAG Table 8), the CODA system
(``coda*``, CodaRAG §3) and the consolidated-name hypergraph (``stitch_consolidated``).

    hyperrag build-methods INDEX [STRUCTURE ...]          # CLI
    build_prebuilt(index, STRUCTURES).save(INDEX)         # API
    Retriever(index, emb, prebuilt=load_prebuilt(INDEX))

Saved under ``<index>/prebuilt/`` (re-saving the index replaces its folder, so a
prebuilt structure never outlives the index it was built from). Query code opens what
is there with :mod:`hyperrag_fast.prebuilt_reader` (re-exported here) and never imports
this module. Build side: imports no query code. docs/architecture.md §1, §7.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Sequence

import numpy as np

from .hypergraph import MERGES
from .indexing.hypergraph import build_hypergraph
from .checksums import FAST, file_digest
from .prebuilt_reader import (CHECKSUMS, FOLDER, GENERATION, STRUCTURES, _TEXTS, MissingPrebuilt,  # noqa: F401
                              VariantGraph, _generation, load_prebuilt)
from .prebuilt_reader import Prebuilt as OpenedPrebuilt


class Prebuilt(OpenedPrebuilt):
    """What the build step made for one index (:func:`build_prebuilt`), to be saved beside
    it; a query opens the saved structures as the
    :class:`~hyperrag_fast.prebuilt_reader.Prebuilt` this extends."""

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
        sums = {p.relative_to(root).as_posix(): file_digest(p, FAST)
                for p in sorted(root.rglob("*")) if p.is_file()
                and p.parent != root and not p.name.endswith(".tmp")}
        tmp = root / f"{CHECKSUMS}.tmp"
        tmp.write_text(json.dumps({FAST: sums}, indent=1), encoding="utf-8")
        os.replace(tmp, root / CHECKSUMS)
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


def _save_graph(d: Path, vg: VariantGraph) -> None:
    d.mkdir(parents=True, exist_ok=True)
    g = vg.graph
    np.savez(d / "arrays.npz", node_vec=np.ascontiguousarray(vg.node_vec, np.float32), **g.arrays())
    meta = {"merge": g.merge, "n_chunks": g.n_chunks, "index_nodes": vg.index_nodes,
            **{k: getattr(g, k) for k in _TEXTS}}
    tmp = d / "graph.json.tmp"
    tmp.write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, d / "graph.json")
