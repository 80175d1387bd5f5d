"""Is the local push's time flat in the graph size at a fixed threshold? (issue 26 target:
within 2x from 100k to 1M chunks.) Separates the kernel from the dense-prior interface.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/experiments/ppr_local_flatness.py

Same graphs and 300-chunk prior as ``bench_ppr.py``. Per size and damping, at threshold
``--eps``: ``LocalPush.approx(p)`` (dense prior: its nonzeros are found inside the call,
O(n)), ``LocalPush.approx_sparse(ids, vals)`` (the prior's nonzeros given: only the
push), and ``np.flatnonzero(p)`` alone; wall and process-CPU medians of ``--repeats``
calls, pushes and touched nodes. Writes ``experiments/results/local_push/flatness.json``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common, _graphs
import _common as C  # noqa: E402
from bench_ppr import graph_of_size, make_prior  # noqa: E402

from hyperrag_fast.ppr import LocalPush  # noqa: E402


def timed(fn, repeats):
    fn()
    ws, cs, out = [], [], None
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        cs.append(time.process_time() - c)
        ws.append(time.perf_counter() - t)
    return float(np.median(ws)) * 1e3, float(np.median(cs)) * 1e3, out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--dampings", type=float, nargs="+", default=[0.85, 0.5, 0.2])
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--prior-nnz", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--graph-cache", default=None, help="as bench_ppr.py --graph-cache (the same graphs)")
    a = ap.parse_args()
    g = argparse.Namespace(graph_cache=a.graph_cache, max_group=20.0, weight_kind=1, seed=0)
    out = {"params": vars(a), "sizes": {}}
    for n in a.sizes:
        (ptr, nbr, w, wsum), _fac, _cached = graph_of_size(n, g)
        m = wsum.shape[0]
        lp = LocalPush(ptr, nbr, w, wsum)
        p = make_prior(m, a.prior_nnz, 7)
        ids = np.flatnonzero(p)
        vals = p[ids]
        row = {"n_nodes": m, "loadavg": list(os.getloadavg()), "by_damping": {}}
        fw, fc, _ = timed(lambda: np.flatnonzero(p), a.repeats)
        row["flatnonzero_ms"], row["flatnonzero_cpu_ms"] = fw, fc
        for D in a.dampings:
            dw, dc, r1 = timed(lambda: lp.approx(p, D, a.eps), a.repeats)
            sw, sc, r2 = timed(lambda: lp.approx_sparse(ids, vals, D, a.eps), a.repeats)
            assert r1.pushes == r2.pushes
            row["by_damping"][f"{D:g}"] = {"dense_prior_ms": dw, "dense_prior_cpu_ms": dc,
                                           "sparse_prior_ms": sw, "sparse_prior_cpu_ms": sc,
                                           "pushes": r2.pushes, "touched": int(r2.ids.shape[0])}
            print(n, D, row["by_damping"][f"{D:g}"], flush=True)
        out["sizes"][str(n)] = row
    s0, s1 = (str(x) for x in (a.sizes[0], a.sizes[-1]))
    out["ratio_last_over_first"] = {
        d: {k: out["sizes"][s1]["by_damping"][d][k] / out["sizes"][s0]["by_damping"][d][k]
            for k in ("dense_prior_cpu_ms", "sparse_prior_cpu_ms", "sparse_prior_ms", "pushes")}
        for d in out["sizes"][s0]["by_damping"]}
    C.write_result("../experiments/results/local_push/flatness.json", out)


if __name__ == "__main__":
    main()
