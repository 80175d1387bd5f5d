"""STITCH settings chosen by the worst dev family: coordinate search on the three dev
families at once, leave-one-family-out, per-option ablations (issue 21;
docs/architecture.md §5-§6).

    python benchmarks/quality_search.py --embedder minilm \
        --index 2wikimultihopqa=indexes/2wiki_minilm --index hotpotqa_train=indexes/hotpot_minilm \
        --index musique_dev=indexes/musique_minilm --cache-dir cache/minilm \
        --out benchmarks/results/quality21/quality_search_minilm

Dev families (data README): 2Wiki dev (first 200), the HotpotQA sample, MuSiQue dev.
A setting's score on a family is its lift over ``dense`` of the same index (objective:
mean of R@2/5/8); a setting is chosen by the **worst** family's lift. Stages (a
coordinate search run to a fixed point): the title prior term (the weakest value within
``--min-gain`` of the best), delta x lambda, PPR damping, the second round and where it
starts, the bridge names of the first hop (``hop_bridge``), each change kept only when
the worst family gains more than ``--min-gain`` (the noise guard) — or, the Pareto rule,
when no family loses anything and one gains more than the guard — and costs no family
more than ``--max-loss`` (a rule one family likes must not cost the
others: without it the worst-family rule gave up 4 points of 2Wiki dev for 1 on HotpotQA);
then each kept option is dropped unless it earns more than ``--min-gain``; then the
calibrated ranker (``train_ranker.py``, trained on the selecting families), retrained for
every PPR damping x bridge weight of the grid and picked by the same rule (so PPR on with
a retrained ranker is reached even when damping alone lost). Leave-one-family-out: the
whole selection on two families, measured on the third, beside the third's own-tuned
best: the setting of the best objective on that family alone among every setting any
selection (the full one and the three leave-one-out ones) scored on it. 2Wiki test is
scored only for the selected setting and the ablation rows; nothing is chosen on it.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from hyperrag_fast.config import TUNED, QueryOptions
from hyperrag_fast.embed.registry import make_embedder
from hyperrag_fast.eval.data import load_dataset
from hyperrag_fast.eval.harness import (_git, default_extractor, embed_questions, load_or_build_index,
                                        machine_info, run_method)
from hyperrag_fast.eval.metrics import mean_recall, recall_by
from hyperrag_fast.retriever import Retriever

INF = math.inf
KS = (2, 5, 8)
#: (name, values): one random choice per name per sample; tuples move together
SPACE = {
    "delta": [0.4, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9],
    "lam": [0.0, 0.1, 0.3, 0.6, 1.0, 1.5, 2.0],
    "graph": [(d, m, w) for d in (0.0, 0.1, 0.2, 0.3, 0.5)
              for m, w in ((INF, "uniform"), (20, "inverse_size"), (5, "inverse_size"))],
    "group_weight": ["log1p", "idf"],
    "alpha": ["ratio", "log"],
    "temporal": [(50, 0.0), (50, 2.0), (INF, 1.0), (50, 1.0)],
    "seeds": [("none", 1, INF), ("ngram", 1, 2), ("ngram", 2, 2), ("ngram", 2, 5),
              ("ngram", 2, 30)],
    "bm25": [(0.0, 0), (0.1, 20), (0.2, 50)],
    "hop": [(0, 1.0, 2, "sim"), (1, 1.0, 2, "sim"), (2, 1.0, 2, "sim"), (1, 0.5, 2, "sim"),
            (2, 0.5, 3, "sim"), (1, 1.0, 3, "uniform"), (2, 0.5, 2, "uniform"), (3, 1.0, 2, "sim"),
            (4, 1.0, 2, "sim"), (2, 2.0, 2, "sim"), (2, 1.0, 3, "sim")],
    "k": [(25, 50), (50, 50), (25, 100), (50, 100)],
    "title_chunks": [0.0, 0.3, 1.0, 3.0, 10.0],  # weakest first (local search's title stage)
    "hop_titles": [False, True],
    "title_top": [0, 1, 2],
}


def apply(o: QueryOptions, name: str, v) -> QueryOptions:
    """``o`` with one searched coordinate set to ``v``."""
    s, h = o.stitch, o.hybrid
    if name == "graph":
        return replace(o, stitch=s.replace(damping=v[0], graph_max_group=v[1], graph_weight=v[2]))
    if name == "temporal":
        return replace(o, stitch=s.replace(temporal_max_group=v[0], temporal_from_space=v[1]))
    if name == "seeds":
        return replace(o, hybrid=replace(h, seeds=v[0], ngram_min_words=v[1], seed_max_group=v[2]))
    if name == "bm25":
        return replace(o, hybrid=replace(h, bm25_weight=v[0], k_bm25=v[1]))
    if name == "hop":
        return replace(o, hybrid=replace(h, hop_chunks=v[0], hop_value=v[1], hop_max_group=v[2],
                                         hop_weight=v[3]))
    if name == "k":
        return replace(o, k_nodes=v[0], k_chunks=v[1])
    if name == "damping":
        return replace(o, stitch=s.replace(damping=v, ppr="power" if v > 0 else "none"))
    if name in ("title_words", "title_chunks", "hop_titles", "rank_weights", "title_top",
                "graph_gate", "hop_bridge", "hop_bridge_max", "hop_idf", "title_max",
                "hop_max_group", "hop_bridge_chunks"):
        return replace(o, hybrid=replace(h, **{name: v}))
    if name == "stibp":
        return replace(o, stitch=s.replace(spatial=v, temporal=v))
    return replace(o, stitch=s.replace(**{name: v}))


def current(o: QueryOptions, name: str):
    """The value of coordinate ``name`` in ``o`` (inverse of :func:`apply`)."""
    s, h = o.stitch, o.hybrid
    return {"graph": (s.damping, s.graph_max_group, s.graph_weight),
            "temporal": (s.temporal_max_group, s.temporal_from_space),
            "seeds": (h.seeds, h.ngram_min_words, h.seed_max_group),
            "bm25": (h.bm25_weight, h.k_bm25),
            "hop": (h.hop_chunks, h.hop_value, h.hop_max_group, h.hop_weight),
            "k": (o.k_nodes, o.k_chunks),
            "title_words": h.title_words,
            "title_chunks": h.title_chunks, "hop_titles": h.hop_titles,
            "rank_weights": h.rank_weights, "title_top": h.title_top,
            "hop_bridge": h.hop_bridge, "hop_idf": h.hop_idf, "title_max": h.title_max,
            "damping": s.damping if s.ppr != "none" else 0.0,
            "stibp": s.spatial or s.temporal}.get(name, getattr(s, name, None))


#: ablation rows: (label, coordinate changes from the default); "-x" = option x removed
ABLATIONS = [
    ("default", {}),
    ("-hop (no second round)", {"hop": (0, 1.0, 2, "sim")}),
    ("+hop (second round: 1 chunk, 0.5, sim)", {"hop": (1, 0.5, 2, "sim")}),
    ("+hop (second round: 2 chunks, 1.0, sim)", {"hop": (2, 1.0, 2, "sim")}),
    ("-hop titles (second round from the top chunk only)", {"hop_titles": False}),
    ("+hop titles (second round also from the named titles' chunks)", {"hop_titles": True}),
    ("delta 0.6 (before)", {"delta": 0.6}),
    ("delta 0.7", {"delta": 0.7}),
    ("-seeds (no question names)", {"seeds": ("none", 1, INF)}),
    ("-bm25", {"bm25": (0.0, 0)}),
    ("-title single words", {"title_words": False}),
    ("+title single words (a one-word n-gram naming a passage title)", {"title_words": True}),
    ("-title chunks (no prior term for a named title)", {"title_chunks": 0.0}),
    ("title chunks 1", {"title_chunks": 1.0}),
    ("title chunks 10", {"title_chunks": 10.0}),
    ("title top 0 (every paragraph of a named page)", {"title_top": 0}),
    ("title top 1 (a named page's most similar paragraph)", {"title_top": 1}),
    ("-ppr (d = 0)", {"graph": (0.0, INF, "uniform")}),
    ("-ppr (rank by the prior, = no_ppr)", {"damping": 0.0}),
    ("-stibp (no spatial/temporal, = no_stibp)", {"stibp": False}),
    ("-ranker (rank by PPR)", {"rank_weights": ()}),
    ("-ranker -ppr (rank by the prior)", {"rank_weights": (), "damping": 0.0}),
    ("-ranker +graph gate (per-query graph weight)", {"rank_weights": (), "graph_gate": True}),
    ("-ranker +graph gate, d .2", {"rank_weights": (), "damping": 0.2, "graph_gate": True}),
    ("+ppr d .2 (graph on, ranker kept)", {"damping": 0.2}),
    ("-temporal_from_space", {"temporal": (50, 0.0)}),
    ("-hop bridge (no bridge names of the first hop)", {"hop_bridge": 0.0}),
    ("+hop bridge .3", {"hop_bridge": 0.3}),
    ("+hop bridge 1", {"hop_bridge": 1.0}),
    ("+hop bridge 3", {"hop_bridge": 3.0}),
    ("hop bridge from the top 2 chunks", {"hop_bridge_chunks": 2}),
    ("hop bridge groups <= 50 chunks", {"hop_bridge_max": 50}),
    ("+hop idf 2, second-round groups <= 10 chunks", {"hop_idf": 2.0, "hop_max_group": 10}),
    ("+title max 1 (one paragraph per page above the rest)", {"title_max": 1}),
    ("+title max 2", {"title_max": 2}),
    ("group_weight log1p (paper)", {"group_weight": "log1p"}),
    ("alpha ratio (paper)", {"alpha": "ratio"}),
]


class Bench:
    """One dataset split on one index: questions embedded once, configurations scored."""

    def __init__(self, dataset: str, split: str, index_dir: str, embedder, cache_dir: str,
                 data_dir: str | None) -> None:
        self.ds = load_dataset(dataset, split, data_dir)
        ix, _ = load_or_build_index(self.ds, default_extractor(), embedder, index_dir, cache_dir,
                                    progress=False)
        self.name, self.index_dir = f"{dataset}/{split}", str(Path(index_dir).resolve())
        self.r = Retriever(ix, embedder)
        self.qvecs, _ = embed_questions(embedder, [q.question for q in self.ds.questions],
                                        progress=False)
        self.golds = [lab.gold for lab in self.ds.labels]
        self.types = [lab.qtype for lab in self.ds.labels]
        self.memo: dict[str, dict] = {}

    def score(self, o: QueryOptions) -> dict:
        key = json.dumps(plain(o), sort_keys=True)
        if key not in self.memo:
            self.memo[key] = self._score(o)
        return self.memo[key]

    def _score(self, o: QueryOptions) -> dict:
        out = run_method(self.r, o.method, o, self.ds, self.qvecs, max(KS), progress=False)
        m = mean_recall(out["ranked"], self.golds, KS)
        rec = {k: round(m[f"recall@{k}"], 4) for k in KS}
        by = recall_by(out["ranked"], self.golds, self.types, KS)
        return {"recall": rec, "objective": round(sum(rec.values()) / len(KS), 4),
                "by_type": {t: {k: round(v[f"recall@{k}"], 4) for k in KS} | {"n": v["n"]}
                            for t, v in by.items()},
                "p50_ms": round(float(np.median(out["retrieval_ms"])), 3)}


#: dev family -> (dataset, split); the 2Wiki test split is scored, never searched
FAMILIES = {"2wiki_dev": ("2wikimultihopqa", "dev"), "hotpotqa_train": ("hotpotqa_train", "test"),
            "musique_dev": ("musique_dev", "all")}
#: the grids of the worst-family search (coarser than SPACE: three families per setting)
GRID = {"title_chunks": [0.0, 0.3, 1.0], "delta": [0.75, 0.8, 0.85, 0.9],
        "lam": [0.3, 1.0], "damping": [0.0, 0.2, 0.5],
        "hop": [(0, 1.0, 2, "sim"), (1, 1.0, 2, "sim"), (2, 1.0, 2, "sim")],
        "hop_titles": [False, True], "title_top": [0, 1], "hop_bridge": [0.0, 0.3, 1.0, 3.0]}
#: options the default keeps, each dropped unless it earns its place on the worst family
KEPT = [("seeds", ("none", 1, INF)), ("bm25", (0.0, 0)), ("title_words", False),
        ("temporal", (50, 0.0)), ("stibp", False)]


#: the ablation rows run by default (labels containing one of these); ``--rows`` to change
SHORT_ROWS = ["-hop (no", "-hop titles", "-seeds", "-bm25", "-title single", "-title chunks",
              "title top", "-ppr (rank", "-stibp", "-ranker", "-temporal_from_space", "+ppr d .2",
              "hop bridge", "hop idf", "title max"]


def family_parser(description: str) -> argparse.ArgumentParser:
    """The flags every per-family script shares: --embedder, --index DATASET=DIR (repeated),
    --cache-dir, --data-dir, --out."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--index", action="append", required=True, help="DATASET=INDEX_DIR")
    p.add_argument("--cache-dir", default="cache")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", required=True)
    return p


def family_benches(a) -> tuple:
    """(embedder, {family: Bench}, {family: dense score}) for ``family_parser``'s flags:
    every family whose dataset ``--index`` names."""
    index = dict(x.split("=", 1) for x in a.index)
    emb = make_embedder(a.embedder)
    benches = {f: Bench(ds, sp, index[ds], emb, a.cache_dir, a.data_dir)
               for f, (ds, sp) in FAMILIES.items() if ds in index}
    return emb, benches, {f: b.score(replace(TUNED, method="dense")) for f, b in benches.items()}


def code_hash() -> str:
    """sha1 of the package's Python sources: a score-cache entry is valid for this code only."""
    import hashlib
    h = hashlib.sha1()
    for f in sorted((Path(__file__).resolve().parents[1] / "hyperrag_fast").rglob("*.py")):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


class Search:
    """Scores settings lazily per family (cached; ``store``: a JSON-lines file keeping the
    scores across runs of the same code and indexes) and selects by the worst family's lift."""

    def __init__(self, benches: dict, min_gain: float, store: str | None = None,
                 max_loss: float = 0.01) -> None:
        self.benches, self.min_gain, self.max_loss = benches, min_gain, max_loss
        self.cache: dict[tuple[str, str], dict] = {}
        self.store, self.saved = store, {}
        self.tag = {f: f"{code_hash()}|{b.index_dir}|{b.name}" for f, b in benches.items()}
        if store and Path(store).is_file():
            for line in Path(store).read_text().splitlines():
                x = json.loads(line)
                sc = x["score"]  # JSON made the k keys strings
                sc["recall"] = {int(k): v for k, v in sc["recall"].items()}
                sc["by_type"] = {t: {(int(k) if k.isdigit() else k): v for k, v in d.items()}
                                 for t, d in sc["by_type"].items()}
                self.saved[(x["key"], x["tag"])] = sc
        self.dense = {f: self.score(replace(TUNED, method="dense"), f) for f in benches}
        self.trail: list[dict] = []

    def score(self, o: QueryOptions, fam: str) -> dict:
        key = (json.dumps(plain(o), sort_keys=True), fam)
        if key not in self.cache and (key[0], self.tag[fam]) in self.saved:
            self.cache[key] = self.saved[(key[0], self.tag[fam])]
        if key not in self.cache:
            self.cache[key] = self.benches[fam].score(o)
            if self.store:
                with open(self.store, "a") as f:
                    f.write(json.dumps({"key": key[0], "tag": self.tag[fam],
                                        "score": self.cache[key]}) + "\n")
            print(f"{len(self.cache):5d} {fam:15s} {self.cache[key]['objective']:.4f}",
                  file=sys.stderr, flush=True)
        return self.cache[key]

    def lift(self, o: QueryOptions, fam: str) -> float:
        return self.score(o, fam)["objective"] - self.dense[fam]["objective"]

    def worst(self, o: QueryOptions, fams) -> float:
        return min(self.lift(o, f) for f in fams)

    def own_best(self, fam: str) -> tuple[QueryOptions, dict]:
        """The best setting for ``fam`` alone among every setting scored on it (by any
        selection): its own-tuned best over the searched settings."""
        key = max((k for k in self.cache if k[1] == fam), key=lambda k: self.cache[k]["objective"])
        return json.loads(key[0]), self.cache[key]

    def select(self, fams: tuple[str, ...], ranker: bool, passes: int = 2) -> QueryOptions:
        """The coordinate search (module docstring) on ``fams`` from config.TUNED."""
        best = replace(TUNED, hybrid=replace(TUNED.hybrid, rank_weights=()))
        score = lambda o: self.worst(o, fams)  # noqa: E731
        ok = lambda c, b: all(self.score(c, f)["objective"] >= self.score(b, f)["objective"]  # noqa: E731
                              - self.max_loss for f in fams)
        G = GRID
        stages = (({"title_chunks": G["title_chunks"]}, "weakest"),
                  ({"delta": G["delta"], "lam": G["lam"]}, "best"), ({"damping": G["damping"]}, "best"),
                  ({"hop": G["hop"]}, "best"), ({"hop_titles": G["hop_titles"]}, "best"),
                  ({"hop_bridge": G["hop_bridge"]}, "best"),
                  ({"title_top": G["title_top"]}, "best"))
        for _ in range(passes):
            start = best
            for stage, rule in stages:
                cands = [best]
                for name, values in stage.items():
                    cands = [apply(o, name, v) for o in cands for v in values]
                cands = [o for o in cands if o == best or ok(o, best)]  # no family pays for it
                top = max(map(score, cands))
                if rule == "weakest":
                    best = next(o for o in cands if score(o) >= top - self.min_gain)
                else:
                    best = self.pick(cands, best, fams)
            for name, off in KEPT:  # the cheaper setting when the option earns no more than the guard
                if current(best, name) != off:
                    without = apply(best, name, off)
                    if score(without) >= score(best) - self.min_gain and ok(without, best):
                        best = without
            if best == start:
                break
        self.trail.append({"families": list(fams), "before_ranker": plain(best)})
        if ranker:  # the ranker retrained for every damping x bridge weight, picked as a stage
            from train_ranker import collect, fit
            cands, fits = [best], []
            for d in G["damping"]:
                for b in G["hop_bridge"]:
                    c = apply(apply(best, "damping", d), "hop_bridge", b)
                    w = fit([collect(self.benches[f], c) for f in fams])
                    cands.append(apply(c, "rank_weights", w))
                    fits.append({"damping": d, "hop_bridge": b, "weights": list(w),
                                 "worst": score(cands[-1])})
            without = best
            best = self.pick([o for o in cands if o == best or ok(o, best)], best, fams)
            self.trail[-1].update(ranker_fits=fits, ranker_kept=best != without,
                                  worst_without=score(without), worst_with=score(best))
        return best

    def pick(self, cands: list, best: QueryOptions, fams) -> QueryOptions:
        """A stage's rule: the candidate of the best worst-family lift when it beats
        ``best``'s by more than the noise guard; else the Pareto rule: among the candidates
        no family scores lower on than ``best`` and one family gains more than the guard
        on, the one of the largest summed gain; else ``best``."""
        score = lambda o: self.worst(o, fams)  # noqa: E731
        top = max(cands, key=score)
        if score(top) > score(best) + self.min_gain:
            return top
        obj = lambda o, f: self.score(o, f)["objective"]  # noqa: E731
        better = [o for o in cands if all(obj(o, f) >= obj(best, f) for f in fams)
                  and max(obj(o, f) - obj(best, f) for f in fams) > self.min_gain]
        return max(better, key=lambda o: sum(obj(o, f) for f in fams)) if better else best


def plain(o: QueryOptions) -> dict:
    return json.loads(json.dumps(asdict(o), default=str))


def _rec(x: dict) -> dict:
    return {f"recall@{k}": x["recall"][k] for k in KS}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--index", action="append", required=True,
                   help="DATASET=INDEX_DIR for 2wikimultihopqa, hotpotqa_train and musique_dev")
    p.add_argument("--cache-dir", default="cache")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--mode", choices=("select", "ablate"), default="select",
                   help="select: the worst-family search, leave-one-family-out, ablations; "
                        "ablate: ablations around config's preset of this embedder only")
    p.add_argument("--min-gain", type=float, default=0.005, help="the noise guard (objective)")
    p.add_argument("--max-loss", type=float, default=0.01,
                   help="a change is never kept when it costs any family more objective than this")
    p.add_argument("--no-ranker", action="store_true", help="skip the calibrated-ranker stage")
    p.add_argument("--no-lofo", action="store_true", help="skip leave-one-family-out")
    p.add_argument("--score-store", default=None,
                   help="JSON-lines file of scores kept across runs (same code and indexes)")
    p.add_argument("--passes", type=int, default=2, help="at most this many search passes")
    p.add_argument("--lofo-passes", type=int, default=1,
                   help="passes of each leave-one-family-out selection")
    p.add_argument("--rows", nargs="*", default=None,
                   help="only the ablation rows whose label contains one of these strings "
                        "(default: SHORT_ROWS; --rows with no value: all)")
    p.add_argument("--out", required=True, help="output stem (.json and .md)")
    a = p.parse_args(argv)
    index = dict(x.split("=", 1) for x in a.index)
    emb = make_embedder(a.embedder)
    commit, dirty = _git("rev-parse", "HEAD"), bool(_git("status", "--porcelain"))  # the code run
    t0 = time.perf_counter()
    benches = {f: Bench(ds, sp, index[ds], emb, a.cache_dir, a.data_dir)
               for f, (ds, sp) in FAMILIES.items() if ds in index}  # a family not given: not measured
    test = (Bench("2wikimultihopqa", "test", index["2wikimultihopqa"], emb, a.cache_dir, a.data_dir)
            if "2wikimultihopqa" in index else None)
    print(f"loaded in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    S = Search(benches, a.min_gain, a.score_store, a.max_loss)
    fams = tuple(benches)
    from hyperrag_fast.config import preset_for
    shipped = preset_for(emb.name)
    if a.mode == "ablate":
        chosen = shipped
    else:
        chosen = S.select(fams, not a.no_ranker, passes=a.passes)
    lofo = {}
    if a.mode == "select" and not a.no_lofo and len(fams) >= 2:
        for held in fams:
            rest = tuple(f for f in fams if f != held)
            on_rest = S.select(rest, not a.no_ranker, passes=a.lofo_passes)
            lofo[held] = {"chosen_on": list(rest), "query_options": plain(on_rest),
                          "stitch": S.score(on_rest, held), "dense": S.dense[held]}
        for held in fams:  # after every selection: the best over all settings scored on it
            own_o, own = S.own_best(held)
            lofo[held].update(own_best=own, own_best_query_options=own_o,
                              own_best_rule="the setting of the best objective (mean of R@2/5/8) "
                                            "on this family alone among every setting any selection "
                                            "(the full one and the three leave-one-out ones, ranker "
                                            "fits included) scored on it; its R@k are that setting's")
    per = lambda o: ({f: S.score(o, f) for f in fams}  # noqa: E731
                     | ({"2wiki_test": test.score(o)} if test else {}))
    ablations = []
    rows = a.rows if a.rows is not None else SHORT_ROWS
    for label, changes in ABLATIONS:
        if rows and not any(r in label for r in rows):
            continue
        o = chosen
        for n, v in changes.items():
            o = apply(o, n, v)
        if o == chosen and changes:
            continue  # the option is already off: nothing to ablate
        row = {"label": label, **{f: S.score(o, f) for f in fams}}
        row["lift_vs_selected"] = {f: round(S.score(o, f)["objective"] - S.score(chosen, f)["objective"], 4)
                                   for f in fams}
        ablations.append(row)
    out = {
        "command": "python benchmarks/quality_search.py " + " ".join(argv or sys.argv[1:]),
        "machine": machine_info(), "git_commit": commit,
        "git_dirty": dirty, "embedder": emb.name,
        "objective": "(R@2 + R@5 + R@8) / 3",
        "selection": "the worst dev family's lift over dense of the same index "
                     f"(families {list(fams)}), changes kept only above {a.min_gain} and only "
                     f"when no family loses more than {a.max_loss}",
        "dense": {**S.dense, **({"2wiki_test": test.score(replace(TUNED, method="dense"))}
                                if test else {})},
        "families": list(fams),
        "shipped_preset": {**per(shipped), "query_options": plain(shipped)},
        "selected": {**per(chosen), "query_options": plain(chosen)},
        "leave_one_family_out": lofo, "trail": S.trail, "ablations": ablations,
        "n_settings_scored": len(S.cache),
    }
    write_result(a.out, out, render)
    return 0


def write_result(stem: str, out: dict, render) -> None:
    """``stem``.json (the result) and ``stem``.md (its rendering), the rendering printed."""
    Path(stem).parent.mkdir(parents=True, exist_ok=True)
    Path(stem + ".json").write_text(json.dumps(out, indent=1, default=str) + "\n")
    text = render(out)
    Path(stem + ".md").write_text(text)
    print(text)


def _r(x: dict) -> str:
    return "/".join(f"{x['recall'][k]:.3f}" for k in KS)


def render(out: dict) -> str:
    fams = out["families"]
    cols = fams + (["2wiki_test"] if "2wiki_test" in out["dense"] else [])
    lines = [f"# STITCH settings chosen by the worst dev family ({out['embedder']})", "",
             f"Command: `{out['command']}`  ", f"Commit {out['git_commit']}"
             f"{' (dirty)' if out['git_dirty'] else ''}. Selection: {out['selection']}. "
             f"Objective {out['objective']}. Cells: R@2/R@5/R@8.", "",
             "| setting | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    lines.append("| dense | " + " | ".join(_r(out["dense"][c]) for c in cols) + " |")
    for label, key in (("shipped preset (config)", "shipped_preset"), ("selected", "selected")):
        lines.append(f"| {label} | " + " | ".join(_r(out[key][c]) for c in cols) + " |")
    if out["leave_one_family_out"]:
        lines += ["", "## Leave one family out (chosen on the other two; R@5)", "",
                  "| held-out family | dense | chosen on the other two | own-tuned best |",
                  "|---|---|---|---|"]
        for f, x in out["leave_one_family_out"].items():
            lines.append(f"| {f} | {x['dense']['recall'][5]:.3f} | {x['stitch']['recall'][5]:.3f} "
                         f"| {x['own_best']['recall'][5]:.3f} |")
    lines += ["", "## Ablations around the selected setting", "",
              "| row | " + " | ".join(cols) + " | objective change per family | wins / loses |",
              "|---" * (len(cols) + 3) + "|"]
    for x in out["ablations"]:
        x = {c: None for c in cols} | x
        d = x["lift_vs_selected"]
        wins = [f for f in fams if d[f] > 0.005]
        loses = [f for f in fams if d[f] < -0.005]
        lines.append(f"| {x['label']} | " + " | ".join(_r(x[c]) if x[c] else "-" for c in cols) + " | "
                     + ", ".join(f"{d[f]:+.3f}" for f in fams)
                     + f" | {'+' + ','.join(wins) if wins else ''} {'-' + ','.join(loses) if loses else ''} |")
    lines += ["", "Trail (per selection: the setting before the ranker stage, the ranker's "
              "weights and whether it was kept) is in the JSON file.", ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
