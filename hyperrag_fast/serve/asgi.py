"""The ASGI layers around the routes (docs/architecture.md §11): :class:`Observe` counts
every request into the metrics, :class:`FastQuery` answers a valid query without FastAPI's
request machinery."""
from __future__ import annotations

import time

from .metrics import Metrics

_ENDPOINTS = ("/v1/query", "/v1/ask", "/v1/info", "/healthz", "/readyz", "/metrics",
              "/openapi.json", "/docs")


def endpoint(path: str) -> str:
    """The route template of ``path`` (bounded metric labels)."""
    if path in _ENDPOINTS:
        return path
    parts = path.split("/")
    if len(parts) == 5 and parts[:3] == ["", "v1", "indexes"] and parts[4] in ("query", "ask", "info"):
        return f"/v1/indexes/{{name}}/{parts[4]}"
    return "other"


class Observe:
    """ASGI middleware: every request's status and latency into ``metrics``."""

    def __init__(self, app, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        status = [500]

        async def send_status(msg):
            if msg["type"] == "http.response.start":
                status[0] = msg["status"]
            await send(msg)

        try:
            await self.app(scope, receive, send_status)
        finally:
            ep = endpoint(scope["path"])
            method = scope.setdefault("state", {}).get("method", "")
            self.metrics.requests.labels(ep, method, str(status[0])).inc()
            self.metrics.latency.labels(ep, method).observe(time.perf_counter() - t0)


async def no_body():
    return {"type": "http.request", "body": b"", "more_body": False}


class FastQuery:
    """ASGI middleware: a ``POST`` to a query route with a JSON body of at most
    :attr:`LIMIT` bytes that validates is answered by ``answer`` at once, without FastAPI's
    routing, dependency solving and exception middleware (docs/architecture.md §11);
    anything else (another route, another content type, a body that fails validation or is
    larger) goes on to the routes, whose answers and errors are the declared ones."""

    LIMIT = 1 << 20

    def __init__(self, app, answer) -> None:
        self.app, self.answer = app, answer

    async def __call__(self, scope, receive, send):
        name = _query_route(scope) if scope["type"] == "http" else False
        if name is False:
            return await self.app(scope, receive, send)
        chunks, size, more = [], 0, True
        while more and size <= self.LIMIT:
            msg = await receive()
            if msg["type"] != "http.request":  # the client went away: nothing to answer
                return
            chunks.append(msg.get("body", b""))
            size += len(chunks[-1])
            more = msg.get("more_body", False)
        body = b"".join(chunks)
        if not more and await self.answer(scope, name, body, send):
            return
        replayed = False

        async def replay():  # the body read so far, then the rest of the stream
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": more}

        return await self.app(scope, replay, send)


def _query_route(scope) -> str | None | bool:
    """The index a query route names (None: the default), False for any other request."""
    if scope["method"] != "POST" or not any(
            k == b"content-type" and b"json" in v for k, v in scope["headers"]):
        return False
    path = scope["path"]
    if path == "/v1/query":
        return None
    parts = path.split("/")
    if len(parts) == 5 and parts[:3] == ["", "v1", "indexes"] and parts[4] == "query" and parts[3]:
        return parts[3]
    return False
