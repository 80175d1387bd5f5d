"""CODA's query paths side by side on one index (issue 23 item 3, docs/architecture.md §7
"CODA query cost"): for every question, the ordered top-8 of each named option set
against the full scans with the power PPR (``config.CODA_EXACT``), in one process over
the bound retriever (``CodaRetriever.retrieve``, the method's own call), and the
method's milliseconds per path (alternating blocks; run it under ``flock
/work/timing.lock`` for timings, niced for the equivalence only).

    python benchmarks/coda_fast_ab.py --index indexes/codacost_cost4/2wiki_minilm \\
        --embedder minilm --questions 1000 --into coda_cost.json
"""
from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

import _common as C
from hyperrag_fast.config import CODA_EXACT, TUNED
from hyperrag_fast.embed.registry import make_embedder
from hyperrag_fast.eval.data import load_dataset
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.methods import needs
from hyperrag_fast.prebuilt_reader import load_prebuilt
from hyperrag_fast.retriever import Retriever

PATHS = {
    "exact (sims full, power PPR)": CODA_EXACT,
    "sims lazy": replace(CODA_EXACT, sims="lazy"),
    "sims lazy + local push": replace(CODA_EXACT, sims="lazy", ppr_solver="local"),
    "sims lazy + local push + touched (default)": replace(
        CODA_EXACT, sims="lazy", ppr_solver="local", functional_scope="touched"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--questions", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=1, help="timed passes per path")
    ap.add_argument("--into", default=None, help="results file (under results/) to add the run to")
    a = ap.parse_args()
    emb = make_embedder(a.embedder, intra_op_threads=1)
    ix = HyperIndex.load(a.index, embedder=emb)
    pre = load_prebuilt(a.index, needs("coda", ix.merge), generation=ix.generation)
    r = Retriever(ix, emb, prebuilt=pre, options=replace(TUNED, method="coda"))
    r.warmup()
    qs = [q.question for q in load_dataset("2wikimultihopqa", "all").questions[:a.questions]]
    vecs = r._embed(qs)
    ret, bm = r.state.coda.retriever, r.state.bm25
    for o in PATHS.values():
        ret.retrieve(vecs[0], qs[0], 8, o, False, bm)  # first use: codes, moments, push graph
    top = {k: [] for k in PATHS}
    ms = {k: [] for k in PATHS}
    load0 = os.getloadavg()
    for rep in range(a.repeats):
        for k, o in PATHS.items():
            for q, t in zip(vecs, qs):
                t0 = time.perf_counter()
                res = ret.retrieve(q, t, 8, o, False, bm)
                ms[k].append((time.perf_counter() - t0) * 1e3)
                if rep == 0:
                    top[k].append(res.chunk_ids[:8])
    ref = top["exact (sims full, power PPR)"]
    out = {"command": C.command(), "machine": C.machine(), "index": a.index,
           "embedder": a.embedder, "questions": len(qs), "loadavg": [load0, os.getloadavg()],
           "paths": {}}
    for k in PATHS:
        same = [np.array_equal(x, y) for x, y in zip(ref, top[k])]
        ov = [len(set(x.tolist()) & set(y.tolist())) / max(len(x), 1) for x, y in zip(ref, top[k])]
        out["paths"][k] = {"same_ordered_top8": int(sum(same)), "of": len(same),
                           "mean_top8_overlap": float(np.mean(ov)),
                           "method_ms_p50": float(np.median(ms[k]))}
    print(json.dumps(out["paths"], indent=1))
    if a.into:
        path = C.RESULTS / a.into
        res = json.loads(path.read_text()) if path.exists() else {}
        res.setdefault("query_paths", {})[a.embedder] = out
        path.write_text(json.dumps(res, indent=2, default=C._default) + "\n")


if __name__ == "__main__":
    main()
