"""Where a build's time and memory go: busy seconds and peak RSS per stage.

Stages may overlap (extraction of one partition runs while the previous one is
embedded), so each stage records its own busy time, and a sampler thread reads the
resident set size every ``interval`` seconds and charges it to every stage running at
that moment. ``peak_rss_mb`` is the process high-water mark (``VmHWM``).
"""
from __future__ import annotations

import os
import resource
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Iterator

STAGES = ("chunk", "extract", "embed", "assemble", "ann", "save")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_mb() -> float:
    """Current resident set size in MB (Linux ``/proc``; else the peak)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE / 1e6
    except OSError:
        return peak_rss_mb()


def peak_rss_mb() -> float:
    """The process's peak resident set size in MB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


class StageClock:
    """Accumulates ``seconds[stage]``, ``calls[stage]`` and ``peak_mb[stage]``; thread-safe."""

    def __init__(self, interval: float = 0.05) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.peak_mb: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)
        self._active: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._interval = interval
        self._sampler: threading.Thread | None = None
        self.t0 = time.perf_counter()

    def __enter__(self) -> "StageClock":
        self._sampler = threading.Thread(target=self._sample, name="hyperrag-rss", daemon=True)
        self._sampler.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join()

    def _charge(self) -> None:
        now = rss_mb()
        with self._lock:
            for s, n in self._active.items():
                if n and now > self.peak_mb[s]:
                    self.peak_mb[s] = now

    def _sample(self) -> None:
        while not self._stop.wait(self._interval):
            self._charge()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        with self._lock:
            self._active[name] += 1
        self._charge()
        t = time.perf_counter()
        try:
            yield
        finally:
            dt = time.perf_counter() - t
            self._charge()
            with self._lock:
                self._active[name] -= 1
                self.seconds[name] += dt
                self.calls[name] += 1

    def count(self, what: str, n: int) -> None:
        with self._lock:
            self.counts[what] += int(n)

    def report(self) -> dict[str, object]:
        """Plain dict: per-stage seconds / calls / peak MB, counts, wall, process peak."""
        return {"wall_s": time.perf_counter() - self.t0,
                "peak_rss_mb": peak_rss_mb(),
                "stages": {s: {"s": round(self.seconds[s], 3), "calls": self.calls[s],
                               "peak_rss_mb": round(self.peak_mb[s], 1)}
                           for s in dict.fromkeys([*STAGES, *self.seconds])
                           if s in self.seconds},
                "counts": dict(self.counts)}
