"""Passage Recall@k (HippoRAG definition), breakdowns and latency percentiles (docs/architecture.md §9)."""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

import numpy as np

KS = (2, 5, 8)
PERCENTILES = (50, 90, 99)


def recall_at_k(ranked: Sequence[str], gold: frozenset[str] | set[str], k: int) -> float:
    """``|set(ranked[:k]) ∩ gold| / |gold|`` for one question (ValueError on empty gold)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not gold:
        raise ValueError("a question needs at least one gold passage")
    return len(set(ranked[:k]) & set(gold)) / len(gold)


def mean_recall(ranked: Sequence[Sequence[str]], golds: Sequence[frozenset[str]],
                ks: Sequence[int] = KS) -> dict[str, float]:
    """``{"recall@k": mean over questions}`` for each k."""
    if len(ranked) != len(golds):
        raise ValueError(f"{len(ranked)} rankings for {len(golds)} questions")
    if not ranked:
        raise ValueError("no questions to score")
    return {f"recall@{k}": float(np.mean([recall_at_k(r, g, k) for r, g in zip(ranked, golds)]))
            for k in ks}


def recall_by(ranked: Sequence[Sequence[str]], golds: Sequence[frozenset[str]],
              keys: Sequence[Any], ks: Sequence[int] = KS) -> dict[str, dict[str, float]]:
    """Mean recall per group (``keys[i]`` is question i's group), plus ``n`` per group.
    Empty-string keys (no group) are left out."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        if key != "":
            groups[str(key)].append(i)
    return {key: {**mean_recall([ranked[i] for i in idx], [golds[i] for i in idx], ks),
                  "n": len(idx)}
            for key, idx in sorted(groups.items())}


def percentiles(values_ms: Sequence[float], ps: Sequence[int] = PERCENTILES) -> dict[str, float]:
    """``{"p50": ..., "p90": ..., "p99": ...}`` (linear interpolation, numpy default)."""
    if not len(values_ms):
        raise ValueError("no timings")
    v = np.asarray(values_ms, dtype=np.float64)
    return {f"p{p}": float(np.percentile(v, p)) for p in ps}


def summarize(ranked: Sequence[Sequence[str]], golds: Sequence[frozenset[str]],
              qtypes: Sequence[str], retrieval_ms: Sequence[float], embed_ms: Sequence[float],
              ks: Sequence[int] = KS) -> dict[str, Any]:
    """One method's result row: recall@k, by_n_gold, by_type, latency_ms (candidates +
    graph, embedding excluded; also flat as latency_ms_p50/p99), embed_ms_p50 and n_questions."""
    lat = percentiles(retrieval_ms)
    return {
        **mean_recall(ranked, golds, ks),
        "by_n_gold": recall_by(ranked, golds, [len(g) for g in golds], ks),
        "by_type": recall_by(ranked, golds, qtypes, ks),
        "latency_ms": lat,
        "latency_ms_p50": lat["p50"],  # flat keys: the issue-5 results contract
        "latency_ms_p99": lat["p99"],
        "embed_ms_p50": percentiles(embed_ms, (50,))["p50"],
        "n_questions": len(ranked),
    }
