"""A small structured selection and an honest leave-one-family-out (issue 21, item 1;
docs/architecture.md §6).

    python benchmarks/quality_grid.py --embedder minilm \
        --index 2wikimultihopqa=indexes/2wiki_minilm \
        --index hotpotqa_train=indexes/quality_hotpot_minilm \
        --index musique_dev=indexes/quality_musique_minilm --cache-dir cache/quality_search \
        --out benchmarks/experiments/results/quality_grid/quality_grid_minilm

A coarse grid fixed before any run (:data:`AXES`: five options, two values each = 32
upstream settings; every other option at its dataclass default) and one procedure,
:func:`choose`, applied to any set F of dev families: for each grid setting the
calibrated ranker (``train_ranker.fit``) is trained on F, the setting is scored on each
family of F with that ranker, and the setting of the best worst-family lift over dense
(objective: mean of R@2/5/8) is chosen by ``selection_rule.pick_by_worst`` (ties within
``--min-gain``; the mean lift only removes a tied setting worse by more than the guard). The preset = ``choose`` on all three families. Leave-one-family-out for family f:
``choose`` on the other two, scored on f; **own_best** for f = ``choose`` on {f} alone (the
same grid, the ranker trained on f): the gap measures what choosing on two families costs
the third, not the luck of the largest search. Scores inside the search are computed from
each question's C_q features (the ranking the query path computes: bias + X @ w, stable);
the chosen settings are re-scored through the query path and both figures recorded.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality_search import (FAMILIES, KS, Bench, _r, apply, code_hash, family_parser,  # noqa: E402
                            plain, write_result)
from selection_rule import RULE, pick_by_worst  # noqa: E402
from train_ranker import Prior, collect, fit, parse_fit  # noqa: E402

from hyperrag_fast.config import TUNED, QueryOptions, preset_for  # noqa: E402
from hyperrag_fast.embed.registry import make_embedder  # noqa: E402
from hyperrag_fast.engine import split_names  # noqa: E402
from hyperrag_fast.eval.harness import _git, machine_info  # noqa: E402
from hyperrag_fast.methods.stitch import FEATURES  # noqa: E402

#: the grid, fixed a priori: (coordinate of quality_search.apply, values); the ranker is
#: always on and retrained per setting and per family set
AXES = (("delta", (0.75, 0.85)), ("title_chunks", (0.3, 1.0)), ("hop_bridge", (1.0, 3.0)),
        ("damping", (0.0, 0.2)), ("hop_rounds", (1, 2)))
BASE = replace(TUNED, hybrid=replace(TUNED.hybrid, rank_weights=()))
#: ablation rows around the selected setting: (label, changes); the ranker is retrained
#: on the three families for every row that does not set ``rank_weights`` itself
ABLATIONS = [
    ("-ranker (rank by PPR)", {"rank_weights": ()}),
    ("-ppr (d = 0, ranker retrained)", {"damping": 0.0}),
    ("-stibp (no spatial/temporal)", {"stibp": False}),
    ("-hop (no second round)", {"hop": (0, 1.0, 2, "sim")}),
    ("-hop bridge", {"hop_bridge": 0.0}),
    ("-seeds (no question names)", {"seeds": ("none", 1, float("inf"))}),
    ("-bm25", {"bm25": (0.0, 0)}),
    ("-title chunks", {"title_chunks": 0.0}),
    ("hop bridge from the top 2 chunks", {"hop_bridge_chunks": 2}),
    ("+hop rounds 2 (a second bridge round)", {"hop_rounds": 2}),
    ("+hop rounds 3", {"hop_rounds": 3}),
    ("+hop bridge titles (bridges from named titles too)", {"hop_bridge_titles": True}),
    ("+hop dense 10, weight .3", {"hop_dense": 10, "hop_dense_weight": 0.3}),
    ("+hop dense 10, weight 1", {"hop_dense": 10, "hop_dense_weight": 1.0}),
    ("+mmr .1", {"mmr": 0.1}),
    ("+mmr .3", {"mmr": 0.3}),
    ("+title max 2", {"title_max": 2}),
    ("title top 1", {"title_top": 1}),
]
HYBRID_ONLY = {"hop_rounds", "hop_bridge_titles", "hop_dense", "hop_dense_weight", "mmr", "graph_mix", "wide_chunks", "wide_flat", "hop_bridge_decay", "hop_bridge_near", "hop_round_cover",
               "hop_bridge_chunks", "rank_links", "rank_split"}


def changed(o: QueryOptions, changes: dict) -> QueryOptions:
    for n, v in changes.items():
        v = tuple(v) if isinstance(v, list) else v  # a JSON --axis list (rank_links)
        o = replace(o, hybrid=replace(o.hybrid, **{n: v})) if n in HYBRID_ONLY else apply(o, n, v)
    return o


def grid(axes=None, base: QueryOptions | None = None) -> list[tuple[dict, QueryOptions]]:
    axes, out = AXES if axes is None else axes, []
    for vals in itertools.product(*(v for _, v in axes)):
        o, s = BASE if base is None else base, {}
        for (name, _), v in zip(axes, vals):  # a dict value sets several options jointly
            o, s[name] = changed(o, v if isinstance(v, dict) else {name: v}), v
        out.append((s, o))
    return out


class Features:
    """Per family and setting: every question's C_q features and labels (``collect``),
    kept on disk under ``--features-cache`` for this code and index."""

    def __init__(self, benches: dict, cache: str | None) -> None:
        self.benches, self.cache, self.mem = benches, cache, {}
        self.checked: set = set()
        self.code = code_hash()
        if cache:
            Path(cache).mkdir(parents=True, exist_ok=True)

    def get(self, o: QueryOptions, fam: str):
        key = json.dumps(plain(o), sort_keys=True)
        if (key, fam) in self.mem:
            return self.mem[(key, fam)]
        if o.hybrid.rank_split != "off":  # the same queries: derived from the unsplit rows
            self.mem[(key, fam)] = part = self.split(o, fam)
            return part
        b = self.benches[fam]
        h = hashlib.sha1(f"{self.code}|{b.index_dir}|{b.name}|{key}".encode()).hexdigest()[:20]
        f = Path(self.cache) / f"{h}.npz" if self.cache else None
        if f is not None and f.is_file():
            z = np.load(f)
            part = (z["X"], z["y"], z["q"])
        else:
            t0 = time.perf_counter()
            part = collect(b, o)
            print(f"collect {fam} {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
            if f is not None:
                np.savez(f, X=part[0], y=part[1], q=part[2])
        self.mem[(key, fam)] = part
        return part


    def split(self, o: QueryOptions, fam: str):
        """The features of ``o`` (``rank_split`` on) from those of ``o`` with it off: the
        columns ``engine.style_split`` appends, u from each question's named titles as the
        query path finds them; checked equal to a collect through the query path on the
        first such setting of each family and mode."""
        h = o.hybrid
        X, y, q = self.get(replace(o, hybrid=replace(h, rank_split="off")), fam)
        b = self.benches[fam]
        lk = b.r.state.lookups[next(iter(b.r.state.lookups))]
        u = np.array([not lk.titles.chunks_named_in(x.question, h.ngram_min_words)
                      for x in b.ds.questions], np.float64)[q.astype(np.int64)]
        extra = X if h.rank_split == "all" else X[:, X.shape[1] - len(h.rank_links):]
        part = (np.column_stack([X, extra * u[:, None]]), y, q)
        if (fam, h.rank_split) not in self.checked:
            real = collect(b, o)
            if not all(np.array_equal(a, c) for a, c in zip(real, part)):
                raise AssertionError(f"rank_split features of {fam} differ from the query path's")
            self.checked.add((fam, h.rank_split))
        return part


def grid_parser(description: str):
    """``family_parser`` plus the flags of the offline scripts over this grid's features
    (experiments/lofo_decompose.py, experiments/ranker_prior.py)."""
    p = family_parser(description)
    p.add_argument("--features-cache", required=True)
    p.add_argument("--min-gain", type=float, default=0.005)
    p.add_argument("--axis", action="append", default=[], help="NAME=JSON list (quality_grid.py --axis)")
    p.add_argument("--hybrid", action="append", default=[], help="NAME=JSON (quality_grid.py --hybrid)")
    return p


def offline(part, golds, w) -> dict:
    """R@k of ranking each question's C_q by bias + X @ w (as ``methods.stitch.fused_top``)."""
    X, y, q = part
    s = X @ np.asarray(w[1:]) + w[0]
    rec = {k: [] for k in KS}
    q = q.astype(np.int64)
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    ends = np.r_[starts[1:], q.shape[0]]
    seen = set()
    for a, b in zip(starts, ends):
        i = int(q[a])
        seen.add(i)
        hits = y[a:b][np.argsort(-s[a:b], kind="stable")]
        for k in KS:
            rec[k].append(hits[:k].sum() / len(golds[i]))
    for i in range(len(golds)):  # a question with an empty C_q (none expected) scores 0
        if i not in seen:
            for k in KS:
                rec[k].append(0.0)
    r = {k: round(float(np.mean(v)), 4) for k, v in rec.items()}
    return {"recall": r, "objective": round(sum(r.values()) / len(KS), 4)}


def with_names(prior: Prior | None, o: QueryOptions) -> Prior | None:
    """``prior`` for the ranker columns of ``o`` (FEATURES + its rank_links, split by rank_split)."""
    return None if prior is None else prior._replace(names=split_names(
        FEATURES + tuple(o.hybrid.rank_links), len(o.hybrid.rank_links), o.hybrid.rank_split))


def ranker_for(s: dict, c: float, prior: Prior | None) -> tuple[float, Prior | None, dict]:
    """The ranker fit of grid point ``s``: its ``"ranker"`` axis value ("C" or "C|PRIOR",
    ``--ranker``; PRIOR may add ``loss=listwise|pairwise`` and ``top=K``, train_ranker.parse_fit)
    when it has one, else ``c`` and ``prior`` (pointwise): (C, prior, fit keywords)."""
    if "ranker" not in s:
        return c, prior, {}
    cs, _, ps = s["ranker"].partition("|")
    return (float(cs), *parse_fit(ps)) if ps else (float(cs), None, {})


def choose(F: tuple[str, ...], settings, feats: Features, benches, dense, min_gain: float,
           c: float = 1.0, prior: Prior | None = None):
    """The procedure (module docstring) on the families ``F``: (chosen options, per-setting
    table); ``c``: the ranker's inverse L2 strength; ``prior``: train_ranker.Prior (both
    overridden by a grid point's ``"ranker"``)."""
    table = []
    for s, o in settings:
        cs, ps, fk = ranker_for(s, c, prior)
        w = fit([feats.get(o, f) for f in F], c=cs, prior=with_names(ps, o), **fk)
        sc = {f: offline(feats.get(o, f), benches[f].golds, w) for f in F}
        lifts = [sc[f]["objective"] - dense[f]["objective"] for f in F]
        table.append({"setting": s, "weights": list(w), "scores": sc,
                      "worst_lift": round(min(lifts), 4), "mean_lift": round(float(np.mean(lifts)), 4)})
    i, _, _ = pick_by_worst([(t["worst_lift"], t["mean_lift"]) for t in table], min_gain)
    o = replace(settings[i][1], hybrid=replace(settings[i][1].hybrid,
                                               rank_weights=tuple(table[i]["weights"])))
    return o, i, table


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--index", action="append", required=True, help="DATASET=INDEX_DIR")
    p.add_argument("--cache-dir", default="cache")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--features-cache", default=None, help="directory of collected features")
    p.add_argument("--min-gain", type=float, default=0.005, help="the noise guard (objective)")
    p.add_argument("--axis", action="append", default=[],
                   help="NAME=JSON list: the grid's axes in place of AXES (session 14: fewer knobs); "
                        "a value that is a JSON object sets its options jointly (e.g. hop_rounds "
                        "with hop_round_cover)")
    p.add_argument("--hybrid", action="append", default=[],
                   help="NAME=JSON: a HybridOptions field of every grid point (e.g. graph_mix)")
    p.add_argument("--c", type=float, default=1.0, help="the ranker's inverse L2 strength")
    p.add_argument("--prior", default=None, help="train_ranker.Prior spec, e.g. 'signed=all;center=1'")
    p.add_argument("--ranker", action="append", default=[],
                   help="C or C|PRIOR: an axis of ranker fits (L2 strength, train_ranker.Prior; "
                        "PRIOR may hold loss=pointwise|listwise|pairwise and top=K) "
                        "crossed with the grid, chosen by the same rule")
    p.add_argument("--no-ablations", action="store_true")
    p.add_argument("--out", required=True, help="output stem (.json and .md)")
    a = p.parse_args(argv)
    global AXES
    if a.axis:
        AXES = tuple((n, tuple(json.loads(v))) for n, v in (x.split("=", 1) for x in a.axis))
    fixed = {n: json.loads(v) for n, v in (x.split("=", 1) for x in a.hybrid)}
    fixed = {n: tuple(v) if isinstance(v, list) else v for n, v in fixed.items()}
    index = dict(x.split("=", 1) for x in a.index)
    emb = make_embedder(a.embedder)
    commit, dirty = _git("rev-parse", "HEAD"), bool(_git("status", "--porcelain"))
    benches = {f: Bench(ds, sp, index[ds], emb, a.cache_dir, a.data_dir)
               for f, (ds, sp) in FAMILIES.items() if ds in index}
    test = Bench("2wikimultihopqa", "test", index["2wikimultihopqa"], emb, a.cache_dir, a.data_dir)
    fams = tuple(benches)
    dense = {f: b.score(replace(TUNED, method="dense")) for f, b in benches.items()}
    settings = grid(base=replace(BASE, hybrid=replace(BASE.hybrid, **fixed)))
    settings = [({**s, "ranker": r}, o) for s, o in settings for r in a.ranker] or settings
    feats = Features(benches, a.features_cache)
    prior = None if a.prior is None else Prior.parse(a.prior)
    chosen, ci, table = choose(fams, settings, feats, benches, dense, a.min_gain, a.c, prior)
    path = lambda o, f: benches[f].score(o)  # noqa: E731  (through the query path)
    lofo = {}
    for held in fams:
        rest = tuple(f for f in fams if f != held)
        o_rest, i_rest, t_rest = choose(rest, settings, feats, benches, dense, a.min_gain, a.c, prior)
        o_own, i_own, t_own = choose((held,), settings, feats, benches, dense, a.min_gain, a.c, prior)
        lofo[held] = {"chosen_on": list(rest), "setting": settings[i_rest][0],
                      "query_options": plain(o_rest), "stitch": path(o_rest, held),
                      "dense": dense[held], "own_best": path(o_own, held),
                      "own_best_setting": settings[i_own][0], "own_best_query_options": plain(o_own),
                      "own_best_rule": "the same procedure (grid, ranker retrained, worst-family "
                                       "rule) run on this family alone: its own-tuned best on "
                                       "the grid, the ranker trained on it (in-sample)",
                      "gap_recall@5": round(path(o_own, held)["recall"][5]
                                            - path(o_rest, held)["recall"][5], 4),
                      "table_on_rest": t_rest}
    ablations = []
    up = replace(chosen, hybrid=replace(chosen.hybrid, rank_weights=()))
    for label, ch in ([] if a.no_ablations else ABLATIONS):
        o = changed(chosen if "rank_weights" in ch else up, ch)
        if "rank_weights" not in ch:
            parts = [feats.get(replace(o, hybrid=replace(o.hybrid, mmr=0.0)), f) for f in fams]
            cs, ps, fk = ranker_for(settings[ci][0], a.c, prior)
            o = replace(o, hybrid=replace(o.hybrid, rank_weights=fit(parts, c=cs, prior=with_names(ps, o), **fk)))
        if plain(o) == plain(chosen):
            continue  # already the selected setting
        row = {"label": label, **{f: path(o, f) for f in fams}}
        row["lift_vs_selected"] = {f: round(row[f]["objective"] - path(chosen, f)["objective"], 4)
                                   for f in fams}
        ablations.append(row)
        print(label, row["lift_vs_selected"], file=sys.stderr, flush=True)
    shipped = preset_for(emb.name)
    per = lambda o: {f: path(o, f) for f in fams} | {"2wiki_test": test.score(o)}  # noqa: E731
    out = {"command": "python benchmarks/quality_grid.py " + " ".join(argv or sys.argv[1:]),
           "machine": machine_info(), "git_commit": commit, "git_dirty": dirty,
           "embedder": emb.name, "objective": "(R@2 + R@5 + R@8) / 3",
           "selection": "a fixed grid (" + ", ".join(f"{n} {list(v)}" for n, v in AXES + (
               (("ranker", a.ranker),) if a.ranker else ())) + "), the "
                        f"ranker (L2 C={a.c}{'' if prior is None else ', prior ' + a.prior}) retrained per "
                        "setting on the choosing families; the session-19 rule "
                        f"(selection_rule.py, guard {a.min_gain}): {RULE}; families " + str(list(fams)),
           "axes": {n: list(v) for n, v in AXES} | ({"ranker": a.ranker} if a.ranker else {}),
           "families": list(fams), "c": a.c, "prior": a.prior,
           "fixed_hybrid": {n: list(v) if isinstance(v, tuple) else v for n, v in fixed.items()},
           "dense": {**dense, "2wiki_test": test.score(replace(TUNED, method="dense"))},
           "shipped_preset": {**per(shipped), "query_options": plain(shipped)},
           "selected": {**per(chosen), "query_options": plain(chosen), "setting": settings[ci][0],
                        "offline": table[ci]["scores"]},
           "leave_one_family_out": lofo, "table": table, "trail": [], "ablations": ablations}
    write_result(a.out, out, render)
    return 0


def render(out: dict) -> str:
    fams, cols = out["families"], out["families"] + ["2wiki_test"]
    L = [f"# Structured selection and leave-one-family-out ({out['embedder']})", "",
         f"Command: `{out['command']}`  ", f"Commit {out['git_commit']}"
         f"{' (dirty)' if out['git_dirty'] else ''}. Selection: {out['selection']}. "
         f"Objective {out['objective']}. Cells R@2/R@5/R@8 through the query path.", "",
         "| setting | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|",
         "| dense | " + " | ".join(_r(out["dense"][c]) for c in cols) + " |"]
    for label, key in (("shipped preset (config)", "shipped_preset"), ("selected on all three", "selected")):
        L.append(f"| {label} | " + " | ".join(_r(out[key][c]) for c in cols) + " |")
    L += ["", f"Selected grid point: `{json.dumps(out['selected']['setting'])}`", "",
          "## Leave one family out (R@5)", "",
          "own-tuned best = the same procedure on that family alone (same grid, ranker trained "
          "on it); chosen on the other two = the procedure on the other two families.", "",
          "| held-out family | dense | chosen on the other two | own-tuned best | gap | "
          "grid point (other two) | grid point (own) |", "|---|---|---|---|---|---|---|"]
    for f, x in out["leave_one_family_out"].items():
        L.append(f"| {f} | {x['dense']['recall'][5]:.3f} | {x['stitch']['recall'][5]:.3f} | "
                 f"{x['own_best']['recall'][5]:.3f} | {x['gap_recall@5']:+.3f} | "
                 f"`{json.dumps(x['setting'])}` | `{json.dumps(x['own_best_setting'])}` |")
    L += ["", "## Ablations around the selected setting (ranker retrained on the three "
          "families unless the row sets it)", "",
          "| row | " + " | ".join(fams) + " | objective change per family | wins / loses |",
          "|---" * (len(fams) + 3) + "|"]
    for x in out["ablations"]:
        d = x["lift_vs_selected"]
        wins = [f for f in fams if d[f] > 0.005]
        loses = [f for f in fams if d[f] < -0.005]
        L.append(f"| {x['label']} | " + " | ".join(_r(x[f]) for f in fams) + " | "
                 + ", ".join(f"{d[f]:+.3f}" for f in fams)
                 + f" | {'+' + ','.join(wins) if wins else ''} {'-' + ','.join(loses) if loses else ''} |")
    L += ["", "## Every grid point, ranker trained on all three (search scores from C_q features)",
          "", "| " + " | ".join(out["axes"]) + " | " + " | ".join(fams) + " | worst lift |",
          "|---" * (len(out["axes"]) + len(fams) + 1) + "|"]
    for t in out["table"]:
        L.append("| " + " | ".join(str(t["setting"][n]) for n in out["axes"]) + " | "
                 + " | ".join(_r(t["scores"][f]) for f in fams) + f" | {t['worst_lift']:+.4f} |")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    sys.exit(main())
