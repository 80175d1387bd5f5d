"""Path safety of an index folder (docs/architecture.md §3): every file the store reads is
named by a manifest entry that stays inside its generation, and no entry, generation
folder or pointer is a symbolic link (a link could lead a read, or a writer's pruning,
outside the index folder). Error messages name the offending path, never what a file
holds.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Mapping

from .errors import IndexCorruptedError


def check_relative(rel: Any, where: Path) -> str:
    """``rel`` if it is a plain relative path inside a generation (``a/b.npy``), else
    IndexCorruptedError naming the manifest ``where`` (not the entry: it is file content)."""
    p = PurePosixPath(rel) if isinstance(rel, str) else None
    if (p is None or not rel or p.is_absolute() or "\\" in rel or "\0" in rel
            or any(part in ("", ".", "..") for part in rel.split("/"))):
        raise IndexCorruptedError(f"{where}: lists a file path outside its generation; "
                                  f"the index is corrupted or crafted, rebuild or restore it")
    return rel


def check_regular(path: Path, root: Path) -> None:
    """``path`` (under ``root``) is a regular file reached through no symbolic link."""
    cur = root
    for part in path.relative_to(root).parts:
        cur = cur / part
        try:
            mode = os.lstat(cur).st_mode
        except FileNotFoundError:
            raise IndexCorruptedError(f"{path}: listed in the manifest but missing") from None
        if stat.S_ISLNK(mode):
            raise IndexCorruptedError(f"{cur}: is a symbolic link; an index holds none "
                                      f"(refusing to follow it outside the index folder)")
    if not stat.S_ISREG(mode):
        raise IndexCorruptedError(f"{path}: listed in the manifest but not a regular file")


def check_manifest_paths(root: Path, manifest: Mapping[str, Any],
                         required: Iterable[str] = ()) -> None:
    """The manifest's ``files`` and ``ann_files`` name regular files inside generation
    ``root``; ``ann_files`` and ``required`` are among the checksummed ``files``."""
    mf = root / "manifest.json"
    files = manifest.get("files")
    ann = manifest.get("ann_files", {})
    if not isinstance(files, dict) or not isinstance(ann, dict):
        raise IndexCorruptedError(f"{mf}: 'files' and 'ann_files' must be objects")
    for rel in files:
        check_regular(root / check_relative(rel, mf), root)
    for rel in ann.values():
        if check_relative(rel, mf) not in files:
            raise IndexCorruptedError(f"{mf}: an ann_files entry has no checksum in 'files'; "
                                      f"the index is corrupted or crafted, rebuild or restore it")
    for rel in required:
        if rel not in files:
            raise IndexCorruptedError(f"{mf}: does not list {rel} in 'files'; the index is "
                                      f"corrupted or crafted, rebuild or restore it")


def is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False
