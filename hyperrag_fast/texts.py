"""Reading ``texts.sqlite`` of an index generation (docs/architecture.md §3).

A load reads the group keys (the query's name lookup needs them all) and opens lazy
sequences for the rest: chunks (a query reads the few it returns, row by row),
extractions, state names and descriptions, topic texts (read whole on first use). The
connection is opened at load, so a later writer removing this generation's files does not
take the rows away. Row counts come from the rowid b-tree (``MAX(idx) + 1``), not a scan;
a full read checks them.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable

from .errors import IndexCorruptedError
from .records import Chunk, Extraction, Segment

TEXTS = "texts.sqlite"
_CHUNK_COLUMNS = 'chunk_id, doc_id, title, text, start, "end", metadata'


def extraction_to_json(ex: Extraction) -> str:
    d = {"segments": [{"topic": s.topic, "entities": [list(e) for e in s.entities]}
                      for s in ex.segments], "error": ex.error}
    if ex.ner is not None:
        d["ner"] = [list(e) for e in ex.ner]
    return json.dumps(d, ensure_ascii=False)


def extraction_from_json(text: str) -> Extraction:
    d = json.loads(text)
    segs = tuple(Segment(s["topic"], tuple((n, desc) for n, desc in s["entities"]))
                 for s in d["segments"])
    ner = d.get("ner")
    return Extraction(segs, d.get("error"),
                      None if ner is None else tuple((t, lab) for t, lab in ner))


def _chunk(r) -> Chunk:
    return Chunk(r[0], r[1], r[2], r[3], r[4], r[5], {} if r[6] == "{}" else json.loads(r[6]))


class LazyRows(Sequence):
    """A read-only list of the rows of ``sql`` (ordered by idx), read on first use: all
    of them at once, or with ``item_sql`` (one ``idx = ?`` parameter) row by row for
    single-index access until something reads them all."""

    def __init__(self, con: sqlite3.Connection, sql: str, n: int,
                 convert: Callable[[Any], Any], item_sql: str | None = None) -> None:
        self._con, self._sql, self._n, self._convert = con, sql, n, convert
        self._item_sql = item_sql
        self._rows: list | None = None
        self._one: dict[int, Any] = {}
        self._lock = threading.Lock()

    def _fail(self, e: Exception):
        raise IndexCorruptedError(f"{TEXTS}: unreadable ({type(e).__name__}; a text in it "
                                  f"is not valid)") from None  # never quote the text

    def _all(self) -> list:
        if self._rows is None:
            with self._lock:
                if self._rows is None:
                    try:
                        rows = [self._convert(r) for r in self._con.execute(self._sql)]
                    except (sqlite3.Error, KeyError, ValueError, TypeError, RecursionError) as e:
                        self._fail(e)
                    if len(rows) != self._n:
                        raise IndexCorruptedError(f"{TEXTS}: {len(rows)} rows, expected {self._n}")
                    for i, r in self._one.items():  # rows handed out already stay the same objects
                        rows[i] = r
                    self._rows = rows
        return self._rows

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if self._rows is not None or self._item_sql is None or isinstance(i, slice):
            return self._all()[i]
        i = int(i)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("row index out of range")
        with self._lock:
            if i not in self._one:
                try:
                    r = self._con.execute(self._item_sql, (i,)).fetchone()
                    if r is None:
                        raise IndexCorruptedError(f"{TEXTS}: row {i} missing")
                    self._one[i] = self._convert(r)
                except (sqlite3.Error, KeyError, ValueError, TypeError, RecursionError) as e:
                    self._fail(e)
            return self._one[i]

    def __iter__(self):
        return iter(self._all())

    def __eq__(self, other) -> bool:
        return list(self) == list(other)

    def __add__(self, other):
        return list(self) + list(other)

    def __radd__(self, other):
        return list(other) + list(self)

    def __repr__(self) -> str:
        return f"LazyRows({self._n} rows{'' if self._rows is None else ', loaded'})"


def chunk_titles(chunks: Sequence[Chunk]) -> list[str]:
    """Every chunk's title: one column of ``texts.sqlite`` when ``chunks`` are lazy rows
    not read yet (a query never reads the chunk texts for this), else from the records."""
    if isinstance(chunks, LazyRows) and chunks._rows is None:
        try:
            rows = [r[0] or "" for r in chunks._con.execute("SELECT title FROM chunks ORDER BY idx")]
        except sqlite3.Error as e:
            chunks._fail(e)
        if len(rows) != len(chunks):
            raise IndexCorruptedError(f"{TEXTS}: {len(rows)} titles, expected {len(chunks)}")
        return rows
    return [c.title for c in chunks]


def read_texts(path: Path):
    """(chunks, extractions, node names, node descriptions, edge texts, group keys).
    Opened read-only and immutable: a generation never changes, and SQLite then reads the
    checksummed file alone (never a ``-journal`` / ``-wal`` file beside it)."""
    uri = Path(os.path.abspath(path)).as_uri() + "?mode=ro&immutable=1"
    con = sqlite3.connect(uri, uri=True, check_same_thread=False)

    def count(table: str) -> int:
        return con.execute(f"SELECT COALESCE(MAX(idx) + 1, 0) FROM {table}").fetchone()[0]

    n_chunks, n_nodes, n_edges = count("chunks"), count("nodes"), count("edges")
    groups = [r[0] for r in con.execute("SELECT key FROM groups ORDER BY idx")]
    first = lambda r: r[0]  # noqa: E731
    chunks = LazyRows(con, f"SELECT {_CHUNK_COLUMNS} FROM chunks ORDER BY idx", n_chunks, _chunk,
                      item_sql=f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE idx = ?")
    extractions = LazyRows(con, "SELECT extraction FROM chunks ORDER BY idx", n_chunks,
                           lambda r: extraction_from_json(r[0]))
    names = LazyRows(con, "SELECT name FROM nodes ORDER BY idx", n_nodes, first)
    descs = LazyRows(con, "SELECT description FROM nodes ORDER BY idx", n_nodes, first)
    edges = LazyRows(con, "SELECT text FROM edges ORDER BY idx", n_edges, first)
    return chunks, extractions, names, descs, edges, groups
