"""Persistence of an index directory (DESIGN §2.1).

Layout::

    manifest.json        format version, embedder/extractor names, merge, counts,
                         ANN settings, sha256 of every other file
    arrays/<name>.npy    hypergraph int arrays (ARRAY_FIELDS), mmap-able
    vectors/<kind>.npy   node_vec / edge_vec / chunk_vec, float32, mmap-able
    ann/<kind>.usearch   usearch HNSW files (only for kinds above the exact threshold)
    texts.sqlite         chunks (ids, doc ids, titles, spans, metadata, extraction JSON),
                         node names/descriptions, edge texts, group keys

Saving is atomic: everything is written into a temp dir beside the target, fsynced,
then renamed over it (an existing index is first renamed aside, then removed).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .records import Chunk, Extraction, Segment
from .validate import check_structure

FORMAT_VERSION = 3  # 2: states per entity entry (DESIGN §4); 3: usearch over distinct rows
MANIFEST = "manifest.json"
TEXTS = "texts.sqlite"
VECTOR_KINDS = ("node_vec", "edge_vec", "chunk_vec")


class IndexError_(Exception):
    """Base of the index loading errors (the name avoids shadowing builtins.IndexError)."""


class IndexCorruptedError(IndexError_):
    """A file of the index directory is missing, truncated or fails its checksum."""


class IndexMismatchError(IndexError_):
    """The index was written by another format version, embedder or extractor."""


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


# ------------------------------------------------------------------ extraction JSON
def extraction_to_json(ex: Extraction) -> str:
    return json.dumps({"segments": [{"topic": s.topic, "entities": [list(e) for e in s.entities]}
                                    for s in ex.segments], "error": ex.error},
                      ensure_ascii=False)


def extraction_from_json(text: str) -> Extraction:
    d = json.loads(text)
    segs = tuple(Segment(s["topic"], tuple((n, desc) for n, desc in s["entities"]))
                 for s in d["segments"])
    return Extraction(segs, d.get("error"))


# ------------------------------------------------------------------------- saving
def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_npy(path: Path, a: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, np.ascontiguousarray(a), allow_pickle=False)


def _write_sqlite(path: Path, s: StoredIndex) -> None:
    con = sqlite3.connect(path)
    try:
        con.executescript("""
            CREATE TABLE chunks (idx INTEGER PRIMARY KEY, chunk_id TEXT UNIQUE, doc_id TEXT,
                title TEXT, text TEXT, start INTEGER, "end" INTEGER, metadata TEXT,
                extraction TEXT);
            CREATE INDEX chunks_doc ON chunks(doc_id);
            CREATE TABLE nodes (idx INTEGER PRIMARY KEY, name TEXT, description TEXT);
            CREATE TABLE edges (idx INTEGER PRIMARY KEY, text TEXT);
            CREATE TABLE groups (idx INTEGER PRIMARY KEY, key TEXT);
        """)
        con.executemany("INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?)", (
            (i, c.chunk_id, c.doc_id, c.title, c.text, c.start, c.end,
             json.dumps(c.metadata, ensure_ascii=False, default=str), extraction_to_json(ex))
            for i, (c, ex) in enumerate(zip(s.chunks, s.extractions))))
        con.executemany("INSERT INTO nodes VALUES (?,?,?)",
                        ((i, n, d) for i, (n, d) in enumerate(zip(s.node_name, s.node_desc))))
        con.executemany("INSERT INTO edges VALUES (?,?)", enumerate(s.edge_text))
        con.executemany("INSERT INTO groups VALUES (?,?)", enumerate(s.group_key))
        con.commit()
    finally:
        con.close()


def save_index(path: str | os.PathLike, s: StoredIndex,
               write_ann: Callable[[Path], dict[str, str]] | None = None) -> None:
    """Atomically write ``s`` to directory ``path``.

    ``write_ann(dir)`` writes ANN files into ``dir`` and returns ``{kind: file name}``.
    ``s.manifest`` gets ``format_version``, ``files`` (sha256) and ``ann_files`` added.
    If anything fails, the temp dir is removed and an existing index stays untouched.
    """
    target = Path(path).absolute()
    if target.exists() and not (target / MANIFEST).is_file():
        raise FileExistsError(f"{target} exists and is not an index directory; "
                              f"refusing to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        for name, a in s.arrays.items():
            _write_npy(tmp / "arrays" / f"{name}.npy", a)
        for name in VECTOR_KINDS:
            _write_npy(tmp / "vectors" / f"{name}.npy", np.asarray(s.vectors[name], np.float32))
        ann_files: dict[str, str] = {}
        if write_ann is not None:
            (tmp / "ann").mkdir()
            ann_files = {k: f"ann/{v}" for k, v in write_ann(tmp / "ann").items()}
        _write_sqlite(tmp / TEXTS, s)
        files = sorted(p for p in tmp.rglob("*") if p.is_file())
        manifest = dict(s.manifest, format_version=FORMAT_VERSION, ann_files=ann_files,
                        files={p.relative_to(tmp).as_posix(): _sha256(p) for p in files})
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
        for p in [*files, tmp / MANIFEST]:
            _fsync_path(p)
        for d in {p.parent for p in files} | {tmp}:
            _fsync_path(d)
        old = None
        if target.exists():
            old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(target, old)
        os.rename(tmp, target)
        _fsync_path(target.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# ------------------------------------------------------------------------ loading
def read_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """The parsed manifest of index dir ``path``; clear errors for missing/bad/old ones."""
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"no index directory at {root}")
    mf = root / MANIFEST
    if not mf.is_file():
        raise IndexCorruptedError(f"{mf}: missing; {root} is not a saved index")
    try:
        manifest = json.loads(mf.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise IndexCorruptedError(f"{mf}: unreadable manifest ({e})") from None
    if not isinstance(manifest, dict) or "format_version" not in manifest:
        raise IndexCorruptedError(f"{mf}: manifest has no format_version")
    if manifest["format_version"] != FORMAT_VERSION:
        raise IndexMismatchError(f"{mf}: index format version {manifest['format_version']!r}, "
                                 f"this library reads version {FORMAT_VERSION}; rebuild the index")
    for key in ("files", "counts", "embedder", "extractor", "merge"):
        if key not in manifest:
            raise IndexCorruptedError(f"{mf}: manifest lacks {key!r}")
    return manifest


def load_index(path: str | os.PathLike, mmap: bool = True, verify: bool = True) -> StoredIndex:
    """Read an index directory; ``mmap`` maps .npy files read-only; ``verify`` checks the
    sha256 of every file listed in the manifest (skip it for speed on trusted disks)."""
    root = Path(path)
    manifest = read_manifest(root)
    for rel, digest in manifest["files"].items():
        p = root / rel
        if not p.is_file():
            raise IndexCorruptedError(f"{p}: listed in the manifest but missing")
        if verify and _sha256(p) != digest:
            raise IndexCorruptedError(f"{p}: sha256 does not match the manifest; "
                                      f"the file is corrupted, rebuild or restore the index")
    mode = "r" if mmap else None

    def npy(rel: str) -> np.ndarray:
        try:
            return np.load(root / rel, mmap_mode=mode, allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise IndexCorruptedError(f"{root / rel}: unreadable array ({e})") from None

    arrays = {p.stem: npy(f"arrays/{p.name}") for p in sorted((root / "arrays").glob("*.npy"))}
    vectors = {k: npy(f"vectors/{k}.npy") for k in VECTOR_KINDS}
    check_structure(manifest, arrays, vectors, root)  # before any compiled code reads them
    try:
        texts = _read_sqlite(root / TEXTS)
    except (sqlite3.Error, KeyError, ValueError) as e:
        raise IndexCorruptedError(f"{root / TEXTS}: unreadable ({e})") from None
    ann = {k: root / v for k, v in manifest.get("ann_files", {}).items()}
    s = StoredIndex(manifest, arrays, vectors, *texts, ann_files=ann)
    _check_counts(root, s)
    return s


def _read_sqlite(path: Path):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = con.execute('SELECT chunk_id, doc_id, title, text, start, "end", metadata, '
                           'extraction FROM chunks ORDER BY idx').fetchall()
        chunks = [Chunk(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6])) for r in rows]
        extractions = [extraction_from_json(r[7]) for r in rows]
        nodes = con.execute("SELECT name, description FROM nodes ORDER BY idx").fetchall()
        edges = [r[0] for r in con.execute("SELECT text FROM edges ORDER BY idx")]
        groups = [r[0] for r in con.execute("SELECT key FROM groups ORDER BY idx")]
    finally:
        con.close()
    return chunks, extractions, [n for n, _ in nodes], [d for _, d in nodes], edges, groups


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
