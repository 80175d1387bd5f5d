"""Whole-query latency through the public API: ``Retriever.retrieve(question)`` = embed +
candidates + graph (+ building the result), one question at a time, single thread.

    python benchmarks/bench_whole_query.py --index indexes/quality_2wiki_bge --embedder bge-small \\
        --questions 200 --out benchmarks/results/whole_query_bge.json

    python benchmarks/bench_whole_query.py --index indexes/2wiki_coda --method coda \
        --out benchmarks/results/whole_query_coda.json   # a method with prebuilt structures

The embedder runs with one intra-op thread (a service gives each query thread one) unless
``--threads``. Options: the default a user gets on this index (its embedder's preset,
``config.preset_for``: ``TUNED`` for MiniLM, ``TUNED_BGE`` for bge) with ``--method``; a
method that reads structures of ``hyperrag build-methods`` gets them with
``load_prebuilt`` (the seconds it takes: ``open_prebuilt_s``). Medians and p99 of the
wall time per call (time.perf_counter around ``retrieve``), and the medians of the parts
the result reports (for CODA methods ``graph_ms`` is the whole method).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from hyperrag_fast.embed.registry import make_embedder
from hyperrag_fast.eval.data import load_dataset
from hyperrag_fast.eval.harness import _git, machine_info
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.retriever import Retriever
from hyperrag_fast.config import TUNED, preset_for


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--index", required=True)
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--threads", type=int, default=1, help="ONNX intra-op threads")
    p.add_argument("--questions", type=int, default=200, help="first N 2Wiki questions")
    p.add_argument("--repeats", type=int, default=3, help="passes over the questions")
    p.add_argument("--method", default=TUNED.method)
    p.add_argument("--coda-option", nargs="+", default=None, metavar="KEY=VALUE",
                   help="CODA options other than the defaults (as topk_equivalence.py dump)")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    emb = make_embedder(a.embedder, intra_op_threads=a.threads)
    ix = HyperIndex.load(a.index, embedder=emb)
    from dataclasses import replace
    from hyperrag_fast.methods import needs
    from hyperrag_fast.prebuilt_reader import load_prebuilt
    t0 = time.perf_counter()
    pre = load_prebuilt(a.index, needs(a.method, ix.merge), generation=ix.generation)
    open_s = time.perf_counter() - t0
    options = replace(preset_for(ix.embedder_name), method=a.method)  # what a user gets
    from topk_equivalence import _coda_setup
    r = Retriever(ix, emb, prebuilt=pre, options=options, coda=_coda_setup(a.coda_option))
    r.warmup()
    qs = [q.question for q in load_dataset("2wikimultihopqa", "all").questions[:a.questions]]
    wall, parts = [], {"embed_ms": [], "candidates_ms": [], "graph_ms": []}
    for _ in range(a.repeats):
        for q in qs:
            t0 = time.perf_counter()
            res = r.retrieve(q)
            wall.append((time.perf_counter() - t0) * 1e3)
            for k in parts:
                parts[k].append(res.timings[k])
    out = {"command": "python benchmarks/bench_whole_query.py " + " ".join(argv or sys.argv[1:]),
           "git_commit": _git("rev-parse", "HEAD"), "git_dirty": bool(_git("status", "--porcelain")),
           "machine": machine_info(), "embedder": emb.name, "method": r.options.method,
           "open_prebuilt_s": open_s, "loadavg_at_end": list(os.getloadavg()),
           "n_calls": len(wall), "whole_query_ms_p50": float(np.median(wall)),
           "whole_query_ms_p99": float(np.percentile(wall, 99)),
           **{f"{k}_p50": float(np.median(v)) for k, v in parts.items()}}
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "machine"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
