"""Evidence for the offline NLP choice: dev-split Recall@k of the default `stitch` with the
spaCy extractor (the default) against the dependency-free RegexExtractor, same embedder.

    python benchmarks/experiments/extractor_choice.py

Writes benchmarks/experiments/results/extractor_regex/quality_2wikimultihopqa_dev.{json,md} (the harness format);
compare with the spaCy rows in benchmarks/results/quality_2wikimultihopqa_dev.md.
"""
from __future__ import annotations

import sys

from hyperrag_fast.eval.harness import evaluate
from hyperrag_fast.extract.offline import RegexExtractor


def main() -> int:
    evaluate("2wikimultihopqa", "dev", ["dense", "stitch"], index_dir="indexes/2wiki_regex",
             cache_dir="cache", out_dir=None if "--dry" in sys.argv else "benchmarks/experiments/results/extractor_regex",
             extractor_factory=RegexExtractor, progress=False,
             command="python benchmarks/experiments/extractor_choice.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
