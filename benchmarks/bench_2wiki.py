"""Per-stage query latency on the real 2WikiMultiHopQA index (issue item 3).

    python benchmarks/bench_2wiki.py                         # index indexes/2wiki, all 1,000 questions
    python benchmarks/bench_2wiki.py --questions 200 --methods stitch

Loads ``hyperrag_fast.eval.data.load_dataset('2wikimultihopqa', 'all')``, the evaluation
embedder (``hyperrag_fast.eval.harness.default_embedder()``) and the saved index
(``HyperIndex.load(--index, embedder=...)``), builds a ``Retriever`` with its default
``QueryOptions()`` (read at run time: ``config.TUNED``) and,
for every method (default ``stitch`` = the library default and ``stitch_paper``), runs
each question through the registered method exactly as ``Retriever.retrieve`` does
(``METHODS[name](state, qvec, text, options, False)``), single-threaded, after a warm-up
(JIT, BM25, NER, group lookups):

* embed_ms — the question embedded alone (``Retriever._embed([q])``), timed separately;
* candidate_ms — ``MethodOutput.candidates_ms``: usearch top-K_V nodes + top-K_C chunks,
  plus (``stitch``) BM25 top-k and question NER -> seed nodes;
* graph_ms — ``MethodOutput.graph_ms``: ``StitchEngine.query`` (STIBP, projection,
  chunk graph, PPR, top-k).

A second, untimed-for-the-contract pass reads the engine's stats (|C_q|, arcs, PPR work)
with ``detail=True``. Nothing of the method is re-implemented here: every timing is of
the registered method itself. p50 / p99 over the questions. Writes
``results/2wiki.json`` in the shape ``speed_report.py`` reads (top-level
``graph_stage_ms`` / ``candidate_ms`` are the default method's).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

try:
    from . import _common as C
except ImportError:
    import _common as C


def pcts(xs):
    xs = np.asarray(xs, dtype=np.float64)
    return {"p50": C.pct(xs, 50), "p90": C.pct(xs, 90), "p99": C.pct(xs, 99),
            "mean": float(xs.mean()), "max": float(xs.max())}


def load(index_dir, n_questions):
    from hyperrag_fast.eval.data import load_dataset
    from hyperrag_fast.eval.harness import default_embedder
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.retriever import Retriever

    ds = load_dataset("2wikimultihopqa", "all")
    emb = default_embedder()
    t = time.perf_counter()
    idx = HyperIndex.load(index_dir, embedder=emb)
    load_s = time.perf_counter() - t
    ret = Retriever(idx, emb)
    ret.warmup()
    qs = [q.question for q in ds.questions][:n_questions] if n_questions else [q.question for q in ds.questions]
    return ds, emb, idx, ret, qs, load_s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, help="a saved 2Wiki index, e.g. indexes/2wiki_minilm")
    ap.add_argument("--questions", type=int, default=0, help="0 = all")
    ap.add_argument("--methods", nargs="+", default=["stitch", "stitch_paper"])
    ap.add_argument("--out", default="2wiki.json")
    a = ap.parse_args()
    from dataclasses import asdict, replace

    from hyperrag_fast.config import QueryOptions
    from hyperrag_fast.eval.harness import _plain
    from hyperrag_fast.methods import METHODS
    ds, emb, idx, ret, qs, load_s = load(a.index, a.questions)
    g = idx.graph
    print(f"index: {g.n_nodes} states, {g.n_chunks} chunks, {g.n_edges} hyperedges; "
          f"{len(qs)} questions; load {load_s:.1f}s", flush=True)
    # 1. question embedding, one question per call (as a service sees them)
    ret._embed([qs[0]])
    emb_ms, vecs = [], []
    for text in qs:
        t = time.perf_counter()
        v = ret._embed([text])
        emb_ms.append((time.perf_counter() - t) * 1e3)
        vecs.append(v[0])
    print(f"embed p50 {C.pct(emb_ms, 50):.2f} ms", flush=True)
    import json
    import os
    from hyperrag_fast.store import manifest_path
    man = json.loads(manifest_path(a.index).read_text())
    out = {"index": a.index, "index_manifest": {"counts": man.get("counts"), "extractor": man.get("extractor"),
                                                 "embedder": man.get("embedder"), "merge": man.get("merge"),
                                                 "mtime": os.path.getmtime(manifest_path(a.index))},
           "index_summary": {"states": g.n_nodes, "chunks": g.n_chunks,
                                                "hyperedges": g.n_edges, "groups": g.n_groups,
                                                "incidences": g.n_incidences,
                                                "embedder": idx.embedder_name, "dim": idx.embedder_dim},
           "questions": len(qs), "embed_ms": pcts(emb_ms), "methods": {}}
    base = QueryOptions()
    for name in a.methods:
        o = replace(base, method=name)
        fn = METHODS[name]
        st = ret.state
        for text, v in zip(qs[:3], vecs[:3]):  # warm (JIT, BM25, NER, lookups)
            fn(st, v, text, o, False)
        cand, graph, wall = [], [], []
        for text, v in zip(qs, vecs):
            t = time.perf_counter()
            r = fn(st, v, text, o, False)
            wall.append((time.perf_counter() - t) * 1e3)
            cand.append(r.candidates_ms)
            graph.append(r.graph_ms)
        # second pass: engine stats (not the contract figures)
        stats = []
        for text, v in zip(qs, vecs):
            r = fn(st, v, text, o, True)
            stats.append(np.asarray(r.detail["stats"]))
        stats = np.array(stats)
        m = {"options": _plain(asdict(o)),  # stitch_paper: the method replaces them (below)
             "candidate_ms": pcts(cand), "graph_stage_ms": pcts(graph), "method_wall_ms": pcts(wall),
             "stats_p50": {k: C.pct(stats[:, j], 50) for j, k in enumerate(("cq", "arcs", "ppr_work", "touched_nodes"))},
             "stats_p99": {k: C.pct(stats[:, j], 99) for j, k in enumerate(("cq", "arcs", "ppr_work", "touched_nodes"))}}
        if name == "stitch_paper":
            from hyperrag_fast.config import StitchOptions
            m["options"] = {"stitch": _plain(asdict(StitchOptions.paper(top_k=o.stitch.top_k))),
                            "hybrid": "HybridOptions.paper() (all signals off)"}
        out["methods"][name] = m
        print(name, "cand", m["candidate_ms"], "graph", m["graph_stage_ms"], "stats", m["stats_p50"],
              flush=True)
    d = out["methods"].get("stitch") or next(iter(out["methods"].values()))
    out["default_method"] = "stitch" if "stitch" in out["methods"] else next(iter(out["methods"]))
    out["graph_stage_ms"] = {"p50": d["graph_stage_ms"]["p50"], "p99": d["graph_stage_ms"]["p99"]}
    out["candidate_ms"] = {"p50": d["candidate_ms"]["p50"], "p99": d["candidate_ms"]["p99"]}
    C.write_result(a.out, out)


if __name__ == "__main__":
    main()
