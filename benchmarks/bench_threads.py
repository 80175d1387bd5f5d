"""Queries from 1 and 2 threads on one StitchEngine (issue item 4).

    python benchmarks/bench_threads.py                       # 1e6 states, 400 queries
    python benchmarks/bench_threads.py --states 100000

The stage after candidate search (candidates precomputed by exact search). Serial pass:
every query in one thread. Threaded pass: the same queries split over 2 threads
(ThreadPoolExecutor, each thread its own scratch, kernels release the GIL). Checks that
every result (top ids and scores, bit for bit) equals the serial one; throughput ratio =
serial wall time / 2-thread wall time, median over ``--repeats`` alternating rounds.
Options: DESIGN §8 caps + push (``capped_push``) by default; ``--variant`` to change.
"""
from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

try:
    from . import _common as C
    from ._setup import VARIANTS, setup
except ImportError:
    import _common as C
    from _setup import VARIANTS, setup


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--states", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--variant", default="capped_push", choices=sorted(VARIANTS))
    a = ap.parse_args()
    c, g, eng, qs, cn, cc = setup(a.states, a.queries)
    opts = VARIANTS[a.variant]
    n = qs.shape[0]

    def run(i):
        r = eng.query(qs[i], cn[i], cc[i], opts)
        return r.chunk_ids, r.scores

    # warm both threads' scratch (allocation is per thread, once)
    with ThreadPoolExecutor(2) as ex:
        list(ex.map(run, range(4)))
    serial = [run(i) for i in range(n)]
    ratios, t1s, t2s, identical = [], [], [], True
    with ThreadPoolExecutor(2) as ex:
        list(ex.map(run, range(2)))
        for _ in range(a.repeats):
            t = time.perf_counter()
            s = [run(i) for i in range(n)]
            t1 = time.perf_counter() - t
            t = time.perf_counter()
            par = list(ex.map(run, range(n), chunksize=8))
            t2 = time.perf_counter() - t
            for (x, y), (u, v) in zip(serial, par):
                identical &= bool(np.array_equal(x, u) and np.array_equal(y, v))
            for (x, y), (u, v) in zip(serial, s):
                identical &= bool(np.array_equal(x, u) and np.array_equal(y, v))
            t1s.append(t1)
            t2s.append(t2)
            ratios.append(t1 / t2)
            print(f"  1 thread {n / t1:.0f} q/s, 2 threads {n / t2:.0f} q/s, ratio {t1 / t2:.2f}", flush=True)
    res = {"states": g.n_nodes, "queries": n, "variant": a.variant, "repeats": a.repeats,
           "qps_1": n / float(np.median(t1s)), "qps_2": n / float(np.median(t2s)),
           "ratios": ratios, "threads_2_over_1": float(np.median(ratios)),
           "identical_to_serial": identical, "mean_query_ms_serial": float(np.median(t1s)) / n * 1e3}
    print(res, flush=True)
    C.write_result(f"threads_{a.variant}.json" if a.variant != "capped_push" else "threads.json", res)


if __name__ == "__main__":
    main()
