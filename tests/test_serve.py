"""``hyperrag serve`` over real HTTP on an ephemeral loopback port (issue 25): query and
batch, validation errors, 503 + Retry-After under a tiny queue, timeout, readiness,
generation switches while requests run (zero failures, the in-flight request finishing on
the old generation), a damaged generation, graceful shutdown, ``/v1/ask`` against the
loopback OpenAI server, and the CLI as a subprocess. Small indexes (regex extractor,
hashing embedder) built here; every wait is an event or a poll with a deadline."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

from hyperrag_fast import publish, store  # noqa: E402
from hyperrag_fast.embed.hashing import HashingEmbedder  # noqa: E402
from hyperrag_fast.extract.offline import RegexExtractor  # noqa: E402
from hyperrag_fast.index import HyperIndex  # noqa: E402
from hyperrag_fast.retriever import Retriever  # noqa: E402
from hyperrag_fast.serve.app import create_app  # noqa: E402
from hyperrag_fast.serve.main import _bind  # noqa: E402
from hyperrag_fast.serve.metrics import Metrics  # noqa: E402
from hyperrag_fast.serve.options import PRESETS  # noqa: E402
from hyperrag_fast.serve.pool import QueryPool  # noqa: E402
from hyperrag_fast.serve.registry import Registry  # noqa: E402

A = [{"id": "ada", "title": "Ada Lovelace", "text": "Ada Lovelace was the daughter of Lord Byron. "
      "She worked with Charles Babbage."},
     {"id": "byron", "title": "Lord Byron", "text": "Lord Byron was an English poet. He died at "
      "Missolonghi in Greece."},
     {"id": "babbage", "title": "Charles Babbage", "text": "Charles Babbage was born in London. "
      "He designed the Analytical Engine."}]
B1 = [{"id": "engine", "title": "Analytical Engine", "text": "The Analytical Engine used punched "
       "cards. The idea came from the Jacquard Loom."}]
B2 = [{"id": "loom", "title": "Jacquard Loom", "text": "Joseph Marie Jacquard demonstrated the "
       "Jacquard Loom in Lyon."}]
OTHER = [{"id": "curie", "title": "Marie Curie", "text": "Marie Curie was born in Warsaw. "
          "Warsaw lies on the Vistula."}]
Q = "Where did the father of Ada Lovelace die?"
DEADLINE = 60.0
#: the first load warms the kernels: on a cold Numba cache that compiles them (minutes on a
#: loaded 2-core machine), so waits for readiness get longer than the other waits
LOAD_DEADLINE = 600.0


def _build(path: Path, docs) -> Path:
    HyperIndex.build(docs, RegexExtractor(), HashingEmbedder(), progress=False).save(path)
    return path


def _publish(path: Path, docs) -> str:
    """``hyperrag add`` in-process: the writer lock, load, add, save (a new generation)."""
    with publish.writer_lock(path, 30.0, create=False):
        ix = HyperIndex.load(path, HashingEmbedder(), extractor=RegexExtractor())
        ix.add(docs, progress=False)
        ix.save(path)
    return store.current_generation(path)


def _until(pred, what: str, deadline: float = DEADLINE):
    t = time.monotonic()
    while time.monotonic() - t < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def base_index(tmp_path_factory) -> Path:
    return _build(tmp_path_factory.mktemp("serve") / "ix", A)


@pytest.fixture
def index(base_index, tmp_path) -> Path:
    """A private copy (tests that publish write to it)."""
    return Path(shutil.copytree(base_index, tmp_path / "ix"))


class Gate:
    """An embedder that blocks while ``armed`` until ``open()``; ``entered`` is set by a
    call that blocks (so a test knows a request is in flight)."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.name, self.dim = self.inner.name, self.inner.dim
        self.armed = False
        self.entered = threading.Event()
        self._open = threading.Event()

    def embed(self, texts):
        if self.armed:
            self.entered.set()
            assert self._open.wait(DEADLINE), "gate never opened"
        return self.inner.embed(texts)

    def open(self) -> None:
        self._open.set()


@contextmanager
def serving_app(app, grace: float = 10.0):
    """``app`` on uvicorn in a thread on an ephemeral loopback port -> (base URL, server)."""
    sock = _bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on",
                                           timeout_graceful_shutdown=grace))
    t = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    t.start()
    try:
        _until(lambda: server.started, "uvicorn to start")
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", server
    finally:
        server.should_exit = True
        t.join(DEADLINE)
        sock.close()
    assert not t.is_alive()


@contextmanager
def serving(specs: dict[str, Path], workers: int = 2, queue: int = 8, timeout_s: float = 10.0,
            embedder=None, factory=None, poll_s: float = 0.05, llm=None, wait_ready=True,
            grace: float = 10.0):
    """A server in this process (uvicorn on a thread) -> (base URL, registry, uvicorn.Server)."""
    metrics = Metrics()
    emb = embedder or HashingEmbedder()
    registry = Registry({k: str(v) for k, v in specs.items()}, PRESETS["tuned"], metrics,
                        embedders=factory or (lambda name: emb), poll_s=poll_s)
    pool = QueryPool(workers, queue)
    ask_pool = QueryPool(2, 2, "hyperrag-ask") if llm is not None else None
    app = create_app(registry, pool, metrics, timeout_s=timeout_s, max_batch=4, llm=llm,
                     ask_pool=ask_pool)
    with serving_app(app, grace) as (base, server):
        if wait_ready:
            _until(lambda: registry.ready.is_set(), "the indexes to load", LOAD_DEADLINE)
            assert registry.error is None, registry.error
        yield base, registry, server


def _metric(base: str, line_start: str) -> float:
    text = httpx.get(f"{base}/metrics").text
    for line in text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


# ---------------------------------------------------------------------------- queries
def test_query_batch_named_indexes_info_openapi_metrics(base_index, tmp_path):
    other = _build(tmp_path / "other", OTHER)
    direct = Retriever(HyperIndex.load(base_index, HashingEmbedder()))
    with serving({"main": base_index, "other": other}) as (base, _, _):
        with httpx.Client(base_url=base) as c:
            r = c.post("/v1/query", json={"query": Q, "top_k": 2})
            assert r.status_code == 200, r.text
            body = r.json()
            want = direct.retrieve(Q, direct.options.with_top_k(2))
            assert [x["chunk_id"] for x in body["chunks"]] == [x.chunk_id for x in want.chunks]
            first = body["chunks"][0]
            assert set(first) == {"chunk_id", "doc_id", "title", "start", "end", "score", "text"}
            assert first["score"] == pytest.approx(want.chunks[0].score)
            assert set(body["timings"]) == {"embed_ms", "candidates_ms", "graph_ms"}
            assert (body["index"], body["method"]) == ("main", "stitch")
            assert body["generation"] == store.current_generation(base_index)

            batch = c.post("/v1/query", json={"query": [Q, "Charles Babbage"], "top_k": 2,
                                              "include_text": False}).json()
            assert [r_["query"] for r_ in batch["results"]] == [Q, "Charles Babbage"]
            assert batch["results"][0]["chunks"][0]["chunk_id"] == body["chunks"][0]["chunk_id"]
            assert "text" not in batch["results"][0]["chunks"][0]

            dense = c.post("/v1/query", json={"query": Q, "method": "dense", "top_k": 3}).json()
            assert dense["method"] == "dense" and len(dense["chunks"]) == 3

            # each index isolated: the named route answers from its own documents only
            o = c.post("/v1/indexes/other/query", json={"query": "Where was Marie Curie born?"})
            assert o.status_code == 200 and {x["doc_id"] for x in o.json()["chunks"]} == {"curie"}
            assert c.post("/v1/indexes/main/query", json={"query": Q}).json()["index"] == "main"

            info = c.get("/v1/info").json()
            assert info["default"] == "main" and set(info["indexes"]) == {"main", "other"}
            m = info["indexes"]["main"]
            assert m["generation"] == body["generation"]
            assert m["manifest"]["counts"]["documents"] == 3
            assert m["embedder"] == {"name": HashingEmbedder().name, "dim": 64}
            assert info["preset"] == "tuned" and info["options"]["method"] == "stitch"
            assert m["options"] == info["options"]  # config.preset_for(the index's embedder)
            paper = c.post("/v1/query", json={"query": Q, "preset": "paper"}).json()
            assert paper["method"] == "stitch_paper"
            assert c.get("/healthz").status_code == 200
            assert c.get("/readyz").json() == {"ready": True}
            paths = c.get("/openapi.json").json()["paths"]
            assert {"/v1/query", "/v1/indexes/{name}/query", "/v1/info", "/metrics"} <= set(paths)
            assert "/v1/ask" not in paths  # no LLM endpoint configured
        # the middleware counts a request once its response is sent: poll
        _until(lambda: _metric(base, 'hyperrag_requests_total{endpoint="/v1/query",'
                                     'method="stitch",status="200"}') == 2, "the request count")
        _until(lambda: _metric(base, 'hyperrag_request_seconds_count{endpoint="/v1/query",'
                                     'method="dense"}') == 1, "the latency count")
        assert _metric(base, 'hyperrag_queries_total{index="main",method="stitch"}') == 4
        gen_seq = float(body["generation"].split("-")[1])
        assert _metric(base, f'hyperrag_generation{{generation="{body["generation"]}",'
                             f'index="main"}}') == gen_seq
        assert _metric(base, 'hyperrag_ready') == 1
        assert _metric(base, 'hyperrag_queue_depth{pool="query"}') == 0



def _answer(r) -> dict:
    """A query answer without its timings (which differ from run to run)."""
    body = r.json()
    for x in [body, *body.get("results", [])]:
        x.pop("timings", None)
    return body


def test_the_fast_path_and_the_routes_answer_alike(base_index, tmp_path, monkeypatch):
    """A valid query is answered by asgi.FastQuery; with its size limit below any body the
    routes answer it (the body replayed to them): the same answers either way."""
    from hyperrag_fast.serve import asgi
    other = _build(tmp_path / "other", OTHER)
    calls = [("/v1/query", {"query": Q, "top_k": 2}),
             ("/v1/query", {"query": [Q, "Charles Babbage"], "include_text": False}),
             ("/v1/indexes/other/query", {"query": "Where was Marie Curie born?", "method": "dense"}),
             ("/v1/indexes/nope/query", {"query": Q}),
             ("/v1/query", {"query": ""})]
    with serving({"main": base_index, "other": other}) as (base, _, _), \
            httpx.Client(base_url=base) as c:
        fast = [(r.status_code, _answer(r)) for r in (c.post(u, json=b) for u, b in calls)]
        monkeypatch.setattr(asgi.FastQuery, "LIMIT", -1)
        routed = [(r.status_code, _answer(r)) for r in (c.post(u, json=b) for u, b in calls)]
        assert [s for s, _ in fast] == [200, 200, 200, 404, 400]
        assert fast == routed
        _until(lambda: _metric(base, 'hyperrag_requests_total{endpoint="/v1/query",'
                                     'method="stitch",status="200"}') == 4, "the request count")
        assert _metric(base, 'hyperrag_errors_total{endpoint="/v1/indexes/{name}/query",'
                             'kind="not_found"}') == 2

BAD = [
    ({"query": ""}, 400, "empty query"),
    ({"query": []}, 400, "empty batch"),
    ({"query": ["a", "b", "c", "d", "e"]}, 400, "at most 4"),
    ({"query": "x", "method": "nope"}, 400, "unknown method 'nope'"),
    ({"query": "x", "top_k": 0}, 422, "top_k"),
    ({"query": "x", "top_k": "many"}, 422, "top_k"),
    ({"query": "x", "stitch": {"damping": 1.5}}, 400, "damping must be in [0, 1)"),
    ({"query": "x", "stitch": {"delta": "high"}}, 400, "stitch.delta must be of type float"),
    ({"query": "x", "stitch": {"nope": 1}}, 400, "unknown stitch option 'nope'"),
    ({"query": "x", "hybrid": {"seeds": "magic"}}, 400, "seeds must be one of"),
    ({"query": "x", "k_nodes": -1}, 422, "k_nodes"),
    ({"query": "x", "method": "coda"}, 400, "needs the prebuilt structure 'coda'"),
    ({"question": "x"}, 422, "query: Field required"),
    ({"query": "x", "preset": "fast"}, 422, "preset"),
]


def test_bad_requests_get_a_one_line_4xx(base_index):
    with serving({"main": base_index}) as (base, _, _), httpx.Client(base_url=base) as c:
        for body, status, reason in BAD:
            r = c.post("/v1/query", json=body)
            assert r.status_code == status, (body, r.text)
            err = r.json()["error"]
            assert reason in err and "\n" not in err and "Traceback" not in r.text, (body, err)
        r = c.post("/v1/query", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 422 and "not valid JSON" in r.json()["error"]
        r = c.post("/v1/query", content=b"query=x",
                   headers={"content-type": "application/x-www-form-urlencoded"})
        assert r.status_code == 422 and "Content-Type: application/json" in r.json()["error"]
        r = c.post("/v1/indexes/nope/query", json={"query": "x"})
        assert r.status_code == 404 and "no index named 'nope'" in r.json()["error"]
        r = c.post("/v1/ask", json={"question": "x"})
        assert r.status_code == 404 and "no LLM endpoint configured" in r.json()["error"]
        assert c.get("/v1/nothing").status_code == 404
        assert _metric(base, 'hyperrag_errors_total{endpoint="/v1/query",kind="bad_request"}') \
            == len(BAD) + 2


# ----------------------------------------------------------------- overload, timeout
def test_tiny_queue_sheds_with_503_and_retry_after(base_index):
    gate = Gate()
    # the held request must not reach the server's own deadline while the test polls (a
    # loaded CI machine took > 10 s here): this test is about shedding, not about timeouts
    with serving({"main": base_index}, workers=1, queue=1, embedder=gate,
                 timeout_s=DEADLINE) as (base, _, _):
        gate.armed = True
        out: list = []
        first = threading.Thread(target=lambda: out.append(
            httpx.post(f"{base}/v1/query", json={"query": Q}, timeout=DEADLINE)))
        first.start()
        assert gate.entered.wait(DEADLINE)  # the one worker is busy
        second = threading.Thread(target=lambda: out.append(
            httpx.post(f"{base}/v1/query", json={"query": Q}, timeout=DEADLINE)))
        second.start()  # queued: the one queue slot
        _until(lambda: _metric(base, 'hyperrag_queue_depth{pool="query"}') == 1, "a queued request")
        r = httpx.post(f"{base}/v1/query", json={"query": Q})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert "queue is full" in r.json()["error"]
        gate.open()
        first.join(DEADLINE)
        second.join(DEADLINE)
        assert [x.status_code for x in out] == [200, 200]
        assert _metric(base, 'hyperrag_errors_total{endpoint="/v1/query",kind="shed"}') == 1
        _until(lambda: _metric(base, 'hyperrag_requests_total{endpoint="/v1/query",'
                                     'method="stitch",status="503"}') == 1, "the 503 count")


def test_a_request_queued_past_max_wait_is_shed(base_index):
    gate = Gate()
    metrics = Metrics()
    registry = Registry({"main": str(base_index)}, PRESETS["tuned"], metrics,
                        embedders=lambda name: gate)
    pool = QueryPool(1, 4, max_wait=0.3)  # well above a thread wake-up on a busy machine
    with serving_app(create_app(registry, pool, metrics)) as (base, _):
        _until(lambda: registry.ready.is_set(), "the load", LOAD_DEADLINE)
        gate.armed = True
        out: list = []
        first = threading.Thread(target=lambda: out.append(
            httpx.post(f"{base}/v1/query", json={"query": Q}, timeout=DEADLINE)))
        first.start()
        assert gate.entered.wait(DEADLINE)
        second = threading.Thread(target=lambda: out.append(
            httpx.post(f"{base}/v1/query", json={"query": Q}, timeout=DEADLINE)))
        second.start()
        _until(lambda: pool.queued == 1, "a queued request")
        time.sleep(0.4)  # the condition under test is a wait longer than max_wait
        gate.open()
        first.join(DEADLINE)
        second.join(DEADLINE)
        assert sorted(x.status_code for x in out) == [200, 503]
        shed = next(x for x in out if x.status_code == 503)
        assert shed.headers["retry-after"] == "1" and "over the 300 ms" in shed.json()["error"]



def test_by_default_a_long_wait_in_the_queue_is_not_shed(base_index):
    """The default policy bounds admission by depth only (``--max-wait 0``, ``--queue`` 2 x
    workers): a request within the bound waits as long as it takes (up to ``--timeout``)."""
    from hyperrag_fast.cli import build_parser
    from hyperrag_fast.serve.main import build
    a = build_parser().parse_args(["serve", str(base_index), "--workers", "3"])
    _, pool, _, _ = build(a, embedders=lambda name: HashingEmbedder())
    assert (pool.workers, pool.queue, pool.max_wait) == (3, 6, None)
    pool.shutdown()
    gate = Gate()
    with serving({"main": base_index}, workers=1, queue=1, embedder=gate) as (base, _, _):
        gate.armed = True
        out: list = []
        ts = [threading.Thread(target=lambda: out.append(
            httpx.post(f"{base}/v1/query", json={"query": Q}, timeout=DEADLINE)))
            for _ in range(2)]
        ts[0].start()
        assert gate.entered.wait(DEADLINE)
        ts[1].start()
        _until(lambda: _metric(base, 'hyperrag_queue_depth{pool="query"}') == 1, "a queued request")
        time.sleep(0.4)  # the condition under test: a wait far beyond the old 50 ms bound
        gate.open()
        for t in ts:
            t.join(DEADLINE)
        assert [x.status_code for x in out] == [200, 200]

def test_request_timeout_answers_504(base_index):
    gate = Gate()
    with serving({"main": base_index}, workers=1, queue=2, timeout_s=0.3, embedder=gate) as \
            (base, _, _):
        gate.armed = True
        r = httpx.post(f"{base}/v1/query", json={"query": Q}, timeout=DEADLINE)
        assert r.status_code == 504 and "timeout" in r.json()["error"]
        gate.open()
        gate.armed = False
        _until(lambda: _metric(base, 'hyperrag_in_flight{pool="query"}') == 0, "the worker to finish")
        assert httpx.post(f"{base}/v1/query", json={"query": Q}).status_code == 200


# -------------------------------------------------------------------------- readiness
def test_ready_only_after_load_and_warmup(base_index):
    loading = threading.Event()
    release = threading.Event()

    def slow_factory(name):
        loading.set()
        assert release.wait(DEADLINE)
        return HashingEmbedder()

    with serving({"main": base_index}, factory=slow_factory, wait_ready=False) as \
            (base, registry, _), httpx.Client(base_url=base) as c:
        assert loading.wait(DEADLINE)
        assert c.get("/healthz").status_code == 200
        r = c.get("/readyz")
        assert r.status_code == 503 and r.json()["ready"] is False and r.headers["retry-after"]
        q = c.post("/v1/query", json={"query": Q})
        assert q.status_code == 503 and "loading" in q.json()["error"]
        assert _metric(base, "hyperrag_ready") == 0
        release.set()
        _until(lambda: c.get("/readyz").status_code == 200, "/readyz to turn 200")
        assert registry.indexes["main"].current.open_s > 0  # warmed before ready
        assert c.post("/v1/query", json={"query": Q}).status_code == 200


def test_a_failed_first_load_is_reported_by_readyz(tmp_path, base_index):
    broken = Path(shutil.copytree(base_index, tmp_path / "broken"))
    gen = broken / store.current_generation(broken)
    (gen / "lexical.json").write_text("{", encoding="utf-8")
    with serving({"main": broken}, wait_ready=False) as (base, registry, _):
        _until(lambda: registry.ready.is_set(), "the load to finish")
        r = httpx.get(f"{base}/readyz")
        assert r.status_code == 503 and "index 'main'" in r.json()["reason"]


# -------------------------------------------------------------------- live updates
def test_generations_switch_under_load_with_zero_failed_requests(index):
    with serving({"main": index}, poll_s=0.05) as (base, registry, _):
        g1 = store.current_generation(index)
        stop = threading.Event()
        seen: list[tuple[int, str]] = []
        lock = threading.Lock()

        def client():
            with httpx.Client(base_url=base, timeout=DEADLINE) as c:
                while not stop.is_set():
                    r = c.post("/v1/query", json={"query": "the Analytical Engine punched cards"})
                    with lock:
                        seen.append((r.status_code, r.json().get("generation", r.text)))

        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        try:
            _until(lambda: len(seen) >= 20, "requests before the first publish")
            gens = [g1]
            for docs in (B1, B2):
                gens.append(_publish(index, docs))
                _until(lambda: any(g == gens[-1] for _, g in seen[-8:]), f"{gens[-1]} serving")
                n = len(seen)
                _until(lambda: len(seen) >= n + 20, "requests after the switch")
        finally:
            stop.set()
            for t in threads:
                t.join(DEADLINE)
        assert {s for s, _ in seen} == {200}, [x for x in seen if x[0] != 200][:3]
        assert {g for _, g in seen} == set(gens)
        order = [gens.index(g) for _, g in seen]
        # per client the generation never goes back; overall a request that started
        # after a switch never saw an older generation for long: the tail is the newest
        assert order[-10:] == [2] * 10
        r = httpx.post(f"{base}/v1/query", json={"query": "the Analytical Engine punched cards"})
        assert "engine" in {c["doc_id"] for c in r.json()["chunks"]}
        assert registry.indexes["main"].switches == 2
        assert _metric(base, 'hyperrag_generation_switches_total{index="main"}') == 2
        _until(lambda: _metric(base, 'hyperrag_generations_released_total{index="main"}') == 2,
               "both old generations released")
        assert _metric(base, f'hyperrag_generation{{generation="{gens[2]}",index="main"}}') == 3
        assert f'generation="{g1}"' not in httpx.get(f"{base}/metrics").text


def test_in_flight_request_finishes_on_the_old_generation(index):
    gate = Gate()
    with serving({"main": index}, embedder=gate) as (base, registry, _):
        g1 = store.current_generation(index)
        old = registry.indexes["main"].current
        gate.armed = True
        out: list = []
        t = threading.Thread(target=lambda: out.append(
            httpx.post(f"{base}/v1/query", json={"query": Q}, timeout=DEADLINE)))
        t.start()
        assert gate.entered.wait(DEADLINE)  # leased g1, blocked in the embedder
        gate.armed = False  # the new generation's warm-up and later requests pass
        g2 = _publish(index, B1)
        _until(lambda: registry.indexes["main"].current.name == g2, "the switch")
        r = httpx.post(f"{base}/v1/query", json={"query": Q})
        assert r.status_code == 200 and r.json()["generation"] == g2
        assert old.retriever is not None and old.refs == 1  # held by the blocked request
        assert _metric(base, 'hyperrag_generations_released_total{index="main"}') == 0
        gate.open()
        t.join(DEADLINE)
        assert out[0].status_code == 200 and out[0].json()["generation"] == g1
        assert old.retriever is None  # released by its last request
        assert _metric(base, 'hyperrag_generations_released_total{index="main"}') == 1


def test_damaged_generation_keeps_the_old_one_and_is_reported(index):
    with serving({"main": index}) as (base, registry, _):
        g1 = store.current_generation(index)
        bad = "gen-000099-deadbeef"
        shutil.copytree(index / g1, index / bad)
        vec = index / bad / "vectors" / "chunk_vec.npy"
        data = bytearray(vec.read_bytes())
        data[-1] ^= 0xFF  # checksum mismatch
        vec.write_bytes(bytes(data))
        tmp = index / "CURRENT.tmp"
        tmp.write_text(bad + "\n", encoding="utf-8")
        os.replace(tmp, index / "CURRENT")
        _until(lambda: _metric(base, 'hyperrag_generation_failures_total{index="main"}') == 1,
               "the rejection")
        r = httpx.post(f"{base}/v1/query", json={"query": Q})
        assert r.status_code == 200 and r.json()["generation"] == g1
        failure = httpx.get(f"{base}/v1/info").json()["indexes"]["main"]["last_failure"]
        assert failure["generation"] == bad and "chunk_vec" in failure["reason"]
        assert _metric(base, f'hyperrag_generation_failed{{generation="{bad}",index="main"}}') == 1
        assert registry.indexes["main"].switches == 0
        # a good publish afterwards is followed as usual
        shutil.rmtree(index / bad)
        tmp.write_text(g1 + "\n", encoding="utf-8")
        os.replace(tmp, index / "CURRENT")
        g2 = _publish(index, B1)
        _until(lambda: httpx.post(f"{base}/v1/query", json={"query": Q}).json()["generation"] == g2,
               "the good generation")


# ---------------------------------------------------------------------------- shutdown
def test_graceful_shutdown_finishes_in_flight_requests(base_index):
    gate = Gate()
    with serving({"main": base_index}, embedder=gate) as (base, _, server):
        port = int(base.rsplit(":", 1)[1])
        gate.armed = True
        out: list = []
        t = threading.Thread(target=lambda: out.append(
            httpx.post(f"{base}/v1/query", json={"query": Q}, timeout=DEADLINE)))
        t.start()
        assert gate.entered.wait(DEADLINE)
        server.should_exit = True  # what SIGTERM / SIGINT do

        def refused() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                return True
            return False

        _until(refused, "the listener to close")
        assert not out  # still in flight
        gate.open()
        t.join(DEADLINE)
        assert out[0].status_code == 200 and out[0].json()["chunks"]


# ------------------------------------------------------------------------------- ask
def test_ask_answers_through_the_llm_endpoint(base_index, openai_server):
    from hyperrag_fast.llm.client import ChatClient
    openai_server.chat.enqueue("Missolonghi [2]")
    llm = ChatClient(model="m", base_url=openai_server.base_url, api_key="k", timeout=10)
    with serving({"main": base_index}, llm=llm) as (base, _, _):
        r = httpx.post(f"{base}/v1/ask", json={"question": Q, "top_k": 3}, timeout=DEADLINE)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["short"] == "Missolonghi" and body["generation"]
        assert body["citations"][0]["passage"] == 2
        assert openai_server.chat.count_mentioning("Missolonghi in Greece") == 1
        assert "/v1/ask" in httpx.get(f"{base}/openapi.json").json()["paths"]


# ------------------------------------------------------------------------------- CLI
def _run_cli(args, **kw):
    return subprocess.Popen([sys.executable, "-m", "hyperrag_fast.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_cli_serve_subprocess_ready_query_sigterm(base_index, tmp_path):
    port_file = tmp_path / "port"
    p = _run_cli(["serve", f"main={base_index}", "--port", "0", "--port-file", str(port_file),
                  "--workers", "2", "--log-level", "warning"])
    try:
        port = int(_until(lambda: port_file.is_file() and port_file.read_text().strip(),
                          "the port file", LOAD_DEADLINE))
        base = f"http://127.0.0.1:{port}"

        def ready():
            try:
                return httpx.get(f"{base}/readyz").status_code == 200
            except httpx.TransportError:
                return False

        _until(ready, "readiness", LOAD_DEADLINE)
        r = httpx.post(f"{base}/v1/query", json={"query": Q, "top_k": 1})
        assert r.status_code == 200 and r.json()["index"] == "main"
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=DEADLINE)
        assert p.returncode == 0, err
        assert "Traceback" not in err and f"listening on http://127.0.0.1:{port}" in err
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()



def test_accepted_connections_have_no_nagle_delay():
    """The listening socket sets TCP_NODELAY and accepted connections inherit it, so a
    response written in two parts is not held until the client's delayed ACK under a loop
    that does not set it per connection (asyncio's)."""
    sock = _bind("127.0.0.1", 0)
    sock.listen(1)
    client = socket.create_connection(sock.getsockname()[:2])
    conn, _ = sock.accept()
    try:
        assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        for s_ in (conn, client, sock):
            s_.close()

def test_cli_serve_errors_are_one_line(tmp_path, monkeypatch, capsys):
    from hyperrag_fast import cli, serve
    assert cli.main(["serve", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hyperrag: error: no index directory") and err.count("\n") == 1
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # Python's own "cannot be imported"
    assert cli.main(["serve", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "the serve extra (missing: uvicorn)" in err and 'hyperrag_fast[serve]' in err
    assert err.count("\n") == 1


def test_require_names_the_extra_and_each_missing_package():
    from hyperrag_fast import serve
    serve.require()  # installed in this environment (the test extra includes serve)
    with pytest.raises(ImportError, match=r"serve extra \(missing: no_such_module_xyz, "
                                          r"no_such_module_abc\).*hyperrag_fast\[serve\]"):
        serve.require(("fastapi", "no_such_module_xyz", "no_such_module_abc"))


def test_other_subcommands_never_import_the_serve_package(base_index):
    code = ("import sys; from hyperrag_fast import cli; "
            f"cli.main(['query', {str(base_index)!r}, 'Ada Lovelace', '--json']); "
            "print('SERVE', any(m.startswith('hyperrag_fast.serve') or m in ('fastapi', 'uvicorn') "
            "for m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip().endswith("SERVE False"), r.stdout[-300:]


def test_the_query_side_server_imports_no_writer_code():
    code = ("import sys; import hyperrag_fast.serve.main, hyperrag_fast.serve.app; "
            "print(sorted(m for m in sys.modules if m in ('hyperrag_fast.publish', "
            "'hyperrag_fast.indexing.pipeline', 'hyperrag_fast.index', 'filelock')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(r.stdout.strip().replace("'", '"')) == []
