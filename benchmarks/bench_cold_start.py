"""A cold process answering one question: ``hyperrag query INDEX "..."`` as a user runs it.

    python benchmarks/bench_cold_start.py --index indexes/2wiki [--sha256-index OTHER]

Five runs of each kind, interleaved (after one that fills Numba's on-disk cache and the
saved pre-optimised ONNX model, ``embed/onnx_cache.py``, as any second process finds them;
the package's bytecode is compiled first, as ``pip install`` does, so no run compiles its
modules from source when the environment sets ``PYTHONDONTWRITEBYTECODE``), each a fresh
``hyperrag query`` process with the default verified load (and one with ``--no-verify``),
run by the console script pip writes for the checkout (the entry point its pyproject.toml
declares; an installed script calling another entry is run beside them,
``installed_script``); CPU seconds (user + system) and peak RSS of the whole process come
from ``os.wait4``. ``load_ms``: in this process, after the imports,
``HyperIndex.load(INDEX, embedder)`` (verified), median of 5 (``load_cpu_ms``: its CPU
time, all threads). ``checksum``: what the verified load checks (``xxh3_128``, or
``sha256`` for an index saved before issue 13). ``--sha256-index``: the same CLI runs on a
second index (e.g. the sha256-only original of an upgraded copy).
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


def _hyperrag(tmp: Path) -> tuple[list[str], str, list[str] | None]:
    """(command, entry, installed): what ``hyperrag`` runs after ``pip install`` of the
    checkout on the path, i.e. the entry point its pyproject.toml declares. The installed
    console script when it calls that entry, else that script written as pip writes it
    (then ``installed`` is the installed script's command: an install older than the
    code on the path calls another entry, measured beside it)."""
    import tomllib

    import hyperrag_fast
    exe = Path(sys.executable).with_name("hyperrag")
    pyproject = Path(hyperrag_fast.__file__).resolve().parents[1] / "pyproject.toml"
    if not pyproject.is_file():  # the installed package itself
        return [str(exe)], "installed console script", None
    entry = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["scripts"]["hyperrag"]
    module, func = entry.split(":")
    if exe.exists() and f"from {module} import {func}\n" in exe.read_text(errors="replace"):
        return [str(exe)], entry, None
    script = tmp / "hyperrag"
    script.write_text(f"import re\nimport sys\nfrom {module} import {func}\n"
                      "if __name__ == '__main__':\n"
                      "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
                      f"    sys.exit({func}())\n", encoding="utf-8")
    return [sys.executable, str(script)], entry, [str(exe)] if exe.exists() else None


def compile_package() -> list[str]:
    """Byte-compile the package the CLI runs (its kernels folder too, which may be a
    link ``compileall`` does not follow); the folders compiled."""
    import hyperrag_fast
    pkg = Path(hyperrag_fast.__file__).resolve().parent
    dirs = [pkg, (pkg / "kernels").resolve()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *map(str, dirs)], check=True,
                   stdout=subprocess.DEVNULL)
    return [d.name for d in dirs]


def cli_run(cmd: list[str], index: str, extra: list[str]) -> dict:
    with tempfile.TemporaryFile() as out:
        t = time.perf_counter()
        p = subprocess.Popen(cmd + ["query", index, QUESTION, "--json", *extra],
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
    tmp = tempfile.TemporaryDirectory()
    cmd, entry, installed = _hyperrag(Path(tmp.name))
    cli_run(cmd, a.index, [])  # fills the Numba cache if this checkout never ran the query
    runs, unverified, s_runs = [], [], []
    for _ in range(a.repeats):  # interleaved: a drifting load reaches each kind alike
        runs.append(cli_run(cmd, a.index, []))
        unverified.append(cli_run(cmd, a.index, ["--no-verify"]))
        if installed:  # the installed script, which calls another entry: the same run
            s_runs.append(cli_run(installed, a.index, []))
    med = lambda xs: float(np.median(xs))  # noqa: E731
    stale = None
    if installed:
        first = Path(installed[0]).read_text(errors="replace").splitlines()
        stale = {"imports": next((ln for ln in first if ln.startswith("from ")), ""),
                 "cli_query_cpu_s": med([r["cpu_s"] for r in s_runs]),
                 "cli_query_peak_rss_mb": med([r["peak_rss_mb"] for r in s_runs]),
                 "runs": s_runs}
    other = None
    if a.sha256_index:
        if "xxh3_128" in read_manifest(a.sha256_index):
            raise SystemExit(f"{a.sha256_index} has xxh3_128 checksums")
        o_runs = [cli_run(cmd, a.sha256_index, []) for _ in range(a.repeats)]
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
        "console_entry": entry, "console_script": "installed" if cmd[0].endswith("hyperrag") and
        len(cmd) == 1 else "written from pyproject.toml as pip writes it",
        "installed_script": stale,
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
