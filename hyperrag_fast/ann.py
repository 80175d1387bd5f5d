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
From its second exact search on, a matrix of at least ``config.EXACT_CODES_MIN_ROWS`` rows
is scanned as int8 codes, and only the rows their error bound keeps are rescored in
float32 (``kernels.dense.code_topk``): the same ids and similarities, a quarter of the
bytes (2Wiki chunks, 6,119 x 384, after a query embedding has flushed the cache: 0.55 ->
0.25 ms). Only where the kernel's float32 slack covers twice the worst rounding of both
dot products, d 2^-22 |v|_max |q| <= ``CODE_SLACK`` (unit vectors up to d = 419); other
queries are scanned in float32.

The read side only: building, extending, spilling and saving an HNSW graph live in
:mod:`hyperrag_fast.indexing.hnsw` (docs/architecture.md §1).
"""
from __future__ import annotations

import math
import os
from typing import NamedTuple

import numpy as np

from .config import BACKENDS, EXACT_CODES_MIN_ROWS, EXACT_THRESHOLD, AnnParams  # noqa: F401
from .kernels.dense import (CODE_SLACK, all_finite, code_topk, exact_topk, expand_rescore_topk,
                            quantize_rows)


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


class DistinctRows(NamedTuple):
    """The distinct rows of a matrix (made at build time, ``indexing.distinct``): ``rep``
    the first row of each distinct value, in order of first occurrence; the rows equal
    to distinct row j are ``ids[ptr[j]:ptr[j + 1]]`` (ascending)."""

    rep: np.ndarray
    ptr: np.ndarray
    ids: np.ndarray


class VectorIndex:
    """Top-k cosine search over ``vectors`` (n x d, float32, rows L2-normalised).

    ``vectors`` may be a read-only memory map; it is kept (not copied) because both
    back ends need it (exact search, rescoring). Thread-safe for concurrent searches.
    ``hnsw``: a usearch graph over the ``distinct`` rows (:meth:`load`, or built by
    :func:`hyperrag_fast.indexing.hnsw.build_vector_index`); without one the search is exact,
    and a matrix whose ``params`` ask for usearch raises (this module builds nothing).
    """

    def __init__(self, vectors: np.ndarray, params: AnnParams | None = None,
                 hnsw=None, distinct: DistinctRows | None = None,
                 file: str | None = None) -> None:
        v = np.asarray(vectors)
        if v.ndim != 2:
            raise ValueError(f"vectors must be a 2-d array, got shape {v.shape}")
        if v.dtype != np.float32:
            v = v.astype(np.float32)
        self.vectors = np.ascontiguousarray(v)
        self.params = params or AnnParams()
        self.hnsw = hnsw
        self.file = file  # the usearch file the graph is a view of (None: in memory)
        self._rep = self._dup_ptr = self._dup_ids = None
        self._codes: tuple[np.ndarray, np.ndarray, float] | None = None  # see codes()
        self._exact_searches = 0
        if hnsw is None and self.params.use_usearch(self.n):
            raise ValueError(f"{self.n} rows with backend {self.params.backend!r} need an HNSW "
                             "graph: build it with hyperrag_fast.indexing.hnsw.build_vector_index")
        if hnsw is not None:
            if distinct is None:
                raise ValueError("a usearch graph needs the distinct rows it was built over")
            self._rep, self._dup_ptr, self._dup_ids = distinct
            if len(hnsw) != self._rep.shape[0]:
                raise ValueError(f"usearch index holds {len(hnsw)} vectors, the matrix has "
                                 f"{self._rep.shape[0]} distinct rows")

    def distinct(self) -> DistinctRows | None:
        """The distinct-row structure the HNSW graph holds, or None (exact)."""
        if self._rep is None:
            return None
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
        codes = self.codes()
        if codes is None:
            exact_topk(self.vectors, Q, k, ids, sims)
            return ids, sims
        for i in range(Q.shape[0]):
            if self.codes_cover(Q[i]):
                code_topk(codes[0], codes[1], self.vectors, Q[i], k, ids[i], sims[i])
            else:
                exact_topk(self.vectors, Q[i:i + 1], k, ids[i:i + 1], sims[i:i + 1])
        return ids, sims

    def codes_cover(self, q: np.ndarray) -> bool:
        """True when the codes exist and their bound is exact for ``q`` (module docstring)."""
        if self._codes is None:
            return False
        q_norm = math.sqrt(float(np.einsum("i,i->", q, q, dtype=np.float64)))
        return self.dim * 2.0**-22 * self._codes[2] * q_norm <= CODE_SLACK

    def codes(self) -> tuple[np.ndarray, np.ndarray, float] | None:
        """The int8 codes, row scales and largest row norm exact search scans (module
        docstring), made at the second call on an exactly searched matrix (no HNSW graph)
        of at least ``EXACT_CODES_MIN_ROWS`` rows; else None. Concurrent first calls may
        each make them (the same arrays): no lock needed."""
        if self._codes is None and self.hnsw is None and self.n >= EXACT_CODES_MIN_ROWS > 0:
            self._exact_searches += 1
            if self._exact_searches >= 2:
                C = np.empty(self.vectors.shape, np.int8)
                scale = np.empty(self.n, np.float32)
                quantize_rows(self.vectors, C, scale)
                norm = float(np.sqrt(np.einsum("ij,ij->i", self.vectors, self.vectors,
                                               dtype=np.float64).max()))
                self._codes = (C, scale, norm)
        return self._codes

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

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, vectors: np.ndarray, path: str | os.PathLike | None,
             params: AnnParams | None = None, view: bool = True,
             distinct: DistinctRows | None = None) -> "VectorIndex":
        """Open around ``vectors``; ``path`` (a saved usearch file, with the ``distinct``
        rows saved beside it) is memory-mapped when ``view`` (read-only, no copy) or read
        into memory; None means exact."""
        p = params or AnnParams()
        if path is None:
            return cls(vectors, AnnParams(**{**p.__dict__, "backend": "exact"}))
        from usearch.index import Index

        from .hnsw_check import check_hnsw  # usearch trusts its files: check them first
        check_hnsw(path, np.shape(vectors)[1], None if distinct is None else len(distinct[0]))
        hnsw = Index.restore(os.fspath(path), view=view)
        if hnsw is None:
            raise ValueError(f"{path}: not a usearch index file")
        hnsw.expansion_search = p.expansion_search
        return cls(vectors, AnnParams(**{**p.__dict__, "backend": "usearch"}), hnsw=hnsw,
                   distinct=distinct, file=os.fspath(path) if view else None)
