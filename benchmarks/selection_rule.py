"""The project's selection rule for every tuning grid (session 19; docs/architecture.md §7,
"CODA defaults"): a candidate's score is its worst family's (CODA: worst cell's) lift.

1. W* = the best worst lift; the tied set T = candidates with worst >= W* - ``guard``;
2. M* = the largest mean lift in T; T2 = members of T with mean >= M* - ``guard`` (the mean
   removes a tied candidate only when it is worse by more than the guard);
3. the pick is the largest worst lift in T2, then the larger mean (no incumbent advantage).
"""
from __future__ import annotations

from collections.abc import Sequence

RULE = ("score = the worst family's (cell's) lift; T = candidates within {g} of the best "
        "worst; T2 = members of T within {g} of T's largest mean; pick the largest worst "
        "in T2, then the larger mean (benchmarks/selection_rule.py)")


def tied_sets(worst: Sequence[float], mean: Sequence[float], guard: float) -> tuple[list[int], list[int]]:
    """(T, T2) as indices into the candidates (module docstring)."""
    if not worst or len(worst) != len(mean) or guard < 0:
        raise ValueError("need as many worst as mean lifts (at least one) and guard >= 0")
    top = max(worst)
    t = [i for i, w in enumerate(worst) if w >= top - guard]
    best_mean = max(mean[i] for i in t)
    return t, [i for i in t if mean[i] >= best_mean - guard]


def pick_by_worst(worst: Sequence[float], mean: Sequence[float], guard: float) -> int:
    """The index the rule picks (ties after worst and mean: the first candidate)."""
    _, t2 = tied_sets(worst, mean, guard)
    return max(t2, key=lambda i: (worst[i], mean[i], -i))
