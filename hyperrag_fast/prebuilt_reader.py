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
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from .checksums import FAST, file_digest
from .errors import IndexCorruptedError
from .hypergraph import ARRAY_FIELDS, Hypergraph
from .paths import is_link
from .validate import check_graph, check_vectors

#: the structures the build step makes; a method's ``needs`` names some of them
STRUCTURES = ("merge_full", "merge_none", "merge_semi", "coda", "consolidated")
FOLDER = "prebuilt"
GENERATION = "GENERATION"  # the index generation the structures were built from
CHECKSUMS = "CHECKSUMS.json"  # xxh3_128 of every structure file (saved since issue 24)
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


def load_prebuilt(index_dir: str | os.PathLike, structures: Sequence[str] | None = None,
                  verify: bool = True) -> Prebuilt:
    """What the build step saved for the index at ``index_dir`` (empty if nothing): the
    given ``structures`` when saved, or all of them (None). Every structure is checked
    before a query reads it: its files against ``CHECKSUMS.json`` (``verify``; folders
    saved before it existed have none) and its arrays structurally, float arrays finite;
    any failure is an :class:`IndexCorruptedError` naming the file."""
    root = Path(index_dir) / FOLDER
    out = Prebuilt()
    stamp = root / GENERATION
    if not stamp.is_file() or _read_small(stamp) != _generation(index_dir):
        return out  # none, or built for an earlier generation of the index
    if is_link(root):
        raise IndexCorruptedError(f"{root}: is a symbolic link; refusing to follow it")
    want = STRUCTURES if structures is None else structures
    sums = _checksums(root) if verify else None
    shape = _index_shape(index_dir)
    for name in want:
        if name != "coda" and (root / name / "graph.json").is_file():
            _verify(root, name, sums)
            out.graphs[name] = _load_graph(root / name, shape)
    if "coda" in want and (root / "coda" / "raw.json").is_file():
        _verify(root, "coda", sums)
        out.coda = _load_coda(root / "coda", shape)
    return out


def _read_small(f: Path) -> str:
    with open(f, "rb") as fh:
        return fh.read(256).decode("ascii", "replace").strip()


def _generation(index_dir: str | os.PathLike) -> str:
    from .store import current_generation
    return current_generation(index_dir) or ""


def _index_shape(index_dir) -> dict[str, int] | None:
    """Counts and dimension of the index (None: structures saved in a folder holding no
    index, through the API; then only their own consistency is checked)."""
    from .store import current_generation, read_manifest
    if current_generation(index_dir) is None and not (Path(index_dir) / "manifest.json").is_file():
        return None
    m = read_manifest(index_dir)
    c = m["counts"]
    return {"chunks": int(c["chunks"]), "nodes": int(c["nodes"]), "edges": int(c["edges"]),
            "dim": int(m["embedder"]["dim"])}


def _checksums(root: Path) -> dict[str, str] | None:
    f = root / CHECKSUMS
    if not f.is_file():
        return None  # saved before issue 24: structural checks only
    try:
        sums = json.loads(f.read_text(encoding="utf-8"))[FAST]
        if not isinstance(sums, dict):
            raise TypeError
    except (ValueError, KeyError, TypeError, RecursionError):
        raise IndexCorruptedError(f"{f}: unreadable; rebuild the structures with "
                                  f"hyperrag build-methods") from None
    return sums


def _verify(root: Path, name: str, sums: dict[str, str] | None) -> None:
    """The files of structure ``name`` against their checksums (all must be listed)."""
    if sums is None:
        return
    d = root / name
    for p in sorted(d.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if is_link(p):
            raise IndexCorruptedError(f"{p}: is a symbolic link; refusing to follow it")
        if not p.is_file() or p.name.endswith(".tmp"):
            continue
        if rel not in sums or file_digest(p, FAST) != sums[rel]:
            raise IndexCorruptedError(f"{p}: does not match {CHECKSUMS}; the prebuilt structure "
                                      f"is corrupted, rebuild it with hyperrag build-methods")
    for rel in sums:
        if rel.startswith(f"{name}/") and not (root / rel).is_file():
            raise IndexCorruptedError(f"{root / rel}: listed in {CHECKSUMS} but missing")


_BAD = (ValueError, KeyError, TypeError, OSError, EOFError, IndexError, RecursionError,
        AttributeError, zipfile.BadZipFile, zlib.error)


def _load_graph(d: Path, shape: dict[str, int]) -> VariantGraph:
    try:
        meta = json.loads((d / "graph.json").read_text(encoding="utf-8"))
        with np.load(d / "arrays.npz", allow_pickle=False) as z:
            arrs = {k: np.ascontiguousarray(z[k]) for k in ARRAY_FIELDS}
            nv = np.ascontiguousarray(z["node_vec"])
        texts = {k: meta[k] for k in _TEXTS}
        if not all(isinstance(v, list) and all(isinstance(x, str) for x in v)
                   for v in texts.values()):
            raise TypeError("texts")
        merge, n_chunks, index_nodes = meta["merge"], meta["n_chunks"], meta["index_nodes"]
    except _BAD as e:
        raise IndexCorruptedError(f"{d}: unreadable prebuilt graph ({type(e).__name__}); "
                                  f"rebuild it with hyperrag build-methods") from None
    n_v, n_e = len(texts["node_name"]), len(texts["edge_text"])
    if shape is None:
        shape = {"chunks": n_chunks, "edges": n_e, "nodes": n_v,
                 "dim": nv.shape[1] if nv.ndim == 2 else -1}
    if (not isinstance(n_chunks, int) or n_chunks != shape["chunks"] or n_e != shape["edges"] or len(texts["node_desc"]) != n_v
            or (index_nodes and n_v != shape["nodes"])):
        raise IndexCorruptedError(f"{d / 'graph.json'}: its counts do not match the index; "
                                  f"rebuild it with hyperrag build-methods")
    check_graph(arrs, n_chunks, n_v, n_e, len(texts["group_key"]), {"node_vec": nv},
                shape["dim"], str(d / "arrays.npz"))
    g = Hypergraph(merge=merge, n_chunks=n_chunks, **arrs, **texts)
    return VariantGraph(g, nv, bool(index_nodes))


def _load_coda(d: Path, shape: dict[str, int]):
    from .coda.system import load_coda
    try:
        coda = load_coda(d)
    except _BAD as e:
        raise IndexCorruptedError(f"{d}: unreadable CODA system ({type(e).__name__}); "
                                  f"rebuild it with hyperrag build-methods") from None
    for name, m in (("raw_ent_vec", coda.raw_ent_vec), ("raw_rel_vec", coda.raw_rel_vec)):
        dim = shape["dim"] if shape else (m.shape[1] if m.ndim == 2 else -1)
        check_vectors(name, m, m.shape[0] if m.ndim == 2 else -1, dim,
                      str(d / f"{name}.npy"))
    return coda
