"""What the explicit build step saved with an index, opened for queries: merge-variant
hypergraphs (``merge_full``, ``merge_none``, STITCH-RAG Table 8), the CODA system
(``coda*``, CodaRAG §3) and the consolidated-name hypergraph (``stitch_consolidated``).

Saved inside a generation, ``<gen>/prebuilt/<structure>/``, and published with the index
they were built from by :mod:`hyperrag_fast.prebuilt` (the build step, the write side);
the generation's manifest lists every structure file with its xxh3_128 (``prebuilt``).
Query code only loads what is there and raises :class:`MissingPrebuilt` naming the command
when a method's structure is absent. docs/architecture.md §1, §7.
"""
from __future__ import annotations

import json
import os
import tokenize
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from .checksums import FAST, file_digest
from .errors import IndexCorruptedError
from .hypergraph import ARRAY_FIELDS, MERGES, Hypergraph
from .paths import check_regular, check_relative, is_link
from .validate import check_graph

#: the structures the build step makes; a method's ``needs`` names some of them
STRUCTURES = ("merge_full", "merge_none", "merge_semi", "coda", "consolidated")
FOLDER = "prebuilt"  # in a generation
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
    CODA system (``hyperrag_fast.coda.system.CodaSystem``) or None. ``built_from``: the
    generation directory of the index they were built from (None: an index in memory)."""

    graphs: dict[str, VariantGraph] = field(default_factory=dict)
    coda: object | None = None
    built_from: Path | None = None

    def has(self, structure: str) -> bool:
        return structure in self.graphs or (structure == "coda" and self.coda is not None)


def load_prebuilt(index_dir: str | os.PathLike, structures: Sequence[str] | None = None,
                  verify: bool = True, generation: str | os.PathLike | None = None) -> Prebuilt:
    """What the build step saved with the index at ``index_dir`` (empty if nothing): the
    given ``structures`` when saved, or all of them (None). ``generation``: the
    generation directory an opened index reads (``IndexReader.generation``; default: the
    live one), so the structures are those published with it. Every structure is checked
    before a query reads it: its files against the manifest's xxh3_128 (``verify``), no
    file unlisted, and its arrays structurally, float arrays finite; any failure is an
    :class:`IndexCorruptedError` naming the file. A ``prebuilt/`` folder beside the
    generations (saved before issue 24, unverified) is never read: ``hyperrag upgrade``
    adopts it after validating it, ``hyperrag build-methods`` rebuilds it."""
    if generation is not None:
        return _load_at(Path(generation), structures, verify)
    from .store import read_generation
    return read_generation(index_dir, lambda gen: _load_at(gen, structures, verify))


def _load_at(gen: Path, structures: Sequence[str] | None, verify: bool) -> Prebuilt:
    from .store import _read_manifest_at
    m = _read_manifest_at(gen, verify)
    out = Prebuilt(built_from=gen)
    saved = m.get("prebuilt", {})
    if not saved:
        return out
    c = m["counts"]
    shape = {"chunks": c["chunks"], "nodes": c["nodes"], "edges": c["edges"],
             "dim": m["embedder"]["dim"]}
    root = gen / FOLDER
    for name in STRUCTURES if structures is None else structures:
        if name not in saved:
            continue
        _check_files(gen, name, saved[name], verify)
        if name == "coda":
            out.coda = _load_coda(root / "coda", shape)
        else:
            out.graphs[name] = _load_graph(root / name, shape)
    return out


def _check_files(gen: Path, name: str, sums: dict[str, str], verify: bool) -> None:
    """The files of structure ``name`` are regular files inside ``gen``, exactly those
    the manifest lists, and (``verify``) match their checksums."""
    mf = gen / "manifest.json"
    for rel in sums:
        check_regular(gen / check_relative(rel, mf), gen)
    d = gen / FOLDER / name
    for p in sorted(d.rglob("*")):
        if is_link(p):
            raise IndexCorruptedError(f"{p}: is a symbolic link; refusing to follow it")
        if p.is_file() and p.relative_to(gen).as_posix() not in sums:
            raise IndexCorruptedError(f"{p}: not listed in {mf}; the prebuilt structure is "
                                      f"corrupted or crafted, rebuild it with hyperrag build-methods")
    if verify:
        for rel, want in sums.items():
            if file_digest(gen / rel, FAST) != want:
                raise IndexCorruptedError(
                    f"{gen / rel}: {FAST} does not match the manifest; the prebuilt structure "
                    f"is corrupted, rebuild it with hyperrag build-methods")


_BAD = (ValueError, KeyError, TypeError, OSError, EOFError, IndexError, RecursionError,
        AttributeError, zipfile.BadZipFile, zlib.error,
        SyntaxError, tokenize.TokenError)  # a damaged .npy header (numpy parses it)


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
    if (not isinstance(n_chunks, int) or n_chunks != shape["chunks"] or n_e != shape["edges"]
            or len(texts["node_desc"]) != n_v or (index_nodes and n_v != shape["nodes"])
            or merge not in MERGES):
        raise IndexCorruptedError(f"{d / 'graph.json'}: its counts do not match the index; "
                                  f"rebuild it with hyperrag build-methods")
    check_graph(arrs, n_chunks, n_v, n_e, len(texts["group_key"]), {"node_vec": nv},
                shape["dim"], str(d / "arrays.npz"))
    g = Hypergraph(merge=merge, n_chunks=n_chunks, **arrs, **texts)
    return VariantGraph(g, nv, bool(index_nodes))


def _load_coda(d: Path, shape: dict[str, int]):
    """The graphs the build step saved (``coda.graph.open_coda``), checked; no CODA build
    code is imported and nothing is assembled."""
    from .coda.graph import open_coda
    try:
        return open_coda(d, shape["chunks"], shape["dim"])
    except IndexCorruptedError:
        raise
    except _BAD as e:
        raise IndexCorruptedError(f"{d}: unreadable CODA system ({type(e).__name__}: {e}); "
                                  f"rebuild it with hyperrag build-methods") from None
