"""Checksums of the files of an index generation (docs/architecture.md §3, "Checksums").

A format-4 manifest lists ``files``: the sha256 of every file of its generation. Saves
since issue 13 also record ``xxh3_128``: the same files, XXH3 128-bit (``xxhash``), and a
verified load checks those (~10x less CPU than sha256: ~30 ms vs ~200 ms for the
309 MB 2Wiki index, benchmarks/README.md). XXH3 detects corruption (flipped bits,
truncation, a file from another build) as well as sha256 does; it is not a defence
against someone forging files, which sha256 in the same manifest would not be either.
Manifests without ``xxh3_128`` (saved earlier) are verified with sha256, as before;
``hyperrag upgrade`` adds the fast checksums to such an index. Older versions of this
library ignore the extra key and keep verifying sha256, so the format stays 4.

Files are read with ``readinto`` into one small buffer, not memory-mapped: hashing adds
nothing to the resident set.
"""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from .errors import IndexCorruptedError

FAST = "xxh3_128"  #: manifest key of the fast checksums
_BLOCK = 1 << 20


def _digest(path: Path, h) -> str:
    buf = bytearray(_BLOCK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def file_digest(path: str | os.PathLike, algorithm: str) -> str:
    """Hex digest of a file: ``"sha256"`` or ``"xxh3_128"``."""
    if algorithm == FAST:
        import xxhash
        return _digest(Path(path), xxhash.xxh3_128())
    if algorithm == "sha256":
        return _digest(Path(path), hashlib.sha256())
    raise ValueError(f"unknown checksum {algorithm!r}")


def manifest_checksums(root: Path, files: Iterable[Path]) -> dict[str, dict[str, str]]:
    """``{"files": {rel: sha256}, "xxh3_128": {rel: xxh3}}`` of ``files`` under ``root``."""
    rels = {p.relative_to(root).as_posix(): p for p in sorted(files)}
    return {"files": {r: file_digest(p, "sha256") for r, p in rels.items()},
            FAST: {r: file_digest(p, FAST) for r, p in rels.items()}}


def verify_files(root: Path, manifest: Mapping[str, Any]) -> str:
    """Check every file the manifest lists against its checksum (``xxh3_128`` when the
    manifest has them, else sha256); IndexCorruptedError names the first bad file.
    Returns the algorithm used."""
    want = manifest["files"]
    fast = manifest.get(FAST)
    if fast is not None:
        if not isinstance(fast, dict) or fast.keys() != want.keys():
            raise IndexCorruptedError(f"{root / 'manifest.json'}: its {FAST} checksums do not "
                                      f"list the same files as its sha256 ones")
        algorithm, want = FAST, fast
    else:
        algorithm = "sha256"
    rels = sorted(want, key=lambda r: -(root / r).stat().st_size)
    for rel, got in zip(rels, _map(lambda r: file_digest(root / r, algorithm), rels, algorithm)):
        if got != want[rel]:
            raise IndexCorruptedError(
                f"{root / rel}: {algorithm} does not match the manifest; the file is "
                f"corrupted, rebuild or restore the index")
    return algorithm


def _map(fn: Callable[[str], str], rels: list[str], algorithm: str):
    """XXH3 outruns reading the page cache: one thread. sha256 (hashlib releases the GIL)
    is hashed on every core."""
    workers = 1 if algorithm == FAST else max(1, min(len(rels), os.cpu_count() or 1))
    if workers == 1:
        return map(fn, rels)
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(fn, rels))


class Verification:
    """:func:`verify_files` on a thread of its own (reading and XXH3 release the GIL), so
    a load parses and validates the other files meanwhile; :meth:`result` joins it and
    raises what it raised."""

    def __init__(self, root: Path, manifest: Mapping[str, Any]) -> None:
        self._out: str | BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(root, manifest),
                                        name="hyperrag-verify", daemon=True)
        self._thread.start()

    def _run(self, root: Path, manifest: Mapping[str, Any]) -> None:
        try:
            self._out = verify_files(root, manifest)
        except BaseException as e:  # noqa: BLE001 - handed to the joining thread
            self._out = e

    def result(self) -> str:
        self._thread.join()
        if isinstance(self._out, BaseException):
            raise self._out
        return self._out  # type: ignore[return-value]
