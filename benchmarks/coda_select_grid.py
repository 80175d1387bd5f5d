"""CODA selection knobs by lookup over every dev cell at once (issue 23, session 17):
the 4 GraphRAG-Bench cells (subset x embedder, offline coverage of the top 5, margin over
the best of dense / BM25 / ``stitch`` minus the +3-point target) and the 6 multi-hop dev
cells (2Wiki dev, HotpotQA, MuSiQue dev x embedder: ``coda`` - dense, the smaller of R@2,
R@5, R@8), scored by the worst cell, with leave-one-cell-out beside it.

    python benchmarks/coda_select_grid.py --rows-cache <rows> \\
        --points '[{"cover_weight": 0.5, "fact_weight": 0.2}, {"cover_weight": 0.5, "fact_weight": 0.4}]'

``<rows>`` holds ``benchmarks/coda_cr.py``'s per-question rows (``--rows-cache``, one
pickle per cell, ``<cell>_<embedder>_1.pkl``), made at the options whose pool the knobs
re-rank; the selection here replays ``coda``'s (score = dense + ``lexical_weight`` BM25 +
``fact_weight`` best sentence + ``graph_weight`` kept item, greedy ``cover_weight``
coverage, ``dedup_sim`` skips), which reproduces the harness rows exactly at the defaults
(docs/architecture.md §7); ``cover_pairs`` (session 18) adds coda/select.py ``_pairs``'
term-pair columns to that coverage. Points name every knob they move from the
defaults below (``fact_weight`` 0.2 there: the session-17 sweep's incumbent; name 0.4 for
today's). Baselines are read from the committed ``quality-graphrag_bench.json``.

The pick is the project's selection rule (benchmarks/selection_rule.py, docs/architecture.md
§7): a point's score is its worst cell; T = the points within ``--min-gain`` of the best
worst; T2 = the members of T within ``--min-gain`` of T's largest mean over the cells; the
pick is T2's largest worst, then the larger mean. ``--out`` writes the points, the pick
(and leave-one-cell-out picks), whether it equals today's ``CodaOptions``, the command,
commit and machine.
"""
from __future__ import annotations

import argparse
import json
import pickle
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hyperrag_fast.coda.select import _pairs  # noqa: E402
from hyperrag_fast.eval.harness import _git, machine_info  # noqa: E402
from hyperrag_fast.settings import CodaOptions  # noqa: E402
from selection_rule import RULE, pick_by_worst  # noqa: E402  (benchmarks/)

CR = "Complex Reasoning"
GB = {"medical", "novel"}
EMBEDDERS = {"minilm": "", "bge-small": "bge/"}


def compact(r: dict) -> dict:
    """The pool-sized parts of one ``coda_cr`` row."""
    pool = r["pool"]
    terms = sorted(r["tidf"])
    w = np.array([r["tidf"][t] for t in terms])
    w = w / w.sum() if w.sum() > 0 else w
    held = np.array([[t in r["tset"].get(int(c), ()) for t in terms] for c in pool],
                    bool).reshape(len(pool), len(terms))
    none = np.zeros(r["n_st"], bool)
    dense = np.argsort(-r["cs"], kind="stable")[:8]
    return {"type": r["type"], "pool": pool, "cs": r["cs"][pool], "bm": r["bm"][pool],
            "sm": r["smax"][pool], "held": held, "w": w, "n_st": r["n_st"],
            "g": np.array([max((x for _, x in r["items"].get(int(c), ())), default=0.0) for c in pool]),
            "vec": np.asarray(r["cv"][pool], np.float32),
            "cov": np.array([r["cov"].get(int(c), none) for c in pool], bool).reshape(len(pool), -1),
            "dcov": np.array([r["cov"].get(int(c), none) for c in dense], bool).reshape(len(dense), -1)}


def select(r: dict, p: dict, k: int) -> list[int]:
    base = (r["cs"] + p["lexical_weight"] * r["bm"] + p["fact_weight"] * r["sm"]
            + p["graph_weight"] * r["g"])
    held, w, vec, pool = r["held"], r["w"], r["vec"], r["pool"]
    if p.get("cover_pairs", 0.0) > 0 and p["cover_weight"] > 0:
        held, w = _pairs(held, w, p["cover_pairs"] / p["cover_weight"])
    covered, free, chosen = np.zeros(len(w), bool), np.ones(pool.size, bool), []
    while len(chosen) < min(k, pool.size) and free.any():
        val = base + (p["cover_weight"] * (held[:, ~covered] @ w[~covered]) if len(w) else 0.0)
        cand = np.flatnonzero(free)
        for j in cand[np.lexsort((pool[cand], -val[cand]))]:
            free[j] = False
            if all(float(vec[j] @ vec[c]) <= p["dedup_sim"] for c in chosen):
                chosen.append(int(j))
                covered |= held[j]
                break
    return chosen


def score(rows: list[dict], p: dict, baseline: tuple | None) -> dict:
    def cov(r, m):
        return float(m.any(0).mean()) if r["n_st"] and len(m) else 0.0
    if baseline is not None:  # GraphRAG-Bench: coverage of the top 5 by type
        by = defaultdict(list)
        for r in rows:
            v = cov(r, r["cov"][select(r, p, 5)])
            by[r["type"]].append(v)
            by["all"].append(v)
        a, c = float(np.mean(by["all"])), float(np.mean(by[CR]))
        return {"worst": a - baseline[0] - 0.03, "all": a, CR: c, "cr_margin": c - baseline[1]}
    sel = [select(r, p, 8) for r in rows]
    rc = [float(np.mean([cov(r, r["cov"][s[:k]]) for r, s in zip(rows, sel)])) for k in (2, 5, 8)]
    rd = [float(np.mean([cov(r, r["dcov"][:k]) for r in rows])) for k in (2, 5, 8)]
    return {"worst": min(a - b for a, b in zip(rc, rd)), "recall@2/5/8": rc, "dense": rd}


def summary(p: dict, cells: dict) -> dict:
    """One point's worst and mean cell score and its worst-without-each-cell."""
    v = [c["worst"] for c in cells.values()]
    return {"options": p, "worst": min(v), "mean": float(np.mean(v)),
            "worst_without": {c: min(x["worst"] for k, x in cells.items() if k != c) for c in cells},
            "cells": cells}


def pick(table: list[dict], min_gain: float) -> int:
    """The selection rule (module docstring) over :func:`summary` rows."""
    return pick_by_worst([(t["worst"], t["mean"]) for t in table], min_gain)[0]


def _rows(cache: Path, compact_dir: str | None, name: str) -> list[dict]:
    """A cell's :func:`compact` rows, read from / saved to ``compact_dir`` when given."""
    pk = Path(compact_dir) / f"{name}.pkl" if compact_dir else None
    if pk is not None and pk.is_file():
        return pickle.loads(pk.read_bytes())
    rows = [compact(r) for r in pickle.loads((cache / f"{name}_1.pkl").read_bytes())]
    if pk is not None:
        pk.parent.mkdir(parents=True, exist_ok=True)
        pk.write_bytes(pickle.dumps(rows))
    return rows


def main() -> None:
    a = argparse.ArgumentParser()
    a.add_argument("--rows-cache", required=True)
    a.add_argument("--cells", default="medical,novel,2wiki,hotpot,musique")
    a.add_argument("--points", required=True, help="JSON list of option dicts")
    a.add_argument("--out", default=None)
    a.add_argument("--compact-dir", default=None,
                   help="directory: each cell's compact rows (pickle), made once and reused")
    a.add_argument("--min-gain", type=float, default=0.005, help="the noise guard (cell units)")
    args = a.parse_args()
    defaults = {"cover_weight": 0.5, "fact_weight": 0.2, "lexical_weight": 0.3,
                "graph_weight": 0.03, "dedup_sim": 0.99, "cover_pairs": 0.0}
    points = [dict(defaults, **p) for p in json.loads(args.points)]
    res = [{} for _ in points]
    for emb, sub in EMBEDDERS.items():
        gb = json.loads((ROOT / "benchmarks/results" / sub / "quality-graphrag_bench.json").read_text())
        for cell in args.cells.split(","):
            rows = _rows(Path(args.rows_cache), args.compact_dir, f"{cell}_{emb}")
            base = None
            if cell in GB:
                m = gb["subsets"][cell]
                base = tuple(max(m[b]["coverage"][t] for b in ("dense", "bm25", "stitch"))
                             for t in ("all", CR))
            for i, p in enumerate(points):
                res[i][f"{cell}_{emb}"] = score(rows, p, base)
    out = [summary(p, r) for p, r in zip(points, res)]
    for t in out:
        print(json.dumps(t["options"]), f"worst {t['worst'] * 100:+.2f} mean {t['mean'] * 100:+.2f}",
              " ".join(f"{c}:{v['worst'] * 100:+.2f}" for c, v in t["cells"].items()), flush=True)
    i = pick(out, args.min_gain)
    shipped = {k: getattr(CodaOptions(), k) for k in out[i]["options"]}
    lofo = {}
    for c in out[i]["cells"]:
        j = pick([summary(t["options"], {k: v for k, v in t["cells"].items() if k != c})
                  for t in out], args.min_gain)
        lofo[c] = {"pick": j, "held_out": out[j]["cells"][c]["worst"]}
    _, *tied = pick_by_worst([(t["worst"], t["mean"]) for t in out], args.min_gain)
    print(f"pick {i}: {json.dumps(out[i]['options'])} (shipped: {out[i]['options'] == shipped})")
    if args.out:
        doc = {"command": "python benchmarks/coda_select_grid.py --rows-cache <rows> --points "
               f"'{args.points}'" + (f" --cells {args.cells}" if "--cells" in sys.argv else "")
               + (f" --min-gain {args.min_gain}" if "--min-gain" in sys.argv else ""),
               "git_commit": _git("rev-parse", "HEAD"), "machine": machine_info(),
               "rule": RULE.format(g=args.min_gain), "min_gain": args.min_gain,
               "selected": i, "selected_options": out[i]["options"], "shipped": shipped,
               "selected_is_shipped": out[i]["options"] == shipped,
               "tied": tied[0], "tied_by_mean": tied[1], "leave_one_cell_out": lofo, "points": out}
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")

if __name__ == "__main__":
    main()
