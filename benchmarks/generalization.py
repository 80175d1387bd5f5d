"""Out-of-sample figures in one file: ``results/generalization.json`` (issue 15 contract).

    python benchmarks/generalization.py \
        --search benchmarks/experiments/results/quality_search/quality_search_minilm_local_title.json

Reads, never recomputes: the pairwise search (``quality_search.py``: the setting selected
on 2Wiki dev, scored on the HotpotQA sample and 2Wiki test; the setting selected on
HotpotQA, a diagnostic never shipped, scored on 2Wiki dev and test) and the eval
harness's quality files beside it for ``dense`` (no tuned option), whose embedder must
match the search's. ``tuned_on[A][B]`` holds recall of the setting selected on A,
measured on B (the search's argmax on A, nothing else); ``shipped_default`` holds
``config.TUNED`` (dev-selected, HotpotQA as a veto) on every set, and ``by_type`` the
shipped default per question type.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

try:
    from . import _common as C
except ImportError:
    import _common as C

RESULTS = Path(__file__).resolve().parent / "results"
KS = (2, 5, 8)
#: contract name -> (search key, quality file of dense on that set)
SETS = {"2wiki_dev": ("dev", "quality_2wikimultihopqa_dev.json"),
        "2wiki_test": ("test", "quality-2wikimultihopqa.json"),
        "hotpotqa_train": ("hotpot", "quality-hotpotqa_train.json")}


def _rec(score: dict) -> dict:
    return {f"recall@{k}": score["recall"][str(k)] if str(k) in score["recall"]
            else score["recall"][k] for k in KS}


def _dense(name: str, embedder: str) -> tuple[dict, dict, dict]:
    q = json.loads((RESULTS / SETS[name][1]).read_text())
    if q["embedder"] != embedder:
        raise SystemExit(f"{SETS[name][1]}: embedder {q['embedder']!r}, search used {embedder!r}")
    d = q["methods"]["dense"]
    src = {"file": SETS[name][1], "command": q["command"], "git_commit": q["git_commit"]}
    return {f"recall@{k}": d[f"recall@{k}"] for k in KS}, d.get("by_type", {}), src


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--search", required=True, help="quality_search.py output (.json)")
    ap.add_argument("--out", default="generalization.json")
    a = ap.parse_args()
    s = json.loads(Path(a.search).read_text())
    sel = {"2wiki_dev": s["best_on_dev"], "hotpotqa_train": s["best_on_hotpot_diagnostic"]}
    dense = {name: _dense(name, s["embedder"]) for name in SETS}
    tuned_on = {}
    for on, row in sel.items():
        tuned_on[on] = {"query_options": row["query_options"]}
        for name, (key, _) in SETS.items():
            if name == on:
                continue
            tuned_on[on][name] = {"stitch": _rec(row[key]), "dense": dense[name][0]}
    shipped = s["tuned_default"]
    out_shipped = {
        "rule": "selected on 2Wiki dev; an option is kept only when it also holds on the "
                "HotpotQA sample (a veto, so HotpotQA is not out of sample for it; 2Wiki test "
                "and the held-out set are)",
        **{name: {"stitch": _rec(shipped[key]), "dense": dense[name][0]}
           for name, (key, _) in SETS.items()}}
    by_type = {"setting": "shipped default (config.TUNED)"}
    for name in ("2wiki_test", "hotpotqa_train"):
        st = shipped[SETS[name][0]]["by_type"]
        by_type[name] = {t: {"n": v["n"],
                             "stitch": {f"recall@{k}": v[str(k)] for k in KS},
                             "dense": {f"recall@{k}": dense[name][1][t][f"recall@{k}"] for k in KS}}
                         for t, v in sorted(st.items())}
    out = {"embedder": s["embedder"], "tuned_on": tuned_on, "shipped_default": out_shipped,
           "by_type": by_type,
           "objective": s["objective"], "selection": s["selection"],
           "sources": {"search": {"file": str(a.search), "command": s["command"],
                                  "git_commit": s["git_commit"], "git_dirty": s["git_dirty"]},
                       "dense": {n: d[2] for n, d in dense.items()}},
           "run": {"command": C.command(), "machine": C.machine()}}
    C.write_result(a.out, out)


if __name__ == "__main__":
    main()
