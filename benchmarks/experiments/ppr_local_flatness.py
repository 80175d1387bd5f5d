"""Is the local push's time flat in the graph size at a fixed threshold? (issue 26 target:
within 2x from 100k to 1M chunks.) Separates the kernel from the dense-prior interface.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/experiments/ppr_local_flatness.py \
        --graph-cache indexes/push_graphs --processes 7 --repeats 15

Same graphs and 300-chunk prior as ``bench_ppr.py``. The time per push at 1M chunks
depends on where one process's memory landed (cache and TLB misses; it varied ~2x from
run to run), so the figure is the median over ``--processes`` fresh processes, each
loading every graph anew and building its ``LocalPush``, of that process's own figure.
Per process, size and damping, at threshold ``--eps``: ``LocalPush.approx_sparse(ids,
vals)`` (the prior's nonzeros given: only the push; the target's figure),
``LocalPush.approx(p)`` (dense prior: its nonzeros found inside the call, O(n)), wall and
process-CPU medians of ``--repeats`` calls, the sizes' calls interleaved (so a process's
ratio compares calls made under the same load, and a call finds in the caches what the
other graph's call left, as a query after other work does), then ``--repeats`` calls of
the push alone in a row per size (``sparse_prior_blocked_ms``: the same call repeated, so
the 100k graph's touched data stays in the 32 MB L3 between calls; the 1M graph's does
not), pushes and touched nodes. Every
process's figures and load average are kept in
``experiments/results/local_push/flatness.json``; ``ratio_last_over_first`` holds the
median over processes of each process's ratio (largest size over smallest).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common, _graphs
import _common as C  # noqa: E402
from bench_ppr import graph_of_size, make_prior  # noqa: E402

from hyperrag_fast.ppr import LocalPush  # noqa: E402

KEYS = ("sparse_prior_ms", "sparse_prior_cpu_ms", "sparse_prior_blocked_ms", "dense_prior_ms", "dense_prior_cpu_ms")


def child(a) -> dict:
    """One fresh process: load every size's graph, then time the calls (sizes interleaved)."""
    g = argparse.Namespace(graph_cache=a.graph_cache, max_group=20.0, weight_kind=1, seed=0)
    setup = {}
    for n in a.sizes:
        (ptr, nbr, w, wsum), _fac, _cached = graph_of_size(n, g)
        t = time.perf_counter()
        lp = LocalPush(ptr, nbr, w, wsum)
        build = time.perf_counter() - t
        p = make_prior(lp.n, a.prior_nnz, 7)
        ids = np.flatnonzero(p)
        setup[n] = (lp, p, ids, p[ids], build)
    out = {"pid": os.getpid(), "loadavg_start": list(os.getloadavg()), "sizes": {}}
    for n in a.sizes:
        out["sizes"][str(n)] = {"n_nodes": setup[n][0].n, "local_push_build_s": setup[n][4], "by_damping": {}}
    for D in a.dampings:
        calls = {}
        for n in a.sizes:
            lp, p, ids, vals, _ = setup[n]
            calls[(n, "sparse")] = lambda lp=lp, ids=ids, vals=vals: lp.approx_sparse(ids, vals, D, a.eps)
            calls[(n, "dense")] = lambda lp=lp, p=p: lp.approx(p, D, a.eps)
        res = {k: f() for k, f in calls.items()}  # warm-up (and compile)
        wall = {k: [] for k in calls}
        cpu = {k: [] for k in calls}
        for _ in range(a.repeats):  # interleaved: each call follows one on another graph
            for k, f in calls.items():
                t, c = time.perf_counter(), time.process_time()
                f()
                cpu[k].append(time.process_time() - c)
                wall[k].append(time.perf_counter() - t)
        blocked = {}
        for n in a.sizes:  # blocked: --repeats calls in a row on one graph (its data stays cached)
            f = calls[(n, "sparse")]
            ts = []
            for _ in range(a.repeats):
                t = time.perf_counter()
                f()
                ts.append(time.perf_counter() - t)
            blocked[n] = float(np.median(ts)) * 1e3
        for n in a.sizes:
            r = res[(n, "sparse")]
            assert r.pushes == res[(n, "dense")].pushes
            out["sizes"][str(n)]["by_damping"][f"{D:g}"] = {
                "sparse_prior_ms": float(np.median(wall[(n, "sparse")])) * 1e3,
                "sparse_prior_cpu_ms": float(np.median(cpu[(n, "sparse")])) * 1e3,
                "dense_prior_ms": float(np.median(wall[(n, "dense")])) * 1e3,
                "dense_prior_cpu_ms": float(np.median(cpu[(n, "dense")])) * 1e3,
                "sparse_prior_blocked_ms": blocked[n],
                "pushes": r.pushes, "touched": int(r.ids.shape[0])}
    out["loadavg_end"] = list(os.getloadavg())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--dampings", type=float, nargs="+", default=[0.85, 0.5, 0.2])
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--prior-nnz", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--processes", type=int, default=7, help="fresh processes (each loads the graphs anew)")
    ap.add_argument("--graph-cache", default=None, help="as bench_ppr.py --graph-cache (the same graphs)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print("RESULT " + json.dumps(child(a)), flush=True)
        return
    argv = [sys.executable, os.path.abspath(__file__), "--child", *sys.argv[1:]]
    procs = []
    for i in range(a.processes):
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"process {i} failed:\n{r.stderr}")
        line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")][-1]
        procs.append(json.loads(line[len("RESULT "):]))
        s0, s1 = (procs[-1]["sizes"][str(x)]["by_damping"] for x in (a.sizes[0], a.sizes[-1]))
        print(i, procs[-1]["loadavg_start"][0],
              {d: [round(s1[d][k] / s0[d][k], 2) for k in ("sparse_prior_ms", "sparse_prior_blocked_ms")]
               for d in s0}, flush=True)
    s0, s1 = (str(x) for x in (a.sizes[0], a.sizes[-1]))
    ratios = {d: {k: [p["sizes"][s1]["by_damping"][d][k] / p["sizes"][s0]["by_damping"][d][k]
                      for p in procs] for k in (*KEYS, "pushes")}
              for d in procs[0]["sizes"][s0]["by_damping"]}
    sizes = {}
    for s in procs[0]["sizes"]:
        sizes[s] = {"n_nodes": procs[0]["sizes"][s]["n_nodes"], "by_damping": {
            d: {**{k: float(np.median([p["sizes"][s]["by_damping"][d][k] for p in procs])) for k in KEYS},
                "pushes": procs[0]["sizes"][s]["by_damping"][d]["pushes"],
                "touched": procs[0]["sizes"][s]["by_damping"][d]["touched"]}
            for d in procs[0]["sizes"][s]["by_damping"]}}
    out = {"params": {k: v for k, v in vars(a).items() if k != "child"},
           "protocol": "median over fresh processes of each process's median of --repeats calls "
                       "(sizes interleaved within a process)",
           "ratio_last_over_first": {d: {k: float(np.median(v)) for k, v in r.items()} for d, r in ratios.items()},
           "ratio_last_over_first_by_process": ratios,
           "ratio_last_over_first_max": {d: {k: float(np.max(v)) for k, v in r.items()} for d, r in ratios.items()},
           "sizes": sizes, "processes": procs}
    C.write_result("../experiments/results/local_push/flatness.json", out)


if __name__ == "__main__":
    main()
