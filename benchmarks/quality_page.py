"""Assemble the tables of ``benchmarks/results/quality.md`` from the harness's result
files (nothing typed by hand): 2Wiki test (800), dev (200, a tuning family), all
1,000 (the question-weighted mean of dev and test, exact for a mean recall), HotpotQA,
MuSiQue dev; both embedders; every cell where ``stitch`` does not beat ``dense``.

    python benchmarks/quality_page.py

The prose reading lives in ``benchmarks/quality_reading.md`` and is appended verbatim.
"""
from __future__ import annotations

import json
from pathlib import Path

R = Path("benchmarks/results")
ORDER = ["dense", "bm25", "binary_ppr", "stitch_paper", "stitch", "no_stibp", "no_ppr",
         "no_spatial", "no_temporal", "binary_prior", "merge_semi", "merge_full", "merge_none",
         "decay_tanh", "decay_exp", "decay_sigmoid", "stitch_consolidated", "coda",
         "coda_no_semantic", "coda_no_contextual", "coda_no_functional", "coda_no_elimination", "coda_no_cover"]


def load(name: str, sub: str = "") -> dict | None:
    p = R / sub / f"quality_{name}.json"
    if name.endswith("_test") and not p.exists():  # the test split: the contract file
        p = R / sub / f"quality-{name[:-len('_test')]}.json"
    if name == "musique_dev_all" and not p.exists():  # MuSiQue dev: its contract file
        p = R / sub / "quality-musique_dev.json"
    return json.loads(p.read_text()) if p.exists() else None


def row(name: str, m: dict, extra: str = "") -> str:
    lat = m.get("latency_ms", {})
    p50 = f"{lat['p50']:.1f}" if "p50" in lat else "-"
    return (f"| {name} | {m['recall@2']:.3f} | {m['recall@5']:.3f} | {m['recall@8']:.3f} | "
            f"{p50} |{extra}")


TYPES_2WIKI = ("comparison", "bridge_comparison", "compositional", "inference")
TYPES_HOTPOT = ("bridge", "comparison")
TYPES_MUSIQUE = ("2hop", "3hop", "4hop")
#: the three dev families (issue 21): (label, result file stem, types)
FAMILIES = (("2Wiki dev", "2wikimultihopqa_dev", TYPES_2WIKI),
            ("HotpotQA sample", "hotpotqa_train_test", TYPES_HOTPOT),
            ("MuSiQue dev", "musique_dev_all", TYPES_MUSIQUE))
#: embedder -> results sub-folder
EMBEDDERS = (("MiniLM", ""), ("bge-small", "bge"))


def preset_note(res: dict) -> str:
    """Whether the file's ``stitch`` row ran under today's preset of its embedder."""
    from dataclasses import asdict

    from hyperrag_fast.config import preset_for
    from hyperrag_fast.eval.harness import _plain
    row = res["methods"].get("stitch")
    if row is None:
        return ""
    want = json.loads(json.dumps(_plain(asdict(preset_for(res["embedder"]))), default=str))
    got = json.loads(json.dumps(row.get("options", {}), default=str))
    for d in (want, got):
        d.pop("method", None)
        d.get("stitch", {}).pop("top_k", None)
    from hyperrag_fast.config import PAPER
    off = json.loads(json.dumps(_plain(asdict(PAPER)), default=str))
    for part in ("stitch", "hybrid"):  # options removed since are not compared (as
        a, b = want.get(part, {}), got.get(part, {})  # render_figures.option_diff); one added
        for k in [k for k in b if k not in a]:  # since counts only when it is on (not at
            b.pop(k)  # False/0/empty nor at the paper's value)
        for k in [k for k in a if k not in b and (a[k] in (False, 0, 0.0, [], ())
                                                  or off.get(part, {}).get(k, object()) == a[k])]:
            a.pop(k)
    return ("" if got == want else " **`stitch` here ran under an earlier preset, not today's "
            "preset of this embedder (its options are in the file).**")


def table(res: dict, title: str, by_gold: bool = False, types: tuple[str, ...] = ()) -> list[str]:
    ms = res["methods"]
    head = "| method | R@2 | R@5 | R@8 | p50 ms |"
    sep = "|---|---|---|---|---|"
    if by_gold:
        head += " 2 gold: R@2/5/8 | 4 gold: R@2/5/8 |"
        sep += "---|---|"
    for t in types:
        n = next((m["by_type"][t]["n"] for m in ms.values() if t in m.get("by_type", {})), 0)
        head += f" {t} (n={n}): R@2/5/8 |"
        sep += "---|"
    run = (ms.get("stitch") or next(iter(ms.values())))["run"]  # command and commit of one row
    out = [f"### {title}", "", f"Command (of the `stitch` row; every row's own is in the file): `{run['command']}`  ",
           f"Commit {run.get('git_commit', '?')[:10]}, {res['n_questions']} questions, "
           f"extractor `{res['extractor']}`, embedder `{res['embedder']}`.{preset_note(res)}", "",
           head, sep]
    for name in [n for n in ORDER if n in ms] + [n for n in ms if n not in ORDER]:
        m = ms[name]
        extra = ""
        if by_gold:
            for g in ("2", "4"):
                b = m["by_n_gold"].get(g)
                extra += (f" {b['recall@2']:.3f}/{b['recall@5']:.3f}/{b['recall@8']:.3f} |"
                          if b else " - |")
        for t in types:
            b = m.get("by_type", {}).get(t)
            extra += (f" {b['recall@2']:.3f}/{b['recall@5']:.3f}/{b['recall@8']:.3f} |"
                      if b else " - |")
        out.append(row(name, m, extra))
    return out + [""]


def combined(dev: dict, test: dict) -> list[str]:
    nd, nt = dev["n_questions"], test["n_questions"]
    out = ["### 2WikiMultiHopQA, all 1,000 questions (= (200 dev + 800 test) weighted)", "",
           "| method | R@2 | R@5 | R@8 |", "|---|---|---|---|"]
    for name in [n for n in ORDER if n in test["methods"] and n in dev["methods"]]:
        a, b = dev["methods"][name], test["methods"][name]
        r = [(a[f"recall@{k}"] * nd + b[f"recall@{k}"] * nt) / (nd + nt) for k in (2, 5, 8)]
        out.append(f"| {name} | {r[0]:.3f} | {r[1]:.3f} | {r[2]:.3f} |")
    return out + [""]


def families_grid() -> list[str]:
    """Every method x three dev families x two embedders (R@2/5/8), from the files."""
    got = [(f"{fl} ({el})", load(stem, sub)) for el, sub in EMBEDDERS for fl, stem, _ in FAMILIES]
    got = [(label, res) for label, res in got if res]
    if not got:
        return []
    methods = [n for n in ORDER if any(n in r["methods"] for _, r in got)]
    out = ["## Three dev families x two embedders", "",
           "Each embedder with its own preset (`config.preset_for`, chosen by "
           "`benchmarks/quality_grid.py` by the worst family's lift over dense). Cells "
           "R@2/R@5/R@8; the command and commit of each column are in its file "
           "(`quality_<set>.json`, bge ones under `bge/`). † = a row measured at another "
           "commit than the column's `stitch` row, under the options recorded with it (an "
           "earlier preset for the STITCH variants).", "",
           "| method | " + " | ".join(label for label, _ in got) + " |",
           "|---" * (len(got) + 1) + "|"]
    for name in methods:
        cells = []
        for _, res in got:
            m = res["methods"].get(name)
            at = res["methods"].get("stitch", {}).get("run", {}).get("git_commit")
            old = " †" if m and m.get("run", {}).get("git_commit") != at else ""
            cells.append(f"{m['recall@2']:.3f}/{m['recall@5']:.3f}/{m['recall@8']:.3f}{old}" if m else "-")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    out += ["", "Commands (of each column's `stitch` row; the † rows name theirs in the file):", ""]
    run = lambda res: res["methods"].get("stitch", next(iter(res["methods"].values())))["run"]  # noqa: E731
    out += [f"* {label}: `{run(res)['command']}` (commit {str(run(res).get('git_commit'))[:10]})"
            for label, res in got]
    return out + [""]


def _per_family(section: dict, key: str):
    """(embedder, family, row) of a ``generalization.json`` section keyed by embedder, the
    families being the entries that hold ``key``."""
    for emb, x in section.items():
        for fam in [f for f in x if isinstance(x[f], dict) and key in x[f]]:
            yield emb, fam, x[fam]


def _gap(v: float) -> str:
    return f"{v:+.3f}{' (over 2 points)' if v > 0.02 else ''}"


def lofo_section() -> list[str]:
    """In-sample (the shipped preset, chosen on all three families) beside
    leave-one-family-out (chosen on the other two), from ``generalization.json``."""
    p = R / "generalization.json"
    if not p.exists():
        return []
    g = json.loads(p.read_text())
    lofo, per = g.get("leave_one_family_out", {}), g.get("per_embedder", {})
    out = ["## In-sample and leave-one-family-out (R@5)", "",
           "Per dev family and embedder: `dense`; the shipped preset (chosen on all three "
           "families, so in-sample here); the setting chosen on the other two families "
           "(leave-one-family-out, the ranker trained on those two); the family's own-tuned "
           "best and the gap. Definition (`generalization.json`, whose `sources` name the "
           "selection files and commands): "
           + g.get("leave_one_family_out_definition", "own best = the best on the family alone "
                   "among the settings the searches scored."), "",
           "| family | embedder | dense | shipped (in-sample) | chosen on the other two | own best | "
           "gap to own best |", "|---|---|---|---|---|---|---|"]
    for fam, embs in lofo.items():
        for emb, x in embs.items():
            shipped = per.get(emb, {}).get(fam, {}).get("stitch", {}).get("recall@5")
            gap = x["own_best"]["recall@5"] - x["stitch"]["recall@5"]
            out.append(f"| {fam} | {emb} | {x['dense']['recall@5']:.3f} | "
                       f"{'-' if shipped is None else f'{shipped:.3f}'} | {x['stitch']['recall@5']:.3f} | "
                       f"{x['own_best']['recall@5']:.3f} | {_gap(gap)} |")
    variants = g.get("leave_one_family_out_variants", {})
    if variants:
        out += ["", "The same grids with another ranker fit (`generalization.json` "
                    "`leave_one_family_out_variants`, `quality_grid.py --c/--prior`, "
                    "`train_ranker.Prior`; the presets do not follow them; R@5):", "",
                "| ranker fit | family | embedder | in-sample | chosen on the other two | own best | "
                "gap to own best |", "|---|---|---|---|---|---|---|"]
        for name, v in variants.items():
            for fam, embs in v["leave_one_family_out"].items():
                for emb, x in embs.items():
                    ins = v["in_sample"].get(emb, {}).get(fam, {}).get("recall@5")
                    out.append(f"| {name} | {fam} | {emb} | {'-' if ins is None else f'{ins:.3f}'} | "
                               f"{x['stitch']['recall@5']:.3f} | {x['own_best']['recall@5']:.3f} | "
                               f"{_gap(x['own_best']['recall@5'] - x['stitch']['recall@5'])} |")
    bias = g.get("leave_one_family_out_cross_validated", {})
    if bias:
        out += ["", "How much of each gap is the own-tuned best's in-sample optimism "
                    "(`experiments/lofo_bias.py`: the family's questions split in halves, the grid "
                    "point and the ranker chosen on one half and scored on the other, repeated; the "
                    "gap's paired standard error over questions; R@5):", "",
                "| family | embedder | chosen on the other two | own best, in-sample | own best, "
                "cross-validated | gap to the cross-validated own best |", "|---|---|---|---|---|---|"]
        for emb, fam, r in _per_family(bias, "transfer_recall@5"):
            out.append(f"| {fam} | {emb} | {r['transfer_recall@5']:.3f} | {r['own_in_sample_recall@5']:.3f} | "
                       f"{r['own_cross_validated_recall@5']:.3f} | {_gap(r['gap_cross_validated'])} "
                       f"(± {r['gap_cross_validated_se']:.3f}) |")
    ranker = g.get("ranker_leave_one_family_out", {})
    if ranker:
        out += ["", "The ranker stage alone leave-one-family-out (the preset upstream of the ranker "
                    "fixed; weights trained on the other two families, `train_ranker.py`; R@5):", "",
                "| family | embedder | no ranker | ranker trained on all three (in-sample) | "
                "ranker trained on the other two | gap |", "|---|---|---|---|---|---|"]
        for emb, fam, r in _per_family(ranker, "no_ranker"):
            gap = r["trained_on_all"]["recall@5"] - r["trained_on_others"]["recall@5"]
            out.append(f"| {fam} | {emb} | {r['no_ranker']['recall@5']:.3f} | "
                       f"{r['trained_on_all']['recall@5']:.3f} | {r['trained_on_others']['recall@5']:.3f} | "
                       f"{_gap(gap)} |")
    links = g.get("rank_links_leave_one_family_out", {})
    if links:
        cols = ", ".join(f"`{c}`" for c in next(iter(links.values()))["columns"])
        out += ["", f"The ranker's link columns ({cols}; `experiments/rank_links.py`): the preset "
                    "upstream of the ranker fixed, the ranker trained on all three families "
                    "(in-sample) or on the other two (leave-one-family-out), without and with the "
                    "columns; ranked from each question's C_q features as the query path ranks (R@5):", "",
                "| family | embedder | without, in-sample | without, trained on the other two | "
                "with, in-sample | with, trained on the other two | gap |", "|---|---|---|---|---|---|---|"]
        for emb, fam, r in _per_family(links, "in_sample"):
            gap = r["in_sample"]["recall@5"] - r["trained_on_others"]["recall@5"]
            out.append(f"| {fam} | {emb} | {r['without_links_in_sample']['recall@5']:.3f} | "
                       f"{r['without_links_trained_on_others']['recall@5']:.3f} | "
                       f"{r['in_sample']['recall@5']:.3f} | {r['trained_on_others']['recall@5']:.3f} | {_gap(gap)} |")
    return out + [""] + link_columns(links)


def link_columns(links: dict) -> list[str]:
    """Per candidate column of ``rank_links`` (each added alone to the ranker, then the
    shipped pair and all of them): R@5 in-sample / trained on the other two per family, and
    the worst family's lift over dense (objective), from the ``rank_links.py`` files."""
    out = []
    for emb, x in links.items():
        d = json.loads(Path(x["file"]).read_text())
        fams = list(d["dense"])
        out += [f"Each candidate column ({emb}; `{x['file']}`, commit {d['git_commit'][:10]}): R@5 "
                "in-sample / trained on the other two; worst family's lift over dense (objective "
                "mean R@2/5/8) in-sample / trained on the other two:", "",
                "| columns added | " + " | ".join(fams) + " | worst lift |", "|---" * (len(fams) + 2) + "|"]
        for r in d["rows"]:
            name = ", ".join(r["features"][9:]) or "none (the ranker of the earlier preset)"
            if len(r["features"]) > 9 + len(x["columns"]) + 1:
                name = "all candidate columns"
            out.append(f"| {name}{' (shipped)' if r.get('shipped') else ''} | " + " | ".join(
                f"{r['in_sample'][f]['recall']['5']:.3f} / {r['lofo'][f]['recall']['5']:.3f}" for f in fams)
                + f" | {r['worst_lift_in_sample']:+.4f} / {r['worst_lift_lofo']:+.4f} |")
        out.append("")
    return out


def graph_floor() -> list[str]:
    """The graph floor (``HybridOptions.graph_mix``), the "title_best" column and the ranker's
    L2 strength replayed at each preset's upstream, from ``graph_floor.json``."""
    p = Path("benchmarks/experiments/results/quality_grid/graph_floor.json")
    if not p.exists():
        return []
    d = json.loads(p.read_text())
    out = ["## The graph floor, replayed (R@5)", "",
           f"`{d['command']}` (commit {d['git_commit'][:10]}; features collected by "
           + ", ".join(f"`{c['command']}` at {c['git_commit'][:10]}" for c in d["collected"].values())
           + "). The upstream of each embedder's preset fixed; the ranker trained on the three "
             "families (in-sample) or on the other two (out); `no_ppr` = the same weights on the "
             "`ppr=\"none\"` features. Cells: in-sample / out / no_ppr; worst lift = the worst "
             "family's lift over dense (objective mean R@2/5/8) in-sample / out; ≥ = `stitch` >= "
             "`no_ppr` on every family; * = the row the rule (best worst lift in-sample within "
             f"{d['min_gain']}, then out of sample) picks.", ""]
    for emb, x in d["embedders"].items():
        fams = list(x["rows"][0]["families"])
        out += [f"{emb}:", "", "| graph_mix | C | extra columns | " + " | ".join(fams) + " | worst lift | ≥ |",
                "|---" * (len(fams) + 5) + "|"]
        for r in x["rows"]:
            cells = " | ".join(f"{r['families'][f]['in_sample']['recall']['5']:.3f} / "
                               f"{r['families'][f]['lofo']['recall']['5']:.3f} / "
                               f"{r['families'][f]['no_ppr_same_weights']['recall']['5']:.3f}" for f in fams)
            extra = ", ".join(c for c in r["columns"] if c not in ("bridge_title", "bridge_title_words"))
            out.append(f"| {r['graph_mix']}{' *' if r.get('chosen') else ''} | {r['c']} | {extra or '-'} | "
                       f"{cells} | {r['worst_lift_in_sample']:+.4f} / {r['worst_lift_lofo']:+.4f} | "
                       f"{'≥' if r['stitch_ge_no_ppr_everywhere'] else ''} |")
        out.append("")
    return out


def not_beating_dense(sets: list[tuple[str, dict]]) -> list[str]:
    """Every cell (set, question type, k) where ``stitch`` does not beat ``dense``."""
    out = ["## Where `stitch` does not beat `dense`", "",
           "Every cell of the tables above (all questions and each question type, R@2/5/8) "
           "where `stitch` is at or below `dense`, computed from the same files:", ""]
    found = 0
    for label, res in sets:
        ms = res["methods"]
        if "stitch" not in ms or "dense" not in ms:
            continue
        s, d = ms["stitch"], ms["dense"]
        rows = [("all", s, d)] + [(t, s["by_type"][t], d["by_type"][t])
                                  for t in sorted(s.get("by_type", {})) if t in d.get("by_type", {})]
        for t, a, b in rows:
            ks = [k for k in (2, 5, 8) if a[f"recall@{k}"] <= b[f"recall@{k}"]]
            if ks:
                found += 1
                n = f", n={a['n']}" if "n" in a else ""
                out.append(f"* {label}, {t}{n}: " + "; ".join(
                    f"R@{k} stitch {a[f'recall@{k}']:.3f} vs dense {b[f'recall@{k}']:.3f}" for k in ks))
    if not found:
        out.append("* none: `stitch` is above `dense` in every cell.")
    out += ["", "And where `stitch` is below `no_ppr` (the graph stage costs recall; all questions, "
                "R@2/5/8):", ""]
    below = 0
    for label, res in sets:
        ms = res["methods"]
        if "stitch" in ms and "no_ppr" in ms:
            ks = [k for k in (2, 5, 8) if ms["stitch"][f"recall@{k}"] < ms["no_ppr"][f"recall@{k}"]]
            if ks:
                below += 1
                out.append(f"* {label}: " + "; ".join(
                    f"R@{k} stitch {ms['stitch'][f'recall@{k}']:.3f} vs no_ppr {ms['no_ppr'][f'recall@{k}']:.3f}"
                    for k in ks))
    if not below:
        out.append("* none.")
    return out + [""]


def main() -> None:
    test, dev = load("2wikimultihopqa_test"), load("2wikimultihopqa_dev")
    hot = load("hotpotqa_train_test")
    lines = ["# Retrieval quality: every method on one index", "",
             "Passage Recall@k (HippoRAG definition) with the offline extractor (spaCy small) and "
             "the local embedder (all-MiniLM-L6-v2, int8 ONNX) for every method. Latency = "
             "candidate search + graph stage per query, single thread, query embedding excluded, "
             "on a shared 2-core machine (see each JSON for load). Generated by "
             "`python benchmarks/quality_page.py` from the JSON files beside it.", ""]
    if test:
        lines += table(test, "2WikiMultiHopQA test split (800 questions) — the reported figures", by_gold=True)
        lines += table(test, "2WikiMultiHopQA test split by question type (types from the "
                             "question templates, `eval.data.twowiki_type`)", types=TYPES_2WIKI)
    if dev and test:
        lines += combined(dev, test)
    if dev:
        lines += table(dev, "2WikiMultiHopQA dev split (200 questions) — the tuning split", by_gold=True)
    if hot:
        lines += table(hot, "HotpotQA sample (100 questions, test only)", types=TYPES_HOTPOT)
    for name, sub in (("2wikimultihopqa_test", "bge"), ("hotpotqa_train_test", "bge")):
        res = load(name, sub)
        if res:
            kind = "2WikiMultiHopQA test" if name.startswith("2wiki") else "HotpotQA sample"
            lines += table(res, f"{kind} with the bge-small-en-v1.5 embedder (`--embedder "
                                f"bge-small`; options of each row in the file)",
                           types=TYPES_2WIKI if name.startswith("2wiki") else TYPES_HOTPOT)
    for el, sub in EMBEDDERS:
        res = load("musique_dev_all", sub)
        if res:
            lines += table(res, f"MuSiQue dev (112 questions, 1,980 passages; {el}) by hop count",
                           types=TYPES_MUSIQUE)
    bdev = load("2wikimultihopqa_dev", "bge")
    if bdev:
        lines += table(bdev, "2WikiMultiHopQA dev with bge-small", types=TYPES_2WIKI)
    lines += families_grid()
    lines += lofo_section()
    lines += graph_floor()
    sets = [(label, res) for label, res in (
        ("2Wiki test (MiniLM)", test), ("2Wiki dev (MiniLM)", dev), ("HotpotQA (MiniLM)", hot),
        ("MuSiQue dev (MiniLM)", load("musique_dev_all")),
        ("2Wiki test (bge)", load("2wikimultihopqa_test", "bge")),
        ("2Wiki dev (bge)", bdev),
        ("HotpotQA (bge)", load("hotpotqa_train_test", "bge")),
        ("MuSiQue dev (bge)", load("musique_dev_all", "bge"))) if res]
    sets = [(label + (" [earlier preset]" if preset_note(res) else ""), res) for label, res in sets]
    lines += not_beating_dense(sets)
    reading = Path("benchmarks/quality_reading.md")
    if reading.exists():
        lines += [reading.read_text()]
    (R / "quality.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {R / 'quality.md'}")


if __name__ == "__main__":
    main()
