"""Scaling of build, candidate search and the graph stage on synthetic corpora (issue item 2).

    python benchmarks/bench_scale.py                          # 1e5 1e6 1e7 entity states
    python benchmarks/bench_scale.py --sizes 100000 --queries 100   # quick

Each size runs in its own subprocess (clean peak memory), writes
``results/scale_<size>.json``; the parent merges them into ``results/scale.json`` with the
log-log growth exponent of every stage. Per size:

* corpus: ``synthetic.generate`` (Zipf-Mandelbrot names, hyperedges 2-6), embeddings of
  ``--dim`` (default 64 at every size, float32; documented small dim so 1e7 fits: 384-d
  would be 15 GB of node vectors alone);
* symbolic build: ``hypergraph_from_flat`` (median of ``--build-repeats``), incidences/s,
  bytes per incidence = index array bytes / incidences, peak RSS of the build (VmHWM
  reset through /proc/self/clear_refs before it; tracemalloc cannot see Numba's
  allocations, so RSS is the measure);
* ANN: usearch HNSW, cosine, f16 storage, connectivity 16, expansion_add 40 (default
  width 128 builds at ~1,700 vectors/s here even at 64-d: infeasible at 1e7). Over at most
  ``--ann-max`` vectors per index: above that a random subset is indexed (reported);
* per query, single-threaded: (a) candidate search = usearch top-K_V nodes + top-K_C
  chunks (budgets of ``QueryOptions()``, read at run time); (b) the graph stage =
  ``StitchEngine.query(q, cand_nodes, cand_chunks, options, chunk_bonus=0, seed_nodes=[])``
  exactly as ``hyperrag_fast.methods.stitch.run_stitch`` calls it, with two option sets read at
  run time: ``default`` = ``QueryOptions().stitch`` (``config.TUNED_STITCH``, the
  library default) and ``paper`` = ``StitchOptions.paper()`` (method ``stitch_paper``).
  Synthetic queries have no text, so the default method's BM25 term and question-entity
  seeds (``config.TUNED_HYBRID``) are off here: chunk_bonus = 0, no seed nodes.
  p50 / p99 over ``--queries`` queries.

Safety: the paper's uncapped chunk graph is quadratic in hub groups (a name in 1 % of the
corpus). Before each query the chunk-graph size bound is computed from C_q (a ppr="none"
query with the same options; groups over the options' graph_max_group excluded) and the
query is skipped, and counted, if it would exceed ``--max-arcs`` arcs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

try:
    from . import _common as C
    from . import synthetic
except ImportError:
    import _common as C
    import synthetic



def vm_hwm_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_hwm() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def graph_arc_bound(g, cq, max_group=float("inf")):
    """Upper bound on chunk-graph arcs for C_q: sum over groups of n_g (n_g - 1), n_g =
    chunks of C_q holding the group (before dedup across groups); groups spanning more
    than ``max_group`` chunks of the corpus make no edges (as in the kernel)."""
    if cq.shape[0] == 0:
        return 0
    starts, ends = g.chunk_ptr[cq], g.chunk_ptr[cq + 1]
    lens = ends - starts
    idx = np.repeat(starts - np.cumsum(np.concatenate([[0], lens[:-1]])), lens) + np.arange(lens.sum())
    grp = g.node_group[g.chunk_nodes[idx]].astype(np.int64)
    ch = np.repeat(np.arange(cq.shape[0]), lens)
    pairs = np.unique(ch * (g.n_groups + 1) + grp)
    cnt = np.bincount(pairs % (g.n_groups + 1), minlength=g.n_groups + 1)[:g.n_groups]
    cnt = np.where(g.group_chunks > max_group, 0, cnt)
    return int((cnt * (cnt - 1)).sum())


def build_ann(vecs, ann_max, seed, label):
    from usearch.index import Index
    n, dim = vecs.shape
    if n > ann_max:
        keys = np.sort(np.random.default_rng(seed).choice(n, ann_max, replace=False))
    else:
        keys = np.arange(n)
    idx = Index(ndim=dim, metric="cos", dtype="f16", connectivity=16, expansion_add=40, expansion_search=64)
    t = time.perf_counter()
    step = 200_000
    for a in range(0, keys.shape[0], step):
        kk = keys[a:a + step]
        idx.add(kk, vecs[kk], threads=2)
    el = time.perf_counter() - t
    print(f"  usearch {label}: {keys.shape[0]} vectors in {el:.1f}s ({keys.shape[0] / el:.0f}/s)", flush=True)
    return idx, {"indexed": int(keys.shape[0]), "total": int(n), "subset": bool(n > ann_max),
                 "build_s": el, "vectors_per_s": keys.shape[0] / el,
                 "memory_bytes": int(idx.memory_usage)}


def one(n_states, a):
    from hyperrag_fast.engine import StitchEngine
    from hyperrag_fast.indexing.hypergraph import hypergraph_from_flat
    try:
        from ._setup import K, K_CHUNKS, VARIANTS, describe
    except ImportError:
        from _setup import K, K_CHUNKS, VARIANTS, describe

    out = {"target_states": n_states, "dim": a.dim, "k_nodes": K, "k_chunks": K_CHUNKS,
           "options": {k: describe(v) for k, v in VARIANTS.items()},
           "signals": "no question text: BM25 term and question-entity seeds off (chunk_bonus 0, no seeds)"}
    t = time.perf_counter()
    c = synthetic.generate(n_states, seed=a.seed, dim=a.dim)
    out["generate_s"] = time.perf_counter() - t
    out["corpus"] = c.summary()
    print(f"[{n_states}] corpus {out['corpus']} in {out['generate_s']:.1f}s", flush=True)
    # warm the build kernel on a tiny corpus (compile / cache load outside the timing)
    hypergraph_from_flat(*synthetic.generate(2000, seed=1).flat_args())
    times, g = [], None
    reset_hwm()
    rss0 = C.peak_rss_mb()
    hwm0 = vm_hwm_mb()
    for r in range(a.build_repeats if n_states < 5_000_000 else max(1, a.build_repeats // 2)):
        g = None
        t = time.perf_counter()
        g = hypergraph_from_flat(*c.flat_args())
        times.append(time.perf_counter() - t)
    hwm1 = vm_hwm_mb()
    M = g.n_incidences
    bt = float(np.median(times))
    out["build"] = {"median_s": bt, "times_s": times, "incidences": M,
                    "incidences_per_s": M / bt, "states_per_s": g.n_nodes / bt,
                    "array_bytes": g.array_bytes(), "bytes_per_incidence": g.array_bytes() / M,
                    "flat_input_bytes": c.flat_bytes(),
                    "peak_rss_mb_before_build": hwm0, "peak_rss_mb_during_build": hwm1,
                    "build_peak_increase_mb": hwm1 - hwm0, "ru_maxrss_mb": rss0}
    print(f"  build {bt:.2f}s  {M / bt / 1e6:.1f} M inc/s  {g.array_bytes() / M:.1f} B/inc  "
          f"peak {hwm1:.0f} MB (+{hwm1 - hwm0:.0f})", flush=True)
    t = time.perf_counter()
    node_vec, edge_vec, chunk_vec = synthetic.embeddings(c)
    out["embed_gen_s"] = time.perf_counter() - t
    out["vector_bytes"] = int(node_vec.nbytes + edge_vec.nbytes + chunk_vec.nbytes)
    qs = synthetic.queries(c, a.queries, seed=a.seed + 100)
    node_ix, out["ann_nodes"] = build_ann(node_vec, a.ann_max, a.seed + 5, "nodes")
    chunk_ix, out["ann_chunks"] = build_ann(chunk_vec, a.ann_max, a.seed + 6, "chunks")
    # recall of the ANN against exact search over the indexed set, on 20 queries
    rec = []
    for q in qs[:20]:
        got = node_ix.search(q, K).keys
        pool = np.arange(node_vec.shape[0]) if not out["ann_nodes"]["subset"] else None
        if pool is not None:
            ex = np.argpartition(-(node_vec @ q), K)[:K]
            rec.append(len(set(got.tolist()) & set(ex.tolist())) / K)
    out["ann_nodes"]["recall_at_50"] = float(np.mean(rec)) if rec else None
    eng = StitchEngine(g, node_vec, edge_vec, chunk_vec)
    variants = VARIANTS
    for o in variants.values():
        eng.warmup(o)
    cand_t, cand_n_t, cand_c_t, cands = [], [], [], []
    for q in qs:
        t0 = time.perf_counter()
        cn = node_ix.search(q, K).keys
        t1 = time.perf_counter()
        cc = chunk_ix.search(q, K_CHUNKS).keys
        t2 = time.perf_counter()
        cand_n_t.append(t1 - t0)
        cand_c_t.append(t2 - t1)
        cand_t.append(t2 - t0)
        cands.append((cn.astype(np.int64), cc.astype(np.int64)))
    ms = lambda xs: [x * 1e3 for x in xs]  # noqa: E731
    out["candidate_ms"] = {"p50": C.pct(ms(cand_t), 50), "p99": C.pct(ms(cand_t), 99),
                           "nodes_p50": C.pct(ms(cand_n_t), 50), "chunks_p50": C.pct(ms(cand_c_t), 50)}
    print(f"  candidates p50 {out['candidate_ms']['p50']:.3f} ms", flush=True)
    out["graph_stage_ms"] = {}
    out["graph_arc_bound"] = {}
    empty, nob = np.empty(0, np.int64), np.empty(0)
    for name, o in variants.items():
        # chunk-graph size bound of each query under these options
        bounds = []
        for q, (cn, cc) in zip(qs, cands):
            r = eng.query(q, cn, cc, o.replace(ppr="none"), chunk_bonus=np.zeros(cc.shape[0]),
                          seed_nodes=empty, seed_values=nob)
            bounds.append(graph_arc_bound(g, r.cq, o.graph_max_group))
        out["graph_arc_bound"][name] = {"p50": C.pct(bounds, 50), "max": int(max(bounds))}
        lat, st, skipped, results = [], [], 0, []
        t_start = time.perf_counter()
        for i, (q, (cn, cc)) in enumerate(zip(qs, cands)):
            if bounds[i] > a.max_arcs:
                skipped += 1
                continue
            if time.perf_counter() - t_start > a.variant_budget_s:
                break
            bonus = np.zeros(cc.shape[0])
            t = time.perf_counter()
            r = eng.query(q, cn, cc, o, chunk_bonus=bonus, seed_nodes=empty, seed_values=nob)
            lat.append(time.perf_counter() - t)
            st.append(r.stats.copy())
        st = np.array(st) if st else np.zeros((1, 4))
        d = {"n": len(lat), "skipped_over_max_arcs": skipped, "options": describe(o),
             "budget_stopped": len(lat) + skipped < len(qs),
             "p50": C.pct(ms(lat), 50) if lat else None, "p99": C.pct(ms(lat), 99) if lat else None,
             "mean": float(np.mean(ms(lat))) if lat else None,
             "stats_median": {"cq": float(np.median(st[:, 0])), "arcs": float(np.median(st[:, 1])),
                              "ppr_work": float(np.median(st[:, 2])), "touched_nodes": float(np.median(st[:, 3]))},
             "stats_max": {"cq": int(st[:, 0].max()), "arcs": int(st[:, 1].max()),
                           "ppr_work": int(st[:, 2].max()), "touched_nodes": int(st[:, 3].max())}}
        out["graph_stage_ms"][name] = d
        print(f"  {name:12s} n={d['n']} skip={skipped} p50 {d['p50']} p99 {d['p99']} ms  "
              f"stats med {d['stats_median']}", flush=True)
    out["peak_rss_mb"] = C.peak_rss_mb()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--build-repeats", type=int, default=5)
    ap.add_argument("--ann-max", type=int, default=1_000_000)
    ap.add_argument("--max-arcs", type=float, default=5e7)
    ap.add_argument("--variant-budget-s", type=float, default=120)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one is not None:
        res = one(a.one, a)
        (C.RESULTS / f"scale_{a.one}.json").write_text(json.dumps(res, indent=2, default=C._default))
        return
    per = {}
    for n in a.sizes:
        cmd = [sys.executable, __file__, "--one", str(n)] + [
            x for k, v in vars(a).items() if k not in ("sizes", "one")
            for x in (f"--{k.replace('_', '-')}", str(v))]
        subprocess.run(cmd, check=True)
        per[str(n)] = json.loads((C.RESULTS / f"scale_{n}.json").read_text())
    xs = [per[k]["corpus"]["states"] for k in per]
    slopes = {"build_s": C.loglog_slope(xs, [per[k]["build"]["median_s"] for k in per]),
              "candidate_p50": C.loglog_slope(xs, [per[k]["candidate_ms"]["p50"] for k in per])}
    for v in per[next(iter(per))]["graph_stage_ms"]:
        slopes[f"graph_{v}_p50"] = C.loglog_slope(xs, [per[k]["graph_stage_ms"][v]["p50"] or np.nan for k in per])
    C.write_result("scale.json", {"params": {k: v for k, v in vars(a).items() if k != "one"},
                                  "sizes": per, "loglog_slope_vs_states": slopes})
    for k in per:
        os.remove(C.RESULTS / f"scale_{k}.json")


if __name__ == "__main__":
    main()
