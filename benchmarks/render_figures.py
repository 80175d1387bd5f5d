"""Every figure the README and the docs quote, rendered from the result files.

    python benchmarks/render_figures.py           # rewrite every marked section in place
    python benchmarks/render_figures.py --check   # exit 1 naming each stale section

A quoted figure stands between ``<!-- fig:NAME -->`` and ``<!-- /fig:NAME -->`` in one of
``DOCS``; NAME is a function below that reads its result file(s) and returns the text.
``tests/test_figures.py`` fails when a marked text differs from what its file gives, so a
rerun benchmark is followed by this script, never by hand-edited figures. Each text says
at which commit it was measured and, where the file records options, whether they are the
current preset's (``config.TUNED``) or which options differ.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ("README.md", "docs/architecture.md", "benchmarks/README.md")
MARK = re.compile(r"<!-- fig:(?P<name>[a-z0-9_]+) -->(?P<body>.*?)<!-- /fig:(?P=name) -->", re.S)
FIGURES: dict[str, Callable[[], str]] = {}


def figure(fn: Callable[[], str]) -> Callable[[], str]:
    FIGURES[fn.__name__] = fn
    return fn


# ------------------------------------------------------------------ reading the files
def load(rel: str) -> dict[str, Any]:
    return json.loads((RESULTS / rel).read_text(encoding="utf-8"))


def quality_file(sub: str, dataset: str, split: str) -> dict[str, Any]:
    """The harness's file of a split: the contract name for the test split (written since
    the duplicate copies went), else ``quality_<dataset>_<split>.json``."""
    if split == "test" and (RESULTS / sub / f"quality-{dataset}.json").is_file():
        return load(f"{sub}/quality-{dataset}.json")
    return load(f"{sub}/quality_{dataset}_{split}.json")


def commit(d: dict[str, Any]) -> str:
    """The short commit a result file records (the layouts of the scripts differ)."""
    for get in (lambda: d["git_commit"], lambda: d["machine"]["git"]["commit"],
                lambda: d["run"]["git_commit"], lambda: d["run"]["machine"]["git"]["commit"]):
        try:
            c = get()
        except (KeyError, TypeError):
            continue
        if c:
            return str(c)[:7]
    return "commit not recorded"


def load_avg(d: dict[str, Any]) -> str:
    m = d.get("machine") or d.get("run", {}).get("machine", {})
    la = m.get("loadavg_at_start")
    return f"load {la[0]:.1f}" if la else "load not recorded"


def r3(x: float) -> str:
    s = f"{x:.3f}"
    return s[1:] if s.startswith("0.") else s


def cells(m: dict[str, Any]) -> str:
    """R@2/5/8 of one method row."""
    return "/".join(r3(m[f"recall@{k}"]) for k in (2, 5, 8))


def _json(x: Any) -> Any:
    return json.loads(json.dumps(x, default=str))


def preset(embedder: str | None = None) -> dict[str, Any]:
    """The options a quality row of the default method records when run today (on an
    index of ``embedder``: its preset, ``config.preset_for``)."""
    from hyperrag_fast.eval.harness import _plain, method_options
    from hyperrag_fast.config import TUNED, preset_for
    base = preset_for(embedder) if embedder else None
    return _json(_plain(asdict(method_options(TUNED.method, None, 8, base)
                               if base is not None else method_options(TUNED.method, None, 8))))


def paper_off() -> dict[str, Any]:
    """The published method's options (every signal off), as a row records them."""
    from hyperrag_fast.config import PAPER
    from hyperrag_fast.eval.harness import _plain
    return _json(_plain(asdict(PAPER)))


def option_diff(recorded: dict[str, Any], current: dict[str, Any],
                prefix: str = "", off: dict[str, Any] | None = None) -> tuple[list[str], list[str]]:
    """(options ``recorded`` sets otherwise than ``current``, options it does not record).
    Options a record has and the code no longer has cannot run any more: not compared.
    An option added since counts only when it is on: not False/0/empty and not at its
    value in ``off`` (the paper's options: e.g. one round more = 1)."""
    other, missing = [], []
    off = paper_off() if off is None else off
    for k, v in current.items():
        if isinstance(v, dict) and isinstance(recorded.get(k), dict):
            o, m = option_diff(recorded[k], v, f"{prefix}{k}.", off.get(k) or {})
            other, missing = other + o, missing + m
        elif k not in recorded:
            if v not in (False, 0, 0.0, [], ()) and off.get(k, object()) != v:  # added since, off
                missing.append(f"{prefix}{k}")
        elif recorded[k] != v:
            other.append(f"{prefix}{k} {recorded[k]}, now {v}")
    return other, missing


def label(other: list[str], missing: list[str]) -> str:
    if not other and not missing:
        return "the current preset"
    parts = ([", ".join(other[:3]) + (" ..." if len(other) > 3 else "")] if other else [])
    if missing:
        parts.append("not recorded: " + ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else ""))
    return "an older preset: " + "; ".join(parts)


def under(recorded: dict[str, Any] | None, part: str | None = None,
          embedder: str | None = None) -> str:
    """'the current preset' (of ``embedder``'s index) or how a run's recorded options
    differ from it."""
    if recorded is None:
        return "options not recorded"
    cur = preset(embedder)
    return label(*option_diff(_json(recorded), cur[part] if part else cur))


def repr_under(stitch_repr: str, hybrid_repr: str) -> str:
    """The same label for a file that records its options as reprs (older scripts)."""
    rec: dict[str, dict[str, Any]] = {}
    for part, text in (("stitch", stitch_repr), ("hybrid", hybrid_repr)):
        rec[part] = {m[1]: m[2].strip("'") for m in
                     re.finditer(r"\b(\w+)=(\(\)|'[^']*'|[^,)]+)", text)}
    cur = {part: {k: ("()" if v == [] else str(v)) for k, v in preset()[part].items()}
           for part in ("stitch", "hybrid")}
    return label(*option_diff(rec, cur))


# ------------------------------------------------------------------ the figures
@figure
def quality() -> str:
    w, h = load("quality-2wikimultihopqa.json"), load("quality-hotpotqa_train.json")
    wm, hm = w["methods"], h["methods"]
    return (f"2WikiMultiHopQA test split ({w['n_questions']} questions): `stitch` R@2/5/8 = "
            f"{cells(wm['stitch'])}, dense {cells(wm['dense'])}, BM25 {cells(wm['bm25'])}, "
            f"the paper as published {cells(wm['stitch_paper'])}; HotpotQA sample "
            f"({h['n_questions']}) `stitch` {cells(hm['stitch'])}, dense {cells(hm['dense'])} "
            f"(`stitch` rows at {commit(wm['stitch']['run'])} / {commit(hm['stitch']['run'])}, "
            f"under {under(wm['stitch'].get('options'))})")


@figure
def generalization() -> str:
    g = load("generalization.json")
    lofo = g.get("leave_one_family_out")
    if lofo:  # issue 21: each family measured under the setting chosen on the others
        return "; ".join(
            f"{fam} ({emb}) R@5 {r3(v['stitch']['recall@5'])} chosen on the others, "
            f"{r3(v['own_best']['recall@5'])} its own best, dense {r3(v['dense']['recall@5'])}"
            for fam, by in lofo.items() for emb, v in by.items()) + f" ({commit(g)})"
    t = g["tuned_on"]
    return (f"the 2Wiki-dev selection reaches HotpotQA R@5 "
            f"{r3(t['2wiki_dev']['hotpotqa_train']['stitch']['recall@5'])}; the HotpotQA "
            f"selection keeps 2Wiki test R@5 {r3(t['hotpotqa_train']['2wiki_test']['stitch']['recall@5'])}"
            f" ({commit(g)})")


@figure
def whole_query() -> str:
    d = load("whole_query_minilm.json")
    parts = lambda r: (f"embed {r['embed_ms_p50']:.1f}, candidates {r['candidates_ms_p50']:.1f}, "  # noqa: E731
                       f"graph {r['graph_ms_p50']:.2f}")
    two = d.get("threads_2")  # the same bench with --threads 2, run alongside
    more = (f"; with two ONNX threads p50 {two['whole_query_ms_p50']:.1f} ms ({parts(two)})"
            if two else "")
    return (f"p50 {d['whole_query_ms_p50']:.1f} ms with MiniLM, one ONNX thread ({parts(d)}){more}; "
            f"{commit(d)}, {load_avg(d)}, `benchmarks/results/whole_query_minilm.json`")


def _threads() -> tuple[dict[str, Any], str]:
    t = load("threads.json")
    return t, f"{t['threads_2_over_1']:.2f}x"


def _ppr_text(ppr: dict[str, Any], by: dict[str, Any]) -> str:
    """PPR vs PRPACK at each damping: the default options' solver and the local push."""
    ds = sorted(by, key=float, reverse=True)
    name = {0.85: " (the paper's)", preset()["stitch"]["damping"]: " (the preset's)"}
    sizes = list(ppr["sizes"])
    lo = [n for n in sizes if int(n) >= 10_000]

    def local(d, key="ours_local_push_vs_prpack_speedup_by_size"):
        return by[d].get(key, {})
    own = ppr["params"].get("out")  # merged_from also names the run's other --out file
    early = {m["git"]["commit"][:7] for f, m in ppr["params"].get("merged_from", {}).items()
             if m.get("git") and f == (own or f)}
    return ("PPR vs igraph PRPACK (one thread, the exact solve's top-8 in order, prior on 300 chunks, "
            f"{sizes[0]}-{sizes[-1]} chunks), median over sizes: the preset's `ppr_power_topk` "
            + ", ".join(f"{by[d]['default_vs_prpack_speedup_median']:.1f}x at damping {d}{name.get(float(d), '')}"
                        for d in ds)
            + "; the measured rule `ppr=\"auto\"` (push or power, `config.ppr_solver`) "
            + ", ".join(f"{by[d]['auto_vs_prpack_speedup_median']:.1f}x at {d}" for d in ds)
            + "; the local push (`kernels/ppr_local.py`) from 10k chunks, min-max over sizes, "
            + ", ".join(f"{min(local(d)[n] for n in lo):.1f}-{max(local(d)[n] for n in lo):.1f}x at {d}"
                        for d in ds)
            + " (CPU-time ratios " + ", ".join(
                f"{min(local(d, 'ours_local_push_vs_prpack_cpu_speedup_by_size')[n] for n in lo):.1f}-"
                f"{max(local(d, 'ours_local_push_vs_prpack_cpu_speedup_by_size')[n] for n in lo):.1f}x"
                for d in ds)
            + f"; {commit(ppr)}" + (f", other sizes at {', '.join(sorted(early))}"
                                    if early - {commit(ppr)} else "")
            + f", {load_avg(ppr)})")


@figure
def speed() -> str:
    s, two, ppr = load("speed.json"), load("2wiki.json"), load("ppr.json")
    g = s["graph_stage_ms"]
    by = s["ppr"]["by_damping"]
    t, ratio = _threads()
    o = two["methods"]["stitch"]["options"]
    return (f"Graph stage p50 {g['2wiki_p50']:.2f} ms on the 2Wiki index "
            f"({commit(two)}, under "
            f"{under(o) if isinstance(o.get('stitch'), dict) else repr_under(o['stitch'], o['hybrid'])}), "
            f"{g['1e6_p50']:.2f} ms at 1e6 and {g['1e7_p50']:.2f} ms at 1e7 synthetic entity "
            f"states; {_ppr_text(ppr, by)}; two query threads {ratio} one (graph stage under "
            f"{under(t.get('options'), 'stitch')}); "
            f"{s['bandwidth_floor_ratio']:.0f}x the streaming memory-bandwidth floor")


@figure
def threads() -> str:
    t, ratio = _threads()
    return (f"Two threads served {ratio} the queries of one on this 2-core machine "
            f"({commit(t)}, graph stage under {under(t.get('options'), 'stitch')}; "
            f"`benchmarks/results/threads.json`)")


@figure
def index_build() -> str:
    b = load("index_build.json")
    c = b["corpora"]
    w = c["2wiki"]
    syn = [(n, c[f"synthetic_{n}"]) for n in ("10k", "30k", "100k") if f"synthetic_{n}" in c]
    out = (f"the 2Wiki corpus ({w['passages']:,} passages) in {w['wall_s']:.0f} s with "
           f"{w['peak_rss_mb']:.0f} MB peak ({commit(w)}, {load_avg(w)})")
    if syn:
        out += ("; synthetic " + " / ".join(n for n, _ in syn) + " passages "
                + " / ".join(f"{x['wall_s']:,.0f}" for _, x in syn) + " s at "
                + " / ".join(f"{x['peak_rss_mb']:,.0f}" for _, x in syn) + " MB ("
                + ", ".join(commit(x) for _, x in syn) + ")")
    if "growth_exponents" in b:
        out += f", wall growth exponent {b['growth_exponents']['wall']:.2f}"
    a = b.get("add")
    if a:
        out += (f"; `hyperrag add` of {a['new_passages']:,} passages to the "
                f"{a['base_passages']:,}-passage index {100 * a['add_over_full']:.1f} % of a full "
                f"build ({a['add_peak_rss_mb']:,.0f} MB peak, {commit(a)})")
    return out


@figure
def coda_cost() -> str:
    """CODA consolidation beside the 2Wiki build, per embedder (issue 23 item 3)."""
    d = load("coda_cost.json")
    rows = ["", "| embedder | `hyperrag index` wall / peak RSS | `build-methods coda "
            "stitch_consolidated` wall / peak RSS | share of the build's wall / peak | CODA "
            "query p50 whole / method (ms) | commit, load |", "|---|---|---|---|---|---|"]
    for e in ("minilm", "bge-small"):
        if e not in d:
            rows.append(f"| {e} | not measured | not measured | | | |")
            continue
        x = d[e]
        q = x.get("coda_query", {})
        la = x["run"]["machine"]["loadavg_at_start"][0]
        rows.append(f"| {e} | {x['index']['wall_s']:.0f} s / {x['index']['peak_rss_mb']:.0f} MB "
                    f"| {x['consolidation']['wall_s']:.0f} s / "
                    f"{x['consolidation']['peak_rss_mb']:.0f} MB | "
                    f"{100 * x['consolidation_over_index_wall']:.0f} % / "
                    f"{100 * x['consolidation_over_index_peak_rss']:.0f} % | "
                    f"{q.get('whole_query_ms_p50', float('nan')):.1f} / "
                    f"{q.get('graph_ms_p50', float('nan')):.1f} | {commit(x)}, load {la:.1f} |")
    return "\n".join(rows) + "\n"


@figure
def cold_start() -> str:
    d = load("cold_start.json")
    return (f"one `hyperrag query` on the 2Wiki index {d['cli_query_cpu_s']:.2f} s CPU, "
            f"{d['cli_query_peak_rss_mb']:.1f} MB peak RSS, index load {d['load_ms']:.1f} ms "
            f"(median of {len(d.get('runs', [])) or 'the'} runs, {commit(d)}, {load_avg(d)})")


@figure
def extractors() -> str:
    rx = load("../experiments/results/extractor_regex/quality_2wikimultihopqa_dev.json")
    sp = load("../experiments/results/extractor_regex/quality_2wikimultihopqa_dev_spacy.json")
    r, s = rx["methods"]["stitch"], sp["methods"]["stitch"]
    return (f"dev `stitch` R@2/5/8 {cells(s)} (spaCy, {commit(sp)}) vs {cells(r)} (regex, "
            f"{commit(rx)}), both under {under(r.get('options'))}")


@figure
def embedders() -> str:
    d2, dt, ht = (quality_file("bge", *n) for n in
                  (("2wikimultihopqa", "dev"), ("2wikimultihopqa", "test"), ("hotpotqa_train", "test")))
    wd = load("quality_2wikimultihopqa_dev.json")["methods"]
    wt, hm = (load(f"quality-{n}.json")["methods"] for n in ("2wikimultihopqa", "hotpotqa_train"))
    return (f"2Wiki dev dense R@2/5/8 {cells(d2['methods']['dense'])} vs MiniLM "
            f"{cells(wd['dense'])}; with bge, 2Wiki test `stitch` {cells(dt['methods']['stitch'])} "
            f"(MiniLM {cells(wt['stitch'])}) and HotpotQA `stitch` {cells(ht['methods']['stitch'])}"
            f" against bge `dense` {cells(ht['methods']['dense'])} (MiniLM `stitch` "
            f"{cells(hm['stitch'])}; bge files at {commit(dt)} / {commit(ht)}, under "
            f"{under(dt['methods']['stitch'].get('options'), embedder=dt['embedder'])})")


def _run_label(d: dict[str, Any], phase: str) -> str:
    """'<commit>, load <1-min load at its start>' of one phase of a file with ``runs``."""
    r = d.get("runs", {}).get(phase, {})
    la = r.get("loadavg_start")
    return (f"{str(r.get('commit') or 'commit not recorded')[:7]}, "
            + (f"load {la[0]:.1f}" if la else "load not recorded"))


@figure
def serving() -> str:
    d = load("serve.json")
    by = {s["clients"]: s for s in d["steps"]}
    one, two, top = by[1], by[2], by[max(by)]
    pub, soak = d["publishes"], d["soak"]
    rounds = len(one.get("rounds", [])) or 1
    sched = d.get("runs", {}).get("steps", {}).get("sched")
    out = (f"Measured over HTTP on loopback (`benchmarks/results/serve.json`; 2Wiki index, MiniLM, "
           f"default preset; {rounds} rounds per step, pooled; steps at {_run_label(d, 'steps')}"
           + (f", scheduled {sched}" if sched else "") + "): "
           f"1 client p50 {one['p50_ms']:.1f} ms / p99 {one['p99_ms']:.1f} ms, "
           f"{one['throughput_qps']:.1f} q/s; 2 clients p50 {two['p50_ms']:.1f} / p99 "
           f"{two['p99_ms']:.1f} ms, {two['throughput_qps']:.1f} q/s "
           f"({two['throughput_qps'] / one['throughput_qps']:.2f}x one client); "
           f"{top['clients']} clients: {top['shed']:,} requests shed with 503, accepted p99 "
           f"{top['p99_ms']:.1f} ms, {sum(s['errors'] for s in d['steps'])} errors over all steps. "
           f"The server spent {two['server_cpu_ms_per_request']:.1f} ms of CPU per request at 2 "
           f"clients. Ready in {d['ready_s']:.2f} s on a warm Numba cache "
           f"({_run_label(d, 'ready')}). Five `hyperrag add` publishes under "
           f"{pub.get('clients', 2)} clients ({_run_label(d, 'publish')}): "
           f"{pub['failed_requests']} failed of {pub.get('requests', 0) + pub['failed_requests']:,} "
           f"requests, each new generation answering within {pub['switch_s_max']:.2f} s of its "
           f"publish. Memory: {soak['queries']:,} queries ({_run_label(d, 'soak')}) took RSS from "
           f"{soak['rss_mb_start']:.1f} MB at 10k to {soak['rss_mb_end']:.1f} MB "
           f"({100 * soak['growth']:+.1f} %)")
    prof = {s["clients"]: s.get("profile") for s in d.get("steps_profile", [])}
    p2 = prof.get(2)
    if isinstance(p2, dict):
        sh = p2["share"]
        out += (". Where the server's time goes at 2 clients (py-spy, active samples): "
                + ", ".join(f"{k.split(' (')[0]} {100 * v:.0f} %" for k, v in list(sh.items())[:4]))
    return out


@figure
def serving_targets() -> str:
    """The steps table of serve.json and each target of issue 25, met or not."""
    d = load("serve.json")
    by = {s["clients"]: s for s in d["steps"]}
    rows = ["", "| clients | requests | q/s | p50 ms | p95 ms | p99 ms | errors | shed (503) "
            "| server CPU ms/request |", "|---|---|---|---|---|---|---|---|---|"]
    for s in d["steps"]:
        rows.append(f"| {s['clients']} | {s['requests']:,} | {s['throughput_qps']:.1f} | "
                    f"{s['p50_ms']:.1f} | {s['p95_ms']:.1f} | {s['p99_ms']:.1f} | {s['errors']} | "
                    f"{s['shed']:,} | {s.get('server_cpu_ms_per_request', '')} |")
    one, two, top = by[1], by[2], by[max(by)]
    pub, soak = d["publishes"], d["soak"]
    ratio = two["throughput_qps"] / one["throughput_qps"]
    by_round = d.get("steps_throughput_2_over_1_by_round")

    def mark(ok: bool) -> str:
        return "**met**" if ok else "**not met**"
    targets = [
        f"2 clients p50 <= 15 ms: {mark(two['p50_ms'] <= 15)} ({two['p50_ms']:.1f} ms); "
        f"p99 <= 40 ms: {mark(two['p99_ms'] <= 40)} ({two['p99_ms']:.1f} ms)",
        f"2 clients >= 1.7x one client's throughput: {mark(ratio >= 1.7)} ({ratio:.2f}x, median "
        "rounds" + (f"; by round {', '.join(f'{x:.2f}x' for x in by_round)}" if by_round else "")
        + ")",
        f"{top['clients']} clients shed (503) and keep the accepted p99 <= 100 ms, never crashing: "
        f"{mark(top['shed'] > 0 and top['p99_ms'] <= 100 and d.get('steps_exit_code') == 0)} "
        f"({top['shed']:,} shed, accepted p99 {top['p99_ms']:.1f} ms, server exit code "
        f"{d.get('steps_exit_code')})",
        f"RSS growth <= 5 % from 10k to 100k+ queries: "
        f"{mark(soak['queries'] >= 100_000 and soak['growth'] <= 0.05)} ({soak['queries']:,} "
        f"queries, {100 * soak['growth']:+.1f} %)",
        f"0 failed requests across 5 publishes, each new generation serving within 2 s: "
        f"{mark(pub['count'] >= 5 and pub['failed_requests'] == 0 and pub['switch_s_max'] is not None and pub['switch_s_max'] <= 2)} "
        f"({pub['count']} publishes, {pub['failed_requests']} failed, switch max "
        f"{pub['switch_s_max']:.2f} s)",
        f"ready within 2 s of start on a warm Numba cache: {mark(d['ready_s'] <= 2)} "
        f"({d['ready_s']:.2f} s, median)",
    ]
    return "\n".join(rows) + "\n\nTargets (issue 25):\n\n" + "".join(f"* {t}\n" for t in targets)


def md_row(text: str, first: str) -> list[str]:
    """The cells of the Markdown table row whose first cell is ``first``."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == first:
            return cells
    raise KeyError(first)


@figure
def extractor_speed() -> str:
    md = (ROOT / "benchmarks/experiments/results/offline_extractor_speed.md").read_text(encoding="utf-8")
    one, two = md_row(md, "1"), md_row(md, "2")
    whole = re.search(r"Whole corpus \((\d+) passages, n_process=2\): (\d+) s", md)
    return (f"Measured on {int(one[1]):,} 2Wiki passages on this 2-core machine: "
            f"{float(one[3]):.0f} paragraphs/s (1 process), {float(two[3]):.0f}/s (2 processes); "
            f"the whole {int(whole[1]):,}-passage corpus extracts in {whole[2]} s")


@figure
def embedder_agreement() -> str:
    md = (ROOT / "benchmarks/experiments/results/embedder_agreement.md").read_text(encoding="utf-8")
    n = re.search(r"Sample: (\d+) ", md)[1]
    return f"Mean cosine to the torch reference {md_row(md, 'mean')[1]} over {n} corpus passages"


@figure
def embedder_speed() -> str:
    d = load("../experiments/results/embedders_ab.json")
    m, b = d["models"]["all-MiniLM-L6-v2-onnx-int8"], d["models"]["bge-small-en-v1.5-onnx-int8"]
    return (f"bge embeds passages {b['passages_per_s'] / m['passages_per_s']:.2f}x as fast as "
            f"MiniLM's padded batches but sentences {b['sentences_per_s'] / m['sentences_per_s']:.2f}x "
            f"as fast ({commit(d)}, {load_avg(d)})")


@figure
def pooled() -> str:
    d = load("../experiments/results/chunk_vectors_ab.json")
    t, p = d["options"]["text"]["recall"], d["options"]["pooled"]["recall"]
    return (f"dev `stitch` R@5 {r3(p['stitch']['recall@5'])} vs {r3(t['stitch']['recall@5'])}, "
            f"dense {r3(p['dense']['recall@5'])} vs {r3(t['dense']['recall@5'])} at {commit(d)}, "
            f"(its query options not recorded)")


@figure
def states_2wiki() -> str:
    t = load("index_build.json")["corpora"]["2wiki"]["texts"]
    return f"the {t['states']:,} states of 2Wiki share {t['distinct_state_descriptions']:,}"


def _command(d: dict[str, Any]) -> str | None:
    c = d.get("command") or (d.get("run") or {}).get("command")
    if c is None and isinstance(d.get("sources"), dict):
        return "python benchmarks/speed_report.py (from the files in `sources`)"
    if c is None and "corpora" in d:
        return "python benchmarks/bench_index_build.py ... (one command per section, in `run`)"
    return c


@figure
def results_table() -> str:
    """One row per current result file: its command, commit and load at the start."""
    rows = ["", "| file | command | commit | load |", "|---|---|---|---|"]
    for path in sorted(RESULTS.rglob("*.json")):
        d = json.loads(path.read_text(encoding="utf-8"))
        cmd = _command(d) or "not recorded"
        rows.append(f"| `{path.relative_to(RESULTS)}` | `{cmd}` | {commit(d)} | "
                    f"{load_avg(d).removeprefix('load ')} |")
    return "\n".join(rows) + "\n"


# ------------------------------------------------------------------ rewrite / check
def render(text: str) -> str:
    def sub(m: re.Match) -> str:
        name = m["name"]
        if name not in FIGURES:
            raise KeyError(f"<!-- fig:{name} --> names no figure in benchmarks/render_figures.py")
        return f"<!-- fig:{name} -->{FIGURES[name]()}<!-- /fig:{name} -->"
    return MARK.sub(sub, text)


def stale() -> list[str]:
    """'file: fig:NAME' for every marked section whose text differs from its file's."""
    out = []
    for rel in DOCS:
        text = (ROOT / rel).read_text(encoding="utf-8")
        for m in MARK.finditer(text):
            try:
                body = FIGURES[m["name"]]()
            except Exception as e:  # a result file changed shape: the figure's function must follow
                out.append(f"{rel}: fig:{m['name']} cannot be rendered ({type(e).__name__}: {e}); "
                           f"update {m['name']}() in benchmarks/render_figures.py")
                continue
            if m["body"] != body:
                out.append(f"{rel}: fig:{m['name']}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    a = p.parse_args(argv)
    if a.check:
        bad = stale()
        for x in bad:
            print(f"stale: {x}")
        return 1 if bad else 0
    for rel in DOCS:
        path = ROOT / rel
        text = path.read_text(encoding="utf-8")
        new = render(text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
