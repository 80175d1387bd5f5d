"""Label-free priors on the ranker against the leave-one-family-out gap (issue 21, item 1;
docs/architecture.md §6): does a sign constraint (``train_ranker.Prior`` ``signed``) or a
shrinkage toward a common standardised weight (``center``, with a stronger L2) transfer
better than the shipped fit?

    python benchmarks/experiments/ranker_prior.py --embedder minilm \
        --index 2wikimultihopqa=indexes/2wiki_minilm --index hotpotqa_train=indexes/hotpot_minilm \
        --index musique_dev=indexes/musique_minilm --cache-dir cache/minilm \
        --features-cache <features dir> --axis rank_links=[...] --ranker 0.01 \
        --ranker "0.001|signed=all;center=0.5" --nested --out <stem>

Offline, from each question's C_q features (``quality_grid.Features``: the ranking the
query path computes; the shipped fit reproduces the grid files' LOFO exactly). Per
``--ranker`` ("C" or "C|PRIOR"): ``quality_grid.choose`` on all three families (the
in-sample pick and its worst-family lift, the number the preset rule compares) and
leave-one-family-out (chosen on the other two / on the family alone, R@5); with
``--nested`` one more row where the rankers are an axis of the grid, so each fold also
chooses its ranker on its own families.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import quality_grid  # noqa: E402
from quality_grid import BASE, Features, choose, grid, grid_parser, offline  # noqa: E402
from quality_search import family_benches  # noqa: E402

from hyperrag_fast.eval.harness import _git, machine_info  # noqa: E402


def lofo_row(sets, feats, benches, dense, min_gain: float) -> dict:
    """``choose`` on all families, then each family held out: transfer / own best R@5."""
    fams = tuple(benches)
    _, i, table = choose(fams, sets, feats, benches, dense, min_gain)
    row = {"in_sample": {"setting": sets[i][0], "worst_lift": table[i]["worst_lift"],
                         "mean_lift": table[i]["mean_lift"], "weights": table[i]["weights"],
                         **{f: table[i]["scores"][f]["recall"] for f in fams}}, "families": {}}
    for held in fams:
        rest = tuple(f for f in fams if f != held)
        _, i_r, t_r = choose(rest, sets, feats, benches, dense, min_gain)
        _, i_o, t_o = choose((held,), sets, feats, benches, dense, min_gain)
        tr = offline(feats.get(sets[i_r][1], held), benches[held].golds, t_r[i_r]["weights"])
        ow = offline(feats.get(sets[i_o][1], held), benches[held].golds, t_o[i_o]["weights"])
        row["families"][held] = {"transfer": tr["recall"], "own_best": ow["recall"],
                                 "gap_recall@5": round(ow["recall"][5] - tr["recall"][5], 4),
                                 "setting_rest": sets[i_r][0], "setting_own": sets[i_o][0],
                                 "weights_rest": t_r[i_r]["weights"]}
    return row


def main(argv=None) -> int:
    p = grid_parser(__doc__.split("\n\n")[0])
    p.add_argument("--ranker", action="append", required=True, help="C or C|PRIOR (quality_grid.py --ranker)")
    p.add_argument("--nested", action="store_true", help="also the rankers as one grid axis")
    a = p.parse_args(argv)
    commit, dirty = _git("rev-parse", "HEAD"), bool(_git("status", "--porcelain"))
    quality_grid.AXES = tuple((n, tuple(tuple(x) if isinstance(x, list) else x for x in json.loads(v)))
                              for n, v in (x.split("=", 1) for x in a.axis))
    fixed = {n: json.loads(v) for n, v in (x.split("=", 1) for x in a.hybrid)}
    emb, benches, dense = family_benches(a)
    settings = grid(base=replace(BASE, hybrid=replace(BASE.hybrid, **fixed)))
    feats = Features(benches, a.features_cache)
    runs = [(r, [({**s, "ranker": r}, o) for s, o in settings]) for r in a.ranker]
    if a.nested:
        runs.append(("nested: " + " || ".join(a.ranker),
                     [({**s, "ranker": r}, o) for s, o in settings for r in a.ranker]))
    out = {"command": "python benchmarks/experiments/ranker_prior.py " + " ".join(argv or sys.argv[1:]),
           "machine": machine_info(), "git_commit": commit, "git_dirty": dirty, "embedder": emb.name,
           "axes": {n: [list(x) if isinstance(x, tuple) else x for x in v] for n, v in quality_grid.AXES},
           "fixed_hybrid": fixed, "min_gain": a.min_gain, "dense_recall@5": {
               f: d["recall"][5] for f, d in dense.items()}, "rows": {}}
    for label, sets in runs:
        t0 = time.perf_counter()
        r = out["rows"][label] = lofo_row(sets, feats, benches, dense, a.min_gain)
        print(f"{label:50s} worst {r['in_sample']['worst_lift']:.4f} in-sample R@5 "
              + "/".join(f"{r['in_sample'][f][5]:.3f}" for f in benches) + " | LOFO "
              + "  ".join(f"{f} {x['transfer'][5]:.3f}/{x['own_best'][5]:.3f}"
                          for f, x in r["families"].items())
              + f" [{time.perf_counter() - t0:.0f} s]", file=sys.stderr, flush=True)
    Path(a.out + ".json").write_text(json.dumps(out, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
