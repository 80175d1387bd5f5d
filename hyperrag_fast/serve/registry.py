"""Live indexes by name, each following its ``CURRENT`` (docs/architecture.md §11).

A :class:`LiveIndex` serves one :class:`Generation` at a time. A poll stats
``<index>/CURRENT`` (inode, mtime, size: no read unless it changed); when it names a
new generation, that generation is opened (checksums verified), its retriever warmed
and probed, and only then swapped in: requests starting afterwards lease the new one,
requests in flight finish on the old one, which is released by the last of them. A
generation that fails to open or validate is logged and counted
(``hyperrag_generation_failures_total``) and the old one keeps serving. Readers only:
no writer lock, no build code.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ..config import QueryOptions
from ..embed.base import Embedder
from ..embed.registry import embedder_for_name
from ..errors import IndexCorruptedError, IndexError_
from ..prebuilt_reader import load_prebuilt
from ..reader import IndexReader
from ..retriever import Retriever
from ..store import CURRENT, current_generation, read_manifest

log = logging.getLogger("hyperrag_fast.serve")
EmbedderFactory = Callable[[str], Embedder]
#: the options of an index: fixed, or from its embedder's name (``config.preset_for``)
OptionsFor = QueryOptions | Callable[[str], QueryOptions]


@dataclass(eq=False)
class Generation:
    """One opened, warmed generation; ``refs`` counts the requests holding it."""

    name: str
    retriever: Retriever | None
    manifest: dict[str, Any]
    loaded_at: float  # time.time() when it started serving
    open_s: float  # open + validate + warm-up
    refs: int = 0
    retired: bool = False


class LiveIndex:
    """The named index at ``path`` (an index folder); see the module docstring."""

    def __init__(self, name: str, path: str | os.PathLike, options: OptionsFor,
                 embedders: EmbedderFactory, metrics, verify: bool = True,
                 structures: Sequence[str] = ()) -> None:
        self.name, self.path = name, Path(path)
        self._options, self.verify, self.structures = options, verify, tuple(structures)
        self.options: QueryOptions | None = None  # set at the first open
        self._embedders, self._metrics = embedders, metrics
        self._lock = threading.Lock()
        self.current: Generation | None = None
        self._stamp: tuple[int, int, int] | None = None
        self._rejected: str | None = None
        self.switches = 0
        self.last_failure: dict[str, Any] | None = None

    # ------------------------------------------------------------------ opening
    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path / CURRENT)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def _open(self, gen: str | None) -> Generation:
        t0 = time.perf_counter()
        d = self.path / gen if gen else self.path  # no CURRENT: an old-format index
        manifest = read_manifest(d)
        emb = self._embedders(manifest["embedder"]["name"])
        if self.options is None:
            o = self._options
            self.options = o(manifest["embedder"]["name"]) if callable(o) else o
        ix = IndexReader.open(d, embedder=emb, verify=self.verify)
        prebuilt = (load_prebuilt(self.path, self.structures, self.verify, ix.generation)
                    if self.structures else None)
        r = Retriever(ix, emb, self.options, prebuilt=prebuilt)
        r.warmup()
        probe = r.retrieve(ix.chunks[0].title or ix.chunks[0].text[:200] or "probe")
        if not probe.chunks or any(not 0 <= c.start <= c.end for c in probe.chunks):
            raise IndexCorruptedError(f"{d}: a probe query returned no valid chunk")
        for k in ("files", "xxh3_128", "prebuilt"):
            manifest.pop(k, None)
        return Generation(gen or "", r, manifest, time.time(), time.perf_counter() - t0)

    def open(self) -> Generation:
        """Load what CURRENT names now (the first load: errors are raised)."""
        stamp = self._stat()
        g = self._open(current_generation(self.path))
        self._stamp, self.current = stamp, g
        self._metrics.serving(self.name, g.name, None)
        log.info("index %r: serving %s (%s, opened in %.2f s)", self.name, g.name or "(no CURRENT)",
                 self.path, g.open_s)
        return g

    def poll(self) -> bool:
        """Switch if CURRENT names a new generation; True when it switched."""
        stamp = self._stat()
        if stamp is None or stamp == self._stamp or self.current is None:
            return False
        try:
            name = current_generation(self.path)
        except IndexError_ as e:  # an unreadable CURRENT is a damaged publish
            self._reject("CURRENT", e, stamp)
            return False
        if name is None or name == self.current.name or name == self._rejected:
            self._stamp = stamp
            return False
        try:
            g = self._open(name)
        except Exception as e:  # noqa: BLE001 - any failure leaves the old generation serving
            try:
                moved = current_generation(self.path) != name
            except IndexError_:
                moved = False
            if moved:  # published over (and maybe pruned) while opening: try the newer one
                log.info("index %r: %s was replaced while opening; following CURRENT", self.name, name)
                return False
            self._reject(name, e, stamp)
            return False
        self._stamp = stamp
        self._switch(g)
        return True

    def _reject(self, name: str, e: BaseException, stamp) -> None:
        self._stamp, self._rejected = stamp, name
        reason = f"{type(e).__name__}: {e}".splitlines()[0][:500]
        self.last_failure = {"generation": name, "reason": reason, "at": time.time()}
        self._metrics.rejected(self.name, name)
        log.error("index %r: new generation %s rejected, still serving %s: %s", self.name, name,
                  self.current.name if self.current else None, reason)

    def _switch(self, g: Generation) -> None:
        with self._lock:
            old, self.current = self.current, g
            old.retired = True
            free = old.refs == 0
        self.switches += 1
        self._rejected = None
        self._metrics.serving(self.name, g.name, old.name)
        self._metrics.switches.labels(self.name).inc()
        self._metrics.switch_seconds.labels(self.name).observe(g.open_s)
        log.info("index %r: serving %s (was %s; opened, validated and warmed in %.2f s)",
                 self.name, g.name, old.name, g.open_s)
        if free:
            self._release(old)

    # ------------------------------------------------------------------ serving
    @contextmanager
    def lease(self) -> Iterator[Generation]:
        """The generation to run one request on; it stays open until the request ends."""
        with self._lock:
            g = self.current
            if g is None:
                raise RuntimeError(f"index {self.name!r} is not loaded")
            g.refs += 1
        try:
            yield g
        finally:
            with self._lock:
                g.refs -= 1
                free = g.retired and g.refs == 0
            if free:
                self._release(g)

    def _release(self, g: Generation) -> None:
        g.retriever = None  # its maps, texts connection and scratch go with the last reference
        self._metrics.released.labels(self.name).inc()
        log.info("index %r: released %s", self.name, g.name)

    def info(self) -> dict[str, Any]:
        g = self.current
        return {"name": self.name, "path": str(self.path), "generation": g and g.name,
                "serving_since": g and g.loaded_at, "open_s": g and round(g.open_s, 3),
                "manifest": g and g.manifest, "switches": self.switches,
                "options": self.options,
                "last_failure": self.last_failure}


class Registry:
    """Every served index by name (the first is the default), their loading and the
    thread that follows their CURRENT files."""

    def __init__(self, specs: dict[str, str], options: OptionsFor, metrics,
                 embedders: EmbedderFactory | None = None, embed_threads: int = 1,
                 verify: bool = True, structures: Sequence[str] = (),
                 poll_s: float = 0.1) -> None:
        if not specs:
            raise ValueError("serve at least one index")
        self.metrics, self.poll_s = metrics, poll_s
        self.embed_threads = embed_threads
        self._emb: dict[str, Embedder] = {}
        self._emb_lock = threading.Lock()
        make = embedders or self._embedder
        self.indexes = {n: LiveIndex(n, p, options, make, metrics, verify, structures)
                        for n, p in specs.items()}
        self.default = next(iter(specs))
        self.ready = threading.Event()
        self.error: str | None = None  # why the first load failed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _embedder(self, name: str) -> Embedder:
        """One embedder per model name, shared by the indexes and generations using it
        (an ONNX session is thread-safe); ONNX intra-op threads: ``embed_threads``."""
        with self._emb_lock:
            if name not in self._emb:
                self._emb[name] = embedder_for_name(name, intra_op_threads=self.embed_threads)
            return self._emb[name]

    def get(self, name: str | None) -> LiveIndex | None:
        return self.indexes.get(self.default if name is None else name)

    def start(self, on_loaded: Callable[[str | None], None] | None = None) -> None:
        """Load every index, then follow them, on a background thread; ``on_loaded(error)``
        runs once the first load is done (``error``: None, or why it failed)."""
        self._thread = threading.Thread(target=self._run, args=(on_loaded,),
                                        name="hyperrag-follow", daemon=True)
        self._thread.start()

    def _run(self, on_loaded) -> None:
        try:
            for ix in self.indexes.values():
                ix.open()
        except Exception as e:  # noqa: BLE001 - reported by /readyz and the CLI
            self.error = f"index {ix.name!r}: {type(e).__name__}: {e}".splitlines()[0]
            log.error("%s", self.error)
        if on_loaded is not None:
            on_loaded(self.error)
        self.ready.set()
        if self.error is not None:
            return
        self.metrics.ready.set(1)
        while not self._stop.wait(self.poll_s):
            for ix in self.indexes.values():
                try:
                    ix.poll()
                except Exception:  # noqa: BLE001 - the follower must survive anything
                    log.exception("index %r: following CURRENT failed", ix.name)

    @property
    def is_ready(self) -> bool:
        return self.ready.is_set() and self.error is None

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
