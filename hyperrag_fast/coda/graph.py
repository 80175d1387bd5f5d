"""The consolidated entity-relation graph of CODA (CodaRAG §3.2) as CSR arrays.

:func:`consolidate` applies a merge table (``consolidate.MergeTable``) to the raw KG
(:mod:`.raw_kg`) at assembly time: merged entities become one node, their relations are
deduplicated into one edge (strengths summed, descriptions and chunks united), self-loops
dropped. The merge is never baked into the saved raw KG, so it stays inspectable and
reversible. A merged node or edge gets the L2 mean of its members' vectors (no
re-embedding when the table changes); FastRP embeddings of the consolidated graph
(kernels/fastrp.py) are computed at assembly. The build step saves the assembled graph
(:func:`save_graph`) and a query opens it (:func:`load_graph`): nothing is assembled at
load (docs/architecture.md §7).
"""
from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..config import FastRPParams  # noqa: F401  (FastRP's defaults live in config)
from ..kernels.csr import csr_from_pairs
from ..kernels.fastrp import fastrp_into
from .raw_kg import (DEFAULT_TYPE, RawKG, RowTable, add_unique, as_rows,
                     l2_rows_inplace, segment_sum, write_json_object)

PROJECTION_ROWS = 1 << 20  # random draws per block of fastrp_projection (bounded memory)


# ------------------------------------------------------------ consolidated graph
def fastrp_projection(n: int, dim: int, seed: int = FastRPParams.seed, s: float | None = None) -> np.ndarray:
    """Very sparse random projection (Chen et al. 2019, Achlioptas / Li et al.):
    entries sqrt(s) * {+1, 0, -1} with probabilities {1/2s, 1 - 1/s, 1/2s}, s = sqrt(n)
    by default (at least 1)."""
    s = max(1.0, float(np.sqrt(n)) if s is None else float(s))
    rng = np.random.default_rng(seed)
    out = np.zeros((n, dim))
    step = max(1, PROJECTION_ROWS // max(dim, 1))
    for b in range(0, n, step):  # the generator fills row-major: the same draws as one call
        u = rng.random((min(step, n - b), dim))
        blk = out[b:b + u.shape[0]]
        blk[u < 1 / (2 * s)] = np.sqrt(s)
        blk[u > 1 - 1 / (2 * s)] = -np.sqrt(s)
    return out


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
    rel_vec: RowTable
    frp: np.ndarray

    @property
    def n_entities(self) -> int:
        return int(self.ent_vec.shape[0])

    @property
    def n_relations(self) -> int:
        return int(self.rel_src.shape[0])

    def entity_chunks(self, e: int) -> np.ndarray:
        """The chunks entity ``e`` occurs in (benchmarks/coda_diagnose.py, tests)."""
        return self.ent_chunks[self.ent_chunk_ptr[e]:self.ent_chunk_ptr[e + 1]]

    def relation_text(self, r: int) -> str:
        return f"{self.ent_name[self.rel_src[r]]} -- {self.ent_name[self.rel_tgt[r]]}: {self.rel_desc[r]}"

    def entity_text(self, e: int) -> str:
        return f"{self.ent_name[e]} ({self.ent_type[e]}): {self.ent_desc[e]}"

    def arrays(self) -> dict[str, np.ndarray]:
        out = {k: getattr(self, k) for k in ARRAYS if k not in ("rel_rep", "rel_of")}
        return dict(out, rel_rep=self.rel_vec.rep, rel_of=self.rel_vec.of)


ARRAYS = ("raw_to_ent", "rel_src", "rel_tgt", "rel_strength", "adj_ptr", "adj_nbr", "adj_rel",
          "adj_w", "ent_chunk_ptr", "ent_chunks", "rel_chunk_ptr", "rel_chunks", "ent_vec",
          "rel_rep", "rel_of", "frp")
TEXTS = ("ent_key", "ent_name", "ent_type", "ent_desc", "rel_desc", "rel_kw")
GRAPH_DIR, BASE_DIR = "graph", "base_graph"  # in a saved CODA system


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
    parts = dict(graph_parts(kg, ent_vec, rel_vec, group_of, frp or FastRPParams()))
    rv = RowTable(parts.pop("rel_rep"), parts.pop("rel_of"))
    return CodaGraph(n_chunks=kg.n_chunks, rel_vec=rv, **parts)


def graph_parts(kg: RawKG, ent_vec: np.ndarray, rel_vec, group_of, p: FastRPParams):
    """(name, value) of every array and text of :func:`consolidate`'s graph, each let go
    once yielded, texts in ``TEXTS`` order: :func:`write_graph` saves a graph without
    holding it whole (docs/architecture.md §7). The FastRP rows come first, from the
    adjacency only, before any vector or text exists; ``ent_vec`` and ``rel_vec`` are
    read late and released after use (they may be memory maps the caller let go)."""
    gid: dict[str, int] = {}
    raw_to_ent = np.empty(kg.n_entities, np.int64)
    for i, key in enumerate(kg.ent_key):
        g = group_of(key) if group_of is not None else key
        raw_to_ent[i] = gid.setdefault(g, len(gid))
    n = len(gid)
    members: list[list[int]] = [[] for _ in range(n)]
    for i, g in enumerate(raw_to_ent):
        members[g].append(i)
    # relations: remap, drop self-loops, dedupe by node pair (first seen), as arrays
    rptr, ridx, rel_src, rel_tgt, rel_strength = _merged_relations(kg, raw_to_ent, n)
    yield "raw_to_ent", raw_to_ent
    del raw_to_ent
    # adjacency: both directions of every relation, CSR by source (stable)
    m = rel_src.shape[0]
    rows = np.concatenate([rel_src, rel_tgt]).astype(np.int64)
    pos = np.arange(2 * m, dtype=np.int64)
    adj_ptr, order = csr_from_pairs(rows, pos, n)
    order = order.astype(np.int64)
    adj_nbr = np.concatenate([rel_tgt, rel_src])[order].astype(np.int32)
    adj_rel = np.concatenate([np.arange(m), np.arange(m)])[order].astype(np.int32)
    adj_w = rel_strength[adj_rel].astype(np.float64) if m else np.zeros(0)
    del rows, pos, order
    yield "frp", fastrp_rows(n, adj_ptr, adj_nbr, adj_w, p)
    yield from (("rel_src", rel_src), ("rel_tgt", rel_tgt), ("rel_strength", rel_strength),
                ("adj_ptr", adj_ptr), ("adj_nbr", adj_nbr), ("adj_rel", adj_rel), ("adj_w", adj_w))
    del rel_src, rel_tgt, rel_strength, adj_ptr, adj_nbr, adj_rel, adj_w
    # entities: the member with most chunks names the node (ties: first seen)
    yield "ent_key", list(gid)
    del gid
    heads = [max(mem, key=lambda i: (len(kg.ent_chunks[i]), -i)) for mem in members]
    yield "ent_name", [kg.ent_name[h] for h in heads]
    ent_type = []
    for h, mem in zip(heads, members):
        types = Counter(kg.ent_type[i] for i in mem if kg.ent_type[i] != DEFAULT_TYPE)
        ent_type.append(types.most_common(1)[0][0] if types else kg.ent_type[h])
    del heads
    yield "ent_type", ent_type
    del ent_type
    ent_desc = []
    for mem in members:
        descs: list[str] = []
        for i in mem:
            for d in kg.ent_desc[i]:
                add_unique(descs, d)
        ent_desc.append(" ".join(descs))
    yield "ent_desc", ent_desc
    del ent_desc
    ecp, ecs = _csr_lists([sorted({c for i in mem for c in kg.ent_chunks[i]}) for mem in members])
    yield from (("ent_chunk_ptr", ecp), ("ent_chunks", ecs))
    del ecp, ecs
    mptr, midx = _csr_lists(members)
    del members
    yield "ent_vec", (l2_rows_inplace(segment_sum(mptr, midx, ent_vec)) if n
                      else np.zeros((0, ent_vec.shape[1]), np.float32))
    del mptr, midx, ent_vec
    rel_desc, rel_kw, rcp, rcs = [], [], [0], []
    rp, rx = rptr.tolist(), ridx.tolist()
    for r in range(len(rp) - 1):
        m = rx[rp[r]:rp[r + 1]]
        d: list[str] = []
        k: list[str] = []
        for j in m:
            for x in kg.rel_desc[j]:
                add_unique(d, x)
            for x in kg.rel_kw[j]:
                add_unique(k, x)
        rel_desc.append(" ".join(d))
        rel_kw.append(", ".join(k))
        rcs += sorted({c for j in m for c in kg.rel_chunks[j]})
        rcp.append(len(rcs))
    del rp, rx
    yield "rel_desc", rel_desc
    del rel_desc
    yield "rel_kw", rel_kw
    del rel_kw
    yield from (("rel_chunk_ptr", np.array(rcp, np.int64)), ("rel_chunks", np.array(rcs, np.int32)))
    del rcp, rcs
    raw = as_rows(rel_vec)
    del rel_vec
    rv = _merged_rows(raw, rptr, raw.of[ridx])
    yield from (("rel_rep", rv.rep), ("rel_of", rv.of))


def _merged_relations(kg: RawKG, raw_to_ent: np.ndarray, n: int):
    """Relations of the grouped graph: raw relations remapped to their nodes, self-loops
    dropped, one relation per node pair in first-seen order. Returns (member CSR ``ptr``,
    raw relation ids ascending within each relation, src, tgt, summed strength: the sums
    run over the members in order, as Python's ``sum`` did)."""
    src = raw_to_ent[np.asarray(kg.rel_src, np.int64)]
    tgt = raw_to_ent[np.asarray(kg.rel_tgt, np.int64)]
    keep = np.flatnonzero(src != tgt)
    lo, hi = np.minimum(src, tgt)[keep], np.maximum(src, tgt)[keep]
    _, first, inv = np.unique(lo * max(n, 1) + hi, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # relation ids by first occurrence
    rank = np.empty(order.size, np.int64)
    rank[order] = np.arange(order.size)
    rid = rank[inv.reshape(-1)]
    ptr = np.zeros(order.size + 1, np.int64)
    ptr[1:] = np.cumsum(np.bincount(rid, minlength=order.size))
    members = keep[np.argsort(rid, kind="stable")]
    strength = np.bincount(rid, weights=np.asarray(kg.rel_strength, np.float64)[keep],
                           minlength=order.size).astype(np.float64)
    return (ptr, members, lo[first[order]].astype(np.int32), hi[first[order]].astype(np.int32),
            strength)


def _merged_rows(raw: RowTable, ptr: np.ndarray, rows: np.ndarray) -> RowTable:
    """L2 sum of the member rows of each merged relation (relation r's raw row ids:
    ``rows[ptr[r]:ptr[r+1]]``), computed once per distinct id sequence, the distinct
    sequences in first-seen order (the values a dense computation gives, row for row).
    Grouped with arrays: a one-member relation's sequence is its row id; only the
    sequences of two or more ids are Python tuples (docs/architecture.md §7)."""
    cnt = np.diff(ptr)
    if cnt.size == 0:
        return RowTable(np.zeros((0, raw.rep.shape[1]), np.float32), np.zeros(0, np.int32))
    code = np.where(cnt == 1, rows[np.minimum(ptr[:-1], max(rows.size - 1, 0))], -1).astype(np.int64)
    multi = np.flatnonzero(cnt != 1)
    if multi.size:
        ids: dict[tuple, int] = {}
        code[multi] = [raw.rep.shape[0] + ids.setdefault(tuple(rows[ptr[r]:ptr[r + 1]].tolist()), len(ids))
                       for r in multi.tolist()]
    _, first, inv = np.unique(code, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # distinct sequences in first-seen order
    rank = np.empty(order.size, np.int64)
    rank[order] = np.arange(order.size)
    head = first[order]  # the first relation of each distinct sequence
    lens = cnt[head]
    uptr = np.zeros(head.size + 1, np.int64)
    uptr[1:] = np.cumsum(lens)
    idx = rows[np.repeat(ptr[head] - uptr[:-1], lens) + np.arange(uptr[-1])]
    return RowTable(l2_rows_inplace(segment_sum(uptr, idx, raw.rep)),
                    rank[inv.reshape(-1)].astype(np.int32))


def fastrp_rows(n: int, adj_ptr: np.ndarray, adj_nbr: np.ndarray, adj_w: np.ndarray,
                p: FastRPParams) -> np.ndarray:
    """L2-normalised FastRP rows of the n-node adjacency CSR ``(adj_ptr, adj_nbr, adj_w)``
    (kernels/fastrp.py)."""
    if n == 0 or p.dim == 0:
        return np.zeros((n, p.dim), np.float32)
    proj = fastrp_projection(n, p.dim, p.seed)
    deg = np.diff(adj_ptr).astype(np.float64)
    scale = np.where(deg > 0, np.power(np.maximum(deg, 1.0), p.beta), 0.0)
    proj *= scale[:, None]  # in place: the same products, no second n x dim copy
    out = fastrp_into(adj_ptr, adj_nbr, adj_w, proj,
                      np.asarray(p.iter_weights, np.float64), bool(p.normalize))
    del proj  # overwritten by the kernel (its working matrix)
    return l2_rows_inplace(out)


# ------------------------------------------------------------------ persistence
def save_graph(d: str | os.PathLike, g: CodaGraph) -> Path:
    """Write the assembled graph under ``d``: one ``.npy`` per array, ``texts.json`` and
    ``graph.json`` (counts). The query side opens it with :func:`load_graph`."""
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    for k, a in g.arrays().items():
        np.save(d / f"{k}.npy", np.ascontiguousarray(a))
    write_json_object(d / "texts.json", ((k, list(getattr(g, k))) for k in TEXTS), ensure_ascii=False)
    (d / "graph.json").write_text(json.dumps({"n_chunks": g.n_chunks,
                                              "n_entities": g.n_entities,
                                              "n_relations": g.n_relations}), encoding="utf-8")
    return d


def write_graph(d: str | os.PathLike, n_chunks: int, parts) -> Path:
    """:func:`save_graph` of the graph whose (name, value) items ``parts`` yields
    (:func:`graph_parts`), each written as it comes and let go: the same files, without
    the graph held whole (docs/architecture.md §7)."""
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}

    def texts():
        for k, v in parts:
            if k in TEXTS:
                yield k, v
            else:
                counts[k] = int(v.shape[0])
                np.save(d / f"{k}.npy", np.ascontiguousarray(v))
            v = None  # noqa: F841  (not held while the next part is made)

    write_json_object(d / "texts.json", texts(), ensure_ascii=False)
    (d / "graph.json").write_text(json.dumps({"n_chunks": n_chunks,
                                              "n_entities": counts["ent_vec"],
                                              "n_relations": counts["rel_src"]}), encoding="utf-8")
    return d


class _Texts:
    """The graph's texts, read from ``texts.json`` on first use (only LLM interference
    filtering and diagnostics read them)."""

    def __init__(self, path: Path) -> None:
        self.path, self._d = path, None

    def get(self, key: str) -> list[str]:
        if self._d is None:
            d = json.loads(self.path.read_text(encoding="utf-8"))
            if not all(isinstance(d.get(k), list) for k in TEXTS):
                raise ValueError(f"{self.path}: texts missing")
            self._d = d
        return self._d[key]


class _LazyList(Sequence):
    def __init__(self, texts: _Texts, key: str, n: int) -> None:
        self._t, self._k, self._n = texts, key, n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        return self._t.get(self._k)[i]

    def __iter__(self):
        return iter(self._t.get(self._k))


def load_graph(d: str | os.PathLike, n_chunks: int, dim: int) -> CodaGraph:
    """Open a graph :func:`save_graph` wrote, checked before any kernel reads it (ids and
    CSR pointers in range, vectors finite: ``validate.check_coda_graph``); texts are read
    on first use. Raises IndexCorruptedError naming the file."""
    from ..validate import check_coda_graph
    d = Path(d)
    meta = json.loads((d / "graph.json").read_text(encoding="utf-8"))
    arrs = {k: np.load(d / f"{k}.npy", allow_pickle=False) for k in ARRAYS}
    n_e, n_r = meta["n_entities"], meta["n_relations"]
    if meta["n_chunks"] != n_chunks or not isinstance(n_e, int) or not isinstance(n_r, int):
        raise ValueError("counts")
    check_coda_graph(arrs, n_chunks, n_e, n_r, dim, str(d))
    texts = _Texts(d / "texts.json")
    lazy = {k: _LazyList(texts, k, n_e if k.startswith("ent_") else n_r) for k in TEXTS}
    rv = RowTable(arrs.pop("rel_rep"), arrs.pop("rel_of"))
    return CodaGraph(n_chunks=n_chunks, rel_vec=rv, **lazy, **arrs)


@dataclass(eq=False)
class OpenedCoda:
    """A saved CODA system as a query opens it: the consolidated graph, the unmerged one
    (``coda_base``) and the build's ``meta.json``; nothing assembled, no build code."""

    graph: CodaGraph
    base_graph: CodaGraph
    meta: dict
    path: Path | None = None


def open_coda(d: str | os.PathLike, n_chunks: int, dim: int) -> OpenedCoda:
    """Open the graphs a build step saved under ``d`` (``CodaSystem.save``)."""
    d = Path(d)
    if not (d / GRAPH_DIR / "graph.json").is_file():
        raise FileNotFoundError(f"{d / GRAPH_DIR}: not saved (a CODA system saved by an "
                                f"older version); rebuild it with hyperrag build-methods")
    meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
    return OpenedCoda(load_graph(d / GRAPH_DIR, n_chunks, dim),
                      load_graph(d / BASE_DIR, n_chunks, dim), meta, d)
