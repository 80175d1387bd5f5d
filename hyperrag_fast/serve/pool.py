"""The bounded query pool (docs/architecture.md §11): ``workers`` threads (the compiled
stages release the GIL) behind an admission bound of ``workers + queue`` requests.
Beyond it a request is refused at once (:class:`Overloaded` -> 503 + Retry-After), so
latency cannot grow without bound; a request that waited in the queue longer than
``max_wait`` is refused when a worker takes it (also 503: the count bound alone does not
bound the wait when each query slows down, e.g. on a busy machine); one still queued at
its deadline is dropped unrun, one running past it is answered 504 (the thread finishes
it, holding its slot)."""
from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable


class Overloaded(Exception):
    """Every worker busy and the queue full: answer 503."""


class QueryTimeout(Exception):
    """The request passed its deadline (queued or running): answer 504."""


class QueryPool:
    """``await pool.run(fn, timeout)``: ``fn()`` on a worker thread, admitted or refused."""

    def __init__(self, workers: int, queue: int, name: str = "hyperrag-query",
                 max_wait: float | None = None) -> None:
        if workers < 1 or queue < 0 or (max_wait is not None and max_wait <= 0):
            raise ValueError(f"workers must be >= 1, queue >= 0 and max_wait > 0, got "
                             f"{workers}, {queue}, {max_wait}")
        self.workers, self.queue, self.max_wait = workers, queue, max_wait
        self.capacity = workers + queue
        self._ex = ThreadPoolExecutor(workers, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._admitted = 0  # queued + running
        self._running = 0
        self._closed = False

    @property
    def admitted(self) -> int:
        return self._admitted

    @property
    def queued(self) -> int:
        """Requests admitted but not started (the queue depth)."""
        with self._lock:
            return max(0, self._admitted - self._running)

    @property
    def running(self) -> int:
        return self._running

    def _release(self, _fut=None) -> None:
        with self._lock:
            self._admitted -= 1

    async def run(self, fn: Callable[[], Any], timeout: float | None) -> Any:
        with self._lock:
            if self._closed or self._admitted >= self.capacity:
                raise Overloaded("every worker is busy and the queue is full")
            self._admitted += 1
        admitted = time.monotonic()
        deadline = None if timeout is None else admitted + timeout

        def job():
            now = time.monotonic()
            if deadline is not None and now > deadline:
                raise QueryTimeout("the request waited in the queue past its timeout")
            if self.max_wait is not None and now - admitted > self.max_wait:
                raise Overloaded(f"queued {1e3 * (now - admitted):.0f} ms, over the "
                                 f"{1e3 * self.max_wait:.0f} ms the server lets a request wait")
            with self._lock:
                self._running += 1
            try:
                return fn()
            finally:
                with self._lock:
                    self._running -= 1

        try:
            fut = self._ex.submit(job)
        except RuntimeError:  # shut down meanwhile
            self._release()
            raise Overloaded("the server is shutting down") from None
        fut.add_done_callback(self._release)
        afut = asyncio.wrap_future(fut)
        afut.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved: no warning
        try:
            return await asyncio.wait_for(asyncio.shield(afut), timeout)
        except asyncio.TimeoutError:
            raise QueryTimeout(f"no answer within the {timeout:g} s request timeout") from None

    def shutdown(self, wait: bool = True) -> None:
        """Refuse new work; with ``wait``, return once the running and queued work is done."""
        with self._lock:
            self._closed = True
        self._ex.shutdown(wait=wait)
