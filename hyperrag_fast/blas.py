"""BLAS threads while a query runs (docs/architecture.md §3, "BLAS threads").

OpenBLAS workers busy-wait for a while after every threaded call: a query that threads a
matrix product burns a second core for nothing. :func:`query_blas` limits NumPy's BLAS to
``config.QUERY_BLAS_THREADS`` threads (threadpoolctl) while any query is inside it and
restores the process's count when the last one leaves, so concurrent queries never see a
restored count and a build run afterwards keeps every core.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from . import config

_lock = threading.Lock()
_inside = 0
_saved: list = []
_libs = None


def _blas_libs():
    global _libs
    if _libs is None:
        from threadpoolctl import ThreadpoolController  # imported by the first limited query
        _libs = ThreadpoolController().select(user_api="blas").lib_controllers
    return _libs


def _set(libs, counts) -> None:
    """Set each library's thread count from whichever thread holds ``_lock``: threadpoolctl
    lets only one thread set OpenBLAS's process-wide pool, so that claim is cleared around."""
    for lib, n in zip(libs, counts):
        clear = getattr(lib, "clear_controlling_thread", None)
        if n is None:
            continue
        if clear is not None:
            clear(force=True)
        lib.set_num_threads(n)
        if clear is not None:
            clear(force=True)


@contextmanager
def query_blas() -> Iterator[None]:
    """BLAS on at most ``config.QUERY_BLAS_THREADS`` threads inside the block (0: as set)."""
    global _inside, _saved
    threads = config.QUERY_BLAS_THREADS
    if threads <= 0:
        yield
        return
    with _lock:
        if _inside == 0:
            libs = _blas_libs()
            _saved = [lib.get_num_threads() for lib in libs]
            _set(libs, [None if s is None else min(s, threads) for s in _saved])
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0:
                _set(_blas_libs(), _saved)


@contextmanager
def blas_threads(threads: int) -> Iterator[None]:
    """BLAS on at most ``threads`` threads inside the block, for a build step whose own
    worker threads each call BLAS (restored after; not for use beside :func:`query_blas`)."""
    with _lock:
        libs = _blas_libs()
        saved = [lib.get_num_threads() for lib in libs]
        _set(libs, [None if s is None else min(s, threads) for s in saved])
    try:
        yield
    finally:
        with _lock:
            _set(libs, saved)
