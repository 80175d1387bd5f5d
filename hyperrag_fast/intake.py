"""Honest intake: which files of a source are read, how their bytes are decoded, and
why the others are skipped; and the checks of a target path before any work.

Nothing is dropped silently. A folder is searched recursively; every file that is not
read is returned with a reason: unsupported type, binary content, hidden, a symlink
leaving the folder (followed only with ``follow_symlinks``), a broken symlink.
Text is decoded as UTF-8 (BOM stripped) unless another ``encoding`` is asked for;
undecodable bytes become U+FFFD and are counted in a per-file warning.
"""
from __future__ import annotations

import codecs
import logging
import os
import threading
from pathlib import Path

log = logging.getLogger(__name__)

TEXT_SUFFIXES = (".txt", ".md", ".markdown")
_SAMPLE = 8192  # bytes inspected for binary content
_TEXT_CONTROLS = set(b"\t\n\r\f\v\b\x1b")
_bad = threading.local()


def _count_errors(exc: UnicodeDecodeError):
    _bad.spans.append((exc.start, exc.end))
    return "\ufffd", exc.end


codecs.register_error("hyperrag-count", _count_errors)


class IntakeError(ValueError):
    """A source or target that cannot be used; the message is one line for the user."""


def check_encoding(encoding: str) -> str:
    """The codec name, or IntakeError for an unknown one."""
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise IntakeError(f"unknown text encoding {encoding!r}") from None


def decode(data: bytes, name: str, encoding: str = "utf-8") -> tuple[str, list[str]]:
    """Decode ``data`` (a UTF-8 BOM is dropped); each undecodable byte run becomes U+FFFD
    and the count goes into the returned warnings (one line, naming ``name``)."""
    enc = check_encoding(encoding)
    _bad.spans = []
    text = data.decode("utf-8-sig" if enc == "utf-8" else enc, errors="hyperrag-count")
    spans, _bad.spans = _bad.spans, []
    if not spans:
        return text, []
    n = sum(e - s for s, e in spans)
    label = "UTF-8" if enc == "utf-8" else enc
    hint = ("; Latin-1/Windows text? pass --encoding cp1252 (API: encoding='cp1252')"
            if enc == "utf-8" else "")
    return text, [f"{name}: {n} undecodable byte{'s' * (n != 1)} replaced with U+FFFD "
                  f"(non-{label} text, first at byte {spans[0][0]}){hint}"]


def binary_reason(data: bytes, encoding: str = "utf-8") -> str | None:
    """Why ``data`` looks binary (NUL or control bytes in its first 8 KiB), else None.
    Encodings that are not ASCII-compatible (UTF-16, ...) are not inspected."""
    if "\n".encode(check_encoding(encoding)) != b"\n":
        return None
    head = data[:_SAMPLE]
    if b"\0" in head:
        return "binary file (NUL bytes), not text"
    controls = sum(1 for b in head if b < 32 and b not in _TEXT_CONTROLS)
    if head and controls > 0.05 * len(head):
        return f"binary file ({controls} control bytes in the first {len(head)}), not text"
    return None


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except PermissionError:
        raise IntakeError(f"{path}: permission denied (cannot read it)") from None


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def scan_folder(root: Path, follow_symlinks: bool = False
                ) -> tuple[list[Path], list[tuple[str, str]]]:
    """The text files under ``root`` (sorted by relative POSIX path) and the entries
    skipped, as ``(relative path, reason)``. Symlinks that resolve inside ``root`` are
    read as files (folders: not entered, their files are read from where they are);
    leaving ``root``, they are skipped unless ``follow_symlinks``."""
    real_root = root.resolve()
    files: list[Path] = []
    skipped: list[tuple[str, str]] = []
    seen_dirs = {real_root}
    if not os.access(root, os.R_OK | os.X_OK):
        raise IntakeError(f"{root}: permission denied (cannot list the folder)")

    def walk(d: Path) -> None:
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except PermissionError:
            raise IntakeError(f"{d}: permission denied (cannot list the folder)") from None
        for e in entries:
            p = Path(e.path)
            rel = p.relative_to(root).as_posix()
            if e.name.startswith("."):
                skipped.append((rel, "hidden folder, not searched" if e.is_dir()
                                else "hidden file"))
                continue
            if e.is_symlink():
                if not p.exists():
                    skipped.append((rel, "broken symlink"))
                    continue
                target = p.resolve()
                if not follow_symlinks:
                    if not _inside(target, real_root):
                        skipped.append((rel, "symlink leading outside the source folder, not "
                                             "followed (--follow-symlinks to read it)"))
                        continue
                    if p.is_dir():
                        skipped.append((rel, "symlink to a folder inside the source, not "
                                             "entered (its files are read where they are)"))
                        continue
                if p.is_dir():
                    if target in seen_dirs:
                        skipped.append((rel, "symlink to a folder already searched"))
                        continue
                    seen_dirs.add(target)
            if p.is_dir():
                walk(p)
            elif not p.is_file():
                skipped.append((rel, "not a regular file"))
            elif p.suffix.lower() in TEXT_SUFFIXES:
                files.append(p)
            else:
                what = f"'{p.suffix.lower()}'" if p.suffix else "(no extension)"
                skipped.append((rel, f"unsupported file type {what}"))

    walk(root)
    files.sort(key=lambda p: p.relative_to(root).as_posix())
    return files, skipped


# ------------------------------------------------------------------------- targets
def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_writable_parent(path: str | os.PathLike) -> None:
    """IntakeError unless a folder at ``path`` could be created (or replaced)."""
    target = Path(path).absolute()
    base = _nearest_existing(target.parent)
    if not base.is_dir():
        raise IntakeError(f"cannot write {target}: {base} is not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise IntakeError(f"cannot write {target}: permission denied in {base}")


def check_new_index_target(path: str | os.PathLike, force: bool, is_index) -> None:
    """Before a build: ``path`` must be new, or an index (``is_index(path)``) and
    ``force`` given; its parent must be writable."""
    target = Path(path)
    if target.exists():
        if not target.is_dir() or not is_index(target):
            raise IntakeError(f"{target} exists and is not an index; refusing to replace it "
                              f"(choose a new path)")
        if not force:
            raise IntakeError(f"{target} is an existing index; pass --force to replace it")
    check_writable_parent(target)
