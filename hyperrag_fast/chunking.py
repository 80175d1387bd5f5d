"""Documents in, chunks out: the first step of indexing (docs/architecture.md §2).

``load_documents`` reads text/Markdown files, folders, JSON/JSONL corpora or Python
iterables into :class:`Document` records; ``chunk_documents`` cuts them into
:class:`~hyperrag_fast.records.Chunk` objects under a word-token budget, preferring
paragraph and sentence boundaries. Chunk order (documents in order, then position)
is the deterministic preprocessing index t of STITCH-RAG §3.2.
"""
from __future__ import annotations

import codecs
import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from .config import DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP
from .intake import (TEXT_SUFFIXES, IntakeError, binary_reason, check_encoding,
                     check_metadata, check_name, check_unicode, decode, escape_offset,
                     read_bytes, scan_folder)
from .records import Chunk, chunk_passage  # noqa: F401  (chunk_passage: re-exported)

log = logging.getLogger(__name__)

#: a tokenizer maps a text to the ``(start, end)`` character spans of its tokens.
Tokenizer = Callable[[str], Sequence[tuple[int, int]]]

_WORD = re.compile(r"\S+")
_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_SENTENCE_END = re.compile(r"[.!?][\"')\]\u201d\u2019]*$")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n")


@dataclass(frozen=True)
class Document:
    """One source document. ``metadata`` is copied onto each of its chunks."""

    doc_id: str
    title: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Skipped:
    """A document that was not loaded, and why (e.g. ``"empty text"``)."""

    doc_id: str
    reason: str


@dataclass
class LoadResult:
    """What :func:`load_documents` returns: loaded documents, in order, skips, and
    warnings as ``(doc_id, message)`` (e.g. undecodable bytes replaced)."""

    documents: list[Document]
    skipped: list[Skipped]
    warnings: list[tuple[str, str]] = field(default_factory=list)

    def __iter__(self):
        return iter(self.documents)

    def __len__(self) -> int:
        return len(self.documents)


# ----------------------------------------------------------------------------- loading


def load_documents(source: str | os.PathLike | Iterable[Any], *, encoding: str = "utf-8",
                   follow_symlinks: bool = False) -> LoadResult:
    """Load documents from a path (file or folder) or from an iterable.

    Paths: a ``.txt``/``.md`` file; a folder searched recursively for them (sorted,
    ``doc_id`` = relative POSIX path, title = first Markdown heading of a ``.md`` file
    else the file stem); a ``.json`` file holding a list of ``{id?, title, text}``
    records or a ``{title: text | [sentences]}`` dict; a ``.jsonl`` file of records.
    Iterables may yield :class:`Document`, record dicts or plain strings.

    Files are decoded with ``encoding`` (UTF-8 by default); undecodable bytes are
    replaced, counted and reported in ``warnings`` (and ``metadata["warnings"]``).
    Binary files, other file types, hidden files and symlinks leaving the folder
    (unless ``follow_symlinks``) are listed in ``skipped`` with the reason, as are
    empty documents (see :mod:`hyperrag_fast.intake`); a repeated ``doc_id`` raises
    ValueError.
    """
    skipped: list[Skipped] = []
    if isinstance(source, (str, os.PathLike)):
        raw, skips = _load_path(Path(source), check_encoding(encoding), follow_symlinks)
        skipped = [Skipped(d, r) for d, r in skips]
    elif isinstance(source, (bytes, dict)):
        raise TypeError("load_documents takes a path or an iterable of documents, "
                        f"not {type(source).__name__}")
    else:
        raw = [_coerce_item(item, i) for i, item in enumerate(source)]
        for i, d in enumerate(raw):
            _check_doc(d, f"item {i} (document {d.doc_id!r})")
    res = _finish(raw, skipped)
    for doc_id, w in res.warnings:
        log.warning("%s", w)
    return res


def _finish(docs: Iterable[Document], skipped: list[Skipped]) -> LoadResult:
    out: list[Document] = []
    warnings: list[tuple[str, str]] = []
    seen: set[str] = set()
    for d in docs:
        if d.doc_id in seen:
            raise ValueError(f"duplicate document id {d.doc_id!r}: document ids must be unique")
        seen.add(d.doc_id)
        if not d.text.strip():
            skipped.append(Skipped(d.doc_id, "empty text"))
        else:
            out.append(d)
            warnings += [(d.doc_id, w) for w in d.metadata.get("warnings", ())]
    once = {w: d for d, w in reversed(warnings)}  # a file's warning on each of its records
    return LoadResult(out, skipped, [(d, w) for w, d in reversed(once.items())])


def _with_warnings(meta: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    if warnings:
        meta = dict(meta)
        meta["warnings"] = list(meta.get("warnings", [])) + warnings
    return meta


def _text_file_doc(path: Path, doc_id: str, data: bytes, encoding: str) -> Document:
    text, warnings = decode(data, doc_id, encoding)
    check_unicode(text, str(path), "text")  # a codec such as unicode_escape can make them
    title = path.stem
    if path.suffix.lower() in (".md", ".markdown"):
        m = _MD_HEADING.search(text)
        if m:
            title = m.group(1).strip()
    return Document(doc_id, title, text, _with_warnings({"source": str(path)}, warnings))


def _text_files(files: list[tuple[Path, str]], encoding: str
                ) -> tuple[list[Document], list[tuple[str, str]]]:
    docs, skipped = [], []
    for p, doc_id in files:
        data = read_bytes(p)
        why = binary_reason(data, encoding)
        if why:
            skipped.append((doc_id, why))
        else:
            docs.append(_text_file_doc(p, doc_id, data, encoding))
    return docs, skipped


def _load_path(path: Path, encoding: str, follow_symlinks: bool
               ) -> tuple[list[Document], list[tuple[str, str]]]:
    """Documents and ``(doc_id, reason)`` skips of a file or folder."""
    if not path.exists():
        raise FileNotFoundError(f"no such file or folder: {path}")
    check_name(str(path))  # names become document ids and metadata: valid UTF-8 only
    if path.is_dir():
        files, skipped = scan_folder(path, follow_symlinks)
        docs, binary = _text_files([(p, p.relative_to(path).as_posix()) for p in files], encoding)
        return docs, sorted(skipped + binary)
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        return _text_files([(path, path.name)], encoding)
    if suffix in (".json", ".jsonl"):
        data = read_bytes(path)
        text, warnings = decode(data, path.name, encoding)
        at = _ByteOffsets(text, data, encoding)
        if suffix == ".json":
            docs = _json_docs(_parse_json(text, str(path), "invalid JSON"), path)
            for i, d in enumerate(docs):
                _check_doc(d, f"{path}[{i}]", lambda cp: at.escape(text, 0, cp))
        else:
            docs = []
            pos = 0
            for lineno, line in enumerate(text.splitlines(keepends=True), 1):
                start, pos = pos, pos + len(line)
                if not line.strip():
                    continue
                where = f"{path}:{lineno}"
                d = _record_doc(_parse_json(line, where, "invalid JSON line"), lineno - 1, where)
                _check_doc(d, where, lambda cp: at.escape(line, start, cp))
                docs.append(d)
        for d in docs:
            d.metadata.setdefault("source", str(path))
        return [Document(d.doc_id, d.title, d.text, _with_warnings(d.metadata, warnings))
                for d in docs], []
    raise ValueError(f"unsupported file type {suffix!r} for {path}; "
                     f"expected one of {TEXT_SUFFIXES + ('.json', '.jsonl')} or a folder")


def _parse_json(text: str, where: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: {what}: {e}") from None
    except RecursionError:
        raise IntakeError(f"{where}: {what}: nested too deeply") from None


class _ByteOffsets:
    """Byte offsets in a decoded file, for messages (computed only when one is needed)."""

    _MARKS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
              (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"),
              (codecs.BOM_UTF8, "utf-8"))

    def __init__(self, text: str, data: bytes, encoding: str) -> None:
        enc = check_encoding(encoding)
        self.text, self.skip, self.codec = text, 0, enc
        if enc in ("utf-8", "utf-16", "utf-32"):  # the codecs that drop a byte order mark
            for mark, codec in self._MARKS:
                if data.startswith(mark):
                    self.skip, self.codec = len(mark), codec
                    break

    def of(self, char: int) -> int:
        return self.skip + len(self.text[:char].encode(self.codec, "replace"))

    def escape(self, part: str, start: int, cp: int) -> str | None:
        """Where the unpaired escape of ``cp`` in ``part`` (at char ``start``) is."""
        i = escape_offset(part, cp)
        return None if i is None else f"the \\u{cp:04x} escape at byte {self.of(start + i)} of the file"


def _check_doc(d: Document, where: str, locate=None) -> None:
    """IntakeError unless the id, title, text and metadata of ``d`` are valid Unicode."""
    for field, value in (("text", d.text), ("title", d.title), ("document id", d.doc_id)):
        check_unicode(value, where, field, locate)
    check_metadata(d.metadata, where, locate)


def _json_docs(data: Any, where: Path) -> list[Document]:
    if isinstance(data, list):
        return [_record_doc(rec, i, f"{where}[{i}]") for i, rec in enumerate(data)]
    if isinstance(data, dict):
        return [Document(str(t), str(t), _join_text(v, f"{where}[{t!r}]"), {})
                for t, v in data.items()]
    raise ValueError(f"{where}: expected a JSON list of records or a {{title: text}} object, "
                     f"got {type(data).__name__}")


def _join_text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return " ".join(s.strip() for s in value)
    raise ValueError(f"{where}: text must be a string or a list of strings, "
                     f"got {type(value).__name__}")


def _record_doc(rec: Any, index: int, where: str) -> Document:
    """``{id?, title?, text, ...}`` -> Document; missing id -> title, else the index."""
    if not isinstance(rec, dict):
        raise ValueError(f"{where}: expected a record object, got {type(rec).__name__}")
    if "text" not in rec:
        raise ValueError(f"{where}: record has no 'text' field")
    title = rec.get("title") or ""
    if not isinstance(title, str):
        raise ValueError(f"{where}: 'title' must be a string")
    doc_id = rec.get("id", rec.get("doc_id"))
    doc_id = str(doc_id) if doc_id is not None else (title or str(index))
    meta = rec.get("metadata")
    if meta is None:
        meta = {}
    elif not isinstance(meta, dict):
        raise ValueError(f"{where}: 'metadata' must be an object {{...}} (or absent), "
                         f"got {type(meta).__name__}")
    meta = dict(meta)
    meta.update({k: v for k, v in rec.items()
                 if k not in ("id", "doc_id", "title", "text", "metadata")})
    return Document(doc_id, title, _join_text(rec["text"], where), meta)


def _coerce_item(item: Any, index: int) -> Document:
    if isinstance(item, Document):
        return item
    if isinstance(item, str):
        return Document(str(index), "", item, {})
    if isinstance(item, dict):
        return _record_doc(item, index, f"item {index}")
    raise TypeError(f"item {index}: expected Document, dict or str, got {type(item).__name__}")


# ---------------------------------------------------------------------------- chunking


def word_spans(text: str) -> list[tuple[int, int]]:
    """Default tokenizer: whitespace-separated words as ``(start, end)`` spans."""
    return [m.span() for m in _WORD.finditer(text)]


def chunk_id(doc_id: str, start: int, end: int, text: str) -> str:
    """Stable chunk id: sha1 of ``(doc_id, start, end, text)``, first 16 hex digits."""
    payload = json.dumps([doc_id, start, end, text], ensure_ascii=False)
    return hashlib.sha1(payload.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def chunk_documents(
    docs: Iterable[Document],
    max_tokens: int = DEFAULT_MAX_TOKENS,
    overlap: int = DEFAULT_OVERLAP,
    tokenizer: Tokenizer | None = None,
) -> list[Chunk]:
    """Cut documents into chunks of at most ``max_tokens`` tokens (docs/architecture.md §2).

    A document that fits is one chunk. Otherwise each chunk ends at the last
    paragraph break, else the last sentence end, found in the second half of the
    budget, else at the budget itself; the next chunk starts ``overlap`` tokens
    earlier. Chunk text is ``doc.text[start:end]`` (outer whitespace excluded).
    A document with no tokens gives no chunks.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be an integer >= 1, got {max_tokens!r}")
    if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap < max_tokens:
        raise ValueError(f"overlap must be an integer with 0 <= overlap < max_tokens "
                         f"({max_tokens}), got {overlap!r}")
    tok = tokenizer or word_spans
    chunks: list[Chunk] = []
    seen: set[str] = set()
    for doc in docs:
        if not isinstance(doc, Document):
            raise TypeError(f"chunk_documents expects Document objects, got {type(doc).__name__}")
        if doc.doc_id in seen:
            raise ValueError(f"duplicate document id {doc.doc_id!r}: document ids must be unique")
        seen.add(doc.doc_id)
        for s, e in _split_spans(doc.text, list(tok(doc.text)), max_tokens, overlap):
            text = doc.text[s:e]
            chunks.append(Chunk(chunk_id(doc.doc_id, s, e, text), doc.doc_id, doc.title,
                                text, s, e, dict(doc.metadata)))
    return chunks


def _split_spans(text: str, toks: list[tuple[int, int]], max_tokens: int,
                 overlap: int) -> list[tuple[int, int]]:
    """Character spans of the chunks of one document (see :func:`chunk_documents`)."""
    n = len(toks)
    out: list[tuple[int, int]] = []
    i = 0
    while i < n:
        j = min(i + max_tokens, n)  # chunk = tokens[i:j]
        if j < n:
            j = _best_break(text, toks, i, j, max_tokens)
        out.append((toks[i][0], toks[j - 1][1]))
        if j >= n:
            break
        i = max(j - overlap, i + 1)
    return out


def _best_break(text: str, toks: list[tuple[int, int]], i: int, j: int, max_tokens: int) -> int:
    """End (exclusive token index) for a chunk starting at ``i`` with hard limit ``j``."""
    lo = i + max(1, max_tokens // 2)
    sentence = 0
    for k in range(j, lo - 1, -1):  # break after token k-1
        if k <= i:
            break
        if _PARAGRAPH_BREAK.search(text, toks[k - 1][1], toks[k][0]):
            return k
        if not sentence and _SENTENCE_END.search(text[toks[k - 1][0]:toks[k - 1][1]]):
            sentence = k
    return sentence or j
