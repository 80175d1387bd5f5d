"""New generations made of the live one's files (hard links) and something more
(docs/architecture.md §3, §7): the fast checksums and manifest seal of an older index
(``hyperrag upgrade``), and prebuilt structures published with the index they were built
from (``hyperrag build-methods``). Published as :func:`hyperrag_fast.publish.save_index`
publishes: under the writer lock, one CURRENT replace.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

from .checksums import FAST, SEAL, file_digest, manifest_checksums, verify_files
from .config import LOCK_TIMEOUT_S
from .errors import IndexCorruptedError, IndexMismatchError
from .publish import (_clean, _fsync_path, _kill_point, _link, _next_generation, _publish,
                      _remove_leftovers, _seal_and_sync, writer_lock)
from .store import _read_manifest_at, generation_dir


def upgrade_checksums(path: str | os.PathLike, timeout: float = LOCK_TIMEOUT_S) -> bool:
    """Give a format-4 index saved before issue 13 its ``xxh3_128`` checksums (fast
    verified loads) and one saved before issue 24 its manifest seal: every file is
    verified against its checksum first, then a new generation of hard links (copies
    where links fail) with the extended manifest is published as by :func:`save_index`.
    False (nothing written) when it has both already."""
    with writer_lock(path, timeout, create=False) as root:
        live = _clean(root)
        src = generation_dir(root)
        manifest = _read_manifest_at(src)
        if FAST in manifest and (src / SEAL).is_file():
            return False
        verify_files(src, manifest)
        pre = {r: h for v in manifest.get("prebuilt", {}).values() for r, h in v.items()}
        _verify_prebuilt(src, pre)
        gen = _next_generation(root)
        try:
            files = _link(src, gen, manifest["files"])
            sums = manifest_checksums(gen, files)
            if sums["files"] != manifest["files"]:  # changed between verifying and linking
                raise IndexCorruptedError(f"{src}: files changed while upgrading")
            files += _link(src, gen, pre)
            _verify_prebuilt(gen, pre)
            _seal_and_sync(gen, dict(manifest, **sums), files)
        except BaseException:
            shutil.rmtree(gen, ignore_errors=True)
            raise
        _publish(root, gen.name)
        _remove_leftovers(root, {gen.name, *([live] if live else [])})
    return True


def _verify_prebuilt(gen: Path, sums: dict[str, str]) -> None:
    for rel, want in sums.items():
        if file_digest(gen / rel, FAST) != want:
            raise IndexCorruptedError(f"{gen / rel}: {FAST} does not match the manifest; the "
                                      f"prebuilt structure is corrupted, rebuild it with "
                                      f"hyperrag build-methods")


# ------------------------------------------------------------------- prebuilt structures
class SyncBehind:
    """fsync, on one background thread, the files under the folders handed to
    :meth:`folder` as a build step finishes them, while it goes on making the next
    (a step's files are hundreds of MB: the seal's fsync then finds them written). Only
    a head start: :func:`publish_prebuilt` still fsyncs every file before publishing
    (docs/architecture.md §7)."""

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor
        self._pool, self._done = ThreadPoolExecutor(1), []

    def folder(self, d: Path) -> None:
        files = sorted(p for p in Path(d).rglob("*") if p.is_file())  # those written now
        self._done.append(self._pool.submit(lambda: [_fsync_path(p) for p in files]))

    def wait(self) -> None:
        """Wait for the syncs handed so far (their errors raised here)."""
        try:
            for f in self._done:
                f.result()
        finally:
            self._pool.shutdown()


def publish_prebuilt(path: str | os.PathLike, built_from: str | os.PathLike | None,
                     write: Callable[[Path], None], keep=(),
                     timeout: float = LOCK_TIMEOUT_S) -> Path:
    """Publish a new generation of index ``path``: the live generation's files (hard
    links), its prebuilt structures named in ``keep``, and the structures ``write(dir)``
    saves under ``dir`` (``<gen>/prebuilt/<structure>/``), every structure file listed
    with its xxh3_128 in the manifest's ``prebuilt`` (docs/architecture.md §7). The
    structures and the index they were built from are published together by the one
    CURRENT replace. ``built_from``: the generation directory the structures were built
    from (IndexMismatchError unless it is the live one; None: not checked). Returns the
    new generation directory."""
    with writer_lock(path, timeout, create=False) as root:
        live = _clean(root)
        _kill_point("cleaned")
        if live is None:
            raise FileNotFoundError(f"no index published at {path}: save the index there "
                                    f"first, then build its structures from it")
        src = root / live
        if built_from is not None and os.path.realpath(built_from) != os.path.realpath(src):
            raise IndexMismatchError(
                f"{path}: the index changed since these structures were built from it "
                f"(built from {Path(built_from).name}, live {live}); build them again")
        manifest = _read_manifest_at(src)
        old = manifest.get("prebuilt", {})
        gen = _next_generation(root)
        try:
            files = _link(src, gen, manifest["files"])
            write(gen / "prebuilt")
            new = {}
            d = gen / "prebuilt"
            for sub in sorted(d.iterdir()) if d.is_dir() else ():
                rels = sorted(p.relative_to(gen).as_posix() for p in sub.rglob("*")
                              if p.is_file())
                if not rels:
                    continue
                new[sub.name] = {r: file_digest(gen / r, FAST) for r in rels}
                files += [gen / r for r in rels]
            kept = [n for n in keep if n in old and n not in new]
            for name in kept:
                files += _link(src, gen, old[name])
                new[name] = dict(old[name])
                _verify_prebuilt(gen, old[name])
            _seal_and_sync(gen, dict(manifest, prebuilt=dict(sorted(new.items()))), files)
        except BaseException:
            shutil.rmtree(gen, ignore_errors=True)
            raise
        _kill_point("generation_written")
        _publish(root, gen.name)
        _remove_leftovers(root, {gen.name, live})
    return gen
