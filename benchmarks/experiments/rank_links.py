"""Scoring the candidates the preset already has (issue 21, MuSiQue's second hop;
docs/architecture.md §5): the calibrated ranker with and without the link features of
``HybridOptions.rank_links`` (``methods.stitch.LINK_FEATURES``), the preset upstream of
the ranker fixed, trained on the three dev families (in-sample) and leave-one-family-out.

    python benchmarks/experiments/rank_links.py --embedder minilm \
        --index 2wikimultihopqa=indexes/2wiki_minilm \
        --index hotpotqa_train=indexes/quality_hotpot_minilm \
        --index musique_dev=indexes/quality_musique_minilm --cache-dir cache/quality_search \
        --out benchmarks/experiments/results/quality_grid/rank_links_minilm

Each feature set is scored from each question's C_q features (bias + X @ w, stable: the
ranking the query path computes); ``--sets`` names column subsets. The rule: the set of
the best worst-family lift over dense (objective mean R@2/5/8), as quality_grid's.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from quality_grid import changed, offline  # noqa: E402
from quality_search import FAMILIES, Bench, plain  # noqa: E402
from train_ranker import collect, fit  # noqa: E402

from hyperrag_fast.config import LINK_FEATURES, TUNED, HybridOptions, preset_for  # noqa: E402
from hyperrag_fast.embed.registry import make_embedder  # noqa: E402
from hyperrag_fast.eval.harness import _git, machine_info  # noqa: E402
from hyperrag_fast.methods.stitch import FEATURES  # noqa: E402

ALL = FEATURES + LINK_FEATURES
#: the columns both presets ship (``HybridOptions.rank_links``' default)
SHIPPED = HybridOptions().rank_links


def cols(part, names):
    X, y, q = part
    return X[:, [ALL.index(n) for n in names]], y, q


def evaluate(data, benches, dense, names, c):
    fams = list(data)
    parts = {f: cols(data[f], names) for f in fams}
    w_all = fit(list(parts.values()), c=c)
    ins = {f: offline(parts[f], benches[f].golds, w_all) for f in fams}
    lofo = {}
    for f in fams:
        w = fit([parts[g] for g in fams if g != f], c=c)
        lofo[f] = offline(parts[f], benches[f].golds, w)
    lift = lambda sc: min(sc[f]["objective"] - dense[f]["objective"] for f in fams)  # noqa: E731
    return {"features": list(names), "weights": list(w_all), "in_sample": ins, "lofo": lofo,
            "worst_lift_in_sample": round(lift(ins), 4), "worst_lift_lofo": round(lift(lofo), 4)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--index", action="append", required=True, help="DATASET=INDEX_DIR")
    p.add_argument("--cache-dir", default="cache")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--c", type=float, default=1.0)
    p.add_argument("--greedy", action="store_true", help="forward selection over LINK_FEATURES")
    p.add_argument("--change", action="append", default=[],
                   help="NAME=JSON: an upstream change (quality_grid.changed), e.g. hop_bridge=1.0")
    p.add_argument("--dump", default=None, help="also save the collected features (.pkl)")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    index = dict(x.split("=", 1) for x in a.index)
    emb = make_embedder(a.embedder)
    commit, dirty = _git("rev-parse", "HEAD"), bool(_git("status", "--porcelain"))
    preset = preset_for(emb.name)
    up = replace(preset, hybrid=replace(preset.hybrid, rank_weights=(), rank_links=LINK_FEATURES))
    up = changed(up, {k: json.loads(v) for k, v in (x.split("=", 1) for x in a.change)})
    benches = {f: Bench(ds, sp, index[ds], emb, a.cache_dir, a.data_dir)
               for f, (ds, sp) in FAMILIES.items() if ds in index}
    dense = {f: b.score(replace(TUNED, method="dense")) for f, b in benches.items()}
    data = {f: collect(b, up) for f, b in benches.items()}
    if a.dump:
        import pickle
        Path(a.dump).write_bytes(pickle.dumps({"data": data, "dense": dense, "golds": {
            f: b.golds for f, b in benches.items()}, "types": {f: b.types for f, b in benches.items()}}))
    rows = [evaluate(data, benches, dense, FEATURES, a.c), evaluate(data, benches, dense, ALL, a.c)]
    rows += [evaluate(data, benches, dense, FEATURES + (n,), a.c) for n in LINK_FEATURES]
    rows.append({**evaluate(data, benches, dense, FEATURES + SHIPPED, a.c), "shipped": True})
    if a.greedy:
        chosen, best = [], rows[0]["worst_lift_in_sample"]
        while True:
            trial = [evaluate(data, benches, dense, FEATURES + tuple(chosen) + (n,), a.c)
                     for n in LINK_FEATURES if n not in chosen]
            if not trial:
                break
            t = max(trial, key=lambda r: r["worst_lift_in_sample"])
            if t["worst_lift_in_sample"] < best + 0.005:
                break
            chosen.append(t["features"][-1])
            best = t["worst_lift_in_sample"]
            rows.append({**t, "greedy": True})
    for r in rows:
        print(f"{r['worst_lift_in_sample']:+.4f} {r['worst_lift_lofo']:+.4f} "
              + " ".join(f"{f}:{r['in_sample'][f]['recall'][5]:.3f}/{r['lofo'][f]['recall'][5]:.3f}"
                         for f in benches) + " " + ",".join(r["features"][len(FEATURES):]),
              file=sys.stderr, flush=True)
    out = {"command": "python benchmarks/experiments/rank_links.py " + " ".join(argv or sys.argv[1:]),
           "machine": machine_info(), "git_commit": commit, "git_dirty": dirty,
           "embedder": emb.name, "upstream": plain(up), "dense": dense, "rows": rows}
    Path(a.out + ".json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
