"""Persistence of an index directory (docs/architecture.md §3).

Layout of an index directory ``<index>/``::

    CURRENT              the name of the live generation (one line), replaced atomically
    .lock                the single-writer lock (``publish.writer_lock``), never part of an index
    gen-<seq>-<rand>/    one immutable generation per save:
      manifest.json        format version, embedder/extractor names, merge, counts,
                           ANN settings, sha256 and xxh3_128 of every other file
                           (:mod:`hyperrag_fast.checksums`)
      arrays/<name>.npy    hypergraph int arrays (ARRAY_FIELDS), mmap-able, and what a query
                           needs derived at build time: BM25 postings (bm25_indptr/indices/
                           data) and each HNSW kind's distinct rows (<kind>_rep/_dup_ptr/
                           _dup_ids)
      vectors/<kind>.npy   node_vec / edge_vec / chunk_vec, float32, mmap-able
      ann/<kind>.usearch   usearch HNSW files (only for kinds above the exact threshold)
      lexical.json         BM25 term list (column order), k1, b
      texts.sqlite         chunks (ids, doc ids, titles, spans, metadata, extraction JSON),
                           node names/descriptions, edge texts, group keys; a load reads
                           the group keys, the rest on first use (hyperrag_fast.texts)

Reading lives here, writing in :mod:`hyperrag_fast.publish`. Writers (``save``, and the
read-modify-write of ``hyperrag index/add/delete``) hold the lock; a second writer waits up to its timeout, then gets :class:`IndexLockedError`.
Publishing never leaves the path without an index: the new generation is written and
fsynced beside the live one, then CURRENT is replaced (write temp + fsync + ``os.replace``,
the commit point), then generations other than the new and the previous one are removed.
A crashed writer's unpublished generation is removed by the next writer, under the lock.
Readers take no lock: they read CURRENT, open that generation, and start over if it was
pruned meanwhile (CURRENT moved), so they always see one complete generation. Open files
and memory maps outlive a pruned generation (POSIX unlink semantics).
"""
from __future__ import annotations

import json
import os
import re
import sqlite3
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

import numpy as np

from .config import DAMAGED_GRAPHS, DEFAULT_DAMAGED_GRAPH, _one_of
from .records import Chunk, Extraction
from .errors import (IndexCorruptedError, IndexError_, IndexLockedError,  # noqa: F401
                     IndexMismatchError)
from .checksums import Verification, check_seal
from .manifest_schema import check_manifest
from .paths import check_manifest_paths, is_link
from .texts import TEXTS, read_texts
from .validate import check_finite, check_structure

# 2: states per entity entry (docs/architecture.md §2); 3: usearch over distinct rows;
# 4: generation directories under a CURRENT pointer
FORMAT_VERSION = 4
MANIFEST = "manifest.json"
SCRATCH_PREFIX = ".hyperrag-build-"  # + pid: a build's scratch folder (index.py)
LEXICAL = "lexical.json"  # BM25 term list and parameters (postings: arrays/bm25_*.npy)
CURRENT = "CURRENT"
#: ``hook(generation folder)``, called once a load has read a generation's manifest and
#: before it reads the files (installed by :func:`set_load_hook`; only tests install one,
#: e.g. to publish a new generation under a reader)
_load_hook: Callable[[Path], None] | None = None
VECTOR_KINDS = ("node_vec", "edge_vec", "chunk_vec")
_GEN = re.compile(r"^gen-(\d{6,})-[0-9a-f]{8}$")
READ_ATTEMPTS = 8  # a reader starts over this often while writers keep publishing
T = TypeVar("T")


@dataclass
class StoredIndex:
    """Everything an index directory holds, as plain objects (see module docstring)."""

    manifest: dict[str, Any]
    arrays: dict[str, np.ndarray]
    vectors: dict[str, np.ndarray]
    chunks: list[Chunk]
    extractions: list[Extraction]
    node_name: list[str]
    node_desc: list[str]
    edge_text: list[str]
    group_key: list[str]
    ann_files: dict[str, Path] = field(default_factory=dict)
    lexical: dict[str, Any] = field(default_factory=dict)  # BM25 terms + parameters
    #: kinds whose HNSW file failed its checksum (only with ``damaged_graph="exact"``)
    damaged_ann: set[str] = field(default_factory=set)


def _reason(e: Exception) -> str:
    """Why a JSON file did not parse, without quoting it."""
    if isinstance(e, json.JSONDecodeError):
        return f"invalid JSON at line {e.lineno} column {e.colno}"
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 at byte {e.start}"
    return "nested too deeply" if isinstance(e, RecursionError) else type(e).__name__


# ---------------------------------------------------------------- generations
def current_generation(path: str | os.PathLike) -> str | None:
    """The generation name CURRENT of index dir ``path`` points at (None: no CURRENT)."""
    f = Path(path) / CURRENT
    if is_link(f):
        raise IndexCorruptedError(f"{f}: is a symbolic link, not an index pointer; refusing "
                                  f"to follow it")
    try:
        with open(f, "rb") as fh:
            raw = fh.read(64)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise IndexCorruptedError(f"{f}: unreadable ({e.strerror or type(e).__name__})") from None
    name = raw.decode("ascii", "replace").strip()
    if not _GEN.match(name):  # the message never quotes the file: it may be anything
        raise IndexCorruptedError(f"{f}: does not name a generation directory")
    return name


# ------------------------------------------------------------------------ loading
def generation_dir(path: str | os.PathLike) -> Path:
    """The directory of the generation index dir ``path`` publishes now (``path`` itself
    when it has no CURRENT: a format <= 3 index, or a generation directory)."""
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"no index directory at {root}")
    name = current_generation(root)
    if name is None:
        return root
    if not (root / name).is_dir():
        raise IndexCorruptedError(f"{root / CURRENT}: names a generation that does not exist; "
                                  f"the index is corrupted, rebuild or restore it")
    if is_link(root / name):
        raise IndexCorruptedError(f"{root / name}: the live generation is a symbolic link; "
                                  f"refusing to read outside the index folder")
    return root / name


def manifest_path(path: str | os.PathLike) -> Path:
    """Where the live manifest of index dir ``path`` is (the file may be missing)."""
    try:
        return generation_dir(path) / MANIFEST
    except (OSError, IndexError_):
        return Path(path) / MANIFEST


def read_generation(path: str | os.PathLike, fn: Callable[[Path], T]) -> T:
    """``fn(generation directory)`` for the generation ``path`` publishes. A failure
    after CURRENT moved (a writer published and pruned the generation meanwhile) starts
    over with the new one; a failure with CURRENT unchanged is raised."""
    root = Path(path)
    for attempt in range(READ_ATTEMPTS):
        gen = generation_dir(root)
        try:
            return fn(gen)
        except Exception:  # noqa: BLE001 - raised again unless CURRENT moved
            try:
                moved = generation_dir(root) != gen
            except (OSError, IndexError_):
                moved = False
            if not moved or attempt == READ_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def read_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """The parsed manifest of index dir ``path``; clear errors for missing/bad/old ones."""
    return read_generation(path, _read_manifest_at)


def _read_manifest_at(root: Path, verify: bool = True) -> dict[str, Any]:
    """The manifest of generation ``root``, checked against its seal (``verify``) and
    by shape (:mod:`hyperrag_fast.manifest_schema`)."""
    if not root.is_dir():
        raise FileNotFoundError(f"no index directory at {root}")
    mf = root / MANIFEST
    if is_link(mf):
        raise IndexCorruptedError(f"{mf}: is a symbolic link; refusing to follow it")
    if not mf.is_file():
        raise IndexCorruptedError(f"{mf}: missing; {root} is not a saved index")
    try:
        raw = mf.read_bytes()
    except OSError as e:
        raise IndexCorruptedError(f"{mf}: unreadable ({e.strerror or type(e).__name__})") from None
    if verify:
        check_seal(root, raw)
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise IndexCorruptedError(f"{mf}: unreadable manifest ({_reason(e)})") from None
    if not isinstance(manifest, dict) or "format_version" not in manifest:
        raise IndexCorruptedError(f"{mf}: manifest has no format_version")
    if manifest["format_version"] != FORMAT_VERSION:
        v = manifest["format_version"]
        raise IndexMismatchError(f"{mf}: index format version "
                                 f"{v if isinstance(v, int) else '(not a number)'}, "
                                 f"this library reads version {FORMAT_VERSION}; rebuild the index")
    check_manifest(manifest, mf)
    return manifest


def load_index(path: str | os.PathLike, mmap: bool = True, verify: bool = True,
               damaged_graph: str = DEFAULT_DAMAGED_GRAPH) -> StoredIndex:
    """Read the live generation of an index directory; ``mmap`` maps .npy files read-only;
    ``verify`` checks the manifest's seal and the checksum of every file it lists
    (xxh3_128, or sha256 for indexes saved before issue 13; see
    :mod:`hyperrag_fast.checksums`). ``damaged_graph="exact"``: an HNSW file failing its
    checksum is listed in ``damaged_ann`` instead of raising (``config.DAMAGED_GRAPHS``)."""
    _one_of("damaged_graph", damaged_graph, DAMAGED_GRAPHS)
    return read_generation(path, lambda gen: _load_generation(gen, mmap, verify, damaged_graph))


def set_load_hook(hook: Callable[[Path], None] | None) -> Callable[[Path], None] | None:
    """Install ``hook(generation folder)``, called by every index load between reading the
    manifest and reading the files; None removes it. Returns the previous hook."""
    global _load_hook
    previous, _load_hook = _load_hook, hook
    return previous


def _load_generation(root: Path, mmap: bool, verify: bool,
                     damaged_graph: str = DEFAULT_DAMAGED_GRAPH) -> StoredIndex:
    manifest = _read_manifest_at(root, verify)
    if _load_hook is not None:
        _load_hook(root)
    check_manifest_paths(root, manifest, (TEXTS, LEXICAL, *(f"vectors/{k}.npy" for k in VECTOR_KINDS)))
    vec_files = {f"vectors/{k}.npy": k for k in VECTOR_KINDS}
    ann_rels = {v: k for k, v in manifest.get("ann_files", {}).items()}
    # verified: checksums and the vectors' NaN / inf scan in one pass, on a thread
    check = Verification(root, manifest, vec_files,
                         ann_rels if damaged_graph == "exact" else ()) if verify else None
    try:
        s = _read_files(root, manifest, mmap, finite=not verify)
    except BaseException:
        if check is not None:
            check.result()  # a checksum mismatch is the error to report
        raise
    if check is not None:
        _, unchecked = check.result()
        check_finite(s.vectors, sorted(vec_files[r] for r in unchecked), root)
        s.damaged_ann = {ann_rels[r] for r in check.damaged}
    return s


def _read_files(root: Path, manifest: dict[str, Any], mmap: bool, finite: bool) -> StoredIndex:
    mode = "r" if mmap else None

    def npy(rel: str) -> np.ndarray:
        try:
            return np.load(root / rel, mmap_mode=mode, allow_pickle=False)
        except (ValueError, OSError, EOFError, SyntaxError, tokenize.TokenError,
                RecursionError) as e:
            raise IndexCorruptedError(f"{root / rel}: unreadable array (not a valid .npy "
                                      f"file: {type(e).__name__})") from None

    arrays = {Path(rel).stem: npy(rel) for rel in sorted(manifest["files"])
              if rel.startswith("arrays/") and rel.endswith(".npy")}
    vectors = {k: npy(f"vectors/{k}.npy") for k in VECTOR_KINDS}
    check_structure(manifest, arrays, vectors, root, finite)  # before compiled code reads them
    try:
        texts = read_texts(root / TEXTS)
    except (sqlite3.Error, KeyError, ValueError) as e:  # its message may quote the file
        raise IndexCorruptedError(f"{root / TEXTS}: unreadable ({type(e).__name__})") from None
    ann = {k: root / v for k, v in manifest.get("ann_files", {}).items()}
    try:
        lexical = json.loads((root / LEXICAL).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise IndexCorruptedError(f"{root / LEXICAL}: unreadable ({_reason(e)})") from None
    s = StoredIndex(manifest, arrays, vectors, *texts, ann_files=ann, lexical=lexical)
    _check_counts(root, s)
    return s


def _check_counts(root: Path, s: StoredIndex) -> None:
    c = s.manifest["counts"]
    got = {"chunks": len(s.chunks), "nodes": len(s.node_name), "edges": len(s.edge_text),
           "groups": len(s.group_key)}
    got_vec = {"chunks": s.vectors["chunk_vec"].shape[0], "nodes": s.vectors["node_vec"].shape[0],
               "edges": s.vectors["edge_vec"].shape[0]}
    for k, v in got.items():
        if c.get(k) != v or got_vec.get(k, v) != v:
            raise IndexCorruptedError(f"{root}: manifest counts {k}={c.get(k)} but the files "
                                      f"hold {v} texts / {got_vec.get(k, v)} vectors")
