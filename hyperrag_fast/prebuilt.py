"""The explicit build step of the methods that read more than the index: merge-variant
hypergraphs (``merge_full``, ``merge_none``, STITCH-RAG Table 8), the CODA system
(``coda*``, CodaRAG §3) and the consolidated-name hypergraph (``stitch_consolidated``).

    hyperrag build-methods INDEX [STRUCTURE ...]          # CLI
    build_prebuilt(index, STRUCTURES).save(INDEX)         # API
    Retriever(index, emb, prebuilt=load_prebuilt(INDEX))

Saved inside a new generation of the index, ``<gen>/prebuilt/<structure>/``, beside hard
links of the files of the generation they were built from, and published with them by one
CURRENT replace (:func:`hyperrag_fast.publish_linked.publish_prebuilt`): a structure never
outlives or precedes the index it was built from, and ``add``/``delete`` publish
generations without them. Query code opens what is there with
:mod:`hyperrag_fast.prebuilt_reader` (re-exported here) and never imports this module.
Build side: imports no query code. docs/architecture.md §1, §7.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Sequence

import numpy as np

from .hypergraph import MERGES
from .coda.raw_kg import write_json_object
from .indexing.hypergraph import build_hypergraph
from .mmaps import trim_heap
from .prebuilt_reader import (FOLDER, STRUCTURES, _TEXTS, MissingPrebuilt,  # noqa: F401
                              VariantGraph, load_prebuilt)
from .prebuilt_reader import Prebuilt as OpenedPrebuilt


class Prebuilt(OpenedPrebuilt):
    """What the build step made for one index (:func:`build_prebuilt`), to be saved with
    it; a query opens the saved structures as the
    :class:`~hyperrag_fast.prebuilt_reader.Prebuilt` this extends."""

    def save(self, index_dir: str | os.PathLike, keep: Sequence[str] | None = None) -> Path:
        """Publish these structures with the index at ``index_dir`` they were built from
        (a new generation; ``keep``: the structures saved there before to keep, default
        all those not replaced). The index must be saved there and unchanged since the
        structures were built (else ValueError / IndexMismatchError). Returns the new
        generation directory."""
        if self.built_from is None:
            raise ValueError(f"these structures were built from an index in memory: save it "
                             f"first (index.save({os.fspath(index_dir)!r})), then build them "
                             f"from it")
        from .publish_linked import publish_prebuilt

        def write(root: Path) -> None:
            for name, vg in self.graphs.items():
                _save_graph(root / name, vg)
            if self.coda is not None:
                self.coda.save(root / "coda")

        return publish_prebuilt(index_dir, self.built_from, write,
                                STRUCTURES if keep is None else keep)


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
    out = Prebuilt(dict(have.graphs) if have else {}, have.coda if have else None,
                   getattr(index, "generation", None))
    if coda is not None:
        out.coda = coda
    for s in structures:
        if s.startswith("merge_") and s not in out.graphs:
            out.graphs[s] = merge_variant(index, s[len("merge_"):])
    if ("coda" in structures or "consolidated" in structures) and out.coda is None:
        from .coda.system import build_coda
        out.coda = build_coda(index)
    if "consolidated" in structures and ("consolidated" not in out.graphs or coda is not None):
        from .coda.system import consolidated_hypergraph, merge_table_of
        g, nv, reused = consolidated_hypergraph(index, merge_table_of(out.coda))
        out.graphs["consolidated"] = VariantGraph(g, nv, reused)
    return out


def ensure_prebuilt(index_dir: str | os.PathLike, index, structures: Sequence[str]) -> Prebuilt:
    """Load what is saved, build and save what ``structures`` still lacks; returns what
    is saved now, loaded. A CODA system saved without its assembled graphs (before they
    were saved) is assembled from its saved raw KG and merge table and published again
    (:func:`assemble_saved_coda`: no extraction, no embedding)."""
    have, gen = _build_missing(index_dir, index, structures)
    if gen is None:
        return have
    return load_prebuilt(index_dir, structures, generation=gen)  # what a later process loads


def build_methods(index_dir: str | os.PathLike, index, structures: Sequence[str]) -> list[str]:
    """:func:`ensure_prebuilt` as ``hyperrag build-methods`` runs it: the new structures'
    files are checked against the manifest's checksums a file at a time instead of being
    loaded back (the build's memory is not spent again on what it just wrote; a query
    checks them in full when it opens them). Returns which of ``structures`` the index
    has now."""
    have, gen = _build_missing(index_dir, index, structures)
    if gen is None:
        return sorted(list(have.graphs) + (["coda"] if have.coda is not None else []))
    from .store import _read_manifest_at
    from .prebuilt_reader import _check_files
    saved = _read_manifest_at(gen, True).get("prebuilt", {})
    for name in structures:
        if name in saved:
            _check_files(gen, name, saved[name], True)
    return sorted(n for n in structures if n in saved)


def _build_missing(index_dir: str | os.PathLike, index, structures: Sequence[str]):
    """(what was saved before, loaded; the new generation or None when nothing was
    missing)."""
    if "coda" in structures or "consolidated" in structures:
        gen = assemble_saved_coda(index_dir, getattr(index, "generation", None))
        if gen is not None:
            index.generation = gen
    have = load_prebuilt(index_dir, structures, generation=getattr(index, "generation", None))
    missing = [s for s in structures if not have.has(s)]
    if not missing:
        return have, None
    unknown = sorted(set(missing) - set(STRUCTURES))
    if unknown:
        raise ValueError(f"unknown structure(s) {unknown}; known: {STRUCTURES}")
    from .publish_linked import SyncBehind, publish_prebuilt

    def write(root: Path) -> None:  # each structure built, written, then let go: bounded memory
        sync = SyncBehind()  # files fsynced behind the build (the seal's fsync still runs)
        try:
            build(root, sync)
        finally:
            sync.wait()

    def build(root: Path, sync) -> None:
        table = None
        for s in sorted(missing, key=lambda s: s == "consolidated"):  # coda first
            if s.startswith("merge_"):
                _save_graph(root / s, merge_variant(index, s[len("merge_"):]))
            elif s == "coda":
                from .coda.system import build_coda
                coda = build_coda(index, assemble=False)  # the graphs: written as assembled
                coda.save(root / "coda", release=True, written=sync.folder)  # then let go
                table = coda.table
                del coda
                trim_heap()
            else:
                from .coda.consolidate import MergeTable
                from .coda.system import MERGE_FILE, consolidated_hypergraph
                if table is None:  # the system saved in the generation built from
                    saved = Path(have.built_from) / FOLDER / "coda" / MERGE_FILE
                    if not saved.is_file():
                        raise MissingPrebuilt("stitch_consolidated needs the CODA system: "
                                              "hyperrag build-methods INDEX coda")
                    table = MergeTable.load(saved)
                g, nv, reused = consolidated_hypergraph(index, table, blocks=True)
                _save_graph(root / s, VariantGraph(g, nv, reused))  # rows streamed: §7

    gen = publish_prebuilt(index_dir, have.built_from, write, STRUCTURES)
    index.generation = gen  # the same index files (hard links), now with the structures
    return have, gen


def assemble_saved_coda(index_dir: str | os.PathLike, generation=None) -> Path | None:
    """If the generation (default: the live one) holds a CODA system saved without its
    assembled graphs, load it (checksums verified), assemble the graphs and publish a new
    generation with them; returns it (None: nothing to do)."""
    from .coda.system import load_coda
    from .prebuilt_reader import _check_files
    from .store import _read_manifest_at, generation_dir
    gen = Path(generation) if generation is not None else generation_dir(index_dir)
    m = _read_manifest_at(gen)
    d = gen / FOLDER / "coda"
    if "coda" not in m.get("prebuilt", {}) or (d / "graph").is_dir():
        return None
    _check_files(gen, "coda", m["prebuilt"]["coda"], True)
    return Prebuilt({}, load_coda(d), gen).save(index_dir)


def adopt_legacy(index_dir: str | os.PathLike, timeout: float | None = None) -> list[str]:
    """Publish the structures a version before issue 24 saved beside the generations
    (``<index>/prebuilt/``, stamped with the live generation, no checksums or the
    CHECKSUMS.json of the last such version) inside a new generation: copied, checked
    against CHECKSUMS.json when there is one, validated as a load validates them, then
    checksummed in the manifest (``hyperrag upgrade``). Returns the structures adopted
    (none: no such folder, or one built for an older generation, which any writer
    removes; a writer publishing a generation makes it such). A structure failing its checks is an IndexCorruptedError: rebuild it with
    ``hyperrag build-methods``."""
    from .checksums import FAST, file_digest
    from .config import LOCK_TIMEOUT_S
    from .errors import IndexCorruptedError
    from .paths import is_link
    from .prebuilt_reader import _load_coda, _load_graph
    from .publish import writer_lock
    from .publish_linked import publish_prebuilt
    from .store import _read_manifest_at, current_generation
    root = Path(index_dir)
    legacy = root / FOLDER
    with writer_lock(index_dir, LOCK_TIMEOUT_S if timeout is None else timeout, create=False):
        live = current_generation(root)
        stamp = legacy / "GENERATION"
        if (live is None or is_link(legacy) or not stamp.is_file() or is_link(stamp)
                or stamp.read_text(encoding="utf-8", errors="replace").strip() != live):
            return []
        names = [n for n in STRUCTURES if (legacy / n).is_dir() and not is_link(legacy / n)]
        sums = None
        if (legacy / "CHECKSUMS.json").is_file():
            try:
                sums = json.loads((legacy / "CHECKSUMS.json").read_text(encoding="utf-8"))[FAST]
                sums.items()
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
                raise IndexCorruptedError(f"{legacy / 'CHECKSUMS.json'}: unreadable; rebuild "
                                          f"the structures with hyperrag build-methods") from None
        m = _read_manifest_at(root / live)
        c = m["counts"]
        shape = {"chunks": c["chunks"], "nodes": c["nodes"], "edges": c["edges"],
                 "dim": m["embedder"]["dim"]}

        def write(d: Path) -> None:
            for n in names:
                shutil.copytree(legacy / n, d / n, symlinks=True)
                for p in sorted((d / n).rglob("*")):
                    rel = p.relative_to(d).as_posix()
                    if is_link(p) or (sums is not None and p.is_file()
                                      and sums.get(rel) != file_digest(p, FAST)):
                        raise IndexCorruptedError(f"{legacy / rel}: a link, or it does not "
                                                  f"match CHECKSUMS.json; rebuild it with "
                                                  f"hyperrag build-methods")
                if n == "coda" and not (d / n / "graph").is_dir():  # saved before the graphs were
                    from .coda.system import load_coda
                    try:
                        load_coda(d / n).save(d / n)
                    except (ValueError, KeyError, TypeError, OSError) as e:
                        raise IndexCorruptedError(f"{legacy / n}: unreadable CODA system "
                                                  f"({type(e).__name__}); rebuild it with "
                                                  f"hyperrag build-methods") from None
                _load_coda(d / n, shape) if n == "coda" else _load_graph(d / n, shape)

        if names:
            publish_prebuilt(index_dir, root / live, write, STRUCTURES)
    return names


def _save_graph(d: Path, vg: VariantGraph) -> None:
    d.mkdir(parents=True, exist_ok=True)
    g = vg.graph
    nv = vg.node_vec if hasattr(vg.node_vec, "blocks") else np.ascontiguousarray(vg.node_vec, np.float32)
    savez_blocks(d / "arrays.npz", {"node_vec": nv, **g.arrays()})
    meta = {"merge": g.merge, "n_chunks": g.n_chunks, "index_nodes": vg.index_nodes,
            **{k: getattr(g, k) for k in _TEXTS}}
    tmp = d / "graph.json.tmp"
    write_json_object(tmp, meta.items(), ensure_ascii=False)  # json.dumps's bytes, in parts
    os.replace(tmp, d / "graph.json")


def savez_blocks(path: Path, arrays: dict) -> None:
    """``np.savez(path, **arrays)``'s bytes (the same zip members, headers and order),
    where a value with ``blocks()`` (:class:`~hyperrag_fast.coda.kg_vectors.KnownRows`) is
    written a block of rows at a time as it is made, never held whole (docs §7)."""
    import zipfile
    from numpy.lib import format as npy
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for k, v in arrays.items():
            with z.open(k + ".npy", "w", force_zip64=True) as f:
                if not hasattr(v, "blocks"):
                    npy.write_array(f, np.asanyarray(v))
                    continue
                npy.write_array_header_1_0(f, {"descr": npy.dtype_to_descr(v.dtype),
                                               "fortran_order": False, "shape": v.shape})
                for b in v.blocks():
                    f.write(np.ascontiguousarray(b, v.dtype).tobytes())
