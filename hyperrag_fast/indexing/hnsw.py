"""The write side of :class:`~hyperrag_fast.ann.VectorIndex`: building a usearch HNSW graph
over a matrix's distinct rows, extending it by appended rows (``add``), spilling it to a
file and saving it (docs/architecture.md §1, §8, §10). A query process opens saved graphs
with ``VectorIndex.load`` and imports none of this."""
from __future__ import annotations

import os

import numpy as np

from ..ann import AnnParams, DistinctRows, VectorIndex
from ..mmaps import release
from .distinct import distinct_rows

_ADD_BLOCK = 16384  # rows handed to usearch per add call (bounded gather)


def _usearch_index(dim: int, p: AnnParams):
    from usearch.index import Index
    return Index(ndim=dim, metric="cos", dtype=p.storage, connectivity=p.connectivity,
                 expansion_add=p.expansion_add, expansion_search=p.expansion_search)


def build_vector_index(vectors: np.ndarray, params: AnnParams | None = None,
                       distinct: DistinctRows | None = None) -> VectorIndex:
    """A :class:`VectorIndex` over ``vectors``: exact below ``params.exact_threshold`` rows
    (or with ``backend="exact"``), else a new HNSW graph over the distinct rows."""
    params = params or AnnParams()
    v = VectorIndex(vectors, AnnParams(**{**params.__dict__, "backend": "exact"}))
    if not params.use_usearch(v.n):
        return VectorIndex(v.vectors, params)
    d = distinct if distinct is not None else distinct_rows(v.vectors)
    hnsw = _usearch_index(v.dim, params)
    for b in range(0, d.rep.shape[0], _ADD_BLOCK):
        rep = d.rep[b:b + _ADD_BLOCK]
        hnsw.add(np.arange(b, b + rep.shape[0], dtype=np.uint64),
                 np.ascontiguousarray(v.vectors[rep]), threads=params.threads)
        release(v.vectors)
    return VectorIndex(v.vectors, params, hnsw=hnsw, distinct=d)


def extend_vector_index(old: VectorIndex, vectors: np.ndarray,
                        params: AnnParams | None = None) -> VectorIndex:
    """An index over ``vectors`` = ``old``'s rows followed by new ones (``add``): the HNSW
    graph is copied and only the new distinct rows are inserted (distinct ids are in order
    of first occurrence, so the old ones keep theirs). Anything else (exact back end,
    other rows in front) builds a new index."""
    params = params or old.params
    v = np.asarray(vectors)
    n_old = old.n
    have = old.distinct()
    probe = have.rep[np.linspace(0, have.rep.shape[0] - 1, 64).astype(np.int64)] \
        if have is not None and have.rep.shape[0] else np.zeros(0, np.int64)
    if (old.hnsw is None or not params.use_usearch(v.shape[0]) or v.shape[0] < n_old
            or not np.array_equal(v[probe], old.vectors[probe])):  # the same rows in front
        return build_vector_index(vectors, params)
    d = distinct_rows(v)
    n_rep = have.rep.shape[0]
    if d.rep.shape[0] < n_rep or not np.array_equal(d.rep[:n_rep], have.rep):
        return build_vector_index(vectors, params, distinct=d)
    if old.file is not None:  # read the file into memory: copying the view would
        from usearch.index import Index  # also leave all its mapped pages resident
        hnsw = Index.restore(old.file, view=False)
    else:
        hnsw = old.hnsw.copy()
    for b in range(n_rep, d.rep.shape[0], _ADD_BLOCK):
        rep = d.rep[b:b + _ADD_BLOCK]
        hnsw.add(np.arange(b, b + rep.shape[0], dtype=np.uint64), np.ascontiguousarray(v[rep]),
                 threads=params.threads)
    return VectorIndex(vectors, params, hnsw=hnsw, distinct=d)


def save_vector_index(vi: VectorIndex, path: str | os.PathLike) -> bool:
    """Write ``vi``'s usearch graph to ``path``; returns False (nothing written) for exact.
    A graph that is a view of a file (:func:`spill`, ``VectorIndex.load``) hard-links it."""
    if vi.hnsw is None:
        return False
    if vi.file is not None:
        try:
            os.link(vi.file, path)
            return True
        except OSError:
            pass
    vi.hnsw.save(os.fspath(path))
    return True


def spill(vi: VectorIndex, path: str | os.PathLike) -> VectorIndex:
    """The same index with its HNSW graph written to ``path`` and memory-mapped from there
    (a build holds no graph in memory between building and saving)."""
    if vi.hnsw is None:
        return vi
    vi.hnsw.save(os.fspath(path))
    return VectorIndex.load(vi.vectors, path, vi.params, view=True, distinct=vi.distinct())
