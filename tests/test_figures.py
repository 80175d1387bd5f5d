"""Quoted figures agree with their result files, and the quality results were measured under
the current preset (benchmarks/render_figures.py; benchmarks/README.md, "Figures")."""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REGEN = "python benchmarks/render_figures.py"


@pytest.fixture(scope="module")
def figures():
    spec = importlib.util.spec_from_file_location("render_figures",
                                                  ROOT / "benchmarks" / "render_figures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_quoted_figures_agree_with_their_result_files(figures):
    stale = figures.stale()
    assert not stale, ("quoted figures disagree with their result files (" + "; ".join(stale)
                       + f"): run `{REGEN}` and commit the rewritten text")


def test_every_marker_is_closed_and_names_a_figure(figures):
    seen = set()
    for rel in figures.DOCS:
        text = (ROOT / rel).read_text(encoding="utf-8")
        opened = re.findall(r"<!-- fig:([a-z0-9_]+) -->", text)
        closed = [m["name"] for m in figures.MARK.finditer(text)]
        assert opened == closed, f"{rel}: a <!-- fig:NAME --> without its <!-- /fig:NAME -->"
        unknown = set(closed) - set(figures.FIGURES)
        assert not unknown, f"{rel}: {sorted(unknown)} name no figure in benchmarks/render_figures.py"
        seen.update(closed)
    assert seen == set(figures.FIGURES), f"figures no document quotes: {set(figures.FIGURES) - seen}"


def test_a_changed_figure_is_caught(figures):
    body = figures.FIGURES["cold_start"]()
    wrong = body.replace(body.split(" s CPU")[0].split()[-1], "9.99")
    assert wrong != body
    text = f"x <!-- fig:cold_start -->{wrong}<!-- /fig:cold_start --> y"
    assert figures.render(text) == f"x <!-- fig:cold_start -->{body}<!-- /fig:cold_start --> y"


def _regen_command(row: dict, method: str) -> str:
    cmd = row.get("run", {}).get("command", "python -m hyperrag_fast.eval ...")
    cmd = re.sub(r"--methods \S+", f"--methods {method}", cmd)
    return re.sub(r"--out-dir \S+", "--out-dir benchmarks/results", cmd)


def test_quality_results_were_measured_under_the_current_preset(figures):
    from hyperrag_fast.config import TUNED
    current = figures.preset()
    files = sorted((ROOT / "benchmarks" / "results").glob("quality-*.json"))
    assert files
    bad = []
    for f in files:
        d = json.loads(f.read_text(encoding="utf-8"))
        if "methods" not in d:  # another contract (quality-graphrag_bench.json: "subsets")
            continue
        row = d["methods"].get(TUNED.method)
        if row is None:
            bad.append(f"{f.name}: no `{TUNED.method}` row")
            continue
        other, missing = figures.option_diff(row.get("options", {}), current)
        if other or missing:
            bad.append(f"{f.name}: `{TUNED.method}` measured under other options "
                       f"({figures.label(other, missing)}); regenerate with "
                       f"`{_regen_command(row, TUNED.method)}`, then `{REGEN}`")
    assert not bad, "\n".join(bad)


def test_the_option_comparison_sees_a_changed_and_a_missing_option(figures):
    cur = figures.preset()
    rec = json.loads(json.dumps(cur))
    assert figures.option_diff(rec, cur) == ([], [])
    rec["stitch"]["delta"] = cur["stitch"]["delta"] + 0.1
    del rec["hybrid"][next(iter(rec["hybrid"]))]
    other, missing = figures.option_diff(rec, cur)
    assert len(other) == 1 and other[0].startswith("stitch.delta") and len(missing) == 1


def test_results_hold_current_files_not_a_history():
    """benchmarks/README.md, "The rules of this folder": one current file per entry point;
    history lives in git, not in folders named after an issue, a run or a commit."""
    results = ROOT / "benchmarks" / "results"
    numbered = [p.relative_to(ROOT).as_posix() for p in results.rglob("*")
                if p.is_dir() and re.search(r"\d+$|_ab$|^fresh_|_check$", p.name)]
    assert not numbered, (f"{numbered}: folders named after an issue, a run or an A/B in "
                          "benchmarks/results; keep one current file per entry point there "
                          "(history is git's) and one-off runs in benchmarks/experiments/results/"
                          "<what they measure>/ (benchmarks/README.md)")
    copies = [p.name for p in results.rglob("*") if re.search(r"_[0-9a-f]{7,40}\.\w+$", p.name)]
    assert not copies, f"{copies}: result files named after a commit; the commit goes inside the file"


def test_recorded_commands_name_no_machine_local_paths():
    """A recorded command reruns from a fresh checkout: paths are relative flags
    (indexes/..., cache/...) or placeholders, never a temporary folder of one machine."""
    bad = []
    for folder in (ROOT / "benchmarks" / "results", ROOT / "benchmarks" / "experiments" / "results"):
        for p in folder.rglob("*"):
            if p.is_file() and p.suffix in (".json", ".md"):
                hits = set(re.findall(r"(?<![\w.])/(?:tmp|work)/[^\s\"'`]*", p.read_text(encoding="utf-8")))
                if hits:
                    bad.append(f"{p.relative_to(ROOT)}: {sorted(hits)[:3]}")
    assert not bad, ("machine-local paths in recorded results (rerun with relative paths, or "
                     "write placeholders where the command is reproducible that way):\n"
                     + "\n".join(bad))
