"""CODA option search on GraphRAG-Bench (dev, data README: either subset) by offline
evidence coverage (docs/architecture.md §9), on every source of the subsets named,
chosen by the worst subset: the published mechanisms (``PAPER``), our options (a
grid around the defaults) and each pathway switched off, beside dense and BM25 on the
same questions.

    OPENBLAS_NUM_THREADS=1 python benchmarks/tune_coda_gbench.py \\
        --index-root indexes/coda_gb_minilm --subsets medical,novel --every 2

Needs the indexes and their CODA structure (``python -m hyperrag_fast.eval --dataset
graphrag_bench_* --methods coda --index-dir ...`` makes both). Writes
``benchmarks/results/tuning_coda_gbench_<embedder>.json``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hyperrag_fast.chunking import chunk_passage  # noqa: E402
from hyperrag_fast.coda.retrieve import PAPER, CodaOptions  # noqa: E402
from hyperrag_fast.embed.cache import CachedEmbedder  # noqa: E402
from hyperrag_fast.embed.registry import make_embedder  # noqa: E402
from hyperrag_fast.eval.coverage import evidence_coverage  # noqa: E402
from hyperrag_fast.eval.gbench import _safe, load_graphrag_bench, summarize_coverage  # noqa: E402
from hyperrag_fast.eval.harness import _git, machine_info  # noqa: E402
from hyperrag_fast.index import HyperIndex  # noqa: E402
from hyperrag_fast.prebuilt import load_prebuilt  # noqa: E402
from hyperrag_fast.retriever import Retriever  # noqa: E402

KEYS = ("align", "elim_calibration", "graph_weight", "lexical_weight", "fact_weight",
        "dedup_sim", "dense_pool", "align_items", "elim_min_z", "semantic", "contextual",
        "functional", "elimination")


def grid() -> dict[str, CodaOptions]:
    """The published mechanisms, the defaults of the last session (``s8``), and single
    steps away from the candidate (``cand``: fact_weight 0.2, dedup 0.99)."""
    s8 = CodaOptions(fact_weight=0.0, dedup_sim=0.0)
    cand = replace(s8, fact_weight=0.2, dedup_sim=0.99)
    g = {"paper": PAPER, "s8": s8, "s8+fact0.2": replace(s8, fact_weight=0.2),
         "cand": cand}
    for k, v in (("fact_weight", 0.1), ("fact_weight", 0.4), ("lexical_weight", 0.5),
                 ("graph_weight", 0.0), ("graph_weight", 0.03), ("graph_weight", 0.1),
                 ("align_items", "all"), ("dense_pool", 40)):
        g[f"cand:{k}={v}"] = replace(cand, **{k: v})
    for sw in ("semantic", "contextual", "functional", "elimination"):
        g[f"cand:no_{sw}"] = replace(cand, **{sw: False})
        g[f"cand:gw0.1:no_{sw}"] = replace(cand, graph_weight=0.1, **{sw: False})
    return g


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--index-root", required=True)
    p.add_argument("--subsets", default="medical,novel")
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--every", type=int, default=2, help="every n-th question (speed)")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--only", default=None, help="comma-separated grid names (default all)")
    a = p.parse_args()
    out = {"command": "python benchmarks/tune_coda_gbench.py " + " ".join(sys.argv[1:]),
           "git_commit": _git("rev-parse", "HEAD"), "machine": machine_info(),
           "top_k": a.top_k, "every": a.every, "rows": defaultdict(dict), "n_questions": {}}
    emb0 = make_embedder(a.embedder)
    emb = CachedEmbedder(emb0, Path(a.cache_dir) / "embeddings.sqlite") if a.cache_dir else emb0
    g = grid()
    if a.only:
        g = {k: g[k] for k in a.only.split(",")}
    for sub in a.subsets.split(","):
        docs, qs = load_graphrag_bench(sub)
        have = {q.source for q in qs if (Path(a.index_root) / sub / _safe(q.source)).is_dir()}
        out.setdefault("sources_missing", {})[sub] = sorted({q.source for q in qs} - have)
        qs = [q for q in qs if q.source in have][::a.every]
        rows: dict[str, list] = defaultdict(lambda: [None] * len(qs))
        ms: dict[str, list] = defaultdict(list)
        ctx_of: dict[str, list] = {}
        for src in sorted({q.source for q in qs}):
            d = Path(a.index_root) / sub / _safe(src)
            ix = HyperIndex.load(d, embedder=emb)
            st = Retriever(ix, emb, prebuilt=load_prebuilt(d, ["coda"])).state
            cr = st.coda.retriever
            passages = [chunk_passage(c) for c in ix.chunks]
            idx = [i for i, q in enumerate(qs) if q.source == src]
            qv = np.asarray(emb.embed([qs[i].question for i in idx]), np.float32)
            ctx_of[src] = passages
            for i, v in zip(idx, qv):
                rows["dense"][i] = (src, np.argsort(-(ix.chunk_vec @ v))[:a.top_k].tolist())
                rows["bm25"][i] = (src, st.bm25.top_k(qs[i].question, a.top_k)[0].tolist())
            for name, o in g.items():
                t0 = time.perf_counter()
                for i, v in zip(idx, qv):
                    rows[name][i] = (src, cr.retrieve(v, qs[i].question, a.top_k, o, False,
                                                      st.bm25).chunk_ids.tolist())
                ms[name].append((time.perf_counter() - t0) * 1e3 / len(idx))
        out["n_questions"][sub] = len(qs)
        for name, rr in rows.items():
            per_q = [float(np.mean([c.covered for c in evidence_coverage(
                q.evidence, [ctx_of[s][j] for j in r])])) for q, (s, r) in zip(qs, rr)]
            cov = summarize_coverage(qs, per_q)
            out["rows"][name][sub] = {"coverage": cov}
            if name in g:
                out["rows"][name][sub]["mean_ms"] = float(np.mean(ms[name]))
            print(f"{sub:>8} {name:>28} all {cov['all']:.3f} CR {cov.get('Complex Reasoning', 0):.3f}",
                  flush=True)
    for name, o in g.items():
        out["rows"][name]["options"] = {k: v for k, v in asdict(o).items() if k in KEYS}
    subs = a.subsets.split(",")
    for name, r in out["rows"].items():
        base = {s: max(out["rows"][b][s]["coverage"]["all"] for b in ("dense", "bm25"))
                for s in subs}
        r["worst_margin_all"] = min(r[s]["coverage"]["all"] - base[s] for s in subs)
    best = max(g, key=lambda n: out["rows"][n]["worst_margin_all"])
    out["chosen_by_worst_subset_margin_over_best_of_dense_bm25"] = best
    out["rows"] = dict(out["rows"])
    path = ROOT / "benchmarks" / "results" / f"tuning_coda_gbench_{a.embedder}.json"
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print("chosen:", best)


if __name__ == "__main__":
    main()
