"""The raw entity-relation KG of CODA (CodaRAG §3.1) and its vectors.

The *raw* KG (:class:`RawKG`) aggregates per-chunk extractions (:class:`ChunkKG`) by
normalised entity name, as LightRAG does: typed entities with descriptions and chunks,
undirected relations (source, target, description, keywords, strength) with chunks. It is
saved as is (:func:`save_raw`); the consolidated graph built from it at assembly time is
:mod:`.graph`.

Vectors (computed by :mod:`.kg_vectors`): a raw entity's vector is L2(embed(name) + mean
of its first ``MAX_PIECES`` description vectors), a raw relation's the L2 mean of its first
description vectors. Relation vectors are a :class:`RowTable`: one row per distinct description tuple (offline,
most relations are one sentence: 29k distinct rows for 215k relations on 2Wiki).
"""
from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..embed.base import Embedder
from ..lexical import normalize_name
from ..records import Extraction

MAX_PIECES = 8
DEFAULT_TYPE = "entity"
L2_BLOCK = 4096  # rows per norm of l2_rows_inplace (each row's norm is its own)


@dataclass(frozen=True)
class ChunkKG:
    """One chunk's extraction: entities ``(name, type, description)`` and relations
    ``(source, target, description, keywords, strength)``; ``error`` marks a recorded
    failure (then both are empty)."""

    entities: tuple[tuple[str, str, str], ...] = ()
    relations: tuple[tuple[str, str, str, str, float], ...] = ()
    error: str | None = None


def chunk_kgs_from_extractions(extractions: Sequence[Extraction],
                               type_of: Callable[[str], str] | None = None) -> list[ChunkKG]:
    """Offline path: entities co-occurring in a segment (sentence) form a relation whose
    description is that sentence, strength 1 per co-occurrence (summed in :class:`RawKG`);
    an entity's description is its sentence. ``type_of(key)`` gives a type (e.g. the
    spaCy label, see ``consolidate.spacy_types``), else ``"entity"``."""
    out = []
    for ex in extractions:
        if ex.error is not None:
            out.append(ChunkKG(error=ex.error))
            continue
        ents, rels = [], []
        for seg in ex.segments:
            names = []
            seen = set()
            for name, desc in seg.entities:
                key = normalize_name(name)
                if not key or key in seen:
                    continue
                seen.add(key)
                names.append(name.strip())
                typ = type_of(key) if type_of is not None else DEFAULT_TYPE
                ents.append((name.strip(), typ or DEFAULT_TYPE, desc or seg.topic))
            for i in range(len(names)):
                for j in range(i + 1, len(names)):
                    rels.append((names[i], names[j], seg.topic, "", 1.0))
        out.append(ChunkKG(tuple(ents), tuple(rels)))
    return out


def add_unique(lst: list, item: str) -> None:
    if item and item not in lst:
        lst.append(item)


class _Tally:
    """Per item, its most frequent value (ties: the one seen first, as ``Counter``), with a
    Counter only for the items seen with two different values."""

    def __init__(self) -> None:
        self.first: list = []
        self.count: list[int] = []
        self.more: dict[int, Counter] = {}

    def new(self) -> None:
        self.first.append(None)
        self.count.append(0)

    def add(self, i: int, v) -> None:
        c = self.more.get(i)
        if c is not None:
            c[v] += 1
        elif self.first[i] is None or self.first[i] == v:
            self.first[i], self.count[i] = v, self.count[i] + 1
        else:
            c = self.more[i] = Counter({self.first[i]: self.count[i]})
            c[v] += 1

    def top(self, i: int, default):
        c = self.more.get(i)
        if c is not None:
            return c.most_common(1)[0][0]
        return default if self.first[i] is None else self.first[i]


class _Lists:
    """Per item, a list built by :func:`add_unique` / :meth:`add_last`, held as its first
    value and a list only for items with two or more: most of the 2Wiki graph's 215k
    relations have one sentence, one chunk and no keywords, and the finished lists are
    shared among equal ones (nothing changes them once the KG is built): ~60 MB of list
    objects not made (docs/architecture.md §7)."""

    def __init__(self) -> None:
        self.first: list = []
        self.more: dict[int, list] = {}

    def add_unique(self, j: int, x: str) -> None:
        if not x:
            return
        m = self.more.get(j)
        if m is not None:
            add_unique(m, x)
        elif self.first[j] is None:
            self.first[j] = x
        elif self.first[j] != x:
            self.more[j] = [self.first[j], x]

    def add_last(self, j: int, c: int) -> None:
        """Append ``c`` unless it is the last value (chunks arrive in order)."""
        m = self.more.get(j)
        if m is not None:
            if m[-1] != c:
                m.append(c)
        elif self.first[j] is None:
            self.first[j] = c
        elif self.first[j] != c:
            self.more[j] = [self.first[j], c]

    def lists(self) -> list[list]:
        shared: dict[tuple, list] = {}
        out = []
        for j, f in enumerate(self.first):
            m = self.more.get(j)
            key = tuple(m) if m is not None else (() if f is None else (f,))
            out.append(shared.setdefault(key, m if m is not None else list(key)))
        return out


@dataclass
class RawKG:
    """Entities and relations aggregated over chunks by normalised name (no merging yet).

    Entity i: ``ent_key[i]``, display ``ent_name[i]`` (most frequent surface form),
    ``ent_type[i]`` (most frequent type), ``ent_desc[i]`` (unique description pieces),
    ``ent_chunks[i]`` (sorted chunk rows). Relation j joins ``rel_src[j] < rel_tgt[j]``
    (entity indices) with ``rel_desc[j]``, ``rel_kw[j]`` pieces, summed
    ``rel_strength[j]`` and ``rel_chunks[j]``.
    """

    n_chunks: int
    ent_key: list[str] = field(default_factory=list)
    ent_name: list[str] = field(default_factory=list)
    ent_type: list[str] = field(default_factory=list)
    ent_desc: list[list[str]] = field(default_factory=list)
    ent_chunks: list[list[int]] = field(default_factory=list)
    rel_src: list[int] = field(default_factory=list)
    rel_tgt: list[int] = field(default_factory=list)
    rel_desc: list[list[str]] = field(default_factory=list)
    rel_kw: list[list[str]] = field(default_factory=list)
    rel_strength: list[float] = field(default_factory=list)
    rel_chunks: list[list[int]] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)

    @classmethod
    def from_chunk_kgs(cls, kgs: Sequence[ChunkKG]) -> "RawKG":
        kg = cls(len(kgs))
        index: dict[str, int] = {}
        names, types = _Tally(), _Tally()
        rindex: dict[tuple[int, int], int] = {}
        rdesc, rkw, rchunks = _Lists(), _Lists(), _Lists()
        keys: dict[str, str] = {}  # name -> its key: a relation's ends are names seen before

        def entity(name: str, typ: str | None, desc: str, c: int) -> int | None:
            key = keys.get(name) or keys.setdefault(name, normalize_name(name))
            if not key:
                return None
            i = index.get(key)
            if i is None:
                i = index[key] = len(kg.ent_key)
                kg.ent_key.append(key)
                kg.ent_desc.append([])
                kg.ent_chunks.append([])
                names.new()
                types.new()
            names.add(i, name.strip())
            if typ:
                types.add(i, typ)
            add_unique(kg.ent_desc[i], desc.strip())
            if not kg.ent_chunks[i] or kg.ent_chunks[i][-1] != c:
                kg.ent_chunks[i].append(c)
            return i

        for c, ck in enumerate(kgs):
            if ck.error is not None:
                kg.errors.append((c, ck.error))
                continue
            for name, typ, desc in ck.entities:
                entity(name, typ, desc, c)
            for src, tgt, desc, kw, strength in ck.relations:
                a, b = entity(src, None, "", c), entity(tgt, None, "", c)
                if a is None or b is None or a == b:
                    continue
                pair = (min(a, b), max(a, b))
                j = rindex.get(pair)
                if j is None:
                    j = rindex[pair] = len(kg.rel_src)
                    kg.rel_src.append(pair[0])
                    kg.rel_tgt.append(pair[1])
                    kg.rel_strength.append(0.0)
                    for x in (rdesc, rkw, rchunks):
                        x.first.append(None)
                rdesc.add_unique(j, desc.strip())
                rkw.add_unique(j, kw.strip())
                kg.rel_strength[j] += float(strength)
                rchunks.add_last(j, c)
        del rindex
        kg.ent_name = [names.top(i, "") for i in range(len(kg.ent_key))]
        kg.ent_type = [types.top(i, DEFAULT_TYPE) for i in range(len(kg.ent_key))]
        kg.rel_desc, kg.rel_kw, kg.rel_chunks = rdesc.lists(), rkw.lists(), rchunks.lists()
        return kg

    @property
    def n_entities(self) -> int:
        return len(self.ent_key)

    @property
    def n_relations(self) -> int:
        return len(self.rel_src)

    def entity_text(self, i: int) -> str:
        """What the merge judge and interference filter read about an entity."""
        return f"{self.ent_name[i]} ({self.ent_type[i]}): " + " ".join(self.ent_desc[i][:MAX_PIECES])

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, d: dict) -> "RawKG":
        d = dict(d)
        d["errors"] = [tuple(e) for e in d.get("errors", [])]
        return cls(**d)


# --------------------------------------------------------------------- vectors
@dataclass(frozen=True, eq=False)
class RowTable:
    """A matrix whose rows repeat, each distinct row stored once: row i = ``rep[of[i]]``.
    ``table @ q`` (= ``(rep @ q)[of]``) reads ``rep`` only; ``np.asarray(table)`` is the
    dense matrix (docs/architecture.md §7)."""

    rep: np.ndarray
    of: np.ndarray

    @classmethod
    def dense_rows(cls, m: np.ndarray) -> "RowTable":
        m = np.ascontiguousarray(m, np.float32)
        return cls(m, np.arange(m.shape[0], dtype=np.int32))

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.of.shape[0]), int(self.rep.shape[1]))

    def __len__(self) -> int:
        return int(self.of.shape[0])

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        return (self.rep @ x)[self.of]

    def __getitem__(self, i):
        return self.rep[self.of[i]]

    def __array__(self, dtype=None, copy=None):
        out = self.rep[self.of]
        return out if dtype is None else out.astype(dtype)


def as_rows(m) -> RowTable:
    return m if isinstance(m, RowTable) else RowTable.dense_rows(m)


def l2_rows(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=1, keepdims=True)
    n[n == 0] = 1.0
    return np.ascontiguousarray(x / n, dtype=np.float32)


def l2_rows_inplace(x: np.ndarray) -> np.ndarray:
    """:func:`l2_rows` of a matrix the caller gives up: divided in place, a block of rows at
    a time (the same quotients, no squared copy), then float32 (no copy if it is)."""
    for b in range(0, x.shape[0], L2_BLOCK):
        blk = x[b:b + L2_BLOCK]
        n = np.linalg.norm(blk, axis=1, keepdims=True)
        n[n == 0] = 1.0
        np.divide(blk, n, out=blk)
    return np.ascontiguousarray(x.astype(np.float32, copy=False))


def segment_sum(ptr: np.ndarray, idx: np.ndarray, vecs: np.ndarray) -> np.ndarray:
    """Row r = sum of vecs[idx[ptr[r]:ptr[r+1]]] (vectorised segment sum)."""
    import scipy.sparse as sp

    n = ptr.shape[0] - 1
    m = sp.csr_matrix((np.ones(idx.shape[0], np.float32), np.asarray(idx, np.int64),
                       np.asarray(ptr, np.int64)), shape=(n, vecs.shape[0]))
    return np.asarray(m @ np.asarray(vecs, np.float32), dtype=np.float32).reshape(n, vecs.shape[1])


def _unique_rows(keys: Sequence[tuple]) -> tuple[list[tuple], np.ndarray]:
    """(distinct keys in first-seen order, key id of every item)."""
    ids: dict[tuple, int] = {}
    of = np.fromiter((ids.setdefault(k, len(ids)) for k in keys), np.int32, count=len(keys))
    return list(ids), of


# ------------------------------------------------------------------ persistence
JSON_PART = 8192  # list items per json.dumps call of write_json_object


def write_json_object(path: str | os.PathLike, items, ensure_ascii: bool = True) -> None:
    """Write ``json.dumps(dict(items), ensure_ascii=...)`` a list part at a time: the same
    bytes, without the document (or a whole list) held as one string (a text list of
    the 2Wiki graph is tens of MB, four bytes a character beside one non-BMP character)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("{")
        for i, (k, v) in enumerate(items):
            f.write((", " if i else "") + json.dumps(k, ensure_ascii=ensure_ascii) + ": ")
            if not isinstance(v, list) or not v:
                f.write(json.dumps(v, ensure_ascii=ensure_ascii))
            else:
                f.write("[")
                for b in range(0, len(v), JSON_PART):
                    f.write((", " if b else "") + json.dumps(v[b:b + JSON_PART], ensure_ascii=ensure_ascii)[1:-1])
                f.write("]")
            v = None  # not held while a generator of items makes the next one
        f.write("}")


def save_raw(path: str | os.PathLike, kg: RawKG, ent_vec: np.ndarray, rel_vec,
             meta: dict) -> Path:
    """Write ``raw.json``, ``raw_ent_vec.npy``, ``raw_rel_rep.npy`` / ``raw_rel_of.npy``
    (the relation :class:`RowTable`), ``meta.json`` under ``path`` (a subdirectory of an
    index dir, e.g. ``<index>/coda``)."""
    d = Path(path)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / "raw.json.tmp"
    write_json_object(tmp, kg.to_json().items())
    os.replace(tmp, d / "raw.json")
    rt = as_rows(rel_vec)
    for name, arr in (("raw_ent_vec", np.ascontiguousarray(ent_vec, np.float32)),
                      ("raw_rel_rep", np.ascontiguousarray(rt.rep, np.float32)),
                      ("raw_rel_of", np.ascontiguousarray(rt.of, np.int32))):
        # write beside, then rename: the old file may be memory-mapped by a loaded system
        with open(d / f"{name}.npy.tmp", "wb") as f:
            np.save(f, arr)
        os.replace(d / f"{name}.npy.tmp", d / f"{name}.npy")
    (d / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return d


def load_raw(path: str | os.PathLike, mmap: bool = True
             ) -> tuple[RawKG, np.ndarray, RowTable, dict]:
    """What :func:`save_raw` wrote (a ``raw_rel_vec.npy`` of an older save: its rows)."""
    d = Path(path)
    kg = RawKG.from_json(json.loads((d / "raw.json").read_text(encoding="utf-8")))
    if (d / "raw_rel_rep.npy").is_file():
        ev, rv = load_raw_vectors(d, mmap)
    else:  # one row per relation (saved before RowTable): store each distinct row once
        rep, of = np.unique(np.load(d / "raw_rel_vec.npy").astype(np.float32), axis=0, return_inverse=True)
        rv = RowTable(np.ascontiguousarray(rep, np.float32), of.reshape(-1).astype(np.int32))
        ev = np.load(d / "raw_ent_vec.npy", mmap_mode="r" if mmap else None)
    meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
    if ev.shape[0] != kg.n_entities or rv.shape[0] != kg.n_relations:
        raise ValueError(f"{d}: vectors do not match raw.json "
                         f"({ev.shape[0]}/{kg.n_entities} entities, {rv.shape[0]}/{kg.n_relations} relations)")
    return kg, np.asarray(ev), rv, meta


def load_raw_vectors(path: str | os.PathLike, mmap: bool = True) -> tuple[np.ndarray, RowTable]:
    """The raw entity vectors and relation table :func:`save_raw` wrote, memory-mapped."""
    d, mode = Path(path), "r" if mmap else None
    ev = np.load(d / "raw_ent_vec.npy", mmap_mode=mode)
    rv = RowTable(np.asarray(np.load(d / "raw_rel_rep.npy", mmap_mode=mode)),
                  np.load(d / "raw_rel_of.npy"))
    if rv.of.size and (int(rv.of.min()) < 0 or int(rv.of.max()) >= rv.rep.shape[0]):
        raise ValueError(f"{d / 'raw_rel_of.npy'}: row ids out of range")
    return ev, rv
