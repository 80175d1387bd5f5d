"""Choose STITCH's constants and options on the 2WikiMultiHopQA dev split (first 200
questions) only, by coordinate search from the paper's constants.

    python benchmarks/tune_stitch.py --index-dir indexes/2wiki --cache-dir cache

Objective: mean of Recall@2, Recall@5 and Recall@8 on dev (R@2 is in it because a first
run on (R@5 + R@8) / 2 traded 4.5 points of R@2 for 0.06 points of objective). Coupled
options move as one coordinate (BM25 weight and k; seed matcher and n-gram length; damping
and chunk-graph shape). Searched apart, "ner+ngram" was judged with 1-word n-grams only and
never won, and d = 0 made the graph options a plateau that hid d = 0.2 on a sparse graph. Every evaluated setting is written to
``benchmarks/results/tuning_stitch_dev.{json,md}``; copy the winner into
``hyperrag_fast/config.py`` by hand (the file records it, nothing is hard-coded here).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from hyperrag_fast.eval.data import load_dataset
from hyperrag_fast.eval.harness import (default_embedder, default_extractor, embed_questions,
                                        load_or_build_index, machine_info,
                                        run_method)
from hyperrag_fast.eval.metrics import mean_recall
from hyperrag_fast.config import HybridOptions
from hyperrag_fast.config import StitchOptions
from hyperrag_fast.retriever import QueryOptions, Retriever

INF = math.inf
#: (where, field, values) searched one coordinate at a time, in this order.
GRID = [
    ("stitch", "group_weight", ["log1p", "idf"]),
    # spaCy NER seeds ("ner", "ner+ngram") were searched here until issue 22 removed them
    ("seeds", "seeds,ngram_min_words", [("none", 1), ("ngram", 1), ("ngram", 2), ("ngram", 3)]),
    ("hybrid", "seed_max_group", [INF, 300, 100, 30, 10, 5, 2]),
    ("hybrid", "seed_value", [0.5, 0.75, 1.0]),
    ("bm25", "weight,k", [(0.0, 0), (0.05, 50), (0.1, 50), (0.2, 50), (0.4, 50), (0.1, 20),
                          (0.2, 100)]),
    ("ppr", "damping,graph_max_group,graph_weight",
     [(d, m, w) for d in (0.0, 0.1, 0.2, 0.3, 0.5, 0.85)
      for m, w in ((INF, "uniform"), (5, "uniform"), (20, "inverse_size"), (10, "inverse_size"),
                   (5, "inverse_size"))]),
    ("stitch", "delta", [0.3, 0.4, 0.5, 0.6]),
    ("stitch", "lam", [0.0, 0.1, 0.3, 0.6, 1.0]),
    ("stitch", "temporal_max_group", [INF, 200, 50]),
    ("stitch", "temporal_from_space", [0.0, 0.5, 1.0, 2.0]),
    ("stitch", "alpha", ["ratio", "log"]),
    ("query", "k_nodes", [25, 50, 100, 200]),
    ("query", "k_chunks", [25, 50, 100]),
]


def set_field(o: QueryOptions, where: str, name: str, value) -> QueryOptions:
    if where == "stitch":
        return replace(o, stitch=o.stitch.replace(**{name: value}))
    if where == "hybrid":
        return replace(o, hybrid=replace(o.hybrid, **{name: value}))
    if where == "bm25":  # weight and candidate count move together
        return replace(o, hybrid=replace(o.hybrid, bm25_weight=value[0], k_bm25=value[1]))
    if where == "ppr":  # the chunk graph only matters when d > 0, so they move together
        return replace(o, stitch=o.stitch.replace(damping=value[0], graph_max_group=value[1],
                                                  graph_weight=value[2]))
    if where == "seeds":  # the matcher and its n-gram length move together
        return replace(o, hybrid=replace(o.hybrid, seeds=value[0], ngram_min_words=value[1]))
    return replace(o, **{name: value})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--index-dir", default="indexes/2wiki")
    p.add_argument("--cache-dir", default="cache")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--out", default="benchmarks/results/tuning_stitch_dev")
    a = p.parse_args(argv)

    ds = load_dataset("2wikimultihopqa", "dev", a.data_dir)  # dev only: never test here
    emb = default_embedder()
    ix, _ = load_or_build_index(ds, default_extractor(), emb, a.index_dir, a.cache_dir)
    r = Retriever(ix, emb)
    qvecs, _ = embed_questions(emb, [q.question for q in ds.questions], progress=False)
    golds = [lab.gold for lab in ds.labels]
    seen: dict[str, dict] = {}

    def score(o: QueryOptions) -> float:
        key = json.dumps(asdict(o), sort_keys=True, default=str)
        if key not in seen:
            t0 = time.perf_counter()
            out = run_method(r, "stitch", o, ds, qvecs, 8, progress=False)
            m = mean_recall(out["ranked"], golds, (2, 5, 8))
            rec = {k: m[f"recall@{k}"] for k in (2, 5, 8)}
            seen[key] = {"options": json.loads(key), "recall": rec,
                         "objective": (rec[2] + rec[5] + rec[8]) / 3,
                         "p50_ms": float(np.median(out["retrieval_ms"])),
                         "seconds": time.perf_counter() - t0}
            print(f"{seen[key]['objective']:.4f} R@2/5/8 {rec[2]:.3f}/{rec[5]:.3f}/{rec[8]:.3f} "
                  f"{seen[key]['p50_ms']:.2f}ms", file=sys.stderr, flush=True)
        return seen[key]["objective"]

    best = QueryOptions(stitch=StitchOptions.paper(), hybrid=HybridOptions.paper(), method="stitch")
    best_s = score(best)
    trail = [("start: paper constants", best_s)]
    for _ in range(a.passes):
        for where, name, values in GRID:
            for v in values:
                o = set_field(best, where, name, v)
                s = score(o)
                if s > best_s + 1e-9:
                    best, best_s = o, s
                    trail.append((f"{where}.{name} = {v}", s))
                    print(f"  -> {where}.{name} = {v}: {s:.4f}", file=sys.stderr, flush=True)
    out = {"split": "2wikimultihopqa dev (first 200 questions)", "objective": "(R@2 + R@5 + R@8) / 3",
           "command": "python benchmarks/tune_stitch.py " + " ".join(argv or sys.argv[1:]),
           "machine": machine_info(), "best": json.loads(json.dumps(asdict(best), default=str)),
           "best_objective": best_s, "trail": trail, "evaluated": list(seen.values())}
    Path(a.out + ".json").write_text(json.dumps(out, indent=1, default=str))
    lines = ["# STITCH tuning on the 2WikiMultiHopQA dev split", "",
             f"Command: `{out['command']}`  ", f"Objective: {out['objective']}; "
             f"{len(seen)} settings evaluated; about 1 point is noise at 200 questions.", "",
             "| step | objective |", "|---|---|"]
    lines += [f"| {t} | {s:.4f} |" for t, s in trail]
    lines += ["", "Best options:", "", "```", json.dumps(out["best"], indent=1), "```"]
    Path(a.out + ".md").write_text("\n".join(lines) + "\n")
    print(json.dumps(out["best"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
