"""Where the PPR time goes (issue item 1, the 20x target): sweeps needed x cost per sweep.

    python benchmarks/ppr_sweep_profile.py                  # sizes 1k 10k 100k, d = preset damping
    python benchmarks/ppr_sweep_profile.py --sizes 1000 10000 100000 1000000

Same graphs, prior and timing as ``bench_ppr.py`` (chunk graph of a whole synthetic
corpus, prior on 300 random chunks; median per-call time over batches of >= 5 ms). Per size: the default solver's sweeps and time; one dense sweep of
ours (``ppr_power`` with tol 0, time / sweeps) against one SciPy CSR mat-vec ``P @ x``
(ns per arc each); the certificate trace (after each sweep: the stated bound b and the
smallest gap among the 9 largest entries; the top-8 order is certified once every gap
exceeds 2b); PRPACK's solve time and the speedups ours has, and would have with one sweep
fewer; the factored form (``ppr="factored"``) on the same graph.
"""
from __future__ import annotations

import argparse

import numpy as np

from hyperrag_fast import config
from hyperrag_fast.kernels.ppr import ppr_power, ppr_power_topk
from hyperrag_fast.kernels.ppr_factored import ppr_factored_topk

try:
    from . import _common as C
    from ._graphs import chunk_graph_of_size
    from .bench_ppr import make_prior, transition
except ImportError:
    import _common as C
    from _graphs import chunk_graph_of_size
    from bench_ppr import make_prior, transition


def _t(fn, repeats):
    """(median seconds per call, per-call seconds, last result), batches of >= 5 ms."""
    med, ts, _n, out = C.timeit_batched(fn, repeats)
    return med, ts, out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--prior-nnz", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="ppr_sweep_profile.json")
    a = ap.parse_args()
    st = config.TUNED_STITCH
    D, tol, k = st.damping, st.tol, st.top_k
    wk = 1 if st.graph_weight == "inverse_size" else 0
    import igraph as ig
    out = {"damping": D, "tol": tol, "k": k, "graph_max_group": st.graph_max_group,
           "graph_weight": st.graph_weight, "prior_nnz": a.prior_nnz, "sizes": {}}
    for n in a.sizes:
        (ptr, nbr, w, wsum), fac = chunk_graph_of_size(n, st.graph_max_group, seed=a.seed, weight_kind=wk,
                                                       factored=True)
        m, arcs = wsum.shape[0], int(nbr.shape[0])
        p = make_prior(m, a.prior_nnz, a.seed + 7)
        rep = a.repeats if m <= 100_000 else 3
        t_ours, _, r = _t(lambda: ppr_power_topk(ptr, nbr, w, wsum, p, D, tol, st.max_iter, k), rep)
        sweeps = int(r[1])
        xd = np.full(m, 1.0 / m)  # a dense iterate: every sweep visits every arc
        t_dense, _, _ = _t(lambda: ppr_power(ptr, nbr, w, wsum, xd, D, 0.0, 5), rep)
        P = transition(ptr, nbr, w, wsum)
        t_spmv, _, _ = _t(lambda: P @ xd, rep)
        trace = []
        for s in range(1, sweeps + 1):
            x, _, b, _ = ppr_power_topk(ptr, nbr, w, wsum, p, D, 0.0, s, 0)
            top = np.sort(x)[::-1][:k + 1]
            gap = float(np.min(top[:-1] - top[1:]))
            trace.append({"sweep": s, "bound": float(b), "min_gap_top9": gap, "gap_over_2b": gap / (2 * b)})
        src = np.concatenate([np.repeat(np.arange(m), np.diff(ptr)), np.flatnonzero(wsum == 0)])
        dst = np.concatenate([nbr.astype(np.int64), np.flatnonzero(wsum == 0)])
        G = ig.Graph(n=m, edges=np.column_stack([src, dst]), directed=True)
        G.es["weight"] = np.concatenate([w, np.ones(int((wsum == 0).sum()))])
        t_pr, _, _ = _t(lambda: G.personalized_pagerank(directed=True, damping=D, reset=p, weights="weight",
                                                              implementation="prpack"), rep)
        cg_ptr, cg, gptr, members, gn = fac
        t_fac, _, _ = _t(lambda: ppr_factored_topk(cg_ptr, cg, gptr, members, 1.0 / gn, p, D, tol,
                                                         st.max_iter, k), rep)
        row = {"n_nodes": m, "arcs": arcs, "incidences": int(cg.shape[0]), "sweeps": sweeps,
               "ours_ms": t_ours * 1e3, "prpack_ms": t_pr * 1e3, "speedup": t_pr / t_ours,
               "speedup_with_one_sweep_fewer": t_pr / (t_ours * (sweeps - 1) / sweeps) if sweeps > 1 else None,
               "dense_sweep_ns_per_arc": t_dense / 5 / max(arcs, 1) * 1e9,
               "scipy_spmv_ns_per_arc": t_spmv / max(arcs, 1) * 1e9,
               "factored_ms": t_fac * 1e3, "factored_speedup": t_pr / t_fac, "certificate_trace": trace}
        out["sizes"][str(n)] = row
        print(f"n={m} arcs={arcs} sweeps={sweeps} ours {t_ours * 1e3:.3f} ms prpack {t_pr * 1e3:.3f} ms "
              f"-> {row['speedup']:.1f}x ({row['speedup_with_one_sweep_fewer'] or 0:.1f}x with a sweep fewer); "
              f"sweep {row['dense_sweep_ns_per_arc']:.2f} ns/arc vs scipy {row['scipy_spmv_ns_per_arc']:.2f}; "
              f"factored {row['factored_speedup']:.1f}x; last gaps/2b "
              + " ".join(f"{t['gap_over_2b']:.2g}" for t in trace), flush=True)
    sp_ = [r["speedup"] for r in out["sizes"].values()]
    out["speedup_median"] = float(np.median(sp_))
    C.write_result(a.out, out)


if __name__ == "__main__":
    main()
