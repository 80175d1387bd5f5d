"""Structural validation of a loaded index, run on every load (verified or not).

The compiled query kernels index arrays without bounds checks, so every id and CSR
pointer they follow must be checked first. :func:`check_structure` enforces, in
vectorised NumPy (O(size) when every state has one chunk, the usual case, else
O(size log size); ~8 ms for the 2Wiki index, docs/architecture.md §3 "Cold start"):

* dtypes and shapes: int32 ids, int64 pointers, float32 ``(n, dim)`` vectors, all native
  byte order, counts equal to the manifest's;
* CSR pointers: ``ptr[0] == 0``, non-decreasing, ``ptr[-1] == len(values)``;
* ids in range, and the redundant arrays agreeing with each other: ``node_ptr/node_edges``
  is the transpose of ``edge_ptr/edge_nodes``, ``chunk_ptr/chunk_nodes`` of
  ``nc_ptr/nc_chunks``, ``group_ptr/group_nodes`` the inverse of ``node_group`` (each
  group's states ordered by chunk), ``group_chunks`` the distinct chunks per group,
  ``node_chunk`` the first chunk of each node and ``edge_chunk`` the chunk of each
  hyperedge's states (see :mod:`hyperrag_fast.hypergraph`);
* vectors finite and of the manifest's dimension.

A flipped byte in a vector that stays finite is not structural: only the sha256
check of :func:`hyperrag_fast.store.load_index` (on by default) catches it.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .mmaps import release
from .errors import IndexCorruptedError


_NATIVE = "<" if sys.byteorder == "little" else ">"
_PTRS = ("edge_ptr", "node_ptr", "group_ptr", "chunk_ptr", "nc_ptr")


class _Broken(Exception):
    def __init__(self, name: str, rule: str) -> None:
        super().__init__(name, rule)
        self.name, self.rule = name, rule


def check_structure(manifest: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                    vectors: Mapping[str, np.ndarray], root: str | Path | None = None,
                    finite: bool = True) -> None:
    """Raise :class:`~hyperrag_fast.store.IndexCorruptedError` naming the file and the
    broken rule, if any. ``finite=False`` leaves the NaN / inf scan of the vectors to the
    caller (a verified load does it while hashing, ``hyperrag_fast.checksums``)."""
    _raise_named(lambda: _check(manifest, arrays, vectors, finite), root)


def check_finite(vectors: Mapping[str, np.ndarray], names, root: str | Path | None = None) -> None:
    """The NaN / inf scan of :func:`check_structure` for the vectors ``names``."""
    _raise_named(lambda: [_check_finite(n, vectors[n]) for n in names], root)


def _raise_named(check, root) -> None:
    try:
        check()
    except _Broken as b:
        sub = "vectors" if b.name.endswith("_vec") else "arrays"
        where = f"{sub}/{b.name}.npy" if b.name != "manifest.json" else b.name
        if root is not None:
            where = str(Path(root) / where)
        raise IndexCorruptedError(f"{where}: {b.rule}; the index is corrupted, rebuild "
                                  f"or restore it") from None


def _int_array(arrays, name: str, dtype, length: int | None = None) -> np.ndarray:
    a = arrays.get(name)
    if a is None:
        raise _Broken(name, "missing")
    if a.ndim != 1 or a.dtype != np.dtype(dtype) or a.dtype.byteorder not in ("=", "|", _NATIVE):
        raise _Broken(name, f"expected a 1-D {np.dtype(dtype).name} array, got "
                            f"{a.dtype.str} of shape {a.shape}")
    if length is not None and a.shape[0] != length:
        raise _Broken(name, f"length {a.shape[0]}, expected {length}")
    return np.asarray(a)


def _in_range(name: str, a: np.ndarray, n: int) -> None:
    if a.size and (int(a.min()) < 0 or int(a.max()) >= n):
        raise _Broken(name, f"holds ids outside [0, {n})")


def _csr(arrays, ptr_name: str, idx_name: str, n_rows: int, n_cols: int):
    ptr = _int_array(arrays, ptr_name, np.int64, n_rows + 1)
    idx = _int_array(arrays, idx_name, np.int32)
    if ptr[0] != 0 or ptr[-1] != idx.shape[0]:
        raise _Broken(ptr_name, f"pointers must start at 0 and end at len({idx_name}) = "
                                f"{idx.shape[0]}, got {int(ptr[0])} .. {int(ptr[-1])}")
    if np.any(np.diff(ptr) < 0):
        raise _Broken(ptr_name, "pointers are not non-decreasing")
    _in_range(idx_name, idx, n_cols)
    rows = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(ptr))
    return ptr, idx, rows


def _pair_keys(rows: np.ndarray, cols: np.ndarray, n_cols: int) -> np.ndarray:
    """The sorted keys ``row * n_cols + col`` (sorted already when each row's columns
    rise, as in a CSR array read row by row: no sort then)."""
    k = rows.astype(np.int64) * max(n_cols, 1) + cols
    return k if k.size < 2 or bool(np.all(k[1:] >= k[:-1])) else np.sort(k)


def _check_finite(name: str, m: np.ndarray) -> None:
    rows = max(1, (1 << 22) // max(m.shape[1], 1))  # blocks of 4M values: no full-size temporary
    for i in range(0, m.shape[0], rows):
        ok = np.isfinite(m[i:i + rows]).all()
        release(m)  # scanned pages leave the resident set
        if not ok:
            raise _Broken(name, "holds NaN or inf")


def _check(manifest, arrays, vectors, finite: bool = True) -> None:
    counts = manifest.get("counts", {})
    try:
        n_c, n_v, n_e, n_g = (int(counts[k]) for k in ("chunks", "nodes", "edges", "groups"))
        n_inc = int(counts.get("incidences", -1))
        dim = int(manifest["embedder"]["dim"])
    except (KeyError, TypeError, ValueError):
        raise _Broken("manifest.json", "counts or embedder dim missing") from None
    _check_graph(arrays, n_c, n_v, n_e, n_g, n_inc)
    for name, n in (("node_vec", n_v), ("edge_vec", n_e), ("chunk_vec", n_c)):
        _check_matrix(name, vectors.get(name), n, dim, finite)
        _check_distinct(arrays, name, n)
    _check_bm25(arrays, n_c)


def check_graph(arrays: Mapping[str, np.ndarray], n_chunks: int, n_nodes: int, n_edges: int,
                n_groups: int, vectors: Mapping[str, np.ndarray], dim: int, where: str) -> None:
    """The rules of :func:`check_structure` for a hypergraph saved elsewhere (a prebuilt
    variant, ``hyperrag_fast.prebuilt_reader``) and its float32 ``vectors`` (by name: row
    counts of the node or edge kind), NaN / inf included; errors name ``where``."""
    try:
        _check_graph(arrays, n_chunks, n_nodes, n_edges, n_groups, -1)
        for name, m in vectors.items():
            _check_matrix(name, m, n_nodes if name.startswith("node") else n_edges, dim, True)
    except _Broken as b:
        raise IndexCorruptedError(f"{where}: {b.name} {b.rule}; the prebuilt structure is "
                                  f"corrupted, rebuild it with hyperrag build-methods") from None


def check_vectors(name: str, m: np.ndarray, n: int, dim: int, where: str) -> None:
    """A float32 (n, dim) C-ordered matrix of finite values, else IndexCorruptedError."""
    try:
        _check_matrix(name, m, n, dim, True)
    except _Broken as b:
        raise IndexCorruptedError(f"{where}: {b.rule}; the prebuilt structure is corrupted, "
                                  f"rebuild it with hyperrag build-methods") from None


def check_coda_graph(arrays: Mapping[str, np.ndarray], n_chunks: int, n_ent: int, n_rel: int,
                     dim: int, where: str) -> None:
    """A saved CODA graph (``coda/graph.py``) before its kernels read it: CSR pointers,
    every id in range, float arrays finite; else IndexCorruptedError naming the file."""
    try:
        _csr(arrays, "adj_ptr", "adj_nbr", n_ent, n_ent)
        n_adj = arrays["adj_nbr"].shape[0]
        _in_range("adj_rel", _int_array(arrays, "adj_rel", np.int32, n_adj), n_rel)
        _csr(arrays, "ent_chunk_ptr", "ent_chunks", n_ent, n_chunks)
        _csr(arrays, "rel_chunk_ptr", "rel_chunks", n_rel, n_chunks)
        for k in ("rel_src", "rel_tgt"):
            _in_range(k, _int_array(arrays, k, np.int32, n_rel), n_ent)
        _in_range("raw_to_ent", _int_array(arrays, "raw_to_ent", np.int64), n_ent)
        rep = arrays.get("rel_rep")
        _check_matrix("rel_rep", rep, -1 if rep is None else rep.shape[0], dim, True)
        _in_range("rel_of", _int_array(arrays, "rel_of", np.int32, n_rel), rep.shape[0])
        _check_matrix("ent_vec", arrays.get("ent_vec"), n_ent, dim, True)
        frp = arrays.get("frp")
        _check_matrix("frp", frp, n_ent, -1 if frp is None else frp.shape[1], True)
        for k, n in (("adj_w", n_adj), ("rel_strength", n_rel)):
            a = arrays.get(k)
            if (a is None or a.shape != (n,) or a.dtype != np.float64 or not np.isfinite(a).all()
                    or (a < 0).any()):  # PPR (power or local push) needs weights >= 0
                raise _Broken(k, f"expected {n} finite float64 values >= 0")
    except _Broken as b:
        raise IndexCorruptedError(f"{where}/{b.name}.npy: {b.rule}; the prebuilt structure is "
                                  f"corrupted, rebuild it with hyperrag build-methods") from None


def _check_matrix(name: str, m, n: int, dim: int, finite: bool) -> None:
    if m is None:
        raise _Broken(name, "missing")
    if (m.ndim != 2 or m.shape != (n, dim) or m.dtype != np.float32
            or m.dtype.byteorder not in ("=", _NATIVE) or not m.flags.c_contiguous):
        raise _Broken(name, f"expected C-ordered float32 of shape ({n}, {dim}), got "
                            f"{m.dtype.str} {m.shape}")
    if finite:
        _check_finite(name, m)


def _check_graph(arrays, n_c: int, n_v: int, n_e: int, n_g: int, n_inc: int) -> None:
    node_chunk = _int_array(arrays, "node_chunk", np.int32, n_v)
    node_group = _int_array(arrays, "node_group", np.int32, n_v)
    edge_chunk = _int_array(arrays, "edge_chunk", np.int32, n_e)
    _in_range("node_chunk", node_chunk, n_c)
    _in_range("node_group", node_group, n_g)
    _in_range("edge_chunk", edge_chunk, n_c)
    if np.any(np.diff(node_chunk) < 0):
        raise _Broken("node_chunk", "states are not in chunk order")
    if np.any(np.diff(edge_chunk) < 0):
        raise _Broken("edge_chunk", "hyperedges are not in chunk order")

    _, edge_nodes, e_rows = _csr(arrays, "edge_ptr", "edge_nodes", n_e, n_v)
    if n_inc >= 0 and edge_nodes.shape[0] != n_inc:
        raise _Broken("edge_nodes", f"{edge_nodes.shape[0]} incidences, manifest says {n_inc}")
    _, node_edges, v_rows = _csr(arrays, "node_ptr", "node_edges", n_v, n_e)
    if not np.array_equal(_pair_keys(e_rows, edge_nodes, n_v), _pair_keys(node_edges, v_rows, n_v)):
        raise _Broken("node_edges", "is not the transpose of edge_ptr/edge_nodes")

    nc_ptr, nc_chunks, nc_rows = _csr(arrays, "nc_ptr", "nc_chunks", n_v, n_c)
    _, chunk_nodes, c_rows = _csr(arrays, "chunk_ptr", "chunk_nodes", n_c, n_v)
    # the (state, chunk) pairs of both listings, keyed chunk-major: sorted as listed when
    # each state has one chunk (states are in chunk order), so nothing is sorted then
    if not np.array_equal(_pair_keys(c_rows, chunk_nodes, n_v), _pair_keys(nc_chunks, nc_rows, n_v)):
        raise _Broken("chunk_nodes", "is not the transpose of nc_ptr/nc_chunks")
    if np.any(np.diff(nc_ptr) < 1):
        raise _Broken("nc_ptr", "a state has no chunk")
    if n_v and not np.array_equal(nc_chunks[nc_ptr[:-1]], node_chunk):
        raise _Broken("nc_chunks", "the first chunk of a state differs from node_chunk")
    inner = np.ones(nc_chunks.shape[0], bool)
    inner[nc_ptr[:-1][nc_ptr[:-1] < nc_chunks.shape[0]]] = False
    if np.any(np.diff(nc_chunks.astype(np.int64))[inner[1:]] <= 0):
        raise _Broken("nc_chunks", "a state's chunks are not strictly increasing")
    one_chunk = nc_chunks.shape[0] == n_v  # every state has exactly one chunk (the usual case)
    # every incidence (e, v): e's chunk is one of v's chunks
    if one_chunk:
        bad = np.any(edge_chunk[e_rows] != nc_chunks[edge_nodes])
    else:
        have = _pair_keys(nc_rows, nc_chunks, n_c)  # v's chunks, sorted state-major
        want = edge_nodes.astype(np.int64) * max(n_c, 1) + edge_chunk[e_rows]
        pos = np.searchsorted(have, want)
        bad = want.size and (np.any(pos >= have.size)
                             or np.any(have[np.minimum(pos, have.size - 1)] != want))
    if bad:
        raise _Broken("edge_chunk", "a hyperedge's chunk is not a chunk of its states")

    group_ptr, group_nodes, g_rows = _csr(arrays, "group_ptr", "group_nodes", n_g, n_v)
    if group_nodes.shape[0] != n_v or np.any(np.bincount(group_nodes, minlength=n_v) != 1):
        raise _Broken("group_nodes", "does not list every state exactly once")
    if not np.array_equal(node_group[group_nodes], g_rows):
        raise _Broken("group_nodes", "a state is listed under another group than node_group")
    t = node_chunk[group_nodes]
    same = g_rows[1:] == g_rows[:-1]
    if np.any((t[1:] < t[:-1]) & same):
        raise _Broken("group_nodes", "a group's states are not ordered by chunk")
    group_chunks = _int_array(arrays, "group_chunks", np.int32, n_g)
    if one_chunk:  # a group's distinct chunks: the runs of its states' (ordered) chunks
        first = np.ones(n_v, bool)
        first[1:] = ~same | (t[1:] != t[:-1])
        expect = np.bincount(g_rows[first], minlength=n_g)
    else:
        pairs = np.sort(node_group[nc_rows].astype(np.int64) * max(n_c, 1) + nc_chunks)
        pairs = pairs[np.r_[True, pairs[1:] != pairs[:-1]]] if pairs.size else pairs
        expect = np.bincount(pairs // max(n_c, 1), minlength=n_g)
    if not np.array_equal(group_chunks, expect):
        raise _Broken("group_chunks", "does not count the distinct chunks of each group")


def _check_distinct(arrays, kind: str, n: int) -> None:
    """The persisted distinct rows of an HNSW kind (``ann``): ids the kernels read."""
    if f"{kind}_rep" not in arrays:
        return
    rep = _int_array(arrays, f"{kind}_rep", np.int64)
    ptr = _int_array(arrays, f"{kind}_dup_ptr", np.int64, rep.shape[0] + 1)
    ids = _int_array(arrays, f"{kind}_dup_ids", np.int64, n)
    _in_range(f"{kind}_rep", rep, n)
    _in_range(f"{kind}_dup_ids", ids, n)
    if ptr[0] != 0 or ptr[-1] != n or np.any(np.diff(ptr) < 1):
        raise _Broken(f"{kind}_dup_ptr", f"pointers must rise from 0 to {n}")


def _check_bm25(arrays, n_c: int) -> None:
    """BM25 postings (column-compressed, one column per term): chunk ids in range."""
    if "bm25_indptr" not in arrays:
        raise _Broken("bm25_indptr", "missing")
    ptr = _int_array(arrays, "bm25_indptr", np.int64)
    idx = _int_array(arrays, "bm25_indices", np.int64)
    data = arrays.get("bm25_data")
    if data is None or data.ndim != 1 or data.dtype != np.float64 or data.shape != idx.shape:
        raise _Broken("bm25_data", "expected float64 weights, one per posting")
    if ptr.shape[0] < 1 or ptr[0] != 0 or ptr[-1] != idx.shape[0] or np.any(np.diff(ptr) < 0):
        raise _Broken("bm25_indptr", "pointers must rise from 0 to the number of postings")
    _in_range("bm25_indices", idx, n_c)
