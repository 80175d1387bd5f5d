"""``python -m hyperrag_fast.eval``: retrieval quality of registered methods on a dataset split."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from ..config import DEFAULT_EMBEDDER, TUNED
from ..embed.registry import INDEX_KINDS, make_embedder
from .data import DATASETS
from .harness import evaluate


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hyperrag_fast.eval",
                                description="passage Recall@2/5/8 and latency of retrieval methods")
    p.add_argument("--dataset", choices=DATASETS, required=True)
    p.add_argument("--split", choices=("dev", "test", "all"), required=True,
                   help="2wikimultihopqa: dev (first 200) / test (other 800) / all; "
                        "hotpotqa_train: test / all")
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
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = build_parser().parse_args(argv)
    methods = [m.strip() for m in a.methods.split(",") if m.strip()]
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
