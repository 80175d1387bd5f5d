"""The one place where Numba compile options are set (cache, nogil, fastmath, parallel).

``fastmath`` stays off: kernels must agree with their NumPy twins to 1e-9 in float64.
The one exception is the float32 dot products of candidate search (``dot_jit``): they
may reassociate their sums, which lets LLVM vectorise the reduction; their error bound
is tested (tests/test_dense_kernels.py).
Set ``HYPERRAG_NO_CACHE=1`` to disable on-disk caching (e.g. on a read-only install).
With ``NUMBA_BOUNDSCHECK=1`` nothing is cached either: Numba's cache key does not hold the
bounds-check flag, so checked code written to the cache was later loaded, and run
slower, by unchecked processes.
"""
from __future__ import annotations

import os

import numba

CACHE = os.environ.get("HYPERRAG_NO_CACHE", "") == "" and not numba.config.BOUNDSCHECK

#: options of every query-path kernel: cached, GIL released, IEEE-exact maths.
OPTIONS = dict(cache=CACHE, nogil=True, fastmath=False, error_model="numpy")
#: options of kernels that run once at index time over large arrays.
PARALLEL_OPTIONS = dict(OPTIONS, parallel=True)

#: float32 dot products of exact candidate search: reassociation only (no contraction,
#: no finite-math assumptions), so |s - exact| <= d * 2**-24 * sum_j |v_j q_j| + rounding.
DOT_OPTIONS = dict(OPTIONS, fastmath={"reassoc"})

jit = numba.njit(**OPTIONS)
dot_jit = numba.njit(**DOT_OPTIONS)
#: small helpers called per element from hot loops: inlined in Numba IR, so the arrays they
#: take cost no reference counting per call
inline_jit = numba.njit(**OPTIONS, inline="always")
pjit = numba.njit(**PARALLEL_OPTIONS)
