"""The one place where Numba compile options are set (cache, nogil, fastmath, parallel).

``fastmath`` stays off: kernels must agree with their NumPy twins to 1e-9 in float64.
Set ``HYPERRAG_NO_CACHE=1`` to disable on-disk caching (e.g. on a read-only install).
"""
from __future__ import annotations

import os

import numba

CACHE = os.environ.get("HYPERRAG_NO_CACHE", "") == ""

#: options of every query-path kernel: cached, GIL released, IEEE-exact maths.
OPTIONS = dict(cache=CACHE, nogil=True, fastmath=False, error_model="numpy")
#: options of kernels that run once at index time over large arrays.
PARALLEL_OPTIONS = dict(OPTIONS, parallel=True)

jit = numba.njit(**OPTIONS)
pjit = numba.njit(**PARALLEL_OPTIONS)
