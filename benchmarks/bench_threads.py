"""Queries from 1 and 2 threads on one StitchEngine (issue item 4).

    python benchmarks/bench_threads.py --index indexes/2wiki  # the real 2Wiki index, 1,000 questions
    python benchmarks/bench_threads.py                       # synthetic 1e6 states, 400 queries
    python benchmarks/bench_threads.py --states 100000

The stage after candidate search (candidates precomputed by exact search). Serial pass:
every query in one thread. Threaded pass: the same queries served by 2 worker threads
that each take the next query index from a shared counter (as a service's workers take
requests; each thread its own scratch, kernels release the GIL). Checks that every result
(top ids and scores, bit for bit) equals the serial one; throughput ratio = serial wall
time / 2-thread wall time, median over ``--repeats`` alternating rounds. For comparison
the same queries also go through ``ThreadPoolExecutor(2).map(chunksize=8)``
(``executor_map_*`` keys): its futures and result hand-off run under the GIL in a third
thread, which costs 0.2-0.4 of the ratio at ~0.25 ms per query.
Options read at run time: ``default`` = ``QueryOptions().stitch`` (tuned preset) unless
``--variant paper``. With ``--index``: the engine arguments of every 2Wiki question are
recorded from the default ``stitch`` method (candidates, BM25 bonus, question-entity
seeds: exactly what ``run_stitch`` passes to ``StitchEngine.query``), then replayed;
``--full-method`` also times the whole method (ANN + BM25 + question seeds + engine) in 1 vs 2 threads.
"""
from __future__ import annotations

import argparse
import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

try:
    from . import _common as C
    from ._setup import VARIANTS, describe, setup
except ImportError:
    import _common as C
    from _setup import VARIANTS, describe, setup


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--states", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--variant", default="default", choices=sorted(VARIANTS))
    ap.add_argument("--index", default=None, help="a saved 2Wiki index (else synthetic)")
    ap.add_argument("--full-method", action="store_true")
    ap.add_argument("--out", default="threads.json")
    a = ap.parse_args()
    opts = VARIANTS[a.variant]
    extra = {}
    if a.index:
        calls, eng, full = record_2wiki(a.index, a.variant, a.queries)
        n = len(calls)
        states = eng.graph.n_nodes

        def run(i):
            args, kw = calls[i]
            r = eng.query(*args, **kw)
            return r.chunk_ids, r.scores
        if a.full_method:
            extra["full_method"] = ratio_of(full, len(full[1]), a.repeats)
    else:
        c, g, eng, qs, cn, cc = setup(a.states, a.queries)
        n = qs.shape[0]
        states = g.n_nodes

        def run(i):
            r = eng.query(qs[i], cn[i], cc[i], opts)
            return r.chunk_ids, r.scores

    rt = measure(run, n, a.repeats)
    res = {"source": a.index or "synthetic", "states": states, "queries": n, "variant": a.variant,
           "options": describe(opts), "repeats": a.repeats, **extra, **rt,
           "what": "engine (STIBP + projection + chunk graph + PPR) on recorded arguments"}
    print(res, flush=True)
    C.write_result(a.out, res)


def record_2wiki(index, variant, n_questions):
    """Engine arguments of each 2Wiki question under method ``stitch`` (or ``stitch_paper``)."""
    from dataclasses import replace

    from hyperrag_fast.retriever import METHODS, QueryOptions
    try:
        from .bench_2wiki import load
    except ImportError:
        from bench_2wiki import load
    ds, emb, idx, ret, qs, _ = load(index, n_questions)
    name = "stitch" if variant == "default" else "stitch_paper"
    o = replace(QueryOptions(), method=name)
    st = ret.state
    eng = st.engine
    vecs = ret._embed(qs)
    fn = METHODS[name]
    fn(st, vecs[0], qs[0], o, False)
    calls = []
    orig = eng.query

    def recorder(*args, **kw):
        calls.append((args, kw))
        return orig(*args, **kw)
    eng.query = recorder
    try:
        for text, v in zip(qs, vecs):
            fn(st, v, text, o, False)
    finally:
        del eng.query
    full = (lambda i: (lambda r: (r.chunk_ids, r.scores))(fn(st, vecs[i], qs[i], o, False)), qs)
    return calls, eng, full


def workers(run, n, n_threads=2):
    """Results of queries 0..n-1 served by ``n_threads`` threads pulling the next index."""
    counter, out = itertools.count(), [None] * n

    def serve():
        for i in counter:
            if i >= n:
                return
            out[i] = run(i)
    ts = [threading.Thread(target=serve) for _ in range(n_threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def measure(run, n, repeats):
    """Serial vs 2 worker threads (headline) and vs ``ThreadPoolExecutor.map``, alternating
    rounds; every threaded result must equal the serial one bit for bit."""
    def same(xs, ys):
        return all(np.array_equal(x, u) and np.array_equal(y, v) for (x, y), (u, v) in zip(xs, ys))
    serial = [run(i) for i in range(n)]
    workers(run, 8)
    t1s, t2s, tes, identical = [], [], [], True
    with ThreadPoolExecutor(2) as ex:
        list(ex.map(run, range(4)))
        for _ in range(repeats):
            t = time.perf_counter()
            s = [run(i) for i in range(n)]
            t1s.append(time.perf_counter() - t)
            t = time.perf_counter()
            par = workers(run, n)
            t2s.append(time.perf_counter() - t)
            t = time.perf_counter()
            em = list(ex.map(run, range(n), chunksize=8))
            tes.append(time.perf_counter() - t)
            identical &= same(serial, s) and same(serial, par) and same(serial, em)
            print(f"  1 thread {n / t1s[-1]:.0f} q/s, 2 workers {n / t2s[-1]:.0f} q/s "
                  f"(ratio {t1s[-1] / t2s[-1]:.2f}), executor.map ratio {t1s[-1] / tes[-1]:.2f}", flush=True)
    r = [a / b for a, b in zip(t1s, t2s)]
    re_ = [a / b for a, b in zip(t1s, tes)]
    return {"threads_2_over_1": float(np.median(r)), "ratios": r,
            "qps_1": n / float(np.median(t1s)), "qps_2": n / float(np.median(t2s)),
            "executor_map_2_over_1": float(np.median(re_)), "executor_map_ratios": re_,
            "identical_to_serial": bool(identical), "mean_query_ms_serial": float(np.median(t1s)) / n * 1e3}


def ratio_of(full, n, repeats):
    run, _ = full
    return {**measure(run, n, repeats),
            "what": "whole stitch method (ANN + BM25 + n-gram seeds + engine), query embedding excluded"}


if __name__ == "__main__":
    main()
