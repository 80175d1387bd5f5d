"""Validation of a saved usearch HNSW file before usearch opens it (docs/architecture.md §3).

usearch trusts its files: a flipped byte in a graph file read by ``Index.restore`` sends
its search through an out-of-range neighbour slot or a node offset past the end of the
mapping (a segfault), or raises ``RuntimeError``. :func:`check_hnsw` parses the whole
layout usearch 2.x writes (``index_dense_gt::save``, checked against the files of the
installed version) and raises :class:`IndexCorruptedError` unless every field usearch
follows is consistent:

* the vector matrix: ``rows`` and ``cols`` (uint32, or uint64) then ``rows * cols`` bytes;
* the 64-byte dense header: magic ``usearch``, major version 2, cosine metric, uint64
  keys, uint32 slots, a known scalar kind whose size times ``dimensions`` is ``cols``,
  ``count_present == rows``, nothing deleted, not multi-vector;
* the graph header (uint64 ``size``, ``connectivity``, ``connectivity_base``,
  ``max_level``, ``entry_slot``), ``size`` int16 levels, then ``size`` nodes: key
  (uint64) and level (int16), then per level 0..level a uint32 neighbour count and
  ``connectivity_base`` (level 0) or ``connectivity`` uint32 slots;
* the file size equal to the sum of those parts; levels in ``[0, max_level]``, the entry
  slot on the top level, each node's own level equal to the levels block, keys a
  permutation of ``0..size-1``, counts within capacity, and every listed neighbour at
  level L a slot in ``[0, size)`` whose level is at least L (usearch reads its
  level-L list next).

Vectorised NumPy over a read-only memory map: O(size x connectivity_base).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .errors import IndexCorruptedError

MAGIC = b"usearch"
_HEAD = 64  # the dense header's size
_CORE = 40  # graph header: five uint64
_NODE_HEAD = 10  # key (uint64) + level (int16)
_SCALAR_BYTES = {10: 8, 11: 4, 12: 2, 4: 2, 23: 1}  # f64, f32, f16, bf16, i8
_METRIC_COS, _KEY_U64, _SLOT_U32 = ord("c"), 14, 15
_MAX_CONNECTIVITY = 1 << 12
_BLOCK = 4096  # nodes gathered at once (bounded temporaries)


class _Bad(Exception):
    pass


def check_hnsw(path: str | os.PathLike, dim: int, rows: int | None = None) -> int:
    """Raise :class:`IndexCorruptedError` naming ``path`` unless it is a consistent usearch
    file of ``dim``-dimensional vectors (and ``rows`` of them, when given); returns the
    number of nodes."""
    try:
        return _check(Path(path), int(dim), rows)
    except _Bad as e:
        raise IndexCorruptedError(f"{path}: {e}; the usearch graph is corrupted, rebuild or "
                                  f"restore the index") from None
    except OSError as e:
        raise IndexCorruptedError(f"{path}: unreadable usearch graph "
                                  f"({e.strerror or type(e).__name__})") from None


def _u64(b: np.ndarray, pos: int) -> int:
    return int(np.frombuffer(b[pos:pos + 8].tobytes(), "<u8")[0])


def _check(path: Path, dim: int, rows: int | None) -> int:
    size_on_disk = path.stat().st_size
    if size_on_disk < 8 + _HEAD + _CORE:
        raise _Bad(f"{size_on_disk} bytes, too short for a usearch file")
    b = np.asarray(np.memmap(path, dtype=np.uint8, mode="r"))  # a plain view: cheap indexing
    try:
        return _check_buffer(b, size_on_disk, dim, rows)
    finally:
        del b


def _matrix(b: np.ndarray, total: int) -> tuple[int, int, int]:
    """(rows, cols, offset of the dense header): the matrix has uint32 or uint64 sizes."""
    for width, dtype in ((4, "<u4"), (8, "<u8")):
        r, c = (int(x) for x in np.frombuffer(b[:2 * width].tobytes(), dtype))
        h = 2 * width + r * c
        if h + _HEAD + _CORE <= total and b[h:h + 7].tobytes() == MAGIC:
            return r, c, h
    raise _Bad("no usearch header after the vector matrix")


def _check_buffer(b: np.ndarray, total: int, dim: int, rows: int | None) -> int:
    m_rows, m_cols, h = _matrix(b, total)
    head = b[h:h + _HEAD].tobytes()
    major = int.from_bytes(head[7:9], "little")
    metric, scalar, key, slot = head[13], head[14], head[15], head[16]
    present, deleted, dims = (int.from_bytes(head[i:i + 8], "little") for i in (17, 25, 33))
    multi = head[41]
    if major != 2:
        raise _Bad(f"usearch format version {major}, expected 2")
    if metric != _METRIC_COS or key != _KEY_U64 or slot != _SLOT_U32 or multi not in (0, 1):
        raise _Bad("metric, key or slot kind differs from what this library writes")
    if multi or deleted:
        raise _Bad("multi-vector or deleted entries, which this library never writes")
    if scalar not in _SCALAR_BYTES:
        raise _Bad(f"unknown scalar kind {scalar}")
    if dims != dim or m_cols != dims * _SCALAR_BYTES[scalar]:
        raise _Bad(f"dimensions {dims} ({m_cols} bytes a row), expected {dim}")
    if present != m_rows or (rows is not None and present != rows):
        raise _Bad(f"{present} vectors in the header, {m_rows} in the matrix"
                   + (f", {rows} expected" if rows is not None else ""))
    c = h + _HEAD
    n, conn, base, max_level, entry = (_u64(b, c + 8 * i) for i in range(5))
    if n != present:
        raise _Bad(f"graph of {n} nodes over {present} vectors")
    if not (1 <= conn <= base <= _MAX_CONNECTIVITY):
        raise _Bad("graph header out of range (connectivity)")
    lv_at = c + _CORE
    if n == 0:  # an empty graph: max_level is -1
        if total != lv_at:
            raise _Bad(f"file size {total} bytes, its header describes {lv_at}")
        return 0
    if max_level > 64 or entry >= n:
        raise _Bad("graph header out of range (levels or entry slot)")
    if lv_at + 2 * n > total:
        raise _Bad("truncated levels block")
    levels = np.frombuffer(b[lv_at:lv_at + 2 * n].tobytes(), "<i2").astype(np.int64)
    if (levels.min() < 0 or levels.max() != max_level or levels[entry] != max_level):
        raise _Bad("node levels disagree with the graph header")
    base_bytes, up_bytes = 4 + 4 * base, 4 + 4 * conn
    sizes = _NODE_HEAD + base_bytes + levels * up_bytes
    start = lv_at + 2 * n
    offs = start + np.concatenate(([0], np.cumsum(sizes)[:-1]))
    if start + int(sizes.sum()) != total:
        raise _Bad(f"file size {total} bytes, its header describes "
                   f"{start + int(sizes.sum())}")
    keys = _u32_rows(b, offs, 2)
    keys = keys[:, 0].astype(np.uint64) | (keys[:, 1].astype(np.uint64) << np.uint64(32))
    if not np.array_equal(np.sort(keys), np.arange(n, dtype=np.uint64)):
        raise _Bad("node keys are not 0..n-1")
    own = b[offs + 8].astype(np.int64) | (b[offs + 9].astype(np.int64) << 8)
    if not np.array_equal(own.astype(np.uint16).astype(np.int16), levels):
        raise _Bad("a node's level differs from the levels block")
    for level in range(int(max_level) + 1):
        at = np.flatnonzero(levels >= level)
        pos = offs[at] + _NODE_HEAD + (0 if level == 0 else base_bytes + (level - 1) * up_bytes)
        cap = base if level == 0 else conn
        for i in range(0, at.shape[0], _BLOCK):
            p = pos[i:i + _BLOCK]
            count = _u32_rows(b, p, 1)[:, 0].astype(np.int64)
            if np.any(count > cap):
                raise _Bad(f"a node lists more than {cap} neighbours at level {level}")
            nb = _u32_rows(b, p + 4, cap)
            used = np.arange(cap, dtype=np.int64)[None, :] < count[:, None]
            if np.any((nb >= n) & used) or (level and np.any(levels[nb[used]] < level)):
                raise _Bad(f"a neighbour slot at level {level} is out of range")
    return n


def _u32_rows(b: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` little-endian uint32 at each byte position ``pos`` (any alignment):
    rows of a one-byte-stride window view of the file, gathered in one indexing step."""
    nbytes = 4 * width
    if pos.size and int(pos.max()) + nbytes > b.shape[0]:
        raise _Bad("a node runs past the end of the file")
    win = np.lib.stride_tricks.as_strided(b, (max(b.shape[0] - nbytes + 1, 0), nbytes), (1, 1),
                                          writeable=False)
    return np.ascontiguousarray(win[pos]).view("<u4")
