"""A/B of the local push kernel against another checkout's, in one process (issue 26,
docs/architecture.md §4, "Memory locality").

    mkdir -p indexes/push_ab_base && git archive 114c8f3 kernels | tar -x -C indexes/push_ab_base
    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/experiments/ppr_local_kernel_ab.py \
        --base-kernels indexes/push_ab_base/kernels --graph-cache indexes/push_graphs

Both kernels are called directly (no wrapper), on the same arrays (``LocalPush``'s
validated graph and per-arc weights), priors (bench_ppr.py's 300-chunk prior) and
settings: certified top-8 (eps_min 1e-12, the wrappers' schedule) and the approximate
mode at ``--eps``. Their calls alternate, ``--repeats`` rounds, so the two see the same
load and cache state (run-to-run noise on this shared machine is larger than the effects
measured). Each kernel gets its own scratch in the layout its signature asks for
(a ``seen`` bitset or not). Writes ``experiments/results/local_push/kernel_ab.json``:
per size, damping and mode the two medians and ``ours_over_base``.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common, _graphs
import _common as C  # noqa: E402
from bench_ppr import graph_of_size, make_prior  # noqa: E402

from hyperrag_fast.kernels import ppr_local as ours  # noqa: E402
from hyperrag_fast.ppr import LocalPush  # noqa: E402


def load_kernels(folder: str):
    """The other checkout's kernels/ folder as the package ``ab_base_kernels``."""
    folder = str(Path(folder).resolve())
    spec = importlib.util.spec_from_file_location("ab_base_kernels", os.path.join(folder, "__init__.py"),
                                                  submodule_search_locations=[folder])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules["ab_base_kernels"] = pkg
    spec.loader.exec_module(pkg)
    return importlib.import_module("ab_base_kernels.ppr_local")


def scratch_for(mod, n):
    """Zeroed scratch in the layout ``mod.local_push_topk`` takes (with or without ``seen``)."""
    names = list(inspect.signature(mod.local_push_topk.py_func).parameters)
    arrays = {"x": np.zeros(n), "s": np.zeros(n), "flag": np.zeros(n, np.uint8),
              "seen": np.zeros((n + 7) // 8, np.uint8), "touched": np.empty(n + 1, np.int32),
              "queue": np.empty(n, np.int32)}
    return tuple(arrays[k] for k in names[names.index("x"):])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-kernels", required=True, help="another checkout's kernels/ folder")
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--dampings", type=float, nargs="+", default=[0.85, 0.5, 0.2])
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--graph-cache", default=None, help="as bench_ppr.py --graph-cache (the same graphs)")
    a = ap.parse_args()
    base = load_kernels(a.base_kernels)
    g = argparse.Namespace(graph_cache=a.graph_cache, max_group=20.0, weight_kind=1, seed=0)
    out = {"params": vars(a), "sizes": {}}
    for n in a.sizes:
        (ptr, nbr, w, wsum), _fac, _cached = graph_of_size(n, g)
        lp = LocalPush(ptr, nbr, w, wsum)
        p = make_prior(lp.n, 300, 7)
        ids = np.flatnonzero(p)
        vals = p[ids]
        sc = {"ours": scratch_for(ours, lp.n), "base": scratch_for(base, lp.n)}
        row = {"n_nodes": lp.n, "loadavg": list(os.getloadavg()), "by_damping": {}}
        for D in a.dampings:
            row["by_damping"][f"{D:g}"] = {}
            for mode, (k, eps_min, shrink, jump) in (("topk", (8, 1e-12, ours.SHRINK, ours.JUMP)),
                                                     ("approx", (0, a.eps, ours.APPROX_SHRINK, ours.APPROX_SHRINK))):
                calls = {name: (lambda mod=mod, name=name: mod.local_push_topk(
                    lp.ptr, lp.nbr, lp.wn, lp.wsum, lp.wmax, lp.symmetric, ids, vals, D, 0.0, eps_min, shrink, jump,
                    k, lp.pass_min, ours.REFINE_BUDGET, *sc[name])) for name, mod in (("ours", ours), ("base", base))}
                res = {name: f() for name, f in calls.items()}
                assert res["ours"][7] == res["base"][7], "the two kernels pushed differently"
                assert np.array_equal(res["ours"][4], res["base"][4])
                ts = {name: [] for name in calls}
                for _ in range(a.repeats):
                    for name, f in calls.items():
                        t = time.perf_counter()
                        f()
                        ts[name].append(time.perf_counter() - t)
                med = {name: float(np.median(v)) * 1e3 for name, v in ts.items()}
                row["by_damping"][f"{D:g}"][mode] = {"ours_ms": med["ours"], "base_ms": med["base"],
                                                     "ours_over_base": med["ours"] / med["base"],
                                                     "pushes": int(res["ours"][7])}
                print(n, D, mode, row["by_damping"][f"{D:g}"][mode], flush=True)
        out["sizes"][str(n)] = row
    C.write_result("../experiments/results/local_push/kernel_ab.json", out)


if __name__ == "__main__":
    main()
