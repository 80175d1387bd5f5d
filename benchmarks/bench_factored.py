"""The chunk graph's hot spot (issue item 7): a name group of s chunks in C_q is a clique
of s (s - 1) arcs. ``ppr="factored"`` runs the same power iteration on the chunk-group
incidences instead (``kernels.ppr_factored``): s per group, same results to rounding.

    python benchmarks/bench_factored.py --index indexes/2wiki          # real 2Wiki questions
    python benchmarks/bench_factored.py --states 1000000 --queries 200 # synthetic corpus

For the group cap of the tuned preset and for no cap (graph_max_group = inf), the engine
(STIBP + projection + chunk graph + PPR) runs every query with ``ppr="power"`` (arcs) and
``ppr="factored"``, interleaved per query; reports latency p50/p99, graph sizes (arcs,
incidences) and whether the top-k agree (up to exact ties). Queries whose clique bound
exceeds ``--max-arcs`` are skipped for the arc form only, and counted.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

try:
    from . import _common as C
    from ._setup import VARIANTS, describe, setup
    from .bench_scale import graph_arc_bound
    from .bench_threads import record_2wiki
except ImportError:
    import _common as C
    from _setup import VARIANTS, describe, setup
    from bench_scale import graph_arc_bound
    from bench_threads import record_2wiki


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", default=None, help="a saved 2Wiki index (else synthetic)")
    ap.add_argument("--states", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3, help="timed passes; per-query median")
    ap.add_argument("--max-arcs", type=float, default=5e7)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    base = VARIANTS["default"]
    if a.index:
        calls, eng, _ = record_2wiki(a.index, "default", a.queries)
        g = eng.graph
        source = a.index
    else:
        _, g, eng, qs, cn, cc = setup(a.states, a.queries)
        calls = [((qs[i], cn[i], cc[i]), {}) for i in range(qs.shape[0])]
        source = f"synthetic {g.n_nodes} states"
    out = {"source": source, "states": g.n_nodes, "queries": len(calls), "repeats": a.repeats,
           "max_arcs": a.max_arcs, "by_cap": {}}
    for cap in (base.graph_max_group, float("inf")):
        opts = {f: base.replace(graph_max_group=cap, ppr=f) for f in ("power", "factored")}
        for o in opts.values():
            eng.warmup(o)
        lat = {f: [] for f in opts}
        size = {f: [] for f in opts}
        skipped, tie_ok, n_cmp = 0, 0, 0
        for args, kw in calls:
            kw = {k: v for k, v in kw.items() if k != "detail"}
            r0 = eng.query(*args[:3], opts["factored"], **kw, detail=True)
            run_arcs = graph_arc_bound(g, r0.cq.astype(np.int64), cap) <= a.max_arcs
            skipped += not run_arcs
            res = {}
            for f, o in opts.items():
                if f == "power" and not run_arcs:
                    continue
                ts = []
                for _ in range(a.repeats):
                    t = time.perf_counter()
                    r = eng.query(*args[:3], o, **kw)
                    ts.append(time.perf_counter() - t)
                lat[f].append(float(np.median(ts)) * 1e3)
                size[f].append(int(r.stats[1]))
                res[f] = r
            if "power" in res:
                n_cmp += 1
                pw = eng.query(*args[:3], opts["power"], **kw, detail=True)
                # same ranking up to exact ties: power's score of factored's i-th chunk
                d = dict(zip(pw.cq.tolist(), pw.cq_pi.tolist()))
                tie_ok += bool(np.allclose([d[c] for c in res["factored"].chunk_ids.tolist()], pw.scores,
                                           atol=1e-12, rtol=0))
        row = {"skipped_arc_form_over_max_arcs": skipped, "compared": n_cmp, "same_topk_up_to_ties": tie_ok}
        for f in opts:
            if not lat[f]:
                row[f] = {"n": 0}
                continue
            row[f] = {"n": len(lat[f]), "p50_ms": C.pct(lat[f], 50), "p99_ms": C.pct(lat[f], 99),
                      "graph_size_p50": C.pct(size[f], 50), "graph_size_max": int(max(size[f])),
                      "graph_size_is": "arcs" if f == "power" else "chunk-group incidences"}
        row["options"] = describe(opts["factored"])
        out["by_cap"][f"{cap:g}"] = row
        print(f"cap {cap:g}: " + ", ".join(f"{f} p50 {row[f]['p50_ms']:.3f} ms p99 {row[f]['p99_ms']:.3f} ms "
                                           f"size p50 {row[f]['graph_size_p50']:.0f} max {row[f]['graph_size_max']}"
                                           for f in opts if row[f]["n"])
              + f"; same top-k {tie_ok}/{n_cmp}, arc form skipped {skipped}", flush=True)
    name = a.out or ("factored_2wiki.json" if a.index else f"factored_{a.states:.0e}.json".replace("+0", ""))
    C.write_result(name, out)


if __name__ == "__main__":
    main()
