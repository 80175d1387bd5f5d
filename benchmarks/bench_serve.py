"""``hyperrag serve`` under load (issue 25): the server as a subprocess on loopback, driven
over HTTP by a bounded closed-loop load generator (threads, one keep-alive connection
each) with the 2Wiki questions.

Phases (``--phases``, each merged into the result file, so they may run at different
times; each run records its scheduling, ``sched``):

* ``steps``: after a warm-up pass over the questions, ``--rounds`` sweeps over 1, 2, 4, 8,
  16 concurrent clients, each step bounded by ``--step-requests`` and ``--step-seconds``:
  throughput (the median round), p50/p95/p99 of accepted requests (the rounds pooled),
  errors, shed (503), the server's CPU and RSS; then the ``--profile-clients`` steps once
  more under py-spy (where the server's time goes);
* ``soak``: ``--soak-queries`` (>= 100,000) at ``--soak-clients``: RSS at 10k vs the end;
* ``publish``: ``--publishes`` ``hyperrag add`` runs (5 HotpotQA passages each, titles not
  in the index) against a copy of the index (``--publish-index``; made from ``--index``
  if absent, the shared index is never written) while ``--publish-clients`` query it:
  failed requests, and publish -> first answer from the new generation;
* ``ready``: start -> ``/readyz`` 200 on a warm Numba cache (``--ready-runs``, median).

    python benchmarks/bench_serve.py --index indexes/2wiki_minilm \
        --publish-index indexes/serve_2wiki --data-dir ../shared/data

Results: ``benchmarks/results/serve.json`` (contract keys of issue 25, plus the details).
End-to-end latency is the client's: request written -> response read.
"""
from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import shutil
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, command, git_state, machine, pct  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MARK = ".bench_serve_copy"  # marks the publish phase's own copy of the index


# ------------------------------------------------------------------------ the server
class Server:
    """``hyperrag serve INDEX --port 0`` as a subprocess (same entry as the console script)."""

    extra: list[str] = []  # --server-args, for every server of the run

    def __init__(self, index: str, log: Path) -> None:
        self.port_file = Path(tempfile.mkdtemp(prefix="bench-serve-")) / "port"
        self.log = open(log, "a")
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hyperrag_fast.cli", "serve", index, "--port", "0",
             "--port-file", str(self.port_file), "--log-level", "info", *self.extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.port = None

    def wait_ready(self, deadline: float = 300.0) -> float:
        """Seconds from spawn to the first /readyz 200 (polled every 10 ms)."""
        while time.perf_counter() - self.t0 < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; see {self.log.name}")
            if self.port is None and self.port_file.is_file():
                txt = self.port_file.read_text().strip()
                self.port = int(txt) if txt else None
            if self.port is not None:
                try:
                    c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                    c.request("GET", "/readyz")
                    if c.getresponse().status == 200:
                        return time.perf_counter() - self.t0
                except OSError:
                    pass
            time.sleep(0.01)
        raise TimeoutError("server not ready")

    def cpu_s(self) -> float:
        """User + system CPU seconds of the server so far (load-independent, unlike wall)."""
        f = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return round((int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK"), 2)

    def rss_mb(self) -> tuple[float, float]:
        """(RSS, anonymous RSS) in MB, from /proc (file-backed index pages are in RSS)."""
        vals = {}
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith(("VmRSS", "RssAnon")):
                k, v = line.split(":")
                vals[k] = int(v.split()[0]) / 1024
        return round(vals["VmRSS"], 1), round(vals.get("RssAnon", 0.0), 1)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.log.close()
            shutil.rmtree(self.port_file.parent, ignore_errors=True)


# ------------------------------------------------------------------- load generator
class Load:
    """``clients`` threads, each a closed loop over one keep-alive connection, until
    ``requests`` answers in total or ``seconds`` pass; 503s back off ``backoff`` s."""

    def __init__(self, port: int, questions: list[str], clients: int, requests: int,
                 seconds: float, backoff: float, start_at: int = 0, keep_records=False,
                 batch: int = 1) -> None:
        self.port, self.qs, self.clients, self.batch = port, questions, clients, batch
        self.requests, self.seconds, self.backoff = requests, seconds, backoff
        self._start = start_at
        self._next = itertools.count(start_at)
        self._lock = threading.Lock()
        self.lat_ok: list[float] = []
        self.status: dict[str, int] = {}
        self.records: list[tuple[float, float, str]] | None = [] if keep_records else None
        self.done = 0
        self.stop = threading.Event()

    def _client(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        end = self.t0 + self.seconds
        while not self.stop.is_set() and time.perf_counter() < end:
            if self.done >= self.requests:  # the bound counts answered requests
                break
            i = next(self._next)
            q = (self.qs[i % len(self.qs)] if self.batch == 1 else
                 [self.qs[(i * self.batch + k) % len(self.qs)] for k in range(self.batch)])
            body = json.dumps({"query": q, "include_text": False})
            t = time.perf_counter()
            try:
                conn.request("POST", "/v1/query", body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                status = str(r.status)
            except (OSError, http.client.HTTPException) as e:
                status = type(e).__name__
                data = b""
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            t1 = time.perf_counter()
            with self._lock:
                self.status[status] = self.status.get(status, 0) + 1
                if status == "200":
                    self.lat_ok.append(t1 - t)
                    self.done += self.batch
                if self.records is not None:
                    self.records.append((t, t1, json.loads(data)["generation"]
                                         if status == "200" else None, status))
            if status == "503":
                time.sleep(self.backoff)
        conn.close()

    def run(self) -> dict:
        self.t0 = time.perf_counter()
        ts = [threading.Thread(target=self._client) for _ in range(self.clients)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        wall = time.perf_counter() - self.t0
        lat = np.asarray(self.lat_ok) * 1e3
        shed = self.status.get("503", 0)
        errors = sum(n for s, n in self.status.items() if s not in ("200", "503"))
        return {"clients": self.clients, "requests": int(lat.size), "wall_s": round(wall, 2),
                "throughput_qps": round(lat.size / wall, 1), "queries": self.done,
                "batch": self.batch,
                "p50_ms": round(pct(lat, 50), 2) if lat.size else None,
                "p95_ms": round(pct(lat, 95), 2) if lat.size else None,
                "p99_ms": round(pct(lat, 99), 2) if lat.size else None,
                "max_ms": round(float(lat.max()), 2) if lat.size else None,
                "errors": errors, "shed": shed, "statuses": dict(self.status)}


#: where a profiled sample's time goes: the first category (in this order) whose pattern
#: a frame of its stack contains
CATEGORIES = (
    ("embed (onnxruntime, 1 intra-op thread)", ("onnxruntime", "onnx_encoder", "tokenizers")),
    ("graph stage (engine.py + kernels)", ("engine.py", "kernels/")),
    ("candidates (ann.py, usearch)", ("ann.py", "usearch")),
    ("question lookups + BM25 (lexical.py)", ("lexical.py",)),
    ("rest of the retrieval (methods, retriever, texts)", ("methods/", "retriever.py", "texts.py")),
    ("server routes, options, JSON (serve/, pydantic)", ("serve/app.py", "serve/options.py",
                                                          "pydantic", "json/")),
    ("HTTP + event loop + pool hand-off (uvicorn, starlette, asyncio, futures)",
     ("uvicorn", "starlette", "fastapi", "asyncio", "concurrent/futures", "threading.py")),
)


def profile_summary(raw: Path) -> dict:
    """Shares of py-spy samples (active threads) by :data:`CATEGORIES`, and the top frames."""
    cats: dict[str, int] = {}
    own: dict[str, int] = {}
    n = 0
    for line in raw.read_text().splitlines():
        stack, _, c = line.rpartition(" ")
        c = int(c)
        n += c
        frames = stack.split(";")
        own[frames[-1]] = own.get(frames[-1], 0) + c
        name = next((label for label, pats in CATEGORIES
                     if any(p in f for f in frames for p in pats)), "other")
        cats[name] = cats.get(name, 0) + c
    top = sorted(own.items(), key=lambda kv: -kv[1])[:12]
    return {"samples": n, "share": {k: round(v / n, 3) for k, v in
                                    sorted(cats.items(), key=lambda kv: -kv[1])},
            "top_own_frames": [[f, round(c / n, 3)] for f, c in top]}


def questions(data_dir: str) -> list[str]:
    qs = json.loads((Path(data_dir) / "2wikimultihopqa" / "questions.json").read_text())
    return [q["question"] for q in qs]


#: flags naming this run's machine-local things (log folder, a running soak), recorded
#: as placeholders so a result file holds no absolute path
_LOCAL = ("--log-dir", "--soak-log", "--soak-port", "--soak-pid")


def recorded(cmd: str) -> str:
    """``cmd`` with the values of :data:`_LOCAL` flags replaced by their names."""
    parts = shlex.split(cmd)
    for i, x in enumerate(parts[:-1]):
        if x in _LOCAL:
            parts[i + 1] = x[2:].replace("-", "_").upper()
    return shlex.join(parts)


def _sched() -> str:
    """This process's scheduling: its nice and, where the kernel groups processes by
    session (autogroup: nice then orders only processes of one session), its group's
    nice, e.g. "nice 0, /autogroup-11 nice -20"."""
    out = f"nice {os.nice(0)}"
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            on = f.read().strip() == "1"
        with open("/proc/self/autogroup") as f:
            return out + (f", {f.read().strip()}" if on else ", autogroup off")
    except OSError:
        return out


def _load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# ------------------------------------------------------------------------- phases
def _merge_rounds(runs: list[dict]) -> dict:
    """One client count's rounds: percentiles over the pooled latencies, the median
    round's throughput, requests / errors / shed summed; each round kept in ``rounds``."""
    lat = np.concatenate([r.pop("_lat") for r in runs])
    out = {"clients": runs[0]["clients"], "requests": int(lat.size),
           "throughput_qps": round(float(np.median([r["throughput_qps"] for r in runs])), 1),
           "p50_ms": round(pct(lat, 50), 2), "p95_ms": round(pct(lat, 95), 2),
           "p99_ms": round(pct(lat, 99), 2), "max_ms": round(float(lat.max()), 2),
           "errors": sum(r["errors"] for r in runs), "shed": sum(r["shed"] for r in runs),
           "server_cpu_ms_per_request": round(float(np.median(
               [r["server_cpu_ms_per_request"] for r in runs])), 2),
           "rss_mb": runs[-1]["rss_mb"], "rss_anon_mb": runs[-1]["rss_anon_mb"],
           "rounds": runs}
    return out


def _step(a, srv: Server, qs, n: int, logdir: Path, spy: bool) -> dict:
    load, cpu = _load_avg(), srv.cpu_s()
    proc = None
    if spy:
        raw = logdir / f"profile_{n}.txt"
        proc = subprocess.Popen([a.py_spy, "record", "-p", str(srv.proc.pid), "-d",
                                 str(int(a.profile_seconds)), "-r", "100", "-f", "raw",
                                 "-o", str(raw), "--nonblocking"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ld = Load(srv.port, qs, n, a.step_requests, a.step_seconds, a.backoff, start_at=17 * n)
    out = ld.run()
    if proc is not None:
        proc.wait(a.profile_seconds + 60)
        out["profile"] = profile_summary(raw) if raw.is_file() else "py-spy failed"
    out["loadavg_before"] = load
    out["server_cpu_ms_per_request"] = round(
        (srv.cpu_s() - cpu) * 1e3 / max(1, out["requests"] + out["shed"]), 2)
    out["rss_mb"], out["rss_anon_mb"] = srv.rss_mb()
    out["_lat"] = np.asarray(ld.lat_ok) * 1e3
    return out


def phase_steps(a, qs, logdir: Path) -> dict:
    """``--rounds`` sweeps over ``--clients`` on one server after a warm-up of
    ``--warmup-requests`` (default: one pass over the questions, so every step sees the
    steady state: chunk rows read, pages mapped); then, with ``--profile-clients``, one
    more sweep of those steps under py-spy (``steps_profile``: sampling takes CPU, so
    those steps are not in ``steps``)."""
    srv = Server(a.index, logdir / "steps.log")
    try:
        srv.wait_ready()
        Load(srv.port, qs, 2, a.warmup_requests, 300, a.backoff).run()  # not counted
        by_n: dict[int, list[dict]] = {n: [] for n in a.clients}
        for r in range(a.rounds):
            for n in a.clients:
                out = _step(a, srv, qs, n, logdir, False)
                by_n[n].append(out)
                print(json.dumps({"round": r, **{k: v for k, v in out.items() if k != "_lat"}}),
                      flush=True)
        steps = [_merge_rounds(by_n[n]) for n in a.clients]
        prof = []
        for n in sorted(a.profile_clients):
            out = _step(a, srv, qs, n, logdir, True)
            out.pop("_lat")
            prof.append(out)
            print(json.dumps({"profile": n, **out}), flush=True)
        thr = {s["clients"]: s["throughput_qps"] for s in steps}
        ratio = (round(thr[2] / thr[1], 3) if 1 in thr and 2 in thr else None)
        ratios = ([round(x["throughput_qps"] / y["throughput_qps"], 3)
                   for x, y in zip(by_n[2], by_n[1])] if ratio is not None else None)
        return {"steps": steps, "steps_throughput_2_over_1": ratio,
                "steps_throughput_2_over_1_by_round": ratios, "steps_profile": prof,
                "steps_rss_mb": [s["rss_mb"] for s in steps], "steps_exit_code": srv.stop()}
    finally:
        if srv.proc.poll() is None:
            srv.stop()


def phase_soak(a, qs, logdir: Path) -> dict:
    srv = Server(a.index, logdir / "soak.log")
    try:
        srv.wait_ready()
        samples = []  # (queries done, rss, anon, t)
        load = Load(srv.port, qs, a.soak_clients, a.soak_queries, 10 ** 6, a.backoff,
                    batch=a.soak_batch)
        box = {}
        th = threading.Thread(target=lambda: box.update(load.run()))
        th.start()
        t0, marks = time.perf_counter(), set()
        while th.is_alive():
            th.join(5.0)
            r, anon = srv.rss_mb()
            samples.append([load.done, r, anon, round(time.perf_counter() - t0, 1)])
            k = load.done // 10_000
            if k not in marks:
                marks.add(k)
                print(f"soak: {load.done} queries, RSS {r} MB (anon {anon})", flush=True)
        end_rss, end_anon = srv.rss_mb()
        at10 = next(s for s in samples if s[0] >= 10_000)
        out = {"queries": box["queries"], "requests": box["requests"],
               "batch": a.soak_batch, "clients": a.soak_clients,
               "rss_mb_start": at10[1], "rss_mb_end": end_rss,
               "growth": round((end_rss - at10[1]) / at10[1], 4),
               "rss_anon_mb_start": at10[2], "rss_anon_mb_end": end_anon,
               "anon_growth": round((end_anon - at10[2]) / at10[2], 4),
               "start_sample_at_queries": at10[0], "errors": box["errors"], "shed": box["shed"],
               "throughput_qps": box["throughput_qps"], "p50_ms": box["p50_ms"],
               "p99_ms": box["p99_ms"], "rss_samples": samples[::max(1, len(samples) // 200)],
               "loadavg_end": _load_avg()}
        out["exit_code"] = srv.stop()
        return {"soak": out}
    finally:
        if srv.proc.poll() is None:
            srv.stop()


def phase_soak_report(a, qs, logdir: Path) -> dict:
    """The figures of a soak still running (``--soak-log`` = its output, ``--soak-port``,
    ``--soak-pid`` = its server): RSS at the first 10k sample of the log vs now, queries
    answered so far from the server's /metrics. Marked ``complete: false``; the soak's own
    result replaces it when it finishes."""
    import re
    samples = [(int(m[1]), float(m[2]), float(m[3])) for m in re.finditer(
        r"soak: (\d+) queries, RSS ([\d.]+) MB \(anon ([\d.]+)\)", Path(a.soak_log).read_text())]
    start = next(x for x in samples if x[0] >= 10_000)
    status = {}
    for line in open(f"/proc/{a.soak_pid}/status"):
        if line.startswith(("VmRSS", "RssAnon")):
            k, v = line.split(":")
            status[k] = round(int(v.split()[0]) / 1024, 1)
    c = http.client.HTTPConnection("127.0.0.1", a.soak_port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    queries = requests = failed = 0
    for line in text.splitlines():
        if line.startswith("hyperrag_queries_total{"):
            queries += int(float(line.rsplit(" ", 1)[1]))
        if line.startswith('hyperrag_requests_total{endpoint="/v1/query"'):
            n = int(float(line.rsplit(" ", 1)[1]))
            requests += n
            failed += 0 if 'status="200"' in line else n
    end, anon = status["VmRSS"], status["RssAnon"]
    return {"soak": {"queries": queries, "complete": False, "requests": requests,
                     "failed_requests": failed, "rss_mb_start": start[1], "rss_mb_end": end,
                     "growth": round((end - start[1]) / start[1], 4),
                     "rss_anon_mb_start": start[2], "rss_anon_mb_end": anon,
                     "anon_growth": round((anon - start[2]) / start[2], 4),
                     "start_sample_at_queries": start[0], "log_samples": samples,
                     "loadavg_now": _load_avg()}}


def _new_documents(data_dir: str, index_titles: set[str], n: int) -> list[dict]:
    corpus = json.loads((Path(data_dir) / "hotpotqa_train" / "corpus.json").read_text())
    docs = [{"id": t, "title": t, "text": "".join(s)} for t, s in corpus.items()
            if t not in index_titles and "".join(s).strip()]
    return docs[:n]


def phase_publish(a, qs, logdir: Path) -> dict:
    target = Path(a.publish_index)
    if target.resolve() == Path(a.index).resolve():
        raise SystemExit("--publish-index must be a copy, not --index itself")
    if target.exists():  # a copy an earlier run wrote to: start from --index again
        if not (target / MARK).is_file():
            raise SystemExit(f"{target} exists and is not a copy this benchmark made")
        shutil.rmtree(target)
    shutil.copytree(a.index, target)  # the shared index itself is never written
    (target / MARK).touch()
    corpus = json.loads((Path(a.data_dir) / "2wikimultihopqa" / "corpus.json").read_text())
    docs = _new_documents(a.data_dir, {p["title"] for p in corpus}, 5 * a.publishes)
    srv = Server(str(target), logdir / "publish.log")
    work = Path(tempfile.mkdtemp(prefix="bench-publish-"))
    try:
        srv.wait_ready()
        load = Load(srv.port, qs, a.publish_clients, 10 ** 9, 10 ** 6, a.backoff,
                    keep_records=True)
        th = threading.Thread(target=load.run)
        th.start()
        time.sleep(3.0)  # steady load before the first publish
        pubs = []
        cur = target / "CURRENT"
        for i in range(a.publishes):
            src = work / f"add{i}.json"
            src.write_text(json.dumps(docs[5 * i:5 * i + 5]))
            before = cur.read_text().strip()
            t_start = time.perf_counter()
            p = subprocess.Popen([sys.executable, "-m", "hyperrag_fast.cli", "add", str(target),
                                  str(src), "--quiet", "--json"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            t_pub = None
            while t_pub is None:  # CURRENT replaced = the publish (the commit point)
                now = cur.read_text().strip()
                if now != before:
                    t_pub = time.perf_counter()
                elif p.poll() is not None and cur.read_text().strip() == before:
                    raise RuntimeError(f"hyperrag add failed: {p.stderr.read()[-500:]}")
                else:
                    time.sleep(0.005)
            out, err = p.communicate(timeout=600)
            if p.returncode != 0:
                raise RuntimeError(f"hyperrag add exited {p.returncode}: {err[-500:]}")
            deadline = time.perf_counter() + 60
            first = None
            while first is None and time.perf_counter() < deadline:
                with load._lock:
                    first = next((t1 for t0, t1, g, _ in load.records
                                  if g == now and t1 >= t_pub), None)
                time.sleep(0.01)
            with load._lock:
                bad = [(t1, st) for _, t1, _, st in load.records if st != "200"]
            pubs.append({"generation": now, "add_s": round(t_pub - t_start, 2),
                         "switch_s": None if first is None else round(first - t_pub, 3),
                         "failed_while_add_ran": sum(t_start <= t1 < t_pub for t1, _ in bad),
                         "failed_publish_to_switch": sum(
                             t_pub <= t1 <= (first or t_pub) for t1, _ in bad)})
            print(json.dumps(pubs[-1]), flush=True)
            time.sleep(2.0)
        load.stop.set()
        th.join()
        statuses = dict(load.status)
        failed = sum(n for s, n in statuses.items() if s != "200")
        lat = np.asarray(load.lat_ok) * 1e3
        switch = [p["switch_s"] for p in pubs]
        return {"publishes": {
            "count": len(pubs), "failed_requests": failed,
            "switch_s_max": None if None in switch else max(switch),
            "requests": int(lat.size), "statuses": statuses, "clients": a.publish_clients,
            "p50_ms": round(pct(lat, 50), 2), "p99_ms": round(pct(lat, 99), 2),
            "each": pubs, "exit_code": srv.stop()}}
    finally:
        if srv.proc.poll() is None:
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)


def phase_ready(a, qs, logdir: Path) -> dict:
    runs, cpu, loads = [], [], []
    for i in range(a.ready_runs + 1):  # the first run warms the caches, not counted
        load = _load_avg()
        srv = Server(a.index, logdir / "ready.log")
        try:
            s = srv.wait_ready()
            c = srv.cpu_s()
        finally:
            srv.stop()
        if i:
            runs.append(round(s, 3))
            cpu.append(c)
            loads.append(load)
    return {"ready_s": float(np.median(runs)), "ready": {
        "runs_s": runs, "cpu_s": cpu, "loadavg_before": loads,
        "what": "spawn of `python -m hyperrag_fast.cli serve INDEX` -> first /readyz 200 "
                "(index loaded with checksums verified, embedder session, warm-up, probe); "
                "cpu_s: the server's user+system CPU at that moment"}}


def phase_direct(a, qs, logdir: Path) -> dict:
    """The same questions through the library in this process (no HTTP), 1 and 2 threads:
    what the server adds, measured under the same machine load."""
    import resource
    from concurrent.futures import ThreadPoolExecutor

    from hyperrag_fast.embed.registry import embedder_for_name
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.retriever import Retriever
    from hyperrag_fast.store import read_manifest
    emb = embedder_for_name(read_manifest(a.index)["embedder"]["name"], intra_op_threads=1)
    r = Retriever(HyperIndex.load(a.index, embedder=emb), emb)
    r.warmup()
    for q in qs[:50]:
        r.retrieve(q)
    out = {}
    for threads in (1, 2):
        chunk = qs[:a.direct_queries]
        lat: list[float] = []

        def one(q):
            t = time.perf_counter()
            r.retrieve(q)
            lat.append(time.perf_counter() - t)

        load = _load_avg()
        ru0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(one, chunk))
        ru1, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - t0
        cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        ms = np.asarray(lat) * 1e3
        out[f"threads_{threads}"] = {
            "queries": len(chunk), "throughput_qps": round(len(chunk) / wall, 1),
            "p50_ms": round(pct(ms, 50), 2), "p99_ms": round(pct(ms, 99), 2),
            "cpu_ms_per_query": round(cpu * 1e3 / len(chunk), 2), "loadavg_before": load}
        print(json.dumps(out[f"threads_{threads}"]), flush=True)
    return {"direct": {**out, "what": "Retriever.retrieve in the benchmark process (MiniLM "
                       "at 1 intra-op thread, as the server runs it), no HTTP"}}


PHASES = {"direct": phase_direct, "soak_report": phase_soak_report, "steps": phase_steps, "soak": phase_soak, "publish": phase_publish, "ready": phase_ready}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--index", default="indexes/2wiki_minilm")
    p.add_argument("--publish-index", default="indexes/serve_2wiki",
                   help="copy of --index the publish phase writes to (made if absent)")
    p.add_argument("--data-dir", default="../shared/data")
    p.add_argument("--phases", default="ready,direct,steps,publish,soak")
    p.add_argument("--clients", default="1,2,4,8,16")
    p.add_argument("--step-requests", type=int, default=2000, help="per step and round")
    p.add_argument("--step-seconds", type=float, default=60.0)
    p.add_argument("--warmup-requests", type=int, default=1000,
                   help="requests before the steps, not counted (default: the 1,000 questions once)")
    p.add_argument("--rounds", type=int, default=3, help="sweeps over --clients (steps: "
                   "percentiles over the pooled rounds, the median round's throughput)")
    p.add_argument("--backoff", type=float, default=0.05, help="seconds a client waits after a 503")
    p.add_argument("--soak-queries", type=int, default=100_000)
    p.add_argument("--soak-clients", type=int, default=2)
    p.add_argument("--soak-log", default=None, help="soak_report: the running soak's output")
    p.add_argument("--soak-port", type=int, default=None, help="soak_report: its server's port")
    p.add_argument("--soak-pid", type=int, default=None, help="soak_report: its server's pid")
    p.add_argument("--soak-batch", type=int, default=1,
                   help="questions per soak request (a batch is embedded in one call)")
    p.add_argument("--publishes", type=int, default=5)
    p.add_argument("--publish-clients", type=int, default=2)
    p.add_argument("--ready-runs", type=int, default=3)
    p.add_argument("--direct-queries", type=int, default=1000)
    p.add_argument("--profile-clients", default="1,2,16",
                   help="steps rerun once after the rounds with py-spy sampling the server "
                        "(steps_profile; empty: none)")
    p.add_argument("--profile-seconds", type=float, default=15.0)
    p.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy")
    p.add_argument("--log-dir", default=None, help="server logs (default: a temp folder)")
    p.add_argument("--server-args", default="", help="more hyperrag serve options, e.g. "
                   "'--max-wait 0' (recorded; use with --key-suffix)")
    p.add_argument("--key-suffix", default="", help="store each phase's result keys with this "
                   "suffix (a variant beside the default run)")
    p.add_argument("--out", default=str(RESULTS / "serve.json"))
    a = p.parse_args(argv)
    a.clients = [int(x) for x in a.clients.split(",")]
    Server.extra = shlex.split(a.server_args)
    a.profile_clients = {int(x) for x in a.profile_clients.split(",") if x}
    logdir = Path(a.log_dir or tempfile.mkdtemp(prefix="bench-serve-logs-"))
    logdir.mkdir(parents=True, exist_ok=True)
    qs = questions(a.data_dir)
    out_path = Path(a.out)
    res = json.loads(out_path.read_text()) if out_path.is_file() else {}
    res.update({"command": recorded(command()), "machine": machine(), "index": a.index})
    runs = res.setdefault("runs", {})
    for name in a.phases.split(","):
        t = time.time()
        load = _load_avg()
        got = {k + a.key_suffix: v for k, v in PHASES[name](a, qs, logdir).items()}
        if out_path.is_file():  # another phase may have run meanwhile (the soak, in background)
            res = {**json.loads(out_path.read_text()), **{k: res[k] for k in
                                                          ("command", "machine", "index")}}
            runs = res.setdefault("runs", {})
        res.update(got)
        runs[name + a.key_suffix] = {"command": recorded(command()), "commit": (git_state() or {}).get("commit"),
                      "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)),
                      "s": round(time.time() - t, 1), "loadavg_start": load,
                      "loadavg_end": _load_avg(), "sched": _sched()}
        out_path.write_text(json.dumps(res, indent=2) + "\n")
        print(f"{name}: wrote {out_path}", flush=True)
    print(f"server logs in {logdir}")


if __name__ == "__main__":
    main()
