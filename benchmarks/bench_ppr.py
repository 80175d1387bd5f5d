"""PPR kernels against reference libraries on the same chunk graphs (issue item 1).

    # sizes 1k 10k 100k 1M, d = 0.85, 0.5 and 0.2, a 300-chunk prior and a prior on every chunk
    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_ppr.py --repeats 5 \
        --prior-nnz 300 0 --out ppr.json ppr_dense_prior.json
    python benchmarks/bench_ppr.py --sizes 1000 10000 --repeats 3

Graphs: the production chunk-graph kernel over every chunk of a synthetic corpus (the
chunk-group bipartite model of ``synthetic.py``: Zipf-Mandelbrot name groups plus
document-local groups), i.e. the chunk graph of a query whose C_q is the whole corpus.
Group cap and edge weighting are read at run time from the library's default options
(``hyperrag_fast.config.TUNED_STITCH``: ``graph_max_group``, ``graph_weight``) unless
``--max-group`` / ``--weight`` are given. P column-normalised; a chunk with no neighbour
keeps its mass (self-loop; the same self-loop and the same arc weights are given to
every library). Prior p: ``--prior-nnz`` random chunks with Exp(1) weights, normalised
(0: every chunk, as in the query path, where every chunk of C_q has a prior > 0).
Several ``--prior-nnz`` values run on the same graphs, one ``--out`` file each.
Dampings ``--dampings`` (default 0.85 = paper, 0.5, 0.2 = the tuned default). Solvers, each
timed as the median over ``--repeats`` repeats of the time per call (wall clock,
``solve_ms``, and process CPU time, ``solve_cpu_ms``: on a shared machine the latter leaves
out the time other processes held the core), a repeat being a batch
of calls that lasts >= 5 ms (one call for solves that take longer; ``calls_per_repeat``),
after a warm-up; ``single_call_ms`` is the median of ``--repeats`` single calls (noisier
below ~0.1 ms):

* ours_power_topk — kernels.ppr.ppr_power_topk(..., tol, max_iter, k=top_k): what the query
  path runs for ppr="power" (sparse sweeps while the iterate's support is small, certified
  top-k early stop, else max-abs-change < tol);
* ours_factored  — kernels.ppr_factored.ppr_factored_topk: the same iteration and stop on the
  chunk-group incidences the CSR was deduplicated from (ppr="factored"; inverse_size weights
  only; its degrees are computed inside the timed call, CSR solvers get ``wsum`` as input);
* ours_local_push — hyperrag_fast.ppr.LocalPush.topk_sparse(ids, vals, d, k=top_k,
  eps_min=--local-eps-min), (ids, vals) the prior's nonzeros (a query's C_q and its
  weights): the local push of kernels/ppr_local.py (per-node threshold r(v) <= eps wsum(v),
  lowered from max p / wsum / 1.2 by 1.2, or to the rho* of the last certificate, until
  the top-k order is certified, with the refined bounds of the contenders,
  kernels/ppr_certify.py; FIFO while local, node-order passes once a round is global; what
  ppr="push" runs). From the nonzeros the call reads nothing per node of the graph;
  ``LocalPush`` (validation, symmetry check, per-arc scaled weights, scratch) is built
  once per graph (``local_push_build_ms``), as igraph's Graph is (``build_ms``); igraph's
  call itself converts its graph for PRPACK every time (part of PRPACK's solve here: igraph
  has no prepared-graph entry point);
* ours_local_push_dense_prior — LocalPush.topk(p, ...): the same push from the dense prior,
  as PRPACK gets it (its nonzeros seeded inside the kernel call, in one read of p: O(n));
* ours_local_push_approx — LocalPush.approx_sparse(ids, vals, d, --approx-eps): the same
  push, from the nonzeros, down to a fixed threshold (every score within d eps wsum(v);
  ``max_error`` measured against the exact solve);
* ours_push_topk — kernels.ppr.ppr_push_topk(..., tol, k=top_k): the former global push
  (certified top-k early stop, else L1 residual <= tol; CODA's ppr_solver="push");
* ours_push      — kernels.ppr.ppr_push (same, no early stop: run to L1 residual <= tol);
* ours_power     — kernels.ppr.ppr_power, max-abs-change < 1e-6 (the paper's rule, no early stop);
* igraph_prpack  — Graph.personalized_pagerank(implementation="prpack", reset=p,
  weights=w), OMP_NUM_THREADS=1; graph construction (Graph(n, edges, directed=True) +
  weights) timed separately (``build_ms``) and as ``solve_plus_build_ms``;
* scipy_power    — CSR mat-vec power iteration, same stop rule as ours_power (build separate);
* networkx       — nx.pagerank(personalization=p, weight="weight", tol=1e-10) up to ``--nx-max``.

Exact: scipy.sparse.linalg.spsolve on (I - dP) pi = (1 - d) p up to ``--spsolve-max``
nodes (SuperLU fill-in: 161 s at 10k nodes); above that a SciPy power iteration to
max-abs-change < 1e-15 (checked against spsolve where both run: ``exact_check_maxabs``).
top8 = |top-8 of solver ∩ top-8 of exact| / 8; ``top8_same_order`` also checks the order.

Headline (``summary[d]["default_vs_prpack_speedup_median"]``, speed.json
``ppr.push_vs_prpack_speedup``): PRPACK solve time over the solver the library's default
options run (``config.TUNED_STITCH.ppr`` read at run time: "power" -> ours_power_topk,
"push" -> ours_local_push, "factored" -> ours_factored, "auto" -> whichever
``config.ppr_solver(d, chunks, prior nonzeros)`` picks, per size in ``default_solver_by_size``;
k = ``top_k``, tol / max_iter of the preset), median over sizes. The local push alone:
``summary[d]["ours_local_push_vs_prpack_speedup_by_size"]`` / ``..._median`` (wall clock)
and ``..._cpu_speedup_...`` (CPU time).
"""
from __future__ import annotations

import os

# PRPACK is OpenMP-parallel; with 2 threads on this shared 2-core machine every call paid
# a ~650 ms fixed cost (barrier spinning under load; 1.8 ms with 1 thread on a 1k graph).
# Our kernels are single-threaded, so the fair comparison is 1 thread (override to check).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import time

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from hyperrag_fast.engine import kernel_params
from hyperrag_fast import config
from hyperrag_fast.kernels import params as PRM
from hyperrag_fast.kernels.ppr import ppr_power, ppr_power_topk, ppr_push, ppr_push_topk
from hyperrag_fast.kernels.ppr_factored import ppr_factored_topk
from hyperrag_fast.ppr import LocalPush

try:
    from . import _common as C
    from ._graphs import chunk_graph_of_size
except ImportError:
    import _common as C
    from _graphs import chunk_graph_of_size

TOPK = 8
SOLVERS = ("ours_power_topk", "ours_factored", "ours_local_push", "ours_local_push_dense_prior",
           "ours_local_push_approx", "ours_push_topk", "ours_push", "ours_power")


def timeit_wall_cpu(fn, repeats=5, min_batch_s=0.005):
    """``_common.timeit_batched`` that also reads the process CPU clock around each batch:
    (wall median, wall per repeat, batch, last result, CPU median, CPU per repeat). On a
    shared machine the CPU time leaves out the time other processes held the core."""
    t = time.perf_counter()
    out = fn()
    n = max(1, int(np.ceil(min_batch_s / max(time.perf_counter() - t, 1e-7))))
    ts, cs = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        for _ in range(n):
            out = fn()
        cs.append((time.process_time() - c) / n)
        ts.append((time.perf_counter() - t) / n)
    return float(np.median(ts)), ts, n, out, float(np.median(cs)), cs


def transition(ptr, nbr, w, wsum):
    """P (m x m, CSR) with P[j, i] = w_ij / wsum_i, dangling columns = self-loop."""
    m = wsum.shape[0]
    deg = np.diff(ptr)
    dang = np.flatnonzero(wsum == 0)
    cols = np.concatenate([np.repeat(np.arange(m), deg), dang])
    rows = np.concatenate([nbr.astype(np.int64), dang])
    ws = np.where(wsum == 0, 1.0, wsum)
    vals = np.concatenate([w / ws[np.repeat(np.arange(m), deg)], np.ones(dang.shape[0])])
    return sp.csr_matrix((vals, (rows, cols)), shape=(m, m))


def scipy_power(P, p, d, tol=1e-6, max_iter=100_000):
    x = p.copy()
    base = (1 - d) * p
    for it in range(1, max_iter + 1):
        new = base + d * (P @ x)
        diff = np.abs(new - x).max()
        x = new
        if diff < tol:
            return x, it
    return x, max_iter


def top(x, k=TOPK):
    return np.argsort(-x, kind="mergesort")[:k]


def agree(x, ref, k=TOPK):
    return len(set(top(x, k).tolist()) & set(top(ref, k).tolist())) / k


def make_prior(m, nnz, seed):
    """``nnz`` random chunks with Exp(1) weights (``nnz`` 0: every chunk, as the query
    path's prior over C_q is), normalised."""
    rng = np.random.default_rng(seed)
    p = np.zeros(m)
    idx = rng.choice(m, size=min(nnz, m) if nnz > 0 else m, replace=False)
    p[idx] = rng.exponential(1.0, idx.shape[0])
    return p / p.sum()


def run_damping(D, ptr, nbr, w, wsum, p, P, scipy_build, G, ig_build_ms, H, nx_build_ms, rep, a, fac_lp):
    m = wsum.shape[0]
    out = {}
    if m <= a.spsolve_max:
        t = time.perf_counter()
        A = (sp.identity(m, format="csc") - D * P.tocsc())
        exact = spla.spsolve(A, (1 - D) * p)
        out["exact"] = {"method": "spsolve", "s": time.perf_counter() - t}
        tight, _ = scipy_power(P, p, D, tol=1e-15)
        out["exact_check_maxabs"] = float(np.abs(tight - exact).max())
    else:
        t = time.perf_counter()
        exact, its = scipy_power(P, p, D, tol=1e-15)
        out["exact"] = {"method": "scipy power iteration to max-abs-change < 1e-15",
                        "iterations": its, "s": time.perf_counter() - t}
    srt = np.sort(exact)[::-1]
    out["exact_gap_8_9"] = float(srt[7] - srt[8]) if m > 8 else None
    out["exact_min_gap_top9"] = float(np.min(srt[:8] - srt[1:9])) if m > 8 else None
    res = {}

    def rec(name, fn, reps=rep, extra=None):
        if a.only and m >= a.only_from and name not in a.only and name != "igraph_prpack":
            return
        single, ts1, _ = C.timeit(fn, repeats=reps, warmup=1)
        med, ts, batch, r, cpu, cts = timeit_wall_cpu(fn, repeats=reps)
        x = r[0] if isinstance(r, tuple) else r.dense(m) if hasattr(r, "dense") else r
        e = {"solve_ms": med * 1e3, "times_ms": [t * 1e3 for t in ts], "calls_per_repeat": batch,
             "solve_cpu_ms": cpu * 1e3, "cpu_times_ms": [t * 1e3 for t in cts],
             "single_call_ms": single * 1e3, "single_call_times_ms": [t * 1e3 for t in ts1],
             "top8": agree(x, exact),
             "top8_same_order": bool(np.array_equal(top(x), top(exact))),
             "l1_err": float(np.abs(x / x.sum() - exact).sum())}
        if extra:
            e.update(extra(r))
        res[name] = e
        print(f"  d={D:<5g}{name:18s} {med * 1e3:10.3f} ms (cpu {cpu * 1e3:10.3f})  top8 {e['top8']:.3f} "
              f"order {e['top8_same_order']}  L1 {e['l1_err']:.2e}", flush=True)

    tol = a.push_tol
    rec("ours_power_topk", lambda: ppr_power_topk(ptr, nbr, w, wsum, p, D, tol, a.max_iter, a.k),
        extra=lambda r: {"tol": tol, "k": a.k, "iterations": int(r[1]), "bound": float(r[2]),
                         "stopped_by_certificate": bool(r[3])})
    fac = fac_lp[0]
    if fac is not None:  # the same iteration on the chunk-group incidences (ppr="factored")
        cg_ptr, cg, gptr, members, gn = fac
        gw = 1.0 / gn
        rec("ours_factored", lambda: ppr_factored_topk(cg_ptr, cg, gptr, members, gw, p, D, tol, a.max_iter, a.k),
            extra=lambda r: {"tol": tol, "k": a.k, "iterations": int(r[1]), "incidences": int(cg.shape[0]),
                             "stopped_by_certificate": bool(r[3])})
    lp = fac_lp[1]
    pid = np.flatnonzero(p)
    pval = p[pid]
    lp_extra = lambda r: {"k": a.k, "eps_min": a.local_eps_min, "certified": r.certified,  # noqa: E731
                          "eps_reached": r.eps, "pushes": r.pushes, "touched": int(r.ids.shape[0]),
                          "residual_l1": r.residual, "kernel_top8_same_order": bool(np.array_equal(r.top, top(exact)))}
    rec("ours_local_push", lambda: lp.topk_sparse(pid, pval, D, a.k, eps_min=a.local_eps_min), extra=lp_extra)
    rec("ours_local_push_dense_prior", lambda: lp.topk(p, D, a.k, eps_min=a.local_eps_min), extra=lp_extra)
    rec("ours_local_push_approx", lambda: lp.approx_sparse(pid, pval, D, a.approx_eps),
        extra=lambda r: {"eps": a.approx_eps, "pushes": r.pushes, "touched": int(r.ids.shape[0]),
                         "residual_l1": r.residual, "max_bound": float(max(r.b.max(initial=0.0), r.b_rest)),
                         "max_error": float(np.max(exact - r.dense(m)))})
    rec("ours_push_topk", lambda: ppr_push_topk(ptr, nbr, w, wsum, p, D, tol, a.k),
        extra=lambda r: {"tol": tol, "k": a.k, "residual_l1": float(r[1]), "pushes": int(r[2]),
                         "stopped_by_certificate": bool(float(r[1]) > tol)})
    rec("ours_push", lambda: ppr_push(ptr, nbr, w, wsum, p, D, tol),
        extra=lambda r: {"tol": tol, "residual_l1": float(r[1]), "pushes": int(r[2])})
    rec("ours_power", lambda: ppr_power(ptr, nbr, w, wsum, p, D, 1e-6, 100_000),
        extra=lambda r: {"iterations": int(r[1])})
    rec("scipy_power", lambda: scipy_power(P, p, D), extra=lambda r: {"iterations": int(r[1]),
                                                                     "build_ms": scipy_build * 1e3})
    rec("igraph_prpack", lambda: np.asarray(G.personalized_pagerank(
        directed=True, damping=D, reset=p, weights="weight", implementation="prpack")),
        extra=lambda r: {"build_ms": ig_build_ms})
    res["igraph_prpack"]["solve_plus_build_ms"] = res["igraph_prpack"]["solve_ms"] + ig_build_ms
    if H is not None and not (a.only and m >= a.only_from and "networkx" not in a.only):
        import networkx as nx
        pers = {int(i): float(p[i]) for i in np.flatnonzero(p)}

        def nxrun():
            r = nx.pagerank(H, alpha=D, personalization=pers, weight="weight", tol=1e-10, max_iter=10_000)
            return np.array([r[i] for i in range(m)])
        rec("networkx", nxrun, reps=min(rep, 3), extra=lambda r: {"build_ms": nx_build_ms})
    out["solvers"] = res
    pr = res["igraph_prpack"]
    default = set_default(out, D, m, int((p > 0).sum()), a)
    for name in SOLVERS:
        if name in res:
            out[f"{name}_vs_prpack_speedup"] = pr["solve_ms"] / res[name]["solve_ms"]
            out[f"{name}_vs_prpack_cpu_speedup"] = pr["solve_cpu_ms"] / res[name]["solve_cpu_ms"]
    print(f"  d={D:g} {default} (default) vs prpack: {out['default_vs_prpack_speedup']:.1f}x (solve), "
          f"{out['default_vs_prpack_build_plus_solve_speedup']:.1f}x (construct+solve); "
          f"local push {out['ours_local_push_vs_prpack_speedup']:.1f}x", flush=True)
    return out


def graph_of_size(n, a):
    """The benchmark's chunk graph of ~n chunks (and its factored incidences), from
    ``--graph-cache`` when that directory holds it (written there by an earlier run, e.g.
    ``--generate-only`` under nice before the timed run), else generated."""
    path = None
    if a.graph_cache:
        from pathlib import Path
        path = Path(a.graph_cache) / f"chunk_graph_n{n}_g{a.max_group:g}_w{a.weight_kind}_s{a.seed}.npz"
        if path.exists():
            z = np.load(path)
            return (z["ptr"], z["nbr"], z["w"], z["wsum"]), tuple(z[f"f{i}"] for i in range(5)), True
    g, fac = chunk_graph_of_size(n, a.max_group, seed=a.seed, weight_kind=a.weight_kind, factored=True)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, ptr=g[0], nbr=g[1], w=g[2], wsum=g[3], **{f"f{i}": f for i, f in enumerate(fac)})
    return g, fac, False


def run_size(n, a):
    t = time.perf_counter()
    (ptr, nbr, w, wsum), fac, cached = graph_of_size(n, a)
    gen_s = time.perf_counter() - t
    m = wsum.shape[0]
    rep = a.repeats if m <= 100_000 else max(1, min(a.repeats, 3))
    out = {"n_nodes": m, "n_arcs": int(nbr.shape[0]), "mean_degree": nbr.shape[0] / m,
           "max_degree": int(np.diff(ptr).max()), "dangling": int((wsum == 0).sum()),
           "graph_gen_s": gen_s, "graph_from_cache": cached, "repeats": rep}
    print(f"n={m} arcs={nbr.shape[0]} gen {gen_s:.1f}s", flush=True)
    tb = time.perf_counter()
    P = transition(ptr, nbr, w, wsum)
    scipy_build = time.perf_counter() - tb
    import igraph as ig
    dang = np.flatnonzero(wsum == 0)
    src = np.concatenate([np.repeat(np.arange(m), np.diff(ptr)), dang])
    dst = np.concatenate([nbr.astype(np.int64), dang])
    wts = np.concatenate([w, np.ones(dang.shape[0])])
    edges = np.column_stack([src, dst])
    build = []
    for _ in range(min(rep, 3)):
        t = time.perf_counter()
        G = ig.Graph(n=m, edges=edges, directed=True)
        G.es["weight"] = wts
        build.append(time.perf_counter() - t)
    ig_build_ms = float(np.median(build)) * 1e3
    out["igraph_build_ms"] = ig_build_ms
    H, nx_build_ms = None, None
    if m <= a.nx_max:
        import networkx as nx
        t = time.perf_counter()
        H = nx.DiGraph()
        H.add_nodes_from(range(m))
        H.add_weighted_edges_from(zip(src.tolist(), dst.tolist(), wts.tolist()))
        nx_build_ms = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    lp = LocalPush(ptr, nbr, w, wsum)  # validation, symmetry check, per-arc scaled weights, scratch
    out["local_push_build_ms"] = (time.perf_counter() - t) * 1e3
    out["local_push_symmetric"] = lp.symmetric
    outs = []
    for nnz in a.prior_nnz:  # the same graphs for every prior
        p = make_prior(m, nnz, a.seed + 7)
        lp.topk(p, 0.5, a.k)
        o = dict(out, prior_nnz=int((p > 0).sum()), loadavg_before=list(os.getloadavg()), by_damping={})
        for D in a.dampings:
            o["by_damping"][f"{D:g}"] = run_damping(D, ptr, nbr, w, wsum, p, P, scipy_build, G, ig_build_ms,
                                                    H, nx_build_ms, rep, a,
                                                    (fac if a.weight_kind == 1 else None, lp))
        o["loadavg_after"] = list(os.getloadavg())
        outs.append(o)
    return outs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000, 1_000_000])
    ap.add_argument("--dampings", type=float, nargs="+", default=[0.85, 0.5, 0.2])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--max-group", type=float, default=None,
                    help="group cap of the chunk graph (default: config.TUNED_STITCH.graph_max_group)")
    ap.add_argument("--weight", choices=["uniform", "inverse_size"], default=None,
                    help="arc weights (default: config.TUNED_STITCH.graph_weight)")
    ap.add_argument("--prior-nnz", type=int, nargs="+", default=[300],
                    help="prior support sizes (0: every chunk), one result file each (--out)")
    ap.add_argument("--push-tol", type=float, default=None, help="default: config.TUNED_STITCH.tol")
    ap.add_argument("--local-eps-min", type=float, default=1e-12,
                    help="local push (certified mode): lowest threshold before it reports uncertified")
    ap.add_argument("--approx-eps", type=float, default=1e-5,
                    help="local push (approximate mode): the fixed threshold eps (error <= eps * wsum(v))")
    ap.add_argument("--spsolve-max", type=int, default=2_000)
    ap.add_argument("--nx-max", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", nargs="+", default=["ppr.json"])
    ap.add_argument("--only", nargs="+", default=None,
                    help="solvers to run at sizes >= --only-from (igraph_prpack always runs)")
    ap.add_argument("--only-from", type=int, default=0)
    ap.add_argument("--resummarize", action="store_true",
                    help="measure nothing: rewrite the --out files' summaries (default solver by the current rule)")
    ap.add_argument("--merge", action="store_true",
                    help="add the sizes of this run to those already in the --out files")
    ap.add_argument("--graph-cache", default=None,
                    help="directory of generated graphs: read when there, written when not (outside the repo)")
    ap.add_argument("--generate-only", action="store_true",
                    help="with --graph-cache: generate (or check) the --sizes graphs and measure nothing")
    a = ap.parse_args()
    if len(a.out) != len(a.prior_nnz):
        ap.error("give one --out file per --prior-nnz value")
    st = config.TUNED_STITCH
    a.max_group = st.graph_max_group if a.max_group is None else a.max_group
    a.weight = st.graph_weight if a.weight is None else a.weight
    a.push_tol = st.tol if a.push_tol is None else a.push_tol
    a.max_iter = st.max_iter
    a.k = st.top_k
    a.default_solver = {"power": "ours_power_topk", "push": "ours_local_push", "factored": "ours_factored",
                        "auto": "auto"}.get(st.ppr, "ours_power_topk")
    from hyperrag_fast.config import StitchOptions
    a.weight_kind = int(kernel_params(StitchOptions(graph_weight=a.weight))[PRM.GRAPH_WEIGHT])
    a.options_source = {"graph_max_group": a.max_group, "graph_weight": a.weight, "tol": a.push_tol,
                        "ppr": st.ppr, "top_k": st.top_k, "max_iter": st.max_iter,
                        "default_solver": a.default_solver,
                        "from": "hyperrag_fast.config.TUNED_STITCH at run time unless overridden on the command line",
                        "tuned_stitch_repr": repr(st)}
    print(a.options_source, flush=True)
    if a.generate_only:
        if not a.graph_cache:
            ap.error("--generate-only needs --graph-cache")
        for n in a.sizes:
            t = time.perf_counter()
            g, _fac, cached = graph_of_size(n, a)
            print(f"n={g[3].shape[0]} arcs={g[1].shape[0]} {'cached' if cached else 'generated'} "
                  f"{time.perf_counter() - t:.1f}s", flush=True)
        return
    if a.resummarize:
        import json
        for f in a.out:
            old = json.loads((C.RESULTS / f).read_text())
            a.dampings = old["params"]["dampings"]
            write(a, old["sizes"], old["params"]["prior_nnz"], f, keep=old)
        return
    # compile outside the timings
    ptr = np.array([0, 1, 2]); nbr = np.array([1, 0], dtype=np.int32)
    ppr_push_topk(ptr, nbr, np.ones(2), np.ones(2), np.array([1.0, 0.0]), 0.85, 1e-6, TOPK)
    ppr_power_topk(ptr, nbr, np.ones(2), np.ones(2), np.array([1.0, 0.0]), 0.85, 1e-6, 100, TOPK)
    ppr_push(ptr, nbr, np.ones(2), np.ones(2), np.array([1.0, 0.0]), 0.85, 1e-6)
    ppr_power(ptr, nbr, np.ones(2), np.ones(2), np.array([1.0, 0.0]), 0.85, 1e-6, 100)
    sizes = [{} for _ in a.prior_nnz]
    a.merged_from = {}
    if a.merge:  # keep the sizes (and the commands) of an earlier run
        import json
        for i, f in enumerate(a.out):
            old = json.loads((C.RESULTS / f).read_text())
            sizes[i] = old["sizes"]
            a.merged_from[f] = {"command": old["command"], "git": old["machine"].get("git"),
                                "loadavg_at_start": old["machine"].get("loadavg_at_start"),
                                "sizes": list(old["sizes"])}
    for n in a.sizes:  # written after every size, so a long 1M run leaves the smaller ones
        for i, o in enumerate(run_size(n, a)):
            sizes[i][str(n)] = o
            write(a, sizes[i], a.prior_nnz[i], a.out[i])


def set_default(b, D, m, nnz, a):
    """Into one size's entry ``b`` for damping D: the default options' solver
    (``config.TUNED_STITCH.ppr``) and the solver of ppr="auto" (``config.ppr_solver``, read
    now), with their speedups over PRPACK."""
    res = b["solvers"]
    auto = "ours_local_push" if config.ppr_solver(D, m, nnz) == "push" else "ours_power_topk"
    default = auto if a.default_solver == "auto" else a.default_solver
    pr = res["igraph_prpack"]
    for key, name in (("default", default), ("auto", auto)):
        b[f"{key}_solver"] = name
        b[f"{key}_vs_prpack_speedup"] = pr["solve_ms"] / res[name]["solve_ms"]
        b[f"{key}_vs_prpack_cpu_speedup"] = pr["solve_cpu_ms"] / res[name]["solve_cpu_ms"]
    b["default_vs_prpack_build_plus_solve_speedup"] = pr["solve_plus_build_ms"] / res[default]["solve_ms"]
    if "scipy_power" in res:
        b["default_vs_scipy_speedup"] = res["scipy_power"]["solve_ms"] / res[default]["solve_ms"]
    return default


def write(a, sizes, prior_nnz, out, keep=None):
    summ = {}
    for D in a.dampings:
        k = f"{D:g}"
        for s in sizes.values():  # the rule as the code now states it
            set_default(s["by_damping"][k], D, s["n_nodes"], s["prior_nnz"], a)
        by = lambda key: {n: s["by_damping"][k][key] for n, s in sizes.items()}  # noqa: E731
        sp_ = by("default_vs_prpack_speedup")
        spb = by("default_vs_prpack_build_plus_solve_speedup")
        dflt = {n: s["by_damping"][k]["default_solver"] for n, s in sizes.items()}
        ag = {n: s["by_damping"][k]["solvers"][dflt[n]]["top8"] for n, s in sizes.items()}
        od = {n: s["by_damping"][k]["solvers"][dflt[n]]["top8_same_order"] for n, s in sizes.items()}
        summ[k] = {"default_solver": a.default_solver, "default_solver_by_size": dflt,
                   "default_vs_prpack_speedup_by_size": sp_,
                   "default_vs_prpack_build_plus_solve_speedup_by_size": spb,
                   "default_vs_prpack_speedup_median": float(np.median(list(sp_.values()))),
                   "default_vs_prpack_cpu_speedup_by_size": by("default_vs_prpack_cpu_speedup"),
                   "default_vs_prpack_speedup_min": float(np.min(list(sp_.values()))),
                   "default_vs_prpack_build_plus_solve_speedup_median": float(np.median(list(spb.values()))),
                   "top8_agreement_by_size": ag, "top8_same_order_by_size": od,
                   "top8_agreement_min": float(np.min(list(ag.values())))}
        au = by("auto_vs_prpack_speedup")  # ppr="auto": the measured rule of config.ppr_solver
        summ[k].update({"auto_solver_by_size": by("auto_solver"), "auto_vs_prpack_speedup_by_size": au,
                        "auto_vs_prpack_speedup_median": float(np.median(list(au.values()))),
                        "auto_vs_prpack_cpu_speedup_by_size": by("auto_vs_prpack_cpu_speedup"),
                        "auto_top8_same_order_by_size": {
                            n: s["by_damping"][k]["solvers"][s["by_damping"][k]["auto_solver"]]["top8_same_order"]
                            for n, s in sizes.items()}})
        for name in SOLVERS:  # over the sizes where the solver ran (--only)
            have = [n for n, s in sizes.items() if f"{name}_vs_prpack_speedup" in s["by_damping"][k]]
            if not have:
                continue
            by = lambda key: {n: sizes[n]["by_damping"][k][key] for n in have}  # noqa: E731
            x = by(f"{name}_vs_prpack_speedup")
            summ[k][f"{name}_vs_prpack_speedup_by_size"] = x
            summ[k][f"{name}_vs_prpack_speedup_median"] = float(np.median(list(x.values())))
            x = by(f"{name}_vs_prpack_cpu_speedup")
            summ[k][f"{name}_vs_prpack_cpu_speedup_by_size"] = x
            summ[k][f"{name}_vs_prpack_cpu_speedup_median"] = float(np.median(list(x.values())))
    data = {
        "params": dict(vars(a), prior_nnz=prior_nnz, out=out, prior_nnz_of_run=a.prior_nnz, out_of_run=a.out),
        "solver_of_query_path": f"{a.default_solver} (k={a.k}), from config.TUNED_STITCH.ppr",
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "sizes": sizes, "summary": summ}
    if keep is not None:  # --resummarize: the measurements' command, machine and params stay
        data.update(command=keep["command"], machine=keep["machine"], params=keep["params"],
                    summary_command=C.command(), summary_git=C.git_state(),
                    summary_default_solver=a.default_solver, summary_tuned_ppr=config.TUNED_STITCH.ppr,
                    summary_rule={"PUSH_MIN_CHUNKS": config.PUSH_MIN_CHUNKS,
                                  "PUSH_MAX_FRACTION": config.PUSH_MAX_FRACTION})
    C.write_result(out, data)


if __name__ == "__main__":
    main()
