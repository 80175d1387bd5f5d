"""Merge the partial result files into ``results/speed.json`` and draw ``results/scaling.png``.

    python benchmarks/speed_report.py

Reads results/{ppr,ppr_dense_prior,ppr_sweep_profile,scale,build,threads,threads_blas1,bandwidth,
profile,profile_2wiki,factored_2wiki,factored_1e6}.json
(whichever exist; each from one run of its script, see benchmarks/README.md) and,
when present, results/2wiki.json — written by whoever runs the real 2WikiMultiHopQA index,
shape: {"graph_stage_ms": {"p50": .., "p99": ..}, "candidate_ms": {"p50": ..},
"command": "..."} — so the 2wiki_* figures fill in by re-running this one script.
Missing inputs leave their keys null with a note under "notes".
"""
from __future__ import annotations

import numpy as np

import json
from pathlib import Path

RES = Path(__file__).resolve().parent / "results"


def load(name):
    p = RES / name
    return json.loads(p.read_text()) if p.exists() else None


def size_key(per, target):
    for k, v in (per or {}).items():
        if int(k) == target:
            return v
    return None


def main():
    ppr, scale, build, thr, bw, prof, wiki = (load(f"{n}.json") for n in
                                              ("ppr", "scale", "build", "threads", "bandwidth", "profile", "2wiki"))
    notes = {}
    # per-size files of a bench_scale run still in progress (or interrupted) override
    partial = sorted(RES.glob("scale_*.json"))
    if partial:
        scale = scale or {"sizes": {}, "params": {"dim": None, "max_arcs": 5e7},
                          "command": "python benchmarks/bench_scale.py (partial)"}
        for p in partial:
            d = json.loads(p.read_text())
            scale["sizes"][str(d["target_states"])] = d
        scale["params"].setdefault("dim", None)
        import sys
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _common import loglog_slope
        per = scale["sizes"]
        xs = [per[k]["corpus"]["states"] for k in per]
        sl = {"build_s": loglog_slope(xs, [per[k]["build"]["median_s"] for k in per]),
              "candidate_p50": loglog_slope(xs, [per[k]["candidate_ms"]["p50"] for k in per])}
        for v in per[next(iter(per))]["graph_stage_ms"]:
            sl[f"graph_{v}_p50"] = loglog_slope(xs, [per[k]["graph_stage_ms"][v]["p50"] or float("nan") for k in per])
        scale["loglog_slope_vs_states"] = sl
        scale["params"]["dim"] = scale["params"]["dim"] or per[next(iter(per))]["dim"]
        notes["scale_partial"] = f"merged per-size files {[p.name for p in partial]}"
    machine = next((x["machine"] for x in (scale, ppr, build, thr, bw, prof) if x), None)
    out = {"machine": machine,
           "ppr": {"push_vs_prpack_speedup": None, "top8_agreement": None},
           "graph_stage_ms": {k: None for k in ("2wiki_p50", "2wiki_p99", "1e6_p50", "1e6_p99", "1e7_p50", "1e7_p99")},
           "candidate_ms": {"2wiki_p50": None, "1e6_p50": None, "1e7_p50": None},
           "build": {"incidences_per_s": None, "bytes_per_incidence": None},
           "threads_2_over_1": None, "bandwidth_floor_ratio": None,
           "targets": {"push_vs_prpack_speedup": ">= 20 with the same top-8",
                       "graph_stage_2wiki_p50_ms": "<= 1",
                       "graph_stage_1e6_p50_ms": "<= 2", "graph_stage_1e7_p50_ms": "<= 10",
                       "threads_2_over_1": ">= 1.7", "bandwidth_floor_ratio": "<= 5"},
           "sources": {}}
    if ppr:
        from hyperrag_fast import config
        dflt = f"{config.TUNED_STITCH.damping:g}"
        summ = ppr["summary"]
        main_d = dflt if dflt in summ else next(iter(summ))
        s0 = summ[main_d]
        out["ppr"].update({"push_vs_prpack_speedup": s0["default_vs_prpack_speedup_median"],
                           "top8_agreement": min(x["top8_agreement_min"] for x in summ.values()),
                           "damping_of_headline": float(main_d),
                           "solver": s0["default_solver"],
                           "push_vs_prpack_construct_plus_solve_speedup":
                               s0["default_vs_prpack_build_plus_solve_speedup_median"],
                           "by_damping": summ,
                           "graph_options": ppr["params"].get("options_source"),
                           "by_size_ms": {k: {dd: {n: v["solve_ms"] for n, v in x["solvers"].items()}
                                              for dd, x in d["by_damping"].items()}
                                          for k, d in ppr["sizes"].items()},
                           "note": "headline (key name kept from the contract) = median over sizes of "
                                   "(PRPACK solve / solve of the solver the library's default options run: "
                                   "config.TUNED_STITCH.ppr, 'power' -> ppr_power_topk, 'push' -> "
                                   "the local push of kernels/ppr_local.py, 'auto' -> whichever "
                                   "config.ppr_solver picks per size) at the default damping; top8_agreement = min over sizes "
                                   "and dampings of that solver vs the exact solve; PRPACK with "
                                   "OMP_NUM_THREADS=1; construct = igraph Graph() + weights"})
        out["sources"]["ppr"] = ppr["command"]
        dense = load("ppr_dense_prior.json")
        if dense:
            sd = dense["summary"].get(main_d) or next(iter(dense["summary"].values()))
            out["ppr"]["dense_prior"] = {
                "default_vs_prpack_speedup_median": sd["default_vs_prpack_speedup_median"],
                "default_vs_prpack_speedup_by_size": sd["default_vs_prpack_speedup_by_size"],
                "top8_agreement_min": sd["top8_agreement_min"], "solver": sd["default_solver"],
                "note": "same graphs, prior > 0 on every chunk (as the query path's prior over C_q)"}
            out["sources"]["ppr_dense_prior"] = dense["command"]
        sweep = load("ppr_sweep_profile.json")
        if sweep:
            out["ppr"]["sweep_profile"] = {
                n: {k: r[k] for k in ("n_nodes", "arcs", "sweeps", "ours_ms", "prpack_ms", "speedup",
                                      "speedup_with_one_sweep_fewer", "dense_sweep_ns_per_arc",
                                      "scipy_spmv_ns_per_arc", "factored_speedup")}
                | {"gap_over_2b_by_sweep": [t["gap_over_2b"] for t in r["certificate_trace"]]}
                for n, r in sweep["sizes"].items()}
            out["ppr"]["sweep_profile_note"] = (
                "where the PPR time goes: sweeps needed by the top-8 certificate (it certifies once every "
                "gap among the 9 largest entries exceeds twice the error bound: gap_over_2b > 1) x the cost of "
                "a sweep (ns per arc, against one SciPy CSR mat-vec on the same graph)")
            out["sources"]["ppr_sweep_profile"] = sweep["command"]
    else:
        notes["ppr"] = "results/ppr.json missing: run benchmarks/bench_ppr.py"
    if scale:
        per = scale["sizes"]
        for tag, n in (("1e6", 1_000_000), ("1e7", 10_000_000)):
            d = size_key(per, n)
            if d is None:
                notes[tag] = f"no {tag} run in results/scale.json"
                continue
            gd = d["graph_stage_ms"]["default"]
            out["graph_stage_ms"][f"{tag}_p50"] = gd["p50"]
            out["graph_stage_ms"][f"{tag}_p99"] = gd["p99"]
            for v, x in d["graph_stage_ms"].items():
                if v == "default":
                    continue
                out["graph_stage_ms"][f"{tag}_{v}_p50"] = x["p50"]
                out["graph_stage_ms"][f"{tag}_{v}_p99"] = x["p99"]
                if x["skipped_over_max_arcs"] or x.get("budget_stopped"):
                    notes[f"graph_stage_{tag}_{v}"] = (
                        f"{v} options: {x['skipped_over_max_arcs']} queries skipped (chunk graph over "
                        f"{scale['params']['max_arcs']:.0e} arcs); {x['n']} measured"
                        + (" before the per-variant time budget ran out" if x.get("budget_stopped") else "")
                        + "; p50/p99 over the measured ones")
            out["graph_stage_ms"][f"{tag}_options"] = {v: x.get("options") for v, x in d["graph_stage_ms"].items()}
            out["candidate_ms"][f"{tag}_p50"] = d["candidate_ms"]["p50"]
            if d["ann_nodes"]["subset"] or d["ann_chunks"]["subset"]:
                notes[f"candidate_{tag}"] = (f"usearch over a random subset: nodes {d['ann_nodes']['indexed']} of "
                                             f"{d['ann_nodes']['total']}, chunks {d['ann_chunks']['indexed']} of "
                                             f"{d['ann_chunks']['total']} (full build infeasible on 2 shared cores)")
        out["scale_loglog_slope"] = scale["loglog_slope_vs_states"]
        out["scale_dim"] = scale["params"]["dim"]
        out["sources"]["scale"] = scale["command"]
    if build:
        out["build"].update({"incidences_per_s": build["incidences_per_s"],
                             "bytes_per_incidence": build["bytes_per_incidence"],
                             "incidences": build["incidences"], "median_s": build["median_s"]})
        out["sources"]["build"] = build["command"]
    if thr:
        out["threads_2_over_1"] = thr["threads_2_over_1"]
        out["threads_identical_to_serial"] = thr["identical_to_serial"]
        out["threads_variant"] = thr["variant"]
        out["threads_source"] = thr.get("source")
        out["threads_options"] = thr.get("options")
        out["threads_qps"] = {"1": thr.get("qps_1"), "2": thr.get("qps_2")}
        if "executor_map_2_over_1" in thr:
            out["threads_2_over_1_executor_map"] = thr["executor_map_2_over_1"]
        if "full_method" in thr:
            out["threads_2_over_1_full_method"] = thr["full_method"]["threads_2_over_1"]
            if "executor_map_2_over_1" in thr["full_method"]:
                out["threads_2_over_1_full_method_executor_map"] = thr["full_method"]["executor_map_2_over_1"]
            out["threads_identical_to_serial_full_method"] = thr["full_method"]["identical_to_serial"]
        out["sources"]["threads"] = thr["command"]
    thr1 = load("threads_blas1.json")  # the same run with BLAS / OpenMP pools at 1 thread
    if thr1:
        out["threads_2_over_1_blas1"] = thr1["threads_2_over_1"]
        if "full_method" in thr1:
            out["threads_2_over_1_full_method_blas1"] = thr1["full_method"]["threads_2_over_1"]
        out["sources"]["threads_blas1"] = thr1["command"]
    if bw:
        out["bandwidth_floor_ratio"] = bw["bandwidth_floor_ratio"]
        out["bandwidth_GBps"] = bw["bandwidth"]
        out["bandwidth_by_variant"] = {k: {x: v.get(x) for x in (
            "n", "ratio_p50", "ratio_lines_p50", "propagation_ratio_p50", "propagation_ratio_lines_p50",
            "propagation_ratio_randomline_p50", "floor_ms_p50", "floor_lines_ms_p50", "p50_ms", "by_stage",
            "options")} for k, v in bw["variants"].items() if v.get("n")}
        out["bandwidth_floor_ratio_model"] = bw.get("bandwidth_floor_ratio_model")
        out["bandwidth_floor_ratio_options"] = bw.get("bandwidth_floor_ratio_options")
        out["sources"]["bandwidth"] = bw["command"]
    if prof:
        out["profile_stage_ms_p50"] = {k: v["stage_ms_p50"] for k, v in prof["variants"].items()
                                       if "stage_ms_p50" in v}
        out["profile_engine_query_ms_p50"] = {k: v["engine_query_ms_p50"] for k, v in prof["variants"].items()
                                              if "engine_query_ms_p50" in v}
        out["sources"]["profile"] = prof["command"]
    prof_w = load("profile_2wiki.json")
    if prof_w:
        v = prof_w["variants"]["default"]
        out["profile_2wiki_stage_ms_p50"] = v["stage_ms_p50"]
        out["profile_2wiki_stage_share_of_mean"] = v["stage_share_of_mean"]
        out["sources"]["profile_2wiki"] = prof_w["command"]
    fac = {k: load(f"factored_{k}.json") for k in ("2wiki", "1e6")}
    for k, f in fac.items():
        if f:
            out.setdefault("factored_ppr", {})[k] = {
                cap: {form: {x: r[form].get(x) for x in ("n", "p50_ms", "p99_ms", "graph_size_p50", "graph_size_max")}
                      for form in ("power", "factored")}
                | {x: r[x] for x in ("skipped_arc_form_over_max_arcs", "compared", "same_topk_up_to_ties")}
                for cap, r in f["by_cap"].items()}
            out["sources"][f"factored_{k}"] = f["command"]
    if "factored_ppr" in out:
        out["factored_ppr_note"] = ("item 7: engine latency with ppr='power' (deduplicated arcs) vs ppr='factored' "
                                    "(chunk-group incidences, same iteration) at the preset's group cap and with "
                                    "no cap; graph_size = arcs resp. incidences")
    if wiki:
        out["graph_stage_ms"]["2wiki_p50"] = wiki["graph_stage_ms"]["p50"]
        out["graph_stage_ms"]["2wiki_p99"] = wiki["graph_stage_ms"]["p99"]
        out["candidate_ms"]["2wiki_p50"] = wiki["candidate_ms"]["p50"]
        out["candidate_ms"]["2wiki_p99"] = wiki["candidate_ms"].get("p99")
        for name, m in wiki.get("methods", {}).items():
            if name != wiki.get("default_method"):
                out["graph_stage_ms"][f"2wiki_{name}_p50"] = m["graph_stage_ms"]["p50"]
                out["graph_stage_ms"][f"2wiki_{name}_p99"] = m["graph_stage_ms"]["p99"]
                out["candidate_ms"][f"2wiki_{name}_p50"] = m["candidate_ms"]["p50"]
        if "methods" in wiki:
            out["embed_ms_2wiki"] = {k: wiki["embed_ms"][k] for k in ("p50", "p99")}
            out["candidate_ms"]["2wiki_parts_p50"] = wiki["methods"][wiki["default_method"]].get("candidate_parts_ms_p50")
            out["graph_stage_ms"]["2wiki_options"] = {n: m["options"] for n, m in wiki["methods"].items()}
            out["graph_stage_ms"]["2wiki_stats_p50"] = {n: m["stats_p50"] for n, m in wiki["methods"].items()}
        out["sources"]["2wiki"] = wiki.get("command")
    else:
        out["graph_stage_ms"]["pending"] = ("2wiki_* need the real index from the offline pipeline; write "
                                            "results/2wiki.json and re-run benchmarks/speed_report.py")
        out["candidate_ms"]["pending"] = out["graph_stage_ms"]["pending"]
    out["options_used"] = {
        "default": "the library default: QueryOptions() = config.TUNED_STITCH + TUNED_HYBRID, read at run time "
                   "by every benchmark (repr in each figure's *_options entry); on synthetic corpora there is no "
                   "question text, so the BM25 term and question-entity seeds are off",
        "paper": "StitchOptions.paper() (method stitch_paper): power PPR d 0.85, no group caps, uniform weights",
        "graph_stage_ms.{2wiki,1e6,1e7}_p50/p99, candidate_ms.*": "default options",
        "graph_stage_ms.*_paper_*": "paper options",
        "threads_2_over_1": "default options; engine calls of the default stitch method on the 2Wiki index "
                            "replayed by 1 thread vs 2 worker threads taking the next query from a shared "
                            "counter (threads_2_over_1_full_method: whole method; *_executor_map: the same "
                            "queries through ThreadPoolExecutor(2).map, whose hand-off runs under the GIL)",
        "bandwidth_floor_ratio": "default options, synthetic 1e6 states",
        "ppr.push_vs_prpack_speedup": "the default options' PPR solver (ppr.solver) at the default damping on "
                                      "chunk graphs with the default graph_max_group / graph_weight",
        "consistency": "every figure comes from one run of the script named in sources, all with the "
                       "library's options at the time of that run (each result file records them)"}
    g, c = out["graph_stage_ms"], out["candidate_ms"]

    def chk(v, ok):
        return None if v is None else bool(ok(v))
    out["targets_met"] = {
        "push_vs_prpack_speedup>=20_same_top8": chk(out["ppr"]["push_vs_prpack_speedup"],
                                                    lambda v: v >= 20 and out["ppr"]["top8_agreement"] == 1.0),
        "graph_stage_2wiki_p50<=1ms": chk(g["2wiki_p50"], lambda v: v <= 1),
        "graph_stage_1e6_p50<=2ms": chk(g["1e6_p50"], lambda v: v <= 2),
        "graph_stage_1e7_p50<=10ms": chk(g["1e7_p50"], lambda v: v <= 10),
        "threads_2_over_1>=1.7": chk(out["threads_2_over_1"], lambda v: v >= 1.7),
        "bandwidth_floor_ratio<=5": chk(out["bandwidth_floor_ratio"], lambda v: v <= 5)}
    if ppr:
        bd = out["ppr"]["by_damping"]
        other = {d: round(v["default_vs_prpack_speedup_median"], 1) for d, v in bd.items() if d != main_d}
        mn = bd[main_d]["default_vs_prpack_speedup_by_size"]
        worst = min(mn, key=mn.get)
        notes["ppr_headline_scope"] = (
            f"the headline is the median over sizes at the default damping {main_d} with a prior on 300 chunks; "
            f"per size it ranges {min(mn.values()):.1f}x ({worst} nodes) to {max(mn.values()):.1f}x"
            + (f"; with a prior on every chunk (ppr.dense_prior) the median is "
               f"{out['ppr']['dense_prior']['default_vs_prpack_speedup_median']:.1f}x" if "dense_prior" in out["ppr"] else "")
            + (f"; at the other damping(s) {other}" if other else "")
            + "; where the time goes: ppr.sweep_profile and benchmarks/README.md")
    if wiki and "methods" in wiki:
        notes["candidate_2wiki"] = ("candidate_ms.2wiki_* of the default stitch method include the BM25 top-k and "
                                    "the question -> seed-node lookup (config.TUNED_HYBRID.seeds) besides the two "
                                    "ANN searches; parts in candidate_ms.2wiki_parts_p50 (key ner_seeds = that "
                                    "lookup, whatever the seed kind); question embedding apart in embed_ms_2wiki")
    if scale and size_key(scale["sizes"], 10_000_000):
        notes["graph_stage_1e7_paper_reading"] = ("1e7 paper figures are over the few queries whose uncapped chunk "
                                                  "graph stays under max_arcs (tiny C_q): not representative")
    out["notes"] = notes
    (RES / "speed.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RES / 'speed.json'}")
    if scale:
        plot(scale)


def plot(scale):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per = scale["sizes"]
    ks = sorted(per, key=int)
    xs = [per[k]["corpus"]["states"] for k in ks]
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.8))
    kv, kc = per[ks[0]].get("k_nodes"), per[ks[0]].get("k_chunks")
    series = [(f"candidate search (usearch, K_V {kv} + K_C {kc})", [per[k]["candidate_ms"]["p50"] for k in ks], "o-")]
    labels = {"default": "graph stage, library default (tuned preset)",
              "paper": "graph stage, paper options (power PPR, uncapped)"}
    for v in per[ks[0]]["graph_stage_ms"]:
        # a point where most queries were skipped (chunk graph over max_arcs) is not representative
        ys = [None if x["skipped_over_max_arcs"] > x["n"] else x["p50"]
              for x in (per[k]["graph_stage_ms"][v] for k in ks)]
        series.append((labels.get(v, f"graph stage, {v}") + " (omitted where most queries skipped)"
                       if v == "paper" else labels.get(v, f"graph stage, {v}"), ys, "s-"))
    for lab, ys, st in series:
        pts = [(x, y) for x, y in zip(xs, ys) if y]
        if pts:
            ax[0].loglog(*zip(*pts), st, label=lab)
    ax[0].axhline(2, ls=":", c="grey")
    ax[0].axhline(10, ls="--", c="grey")
    ax[0].set_xlabel("entity states")
    ax[0].set_ylabel("p50 latency per query (ms)")
    ax[0].set_title("query latency by stage (single thread)")
    ax[0].legend(fontsize=8)
    ax[1].loglog(xs, [per[k]["build"]["median_s"] for k in ks], "o-", label="symbolic build (hypergraph_from_flat)")
    ax[1].loglog(xs, [per[k]["ann_nodes"]["build_s"] + per[k]["ann_chunks"]["build_s"] for k in ks], "s-",
                 label="usearch build (nodes+chunks; subset >1e6)")
    ax[1].set_xlabel("entity states")
    ax[1].set_ylabel("seconds")
    ax[1].set_title("index build")
    ax[1].legend(fontsize=8)
    fig.suptitle(f"hyperrag_fast scaling, synthetic corpus, dim {scale['params']['dim']}; "
                 f"shared 2-core machine", fontsize=10)
    fig.tight_layout()
    fig.savefig(RES / "scaling.png", dpi=110)
    print(f"wrote {RES / 'scaling.png'}")


if __name__ == "__main__":
    main()
