"""Same top-8 before and after a kernel change, on the real 2WikiMultiHopQA questions.

    # 1. with each checkout's code on the path (PYTHONPATH=<checkout>), dump the top-8:
    python benchmarks/topk_equivalence.py dump before.npz --index indexes/2wiki
    python benchmarks/topk_equivalence.py dump after.npz --index indexes/2wiki
    # 2. compare:
    python benchmarks/topk_equivalence.py compare before.npz after.npz

``dump`` runs every question through the registered methods (default ``stitch`` and
``stitch_paper``) exactly as ``bench_2wiki.py`` does (``METHODS[name](state, q, text,
options, False)`` with ``QueryOptions()`` read at run time) and stores the top-8 chunk
ids, their scores and ``graph_ms``. ``compare`` writes ``results/topk_equivalence.json``:
per method, how many questions have the identical ordered top-8, the largest score
difference, and graph_ms p50 of both runs (same machine, run one after the other).
"""
from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np

try:
    from . import _common as C
except ImportError:
    import _common as C


def dump(a):
    try:
        from .bench_2wiki import load
    except ImportError:
        from bench_2wiki import load
    import hyperrag_fast
    from hyperrag_fast.retriever import METHODS, QueryOptions, methods_registry

    methods_registry()
    _ds, _emb, _idx, ret, qs, _ = load(a.index, a.questions)
    vecs = ret._embed(qs)
    out = {"code": np.array(hyperrag_fast.__file__)}
    for m in a.methods:
        o = replace(QueryOptions(), method=m)
        fn = METHODS[m]
        ids, sc, t = [], [], []
        for q, text in zip(vecs, qs):
            r = fn(ret.state, q, text, o, False)
            ids.append(np.asarray(r.chunk_ids)[:8])
            sc.append(np.asarray(r.scores)[:8])
            t.append(r.graph_ms)
        out[m + "_ids"], out[m + "_scores"], out[m + "_graph_ms"] = np.array(ids), np.array(sc), np.array(t)
        print(m, "graph_ms p50", float(np.median(t)), flush=True)
    np.savez(a.file, **out)


def compare(a):
    x, y = np.load(a.before), np.load(a.after)
    res = {"before": {"file": a.before, "code": str(x["code"])}, "after": {"file": a.after, "code": str(y["code"])},
           "methods": {}}
    for m in sorted({k[:-4] for k in x.files if k.endswith("_ids")}):
        same = (x[m + "_ids"] == y[m + "_ids"]).all(axis=1)
        res["methods"][m] = {"questions": int(same.shape[0]), "identical_ordered_top8": int(same.sum()),
                             "max_abs_score_diff": float(np.abs(x[m + "_scores"] - y[m + "_scores"]).max()),
                             "graph_ms_p50_before": float(np.median(x[m + "_graph_ms"])),
                             "graph_ms_p50_after": float(np.median(y[m + "_graph_ms"]))}
        print(m, res["methods"][m])
    C.write_result("topk_equivalence.json", res)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("file")
    d.add_argument("--index", default="indexes/2wiki")
    d.add_argument("--questions", type=int, default=0, help="0 = all")
    d.add_argument("--methods", nargs="+", default=["stitch", "stitch_paper"])
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    a = ap.parse_args()
    dump(a) if a.cmd == "dump" else compare(a)


if __name__ == "__main__":
    main()
