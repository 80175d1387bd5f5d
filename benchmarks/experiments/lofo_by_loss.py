"""Leave-one-family-out split by the ranker's loss (session 21; docs/architecture.md §6): a
``quality_grid.py`` result re-run with its ranker axis restricted to one loss at a time
(pointwise / listwise / pairwise / the two within-question losses / all), the same procedure
(``quality_grid.choose``: the rule on the other two families, own best on the family alone),
scored on the held-out family from the C_q features (the ranking the query path computes;
``quality_grid.py`` checks the two agree).

    python benchmarks/experiments/lofo_by_loss.py \\
        --grid benchmarks/experiments/results/quality_grid/pairrank_s21_minilm.json \\
        --features-cache cache/pairrank10_feat_minilm \\
        --out benchmarks/experiments/results/quality_grid/lofo_by_loss_s21_minilm
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import quality_grid as qg  # noqa: E402
from quality_search import FAMILIES, Bench  # noqa: E402
from train_ranker import parse_fit  # noqa: E402

from hyperrag_fast.config import TUNED  # noqa: E402
from hyperrag_fast.embed.registry import make_embedder  # noqa: E402
from hyperrag_fast.eval.harness import _git  # noqa: E402


def loss_of(ranker: str) -> str:
    _, _, ps = ranker.partition("|")
    return parse_fit(ps)[1].get("loss", "pointwise") if ps else "pointwise"


SUBSETS = {"pointwise": ("pointwise",), "listwise": ("listwise",), "pairwise": ("pairwise",),
           "within (listwise + pairwise)": ("listwise", "pairwise"),
           "all": ("pointwise", "listwise", "pairwise")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--grid", required=True, help="a quality_grid.py result (.json)")
    p.add_argument("--features-cache", required=True)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--per-setting", action="store_true", help="also every row's held-out R@5")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    g = json.loads(Path(a.grid).read_text())
    cmd = g["command"].split()
    arg = lambda n: [cmd[i + 1] for i, x in enumerate(cmd) if x == n]  # noqa: E731
    index = dict(x.split("=", 1) for x in arg("--index"))
    emb = make_embedder(arg("--embedder")[0])
    benches = {f: Bench(ds, sp, index[ds], emb, arg("--cache-dir")[0], a.data_dir)
               for f, (ds, sp) in FAMILIES.items() if ds in index}
    fams = tuple(benches)
    dense = {f: b.score(replace(TUNED, method="dense")) for f, b in benches.items()}
    fixed = {n: tuple(v) if isinstance(v, list) else v for n, v in g["fixed_hybrid"].items()}
    axes = tuple((n, tuple(v)) for n, v in g["axes"].items() if n != "ranker")
    base = replace(qg.BASE, hybrid=replace(qg.BASE.hybrid, **fixed))
    settings = [({**s, "ranker": r}, o) for s, o in qg.grid(axes, base) for r in g["axes"]["ranker"]]
    assert [s for s, _ in settings] == [t["setting"] for t in g["table"]], "grid rows differ"
    feats = qg.Features(benches, a.features_cache)
    memo, fit0 = {}, qg.fit

    def fit(parts, **kw):  # the same fit again for another subset: reuse it
        key = (tuple(id(x) for x in parts), repr(sorted(kw.items())))
        if key not in memo:
            memo[key] = fit0(parts, **kw)
        return memo[key]
    qg.fit = fit
    out = {"command": "python benchmarks/experiments/lofo_by_loss.py " + " ".join(argv or sys.argv[1:]),
           "git_commit": _git("rev-parse", "HEAD"), "grid": Path(a.grid).name,
           "grid_command": g["command"], "families": list(fams), "subsets": {}}
    for name, losses in SUBSETS.items():
        sub = [x for x in settings if loss_of(x[0]["ranker"]) in losses]
        if not sub:
            continue
        row = {"rankers": sorted({s["ranker"] for s, _ in sub}), "families": {}}
        o_all, i_all, t_all = qg.choose(fams, sub, feats, benches, dense, g.get("min_gain", 0.005))
        row["chosen_on_all_three"] = {"setting": sub[i_all][0], "worst_lift": t_all[i_all]["worst_lift"],
                                      "mean_lift": t_all[i_all]["mean_lift"],
                                      **{f: t_all[i_all]["scores"][f]["recall"] for f in fams}}
        for held in fams:
            rest = tuple(f for f in fams if f != held)
            o_r, i_r, _ = qg.choose(rest, sub, feats, benches, dense, 0.005)
            o_o, i_o, _ = qg.choose((held,), sub, feats, benches, dense, 0.005)
            sc = lambda o: qg.offline(feats.get(replace(o, hybrid=replace(  # noqa: E731
                o.hybrid, rank_weights=())), held), benches[held].golds, o.hybrid.rank_weights)["recall"]
            r_r, r_o = sc(o_r), sc(o_o)
            row["families"][held] = {"chosen_on_others": r_r, "setting_on_others": sub[i_r][0],
                                     "own_best": r_o, "own_best_setting": sub[i_o][0],
                                     "gap_recall@5": round(r_o[5] - r_r[5], 4)}
            print(name, held, r_r[5], r_o[5], file=sys.stderr, flush=True)
        out["subsets"][name] = row
    if a.per_setting:  # every row: R@5 on each family, ranker trained on the other two / on all three
        out["per_setting"] = []
        for s, o in settings:
            cs, ps, fk = qg.ranker_for(s, 0.01, None)
            held = {}
            for f in fams:
                parts = [feats.get(o, x) for x in fams if x != f]
                w = fit(parts, c=cs, prior=qg.with_names(ps, o), **fk)
                held[f] = qg.offline(feats.get(o, f), benches[f].golds, w)["recall"][5]
            out["per_setting"].append({"setting": s, "held_out_recall@5": held})
    Path(a.out + ".json").write_text(json.dumps(out, indent=1) + "\n")
    L = [f"# Leave-one-family-out by ranker loss ({g['embedder']})", "", f"Command: `{out['command']}`  ",
         f"Grid: `{g['command']}`", "", "R@5 on the held-out family: chosen on the other two / own best (gap).",
         "", "| rankers | " + " | ".join(fams) + " | picked on all three (worst, mean lift) |",
         "|---" * (len(fams) + 2) + "|"]
    for name, row in out["subsets"].items():
        c3 = row["chosen_on_all_three"]
        L.append(f"| {name} | " + " | ".join(
            f"{row['families'][f]['chosen_on_others'][5]:.3f} / {row['families'][f]['own_best'][5]:.3f} "
            f"({row['families'][f]['gap_recall@5']:+.3f})" for f in fams)
            + f" | `{c3['setting'].get('rank_split')}`, `{c3['setting']['ranker']}` "
              f"({c3['worst_lift']:+.4f}, {c3['mean_lift']:+.4f}) |")
    Path(a.out + ".md").write_text("\n".join(L) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
