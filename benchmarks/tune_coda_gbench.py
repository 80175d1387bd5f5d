"""CODA option search on GraphRAG-Bench Medical (dev, data README) by offline evidence
coverage (docs/architecture.md §9): the published mechanisms (``PAPER``) and grids of
our options (relevance alignment weights, z-score elimination), beside dense and BM25
on the same questions.

    python benchmarks/tune_coda_gbench.py --index indexes/coda_gb_minilm/medical/Medical \\
        --every 2

Needs the index and its CODA structure (``python -m hyperrag_fast.eval --dataset
graphrag_bench_medical --methods coda ...`` makes both). Writes
``benchmarks/results/tuning_coda_gbench_<embedder>.json``.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hyperrag_fast.chunking import chunk_passage  # noqa: E402
from hyperrag_fast.coda.retrieve import PAPER, CodaOptions  # noqa: E402
from hyperrag_fast.embed.registry import make_embedder  # noqa: E402
from hyperrag_fast.eval.coverage import evidence_coverage  # noqa: E402
from hyperrag_fast.eval.gbench import load_graphrag_bench, summarize_coverage  # noqa: E402
from hyperrag_fast.eval.harness import _git, machine_info  # noqa: E402
from hyperrag_fast.index import HyperIndex  # noqa: E402
from hyperrag_fast.prebuilt import load_prebuilt  # noqa: E402
from hyperrag_fast.retriever import Retriever  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--index", required=True)
    p.add_argument("--subset", default="medical")
    p.add_argument("--source", default="Medical")
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--every", type=int, default=2, help="every n-th question (speed)")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--grid", choices=("weights", "pool", "dedup"), default="weights",
                   help="weights: graph/lexical weight grid; pool: max pooling, relations only")
    a = p.parse_args()
    machine = machine_info()
    _, qs = load_graphrag_bench(a.subset)
    qs = [q for q in qs if q.source == a.source][::a.every]
    emb = make_embedder(a.embedder)
    ix = HyperIndex.load(a.index, embedder=emb)
    ret = Retriever(ix, emb, prebuilt=load_prebuilt(a.index, ["coda"]))
    st = ret.state
    cr = st.coda.retriever
    passages = [chunk_passage(c) for c in ix.chunks]
    qv = np.asarray(emb.embed([q.question for q in qs]), np.float32)

    def score(rows):
        per_q = [float(np.mean([c.covered for c in evidence_coverage(q.evidence, [passages[i] for i in r])]))
                 for q, r in zip(qs, rows)]
        return summarize_coverage(qs, per_q)

    out = {"command": "python benchmarks/tune_coda_gbench.py " + " ".join(sys.argv[1:]),
           "git_commit": _git("rev-parse", "HEAD"), "machine": machine,
           "n_questions": len(qs), "top_k": a.top_k, "rows": {}}
    dense = [list(np.argsort(-(ix.chunk_vec @ v))[:a.top_k]) for v in qv]
    out["rows"]["dense"] = {"coverage": score(dense)}
    bm = [list(st.bm25.top_k(q.question, a.top_k)[0]) for q in qs]
    out["rows"]["bm25"] = {"coverage": score(bm)}
    grid = {"paper": PAPER}
    if a.grid == "weights":
        for gw, lw, z in itertools.product((0.0, 0.01, 0.03, 0.1), (0.0, 0.3, 0.6), (1.0,)):
            grid[f"ours_gw{gw}_lw{lw}_z{z}"] = CodaOptions(graph_weight=gw, lexical_weight=lw,
                                                           elim_min_z=z)
    elif a.grid == "dedup":
        for gw, lw, dd in itertools.product((0.0, 0.01), (0.3,), (0.9, 0.95, 0.98)):
            grid[f"ours_max_relations_gw{gw}_lw{lw}_dedup{dd}"] = CodaOptions(
                graph_weight=gw, lexical_weight=lw, align_pool="max", align_items="relations",
                dedup_sim=dd)
    else:
        for items, gw, z in itertools.product(("relations", "all"), (0.01, 0.03, 0.1), (1.0, 2.0)):
            grid[f"ours_max_{items}_gw{gw}_lw0.3_z{z}"] = CodaOptions(
                graph_weight=gw, lexical_weight=0.3, elim_min_z=z, align_pool="max",
                align_items=items)
    for name, o in grid.items():
        t0 = time.perf_counter()
        rows = [cr.retrieve(v, q.question, a.top_k, o, False, st.bm25).chunk_ids.tolist()
                for v, q in zip(qv, qs)]
        ms = (time.perf_counter() - t0) * 1e3 / len(qs)
        out["rows"][name] = {"coverage": score(rows), "mean_ms": ms,
                             "options": {k: v for k, v in asdict(o).items()
                                         if k in ("align", "elim_calibration", "graph_weight",
                                                  "lexical_weight", "elim_min_z", "dense_weight",
                                                  "align_pool", "align_items", "dedup_sim")}}
        c = out["rows"][name]["coverage"]
        print(f"{name:>28} all {c['all']:.3f} CR {c.get('Complex Reasoning', 0):.3f} {ms:.1f} ms",
              flush=True)
    path = ROOT / "benchmarks" / "results" / f"tuning_coda_gbench_{a.embedder}_{a.grid}.json"
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
