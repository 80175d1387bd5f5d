"""Markdown rendering of a quality-results dict (see :func:`..harness.evaluate`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any


def _r(row: dict[str, Any], ks: list[int]) -> str:
    return " | ".join(f"{row[f'recall@{k}']:.3f}" for k in ks)


def _ks(methods: dict[str, Any]) -> list[int]:
    first = next(iter(methods.values()))
    return sorted(int(k.split("@")[1]) for k in first if k.startswith("recall@"))


def render_markdown(out: dict[str, Any]) -> str:
    """Main table (recall@k, latency, embed time) then the by-n_gold and by-type tables."""
    methods = out["methods"]
    ks = _ks(methods)
    rk = " | ".join(f"R@{k}" for k in ks)
    m = out["machine"]
    lines = [f"# Retrieval quality: {out['dataset']} / {out['split']} "
             f"({out['n_questions']} questions)", "",
             f"- extractor: `{out['extractor']}`; embedder: `{out['embedder']}`",
             f"- machine: {m['cpu']}, {m['cores']} cores, load at start "
             f"{', '.join(f'{x:.2f}' for x in m['loadavg_at_start'])}",
             "- latency = candidates_ms + graph_ms per query (query embedding excluded; "
             "embed p50 shown apart), single thread, after one warm-up query",
             "", f"| method | {rk} | p50 ms | p90 ms | p99 ms | embed p50 ms | n | commit | command |",
             "|---|" + "---|" * (len(ks) + 7)]
    for name, row in methods.items():
        lat = row["latency_ms"]
        run = row.get("run", {})
        lines.append(f"| {name} | {_r(row, ks)} | {lat['p50']:.2f} | {lat['p90']:.2f} | "
                     f"{lat['p99']:.2f} | {row['embed_ms_p50']:.2f} | {row['n_questions']} | "
                     f"{(run.get('git_commit') or '?')[:8]}{'+dirty' if run.get('git_dirty') else ''}"
                     f" | `{run.get('command', '')}` |")
    for key, title in (("by_n_gold", "number of gold passages"), ("by_type", "question type")):
        groups = sorted({g for row in methods.values() for g in row[key]})
        if not groups:
            continue
        lines += ["", f"## By {title} ({rk})", "",
                  "| method | " + " | ".join(
                      f"{g} (n={next(r[key][g]['n'] for r in methods.values() if g in r[key])})"
                      for g in groups) + " |",
                  "|---|" + "---|" * len(groups)]
        for name, row in methods.items():
            cells = [(" / ".join(f"{row[key][g][f'recall@{k}']:.3f}" for k in ks)
                      if g in row[key] else "-") for g in groups]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_markdown(out: dict[str, Any], path: Path) -> None:
    path.write_text(render_markdown(out), encoding="utf-8")
