"""Index-build throughput: ``hypergraph_from_flat`` (kernels.build.build_arrays) on a
synthetic corpus of at least 10 million incidences (issue item 3).

    python benchmarks/bench_build.py                 # 7e6 states -> ~1.07e7 incidences
    python benchmarks/bench_build.py --states 1000000 --repeats 3

Median of ``--repeats`` builds after one warm-up build on a tiny corpus (JIT cache load
excluded). Reports incidences/s, states/s, bytes per incidence (index array bytes /
incidences) and the share of time in input validation (hypergraph_from_flat's range
checks) vs the compiled build_arrays.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from hyperrag_fast.indexing.hypergraph import hypergraph_from_flat
from hyperrag_fast.kernels.build import build_arrays

try:
    from . import _common as C
    from . import synthetic
except ImportError:
    import _common as C
    import synthetic


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--states", type=int, default=7_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    t = time.perf_counter()
    c = synthetic.generate(a.states, seed=a.seed)
    gen = time.perf_counter() - t
    print(c.summary(), f"generated in {gen:.1f}s", flush=True)
    hypergraph_from_flat(*synthetic.generate(2000, seed=1).flat_args())  # warm-up / cache load
    args = c.flat_args()
    ts, tk = [], []
    g = None
    for _ in range(a.repeats):
        g = None
        t = time.perf_counter()
        g = hypergraph_from_flat(*args)
        ts.append(time.perf_counter() - t)
        t = time.perf_counter()
        build_arrays(*args[1:])
        tk.append(time.perf_counter() - t)
        print(f"  build {ts[-1]:.2f}s (kernel only {tk[-1]:.2f}s)", flush=True)
    M = g.n_incidences
    med, medk = float(np.median(ts)), float(np.median(tk))
    res = {"corpus": c.summary(), "generate_s": gen, "repeats": a.repeats,
           "times_s": ts, "median_s": med, "kernel_only_times_s": tk, "kernel_only_median_s": medk,
           "incidences": M, "incidences_per_s": M / med, "kernel_only_incidences_per_s": M / medk,
           "states_per_s": g.n_nodes / med, "array_bytes": g.array_bytes(),
           "bytes_per_incidence": g.array_bytes() / M,
           "array_bytes_by_field": {k: int(v.nbytes) for k, v in g.arrays().items()},
           "peak_rss_mb": C.peak_rss_mb()}
    print(f"{M} incidences: {M / med / 1e6:.2f} M inc/s, {g.array_bytes() / M:.1f} B/inc", flush=True)
    C.write_result("build.json", res)


if __name__ == "__main__":
    main()
