"""CODA option search on GraphRAG-Bench (dev, data README: either subset) by offline
evidence coverage (docs/architecture.md §9), on both subsets at once, chosen by the worst
cell: per subset and for ``all`` and ``Complex Reasoning``, CODA's margin over the best
of dense, BM25 and ``stitch`` on the same questions, minus the issue's target for that
cell (+3 points overall, +5 on Complex Reasoning). Beside the score, each grid point's
ablation spread: how far each pathway switched off (and all four: Table 2 Base on the
consolidated graph) moves coverage, so a graph weight at which the mechanisms matter is
chosen by measurement, not by assumption.

    OPENBLAS_NUM_THREADS=1 python benchmarks/tune_coda_gbench.py \\
        --index-root indexes/coda_gb_minilm_s10 --cache-dir cache/coda_gb_minilm

Needs the per-source indexes with their CODA structure (``python -m hyperrag_fast.eval
--dataset graphrag_bench_* --methods coda --index-dir ...`` makes both; an index saved
before issue 24 needs ``hyperrag upgrade``). Writes
``benchmarks/results/tuning_coda_gbench_<embedder>.json``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from dataclasses import asdict, fields, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hyperrag_fast.chunking import chunk_passage  # noqa: E402
from hyperrag_fast.coda.retrieve import PAPER, CodaOptions  # noqa: E402
from hyperrag_fast.embed.cache import CachedEmbedder  # noqa: E402
from hyperrag_fast.embed.registry import make_embedder  # noqa: E402
from hyperrag_fast.eval.coverage import evidence_coverage  # noqa: E402
from hyperrag_fast.eval.gbench import _safe, load_graphrag_bench, summarize_coverage  # noqa: E402
from hyperrag_fast.eval.harness import _git, machine_info, method_options  # noqa: E402
from hyperrag_fast.index import HyperIndex  # noqa: E402
from hyperrag_fast.methods import METHODS  # noqa: E402
from hyperrag_fast.methods.coda import BASE_OFF  # noqa: E402
from hyperrag_fast.prebuilt import load_prebuilt  # noqa: E402
from hyperrag_fast.retriever import Retriever  # noqa: E402

BASELINES = ("dense", "bm25", "stitch")
CR = "Complex Reasoning"
TARGET = {"all": 0.03, CR: 0.05}
SWITCHES = ("semantic", "contextual", "functional", "elimination")
#: a grid point within this of the best score counts as tied; among tied points the one
#: whose pathways move coverage most (largest ablation spread) is chosen
TIE = 0.005


def grid() -> dict[str, CodaOptions]:
    """The published mechanisms, the current defaults (``cur``), single steps away from
    them, and per graph weight (with items = all, so entity pathways reach the chunk
    scores) the four pathway ablations and Base."""
    cur = CodaOptions()
    g = {"paper": PAPER, "cur": cur}
    steps = [("lexical_weight", v) for v in (0.2, 0.5, 0.7)] + \
            [("fact_weight", v) for v in (0.1, 0.3, 0.5)] + \
            [("graph_weight", v) for v in (0.0, 0.03, 0.1)] + \
            [("dense_pool", 10), ("dense_pool", 40), ("k_entry", 5), ("k_entry", 20),
             ("elim_min_z", 0.5), ("elim_min_z", 2.0), ("align_items", "all"),
             ("dedup_sim", 0.0), ("dedup_sim", 0.95)] + \
            [("diversity", v) for v in (0.1, 0.2, 0.3, 0.5)]
    for k, v in steps:
        g[f"cur:{k}={v}"] = replace(cur, **{k: v})
    for lw, fw in ((0.5, 0.3), (0.5, 0.5), (0.7, 0.5)):
        g[f"cur:lw{lw}:fw{fw}"] = replace(cur, lexical_weight=lw, fact_weight=fw)
        g[f"cur:lw{lw}:fw{fw}:div0.2"] = replace(cur, lexical_weight=lw, fact_weight=fw,
                                                 diversity=0.2)
    fam = {f"gw{gw}:{items}": replace(cur, graph_weight=gw, align_items=items)
           for gw in (0.01, 0.03, 0.1) for items in ("relations", "all")}
    # question-term coverage (session 14, issue 23 item 2): cover_weight alone and with
    # a larger candidate pool (coverage can only pick what the pool holds)
    fam.update({f"cw{cw}": replace(cur, cover_weight=cw) for cw in (0.1, 0.25, 0.5, 1.0)})
    fam.update({f"cw{cw}:pool40": replace(cur, cover_weight=cw, dense_pool=40) for cw in (0.25, 0.5)})
    for name, b in fam.items():
        g[name] = b
        for sw in SWITCHES:
            g[f"{name}:no_{sw}"] = replace(b, **{sw: False})
        g[f"{name}:base_off"] = replace(b, **BASE_OFF)
    return g


def score(rows: dict, subs: list[str], name: str) -> tuple[float, dict]:
    """Worst cell of (margin over the best baseline - target) and the margins."""
    marg = {}
    for s in subs:
        for t in TARGET:
            best = max(rows[b][s]["coverage"][t] for b in BASELINES)
            marg[f"{s}:{t}"] = rows[name][s]["coverage"][t] - best
    return min(m - TARGET[k.split(":", 1)[1]] for k, m in marg.items()), marg


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--index-root", required=True)
    p.add_argument("--subsets", default="medical,novel")
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--every", type=int, default=1, help="every n-th question (speed)")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--only", default=None, help="comma-separated grid names (default all)")
    p.add_argument("--out", default=None, help="result file (default: benchmarks/results/"
                                                "tuning_coda_gbench_<embedder>.json)")
    a = p.parse_args()
    out = {"command": "python benchmarks/tune_coda_gbench.py " + " ".join(sys.argv[1:]),
           "git_commit": _git("rev-parse", "HEAD"),
           "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
           "machine": machine_info(), "top_k": a.top_k, "every": a.every,
           "baselines": list(BASELINES), "targets": TARGET, "tie": TIE,
           "rows": defaultdict(dict), "n_questions": {}}
    emb0 = make_embedder(a.embedder)
    emb = CachedEmbedder(emb0, Path(a.cache_dir) / "embeddings.sqlite") if a.cache_dir else emb0
    g = grid()
    if a.only:
        g = {k: g[k] for k in a.only.split(",")}
    subs = a.subsets.split(",")
    for sub in subs:
        docs, qs = load_graphrag_bench(sub)
        have = {q.source for q in qs if (Path(a.index_root) / sub / _safe(q.source)).is_dir()}
        out.setdefault("sources_missing", {})[sub] = sorted({q.source for q in qs} - have)
        qs = [q for q in qs if q.source in have][::a.every]
        rows: dict[str, list] = defaultdict(lambda: [None] * len(qs))
        ms: dict[str, list] = defaultdict(list)
        ctx_of: dict[str, list] = {}
        for src in sorted({q.source for q in qs}):
            d = Path(a.index_root) / sub / _safe(src)
            ix = HyperIndex.load(d, embedder=emb)
            pre = load_prebuilt(d, ["coda"])
            if pre.coda is None:
                raise SystemExit(f"{d}: no CODA structure (hyperrag upgrade / build-methods)")
            st = Retriever(ix, emb, prebuilt=pre).state
            cr = st.coda.retriever
            raw = st.coda.raw_retriever()
            passages = [chunk_passage(c) for c in ix.chunks]
            idx = [i for i, q in enumerate(qs) if q.source == src]
            qv = np.asarray(emb.embed([qs[i].question for i in idx]), np.float32)
            ctx_of[src] = passages
            so = method_options("stitch", None, a.top_k)
            for i, v in zip(idx, qv):
                rows["dense"][i] = (src, np.argsort(-(ix.chunk_vec @ v))[:a.top_k].tolist())
                rows["bm25"][i] = (src, st.bm25.top_k(qs[i].question, a.top_k)[0].tolist())
                rows["stitch"][i] = (src, [int(c) for c in np.asarray(METHODS["stitch"](
                    st, v, qs[i].question, so, False).chunk_ids)[:a.top_k]])
            for name, o in g.items():
                ret = raw if name.endswith(":base_off") else cr
                t0 = time.perf_counter()
                for i, v in zip(idx, qv):
                    rows[name][i] = (src, ret.retrieve(v, qs[i].question, a.top_k, o, False,
                                                       st.bm25).chunk_ids.tolist())
                ms[name].append((time.perf_counter() - t0) * 1e3 / len(idx))
        out["n_questions"][sub] = len(qs)
        for name, rr in rows.items():
            per_q = [float(np.mean([c.covered for c in evidence_coverage(
                q.evidence, [ctx_of[s][j] for j in r])])) for q, (s, r) in zip(qs, rr)]
            cov = summarize_coverage(qs, per_q)
            out["rows"][name][sub] = {"coverage": cov}
            if name in g:
                out["rows"][name][sub]["mean_ms"] = float(np.mean(ms[name]))
            print(f"{sub:>8} {name:>36} all {cov['all']:.3f} CR {cov.get(CR, 0):.3f}", flush=True)
    default = asdict(CodaOptions())
    for name, o in g.items():
        out["rows"][name]["options_changed"] = {f.name: getattr(o, f.name) for f in fields(o)
                                                if getattr(o, f.name) != default[f.name]}
    rows = out["rows"]
    for name in g:
        rows[name]["score"], rows[name]["margins"] = score(rows, subs, name)
        fam = name.rsplit(":", 1)[0] if ":no_" in name or name.endswith(":base_off") else None
        if fam and fam in rows:
            rows[name]["delta_vs_full"] = {s: {t: rows[name][s]["coverage"][t]
                                               - rows[fam][s]["coverage"][t] for t in TARGET}
                                           for s in subs}
    for name in g:
        abl = [rows[f"{name}:{x}"]["delta_vs_full"] for x in
               [f"no_{sw}" for sw in SWITCHES] + ["base_off"] if f"{name}:{x}" in rows]
        if abl:
            rows[name]["ablation_spread"] = max(abs(d[s]["all"]) for d in abl for s in subs)
    full = [n for n in g if ":no_" not in n and not n.endswith(":base_off")]
    best = max(rows[n]["score"] for n in full)
    tied = [n for n in full if rows[n]["score"] >= best - TIE]
    chosen = max(tied, key=lambda n: (rows[n].get("ablation_spread", 0.0), rows[n]["score"]))
    out.update(best_score=best, tied=tied, chosen=chosen,
               chosen_rule=f"largest worst-cell score (margin over the best of {BASELINES} "
                           f"minus target {TARGET}); among points within {TIE} of it, the "
                           "largest ablation spread")
    out["rows"] = dict(rows)
    path = Path(a.out) if a.out else ROOT / "benchmarks" / "results" / f"tuning_coda_gbench_{a.embedder}.json"
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print("best score", round(best, 4), "tied", tied, "chosen:", chosen)


if __name__ == "__main__":
    main()
