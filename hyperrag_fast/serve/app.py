"""The HTTP routes (FastAPI; docs/architecture.md §11). Every error is a JSON body
``{"error": "<one line>"}`` with a 4xx/5xx status, never a stack trace; the server log
keeps the traceback of an unexpected one."""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException

from .. import __version__
from ..methods import MissingPrebuilt
from .asgi import FastQuery, Observe, endpoint as _endpoint, no_body
from .metrics import Metrics
from .options import AskRequest, QueryRequest, preset as preset_options, query_options, questions
from .pool import Overloaded, QueryPool, QueryTimeout
from .registry import Registry

log = logging.getLogger("hyperrag_fast.serve")


class Problem(Exception):
    """An error answer: HTTP status, metric kind, one-line reason."""

    def __init__(self, status: int, kind: str, reason: str, retry_after: int | None = None):
        super().__init__(reason)
        self.status, self.kind, self.reason, self.retry_after = status, kind, reason, retry_after


# ----------------------------------------------------------- response schemas (OpenAPI)
class ChunkOut(BaseModel):
    chunk_id: str
    doc_id: str
    title: str
    start: int
    end: int
    score: float
    text: str | None = None


class ResultOut(BaseModel):
    query: str
    chunks: list[ChunkOut]
    timings: dict[str, float]


class QueryResponse(BaseModel):
    """One question: ``query``/``chunks``/``timings`` at the top; a batch: ``results``."""

    index: str
    generation: str
    method: str
    query: str | None = None
    chunks: list[ChunkOut] | None = None
    timings: dict[str, float] | None = None
    results: list[ResultOut] | None = None


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body, ensure_ascii=False, allow_nan=False), status,
                    headers=headers, media_type="application/json")


def _plain(v: Any) -> Any:
    """Options as JSON (infinity as null, tuples as lists)."""
    if isinstance(v, float) and math.isinf(v):
        return None
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _options(o) -> dict[str, Any] | None:
    return None if o is None else _plain(dataclasses.asdict(o))


def _result(r, text: bool) -> dict[str, Any]:
    return {"query": r.query, "timings": {k: round(v, 4) for k, v in r.timings.items()},
            "chunks": [{"chunk_id": c.chunk_id, "doc_id": c.doc_id, "title": c.title,
                        "start": c.start, "end": c.end, "score": c.score,
                        **({"text": c.text} if text else {})} for c in r.chunks]}


def _reason(errors, request: Request) -> str:
    """One line for a body that failed validation (the first problem)."""
    e = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": ""}
    if e.get("type") == "json_invalid":
        return f"the body is not valid JSON ({e.get('ctx', {}).get('error', e['msg'])})"
    ctype = request.headers.get("content-type", "")
    if e.get("type") == "model_attributes_type" and "json" not in ctype:
        return f"send a JSON object with Content-Type: application/json (got {ctype or 'none'!r})"
    loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
    return f"{loc}: {e['msg']}" if loc else str(e["msg"])


def create_app(registry: Registry, pool: QueryPool, metrics: Metrics, *,
               timeout_s: float = 10.0, max_batch: int = 64, preset: str = "tuned",
               llm=None, ask_pool: QueryPool | None = None, ask_timeout_s: float = 120.0,
               on_loaded=None) -> FastAPI:
    """The service over ``registry``: queries run on ``pool`` with ``timeout_s`` each;
    ``llm`` (a ``ChatClient``) enables ``/v1/ask`` on ``ask_pool``. The lifespan loads
    the indexes on a background thread (``/readyz`` turns 200 after), and on shutdown
    stops following and waits for the pools' work."""
    metrics.watch_pool("query", pool)
    if ask_pool is not None:
        metrics.watch_pool("ask", ask_pool)

    @asynccontextmanager
    async def lifespan(app):
        registry.start(on_loaded)
        yield
        registry.stop()
        pool.shutdown(wait=True)
        if ask_pool is not None:
            ask_pool.shutdown(wait=True)

    app = FastAPI(title="hyperrag serve", version=__version__, lifespan=lifespan,
                  description="Multi-hop retrieval (STITCH-RAG, CODA) over live indexes.")
    app.add_middleware(FastQuery, answer=lambda *a: fast_query(*a))
    app.add_middleware(Observe, metrics=metrics)  # added last: outermost, sees both paths

    def fail(p: Problem, endpoint: str) -> Response:
        metrics.errors.labels(endpoint, p.kind).inc()
        headers = {"Retry-After": str(p.retry_after)} if p.retry_after is not None else None
        return _json({"error": p.reason}, p.status, headers)

    @app.exception_handler(Problem)
    async def _problem(request: Request, p: Problem):
        return fail(p, _endpoint(request.url.path))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        return fail(Problem(422, "bad_request", _reason(exc.errors(), request)),
                    _endpoint(request.url.path))

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException):
        kind = "not_found" if exc.status_code == 404 else "bad_request"
        return fail(Problem(exc.status_code, kind, str(exc.detail)), _endpoint(request.url.path))

    def internal(path: str, exc: Exception) -> Response:
        log.exception("internal error on %s", path)
        return fail(Problem(500, "internal", f"internal error ({type(exc).__name__}); see the "
                            "server log"), _endpoint(path))

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):
        return internal(request.url.path, exc)

    def live(name: str | None):
        ix = registry.get(name)
        if ix is None:
            raise Problem(404, "not_found", f"no index named {name!r}; serving "
                          f"{sorted(registry.indexes)}")
        if not registry.is_ready:
            raise Problem(503, "not_ready", registry.error or "not ready: loading the indexes",
                          retry_after=1)
        return ix

    async def run(p: QueryPool, fn, timeout: float):
        try:
            return await p.run(fn, timeout)
        except Overloaded as e:
            raise Problem(503, "shed", str(e), retry_after=1) from None
        except QueryTimeout as e:
            raise Problem(504, "timeout", str(e)) from None
        except MissingPrebuilt as e:
            raise Problem(400, "bad_request", str(e).splitlines()[0]) from None

    async def answer_query(name: str | None, req: QueryRequest, state: dict) -> dict[str, Any]:
        """The answer body of a validated query request; ``state["method"]``: its method."""
        ix = live(name)
        try:
            base = ix.options if req.preset is None else preset_options(
                req.preset, ix.current.manifest["embedder"]["name"])
            opts = query_options(base, req.method, req.top_k, req.k_nodes, req.k_chunks,
                                 req.stitch, req.hybrid)
            qs = questions(req.query, max_batch)
        except ValueError as e:
            raise Problem(400, "bad_request", str(e).splitlines()[0]) from None
        state["method"] = opts.method

        def job():
            with ix.lease() as g:
                return g.name, g.retriever.retrieve_batch(qs, opts)

        gen, results = await run(pool, job, timeout_s)
        metrics.queries.labels(ix.name, opts.method).inc(len(qs))
        head = {"index": ix.name, "generation": gen, "method": opts.method}
        if isinstance(req.query, str):
            return {**head, **_result(results[0], req.include_text)}
        return {**head, "results": [_result(r, req.include_text) for r in results]}

    async def do_query(name: str | None, req: QueryRequest, request: Request) -> Response:
        return _json(await answer_query(name, req, request.scope.setdefault("state", {})))

    async def fast_query(scope, name: str | None, body: bytes, send) -> bool:
        """Answer a query route's request whose body validates (see :class:`~.asgi.FastQuery`);
        False (nothing sent) when it does not: the routes below answer it."""
        try:
            req = QueryRequest.model_validate_json(body)
        except ValidationError:
            return False
        state = scope.setdefault("state", {})
        try:
            out = _json(await answer_query(name, req, state))
        except Problem as p:
            out = fail(p, _endpoint(scope["path"]))
        except Exception as e:  # noqa: BLE001 - as the routes' handler: logged, one line
            out = internal(scope["path"], e)
        await out(scope, no_body, send)
        return True

    @app.post("/v1/query", response_model=QueryResponse, summary="retrieve (default index)")
    async def query(req: QueryRequest, request: Request):
        return await do_query(None, req, request)

    @app.post("/v1/indexes/{name}/query", response_model=QueryResponse,
              summary="retrieve from the named index")
    async def query_named(name: str, req: QueryRequest, request: Request):
        return await do_query(name, req, request)

    async def do_ask(name: str | None, req: AskRequest, request: Request) -> Response:
        if llm is None:
            raise Problem(404, "not_found", "no LLM endpoint configured: start hyperrag serve "
                          "with --base-url/--model (or OPENAI_BASE_URL/OPENAI_MODEL)")
        ix = live(name)
        try:
            opts = query_options(ix.options, req.method)
            questions(req.question, 1)
        except ValueError as e:
            raise Problem(400, "bad_request", str(e).splitlines()[0]) from None
        request.state.method = opts.method
        from ..answer import answer
        from ..llm.client import LLMError

        def job():
            with ix.lease() as g:
                try:
                    ans = answer(g.retriever, req.question, llm, opts, top_k=req.top_k,
                                 max_context_chars=req.max_context_chars,
                                 temperature=req.temperature)
                except LLMError as e:
                    raise Problem(502, "upstream", f"LLM endpoint failed: {e}".splitlines()[0])
                return g.name, ans.to_dict()

        gen, out = await run(ask_pool, job, ask_timeout_s)
        return _json({"index": ix.name, "generation": gen, "method": opts.method,
                      "question": req.question, **out})

    ask_doc = dict(include_in_schema=llm is not None)

    @app.post("/v1/ask", summary="answer with citations (an LLM endpoint is configured)",
              **ask_doc)
    async def ask(req: AskRequest, request: Request):
        return await do_ask(None, req, request)

    @app.post("/v1/indexes/{name}/ask", summary="answer from the named index", **ask_doc)
    async def ask_named(name: str, req: AskRequest, request: Request):
        return await do_ask(name, req, request)

    def index_info(ix) -> dict[str, Any]:
        g = ix.current
        emb = g.retriever.embedder if g is not None and g.retriever is not None else None
        out = ix.info()
        out["options"] = _options(out["options"])
        return {**out, "embedder": emb and {"name": emb.name, "dim": int(emb.dim)}}

    @app.get("/v1/info", summary="indexes (manifest, generation, embedder), preset, pool")
    async def info():
        return _json({
            "version": __version__, "ready": registry.is_ready, "default": registry.default,
            "preset": preset, "options": _options(registry.get(None).options),
            "pool": {"workers": pool.workers, "queue": pool.queue, "timeout_s": timeout_s,
                     "max_batch": max_batch},
            "ask": llm is not None,
            "indexes": {n: index_info(ix) for n, ix in registry.indexes.items()}})

    @app.get("/v1/indexes/{name}/info", summary="one index")
    async def info_named(name: str):
        ix = registry.get(name)
        if ix is None:
            raise Problem(404, "not_found", f"no index named {name!r}")
        return _json(index_info(ix))

    @app.get("/healthz", summary="the process answers")
    async def healthz():
        return _json({"status": "ok"})

    @app.get("/readyz", summary="200 once every index is loaded and warmed")
    async def readyz():
        if registry.is_ready:
            return _json({"ready": True})
        return _json({"ready": False, "reason": registry.error or "loading"}, 503,
                     {"Retry-After": "1"})

    @app.get("/metrics", summary="Prometheus text format")
    async def prometheus():
        return Response(metrics.render(), media_type=metrics.content_type)

    return app
