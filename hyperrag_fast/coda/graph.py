"""The consolidated entity-relation graph of CODA (CodaRAG §3.1-3.2) as CSR arrays.

Two layers. The *raw* KG (:class:`RawKG`) aggregates per-chunk extractions
(:class:`ChunkKG`) by normalised entity name, as LightRAG does: typed entities with
descriptions and chunks, undirected relations (source, target, description,
keywords, strength) with chunks. The *consolidated* graph (:class:`CodaGraph`)
applies a merge table (``consolidate.MergeTable``) to the raw KG at assembly time:
merged entities become one node, their relations are deduplicated into one edge
(strengths summed, descriptions and chunks united), self-loops dropped. The merge
is never baked into the saved raw KG, so it stays inspectable and reversible.

Vectors: a raw entity's vector is L2(embed(name) + mean of its first
``MAX_PIECES`` description vectors), a raw relation's the L2 mean of its first
description vectors; a merged node or edge gets the L2 mean of its members'
vectors (no re-embedding when the table changes). FastRP embeddings of the
consolidated graph (kernels/fastrp.py) are computed at assembly.
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
from ..kernels.csr import csr_from_pairs
from ..kernels.fastrp import fastrp
from ..lexical import normalize_name
from ..records import Extraction

MAX_PIECES = 8
DEFAULT_TYPE = "entity"


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


def _add_unique(lst: list, item: str) -> None:
    if item and item not in lst:
        lst.append(item)


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
        names: list[Counter] = []
        types: list[Counter] = []
        rindex: dict[tuple[int, int], int] = {}

        def entity(name: str, typ: str | None, desc: str, c: int) -> int | None:
            key = normalize_name(name)
            if not key:
                return None
            i = index.get(key)
            if i is None:
                i = index[key] = len(kg.ent_key)
                kg.ent_key.append(key)
                kg.ent_desc.append([])
                kg.ent_chunks.append([])
                names.append(Counter())
                types.append(Counter())
            names[i][name.strip()] += 1
            if typ:
                types[i][typ] += 1
            _add_unique(kg.ent_desc[i], desc.strip())
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
                    kg.rel_desc.append([])
                    kg.rel_kw.append([])
                    kg.rel_strength.append(0.0)
                    kg.rel_chunks.append([])
                _add_unique(kg.rel_desc[j], desc.strip())
                _add_unique(kg.rel_kw[j], kw.strip())
                kg.rel_strength[j] += float(strength)
                if not kg.rel_chunks[j] or kg.rel_chunks[j][-1] != c:
                    kg.rel_chunks[j].append(c)
        kg.ent_name = [n.most_common(1)[0][0] for n in names]
        kg.ent_type = [t.most_common(1)[0][0] if t else DEFAULT_TYPE for t in types]
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
def embed_known(texts: Sequence[str], embedder: Embedder | None,
                known: dict[str, np.ndarray], dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(vectors, found mask): texts in ``known`` are looked up, the rest embedded once
    (when an embedder is given; else their rows are zero and the mask False)."""
    todo = [t for t in dict.fromkeys(texts) if t not in known]
    if todo and embedder is not None:
        for b in range(0, len(todo), 256):
            part = todo[b:b + 256]
            known.update(zip(part, np.asarray(embedder.embed(part), dtype=np.float32)))
    out = np.zeros((len(texts), dim), np.float32)
    mask = np.zeros(len(texts), bool)
    for i, t in enumerate(texts):
        v = known.get(t)
        if v is not None:
            out[i] = v
            mask[i] = True
    return out, mask


def _l2(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=1, keepdims=True)
    n[n == 0] = 1.0
    return np.ascontiguousarray(x / n, dtype=np.float32)


def _mean_rows(ptr: np.ndarray, idx: np.ndarray, vecs: np.ndarray) -> np.ndarray:
    """Row r = sum of vecs[idx[ptr[r]:ptr[r+1]]] (vectorised segment sum)."""
    import scipy.sparse as sp

    n = ptr.shape[0] - 1
    m = sp.csr_matrix((np.ones(idx.shape[0], np.float32), np.asarray(idx, np.int64),
                       np.asarray(ptr, np.int64)), shape=(n, vecs.shape[0]))
    return np.asarray(m @ np.asarray(vecs, np.float32), dtype=np.float32).reshape(n, vecs.shape[1])


def raw_vectors(kg: RawKG, embedder: Embedder | None, known: dict[str, np.ndarray],
                dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Raw entity and relation vectors (see the module docstring). Pieces already in
    ``known`` (e.g. the index's sentence vectors) are not re-embedded."""
    ptr, pieces = [0], []
    for d in kg.ent_desc:
        pieces += d[:MAX_PIECES]
        ptr.append(len(pieces))
    pv, _ = embed_known(pieces, embedder, known, dim)
    ent = _mean_rows(np.asarray(ptr), np.arange(len(pieces)), pv)
    ent = _l2(ent)
    nv, found = embed_known(kg.ent_name, embedder, known, dim)
    ent = _l2(ent + np.where(found[:, None], nv, 0))
    ptr, pieces = [0], []
    for d in kg.rel_desc:
        pieces += d[:MAX_PIECES]
        ptr.append(len(pieces))
    pv, _ = embed_known(pieces, embedder, known, dim)
    rel = _l2(_mean_rows(np.asarray(ptr), np.arange(len(pieces)), pv))
    return ent, rel


# ------------------------------------------------------------ consolidated graph
def fastrp_projection(n: int, dim: int, seed: int = 0, s: float | None = None) -> np.ndarray:
    """Very sparse random projection (Chen et al. 2019, Achlioptas / Li et al.):
    entries sqrt(s) * {+1, 0, -1} with probabilities {1/2s, 1 - 1/s, 1/2s}, s = sqrt(n)
    by default (at least 1)."""
    s = max(1.0, float(np.sqrt(n)) if s is None else float(s))
    rng = np.random.default_rng(seed)
    u = rng.random((n, dim))
    out = np.zeros((n, dim))
    out[u < 1 / (2 * s)] = np.sqrt(s)
    out[u > 1 - 1 / (2 * s)] = -np.sqrt(s)
    return out


@dataclass(frozen=True)
class FastRPParams:
    """FastRP settings: width, iteration weights (N_1..N_k), per-iteration row L2
    normalisation, degree exponent beta on R's rows (Chen et al. 2019), seed."""

    dim: int = 128
    iter_weights: tuple[float, ...] = (0.0, 1.0, 1.0, 1.0)
    normalize: bool = True
    beta: float = -0.5
    seed: int = 0


@dataclass(eq=False)
class CodaGraph:
    """Consolidated KG arrays (CodaRAG §3.1): entity adjacency CSR ``adj_ptr/adj_nbr``
    with relation ids ``adj_rel`` and weights ``adj_w`` (= strength; the entity x
    relation incidence shares ``adj_ptr``), entity -> chunks and relation -> chunks CSR,
    raw-entity membership ``raw_to_ent``, texts beside them, vectors and FastRP rows."""

    n_chunks: int
    ent_key: list[str]
    ent_name: list[str]
    ent_type: list[str]
    ent_desc: list[str]
    raw_to_ent: np.ndarray
    rel_src: np.ndarray
    rel_tgt: np.ndarray
    rel_strength: np.ndarray
    rel_desc: list[str]
    rel_kw: list[str]
    adj_ptr: np.ndarray
    adj_nbr: np.ndarray
    adj_rel: np.ndarray
    adj_w: np.ndarray
    ent_chunk_ptr: np.ndarray
    ent_chunks: np.ndarray
    rel_chunk_ptr: np.ndarray
    rel_chunks: np.ndarray
    ent_vec: np.ndarray
    rel_vec: np.ndarray
    frp: np.ndarray

    @property
    def n_entities(self) -> int:
        return len(self.ent_key)

    @property
    def n_relations(self) -> int:
        return int(self.rel_src.shape[0])

    def entity_chunks(self, e: int) -> np.ndarray:
        return self.ent_chunks[self.ent_chunk_ptr[e]:self.ent_chunk_ptr[e + 1]]

    def relation_text(self, r: int) -> str:
        return f"{self.ent_name[self.rel_src[r]]} -- {self.ent_name[self.rel_tgt[r]]}: {self.rel_desc[r]}"

    def entity_text(self, e: int) -> str:
        return f"{self.ent_name[e]} ({self.ent_type[e]}): {self.ent_desc[e]}"

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k) for k in ARRAYS}


ARRAYS = ("raw_to_ent", "rel_src", "rel_tgt", "rel_strength", "adj_ptr", "adj_nbr", "adj_rel",
          "adj_w", "ent_chunk_ptr", "ent_chunks", "rel_chunk_ptr", "rel_chunks", "ent_vec",
          "rel_vec", "frp")


def _csr_lists(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(lists) + 1, np.int64)
    ptr[1:] = np.cumsum([len(x) for x in lists])
    idx = np.fromiter((c for x in lists for c in x), np.int32, count=int(ptr[-1]))
    return ptr, idx


def consolidate(kg: RawKG, ent_vec: np.ndarray, rel_vec: np.ndarray,
                group_of: Callable[[str], str] | None = None,
                frp: FastRPParams | None = None) -> CodaGraph:
    """Apply a name grouping (``group_of(key) -> canonical key``, e.g.
    ``consolidate.MergeTable.group_of``) to the raw KG: one node per group, one edge
    per distinct node pair (duplicates merged), self-loops dropped (CodaRAG §3.2)."""
    gid: dict[str, int] = {}
    raw_to_ent = np.empty(kg.n_entities, np.int64)
    for i, key in enumerate(kg.ent_key):
        g = group_of(key) if group_of is not None else key
        raw_to_ent[i] = gid.setdefault(g, len(gid))
    n = len(gid)
    members: list[list[int]] = [[] for _ in range(n)]
    for i, g in enumerate(raw_to_ent):
        members[g].append(i)
    # entities: the member with most chunks names the node (ties: first seen)
    ent_key = list(gid)
    ent_name, ent_type, ent_desc, ent_chunks = [], [], [], []
    for g, mem in enumerate(members):
        head = max(mem, key=lambda i: (len(kg.ent_chunks[i]), -i))
        ent_name.append(kg.ent_name[head])
        types = Counter(kg.ent_type[i] for i in mem if kg.ent_type[i] != DEFAULT_TYPE)
        ent_type.append(types.most_common(1)[0][0] if types else kg.ent_type[head])
        descs: list[str] = []
        for i in mem:
            for d in kg.ent_desc[i]:
                _add_unique(descs, d)
        ent_desc.append(" ".join(descs))
        ent_chunks.append(sorted({c for i in mem for c in kg.ent_chunks[i]}))
    mptr, midx = _csr_lists(members)
    ev = _l2(_mean_rows(mptr, midx, ent_vec)) if n else np.zeros((0, ent_vec.shape[1]), np.float32)
    # relations: remap, drop self-loops, dedupe by node pair
    rindex: dict[tuple[int, int], int] = {}
    rmembers: list[list[int]] = []
    for j in range(kg.n_relations):
        a, b = int(raw_to_ent[kg.rel_src[j]]), int(raw_to_ent[kg.rel_tgt[j]])
        if a == b:
            continue
        pair = (min(a, b), max(a, b))
        r = rindex.setdefault(pair, len(rindex))
        if r == len(rmembers):
            rmembers.append([])
        rmembers[r].append(j)
    pairs = list(rindex)
    rel_src = np.array([p[0] for p in pairs], np.int32)
    rel_tgt = np.array([p[1] for p in pairs], np.int32)
    rel_strength = np.array([sum(kg.rel_strength[j] for j in m) for m in rmembers], np.float64)
    rel_desc, rel_kw, rel_chunks = [], [], []
    for m in rmembers:
        d: list[str] = []
        k: list[str] = []
        for j in m:
            for x in kg.rel_desc[j]:
                _add_unique(d, x)
            for x in kg.rel_kw[j]:
                _add_unique(k, x)
        rel_desc.append(" ".join(d))
        rel_kw.append(", ".join(k))
        rel_chunks.append(sorted({c for j in m for c in kg.rel_chunks[j]}))
    rptr, ridx = _csr_lists(rmembers)
    rv = (_l2(_mean_rows(rptr, ridx, rel_vec)) if rmembers
          else np.zeros((0, rel_vec.shape[1]), np.float32))
    # adjacency: both directions of every relation, CSR by source (stable)
    m = rel_src.shape[0]
    rows = np.concatenate([rel_src, rel_tgt]).astype(np.int64)
    pos = np.arange(2 * m, dtype=np.int64)
    adj_ptr, order = csr_from_pairs(rows, pos, n)
    order = order.astype(np.int64)
    adj_nbr = np.concatenate([rel_tgt, rel_src])[order].astype(np.int32)
    adj_rel = np.concatenate([np.arange(m), np.arange(m)])[order].astype(np.int32)
    adj_w = rel_strength[adj_rel].astype(np.float64) if m else np.zeros(0)
    ecp, ecs = _csr_lists(ent_chunks)
    rcp, rcs = _csr_lists(rel_chunks)
    g = CodaGraph(kg.n_chunks, ent_key, ent_name, ent_type, ent_desc, raw_to_ent, rel_src,
                  rel_tgt, rel_strength, rel_desc, rel_kw, adj_ptr, adj_nbr, adj_rel, adj_w,
                  ecp, ecs, rcp, rcs, ev, rv, np.zeros((n, 0), np.float32))
    g.frp = fastrp_embed(g, frp or FastRPParams())
    return g


def fastrp_embed(g: CodaGraph, p: FastRPParams) -> np.ndarray:
    """L2-normalised FastRP rows of the consolidated graph (kernels/fastrp.py)."""
    n = g.n_entities
    if n == 0 or p.dim == 0:
        return np.zeros((n, p.dim), np.float32)
    proj = fastrp_projection(n, p.dim, p.seed)
    deg = np.diff(g.adj_ptr).astype(np.float64)
    scale = np.where(deg > 0, np.power(np.maximum(deg, 1.0), p.beta), 0.0)
    proj = np.ascontiguousarray(proj * scale[:, None])
    out = fastrp(g.adj_ptr, g.adj_nbr, g.adj_w, proj,
                 np.asarray(p.iter_weights, np.float64), bool(p.normalize))
    return _l2(out)


# ------------------------------------------------------------------ persistence
def save_raw(path: str | os.PathLike, kg: RawKG, ent_vec: np.ndarray, rel_vec: np.ndarray,
             meta: dict) -> Path:
    """Write ``raw.json``, ``raw_ent_vec.npy``, ``raw_rel_vec.npy``, ``meta.json`` under
    ``path`` (a subdirectory of an index dir, e.g. ``<index>/coda``)."""
    d = Path(path)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / "raw.json.tmp"
    tmp.write_text(json.dumps(kg.to_json()), encoding="utf-8")
    os.replace(tmp, d / "raw.json")
    for name, arr in (("raw_ent_vec", ent_vec), ("raw_rel_vec", rel_vec)):
        # write beside, then rename: the old file may be memory-mapped by a loaded system
        with open(d / f"{name}.npy.tmp", "wb") as f:
            np.save(f, np.ascontiguousarray(arr, np.float32))
        os.replace(d / f"{name}.npy.tmp", d / f"{name}.npy")
    (d / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return d


def load_raw(path: str | os.PathLike, mmap: bool = True
             ) -> tuple[RawKG, np.ndarray, np.ndarray, dict]:
    d = Path(path)
    kg = RawKG.from_json(json.loads((d / "raw.json").read_text(encoding="utf-8")))
    mode = "r" if mmap else None
    ev = np.load(d / "raw_ent_vec.npy", mmap_mode=mode)
    rv = np.load(d / "raw_rel_vec.npy", mmap_mode=mode)
    meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
    if ev.shape[0] != kg.n_entities or rv.shape[0] != kg.n_relations:
        raise ValueError(f"{d}: vectors do not match raw.json "
                         f"({ev.shape[0]}/{kg.n_entities} entities, {rv.shape[0]}/{kg.n_relations} relations)")
    return kg, np.asarray(ev), np.asarray(rv), meta
