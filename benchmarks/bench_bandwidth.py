"""A memory-bandwidth floor for the stage after candidate search, per stage (issue item 5).

    python benchmarks/bench_bandwidth.py --queries 100 --variant-budget-s 60   # 1e6 states

Bandwidth: NumPy copy (bytes read + written) and sum (bytes read) of a ``--mb`` MB
float64 array, median of 7, single thread; the floor uses the copy figure. Also measured:
random 64-byte lines per second (``random_line_GBps``, a NumPy gather), the rate scattered
reads can reach; ``*_randomline`` ratios divide the ``lines`` bytes by it instead.

Bytes a query touches, per stage, from the query's own detail (``detail=True``: touched
states, hyperedges whose S(e) was read, C_q, chunk-graph arcs, PPR sweeps) and the index
arrays, under two models:

* ``elements`` (optimistic, the contract figure): every element read or written counts
  its itemsize once, wherever it lies (no cache-line waste); scratch entries written and
  reset count twice;
* ``lines``: what the memory system moves — the distinct 64-byte lines holding the
  elements each stage reads (index arithmetic on the real ids: scattered 4-byte reads
  cost a line each, contiguous ranges their lines), embedding rows in whole lines;
  lines written count twice (write-back).

Stages (as ``bench_profile.staged`` times them, one call each, so each pays a Numba
dispatch of ~5-20 us): activation (K_V candidate rows), spatial, temporal (group scans +
g_v = S(e_v) sim(q, c_v) reads), projection (C_q, Score, prior incl. chunk rows),
chunk_graph, ppr (sweeps x (arcs + |C_q|) arrays), topk_reset. "Propagation" =
spatial + temporal + projection + chunk_graph + ppr (what the issue's 5x target is about).
Ratio = measured time / (bytes / copy bandwidth); per query, median over queries. Both
the whole query and the staged replay run after a cache flush (64 MB streamed), so the
bytes come from memory, as the floor assumes.
``bandwidth_floor_ratio`` = whole ``StitchEngine.query`` time over the ``elements`` floor
of all stages (as before). Options read at run time (``_setup.VARIANTS``).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

try:
    from . import _common as C
    from ._setup import VARIANTS, describe, setup
    from .bench_profile import STAGES, flush_caches, staged
    from .bench_scale import graph_arc_bound
except ImportError:
    import _common as C
    from _setup import VARIANTS, describe, setup
    from bench_profile import STAGES, flush_caches, staged
    from bench_scale import graph_arc_bound

LINE = 64
PROPAGATION = ("spatial", "temporal", "projection", "chunk_graph", "ppr")


def bandwidth(mb):
    """Streaming copy / sum, and random 64-byte lines (NumPy gather of 2M float64 at random
    line-aligned positions: independent loads, one line each) over a ``mb`` MB array."""
    a = np.ones(mb * 1024 * 1024 // 8)
    b = np.empty_like(a)
    idx = np.random.default_rng(0).integers(0, a.shape[0] // 8, 2_000_000) * 8
    cp, sm, rl = [], [], []
    for _ in range(7):
        t = time.perf_counter(); np.copyto(b, a); cp.append(time.perf_counter() - t)
        t = time.perf_counter(); a.sum(); sm.append(time.perf_counter() - t)
        t = time.perf_counter(); a[idx].sum(); rl.append(time.perf_counter() - t)
    return {"copy_GBps": 2 * a.nbytes / np.median(cp) / 1e9, "sum_GBps": a.nbytes / np.median(sm) / 1e9,
            "random_line_GBps": LINE * idx.shape[0] / np.median(rl) / 1e9, "array_mb": mb}


class Tally:
    """Bytes of one stage under both models."""

    def __init__(self):
        self.el = 0
        self.ln = 0

    def at(self, arr_or_item, idx, write=False):
        """Scattered elements ``idx`` of an array (itemsize from the array or an int)."""
        item = arr_or_item if isinstance(arr_or_item, int) else arr_or_item.itemsize
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)
        k = 2 if write else 1
        self.el += k * item * idx.shape[0]
        self.ln += k * LINE * np.unique(idx * item // LINE).shape[0]

    def ranges(self, arr, starts, ends):
        """Contiguous ranges [starts, ends) of a 1-D array."""
        starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
        item = arr.itemsize
        self.el += item * int((ends - starts).sum())
        ok = ends > starts
        first, last = starts[ok] * item // LINE, (ends[ok] * item - 1) // LINE
        if first.shape[0]:
            lines = np.unique(np.concatenate([np.arange(f, l + 1) for f, l in zip(first, last)]))
            self.ln += LINE * lines.shape[0]

    def rows(self, mat, idx):
        """Whole rows of a 2-D array (embeddings)."""
        idx = np.unique(np.asarray(idx, dtype=np.int64))
        rb = mat.shape[1] * mat.itemsize
        self.el += rb * idx.shape[0]
        self.ln += LINE * -(-rb // LINE) * idx.shape[0]

    def seq(self, nbytes, write=False):
        k = 2 if write else 1
        self.el += k * int(nbytes)
        self.ln += k * int(nbytes)


def bytes_by_stage(eng, opts, r, cand_nodes):
    """{stage: Tally} for one query (see the module docstring)."""
    g = eng.graph
    nv, ev, cv = eng.node_vec, eng.edge_vec, eng.chunk_vec
    f8, i4 = 8, 4
    touched = r.node_ids.astype(np.int64)
    act = touched[r.node_A > 0]
    T = {s: Tally() for s in ("activation", "spatial", "temporal", "projection", "chunk_graph", "ppr",
                              "topk_reset")}
    t = T["activation"]
    t.seq(cand_nodes.shape[0] * 8)
    t.rows(nv, cand_nodes)
    t.at(f8, act, write=True)  # A
    t.at(1, act, write=True)  # flag
    # spatial: edges of activated states, their vectors and members
    t = T["spatial"]
    t.at(g.node_ptr, np.concatenate([act, act + 1]))
    t.ranges(g.node_edges, g.node_ptr[act], g.node_ptr[act + 1])
    e_sp = np.unique(np.concatenate([g.node_edges[g.node_ptr[u]:g.node_ptr[u + 1]] for u in act])
                     if act.shape[0] else np.empty(0, np.int64)).astype(np.int64)
    t.at(f8, e_sp, write=True)  # S cache
    t.rows(ev, e_sp)
    t.at(g.edge_ptr, np.concatenate([e_sp, e_sp + 1]))
    t.ranges(g.edge_nodes, g.edge_ptr[e_sp], g.edge_ptr[e_sp + 1])
    sp_t = touched[r.node_space > 0]
    t.at(f8, sp_t, write=True)
    t.at(1, sp_t, write=True)
    # temporal: scans of eligible groups, then g_v of members
    t = T["temporal"]
    if opts.temporal:
        beta = getattr(opts, "temporal_from_space", 0.0)
        srcs = touched[(r.node_A > 0) | ((beta > 0) & (r.node_space > 0))]  # as stibp.temporal
        gid = np.unique(g.node_group[srcs]).astype(np.int64)
        size = g.group_ptr[gid + 1] - g.group_ptr[gid]
        gid = gid[(size >= 2) & (size <= opts.temporal_max_group)]
        t.at(g.group_ptr, np.concatenate([gid, gid + 1]))
        t.ranges(g.group_nodes, g.group_ptr[gid], g.group_ptr[gid + 1])
        mem = np.concatenate([g.group_nodes[g.group_ptr[x]:g.group_ptr[x + 1]] for x in gid]).astype(np.int64) \
            if gid.shape[0] else np.empty(0, np.int64)
        t.at(g.node_chunk, mem)
        t.at(f8, mem, write=True)  # g cache, a_time
        t.at(f8, mem, write=True)
        t.at(g.node_ptr, np.concatenate([mem, mem + 1]))
        t.ranges(g.node_edges, g.node_ptr[mem], g.node_ptr[mem + 1])
        e_t = np.setdiff1d(np.unique(np.concatenate([g.node_edges[g.node_ptr[v]:g.node_ptr[v + 1]] for v in mem]))
                           if mem.shape[0] else np.empty(0), e_sp).astype(np.int64)
        t.at(f8, e_t, write=True)
        t.rows(ev, e_t)
        c_t = np.unique(g.node_chunk[mem]).astype(np.int64)
        t.at(f8, c_t, write=True)
        t.rows(cv, c_t)
    else:
        c_t = np.empty(0, np.int64)
    # projection: C_q, Score, prior
    t = T["projection"]
    pos = touched[r.node_a > 0]
    t.at(f8, touched)  # A, a_space, a_time read per touched state
    t.at(f8, touched)
    t.at(f8, touched)
    t.at(g.nc_ptr, np.concatenate([pos, pos + 1]))
    t.ranges(g.nc_chunks, g.nc_ptr[pos], g.nc_ptr[pos + 1])
    t.at(g.node_group, pos)
    t.at(f8, g.node_group[pos].astype(np.int64))  # group weight
    t.at(i4, r.cq, write=True)  # chunk_local
    c_new = np.setdiff1d(r.cq, c_t)
    t.rows(cv, c_new)
    t.at(f8, r.cq, write=True)
    t.seq(r.cq.shape[0] * (8 * 3 + 4))
    cq = r.cq.astype(np.int64)
    arcs, work = int(r.stats[1]), int(r.stats[2])
    if opts.ppr != "none":
        t = T["chunk_graph"]
        t.at(g.chunk_ptr, np.concatenate([cq, cq + 1]))
        t.ranges(g.chunk_nodes, g.chunk_ptr[cq], g.chunk_ptr[cq + 1])
        mem = np.concatenate([g.chunk_nodes[g.chunk_ptr[c]:g.chunk_ptr[c + 1]] for c in cq]).astype(np.int64) \
            if cq.shape[0] else np.empty(0, np.int64)
        t.at(g.node_group, mem)
        grp = g.node_group[mem].astype(np.int64)
        t.at(g.group_chunks, grp)
        for _ in range(3):  # glast, gcnt, gstart (written and reset)
            t.at(8, grp, write=True)
        t.seq(mem.shape[0] * 4 * 3 + cq.shape[0] * (8 * 4 + 8), write=True)  # cg, members, ptr/wsum/mark/pos
        t.seq(arcs * (4 + 8), write=True)  # nbr, w
        t = T["ppr"]
        m = cq.shape[0]
        if opts.ppr == "power":
            t.seq(work * (arcs * 12 + m * (8 * 5)))  # ptr, nbr, w; x, new, p, wsum read/written
        else:
            t.seq(work * ((arcs / max(m, 1)) * 20 + 40))
    t = T["topk_reset"]
    t.seq(cq.shape[0] * 8)
    t.at(f8, touched, write=True)
    return T


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
    Bps = bw["copy_GBps"] * 1e9
    out = {"states": g.n_nodes, "dim": eng.dim, "bandwidth": bw, "variants": {}}
    for name in ("default", "paper"):
        opts = VARIANTS[name]
        bounds = [graph_arc_bound(g, eng.query(qs[i], cn[i], cc[i], opts.replace(ppr="none")).cq,
                                  opts.graph_max_group) for i in range(len(qs))]
        rows, skipped = [], 0
        t0 = time.perf_counter()
        for i in range(len(qs)):
            if bounds[i] > a.max_arcs:
                skipped += 1
                continue
            if time.perf_counter() - t0 > a.variant_budget_s:
                break
            flush_caches()
            t = time.perf_counter()
            eng.query(qs[i], cn[i], cc[i], opts)
            el = time.perf_counter() - t
            flush_caches()
            st, _top, _info = staged(eng, opts, qs[i], cn[i], cc[i])
            r = eng.query(qs[i], cn[i], cc[i], opts, detail=True)
            T = bytes_by_stage(eng, opts, r, np.asarray(cn[i]))
            sec = dict(zip(STAGES, st))
            stage_s = {"activation": sec["activate"], "spatial": sec["spatial"], "temporal": sec["temporal"],
                       "projection": sec["query_chunk_set"] + sec["project_scores"] + sec["chunk_prior"],
                       "chunk_graph": sec["chunk_graph"], "ppr": sec["ppr"], "topk_reset": sec["topk_reset"]}
            rows.append({"query_s": el, "stage_s": stage_s, "el": {k: v.el for k, v in T.items()},
                         "ln": {k: v.ln for k, v in T.items()}})
        if not rows:
            out["variants"][name] = {"n": 0, "skipped_over_max_arcs": skipped, "options": describe(opts)}
            continue
        med = lambda xs: C.pct(xs, 50)  # noqa: E731

        def ratio(stages, model):
            return med([sum(x["stage_s"][s] for s in stages) / (sum(x[model][s] for s in stages) / Bps)
                        for x in rows])
        tot_el = [sum(x["el"].values()) for x in rows]
        tot_ln = [sum(x["ln"].values()) for x in rows]
        v = {"n": len(rows), "skipped_over_max_arcs": skipped, "options": describe(opts),
             "p50_ms": med([x["query_s"] * 1e3 for x in rows]),
             "bytes_p50": med(tot_el), "bytes_lines_p50": med(tot_ln),
             "floor_ms_p50": med(np.array(tot_el) / Bps * 1e3),
             "floor_lines_ms_p50": med(np.array(tot_ln) / Bps * 1e3),
             "ratio_p50": med([x["query_s"] / (e / Bps) for x, e in zip(rows, tot_el)]),
             "ratio_lines_p50": med([x["query_s"] / (e / Bps) for x, e in zip(rows, tot_ln)]),
             "propagation_ratio_p50": ratio(PROPAGATION, "el"),
             "propagation_ratio_lines_p50": ratio(PROPAGATION, "ln"),
             "propagation_ratio_randomline_p50": ratio(PROPAGATION, "ln") * bw["random_line_GBps"] / bw["copy_GBps"],
             "by_stage": {s: {"ms_p50": med([x["stage_s"][s] * 1e3 for x in rows]),
                              "bytes_p50": med([x["el"][s] for x in rows]),
                              "bytes_lines_p50": med([x["ln"][s] for x in rows]),
                              "ratio_p50": ratio((s,), "el"), "ratio_lines_p50": ratio((s,), "ln")}
                          for s in rows[0]["el"]}}
        out["variants"][name] = v
        print(name, {k: v[k] for k in v if k not in ("options", "by_stage")}, flush=True)
        for s, x in v["by_stage"].items():
            print(f"   {s:12s} {x['ms_p50']:8.3f} ms  {x['bytes_p50'] / 1e3:9.1f} kB el  "
                  f"{x['bytes_lines_p50'] / 1e3:9.1f} kB lines  ratio {x['ratio_p50']:7.1f} / {x['ratio_lines_p50']:6.1f}")
    d = out["variants"]["default"]
    out["bandwidth_floor_ratio"] = d["ratio_p50"]
    out["bandwidth_floor_ratio_options"] = "default (QueryOptions().stitch)"
    out["bandwidth_floor_ratio_model"] = "elements (optimistic): whole StitchEngine.query time / bytes floor"
    C.write_result("bandwidth.json", out)


if __name__ == "__main__":
    main()
