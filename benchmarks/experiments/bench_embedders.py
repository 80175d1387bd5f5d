"""Offline embedders side by side on the same texts: throughput of a build's texts
(passages and their sentences) and of single questions, in one run, alternating.

    python benchmarks/experiments/bench_embedders.py --passages 300 --out benchmarks/experiments/results/embedders_ab.json

Texts: the first ``--passages`` 2WikiMultiHopQA passages and their sentences (split on
". "), as a build embeds them (passages, then sentences: the node descriptions); each
kind embedded in one ``embed`` call per model; ``--repeats`` rounds alternate the models
and the medians are reported. Queries: the first 100 2Wiki questions, one per call.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from hyperrag_fast.embed.registry import make_embedder
from hyperrag_fast.eval.data import load_dataset
from hyperrag_fast.eval.harness import _git, machine_info


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kinds", default="minilm,bge-small")
    p.add_argument("--passages", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    ds = load_dataset("2wikimultihopqa", "all")
    passages = ds.passages[:a.passages]
    sentences = [s for x in passages for s in x.split("\n", 1)[-1].split(". ") if s.strip()]
    questions = [q.question for q in ds.questions[:100]]
    models = {k: make_embedder(k) for k in a.kinds.split(",")}
    runs: dict[str, dict[str, list[float]]] = {k: {"passages": [], "sentences": [], "query_ms": []}
                                               for k in models}
    for _ in range(a.repeats):
        for k, m in models.items():
            m.embed(questions[:2])  # warm
            for name, texts in (("passages", passages), ("sentences", sentences)):
                t0 = time.perf_counter()
                m.embed(texts)
                runs[k][name].append(len(texts) / (time.perf_counter() - t0))
            for q in questions:
                t0 = time.perf_counter()
                m.embed([q])
                runs[k]["query_ms"].append((time.perf_counter() - t0) * 1e3)
    out = {"command": "python benchmarks/experiments/bench_embedders.py " + " ".join(argv or sys.argv[1:]),
           "git_commit": _git("rev-parse", "HEAD"), "machine": machine_info(),
           "n_passages": len(passages), "n_sentences": len(sentences),
           "models": {m.name: {"passages_per_s": float(np.median(r["passages"])),
                               "sentences_per_s": float(np.median(r["sentences"])),
                               "query_ms_p50": float(np.median(r["query_ms"]))}
                      for m, r in ((models[k], runs[k]) for k in models)}}
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out["models"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
