"""What-if (diagnostic, not a default): graph-stage latency of the default options with
temporal bridging capped at groups of <= N members, and how much the top-8 changes.

    python benchmarks/whatif_temporal_cap.py --states 1000000 --queries 100 --caps 50 200 1000

Synthetic corpus as in ``_setup.setup`` (exact top-K candidates, no BM25 / seeds).
``default`` = ``QueryOptions().stitch`` read at run time; each cap is
``default.replace(temporal_max_group=N)``. Reports p50/p99 ms, median |C_q| and the mean
top-8 overlap with the uncapped default (a speed figure only; quality must be measured
on the dev split). Writes ``results/whatif_temporal_cap.json``.
"""
from __future__ import annotations

import argparse
import time

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
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--caps", type=float, nargs="+", default=[50, 200, 1000])
    ap.add_argument("--out", default="whatif_temporal_cap.json")
    a = ap.parse_args()
    c, g, eng, qs, cn, cc = setup(a.states, a.queries)
    base = VARIANTS["default"]
    opts = {"default": base, **{f"temporal_max_group_{int(x)}": base.replace(temporal_max_group=x) for x in a.caps}}
    for o in opts.values():
        eng.warmup(o)
    ref = {}
    out = {"states": g.n_nodes, "queries": len(qs), "variants": {}}
    for name, o in opts.items():
        lat, cq, ov = [], [], []
        for i in range(len(qs)):
            t = time.perf_counter()
            r = eng.query(qs[i], cn[i], cc[i], o)
            lat.append((time.perf_counter() - t) * 1e3)
            cq.append(int(r.stats[0]))
            if name == "default":
                ref[i] = set(r.chunk_ids.tolist())
            ov.append(len(ref[i] & set(r.chunk_ids.tolist())) / max(1, len(ref[i])))
        v = {"options": describe(o), "p50_ms": C.pct(lat, 50), "p99_ms": C.pct(lat, 99),
             "cq_p50": C.pct(cq, 50), "top8_overlap_with_default_mean": float(np.mean(ov))}
        out["variants"][name] = v
        print(name, {k: v[k] for k in ("p50_ms", "p99_ms", "cq_p50", "top8_overlap_with_default_mean")}, flush=True)
    C.write_result(a.out, out)


if __name__ == "__main__":
    main()
