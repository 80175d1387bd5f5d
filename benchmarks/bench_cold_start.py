"""A cold process answering one question: ``hyperrag query INDEX "..."`` as a user runs it.

    python benchmarks/bench_cold_start.py --index indexes/2wiki [--sha256-index OTHER]

Five runs (after one that fills Numba's on-disk cache and the saved pre-optimised ONNX
model, ``embed/onnx_cache.py``, as any second process finds them; the package's bytecode
is compiled first, as ``pip install`` does, so no run compiles its modules from source
when the environment sets ``PYTHONDONTWRITEBYTECODE``),
each a fresh ``hyperrag query`` process with the default verified load; CPU seconds (user
+ system) and peak RSS of the whole process come from ``os.wait4``. ``load_ms``: in this
process, after the imports, ``HyperIndex.load(INDEX, embedder)`` (verified), median of 5
(``load_cpu_ms``: its CPU time, all threads). ``checksum``: what the verified load checks
(``xxh3_128``, or ``sha256`` for an index saved before issue 13). ``--sha256-index``: the
same CLI runs on a second index (e.g. the sha256-only original of an upgraded copy).
Writes ``results/cold_start.json`` (medians; ``--out`` another name).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

try:
    from . import _common as C
except ImportError:
    import _common as C

QUESTION = "Where was the director of the film The Last Voyage born?"


def _hyperrag() -> list[str]:
    exe = Path(sys.executable).with_name("hyperrag")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "hyperrag_fast.cli"]


def compile_package() -> list[str]:
    """Byte-compile the package the CLI runs (its kernels folder too, which may be a
    link ``compileall`` does not follow); the folders compiled."""
    import hyperrag_fast
    pkg = Path(hyperrag_fast.__file__).resolve().parent
    dirs = [pkg, (pkg / "kernels").resolve()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *map(str, dirs)], check=True,
                   stdout=subprocess.DEVNULL)
    return [d.name for d in dirs]


def cli_run(index: str, extra: list[str]) -> dict:
    with tempfile.TemporaryFile() as out:
        t = time.perf_counter()
        p = subprocess.Popen(_hyperrag() + ["query", index, QUESTION, "--json", *extra],
                             stdout=out, stderr=subprocess.PIPE)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        err = p.stderr.read().decode()
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"hyperrag query failed: {err[-1000:]}")
        out.seek(0)
        res = json.loads(out.read())
    return {"cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_mb": ru.ru_maxrss / 1024,
            "wall_s": wall, "timings": res["timings"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="cold_start.json", help="result file name (in results/)")
    ap.add_argument("--sha256-index", default=None,
                    help="also run the CLI on this index (verified with sha256)")
    a = ap.parse_args()
    load_start = os.getloadavg()  # machine()["loadavg_at_start"] is read when writing
    from hyperrag_fast.store import read_manifest
    compiled = compile_package()
    cli_run(a.index, [])  # fills the Numba cache if this checkout never ran the query
    runs = [cli_run(a.index, []) for _ in range(a.repeats)]
    unverified = [cli_run(a.index, ["--no-verify"]) for _ in range(a.repeats)]
    med = lambda xs: float(np.median(xs))  # noqa: E731
    other = None
    if a.sha256_index:
        if "xxh3_128" in read_manifest(a.sha256_index):
            raise SystemExit(f"{a.sha256_index} has xxh3_128 checksums")
        o_runs = [cli_run(a.sha256_index, []) for _ in range(a.repeats)]
        other = {"index": a.sha256_index, "checksum": "sha256",
                 "cli_query_cpu_s": med([r["cpu_s"] for r in o_runs]),
                 "cli_query_peak_rss_mb": med([r["peak_rss_mb"] for r in o_runs]),
                 "runs": o_runs}

    from hyperrag_fast.cli import embedder_for
    from hyperrag_fast.embed.onnx_cache import cache_root
    from hyperrag_fast.index import HyperIndex
    emb = embedder_for(read_manifest(a.index))
    session_model = getattr(getattr(emb, "session", None), "_model_path", None)
    loads, load_cpu = [], []
    for _ in range(a.repeats):
        t, c = time.perf_counter(), time.process_time()
        HyperIndex.load(a.index, embedder=emb)
        loads.append((time.perf_counter() - t) * 1e3)
        load_cpu.append((time.process_time() - c) * 1e3)
    C.write_result(a.out, {
        "index": a.index, "question": QUESTION,
        "checksum": "xxh3_128" if "xxh3_128" in read_manifest(a.index) else "sha256",
        "cli_query_cpu_s": med([r["cpu_s"] for r in runs]),
        "cli_query_peak_rss_mb": med([r["peak_rss_mb"] for r in runs]),
        "cli_query_wall_s": med([r["wall_s"] for r in runs]),
        "load_ms": med(loads), "load_cpu_ms": med(load_cpu),
        "no_verify": {"cli_query_cpu_s": med([r["cpu_s"] for r in unverified]),
                      "cli_query_peak_rss_mb": med([r["peak_rss_mb"] for r in unverified])},
        "sha256_index": other,
        # whether the runs' ONNX session ran the saved pre-optimised model
        "onnx_saved_model": bool(session_model) and Path(session_model).is_relative_to(cache_root()),
        "bytecode": f"compiled before the runs (python -m compileall: {', '.join(compiled)})",
        "runs": runs, "load_ms_all": loads, "load_cpu_ms_all": load_cpu,
        "loadavg_at_bench_start": load_start, "loadavg_at_end": os.getloadavg(),
        "targets": {"cli_query_cpu_s": 0.7, "cli_query_peak_rss_mb": 350, "load_ms": 100},  # issue 22
    })


if __name__ == "__main__":
    main()
