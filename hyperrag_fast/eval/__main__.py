"""``python -m hyperrag_fast.eval``: retrieval quality of registered methods on a dataset split."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from ..config import DEFAULT_EMBEDDER, TUNED
from ..embed.registry import INDEX_KINDS, make_embedder
from .data import DATASETS
from .gbench import QTYPES, SUBSETS, TOP_K, evaluate_gbench
from .harness import evaluate


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hyperrag_fast.eval",
                                description="passage Recall@2/5/8 and latency of retrieval methods")
    p.add_argument("--dataset", choices=DATASETS + tuple(SUBSETS), required=True,
                   help="graphrag_bench_medical / graphrag_bench_novel: GraphRAG-Bench, one "
                        "index per source document, offline coverage per question type")
    p.add_argument("--split", choices=("dev", "test", "all"), default=None,
                   help="2wikimultihopqa: dev (first 200) / test (other 800) / all; "
                        "hotpotqa_train: test / all; musique_dev: dev = all (required for "
                        "these); GraphRAG-Bench: not used (all, dev per the data README)")
    p.add_argument("--methods", default=f"dense,{TUNED.method}",
                   help="comma-separated registered method names (default: dense,stitch)")
    p.add_argument("--data-dir", default=None,
                   help="data folder (default: $HYPERRAG_DATA_DIR, else ../shared/data)")
    p.add_argument("--index-dir", default=None,
                   help="reuse the index here if it matches, else build and save it here")
    p.add_argument("--cache-dir", default="cache", help="embedding cache directory")
    p.add_argument("--embedder", choices=INDEX_KINDS, default=DEFAULT_EMBEDDER,
                   help="embedder kind (default: %(default)s)")
    p.add_argument("--out-dir", required=True,
                   help="folder the results are written to (created; the committed results "
                        "in benchmarks/results are replaced only when you name that folder)")
    p.add_argument("--dump", action="store_true", help="also write per-question top-k ids (JSONL)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    g = p.add_argument_group("GraphRAG-Bench")
    g.add_argument("--top-k", type=int, default=TOP_K,
                   help="passages per question forming the retrieved context (default: %(default)s)")
    g.add_argument("--judge-model", default=None,
                   help="OpenAI-compatible model for the LLM-judged evidence recall and "
                        "context relevance (default: not run)")
    g.add_argument("--base-url", default=None, help="endpoint of --judge-model")
    g.add_argument("--api-key", default=None, help="API key (default: $OPENAI_API_KEY)")
    g.add_argument("--judge-cache", default=None,
                   help="judge cache directory (default: <cache-dir>/gbench_judge)")
    g.add_argument("--limit", type=int, default=None, help="first N questions only (smoke runs)")
    return p


def main_gbench(a, methods: list[str], argv: list[str]) -> int:
    judge = None
    if a.judge_model:
        from ..llm.client import ChatClient
        from .gbench_judge import GBenchJudge
        judge = GBenchJudge(ChatClient(a.judge_model, a.base_url, a.api_key),
                            a.judge_cache or str(Path(a.cache_dir) / "gbench_judge"))
    out = evaluate_gbench([a.dataset], methods, index_dir=a.index_dir, cache_dir=a.cache_dir,
                          data_dir=a.data_dir, out_dir=a.out_dir, progress=not a.quiet,
                          top_k=a.top_k, embedder_factory=lambda: make_embedder(a.embedder),
                          judge=judge, limit=a.limit, dump=a.dump,
                          command=" ".join(["python -m hyperrag_fast.eval", *argv]))
    sub = SUBSETS[a.dataset]
    for name in methods:
        cov = out["subsets"][sub][name]["coverage"]
        cells = "  ".join(f"{t.split()[0][:7]} {cov[t]:.3f}" for t in QTYPES if t in cov)
        print(f"{name:>20}  coverage all {cov['all']:.3f}  {cells}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = build_parser().parse_args(argv)
    methods = [m.strip() for m in a.methods.split(",") if m.strip()]
    if a.dataset in SUBSETS:
        try:
            return main_gbench(a, methods, argv)
        except (ValueError, FileNotFoundError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    if a.split is None:
        print("error: --split is required for this dataset", file=sys.stderr)
        return 2
    try:
        out = evaluate(a.dataset, a.split, methods, index_dir=a.index_dir, cache_dir=a.cache_dir,
                       data_dir=a.data_dir, out_dir=a.out_dir, dump=a.dump, progress=not a.quiet,
                       embedder_factory=lambda: make_embedder(a.embedder),
                       command=" ".join(["python -m hyperrag_fast.eval", *argv]))
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for name in methods:
        row = out["methods"][name]
        print(f"{name:>16}  R@2 {row['recall@2']:.3f}  R@5 {row['recall@5']:.3f}  "
              f"R@8 {row['recall@8']:.3f}  p50 {row['latency_ms']['p50']:.2f} ms  "
              f"(n={row['n_questions']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
