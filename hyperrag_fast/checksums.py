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

The manifest itself is sealed (since issue 24): ``manifest.xxh3`` beside it holds the
XXH3-128 of its bytes, checked by a verified load before the manifest is parsed
(:func:`check_seal`). Generations saved earlier have no seal and are read as before (their
manifest checked by shape only); ``hyperrag upgrade`` seals them.
"""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Mapping

import numpy as np

from .errors import IndexCorruptedError

FAST = "xxh3_128"  #: manifest key of the fast checksums
SEAL = "manifest.xxh3"  #: the file beside ``manifest.json`` holding its XXH3-128
_BLOCK = 1 << 20


def _digest(path: Path, h, finite: bool = False) -> tuple[str, bool | None]:
    """(hex digest, finite) of a file. With ``finite`` the float32 data of a .npy file is
    checked block by block as it is hashed (True / False: every value finite or not;
    None: could not tell, e.g. not a .npy file); else the second part is None."""
    buf = bytearray(_BLOCK)
    view = memoryview(buf)
    ok: bool | None = True if finite else None
    pos, data = 0, -1
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
            if ok:
                if pos == 0:
                    data = _npy_data_offset(view[:n])
                lo = max(data - pos, 0)
                if data < 0 or (pos + lo - data) % 4:  # not .npy, or a short read split a value
                    ok = None
                elif n - lo >= 4:
                    a = np.frombuffer(view[lo:n - (n - lo) % 4], dtype="<f4")
                    ok = bool(np.isfinite(a).all())
            pos += n
    return h.hexdigest(), ok


def _npy_data_offset(head: memoryview) -> int:
    """Offset of the data of a .npy file that starts with ``head`` (-1: not .npy)."""
    b = bytes(head[:12])
    if len(b) < 12 or b[:6] != b"\x93NUMPY":
        return -1
    size = (int.from_bytes(b[8:10], "little") + 10 if b[6] == 1
            else int.from_bytes(b[8:12], "little") + 12)
    return size if size % 4 == 0 else -1


def file_digest(path: str | os.PathLike, algorithm: str) -> str:
    """Hex digest of a file: ``"sha256"`` or ``"xxh3_128"``."""
    return scan_file(path, algorithm)[0]


def scan_file(path: str | os.PathLike, algorithm: str,
              finite: bool = False) -> tuple[str, bool | None]:
    """(hex digest, finite) of a file in one pass: with ``finite`` a .npy file's float32
    values are checked for NaN / inf as they are hashed (True / False; None: could not
    tell, e.g. not a .npy file); else the second part is None."""
    if algorithm == FAST:
        import xxhash
        return _digest(Path(path), xxhash.xxh3_128(), finite)
    if algorithm == "sha256":
        return _digest(Path(path), hashlib.sha256(), finite)
    raise ValueError(f"unknown checksum {algorithm!r}")


def seal_text(manifest_bytes: bytes) -> str:
    """The content of ``manifest.xxh3`` for a manifest of these bytes."""
    import xxhash
    return xxhash.xxh3_128_hexdigest(manifest_bytes) + "\n"


def write_manifest(gen: Path, manifest: Mapping[str, Any]) -> list[Path]:
    """Write ``manifest.json`` and its seal into generation ``gen``; returns both paths
    (to fsync)."""
    import json
    data = json.dumps(manifest, indent=2, ensure_ascii=False).encode("utf-8")
    (gen / "manifest.json").write_bytes(data)
    (gen / SEAL).write_text(seal_text(data), encoding="ascii")
    return [gen / "manifest.json", gen / SEAL]


def check_seal(gen: Path, manifest_bytes: bytes) -> None:
    """IndexCorruptedError unless the manifest of generation ``gen`` (these bytes)
    matches its seal; a generation without one (saved before issue 24) passes."""
    f = gen / SEAL
    try:
        if os.path.islink(f):
            raise IndexCorruptedError(f"{f}: is a symbolic link; refusing to follow it")
        with open(f, "rb") as fh:
            want = fh.read(64)
    except FileNotFoundError:
        return
    except OSError as e:
        raise IndexCorruptedError(f"{f}: unreadable ({e.strerror or type(e).__name__})") from None
    if want.decode("ascii", "replace") != seal_text(manifest_bytes):
        raise IndexCorruptedError(f"{gen / 'manifest.json'}: does not match {SEAL}; the "
                                  f"manifest is corrupted, rebuild or restore the index")


def manifest_checksums(root: Path, files: Iterable[Path]) -> dict[str, dict[str, str]]:
    """``{"files": {rel: sha256}, "xxh3_128": {rel: xxh3}}`` of ``files`` under ``root``."""
    rels = {p.relative_to(root).as_posix(): p for p in sorted(files)}
    return {"files": {r: file_digest(p, "sha256") for r, p in rels.items()},
            FAST: {r: file_digest(p, FAST) for r, p in rels.items()}}


def verify_files(root: Path, manifest: Mapping[str, Any],
                 finite: Collection[str] = (), tolerate: Collection[str] = (),
                 damaged: set[str] | None = None) -> tuple[str, set[str]]:
    """Check every file the manifest lists against its checksum (``xxh3_128`` when the
    manifest has them, else sha256); IndexCorruptedError names the first bad file.
    The float32 .npy files named in ``finite`` are also checked for NaN / inf as they are
    read (after their checksum: a mismatch is reported first). A mismatching file named
    in ``tolerate`` is added to ``damaged`` instead. Returns the algorithm and the files
    of ``finite`` that could not be checked that way (scan them yourself)."""
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
    unchecked = {r for r in finite if r not in want}
    for rel, (got, ok) in zip(rels, _map(
            lambda r: scan_file(root / r, algorithm, r in finite), rels, algorithm)):
        if got != want[rel] and rel in tolerate and damaged is not None:
            damaged.add(rel)
        elif got != want[rel]:
            raise IndexCorruptedError(
                f"{root / rel}: {algorithm} does not match the manifest; the file is "
                f"corrupted, rebuild or restore the index")
        if rel in finite and ok is None:
            unchecked.add(rel)
        elif ok is False:
            raise IndexCorruptedError(f"{root / rel}: holds NaN or inf; the index is "
                                      f"corrupted, rebuild or restore it")
    return algorithm, unchecked


def _map(fn: Callable[[str], Any], rels: list[str], algorithm: str):
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

    def __init__(self, root: Path, manifest: Mapping[str, Any],
                 finite: Collection[str] = (), tolerate: Collection[str] = ()) -> None:
        self._out: Any = None
        self.damaged: set[str] = set()  # files of ``tolerate`` that failed (after result())
        self._thread = threading.Thread(target=self._run, args=(root, manifest, finite, tolerate),
                                        name="hyperrag-verify", daemon=True)
        self._thread.start()

    def _run(self, root: Path, manifest: Mapping[str, Any], finite: Collection[str],
             tolerate: Collection[str]) -> None:
        try:
            self._out = verify_files(root, manifest, finite, tolerate, self.damaged)
        except BaseException as e:  # noqa: BLE001 - handed to the joining thread
            self._out = e

    def result(self) -> tuple[str, set[str]]:
        self._thread.join()
        if isinstance(self._out, BaseException):
            raise self._out
        return self._out  # type: ignore[return-value]
