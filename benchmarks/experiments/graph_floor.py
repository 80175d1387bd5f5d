"""A graph stage that never costs recall (issue 21 item 2, session 14): the calibrated
ranker with its graph columns mixed towards the prior per query (``HybridOptions.graph_mix``),
a named page's best paragraph as a column (``rank_links`` "title_best", item 3) and a
lower-capacity ranker (stronger L2), each replayed from one dump of every question's C_q
features, with PPR (``stitch``) and without (``no_ppr``: the same options, ``ppr="none"``).

    python benchmarks/experiments/graph_floor.py collect --embedder minilm \
        --index 2wikimultihopqa=/work/ix/2wiki_minilm --index hotpotqa_train=... \
        --index musique_dev=... --cache-dir cache/minilm --dump graph_floor_minilm.pkl
    python benchmarks/experiments/graph_floor.py analyse --dump minilm=graph_floor_minilm.pkl \
        --dump bge-small=graph_floor_bge.pkl \
        --out benchmarks/experiments/results/quality_grid/graph_floor

The upstream of the ranker is each embedder's preset (``config.PRESETS``), every
``LINK_FEATURES`` column collected. A row = (columns, graph_mix, C); for each embedder the
ranker is trained on the three dev families (in-sample) and on two (leave-one-family-out,
scored on the third); ``no_ppr`` is scored with the same weights on the ``ppr="none"``
features (what ``python -m hyperrag_fast.eval --methods no_ppr`` runs under that preset).
The rule (``quality_grid.py``'s): per embedder, the best worst-family lift over dense
(objective mean R@2/5/8, ranker trained on the three families), ties within ``--min-gain``
broken by the worst lift with the ranker trained on the other two; the rows where
``stitch`` >= ``no_ppr`` at R@5 on every family are marked.
"""
from __future__ import annotations

import argparse
import json
import pickle
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lofo_bias import dense_pq, per_question  # noqa: E402
from quality_search import FAMILIES, KS, Bench  # noqa: E402
from train_ranker import collect, fit  # noqa: E402

from hyperrag_fast.config import GRAPH_MIXES, LINK_FEATURES, preset_for  # noqa: E402
from hyperrag_fast.embed.registry import make_embedder  # noqa: E402
from hyperrag_fast.eval.harness import _git, machine_info  # noqa: E402
from hyperrag_fast.methods.stitch import graph_mixed  # noqa: E402
from hyperrag_fast.methods.stitch import FEATURES  # noqa: E402

ALL = FEATURES + LINK_FEATURES
SHIPPED = ("bridge_title", "bridge_title_words")
#: the column sets of the rows: the shipped pair, with the named page's best paragraph,
#: and the pair without the four graph/prior rank columns' duplicates (fewer weights)
SETS = {"shipped": FEATURES + SHIPPED, "+title_best": FEATURES + SHIPPED + ("title_best",)}
CS = (1.0, 0.1, 0.01)


def do_collect(a) -> int:
    index = dict(x.split("=", 1) for x in a.index)
    emb = make_embedder(a.embedder)
    preset = preset_for(emb.name)
    up = replace(preset, hybrid=replace(preset.hybrid, rank_weights=(), rank_links=LINK_FEATURES,
                                        graph_mix="off"))
    nop = replace(up, stitch=up.stitch.replace(ppr="none"))
    benches = {f: Bench(ds, sp, index[ds], emb, a.cache_dir, a.data_dir)
               for f, (ds, sp) in FAMILIES.items() if ds in index}
    out = {"command": "python benchmarks/experiments/graph_floor.py " + " ".join(sys.argv[1:]),
           "machine": machine_info(), "git_commit": _git("rev-parse", "HEAD"),
           "git_dirty": bool(_git("status", "--porcelain")), "embedder": emb.name,
           "columns": list(ALL), "families": {}}
    for f, b in benches.items():
        out["families"][f] = {"golds": b.golds, "dense": dense_pq(b), "stitch": collect(b, up),
                              "no_ppr": collect(b, nop), "shipped_weights": list(preset.hybrid.rank_weights)}
        print("collected", f, file=sys.stderr, flush=True)
    Path(a.dump).write_bytes(pickle.dumps(out))
    return 0


def view(part, names, mix):
    X, y, q = part
    X = X[:, [ALL.index(n) for n in names]]
    if mix != "off":  # per question, as the query path does (graph_mixed on each C_q)
        X = X.copy()
        qi = q.astype(np.int64)
        starts = np.flatnonzero(np.r_[True, qi[1:] != qi[:-1]])
        for s, e in zip(starts, np.r_[starts[1:], qi.shape[0]]):
            X[s:e] = graph_mixed(X[s:e], mix)
    return X, y, q


def scores(pq: np.ndarray) -> dict:
    r = {k: round(float(pq[:, i].mean()), 4) for i, k in enumerate(KS)}
    return {"recall": r, "objective": round(sum(r.values()) / len(KS), 4)}


def row(d, names, mix, c) -> dict:
    fams = list(d["families"])
    st = {f: view(d["families"][f]["stitch"], names, mix) for f in fams}
    npp = {f: view(d["families"][f]["no_ppr"], names, mix) for f in fams}
    golds = {f: d["families"][f]["golds"] for f in fams}
    dense = {f: d["families"][f]["dense"] for f in fams}
    w_all = fit([st[f] for f in fams], c=c)
    res = {"columns": list(names[len(FEATURES):]), "graph_mix": mix, "c": c, "weights": list(w_all),
           "families": {}}
    for f in fams:
        w_lofo = fit([st[g] for g in fams if g != f], c=c)
        ins = per_question(st[f], golds[f], w_all)
        lofo = per_question(st[f], golds[f], w_lofo)
        nop = per_question(npp[f], golds[f], w_all)
        k5 = KS.index(5)
        diff = ins[:, k5] - nop[:, k5]
        res["families"][f] = {
            "dense": scores(dense[f]), "in_sample": scores(ins), "lofo": scores(lofo),
            "no_ppr_same_weights": scores(nop), "no_ppr_lofo": scores(per_question(npp[f], golds[f], w_lofo)),
            "stitch_minus_no_ppr_r5": round(float(diff.mean()), 4),
            "questions_better_worse_r5": [int((diff > 0).sum()), int((diff < 0).sum())]}
    fam = res["families"]
    lift = lambda k: round(min(fam[f][k]["objective"] - fam[f]["dense"]["objective"] for f in fams), 4)  # noqa: E731
    res["worst_lift_in_sample"], res["worst_lift_lofo"] = lift("in_sample"), lift("lofo")
    res["stitch_ge_no_ppr_everywhere"] = all(
        fam[f]["in_sample"]["recall"][5] >= fam[f]["no_ppr_same_weights"]["recall"][5] for f in fams)
    return res


def do_analyse(a) -> int:
    dumps = {k: pickle.loads(Path(p).read_bytes()) for k, p in (x.split("=", 1) for x in a.dump)}
    out = {"command": "python benchmarks/experiments/graph_floor.py " + " ".join(sys.argv[1:]),
           "machine": machine_info(), "git_commit": _git("rev-parse", "HEAD"),
           "git_dirty": bool(_git("status", "--porcelain")), "min_gain": a.min_gain,
           "collected": {k: {x: d[x] for x in ("command", "git_commit", "git_dirty", "embedder")}
                         for k, d in dumps.items()}, "embedders": {}}
    for emb, d in dumps.items():
        rows = [row(d, names, mix, c) for label, names in SETS.items() for mix in GRAPH_MIXES for c in CS]
        top = max(r["worst_lift_in_sample"] for r in rows)
        near = [r for r in rows if r["worst_lift_in_sample"] >= top - a.min_gain]
        best = max(near, key=lambda r: (r["worst_lift_lofo"], r["worst_lift_in_sample"]))
        best["chosen"] = True
        out["embedders"][emb] = {"rows": rows}
        for r in rows:
            print(emb, f"{r['worst_lift_in_sample']:+.4f} {r['worst_lift_lofo']:+.4f}",
                  "*" if r.get("chosen") else " ", "ge" if r["stitch_ge_no_ppr_everywhere"] else "  ",
                  " ".join(f"{f[:5]}:{x['in_sample']['recall'][5]:.3f}/{x['lofo']['recall'][5]:.3f}"
                           f"/np{x['no_ppr_same_weights']['recall'][5]:.3f}" for f, x in r["families"].items()),
                  r["graph_mix"], r["c"], ",".join(r["columns"]), file=sys.stderr, flush=True)
    Path(a.out + ".json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--embedder", default="minilm")
    c.add_argument("--index", action="append", required=True, help="DATASET=INDEX_DIR")
    c.add_argument("--cache-dir", default="cache")
    c.add_argument("--data-dir", default=None)
    c.add_argument("--dump", required=True)
    n = sub.add_parser("analyse")
    n.add_argument("--dump", action="append", required=True, help="EMBEDDER=PKL")
    n.add_argument("--min-gain", type=float, default=0.005)
    n.add_argument("--out", required=True)
    a = p.parse_args(argv)
    return do_collect(a) if a.cmd == "collect" else do_analyse(a)


if __name__ == "__main__":
    sys.exit(main())
