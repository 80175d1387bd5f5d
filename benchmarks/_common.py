"""Shared helpers of the speed benchmarks: machine description, timing, result files."""
from __future__ import annotations

import json
import os
import platform
import resource
import shlex
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
EXPERIMENTS = Path(__file__).resolve().parent / "experiments" / "results"
SHARED_NOTE = ("machine shared with other engineers running tests at the same time; "
               "figures are medians of repeats, compare ratios measured in one run")


def machine() -> dict:
    """CPU model, cores, RAM, Python / numba / numpy / scipy versions, load at start."""
    import numba
    import scipy

    cpu = "unknown"
    flags = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name") and cpu == "unknown":
                cpu = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                f = line.split(":", 1)[1].split()
                flags = " ".join(x for x in f if x in ("avx2", "avx512f", "fma", "sse4_2"))
    except OSError:
        pass
    mem = None
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = round(int(line.split()[1]) / 1024 ** 2, 1)
    except OSError:
        pass
    out = {
        "cpu_model": cpu, "cpu_flags": flags, "cores": os.cpu_count(), "ram_gb": mem,
        "python": platform.python_version(), "numba": numba.__version__,
        "numpy": np.__version__, "scipy": scipy.__version__,
        "platform": platform.platform(), "loadavg_at_start": os.getloadavg(),
        "note": SHARED_NOTE,
    }
    try:
        import usearch
        out["usearch"] = usearch.__version__
    except ImportError:
        pass
    out["git"] = git_state()
    return out


def git_state() -> dict | None:
    """The checkout's commit and whether tracked files differ from it (None outside git)."""
    import subprocess
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip() != ""
    except (OSError, subprocess.CalledProcessError):
        return None
    return {"commit": commit, "dirty": dirty}


#: environment variables that change what a benchmark measures (BLAS / OpenMP thread pools)
ENV_THAT_MATTERS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def command() -> str:
    """The exact command line, with any thread-pool environment variable in front."""
    env = [f"{k}={shlex.quote(os.environ[k])}" for k in ENV_THAT_MATTERS if k in os.environ]
    return " ".join(env + ["python"] + [shlex.quote(a) for a in
                                        [os.path.relpath(sys.argv[0])] + sys.argv[1:]])


def peak_rss_mb() -> float:
    """Peak resident set of this process so far (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timeit_batched(fn, repeats: int = 5, min_batch_s: float = 0.005):
    """(median seconds per call, per-call seconds of each repeat, batch size, last result):
    each repeat times a batch of calls lasting >= ``min_batch_s`` (sized from a warm-up
    call, as ``timeit.Timer.autorange`` does), so sub-millisecond calls are not at the
    mercy of one interrupt or timer tick. Calls of ``min_batch_s`` or more run one per repeat."""
    t = time.perf_counter()
    out = fn()
    first = time.perf_counter() - t
    n = max(1, int(np.ceil(min_batch_s / max(first, 1e-7))))
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            out = fn()
        ts.append((time.perf_counter() - t) / n)
    return float(np.median(ts)), ts, n, out


def timeit(fn, repeats: int = 5, warmup: int = 1):
    """(median seconds, all seconds, last result) of ``fn()``."""
    out = None
    for _ in range(warmup):
        out = fn()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)), ts, out


def pct(xs, q) -> float:
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q))


def loglog_slope(xs, ys) -> float | None:
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    ok = (xs > 0) & (ys > 0) & np.isfinite(ys)
    if ok.sum() < 2:
        return None
    return float(np.polyfit(np.log(xs[ok]), np.log(ys[ok]), 1)[0])


def write_result(name: str, data: dict, folder: Path = RESULTS, indent: int = 2) -> Path:
    """``folder/name`` (the current results, or EXPERIMENTS for a one-off experiment);
    ``indent``: that of the file it rewrites (:func:`json_indent`), so the diff stays small."""
    folder.mkdir(parents=True, exist_ok=True)
    data = {"command": command(), "machine": machine(), **data}
    path = folder / name
    path.write_text(json.dumps(data, indent=indent, default=_default) + "\n")
    print(f"wrote {path}")
    return path


def json_indent(text: str, default: int = 2) -> int:
    """The indent of a JSON object written by ``json.dumps(..., indent=n)``: its second
    line's leading spaces (``default`` for a one-line file)."""
    lines = text.splitlines()
    return len(lines[1]) - len(lines[1].lstrip(" ")) if len(lines) > 1 else default


def _default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o))
