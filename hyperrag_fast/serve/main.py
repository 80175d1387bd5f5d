"""``hyperrag serve``: uvicorn running :func:`~hyperrag_fast.serve.app.create_app` on a
socket bound here (port 0 = an ephemeral port; the bound address is printed and, with
``--port-file``, written), until SIGINT/SIGTERM: then uvicorn stops accepting, finishes
the requests in flight (up to ``--grace`` seconds) and the pools drain
(docs/architecture.md §11)."""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from pathlib import Path

from ..embed.onnx_encoder import default_threads
from ..store import read_manifest


#: the default queue per worker (``--queue``): admission is bounded by depth, not by wait
#: (docs/architecture.md §11, "Pool and overload")
QUEUE_PER_WORKER = 2


def index_specs(items: list[str]) -> dict[str, str]:
    """``NAME=PATH`` or ``PATH`` (named after its folder) -> {name: path}; each checked."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep:
            name, path = Path(item.rstrip("/")).name or item, item
        if not name or not path:
            raise ValueError(f"index {item!r}: give PATH or NAME=PATH")
        if name in out:
            raise ValueError(f"two indexes named {name!r}: name them, NAME=PATH")
        read_manifest(path)  # a missing or damaged index fails here, in one line
        out[name] = path
    return out


def _llm(a):
    if not (a.base_url or a.model or os.environ.get("OPENAI_BASE_URL")):
        return None
    from ..llm.client import ChatClient
    return ChatClient(model=a.model, base_url=a.base_url, api_key=a.api_key,
                      timeout=a.llm_timeout)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted connections inherit it (Linux): a response written in two parts is not
    # held back by Nagle's algorithm until the client's delayed ACK (~40 ms); uvloop sets
    # it on each connection itself, asyncio's loop (no uvloop, e.g. Windows) does not
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ValueError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.set_inheritable(True)
    return sock


def _server(config):
    """A uvicorn server whose SIGINT/SIGTERM end in a graceful exit with status 0 (uvicorn
    itself re-raises the signal once done, so the process would die by it)."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            sigs = (signal.SIGINT, signal.SIGTERM)
            previous = {s: signal.signal(s, self.handle_exit) for s in sigs}
            try:
                yield
            finally:
                for s, h in previous.items():
                    signal.signal(s, h)

    return Server(config)


def build(a, embedders=None):
    """(app, registry, pool) from ``hyperrag serve`` arguments."""
    from .metrics import Metrics
    from .options import preset, query_options
    from .pool import QueryPool
    from .registry import Registry
    from ..methods import needs
    specs = index_specs(a.indexes)
    if a.method is not None:
        query_options(preset(a.preset, None), a.method)  # an unknown method fails here

    def opts(embedder_name: str):
        return query_options(preset(a.preset, embedder_name), a.method)

    structures = sorted({s for m in (a.methods or []) + [a.method or preset(a.preset, None).method]
                         for s in needs(m)})
    workers = a.workers or default_threads()
    queue = QUEUE_PER_WORKER * workers if a.queue is None else a.queue
    metrics = Metrics()
    registry = Registry(specs, opts, metrics, embedders=embedders, embed_threads=a.embed_threads,
                        verify=not a.no_verify, structures=structures, poll_s=a.poll)
    pool = QueryPool(workers, queue, max_wait=a.max_wait or None)
    llm = _llm(a)
    ask_pool = QueryPool(a.llm_concurrency, a.llm_concurrency, "hyperrag-ask") if llm else None
    return registry, pool, metrics, dict(timeout_s=a.timeout, max_batch=a.max_batch,
                                         preset=a.preset, llm=llm, ask_pool=ask_pool,
                                         ask_timeout_s=a.llm_timeout * 2)


def serve(a) -> None:
    """Run the server until a signal; ValueError for a failed first load (exit 2)."""
    import uvicorn

    from ..lean import settle
    from .app import create_app
    logging.basicConfig(level=getattr(logging, a.log_level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    registry, pool, metrics, kw = build(a)
    sock = _bind(a.host, a.port)
    host, port = sock.getsockname()[:2]
    failed: list[str] = []
    server: uvicorn.Server | None = None
    started = threading.Event()

    def loaded(error: str | None) -> None:
        if error is not None:
            failed.append(error)
            started.wait(30)
            server.should_exit = True
            return
        settle()  # heap trim; the collector back on (see hyperrag_fast.lean)
        logging.getLogger("hyperrag_fast.serve").info("ready: %s on http://%s:%d",
                                                      ", ".join(registry.indexes), host, port)

    app = create_app(registry, pool, metrics, on_loaded=loaded, **kw)
    config = uvicorn.Config(app, log_level=a.log_level, access_log=False, lifespan="on",
                            timeout_graceful_shutdown=a.grace, timeout_keep_alive=30)
    server = _server(config)
    print(f"hyperrag serve: listening on http://{host}:{port}", file=sys.stderr, flush=True)
    if a.port_file:
        Path(a.port_file).write_text(f"{port}\n", encoding="utf-8")
    started.set()
    server.run(sockets=[sock])
    if failed:
        raise ValueError(failed[0])
