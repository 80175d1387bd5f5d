"""A scriptable loopback server speaking the OpenAI HTTP protocol, for tests.

Every LLM-path test talks to this server instead of a network service. It binds
127.0.0.1 on a free port and serves from a background thread
(``http.server.ThreadingHTTPServer``, one thread per request).

Endpoints::

    POST /v1/chat/completions   (``"stream": true`` answers as SSE chunks)
    POST /v1/embeddings         (``encoding_format`` "float" or "base64")
    GET  /v1/models

Use the ``openai_server`` fixture (``tests/conftest.py``), or the class directly::

    with OpenAIServer() as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="test", max_retries=0)

Scripting. ``srv.chat`` and ``srv.embeddings`` are :class:`Endpoint` objects. Each
request takes the next entry of the endpoint's FIFO script (``enqueue(...)``) and,
when the script is empty, asks the endpoint's ``responder``. Script entries and
responder results are replies:

* ``str`` (chat) - a normal answer with that text (a JSON string is just text);
* :class:`Text` - an answer with finish_reason / usage control;
* ``list`` of vectors or :class:`Vectors` (embeddings) - explicit vectors;
* :class:`Status` - an HTTP error (429 with ``retry_after``, 500, 400, ...);
* :class:`Raw` - any body bytes/status (malformed protocol output);
* :class:`Slow` - sleep ``seconds`` then send ``then`` (default: the responder);
* :class:`Drop` - close the connection without any response;
* a callable ``f(request_body_dict) -> reply`` - decided per request.

``chat.responder(messages) -> reply`` defaults to echoing the last user message
(``"echo: ..."``); ``embeddings.responder(texts) -> reply`` defaults to
deterministic unit vectors from text hashes (:func:`hash_vector`, width
``embeddings.dim``, or the request's ``dimensions``). ``embeddings.shuffle = True``
returns the data items in reverse order (with correct ``index`` fields).
``endpoint.delay`` (seconds) delays every response, to make requests overlap.

Recording (thread-safe): ``endpoint.requests`` (list of parsed JSON bodies),
``endpoint.count`` and ``endpoint.count_where(pred)``, ``chat.count_mentioning(s)``
(requests whose messages contain ``s``), ``endpoint.in_flight`` /
``endpoint.max_in_flight``; ``endpoint.reset()`` clears script and log. A responder that raises answers 500 and is recorded in
``srv.errors``; the fixture fails the test at teardown if that list is non-empty.
"""
from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

__all__ = [
    "OpenAIServer", "Endpoint", "Text", "Status", "Raw", "Slow", "Drop", "Vectors",
    "hash_vector", "message_text",
]


# ---------------------------------------------------------------- reply types
@dataclass
class Text:
    """A normal chat answer."""

    content: str
    finish_reason: str = "stop"
    usage: dict | None = None


@dataclass
class Vectors:
    """An explicit embeddings answer: one vector per input, in input order."""

    vectors: list


@dataclass
class Status:
    """An HTTP error status with an OpenAI-style error body."""

    code: int
    message: str = "scripted error"
    retry_after: float | str | None = None
    headers: dict = field(default_factory=dict)


@dataclass
class Raw:
    """Arbitrary body bytes with a status and content type."""

    body: bytes | str
    status: int = 200
    content_type: str = "application/json"


@dataclass
class Slow:
    """Sleep ``seconds`` (woken early by server shutdown), then send ``then``."""

    seconds: float
    then: Any = None


@dataclass
class Drop:
    """Close the connection without sending a response."""


def hash_vector(text: str, dim: int) -> list[float]:
    """A deterministic unit vector for ``text`` (sha256-seeded, width ``dim``)."""
    out: list[float] = []
    counter = 0
    while len(out) < dim:
        block = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        out.extend((b - 127.5) / 127.5 for b in block)
        counter += 1
    v = out[:dim]
    n = sum(x * x for x in v) ** 0.5 or 1.0
    return [x / n for x in v]


def message_text(messages: list) -> str:
    """All message contents joined (string or list-of-parts content)."""
    parts = []
    for m in messages or []:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, str):
            parts.append(c)
        elif isinstance(c, list):
            parts.extend(p.get("text", "") for p in c if isinstance(p, dict))
    return "\n".join(parts)


def _echo(messages: list) -> str:
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    return "echo: " + (message_text(users[-1:]) if users else "")


# ------------------------------------------------------------------ endpoint
class Endpoint:
    """Script, default responder and request log of one endpoint."""

    def __init__(self, responder: Callable) -> None:
        self.responder = responder
        self.delay = 0.0
        self._script: deque = deque()
        self._requests: list[dict] = []
        self._lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0

    def enqueue(self, *replies: Any) -> "Endpoint":
        """Append replies to the FIFO script (used before the responder)."""
        with self._lock:
            self._script.extend(replies)
        return self

    @property
    def requests(self) -> list[dict]:
        with self._lock:
            return list(self._requests)

    @property
    def count(self) -> int:
        with self._lock:
            return len(self._requests)

    def count_where(self, pred: Callable[[dict], bool]) -> int:
        return sum(1 for b in self.requests if pred(b))

    def count_mentioning(self, s: str) -> int:
        """Requests whose messages (chat) or inputs (embeddings) contain ``s``."""
        def hit(b: dict) -> bool:
            if "messages" in b:
                return s in message_text(b["messages"])
            inp = b.get("input")
            return s in (inp if isinstance(inp, str) else "\n".join(map(str, inp or [])))
        return self.count_where(hit)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self._requests.clear()
            self.in_flight = self.max_in_flight = 0

    # internal
    def _begin(self, body: dict) -> Any:
        with self._lock:
            self._requests.append(body)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self._script.popleft() if self._script else None

    def _end(self) -> None:
        with self._lock:
            self.in_flight -= 1


class EmbeddingsEndpoint(Endpoint):
    def __init__(self, dim: int) -> None:
        super().__init__(self._hash_responder)
        self.dim = dim
        self.shuffle = False

    def _hash_responder(self, texts: list[str], dim: int | None = None) -> Vectors:
        return Vectors([hash_vector(t, dim or self.dim) for t in texts])


# -------------------------------------------------------------------- server
class OpenAIServer:
    """The loopback server. ``base_url`` ends in ``/v1`` (pass it to ``openai.OpenAI``)."""

    def __init__(self, embedding_dim: int = 16, model: str = "test-model") -> None:
        self.model = model
        self.chat = Endpoint(_echo)
        self.embeddings = EmbeddingsEndpoint(embedding_dim)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> "OpenAIServer":
        handler = type("Handler", (_Handler,), {"srv": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)

    def __enter__(self) -> "OpenAIServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def sleep(self, seconds: float) -> None:
        """Sleep, waking early when the server stops."""
        self._stop.wait(seconds)


# ------------------------------------------------------------------- handler
class _Handler(BaseHTTPRequestHandler):
    srv: OpenAIServer
    protocol_version = "HTTP/1.0"

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._json(200, {"object": "list", "data": [
                {"id": self.srv.model, "object": "model", "created": 0, "owned_by": "test"}]})
        else:
            self._json(404, _err("not found: " + self.path, "not_found"))

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, _err("request body is not JSON", "invalid_request_error"))
            return
        path = self.path.split("?")[0].rstrip("/")
        ep = {"/v1/chat/completions": self.srv.chat, "/v1/embeddings": self.srv.embeddings}.get(path)
        if ep is None:
            self._json(404, _err("not found: " + path, "not_found"))
            return
        reply = ep._begin(body)
        try:
            if ep.delay:
                self.srv.sleep(ep.delay)
            self._serve(ep, body, reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (e.g. it timed out)
        finally:
            ep._end()

    def _serve(self, ep: Endpoint, body: dict, reply: Any) -> None:
        try:
            while True:
                if callable(reply) and not isinstance(reply, type):
                    reply = reply(body)
                elif isinstance(reply, Slow):
                    self.srv.sleep(reply.seconds)
                    reply = reply.then
                elif reply is None:
                    reply = self._default(ep, body)
                    if reply is None:
                        raise TypeError("responder returned None")
                else:
                    break
        except Exception as e:  # a responder bug: make it loud
            self.srv.errors.append(f"{type(e).__name__}: {e}")
            self._json(500, _err(f"test responder raised {type(e).__name__}: {e}", "server_error"))
            return
        self._send(ep, body, reply)

    def _default(self, ep: Endpoint, body: dict) -> Any:
        if ep is self.srv.chat:
            return ep.responder(body.get("messages") or [])
        inp = body.get("input")
        texts = [inp] if isinstance(inp, str) else list(inp or [])
        if ep.responder == ep._hash_responder:
            return ep._hash_responder(texts, body.get("dimensions"))
        return ep.responder(texts)

    def _send(self, ep: Endpoint, body: dict, reply: Any) -> None:
        if isinstance(reply, Drop):
            self.close_connection = True
            self.wfile.flush()
            return
        if isinstance(reply, Status):
            headers = dict(reply.headers)
            if reply.retry_after is not None:
                headers["Retry-After"] = str(reply.retry_after)
            kind = "rate_limit_exceeded" if reply.code == 429 else "server_error"
            self._json(reply.code, _err(reply.message, kind), headers)
        elif isinstance(reply, Raw):
            data = reply.body.encode() if isinstance(reply.body, str) else reply.body
            self._bytes(reply.status, data, reply.content_type)
        elif ep is self.srv.chat:
            text = reply if isinstance(reply, Text) else Text(str(reply))
            if body.get("stream"):
                self._stream(body, text)
            else:
                self._json(200, self._completion(body, text))
        else:
            vecs = reply.vectors if isinstance(reply, Vectors) else reply
            self._json(200, self._embedding(body, vecs))

    # response bodies
    def _usage(self, body: dict, text: Text) -> dict:
        if text.usage is not None:
            return text.usage
        p = len(message_text(body.get("messages")).split())
        c = len(text.content.split())
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    def _completion(self, body: dict, text: Text) -> dict:
        return {
            "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or self.srv.model,
            "choices": [{"index": 0, "finish_reason": text.finish_reason,
                         "message": {"role": "assistant", "content": text.content}}],
            "usage": self._usage(body, text),
        }

    def _stream(self, body: dict, text: Text) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        base = {"id": "chatcmpl-test", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": body.get("model") or self.srv.model}
        c = text.content
        pieces = [c[i:i + 8] for i in range(0, len(c), 8)] or [""]
        events = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                        "finish_reason": None}]}]
        events += [{**base, "choices": [{"index": 0, "delta": {"content": p},
                                         "finish_reason": None}]} for p in pieces]
        events.append({**base, "choices": [{"index": 0, "delta": {},
                                            "finish_reason": text.finish_reason}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({**base, "choices": [], "usage": self._usage(body, text)})
        for ev in events:
            self.wfile.write(b"data: " + json.dumps(ev).encode() + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _embedding(self, body: dict, vecs: list) -> dict:
        b64 = body.get("encoding_format") == "base64"
        data = []
        for i, v in enumerate(vecs):
            emb: Any = [float(x) for x in v]
            if b64:
                emb = base64.b64encode(struct.pack(f"<{len(emb)}f", *emb)).decode()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        if self.srv.embeddings.shuffle:
            data.reverse()
        inp = body.get("input")
        n = len(str(inp).split())
        return {"object": "list", "data": data, "model": body.get("model") or self.srv.model,
                "usage": {"prompt_tokens": n, "total_tokens": n}}

    def _json(self, status: int, obj: dict, headers: dict | None = None) -> None:
        self._bytes(status, json.dumps(obj).encode(), "application/json", headers)

    def _bytes(self, status: int, data: bytes, ctype: str, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _err(message: str, kind: str) -> dict:
    return {"error": {"message": message, "type": kind, "code": kind, "param": None}}
