"""Where the time goes inside ``stitch_query`` (issue item 8).

    python benchmarks/bench_profile.py                      # 1e6 states, 200 queries

Runs the library's stage-by-stage replay of ``kernels/query.py``
(``hyperrag_fast.engine_stages.query_stages``: activate, spatial, temporal, query_chunk_set,
project_scores, chunk_prior, chunk_graph, ppr, topk + reset_scratch), timing each call;
checks the top-k equals ``StitchEngine.query``.
Caches are flushed (64 MB streamed) before the staged replay and before the whole
``StitchEngine.query`` of each query, so both are cold-cache figures (a stream of
queries keeps more of the index in cache: compare ``bench_scale.py``).
Each Python->Numba call pays a dispatch cost (unboxing the 18-array index tuple and the
17-array scratch); it is measured (``dispatch_us``: a no-op reset_scratch call) and
reported, not subtracted. Queries whose chunk graph would
exceed ``--max-arcs`` arcs are skipped and counted (see bench_scale.py). Option sets
(read at run time, ``_setup.VARIANTS``): ``default`` = ``QueryOptions().stitch`` (tuned
preset), ``paper`` = ``StitchOptions.paper()``; no BM25 bonus or seeds (no question text).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from hyperrag_fast.engine_stages import STAGES, query_stages
from hyperrag_fast.kernels.scratch import reset_scratch

try:
    from . import _common as C
    from ._setup import VARIANTS, describe, setup
    from .bench_scale import graph_arc_bound
except ImportError:
    import _common as C
    from _setup import VARIANTS, describe, setup
    from bench_scale import graph_arc_bound

_FLUSH = np.ones(64 * 1024 * 1024 // 8)  # 64 MB, twice this machine's L3


def flush_caches():
    """Stream through 64 MB so that the next call finds nothing of the last query in
    cache (the staged replay and the whole-query timing of one query are both cold)."""
    _FLUSH.sum()


def staged(eng, opts, q, cn, cc, bonus=None, seeds=None, seed_values=None):
    """(seconds per stage, top-k ids, sizes) of one query replayed stage by stage by the
    library (``engine_stages.query_stages``)."""
    r = query_stages(eng, q, cn, cc, opts, chunk_bonus=bonus, seed_nodes=seeds, seed_values=seed_values)
    return r.seconds, r.chunk_ids, r.info


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--states", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--max-arcs", type=float, default=5e7)
    ap.add_argument("--variant-budget-s", type=float, default=150)
    ap.add_argument("--index", default=None, help="profile the 2Wiki index's default-method queries instead")
    ap.add_argument("--out", default="profile.json")
    a = ap.parse_args()
    if a.index:
        return profile_index(a)
    c, g, eng, qs, cn, cc = setup(a.states, a.queries)
    sc = eng._scratch()
    empty = np.empty(0, dtype=np.int32)
    reset_scratch(sc, empty)
    d = [time.perf_counter()]
    for _ in range(200):
        reset_scratch(sc, empty)
        d.append(time.perf_counter())
    dispatch_us = float(np.median(np.diff(d))) * 1e6
    out = {"states": g.n_nodes, "queries": len(qs), "dispatch_us": dispatch_us, "variants": {}}
    for name, opts in VARIANTS.items():
        bounds = [graph_arc_bound(g, eng.query(qs[i], cn[i], cc[i], opts.replace(ppr="none")).cq,
                                  opts.graph_max_group) for i in range(len(qs))]
        rows, whole, infos, skipped, mismatch = [], [], [], 0, 0
        t0 = time.perf_counter()
        for i in range(len(qs)):
            if bounds[i] > a.max_arcs:
                skipped += 1
                continue
            if time.perf_counter() - t0 > a.variant_budget_s:
                break
            flush_caches()
            st, top, info = staged(eng, opts, qs[i], cn[i], cc[i])
            flush_caches()
            t = time.perf_counter()
            r = eng.query(qs[i], cn[i], cc[i], opts)
            whole.append(time.perf_counter() - t)
            mismatch += int(not np.array_equal(r.chunk_ids, top))
            rows.append(st)
            infos.append(info)
        if not rows:
            out["variants"][name] = {"n": 0, "skipped_over_max_arcs": skipped, "options": describe(opts),
                                     "note": "no query measured within the time budget"}
            print(name, "no query measured within the time budget", flush=True)
            continue
        rows = np.array(rows) * 1e3
        tot = rows.sum(axis=1)
        v = {"n": len(rows), "skipped_over_max_arcs": skipped, "options": describe(opts), "topk_mismatch_vs_engine": mismatch,
             "engine_query_ms_p50": C.pct(np.array(whole) * 1e3, 50),
             "staged_total_ms_p50": C.pct(tot, 50),
             "stage_ms_p50": {s: C.pct(rows[:, j], 50) for j, s in enumerate(STAGES)},
             "stage_ms_p99": {s: C.pct(rows[:, j], 99) for j, s in enumerate(STAGES)},
             "stage_share_of_mean": {s: float(rows[:, j].mean() / tot.mean()) for j, s in enumerate(STAGES)},
             "info_p50": {k: C.pct([x[k] for x in infos], 50) for k in infos[0]},
             "info_max": {k: int(max(x[k] for x in infos)) for k in infos[0]}}
        out["variants"][name] = v
        print(name, {k: v[k] for k in ("n", "skipped_over_max_arcs", "engine_query_ms_p50", "staged_total_ms_p50")})
        for s in STAGES:
            print(f"   {s:16s} p50 {v['stage_ms_p50'][s]:9.3f} ms  p99 {v['stage_ms_p99'][s]:9.3f}  "
                  f"share {v['stage_share_of_mean'][s]:.2f}")
        print("   ", v["info_p50"], flush=True)
    C.write_result(a.out, out)


def profile_index(a):
    """Stage times of the engine calls the default ``stitch`` method makes on the index
    (recorded, then replayed stage by stage)."""
    try:
        from .bench_threads import record_2wiki
    except ImportError:
        from bench_threads import record_2wiki
    calls, eng, _ = record_2wiki(a.index, "default", a.queries)
    opts = VARIANTS["default"]
    rows, infos, mismatch, whole = [], [], 0, []
    for args, kw in calls:
        q, cn, cc, o = args[:4]
        flush_caches()
        st, top, info = staged(eng, o, q, cn, cc, kw.get("chunk_bonus"), kw.get("seed_nodes"), kw.get("seed_values"))
        flush_caches()
        t = time.perf_counter()
        r = eng.query(*args, **kw)
        whole.append(time.perf_counter() - t)
        mismatch += int(not np.array_equal(r.chunk_ids, top))
        rows.append(st)
        infos.append(info)
    rows = np.array(rows) * 1e3
    tot = rows.sum(axis=1)
    v = {"n": len(rows), "topk_mismatch_vs_engine": mismatch, "options": describe(opts),
         "engine_query_ms_p50": C.pct(np.array(whole) * 1e3, 50), "staged_total_ms_p50": C.pct(tot, 50),
         "stage_ms_p50": {s: C.pct(rows[:, j], 50) for j, s in enumerate(STAGES)},
         "stage_ms_p99": {s: C.pct(rows[:, j], 99) for j, s in enumerate(STAGES)},
         "stage_share_of_mean": {s: float(rows[:, j].mean() / tot.mean()) for j, s in enumerate(STAGES)},
         "info_p50": {k: C.pct([x[k] for x in infos], 50) for k in infos[0]},
         "info_max": {k: int(max(x[k] for x in infos)) for k in infos[0]}}
    for s_ in STAGES:
        print(f"   {s_:16s} p50 {v['stage_ms_p50'][s_]:9.3f} ms  share {v['stage_share_of_mean'][s_]:.2f}")
    print(v["info_p50"], v["engine_query_ms_p50"], flush=True)
    C.write_result(a.out, {"source": a.index, "variants": {"default": v}})


if __name__ == "__main__":
    main()
