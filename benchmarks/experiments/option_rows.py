"""Off-preset options measured beside the embedder's preset on the three dev families
(issue 21; docs/architecture.md §5): each row = the preset upstream of the ranker with
the row's changes, the calibrated ranker retrained on the three families (as
``quality_grid.py``'s ablation rows), scored from each question's C_q features (the
ranking the query path computes: bias + X @ w, stable).

    python benchmarks/experiments/option_rows.py --embedder minilm \
        --index 2wikimultihopqa=indexes/2wiki_minilm \
        --index hotpotqa_train=indexes/quality_hotpot_minilm \
        --index musique_dev=indexes/quality_musique_minilm --cache-dir cache/quality_search \
        --out benchmarks/experiments/results/quality_search/option_rows_minilm

The control row is the preset with its ranker retrained the same way: a row is kept only
if the worst family's lift over dense (objective: mean of R@2/5/8) rises by more than
``--min-gain`` over the control and no family loses more than ``--min-gain``.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from quality_grid import Features, offline  # noqa: E402
from quality_search import FAMILIES, Bench, plain  # noqa: E402
from train_ranker import fit  # noqa: E402

from hyperrag_fast.config import TUNED, preset_for  # noqa: E402
from hyperrag_fast.embed.registry import make_embedder  # noqa: E402
from hyperrag_fast.eval.harness import _git, machine_info  # noqa: E402

ROWS = [
    ("control: preset, ranker retrained", {}),
    ("+hop query 10, weight .3 (embedded 'question bridge')", {"hop_query": 10, "hop_query_weight": 0.3}),
    ("+hop query 10, weight 1", {"hop_query": 10, "hop_query_weight": 1.0}),
    ("+hop query bm25 10, weight .3", {"hop_query_bm25": 10, "hop_query_weight": 0.3}),
    ("+hop query bm25 10, weight 1", {"hop_query_bm25": 10, "hop_query_weight": 1.0}),
    ("+hop query 10, weight .1", {"hop_query": 10, "hop_query_weight": 0.1}),
    ("+hop query 3, weight .1", {"hop_query": 3, "hop_query_weight": 0.1}),
    ("+hop query bm25 10, weight .1", {"hop_query_bm25": 10, "hop_query_weight": 0.1}),
]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--index", action="append", required=True, help="DATASET=INDEX_DIR")
    p.add_argument("--cache-dir", default="cache")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--features-cache", default=None)
    p.add_argument("--rows", default=None, help="comma-separated row numbers (default: all)")
    p.add_argument("--min-gain", type=float, default=0.005)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    index = dict(x.split("=", 1) for x in a.index)
    emb = make_embedder(a.embedder)
    benches = {f: Bench(ds, sp, index[ds], emb, a.cache_dir, a.data_dir)
               for f, (ds, sp) in FAMILIES.items() if ds in index}
    fams = tuple(benches)
    dense = {f: b.score(replace(TUNED, method="dense")) for f, b in benches.items()}
    preset = preset_for(emb.name)
    base = replace(preset, hybrid=replace(preset.hybrid, rank_weights=()))
    feats = Features(benches, a.features_cache)
    rows = ROWS if a.rows is None else [ROWS[int(i)] for i in a.rows.split(",")]
    out_rows = []
    for label, ch in rows:
        o = replace(base, hybrid=replace(base.hybrid, **ch))
        parts = {f: feats.get(o, f) for f in fams}
        w = fit(list(parts.values()))
        sc = {f: offline(parts[f], benches[f].golds, w) for f in fams}
        lift = {f: round(sc[f]["objective"] - dense[f]["objective"], 4) for f in fams}
        out_rows.append({"label": label, "changes": ch, "weights": list(w), "scores": sc,
                         "lift_over_dense": lift, "worst_lift": min(lift.values()),
                         "query_options": plain(replace(o, hybrid=replace(o.hybrid, rank_weights=w)))})
        print(label, {f: sc[f]["recall"] for f in fams}, min(lift.values()), file=sys.stderr, flush=True)
    ctrl = out_rows[0]
    for r in out_rows:
        d = {f: round(r["scores"][f]["objective"] - ctrl["scores"][f]["objective"], 4) for f in fams}
        r["change_vs_control"] = d
        r["kept_by_rule"] = (r["worst_lift"] - ctrl["worst_lift"] > a.min_gain
                             and min(d.values()) >= -a.min_gain)
    res = {"command": "python benchmarks/experiments/option_rows.py " + " ".join(argv or sys.argv[1:]),
           "machine": machine_info(), "git_commit": _git("rev-parse", "HEAD"),
           "git_dirty": bool(_git("status", "--porcelain")), "embedder": emb.name,
           "families": list(fams), "dense": dense, "min_gain": a.min_gain, "rows": out_rows}
    Path(a.out + ".json").write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
