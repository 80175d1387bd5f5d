"""HNSW vector storage f16 against f32 on one saved index: every method, all questions.

    python benchmarks/experiments/ann_storage_ab.py --index indexes/2wiki --cache-dir cache

The saved index's HNSW graphs are rebuilt from its own float32 vectors three ways
(``f32`` twice, ``f16`` once) and every registered method answers every 2Wiki question
through each. The usearch build is multi-threaded and not deterministic, so the second
``f32`` rebuild is the noise floor: f16 moves results acceptably when it differs from the
saved index about as often as an f32 rebuild does. Hits are rescored with the exact
float32 matrix either way, so storage only steers which candidates the walk finds.
Records per variant: HNSW bytes, build s, recall@50 of the node/edge graphs against exact
search, and per method recall@2/5/8 on dev and test plus how many ordered top-8 equal
the saved index's. Writes ``benchmarks/experiments/results/ann_storage_ab.json``.
"""
from __future__ import annotations

import sys

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common
import _common as C  # noqa: E402

KS = (2, 5, 8)


def _rebuilt(ix, storage: str) -> dict:
    """Swap ``ix.ann`` for graphs rebuilt with ``storage``; returns build facts."""
    from hyperrag_fast.indexing.hnsw import build_vector_index
    params = replace(ix.ann_params, storage=storage)
    facts, vecs = {}, ix.vectors()
    for k, old in ix.ann.items():
        if old.backend != "usearch":
            continue
        t0 = time.perf_counter()
        ix.ann[k] = build_vector_index(vecs[k], params)
        facts[k] = {"build_s": time.perf_counter() - t0,
                    "hnsw_mb": ix.ann[k].hnsw.memory_usage / 1e6}
    return facts


def _ann_recall(ix, qvecs: np.ndarray, k: int = 50) -> dict:
    from hyperrag_fast.ann import VectorIndex
    from hyperrag_fast.config import AnnParams
    out, vecs = {}, ix.vectors()
    for name, vi in ix.ann.items():
        if vi.backend != "usearch":
            continue
        exact, _ = VectorIndex(vecs[name], AnnParams(backend="exact")).search(qvecs, k)
        t0 = time.perf_counter()
        got, _ = vi.search(qvecs, k)
        ms = (time.perf_counter() - t0) * 1e3 / len(qvecs)
        out[name] = {"recall_at_50": float(np.mean([len(set(a) & set(b)) / k
                                                    for a, b in zip(got, exact)])),
                     "batch_search_ms_per_query": ms}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--methods", nargs="*", default=None)
    ap.add_argument("--out", default="ann_storage_ab.json")
    a = ap.parse_args()

    from hyperrag_fast.config import QueryOptions
    from hyperrag_fast.embed.cache import CachedEmbedder
    from hyperrag_fast.eval.data import DEV_SIZE_2WIKI, load_dataset
    from hyperrag_fast.eval.harness import default_embedder, prepare_methods
    from hyperrag_fast.eval.metrics import recall_at_k
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.methods import METHODS
    from hyperrag_fast.retriever import Retriever

    ds = load_dataset("2wikimultihopqa", "all")
    emb = (CachedEmbedder(default_embedder(), Path(a.cache_dir) / "embeddings.sqlite")
           if a.cache_dir else default_embedder())
    methods = a.methods or sorted(METHODS)
    qs = [q.question for q in ds.questions]
    golds = [lb.gold for lb in ds.labels]
    res = {"index": a.index, "questions": len(qs), "dev_questions": DEV_SIZE_2WIKI,
           "variants": {}, "run": {"command": C.command(), "machine": C.machine()}}
    top8 = {}
    for variant in ("saved", "f32", "f16"):
        ix = HyperIndex.load(a.index, embedder=emb)
        facts = {} if variant == "saved" else _rebuilt(ix, variant)
        ret = Retriever(ix, emb, prebuilt=prepare_methods(ix, a.index, methods))
        ret.warmup()
        qv = ret._embed(qs)
        passages = ds.passages
        row = {"storage": ix.ann_params.storage if variant == "saved" else variant,
               "build": facts, "ann": _ann_recall(ix, qv), "methods": {}}
        for m in methods:
            o = QueryOptions(method=m)
            o = o if o.top_k >= 8 else o.with_top_k(8)
            ids = np.full((len(qs), 8), -1, np.int64)
            for i, (v, text) in enumerate(zip(qv, qs)):
                r = METHODS[m](ret.state, v, text, o, False)
                got = np.asarray(r.chunk_ids)[:8]
                ids[i, :got.shape[0]] = got
            top8[variant, m] = ids
            ranked = [[passages[j] for j in r if j >= 0] for r in ids]
            rec = {}
            for split, sl in (("dev", slice(0, DEV_SIZE_2WIKI)), ("test", slice(DEV_SIZE_2WIKI, None))):
                rec[split] = {f"recall@{k}": float(np.mean([recall_at_k(r, g, k) for r, g in
                                                             zip(ranked[sl], golds[sl])])) for k in KS}
            same = None if variant == "saved" else int((ids == top8["saved", m]).all(axis=1).sum())
            row["methods"][m] = {**rec, "identical_top8_vs_saved": same}
            print(variant, m, rec["dev"], rec["test"], same, flush=True)
        res["variants"][variant] = row
    C.write_result(a.out, res, C.EXPERIMENTS)


if __name__ == "__main__":
    main()
