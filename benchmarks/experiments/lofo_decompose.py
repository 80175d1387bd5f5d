"""Where a family's leave-one-family-out points go (issue 21, item 1; docs/architecture.md
§6): the grid point chosen, or the ranker's weights? And do transferable changes to the
ranker or the selection rule close the gap?

    python benchmarks/experiments/lofo_decompose.py --embedder bge-small \
        --index 2wikimultihopqa=indexes/2wiki_bge-small --index hotpotqa_train=indexes/hotpot_bge-small \
        --index musique_dev=indexes/musique_bge-small --cache-dir cache/bge-small \
        --features-cache <features dir> --axis delta=[0.75,0.85] ... --c 0.01 --out <stem>

Offline, from each question's C_q features (``quality_grid.Features``; the ranking the
query path computes). For each held-out family f, with (s_r, w_r) = the grid point and
ranker chosen on the other two families and (s_f, w_f) = those chosen on f alone (the
in-sample own best), R@5 on f of the 2 x 2 cells (grid point) x (weights trained on):

* ``transfer`` = (s_r, w_r), the LOFO figure; ``own_best`` = (s_f, w_f);
* ``rest_point_own_weights`` = (s_r, weights trained on f at s_r);
* ``own_point_rest_weights`` = (s_f, weights trained on the other two at s_f).

setting part = own_best - rest_point_own_weights (at f's own weights) and
own_point_rest_weights - transfer (at transferred weights); weights part = the two others.
Then ``variants``: the same LOFO with the ranker changed (L2 strength, question- instead
of family-weighted, fewer feature columns) or the selection rule changed (the incumbent
guard: keep the shipped grid point unless a point's worst-family lift beats it by more
than the guard); each with its transfer / own-best R@5 per family and, on all three
families, the point it would choose and that point's worst-family lift.
"""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import quality_grid  # noqa: E402
from quality_grid import Features, grid, grid_parser, offline  # noqa: E402
from quality_search import family_benches, plain  # noqa: E402
from train_ranker import fit  # noqa: E402

from hyperrag_fast.config import preset_for  # noqa: E402
from hyperrag_fast.eval.harness import _git, machine_info  # noqa: E402

#: ranker columns (methods.stitch.FEATURES + the presets' rank_links)
COLS = ("prior", "ppr", "ppr_rank", "prior_rank", "dense_rank", "sim_gap", "stibp", "bm25",
        "title", "bridge_title", "bridge_title_words")
#: feature subsets tried (columns kept)
SUBSETS = {"no_graph_columns": ("prior", "prior_rank", "dense_rank", "sim_gap", "stibp", "bm25",
                                "title", "bridge_title", "bridge_title_words"),
           "core": ("prior", "prior_rank", "dense_rank", "sim_gap", "title", "bridge_title",
                    "bridge_title_words")}


FITS: dict = {}


def masked(part, keep):
    if keep is None:
        return part
    X, y, q = part  # columns past COLS (further rank_links) are kept
    m = np.array([c in keep for c in COLS[:X.shape[1]]] + [True] * max(0, X.shape[1] - len(COLS)))
    return X * m, y, q


class Proc:
    """One variant of the procedure: the ranker (c, weighting, columns) and the rule."""

    def __init__(self, feats, benches, dense, settings, guard, c, weighting="family", keep=None,
                 rule="worst", incumbent=None):
        self.f, self.b, self.d, self.s, self.g = feats, benches, dense, settings, guard
        self.c, self.wt, self.keep, self.rule, self.inc = c, weighting, keep, rule, incumbent

    def part(self, i, fam):
        return masked(self.f.get(self.s[i][1], fam), self.keep)

    def train(self, i, F):
        key = (i, tuple(F), self.c, self.wt, self.keep)  # the same fit is shared by variants
        if key not in FITS:
            FITS[key] = fit([self.part(i, x) for x in F], c=self.c, weighting=self.wt)
        return FITS[key]

    def score(self, i, fam, w):
        return offline(self.part(i, fam), self.b[fam].golds, w)

    def choose(self, F):
        """(grid index, weights, table of (worst lift, mean lift)) on the families F."""
        rows = []
        for i in range(len(self.s)):
            w = self.train(i, F)
            lifts = [self.score(i, x, w)["objective"] - self.d[x]["objective"] for x in F]
            rows.append((min(lifts), float(np.mean(lifts)), w))
        top = max(r[0] for r in rows)
        if self.rule == "incumbent" and self.inc is not None:
            beat = [i for i, r in enumerate(rows) if r[0] > rows[self.inc][0] + self.g]
            i = max(beat, key=lambda j: (rows[j][0], rows[j][1])) if beat else self.inc
        else:
            near = [i for i, r in enumerate(rows) if r[0] >= top - self.g]
            i = max(near, key=lambda j: (rows[j][1], rows[j][0]))
        return i, rows[i][2], rows


def r5(sc):
    return sc["recall"][5]


def main(argv=None) -> int:
    p = grid_parser(__doc__.split("\n\n")[0])
    p.add_argument("--c", type=float, default=0.01)
    p.add_argument("--variants", default="all", help="'all' or comma-separated labels' first words "
                   "(shipped, C=..., question-weighted, columns:, incumbent)")
    a = p.parse_args(argv)
    if a.axis:
        quality_grid.AXES = tuple((n, tuple(json.loads(v))) for n, v in (x.split("=", 1) for x in a.axis))
    fixed = {n: json.loads(v) for n, v in (x.split("=", 1) for x in a.hybrid)}
    fixed = {n: tuple(v) if isinstance(v, list) else v for n, v in fixed.items()}
    emb, benches, dense = family_benches(a)
    fams = tuple(benches)
    base = quality_grid.BASE
    settings = grid(base=replace(base, hybrid=replace(base.hybrid, **fixed)))
    feats = Features(benches, a.features_cache)
    shipped = plain(replace(preset_for(emb.name), hybrid=replace(preset_for(emb.name).hybrid, rank_weights=())))
    inc = next((i for i, (_, o) in enumerate(settings) if plain(o) == shipped), None)
    P = lambda **k: Proc(feats, benches, dense, settings, a.min_gain, **{"c": a.c, **k})  # noqa: E731
    cur = P()
    decomp = {}
    for f in fams:
        rest = tuple(x for x in fams if x != f)
        i_r, w_r, _ = cur.choose(rest)
        i_f, w_f, _ = cur.choose((f,))
        cells = {"transfer": r5(cur.score(i_r, f, w_r)), "own_best": r5(cur.score(i_f, f, w_f)),
                 "rest_point_own_weights": r5(cur.score(i_r, f, cur.train(i_r, (f,)))),
                 "own_point_rest_weights": r5(cur.score(i_f, f, cur.train(i_f, rest))),
                 "rest_point_all3_weights": r5(cur.score(i_r, f, cur.train(i_r, fams)))}
        decomp[f] = {"rest_point": settings[i_r][0], "own_point": settings[i_f][0], **cells,
                     "gap": round(cells["own_best"] - cells["transfer"], 4),
                     "setting_part_at_own_weights": round(cells["own_best"] - cells["rest_point_own_weights"], 4),
                     "weights_part_at_rest_point": round(cells["rest_point_own_weights"] - cells["transfer"], 4),
                     "setting_part_at_rest_weights": round(cells["own_point_rest_weights"] - cells["transfer"], 4),
                     "weights_part_at_own_point": round(cells["own_best"] - cells["own_point_rest_weights"], 4)}
        print(f, json.dumps(decomp[f]), file=sys.stderr, flush=True)
    variants = {f"shipped procedure (C={a.c:g}, family-weighted, all columns, worst-family rule)": {}}
    for c in (0.001, 0.003, 0.1, 1.0):
        variants[f"C={c}"] = {"c": c}
    variants["question-weighted (a family weighs by its question count)"] = {"weighting": "question"}
    for name, keep in SUBSETS.items():
        variants[f"columns: {name}"] = {"keep": keep}
    variants["incumbent guard (keep the shipped grid point unless beaten by > guard)"] = {
        "rule": "incumbent", "incumbent": inc}
    if a.variants != "all":
        want = a.variants.split(",")
        variants = {k: v for k, v in variants.items() if k.split(" ")[0] in want}
    out_v = {}
    for label, kw in variants.items():
        pr = P(**kw)
        row = {}
        for f in fams:
            rest = tuple(x for x in fams if x != f)
            i_r, w_r, _ = pr.choose(rest)
            i_f, w_f, _ = pr.choose((f,))
            row[f] = {"transfer": r5(pr.score(i_r, f, w_r)), "own_best": r5(pr.score(i_f, f, w_f)),
                      "transfer_point": settings[i_r][0]}
        i_a, w_a, rows = pr.choose(fams)
        row["all_three"] = {"point": settings[i_a][0], "worst_lift": round(rows[i_a][0], 4),
                            "recall@5": {f: r5(pr.score(i_a, f, w_a)) for f in fams}}
        row["all_three_table"] = [{"point": settings[j][0], "worst_lift": round(rows[j][0], 4),
                                   "mean_lift": round(rows[j][1], 4),
                                   "recall": {f: pr.score(j, f, rows[j][2])["recall"] for f in fams}}
                                  for j in range(len(settings))]
        out_v[label] = row
        print(label, json.dumps({f: (row[f]["transfer"], row[f]["own_best"]) for f in fams}),
              json.dumps(row["all_three"]), file=sys.stderr, flush=True)
    out = {"command": "python benchmarks/experiments/lofo_decompose.py " + " ".join(argv or sys.argv[1:]),
           "machine": machine_info(), "git_commit": _git("rev-parse", "HEAD"),
           "git_dirty": bool(_git("status", "--porcelain")), "embedder": emb.name,
           "axes": {n: list(v) for n, v in quality_grid.AXES}, "fixed_hybrid": {n: list(v) if isinstance(v, tuple) else v for n, v in fixed.items()},
           "c": a.c, "min_gain": a.min_gain, "shipped_grid_point": settings[inc][0] if inc is not None else None,
           "dense_recall@5": {f: r5(dense[f]) for f in fams}, "decomposition": decomp, "variants": out_v}
    Path(a.out + ".json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
