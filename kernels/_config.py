"""The one place where Numba compile options are set (cache, nogil, fastmath, parallel).

``fastmath`` stays off: kernels must agree with their NumPy twins to 1e-9 in float64.
The one exception is the float32 dot products of candidate search (``dot_jit``): they
may reassociate their sums, which lets LLVM vectorise the reduction; their error bound
is tested (tests/test_dense_kernels.py).
Set ``HYPERRAG_NO_CACHE=1`` to disable on-disk caching (e.g. on a read-only install).
Numba keys a cached kernel on its own file only, so a kernel whose callee changed in
another file of this folder would load the stale machine code (``stitch_query`` kept the
previous ``ppr_local`` push); the cache locators registered below key every kernel of this
folder on all of its source files instead (:func:`folder_stamp`).
With ``NUMBA_BOUNDSCHECK=1`` nothing is cached either: Numba's cache key does not hold the
bounds-check flag, so checked code written to the cache was later loaded, and run
slower, by unchecked processes.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numba
from numba.core import caching

CACHE = os.environ.get("HYPERRAG_NO_CACHE", "") == "" and not numba.config.BOUNDSCHECK
_FOLDER = Path(__file__).resolve().parent
_FOLDER_STR = str(_FOLDER)
_stamps: dict = {}
_ours: dict[str, bool] = {}  # folder of a kernel's file -> is this folder
_ensured: set[str] = set()  # cache folders checked writable by this process


def folder_stamp(folder: Path = _FOLDER) -> bytes:
    """sha256 over the names and contents of a folder's .py files (memoised on their sizes
    and mtimes): what every cached kernel of this folder is keyed on. This folder's is
    computed once per process (every kernel asks, as it is defined): the sources the
    process imported, which are what it compiles."""
    if folder is _FOLDER:
        if _FOLDER not in _stamps:
            _stamps[_FOLDER] = folder_stamp(Path(_FOLDER_STR))
        return _stamps[_FOLDER]
    with os.scandir(folder) as it:
        files = sorted((e.name, e.stat()) for e in it if e.name.endswith(".py") and e.is_file())
    key = (str(folder), *((n, st.st_size, st.st_mtime_ns) for n, st in files))
    if key not in _stamps:
        h = hashlib.sha256()
        for n, _ in files:
            h.update(n.encode() + b"\0" + (Path(folder) / n).read_bytes() + b"\0")
        _stamps[key] = h.digest()
    return _stamps[key]


def _folder_locator(base):
    """``base`` (one of Numba's cache locators) for the kernels of this folder only,
    keyed on :func:`folder_stamp`."""
    class Locator(base):
        def get_source_stamp(self):
            return folder_stamp()

        def ensure_cache_path(self):
            """Numba's check (the folder made, a file written in it), once per folder
            and process instead of once per kernel."""
            path = self.get_cache_path()
            if path not in _ensured:
                super().ensure_cache_path()
                _ensured.add(path)

        @classmethod
        def from_function(cls, py_func, py_file):
            folder = os.path.dirname(py_file)
            if folder not in _ours:  # once per folder (this one, or a link to it)
                _ours[folder] = folder == _FOLDER_STR or Path(folder).resolve() == _FOLDER
            return super().from_function(py_func, py_file) if _ours[folder] else None
    Locator.__name__ = Locator.__qualname__ = f"HyperragKernels{base.__name__}"
    return Locator


if CACHE and not any(c.__name__.startswith("HyperragKernels")
                     for c in caching.CacheImpl._locator_classes):
    caching.CacheImpl._locator_classes[:0] = [
        _folder_locator(c) for c in (caching.UserProvidedCacheLocator,
                                     caching.InTreeCacheLocator, caching.UserWideCacheLocator)]

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
