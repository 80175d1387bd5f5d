"""``hyperrag eval --answers --dataset graphrag_bench_*``: GraphRAG-Bench answer accuracy
(statement F1 and answer-embedding similarity, :func:`.gbench_judge.answer_accuracy`)
of each method's top-k context; docs/real_endpoint.md has the recipe."""
from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any, Callable, Sequence

from ..config import EVAL_LLM_CONCURRENCY
from .gbench import SUBSETS, TOP_K, chunking_info, run_subset
from .gbench_judge import answer_accuracy
from .harness import _git, check_methods, default_embedder, default_extractor


def evaluate_gbench_answers(dataset: str, methods: Sequence[str], client, judge, *,
                            index_dir=None, cache_dir="cache", data_dir=None,
                            out_dir=None, top_k: int = TOP_K,
                            limit: int | None = None, max_concurrency: int = EVAL_LLM_CONCURRENCY,
                            extractor_factory: Callable | None = None,
                            embedder_factory: Callable | None = None, progress: bool = True,
                            command: str | None = None) -> dict[str, Any]:
    """Answer accuracy per method and question type; writes
    ``answers_<dataset>.json`` unless ``out_dir`` is None."""
    check_methods(methods)
    if dataset not in SUBSETS:
        raise ValueError(f"{dataset!r} is not a GraphRAG-Bench dataset ({tuple(SUBSETS)})")
    sub = SUBSETS[dataset]
    embedder = (embedder_factory or default_embedder)()
    r = run_subset(sub, methods, Path(index_dir) / sub if index_dir else None, Path(cache_dir),
                   (extractor_factory or default_extractor)(), embedder, top_k, data_dir,
                   progress=progress, limit=limit)
    rows = {m: answer_accuracy(client, judge or client, embedder, r["questions"],
                               r["contexts"][m], cache_dir, max_concurrency) for m in methods}
    out = {"dataset": dataset, "n_questions": len(r["questions"]), "limit": limit,
           "top_k": top_k, "chunking": chunking_info(), "embedder": embedder.name,
           "command": command, "git_commit": _git("rev-parse", "HEAD"),
           "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "methods": rows}
    if out_dir is not None:
        p = Path(out_dir)
        p.mkdir(parents=True, exist_ok=True)
        (p / f"answers_{dataset}.json").write_text(json.dumps(out, indent=1) + "\n",
                                                   encoding="utf-8")
    return out
