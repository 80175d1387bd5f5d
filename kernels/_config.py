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
#: small per-element helpers that take the index / scratch tuples: inlined into the caller
#: at Numba-IR level, so the tuple items are taken once per kernel, not once per element
#: (an out-of-line call pays an atomic NRT incref/decref per array it takes from a tuple).
jit_inline = numba.njit(**OPTIONS, inline="always")
pjit = numba.njit(**PARALLEL_OPTIONS)
