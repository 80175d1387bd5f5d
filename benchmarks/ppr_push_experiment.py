"""Where ppr_push_topk spends its time, and what a local variant would gain (a kernel
suggestion, measured; the library kernel is not changed).

    python benchmarks/ppr_push_experiment.py                 # 10k, 100k, 1M chunks; d 0.85, 0.2

Same graphs and priors as ``bench_ppr.py`` (defaults from ``config.TUNED_STITCH``), plus a
dense prior over every node (the query path's case: every chunk of C_q has I(c) > 0).
Solvers, median of ``--repeats``:

* ``topk``       — ``kernels.ppr.ppr_push_topk(k=8)`` (the library);
* ``topk_local`` — the same algorithm and the same certificate, with the O(m) work of each
  round removed: ||r||_1 is kept incrementally (a push of r_i lowers it by (1-d) r_i, a
  dangling node by r_i), the next round's queue is seeded from the nodes that hold
  residual (a list, not a scan of all m), the top-(k+1) for the certificate is taken
  over the nodes that hold mass, and the FIFO wraps with a compare instead of ``% m``;
* ``power``      — ``kernels.ppr.ppr_power`` (max-abs-change < 1e-6).

Reports rounds, pushes, top-8 equality with ``topk`` (the variant must return the same
top-8 in the same order) and times. Writes ``results/ppr_push_experiment.json``.
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse

import numpy as np
from numba import njit

from hyperrag_fast.engine import kernel_params
from hyperrag_fast import config
from hyperrag_fast.kernels import params as PRM
from hyperrag_fast.kernels.ppr import ppr_power, ppr_push_topk
from hyperrag_fast.config import StitchOptions

try:
    from . import _common as C
    from ._graphs import chunk_graph_of_size
    from .bench_ppr import make_prior, top
except ImportError:
    import _common as C
    from _graphs import chunk_graph_of_size
    from bench_ppr import make_prior, top


@njit(cache=True)
def _certified(x, live, n_live, res, k):
    kk = k + 1
    topv = np.full(kk, -np.inf)
    cnt = 0
    for t in range(n_live):
        v = x[live[t]]
        if v <= topv[kk - 1]:
            continue
        j = kk - 1
        while j > 0 and topv[j - 1] < v:
            topv[j] = topv[j - 1]
            j -= 1
        topv[j] = v
        cnt += 1
    # nodes without mass have x = 0: the (k+1)-th value is at least 0
    for j in range(kk):
        if topv[j] == -np.inf:
            topv[j] = 0.0
    for j in range(kk - 1):
        if not topv[j] - topv[j + 1] > res:
            return False
    return True


@njit(cache=True)
def push_topk_local(ptr, nbr, w, wsum, p, d, tol, k):
    m = p.shape[0]
    x = np.zeros(m, dtype=np.float64)
    r = p.copy()
    floor = tol / m
    live = np.empty(m, dtype=np.int64)      # nodes that ever held residual or mass
    seen = np.zeros(m, dtype=np.bool_)
    n_live = 0
    rmax = 0.0
    res = 0.0
    for i in range(m):
        if r[i] > 0.0:
            live[n_live] = i
            n_live += 1
            seen[i] = True
            res += r[i]
            if r[i] > rmax:
                rmax = r[i]
    thr = max(rmax / 8.0, floor)
    queue = np.empty(m, dtype=np.int64)
    inq = np.zeros(m, dtype=np.bool_)
    pushes = 0
    rounds = 0
    while True:
        rounds += 1
        head = 0
        size = 0
        for t in range(n_live):
            i = live[t]
            if r[i] > thr:
                queue[size] = i
                size += 1
                inq[i] = True
        tail = size if size < m else 0
        while size > 0:
            i = queue[head]
            head += 1
            if head == m:
                head = 0
            size -= 1
            inq[i] = False
            ri = r[i]
            if ri <= thr:
                continue
            r[i] = 0.0
            pushes += 1
            if wsum[i] == 0.0:
                x[i] += ri
                res -= ri
                continue
            x[i] += (1.0 - d) * ri
            res -= (1.0 - d) * ri
            f = d * ri / wsum[i]
            for kk in range(ptr[i], ptr[i + 1]):
                j = nbr[kk]
                r[j] += f * w[kk]
                if not seen[j]:
                    seen[j] = True
                    live[n_live] = j
                    n_live += 1
                if not inq[j] and r[j] > thr:
                    queue[tail] = j
                    tail += 1
                    if tail == m:
                        tail = 0
                    size += 1
                    inq[j] = True
        if res < 0.0:
            res = 0.0
        if res <= tol or thr <= floor:
            break
        if k > 0 and _certified(x, live, n_live, res, k):
            break
        thr = max(thr / 8.0, floor)
    # the incremental sum drifts by rounding: return the exact one
    res = 0.0
    for t in range(n_live):
        res += r[live[t]]
    return x, res, pushes, rounds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--dampings", type=float, nargs="+", default=[0.85, 0.2])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--prior-nnz", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    st = config.TUNED_STITCH
    wk = int(kernel_params(StitchOptions(graph_weight=st.graph_weight))[PRM.GRAPH_WEIGHT])
    tol, K = st.tol, 8
    ptr0 = np.array([0, 1, 2]); nbr0 = np.array([1, 0], dtype=np.int32)
    push_topk_local(ptr0, nbr0, np.ones(2), np.ones(2), np.array([1.0, 0.0]), 0.5, 1e-6, K)
    ppr_push_topk(ptr0, nbr0, np.ones(2), np.ones(2), np.array([1.0, 0.0]), 0.5, 1e-6, K)
    out = {"graph_max_group": st.graph_max_group, "graph_weight": st.graph_weight, "tol": tol, "sizes": {}}
    for n in a.sizes:
        ptr, nbr, w, wsum = chunk_graph_of_size(n, st.graph_max_group, seed=a.seed, weight_kind=wk)
        m = wsum.shape[0]
        rep = a.repeats if m <= 100_000 else 3
        priors = {"sparse300": make_prior(m, a.prior_nnz, a.seed + 7),
                  "dense": make_prior(m, m, a.seed + 7)}
        res_n = {}
        for pname, p in priors.items():
            for D in a.dampings:
                t_lib, _, r_lib = C.timeit(lambda: ppr_push_topk(ptr, nbr, w, wsum, p, D, tol, K), rep)
                t_loc, _, r_loc = C.timeit(lambda: push_topk_local(ptr, nbr, w, wsum, p, D, tol, K), rep)
                t_pow, _, r_pow = C.timeit(lambda: ppr_power(ptr, nbr, w, wsum, p, D, 1e-6, 100_000), rep)
                e = {"topk_ms": t_lib * 1e3, "topk_local_ms": t_loc * 1e3, "power_ms": t_pow * 1e3,
                     "pushes_lib": int(r_lib[2]), "pushes_local": int(r_loc[2]), "rounds_local": int(r_loc[3]),
                     "power_iterations": int(r_pow[1]), "residual_lib": float(r_lib[1]),
                     "residual_local": float(r_loc[1]),
                     "same_top8_order": bool(np.array_equal(top(r_lib[0]), top(r_loc[0]))),
                     "same_top8_as_power": bool(np.array_equal(top(r_lib[0]), top(r_pow[0]))),
                     "ns_per_arc_lib": t_lib * 1e9 / max(1, int(r_lib[2]) * nbr.shape[0] / m)}
                e["local_speedup"] = t_lib / t_loc
                res_n[f"{pname}_d{D:g}"] = e
                print(n, pname, D, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in e.items()}, flush=True)
        out["sizes"][str(n)] = {"n_nodes": m, "n_arcs": int(nbr.shape[0]), "cases": res_n}
        C.write_result("ppr_push_experiment.json", {"params": vars(a), **out})


if __name__ == "__main__":
    main()
