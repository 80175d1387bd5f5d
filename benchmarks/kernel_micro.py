"""Micro-measurements behind design choices quoted in docstrings and benchmarks/README.md.

    python benchmarks/kernel_micro.py                          # synthetic parts
    python benchmarks/kernel_micro.py --index indexes/2wiki    # plus the 2Wiki parts

Synthetic: (1) exact search of 6,119 x 384 unit float32 rows (the 2Wiki chunk count), the
compiled ``kernels.dense.exact_topk`` against NumPy ``matrix @ q`` (BLAS at this process's
thread settings) + argpartition; (2) one dense PPR sweep on the chunk graphs of
``bench_ppr.py``, ns per arc, of the production loop (``kernels.ppr.dense_sweep``). The
committed ``results/kernel_micro.json`` also holds two variants measured beside it at
a23159f (signed loop bounds, a gather-form sweep: ``git show a23159f:benchmarks/kernel_micro.py``);
they were copies of the kernel with one change each, removed once the choice was made. 2Wiki (``--index``): (3) BM25 top-20 through SciPy (``BM25.scores`` + lexsort)
against the compiled ``BM25.top_k``; (4) node search (usearch + duplicate expansion +
rescoring) against the raw HNSW call; (5) an int8 exact scan of the distinct node vectors:
time, and recall of its 4k shortlist and of HNSW against the exact top-k. Medians of
``--repeats`` passes over the queries; single thread.
"""
from __future__ import annotations

import argparse
import time

import numba
import numpy as np

from hyperrag_fast.kernels.ppr import dense_sweep as sweep_unsigned  # the production sweep, measured as is

try:
    from . import _common as C
    from ._graphs import chunk_graph_of_size
except ImportError:
    import _common as C
    from _graphs import chunk_graph_of_size


def per_call(fn, n, repeats):
    fn(0)
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        for i in range(n):
            fn(i)
        ts.append((time.perf_counter() - t) / n)
    return float(np.median(ts))


def synthetic(a):
    from hyperrag_fast.kernels.dense import exact_topk
    rng = np.random.default_rng(0)
    V = rng.standard_normal((6119, 384)).astype(np.float32)
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    Q = rng.standard_normal((200, 384)).astype(np.float32)
    oi, os_ = np.empty((1, 50), np.int64), np.empty((1, 50), np.float32)
    out = {"exact_search_6119x384_k50_us": {
        "compiled_exact_topk": per_call(lambda i: exact_topk(V, Q[i:i + 1], 50, oi, os_), 200, a.repeats) * 1e6,
        "numpy_matmul_argpartition": per_call(lambda i: np.argpartition(-(V @ Q[i]), 50)[:50], 200,
                                              a.repeats) * 1e6}}
    sweeps = {}
    for n in (1000, 10_000, 100_000):
        ptr, nbr, w, wsum = chunk_graph_of_size(n, 20, weight_kind=1)
        m, arcs = wsum.shape[0], nbr.shape[0]
        x = np.full(m, 1.0 / m)
        new = np.empty(m)
        r = {"unsigned_bounds": per_call(lambda i: sweep_unsigned(ptr, nbr, w, wsum, x, x, 0.2, new), 20, a.repeats)}
        sweeps[str(n)] = {"nodes": m, "arcs": int(arcs), **{k: v / arcs * 1e9 for k, v in r.items()}}
        print(n, {k: round(v, 2) for k, v in sweeps[str(n)].items()}, flush=True)
    out["ppr_dense_sweep_ns_per_arc"] = sweeps
    print(out["exact_search_6119x384_k50_us"], flush=True)
    return out


def wiki(a):
    try:
        from .bench_2wiki import load
    except ImportError:
        from bench_2wiki import load
    from hyperrag_fast.config import QueryOptions
    _, _, _, ret, qs, _ = load(a.index, 1000)
    o = QueryOptions()
    vecs = ret._embed(qs).astype(np.float32)
    bm = ret.state.bm25

    def bm_scipy(i):
        s = bm.scores(qs[i])
        nz = np.flatnonzero(s > 0)
        return nz[np.lexsort((nz, -s[nz]))][:20]
    out = {"bm25_top20_us": {"scipy_scores_lexsort": per_call(bm_scipy, len(qs), a.repeats) * 1e6,
                             "compiled_top_k": per_call(lambda i: bm.top_k(qs[i], 20), len(qs), a.repeats) * 1e6}}
    ns = ret.state.node_search["index"]
    k = o.k_nodes
    out["node_search_us"] = {
        "search": per_call(lambda i: ns.search(vecs[i], k), len(qs), a.repeats) * 1e6,
        "raw_hnsw": per_call(lambda i: ns.hnsw.search(vecs[i], k, threads=1), len(qs), a.repeats) * 1e6}
    D = np.ascontiguousarray(ns.vectors[ns._rep])
    D8 = np.clip(np.round(D * 127), -127, 127).astype(np.int8)
    buf = np.empty(D8.shape[0], np.int32)

    @numba.njit(nogil=True)
    def i8dots(M, q, out):
        for i in range(M.shape[0]):
            s = np.int32(0)
            for j in range(M.shape[1]):
                s += np.int16(M[i, j]) * np.int16(q[j])
            out[i] = s

    def scan(i):
        i8dots(D8, np.clip(np.round(vecs[i] * 127), -127, 127).astype(np.int8), buf)
    rec_s, rec_h = [], []
    for i, q in enumerate(vecs):
        ex = set(np.argsort(-(D @ q), kind="stable")[:k].tolist())
        scan(i)
        rec_s.append(len(ex & set(np.argpartition(-buf, 4 * k)[:4 * k].tolist())) / k)
        rec_h.append(len(ex & set(np.asarray(ns.hnsw.search(q, k, threads=1).keys, np.int64).tolist())) / k)
    out["int8_scan_probe"] = {"distinct_rows": int(D8.shape[0]), "dim": int(D8.shape[1]), "k": k,
                              "scan_us": per_call(scan, len(qs), a.repeats) * 1e6,
                              "recall_shortlist_4k": float(np.mean(rec_s)), "recall_hnsw": float(np.mean(rec_h))}
    print({k_: v for k_, v in out.items()}, flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="kernel_micro.json")
    a = ap.parse_args()
    out = synthetic(a)
    if a.index:
        out.update(wiki(a))
    C.write_result(a.out, out)


if __name__ == "__main__":
    main()
