"""A memory-bandwidth floor for the stage after candidate search (issue item 5).

    python benchmarks/bench_bandwidth.py                     # 1e6 states, default + paper options

Bandwidth: NumPy copy (bytes read + written) and sum (bytes read) of a ``--mb`` MB
float64 array, median of 7, single thread. Bytes a query touches, counted from the
result detail (``detail=True``) and ``stats`` with the arrays' itemsizes, an
optimistic model (each byte once, no cache-line waste):

* activation: K_V candidate node vectors (dim x itemsize) + ids;
* per touched node: scratch A, a_space, a_time, g (4 x f64), flag, touched id, node_chunk,
  node_group, node_ptr pair, nc_ptr pair, nc_chunks, written and reset (x2 for the scratch);
* per read hyperedge: its vector, S cache + id, edge_ptr pair; per incidence read in
  spatial bridging (edges of activated nodes): edge_nodes id + a_space;
* per chunk whose sim is read (C_q plus chunks of touched nodes): its vector + cache;
* temporal scans: group_nodes + node_chunk per member of each activated node's group
  (if under temporal_max_group);
* chunk graph: 4 passes over the members of each C_q chunk (chunk_nodes, node_group,
  group_chunks, glast, gcnt) + arcs (nbr i32 + w f64 + mark/pos);
* PPR: power: iterations x (arcs x 12 + |C_q| x 40); push: pushes x (mean degree x 21 + 40).

floor = bytes / copy bandwidth; ratio = measured p50 / floor (per query: median of
ratios). Target in the issue: within 5x. Options read at run time (``_setup.VARIANTS``):
``default`` = ``QueryOptions().stitch`` (the figure ``bandwidth_floor_ratio``), ``paper``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

try:
    from . import _common as C
    from ._setup import VARIANTS, describe, setup
    from .bench_scale import graph_arc_bound
except ImportError:
    import _common as C
    from _setup import VARIANTS, describe, setup
    from bench_scale import graph_arc_bound


def bandwidth(mb):
    a = np.ones(mb * 1024 * 1024 // 8)
    b = np.empty_like(a)
    cp, sm = [], []
    for _ in range(7):
        t = time.perf_counter(); np.copyto(b, a); cp.append(time.perf_counter() - t)
        t = time.perf_counter(); a.sum(); sm.append(time.perf_counter() - t)
    return {"copy_GBps": 2 * a.nbytes / np.median(cp) / 1e9, "sum_GBps": a.nbytes / np.median(sm) / 1e9,
            "array_mb": mb}


def bytes_touched(eng, opts, r):
    g, dim = eng.graph, eng.dim
    vb = dim * eng.node_vec.itemsize
    cq = r.cq.shape[0]
    touched = r.node_ids.astype(np.int64)
    act = touched[r.node_A > 0]
    b = {}
    b["activation"] = 50 * (vb + 8)
    b["node_state"] = touched.shape[0] * (2 * (4 * 8 + 1 + 4) + 4 + 4 + 16 + 16 + 4)
    b["edges"] = r.edge_ids.shape[0] * (vb + 8 + 4 + 16)
    e_of = [g.node_edges[g.node_ptr[u]:g.node_ptr[u + 1]] for u in act]
    inc = sum(int((g.edge_ptr[e + 1] - g.edge_ptr[e]).sum()) for e in e_of)
    b["spatial_incidences"] = inc * (4 + 8)
    n_chunk_sims = np.union1d(r.cq, g.node_chunk[touched]).shape[0]
    b["chunk_vectors"] = n_chunk_sims * (vb + 8 + 4)
    gs = np.diff(g.group_ptr)[g.node_group[act]]
    gs = gs[gs <= opts.temporal_max_group]
    b["temporal_scan"] = int(gs.sum()) * 8
    members = int((g.chunk_ptr[r.cq + 1] - g.chunk_ptr[r.cq]).sum())
    arcs, work = int(r.stats[1]), int(r.stats[2])
    if opts.ppr != "none":
        b["chunk_graph"] = 4 * members * (4 + 4 + 4 + 8 + 8) + arcs * (4 + 8 + 16)
    if opts.ppr == "power":
        b["ppr"] = work * (arcs * 12 + cq * 40)
    elif opts.ppr == "push":
        b["ppr"] = work * ((arcs / max(cq, 1)) * 21 + 40)
    return b


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--states", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--max-arcs", type=float, default=5e7)
    ap.add_argument("--variant-budget-s", type=float, default=120)
    a = ap.parse_args()
    bw = bandwidth(a.mb)
    print(bw, flush=True)
    c, g, eng, qs, cn, cc = setup(a.states, a.queries)
    out = {"states": g.n_nodes, "dim": eng.dim, "bandwidth": bw, "variants": {}}
    for name in ("default", "paper"):
        opts = VARIANTS[name]
        bounds = [graph_arc_bound(g, eng.query(qs[i], cn[i], cc[i], opts.replace(ppr="none")).cq,
                                  opts.graph_max_group) for i in range(len(qs))]
        lat, ratios, byts, parts, skipped = [], [], [], [], 0
        t0 = time.perf_counter()
        for i in range(len(qs)):
            if bounds[i] > a.max_arcs:
                skipped += 1
                continue
            if time.perf_counter() - t0 > a.variant_budget_s:
                break
            t = time.perf_counter()
            eng.query(qs[i], cn[i], cc[i], opts)
            el = time.perf_counter() - t
            r = eng.query(qs[i], cn[i], cc[i], opts, detail=True)
            b = bytes_touched(eng, opts, r)
            tot = sum(b.values())
            floor = tot / (bw["copy_GBps"] * 1e9)
            lat.append(el)
            byts.append(tot)
            parts.append(b)
            ratios.append(el / floor)
        v = {"n": len(lat), "skipped_over_max_arcs": skipped, "options": describe(opts), "p50_ms": C.pct(np.array(lat) * 1e3, 50),
             "bytes_p50": C.pct(byts, 50), "floor_ms_p50": C.pct(np.array(byts) / (bw["copy_GBps"] * 1e9) * 1e3, 50),
             "ratio_p50": C.pct(ratios, 50), "ratio_p90": C.pct(ratios, 90),
             "bytes_by_part_p50": {k: C.pct([p.get(k, 0) for p in parts], 50) for k in parts[0]}}
        out["variants"][name] = v
        print(name, v, flush=True)
    out["bandwidth_floor_ratio"] = out["variants"]["default"]["ratio_p50"]
    out["bandwidth_floor_ratio_options"] = "default (QueryOptions().stitch)"
    C.write_result("bandwidth.json", out)


if __name__ == "__main__":
    main()
