"""Embedding vectors of an index build, on disk instead of in dicts (docs/architecture.md,
"Index build").

:class:`TextVectors` embeds each distinct text once: a text's 16-byte BLAKE2b digest maps
to a *code* naming where its vector lives (the table's own append-only float32 file, or
a row of an existing matrix such as the loaded index's ``node_vec`` during ``add``).
Kind matrices (``node_vec`` ...) are then written block by block by gathering codes, so
no step holds more than a block of vectors besides the memory maps.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from ..mmaps import release

_SRC_SHIFT = 40
_ROW_MASK = (1 << _SRC_SHIFT) - 1
GATHER_BLOCK = 8192  # rows per write block


def digest(text: str) -> bytes:
    """The table key of a text: BLAKE2b-128 of its UTF-8 bytes."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def source_codes(source: int, n: int) -> np.ndarray:
    """Codes of rows ``0..n-1`` of table source ``source``."""
    return (np.int64(source) << np.int64(_SRC_SHIFT)) | np.arange(n, dtype=np.int64)


class TextVectors:
    """Distinct text -> vector, backed by ``dir/vectors.f32`` (rows appended in order).

    ``sources`` are read-only matrices whose rows can stand for texts (``add``/``delete``
    reuse the loaded index's vectors): register them with :meth:`add_source` and
    :meth:`know`. Codes are int64: ``source << 40 | row``; source 0 is the table file.
    """

    def __init__(self, directory: str | os.PathLike, dim: int) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dim = int(dim)
        self.path = self.dir / "vectors.f32"
        self._f = open(self.path, "wb")
        self.n = 0          # rows written to the file
        self.reserved = 0   # rows assigned (written rows + rows being embedded)
        self._code: dict[bytes, int] = {}
        self._sources: list[np.ndarray | None] = [None]
        self._map: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._code)

    def add_source(self, matrix: np.ndarray) -> int:
        if matrix.ndim != 2 or matrix.shape[1] != self.dim:
            raise ValueError(f"source matrix has shape {matrix.shape}, expected (n, {self.dim})")
        self._sources.append(matrix)
        return len(self._sources) - 1

    def know(self, texts: Sequence[str], source: int) -> None:
        """Row i of ``source`` is the vector of ``texts[i]`` (first occurrence kept)."""
        base = source << _SRC_SHIFT
        for i, t in enumerate(texts):
            self._code.setdefault(digest(t), base | i)

    def has(self, text: str) -> bool:
        """Whether ``text`` already has a code (embedded, reserved or a source row)."""
        return digest(text) in self._code

    def reserve(self, texts: Sequence[str]) -> tuple[np.ndarray, list[int]]:
        """Codes of ``texts``; texts never seen get the next file rows, in order. Returns
        the codes and the positions of those new (distinct) texts, which the caller
        embeds and :meth:`append` s in that order."""
        codes = np.empty(len(texts), np.int64)
        new: list[int] = []
        for i, t in enumerate(texts):
            d = digest(t)
            c = self._code.get(d)
            if c is None:
                c = self._code[d] = self.reserved
                self.reserved += 1
                new.append(i)
            codes[i] = c
        return codes, new

    def append(self, vectors: np.ndarray) -> None:
        """Write the vectors of the next reserved rows (in reservation order)."""
        v = np.ascontiguousarray(vectors, dtype=np.float32)
        if v.ndim != 2 or v.shape[1] != self.dim:
            raise ValueError(f"vectors have shape {v.shape}, expected (n, {self.dim})")
        if self.n + v.shape[0] > self.reserved:
            raise ValueError("more vectors appended than rows reserved")
        if not np.isfinite(v).all():
            raise ValueError("the embedder returned NaN or inf")
        self._f.write(v.tobytes())
        self.n += v.shape[0]
        self._map = None

    def _table(self) -> np.ndarray:
        """The rows written so far (reserved rows still to come are not readable)."""
        if self._map is None:
            self._f.flush()
            self._map = (np.memmap(self.path, np.float32, "r", shape=(self.n, self.dim))
                         if self.n else np.zeros((0, self.dim), np.float32))
        return self._map

    def gather(self, codes: np.ndarray) -> np.ndarray:
        """float32 (len(codes), dim): the vectors the codes name."""
        codes = np.asarray(codes, np.int64)
        out = np.empty((codes.shape[0], self.dim), np.float32)
        src = codes >> _SRC_SHIFT
        rows = codes & _ROW_MASK
        for s in np.unique(src):
            m = src == s
            mat = self._table() if s == 0 else self._sources[int(s)]
            out[m] = mat[rows[m]]
            release(mat)
        return out

    def write_npy(self, path: str | os.PathLike, codes: np.ndarray) -> None:
        """Write ``gather(codes)`` as a .npy file, one block at a time."""
        codes = np.asarray(codes, np.int64)
        if self.n != self.reserved:
            raise RuntimeError(f"{self.reserved - self.n} reserved rows were never embedded")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            np.lib.format.write_array_header_1_0(
                f, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
                    "fortran_order": False, "shape": (int(codes.shape[0]), self.dim)})
            for b in range(0, codes.shape[0], GATHER_BLOCK):
                f.write(self.gather(codes[b:b + GATHER_BLOCK]).tobytes())

    def close(self) -> None:
        """Close the file and drop the text index (the table is done once written)."""
        self._map = None
        self._code, self._sources = {}, [None]
        if not self._f.closed:
            self._f.close()
