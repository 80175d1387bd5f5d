"""A small on-disk key-value cache (SQLite, WAL) shared by LLM and embedding caches.

Every ``put`` is committed at once, so a build killed midway keeps every finished
result and a rerun repeats none of them. Safe to use from several threads.
"""
from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from typing import Iterable


def cache_key(*parts: str) -> str:
    """sha256 over the parts, each length-prefixed so that ('ab','c') != ('a','bc')."""
    h = hashlib.sha256()
    for p in parts:
        b = p.encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


class KVCache:
    """``bytes`` values under string keys in one SQLite file, in one namespace table."""

    def __init__(self, path: str | os.PathLike, namespace: str = "kv") -> None:
        if not namespace.isidentifier():
            raise ValueError(f"namespace must be an identifier, got {namespace!r}")
        self.path = os.fspath(path)
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._table = namespace
        self._lock = threading.Lock()
        self._con = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute("PRAGMA synchronous=NORMAL")
        self._con.execute(
            f"CREATE TABLE IF NOT EXISTS {self._table} (k TEXT PRIMARY KEY, v BLOB NOT NULL)"
        )
        self._con.commit()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            row = self._con.execute(
                f"SELECT v FROM {self._table} WHERE k = ?", (key,)
            ).fetchone()
        return None if row is None else bytes(row[0])

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        keys = list(keys)
        out: dict[str, bytes] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                part = keys[i : i + 500]
                q = f"SELECT k, v FROM {self._table} WHERE k IN ({','.join('?' * len(part))})"
                for k, v in self._con.execute(q, part):
                    out[k] = bytes(v)
        return out

    def put(self, key: str, value: bytes) -> None:
        self.put_many([(key, value)])

    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        with self._lock:
            self._con.executemany(
                f"INSERT OR REPLACE INTO {self._table} (k, v) VALUES (?, ?)", list(items)
            )
            self._con.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._con.execute(f"SELECT COUNT(*) FROM {self._table}").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def __enter__(self) -> "KVCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
