"""Out-of-sample figures in one file: ``results/generalization.json`` (issue 15 contract,
issue 21's ``leave_one_family_out``).

    python benchmarks/generalization.py \
        --search benchmarks/results/quality21/quality_search_minilm.json \
        --search benchmarks/results/quality21/quality_search_bge.json

Reads, never recomputes: the worst-family selections of ``quality_grid.py`` (or
``quality_search.py``), one per embedder (each holds dense, the shipped preset and the selected setting on the three dev
families and 2Wiki test, and its leave-one-family-out runs). The first file (MiniLM, the
default embedder) fills the issue-15 keys: ``tuned_on[<families chosen on>][<held-out
family>]`` = the setting chosen on two families measured on the third; ``shipped_default``
= the shipped preset of config.PRESETS on every set (``selected_now``: what the
selection picks at the file's commit; ``selected_now_is_shipped`` says whether it is this
checkout's preset); ``by_type`` = it per question type. The ``--search`` grids are the stage
that chose today's presets; ``--upstream-search`` keeps an earlier stage's LOFO beside.
``leave_one_family_out[family][embedder]`` = {stitch (chosen on the other two), dense,
own_best (the best on that family alone among the settings searched)}; ``per_embedder``
repeats the shipped and dense rows for every embedder.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

try:
    from . import _common as C
except ImportError:
    import _common as C

KS = (2, 5, 8)
FAMILIES = ("2wiki_dev", "hotpotqa_train", "musique_dev")
SETS = FAMILIES + ("2wiki_test",)
SHORT = {"all-MiniLM-L6-v2-onnx-int8": "minilm", "bge-small-en-v1.5-onnx-int8": "bge-small"}


def _rec(score: dict) -> dict:
    return {f"recall@{k}": score["recall"][str(k)] for k in KS}


def _types(score: dict) -> dict:
    return {t: {f"recall@{k}": v[str(k)] for k in KS} | {"n": v["n"]}
            for t, v in sorted(score["by_type"].items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--search", action="append", required=True,
                    help="quality_grid.py (or quality_search.py) output (.json), one per embedder: "
                         "the grid that chose the embedder's current preset; the first fills the "
                         "issue-15 keys")
    ap.add_argument("--upstream-search", action="append", default=[],
                    help="an earlier stage's grid (.json), one per embedder (session 14: the "
                         "settings upstream of the ranker): its leave-one-family-out is kept "
                         "beside, as leave_one_family_out_upstream")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME=FILE: a quality_grid.py file of the same grid with another ranker fit "
                         "(--prior / --c), one per embedder; its LOFO is kept under "
                         "leave_one_family_out_variants[NAME] (the preset does not follow it)")
    ap.add_argument("--earlier", action="append", default=[],
                    help="NAME=FILE: the grid (.json) that chose an embedder's preset before the "
                         "--search grid, one per embedder: its LOFO is kept as "
                         "leave_one_family_out_NAME (and _NAME_grid), e.g. s18")
    ap.add_argument("--ranker-lofo", action="append", default=[],
                    help="train_ranker.py output (.json), one per embedder: the ranker stage "
                         "alone trained leave-one-family-out")
    ap.add_argument("--results", default=None,
                    help="the quality result files' folder (MiniLM; bge-small under bge/): the "
                         "shipped preset's rows (shipped_default, by_type, per_embedder) are then "
                         "the eval's stitch rows measured under the current preset")
    ap.add_argument("--rank-links", action="append", default=[],
                    help="experiments/rank_links.py output (.json), one per embedder: the ranker "
                         "with and without its rank_links columns, in-sample and trained on two")
    ap.add_argument("--lofo-bias", action="append", default=[],
                    help="experiments/lofo_bias.py output (.json), one per embedder: the own-tuned "
                         "best cross-validated within the family beside the transfer")
    ap.add_argument("--graph-floor", default=None,
                    help="experiments/graph_floor.py analyse output (.json): stitch vs no_ppr per row")
    ap.add_argument("--out", default="generalization.json")
    a = ap.parse_args()
    searches = [json.loads(Path(p).read_text()) for p in a.search]
    s = searches[0]
    tuned_on = {}
    for held, x in s["leave_one_family_out"].items():
        tuned_on["+".join(x["chosen_on"])] = {"query_options": x["query_options"],
                                              held: {"stitch": _rec(x["stitch"]),
                                                     "dense": _rec(x["dense"])}}
    ship = lambda x: x.get("shipped_preset", x["selected"])  # noqa: E731  (config's preset)
    shipped = {"rule": "each embedder's preset (config.PRESETS), chosen on the three dev families "
                       "by the worst family's lift over dense; 2Wiki test is never searched",
               **{f: {"stitch": _rec(ship(s)[f]), "dense": _rec(s["dense"][f])}
                  for f in SETS if f in ship(s)}}
    by_type = {"setting": f"shipped preset of {s['embedder']}"}
    for f in [f for f in ("2wiki_test", "hotpotqa_train", "musique_dev") if f in ship(s)]:
        st, de = _types(ship(s)[f]), _types(s["dense"][f])
        by_type[f] = {t: {"n": v["n"], "stitch": {k: v[k] for k in v if k != "n"},
                          "dense": {k: de[t][k] for k in de[t] if k != "n"}} for t, v in st.items()}
    lofo, grids = leave_one_out(zip(a.search, searches))
    per_embedder, same = {}, {}
    for x in searches:
        emb = SHORT.get(x["embedder"], x["embedder"])
        per_embedder[emb] = {f: {"stitch": _rec(ship(x)[f]), "dense": _rec(x["dense"][f]),
                                 "selected_now": _rec(x["selected"][f])}
                             for f in SETS if f in ship(x)}
        same[emb] = x["selected"].get("query_options") == current_preset(x["embedder"])
        grids[emb]["selected_is_current_preset"] = same[emb]
    upstream = [(p, json.loads(Path(p).read_text())) for p in a.upstream_search]
    lofo_up, grids_up = leave_one_out(upstream)
    variants: dict = {}
    for name, p in (v.rsplit("=", 1) for v in a.variant):
        variants.setdefault(name, []).append((p, json.loads(Path(p).read_text())))
    variants = {k: dict(zip(("leave_one_family_out", "grid"), leave_one_out(v))) | {
        "in_sample": {SHORT.get(x["embedder"], x["embedder"]): {
            "setting": x["selected"].get("setting"), **{f: _rec(x["selected"][f]) for f in SETS
                                                         if f in x["selected"]}} for _, x in v}}
        for k, v in variants.items()}
    earlier: dict = {}
    for name, p in (v.split("=", 1) for v in a.earlier):
        earlier.setdefault(name, []).append((p, json.loads(Path(p).read_text())))
    earlier = {k: dict(zip((f"leave_one_family_out_{k}", f"leave_one_family_out_{k}_grid"),
                           leave_one_out(v))) for k, v in earlier.items()}
    ranker = {}
    for p in a.ranker_lofo:
        x = json.loads(Path(p).read_text())
        ranker[SHORT.get(x["embedder"], x["embedder"])] = {
            "file": p, "command": x["command"], "git_commit": x["git_commit"],
            "rule": "the embedder's preset upstream of the ranker fixed; the ranker trained on "
                    "the other two families (trained_on_others) beside trained on all three "
                    "(in-sample) and no ranker",
            **{f: {k: v for k, v in r.items() if k != "weights"} | {
                "trained_on_others": {k: v for k, v in r["trained_on_others"].items() if k != "weights"}}
               for f, r in x["families"].items()}}
    if a.results:
        measured(Path(a.results), shipped, by_type, per_embedder)
    links = {}
    for p in a.rank_links:
        x = json.loads(Path(p).read_text())
        rows = {("shipped" if r.get("shipped") else "base" if len(r["features"]) == 9 else None): r
                for r in x["rows"]}
        links[SHORT.get(x["embedder"], x["embedder"])] = {
            "file": p, "command": x["command"], "git_commit": x["git_commit"],
            "columns": rows["shipped"]["features"][9:],
            "rule": "the embedder's preset upstream of the ranker fixed; ranked from each "
                    "question's C_q features (the query path's bias + X @ w)",
            **{f: {"without_links_in_sample": _rec(rows["base"]["in_sample"][f]),
                   "without_links_trained_on_others": _rec(rows["base"]["lofo"][f]),
                   "in_sample": _rec(rows["shipped"]["in_sample"][f]),
                   "trained_on_others": _rec(rows["shipped"]["lofo"][f])}
               for f in rows["shipped"]["in_sample"]}}
    bias = {}
    for p in a.lofo_bias:
        x = json.loads(Path(p).read_text())
        keep = ("n_questions", "dense_recall@5", "transfer_recall@5", "own_in_sample_recall@5",
                "own_cross_validated_recall@5", "gap_in_sample", "optimism", "gap_cross_validated",
                "gap_cross_validated_se")
        bias[SHORT.get(x["embedder"], x["embedder"])] = {
            "file": p, "command": x["command"], "git_commit": x["git_commit"],
            "axes": x.get("axes"), "c": x.get("c"), "repeats": x["repeats"],
            **{f: {k: r[k] for k in keep if k in r} for f, r in x["families"].items()}}
    floor = {}
    if a.graph_floor:
        x = json.loads(Path(a.graph_floor).read_text())
        floor = {"file": a.graph_floor, "command": x["command"], "git_commit": x["git_commit"],
                 **{SHORT.get(e, e): [{k: r[k] for k in ("graph_mix", "c", "columns", "worst_lift_in_sample",
                                                        "worst_lift_lofo", "stitch_ge_no_ppr_everywhere")}
                                     | {"chosen": bool(r.get("chosen"))} | {f: {
                                         "in_sample_recall@5": v["in_sample"]["recall"]["5"],
                                         "lofo_recall@5": v["lofo"]["recall"]["5"],
                                         "no_ppr_recall@5": v["no_ppr_same_weights"]["recall"]["5"]}
                                         for f, v in r["families"].items()} for r in e_rows["rows"]]
                    for e, e_rows in x["embedders"].items()}}
    src = [{"file": p, "command": x["command"], "git_commit": x["git_commit"],
            "git_dirty": x["git_dirty"], "embedder": x["embedder"]} for p, x in zip(a.search, searches)]
    out = {"embedder": s["embedder"], "tuned_on": tuned_on, "shipped_default": shipped,
           "by_type": by_type, "leave_one_family_out": lofo,
           "leave_one_family_out_definition": (
               "for each dev family f and embedder: stitch = the setting the selection procedure "
               "chooses on the other two families (ranker trained on them), scored on f; own_best "
               "= the same procedure run on f alone (same grid, ranker trained on f, in-sample); "
               "gap_recall@5 = own_best - stitch. The grid is the one that chose each embedder's "
               "current preset (leave_one_family_out_grid; settings outside its axes fixed at the "
               "preset, chosen on all three families by the earlier stage, whose own "
               "leave-one-family-out is leave_one_family_out_upstream). Procedure and grid: " + "; ".join(
                   f"{e}: {g['selection']}" for e, g in grids.items())
               + ". Measured by the grid files at commits " + ", ".join(
                   f"{g['git_commit'][:10]} ({e})" for e, g in grids.items())
               + (" with the ranker of that commit; the shipped column is the eval's current preset "
                  "(the result files)" if a.results else "")),
           "leave_one_family_out_grid": grids,
           "leave_one_family_out_upstream": lofo_up, "leave_one_family_out_upstream_grid": grids_up,
           "leave_one_family_out_variants": variants, **{k: v for e in earlier.values() for k, v in e.items()},
           "ranker_leave_one_family_out": ranker, "rank_links_leave_one_family_out": links,
           "leave_one_family_out_cross_validated": bias, "graph_floor": floor,
           "per_embedder": per_embedder,
           "selected_now_is_shipped": same,
           "objective": s["objective"], "selection": s["selection"],
           "sources": {"search": src[0], "searches": src},
           "run": {"command": C.command(), "machine": C.machine()}}
    C.write_result(a.out, out)


def leave_one_out(files) -> tuple[dict, dict]:
    """``leave_one_family_out`` ({family: {embedder: ...}}) of grid files ``(path, json)``,
    and per embedder the grid it was measured on (file, command, commit, selection)."""
    lofo: dict = {f: {} for f in FAMILIES}
    grids = {}
    for p, x in files:
        emb = SHORT.get(x["embedder"], x["embedder"])
        grids[emb] = {"file": p, "command": x["command"], "git_commit": x["git_commit"],
                      "git_dirty": x["git_dirty"], "selection": x["selection"],
                      **{k: x[k] for k in ("axes", "fixed_hybrid", "c") if k in x},
                      "selected_setting": x["selected"].get("setting")}
        for f, r in x["leave_one_family_out"].items():
            lofo[f][emb] = {"chosen_on": r["chosen_on"], "stitch": _rec(r["stitch"]),
                            "dense": _rec(r["dense"]), "own_best": _rec(r["own_best"]),
                            "own_best_rule": r["own_best_rule"],
                            "gap_recall@5": round(r["own_best"]["recall"]["5"]
                                                  - r["stitch"]["recall"]["5"], 4)}
            for k in ("setting", "own_best_setting"):
                if k in r:
                    lofo[f][emb][k] = r[k]
    return lofo, grids


def current_preset(embedder: str) -> dict:
    """The embedder's preset in this checkout's config (``config.preset_for``), as the grid
    files record query options."""
    try:
        from .quality_search import plain
    except ImportError:
        from quality_search import plain
    from hyperrag_fast.config import preset_for
    return json.loads(json.dumps(plain(preset_for(embedder)), default=str))


#: dev family / test set -> its quality result file (eval's contract names)
FILES = {"2wiki_dev": "quality_2wikimultihopqa_dev.json", "hotpotqa_train": "quality-hotpotqa_train.json",
         "musique_dev": "quality-musique_dev.json", "2wiki_test": "quality-2wikimultihopqa.json"}


def measured(results: Path, shipped: dict, by_type: dict, per_embedder: dict) -> None:
    """The shipped preset's rows from the eval's result files (MiniLM in ``results``,
    bge-small in ``results/bge``), in place of the search files' records."""
    eval_rec = lambda m: {f"recall@{k}": round(m[f"recall@{k}"], 4) for k in KS}  # noqa: E731
    for emb, sub in (("minilm", results), ("bge-small", results / "bge")):
        for f, name in FILES.items():
            p = sub / name
            if not p.is_file() or emb not in per_embedder:
                continue
            m = json.loads(p.read_text())["methods"]
            row = {"stitch": eval_rec(m["stitch"]), "dense": eval_rec(m["dense"]),
                   "source": {"file": p.as_posix(), **{k: m["stitch"]["run"][k]
                                                       for k in ("command", "git_commit")}}}
            per_embedder[emb][f] = {**per_embedder[emb].get(f, {}), **row}
            if emb == "minilm":
                shipped[f] = row
                if f in by_type:
                    by_type[f] = {t: {"n": v["n"], "stitch": eval_rec(v), "dense": eval_rec(
                        m["dense"]["by_type"][t])} for t, v in sorted(m["stitch"]["by_type"].items())}


if __name__ == "__main__":
    main()
