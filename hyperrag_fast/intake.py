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
import re
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


# byte order marks that name a codec (UTF-32 first: its LE mark starts with UTF-16's)
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def bom_encoding(data: bytes) -> str | None:
    """``"utf-16"`` / ``"utf-32"`` when ``data`` starts with that byte order mark."""
    for bom, enc in _BOMS:
        if data.startswith(bom):
            return enc
    return None


def decode(data: bytes, name: str, encoding: str = "utf-8") -> tuple[str, list[str]]:
    """Decode ``data`` (a UTF-8 BOM is dropped; with the default UTF-8, a UTF-16/32 BOM
    selects that codec); each undecodable byte run becomes U+FFFD and the count goes into
    the returned warnings (one line, naming ``name``)."""
    enc = check_encoding(encoding)
    codec = (bom_encoding(data) or "utf-8-sig") if enc == "utf-8" else enc
    _bad.spans = []
    text = data.decode(codec, errors="hyperrag-count")
    spans, _bad.spans = _bad.spans, []
    if not spans:
        return text, []
    n = sum(e - s for s, e in spans)
    label = "UTF-8" if codec == "utf-8-sig" else codec
    hint = ("; Latin-1/Windows text? pass --encoding cp1252 (API: encoding='cp1252')"
            if codec == "utf-8-sig" else "")
    return text, [f"{name}: {n} undecodable byte{'s' * (n != 1)} replaced with U+FFFD "
                  f"(non-{label} text, first at byte {spans[0][0]}){hint}"]


def binary_reason(data: bytes, encoding: str = "utf-8") -> str | None:
    """Why ``data`` looks binary (NUL or control bytes in its first 8 KiB), else None.
    Encodings that are not ASCII-compatible (UTF-16, ...) are not inspected, nor, with
    the default UTF-8, a file with a UTF-16/32 byte order mark (:func:`decode` reads it);
    NUL bytes at every other position get the ``--encoding utf-16-le/-be`` hint."""
    enc = check_encoding(encoding)
    if "\n".encode(enc) != b"\n" or (enc == "utf-8" and bom_encoding(data)):
        return None
    head = data[:_SAMPLE]
    if b"\0" in head:
        return "binary file (NUL bytes), not text" + _utf16_hint(head)
    controls = sum(1 for b in head if b < 32 and b not in _TEXT_CONTROLS)
    if head and controls > 0.05 * len(head):
        return f"binary file ({controls} control bytes in the first {len(head)}), not text"
    return None


def _utf16_hint(head: bytes) -> str:
    even, odd = head[0::2].count(0), head[1::2].count(0)
    if (even == 0) != (odd == 0) and max(even, odd) >= len(head) // 4:
        return (f"; UTF-16 text without a byte order mark? pass --encoding "
                f"utf-16-{'le' if odd else 'be'}")
    return ""


# --------------------------------------------------------------- valid Unicode
MAX_METADATA_DEPTH = 100  # nesting levels of a record's metadata (saving recurses)


def shown_name(name: str) -> str:
    """A file name as printable text: undecodable bytes as ``\\xNN`` escapes."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def check_name(name: str) -> None:
    """IntakeError naming the file and the byte offset unless ``name`` is valid UTF-8
    (a name that is not becomes surrogate escapes, which nothing can save)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as e:
        raw = os.fsencode(name)
        at = len(name[:e.start].encode("utf-8", "surrogateescape"))
        raise IntakeError(f"{shown_name(name)}: the file name is not valid UTF-8 (byte "
                          f"0x{raw[at]:02x} at byte {at} of the path); rename it") from None


def check_unicode(value: str, where: str, field: str, locate=None) -> None:
    """IntakeError unless ``value`` encodes as UTF-8: a lone surrogate (from a JSON
    ``\\udXXX`` escape) is named with ``locate(code point)`` (e.g. its byte offset in
    the file), else its character offset."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        cp = ord(value[e.start])
        at = (locate(cp) if locate else None) or f"character {e.start} of the {field}"
        raise IntakeError(f"{where}: the {field} holds a lone surrogate U+{cp:04X} ({at}), "
                          f"which is not text; remove it or write the whole pair") from None


def check_metadata(meta: dict, where: str, locate=None) -> None:
    """Every key and string of ``meta`` valid Unicode (:func:`check_unicode`), nested at
    most MAX_METADATA_DEPTH levels."""
    stack = [(meta, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > MAX_METADATA_DEPTH:
            raise IntakeError(f"{where}: metadata nested deeper than {MAX_METADATA_DEPTH} levels")
        if isinstance(v, str):
            check_unicode(v, where, "metadata", locate)
        elif isinstance(v, dict):
            for k, x in v.items():
                if isinstance(k, str):
                    check_unicode(k, where, "metadata", locate)
                stack.append((x, depth + 1))
        elif isinstance(v, (list, tuple)):
            stack.extend((x, depth + 1) for x in v)


_ESCAPE = re.compile(r"(\\+)u([dD][89a-fA-F][0-9a-fA-F]{2})")


def escape_offset(text: str, cp: int) -> int | None:
    """Character offset in JSON ``text`` of the first unpaired ``\\uXXXX`` escape of the
    surrogate ``cp`` (a high one followed at once by a low one is a pair), or None."""
    ms = [m for m in _ESCAPE.finditer(text) if len(m.group(1)) % 2 == 1]  # even: "\\\\u"
    i = 0
    while i < len(ms):
        m, v = ms[i], int(ms[i].group(2), 16)
        nxt = ms[i + 1] if i + 1 < len(ms) else None
        if (v <= 0xDBFF and nxt is not None and nxt.start() == m.end()
                and len(nxt.group(1)) == 1 and int(nxt.group(2), 16) >= 0xDC00):
            i += 2
            continue
        if v == cp:
            return m.end(1) - 1
        i += 1
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

    def entries(d: Path):
        try:
            return iter(sorted(os.scandir(d), key=lambda e: e.name))
        except PermissionError:
            raise IntakeError(f"{d}: permission denied (cannot list the folder)") from None

    stack = [entries(root)]  # depth first, in name order, without recursion (deep trees)
    while stack:
        e = next(stack[-1], None)
        if e is None:
            stack.pop()
            continue
        p = Path(e.path)
        rel = p.relative_to(root).as_posix()
        if e.name.startswith("."):
            skipped.append((shown_name(rel), "hidden folder, not searched" if e.is_dir()
                            else "hidden file"))
            continue
        if e.is_symlink():
            if not p.exists():
                skipped.append((shown_name(rel), "broken symlink"))
                continue
            target = p.resolve()
            if not follow_symlinks:
                if not _inside(target, real_root):
                    skipped.append((shown_name(rel), "symlink leading outside the source "
                                    "folder, not followed (--follow-symlinks to read it)"))
                    continue
                if p.is_dir():
                    skipped.append((shown_name(rel), "symlink to a folder inside the source, "
                                    "not entered (its files are read where they are)"))
                    continue
            if p.is_dir():
                if target in seen_dirs:
                    skipped.append((shown_name(rel), "symlink to a folder already searched"))
                    continue
                seen_dirs.add(target)
        if p.is_dir():
            stack.append(entries(p))
        elif not p.is_file():
            skipped.append((shown_name(rel), "not a regular file"))
        elif p.suffix.lower() in TEXT_SUFFIXES:
            check_name(str(p))  # its name becomes the document id: before any reading
            files.append(p)
        else:
            what = f"'{p.suffix.lower()}'" if p.suffix else "(no extension)"
            skipped.append((shown_name(rel), f"unsupported file type {what}"))

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
