"""Candidate search over one embedding matrix (docs/architecture.md §4 step 1, §8).

:class:`VectorIndex` answers top-k cosine queries over L2-normalised float32 rows,
either exactly (compiled float32 dot products and an ordered top-k, ``kernels.dense``) or
with a usearch HNSW index.
Below ``exact_threshold`` rows the exact search is used: it was measured
competitive below ~100k vectors, and it needs no build time. Returned similarities
are always the exact cosines of the returned rows (usearch hits are rescored), and
results are ordered by similarity, ties by id, so both back ends agree on order.

Identical rows (entity states that share one description) are indexed once: HNSW
recall collapses on heavily duplicated data (2Wiki entity states: 97k rows, 21.7k
distinct), so hits are expanded to every equal row and rescored.

Measured here (2 shared cores, MiniLM vectors of 2Wiki sentences, k = 50): exact
search with NumPy ~1-3 ms/query at 6k rows, ~8 ms at 20k, ~20 ms at 100k; usearch (M = 16,
expansion_search = 128) ~0.9 ms at 6k with recall@50 0.993, but builds at only
~1,600 vectors/s. Hence the 10k default threshold. The compiled exact search takes
~0.17 ms at 6k x 384 (NumPy with multi-threaded BLAS: ~0.14 ms,
``benchmarks/results/kernel_micro.json``) and releases the GIL; BLAS is kept off the query
path because OpenBLAS's pool spins on the other core between calls.
A single query searches usearch with one thread (``AnnParams.threads`` is for batches).
"""
from __future__ import annotations

import os

import numpy as np

from .config import BACKENDS, EXACT_THRESHOLD, AnnParams  # noqa: F401  (AnnParams: configuration)
from .kernels.dense import all_finite, exact_topk, expand_rescore_topk

_ADD_BLOCK = 16384  # rows handed to usearch per add call (bounded gather)


def top_k_desc(scores: np.ndarray, k: int, exclude: np.ndarray | None = None) -> np.ndarray:
    """Ids (int64) of the ``k`` largest finite ``scores``, best first (equal scores by
    lower id), skipping ``exclude``: the one top-k selection over a score vector outside
    the kernels. Which of several ids tied at the k-th score is kept is NumPy's
    ``argpartition`` choice (deterministic), as CODA's retrieval always selected."""
    s = np.array(scores, dtype=np.float64)
    if exclude is not None and exclude.size:
        s[exclude] = -np.inf
    k = min(int(k), int(np.isfinite(s).sum()))
    if k <= 0:
        return np.zeros(0, np.int64)
    part = np.argpartition(-s, k - 1)[:k]
    return part[np.lexsort((part, -s[part]))].astype(np.int64)


def _usearch_index(dim: int, p: AnnParams):
    from usearch.index import Index
    return Index(ndim=dim, metric="cos", dtype=p.storage, connectivity=p.connectivity,
                 expansion_add=p.expansion_add, expansion_search=p.expansion_search)


class VectorIndex:
    """Top-k cosine search over ``vectors`` (n x d, float32, rows L2-normalised).

    ``vectors`` may be a read-only memory map; it is kept (not copied) because both
    back ends need it (exact search, rescoring). Thread-safe for concurrent searches.
    """

    def __init__(self, vectors: np.ndarray, params: AnnParams | None = None,
                 _hnsw=None, distinct=None) -> None:
        v = np.asarray(vectors)
        if v.ndim != 2:
            raise ValueError(f"vectors must be a 2-d array, got shape {v.shape}")
        if v.dtype != np.float32:
            v = v.astype(np.float32)
        self.vectors = np.ascontiguousarray(v)
        self.params = params or AnnParams()
        self.hnsw = _hnsw
        self._file: str | None = None  # the usearch file the graph is a view of
        self._rep = self._dup_ptr = self._dup_ids = None
        if self.hnsw is not None or self.params.use_usearch(self.n):
            if distinct is None:
                from .build.distinct import distinct_rows
                distinct = distinct_rows(self.vectors)
            self._rep, self._dup_ptr, self._dup_ids = distinct
        if self.hnsw is None and self.params.use_usearch(self.n):
            self.hnsw = _usearch_index(self.dim, self.params)
            from .mmaps import release
            for b in range(0, self._rep.shape[0], _ADD_BLOCK):
                rep = self._rep[b:b + _ADD_BLOCK]
                self.hnsw.add(np.arange(b, b + rep.shape[0], dtype=np.uint64),
                              np.ascontiguousarray(self.vectors[rep]), threads=self.params.threads)
                release(self.vectors)
        if self.hnsw is not None and len(self.hnsw) != self._rep.shape[0]:
            raise ValueError(f"usearch index holds {len(self.hnsw)} vectors, the matrix has "
                             f"{self._rep.shape[0]} distinct rows")

    def extended(self, vectors: np.ndarray, params: AnnParams | None = None) -> "VectorIndex":
        """An index over ``vectors`` = this index's rows followed by new ones (``add``): the
        HNSW graph is copied and only the new distinct rows are inserted (distinct ids are
        in order of first occurrence, so the old ones keep theirs). Anything else (exact
        back end, other rows in front) builds a new index."""
        params = params or self.params
        v = np.asarray(vectors)
        n_old = self.n
        probe = self._rep[np.linspace(0, self._rep.shape[0] - 1, 64).astype(np.int64)] \
            if self._rep is not None and self._rep.shape[0] else np.zeros(0, np.int64)
        if (self.hnsw is None or not params.use_usearch(v.shape[0]) or v.shape[0] < n_old
                or not np.array_equal(v[probe], self.vectors[probe])):  # the same rows in front
            return VectorIndex(vectors, params)
        from .build.distinct import distinct_rows
        d = distinct_rows(v)
        old = self._rep.shape[0]
        if d.rep.shape[0] < old or not np.array_equal(d.rep[:old], self._rep):
            return VectorIndex(vectors, params, distinct=d)
        if self._file is not None:  # read the file into memory: copying the view would
            from usearch.index import Index  # also leave all its mapped pages resident
            hnsw = Index.restore(self._file, view=False)
        else:
            hnsw = self.hnsw.copy()
        for b in range(old, d.rep.shape[0], _ADD_BLOCK):
            rep = d.rep[b:b + _ADD_BLOCK]
            hnsw.add(np.arange(b, b + rep.shape[0], dtype=np.uint64), np.ascontiguousarray(v[rep]),
                     threads=params.threads)
        return VectorIndex(vectors, params, _hnsw=hnsw, distinct=d)

    def distinct(self):
        """The distinct-row structure (``build.distinct.DistinctRows``) or None (exact)."""
        if self._rep is None:
            return None
        from .build.distinct import DistinctRows
        return DistinctRows(self._rep, self._dup_ptr, self._dup_ids)

    @property
    def n(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def backend(self) -> str:
        return "usearch" if self.hnsw is not None else "exact"

    # ------------------------------------------------------------------ search
    def search(self, q: np.ndarray, k: int, exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` rows for one query (1-d -> ids int64 (k',), sims float32 (k',)) or a
        batch (2-d (m, d) -> (m, k') each), k' = min(k, n). ``exact`` forces exact search."""
        q = np.asarray(q, dtype=np.float32)
        single = q.ndim == 1
        Q = np.ascontiguousarray(q.reshape(1, -1) if single else q)
        if Q.ndim != 2 or Q.shape[1] != self.dim:
            raise ValueError(f"query must have dimension {self.dim}, got shape {q.shape}")
        if isinstance(k, bool) or int(k) != k or k < 0:
            raise ValueError(f"k must be a non-negative integer, got {k!r}")
        if not all_finite(Q):
            raise ValueError("query holds NaN or inf")
        k = min(int(k), self.n)
        if k == 0:
            ids, sims = (np.zeros((Q.shape[0], 0), np.int64), np.zeros((Q.shape[0], 0), np.float32))
        elif self.hnsw is None or exact:
            ids, sims = self._exact(Q, k)
        else:
            ids, sims = self._approx(Q, k)
        return (ids[0], sims[0]) if single else (ids, sims)

    def _exact(self, Q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        ids = np.empty((Q.shape[0], k), np.int64)
        sims = np.empty((Q.shape[0], k), np.float32)
        exact_topk(self.vectors, Q, k, ids, sims)
        return ids, sims

    def _approx(self, Q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """HNSW over the distinct rows (identical vectors, e.g. entity states sharing one
        description, would crowd the graph and wreck recall), then every row equal to a
        hit, rescored exactly; the k best rows always lie among the k best distinct ones."""
        n_distinct = self._rep.shape[0]
        kd = min(k, n_distinct)
        m = self.hnsw.search(Q, kd, threads=1 if Q.shape[0] == 1 else self.params.threads)
        keys = np.asarray(m.keys, dtype=np.int64).reshape(Q.shape[0], -1)
        ids = np.empty((Q.shape[0], k), np.int64)
        sims = np.empty((Q.shape[0], k), np.float32)
        for i in range(Q.shape[0]):
            if expand_rescore_topk(keys[i], n_distinct, kd, np.asarray(self._dup_ptr),  # no memmap:
                                   np.asarray(self._dup_ids), self.vectors,  # typed in C
                                   Q[i], k, ids[i], sims[i]) < kd:
                # HNSW returned fewer than k distinct hits: answer this row exactly
                e_ids, e_s = self._exact(Q[i:i + 1], k)
                ids[i], sims[i] = e_ids[0], e_s[0]
        return ids, sims

    # --------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike) -> bool:
        """Write the usearch index to ``path``; returns False (nothing written) for exact.
        An index that is a view of a file (:meth:`spilled`, :meth:`load`) hard-links it."""
        if self.hnsw is None:
            return False
        if self._file is not None:
            try:
                os.link(self._file, path)
                return True
            except OSError:
                pass
        self.hnsw.save(os.fspath(path))
        return True

    def spilled(self, path: str | os.PathLike) -> "VectorIndex":
        """The same index with its HNSW graph written to ``path`` and memory-mapped from
        there (a build holds no graph in memory between building and saving)."""
        if self.hnsw is None:
            return self
        self.hnsw.save(os.fspath(path))
        return VectorIndex.load(self.vectors, path, self.params, view=True,
                                distinct=self.distinct())

    @classmethod
    def load(cls, vectors: np.ndarray, path: str | os.PathLike | None,
             params: AnnParams | None = None, view: bool = True,
             distinct=None) -> "VectorIndex":
        """Rebuild around ``vectors``; ``path`` (a saved usearch file) is memory-mapped
        when ``view`` (read-only, no copy) or read into memory; None means exact."""
        if path is None:
            p = params or AnnParams()
            return cls(vectors, AnnParams(**{**p.__dict__, "backend": "exact"}))
        from usearch.index import Index

        from .hnsw_check import check_hnsw  # usearch trusts its files: check them first
        check_hnsw(path, np.shape(vectors)[1], None if distinct is None else len(distinct[0]))
        hnsw = Index.restore(os.fspath(path), view=view)
        if hnsw is None:
            raise ValueError(f"{path}: not a usearch index file")
        p = params or AnnParams()
        hnsw.expansion_search = p.expansion_search
        out = cls(vectors, AnnParams(**{**p.__dict__, "backend": "usearch"}), _hnsw=hnsw,
                  distinct=distinct)
        out._file = os.fspath(path) if view else None
        return out
