"""The one selection rule of every tuning grid (session 19; docs/architecture.md §6, "The
selection rule"): STITCH presets (``quality_grid.choose``) and CODA defaults alike.

Each candidate is a row (worst, mean): its worst family's (CODA: worst cell's) lift over dense
and its mean lift. With guard g (``--min-gain``, .005 in objective units):

1. W* = the best worst lift; the tied set T = candidates with worst >= W* - g;
2. M* = the largest mean lift in T; T2 = members of T with mean >= M* - g (the mean removes a
   tied candidate only when it is worse by more than the guard);
3. the pick = the largest worst lift in T2, then the larger mean, then the earlier row.

No advantage for the incumbent: the shipped setting is one row like any other.
"""
from __future__ import annotations

from typing import Sequence

#: float slack on the guard comparisons (lifts are rounded to 4 decimals)
EPS = 1e-9
RULE = ("the best worst-family lift W*; tied = worst >= W* - guard; of those, mean lift >= "
        "(their largest mean) - guard; pick the largest worst lift, then the larger mean")


def pick_by_worst(rows: Sequence[tuple[float, float]], guard: float) -> tuple[int, list[int], list[int]]:
    """(index of the pick, tied set T, T2) of ``rows`` = [(worst lift, mean lift), ...]."""
    if not rows:
        raise ValueError("no candidates")
    top = max(w for w, _ in rows)
    tied = [i for i, (w, _) in enumerate(rows) if w >= top - guard - EPS]
    best_mean = max(rows[i][1] for i in tied)
    kept = [i for i in tied if rows[i][1] >= best_mean - guard - EPS]
    return max(kept, key=lambda i: (rows[i][0], rows[i][1], -i)), tied, kept
