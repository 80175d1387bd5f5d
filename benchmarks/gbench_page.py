"""Results page of GraphRAG-Bench: ``benchmarks/results/quality_graphrag_bench.md`` from
``quality-graphrag_bench.json`` (and ``bge/quality-graphrag_bench.json`` when present),
with the metric validation and the paper's claims as context.

    python benchmarks/gbench_page.py
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RES = ROOT / "benchmarks" / "results"
QT = ("Fact Retrieval", "Complex Reasoning", "Contextual Summarize", "Creative Generation")
ORDER = ("coda", "coda_base", "coda_no_semantic", "coda_no_contextual", "coda_no_functional",
         "coda_no_elimination", "coda_no_cover", "coda_paper", "coda_paper_base", "coda_paper_no_semantic",
         "coda_paper_no_contextual", "coda_paper_no_functional", "coda_paper_no_elimination",
         "stitch", "stitch_consolidated", "dense", "bm25")


def _f(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def table(d: dict, sub: str) -> list[str]:
    rows = d["subsets"].get(sub)
    if not rows:
        return [f"_{sub}: not run_", ""]
    idx = d.get("indexes", {}).get(sub, {})
    lines = [f"### {sub.capitalize()} ({idx.get('n_questions', '?')} questions, "
             f"{idx.get('n_chunks', '?')} chunks, mean {idx.get('mean_chunk_chars', '?')} characters)",
             "", "| method | all | " + " | ".join(QT) + " | LLM evidence recall | LLM context relevance | p50 ms | run |",
             "|---|---|" + "---|" * (len(QT) + 4)]
    names = [m for m in ORDER if m in rows] + sorted(set(rows) - set(ORDER))
    for m in names:
        r = rows[m]
        c = r["coverage"]
        er = r.get("evidence_recall_llm")
        cr = r.get("context_relevance_llm")
        lines.append(f"| {m} | {_f(c['all'])} | " + " | ".join(_f(c.get(t)) for t in QT)
                     + f" | {'not run' if er is None else _f(er.get('all'))}"
                     + f" | {'not run' if cr is None else _f(cr.get('all'))}"
                     + f" | {_f(r.get('latency_ms_p50'))}"
                     + f" | {_run(m, r.get('run', {}).get('git_commit'))} |")
    return lines + [""]


BASELINES = ("dense", "bm25", "stitch")
TARGET = {"all": 0.03, "Complex Reasoning": 0.05}
MULTIHOP = (("2Wiki dev (first 200)", "quality_2wikimultihopqa_dev.json"),
            ("HotpotQA sample", "quality-hotpotqa_train.json"),
            ("MuSiQue dev", "quality-musique_dev.json"))
CODA_ROWS = ("coda", "coda_base", "coda_no_semantic", "coda_no_contextual",
             "coda_no_functional", "coda_no_elimination", "coda_no_cover", "coda_paper")


def margins(d: dict, sub: str) -> list[str]:
    """Where ``coda`` stands against the best of dense, BM25 and ``stitch`` per type,
    against the issue's targets (+3 points overall, +5 on Complex Reasoning)."""
    rows = d["subsets"].get(sub)
    if not rows or "coda" not in rows or not all(b in rows for b in BASELINES):
        return []
    at = current(rows["coda"].get("run", {}).get("git_commit"))
    stale = " **(the `coda` row is older than the current CODA defaults: stale)**" \
        if "stale" in at or at == "?" else ""
    out = [f"`coda` against the best of {', '.join(BASELINES)} ({sub}){stale}:", ""]
    for t in ("all",) + QT:
        best = max(BASELINES, key=lambda b: rows[b]["coverage"].get(t, -1))
        m = rows["coda"]["coverage"].get(t, 0) - rows[best]["coverage"].get(t, 0)
        goal = TARGET.get(t)
        verdict = ("" if goal is None else
                   f"; target +{goal * 100:.0f}: **{'met' if m >= goal - 1e-12 else 'missed'}**")
        beats = "beats" if m > 0 else "does **not** beat"
        out.append(f"- {t}: {_f(rows['coda']['coverage'].get(t))} vs {best} "
                   f"{_f(rows[best]['coverage'].get(t))}, {m * 100:+.1f} points ({beats} it{verdict})")
    full = rows["coda"]["coverage"]["all"]
    abl = [(a, rows[a]["coverage"]["all"] - full) for a in CODA_ROWS[1:7] if a in rows]
    if abl:
        better = [a for a, dv in abl if dv >= 0.0005]  # shown as +0.1 or more
        out.append("- Table 2 reading (all, points against `coda`): "
                   + ", ".join(f"{a} {dv * 100:+.1f}" for a, dv in abl)
                   + (f"; **{', '.join(better)} above the full system**" if better else ""))
    return out + [""]


#: the commit that set the current CODA defaults (sims "lazy", ppr_solver "local",
#: functional_scope "touched"; graph_weight 0.03 and align_items "all" since 7a50bcb;
#: cover_weight 0.5 since 3d99a9f; fact_weight 0.4 since 4ddd990; cover_weight 0.3, fact_weight
#: 0.6 and cover_pairs 0.3 since c381939)
DEFAULTS_COMMIT = "c381939"
#: ... and for ``coda_paper*`` rows, which run the published selection (cover_weight and
#: fact_weight 0 whatever the default, methods/coda.py): 3d99a9f / 4ddd990 / c381939 did not move them
PAPER_DEFAULTS_COMMIT = "20cacf9"


def current(commit: str | None, method: str = "coda") -> str:
    """The row's commit, marked when it predates the current CODA defaults."""
    if not commit:
        return "?"
    since = PAPER_DEFAULTS_COMMIT if method.startswith("coda_paper") else DEFAULTS_COMMIT
    r = subprocess.run(["git", "merge-base", "--is-ancestor", since, commit],
                       cwd=ROOT, capture_output=True)
    return commit[:7] + ("" if r.returncode == 0 else " (older CODA defaults: stale)")


def _run(method: str, commit: str | None) -> str:
    """A table row's commit; a CODA row older than the current defaults is flagged."""
    if not commit:
        return "not recorded"
    return current(commit, method) if method.startswith("coda") else commit[:7]


def multihop(sub: str) -> list[str]:
    """CODA rows on the multi-hop dev families beside dense of the same index."""
    base = RES if sub == "" else RES / sub
    lines = ["| family | method | R@2 | R@5 | R@8 | >= dense at R@2 / 5 / 8 | measured at |",
             "|---|---|---|---|---|---|---|"]
    found = False
    for fam, name in MULTIHOP:
        p = base / name
        if not p.is_file():
            lines.append(f"| {fam} | - | not run | | | | |")
            continue
        ms = json.loads(p.read_text(encoding="utf-8"))["methods"]
        dense = ms.get("dense")
        for m in ("dense",) + CODA_ROWS:
            r = ms.get(m)
            if r is None:
                continue
            found = found or m != "dense"
            ok = "" if m == "dense" or dense is None else " / ".join(
                "yes" if r[f"recall@{k}"] >= dense[f"recall@{k}"] else "**no**" for k in (2, 5, 8))
            run = r.get("run", {})
            at = (current(run.get("git_commit"), m) if m != "dense"
                  else str(run.get("git_commit", "?"))[:7])
            lines.append(f"| {fam} | {m} | " + " | ".join(_f(r[f"recall@{k}"]) for k in (2, 5, 8))
                         + f" | {ok} | {at} |")
    return lines + [""] if found else []


def tuning() -> list[str]:
    """The option search behind the defaults: per graph weight, CODA's margins and how far
    each pathway (and all four: Base) moves coverage."""
    p = RES / "tuning_coda_gbench_minilm.json"
    if not p.is_file():
        return []
    d = json.loads(p.read_text(encoding="utf-8"))
    rows = d["rows"]
    fams = [n for n in rows if n.startswith("gw") and n.count(":") == 1]
    out = ["## How the defaults were chosen (MiniLM, both subsets, all dev questions)", "",
           f"`{d['command']}` (commit {d['git_commit'][:7]}; `tuning_coda_gbench_minilm.json`). "
           f"Rule: {d['chosen_rule']}. Chosen: `{d['chosen']}`. The figures are in-sample "
           "(the same dev questions as the table above).", "",
           "| graph weight : items | Medical all | Medical CR | Novel all | Novel CR | "
           "w/o SemA | w/o ConA | w/o FunA | w/o Elim | Base (all four off, raw KG) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for f in fams:
        m = rows[f]["margins"]
        cells = [f"{m[k] * 100:+.1f}" for k in ("medical:all", "medical:Complex Reasoning",
                                                 "novel:all", "novel:Complex Reasoning")]
        for x in ("no_semantic", "no_contextual", "no_functional", "no_elimination", "base_off"):
            dv = rows.get(f"{f}:{x}", {}).get("delta_vs_full")
            cells.append("-" if dv is None else
                         f"{dv['medical']['all'] * 100:+.1f} / {dv['novel']['all'] * 100:+.1f}")
        out.append(f"| `{f}` | " + " | ".join(cells) + " |")
    return out + ["", "Margins: points over the best of dense, BM25 and `stitch` per cell; "
                  "ablation cells: points of coverage (all) the variant gains over the full "
                  "row, Medical / Novel. Where an ablation cell is positive, switching the "
                  "pathway off helps on our offline KG.", ""]


def main() -> None:
    out = ["# GraphRAG-Bench: retrieval by question type", "",
           "Offline **evidence coverage**, version 2 (docs/architecture.md §9; no LLM): the "
           "share of a question's evidence statements of which some 3-sentence window of one "
           "of the top-5 passages holds at least 60% of the content words and every name, "
           "averaged per question type. "
           "It is a stand-in validated against hand labels (below), **not** the benchmark's "
           "LLM-judged evidence recall; the LLM-judged columns need an endpoint "
           "(`--judge-model`, docs/real_endpoint.md) and none exists here: not run.", ""]
    for name, label in (("quality-graphrag_bench.json", "MiniLM"),
                        ("bge/quality-graphrag_bench.json", "bge-small")):
        p = RES / name
        if not p.is_file():
            out += [f"## {label}: not run", ""]
            continue
        d = json.loads(p.read_text(encoding="utf-8"))
        m = d["machine"]
        out += [f"## {label} (`{d['embedder']}`)", "",
                f"- command: `{d['command']}` (rows merged from runs of the same embedder; "
                f"each run's command is in `{name}`)",
                f"- commit {d.get('git_commit', '?')[:10]}, {m['cpu']}, {m['cores']} cores, "
                f"load at start {m['loadavg_at_start'][0]:.1f} (shared machine)",
                f"- chunking: {d['chunking']['max_words']} words ({d['chunking']['target']}); "
                f"context = top {d['chunking']['top_k_context']} passages", ""]
        for sub in ("medical", "novel"):
            out += table(d, sub)
            out += margins(d, sub)
        mv = d.get("metric_validation")
        if mv:
            out += [f"Metric validation: {mv['n_labels']} hand-labelled pairs held out from "
                    f"the metric's design, accuracy {mv['accuracy']:.3f}, Cohen's kappa "
                    f"{mv['kappa']:.3f} (`benchmarks/graphrag_bench_labels/`, "
                    "`gbench_metric_validation.json`, which also has both versions on the "
                    "design labels).", ""]
    out += tuning()
    for label, sub in (("MiniLM", ""), ("bge-small", "bge")):
        mh = multihop(sub)
        out += [f"## Multi-hop dev families, {label}: passage recall (the harness's files)", ""]
        out += mh or ["not run", ""]
    out += ["Rows: `coda` = our options (relevance alignment: dense + lexical + best "
            "sentence + kept-item term, z-score elimination, near-duplicate skip; "
            "`hyperrag_fast/config.py` `CodaOptions`); `coda_paper` = the published mechanisms "
            "(count alignment, top-fraction elimination); `*_base` = CodaRAG Table 2 Base "
            "(entry finding only, on the raw KG without merges); `*_no_X` = one pathway or "
            "the elimination off (Table 2 w/o SemA / ConA / FunA / Elim).", "",
            "## The paper's figures, as context only", "",
            "CodaRAG (seed text, §5) reports on GraphRAG-Bench Medical and Novel that CodaRAG "
            "gains 7-10 points of LLM-judged evidence recall (REC) and 3-11 points of accuracy "
            "over HippoRAG 2 across Fact, Reason and Creation questions, with GPT-5-mini and "
            "text-embedding-3-large. The per-type HippoRAG 2 / LightRAG numbers of its Table 1 "
            "did not survive the text extraction of the copy we hold, so none is quoted here; "
            "the text keeps one Table 2 figure (Medical): entry-only retrieval on the "
            "consolidated KG raises REC on Creation questions from 35.84% (Base) to 40.38%. "
            "Either way they are LLM-judged recall over the benchmark's full question sets, "
            "not offline coverage on our dev share: not a like-for-like comparison.", ""]
    (RES / "quality_graphrag_bench.md").write_text("\n".join(out) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
