"""The session-19 selection rule (benchmarks/selection_rule.py; docs/architecture.md §6, "The
selection rule") on literal tables, beside the session-17/18 rule it replaces."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

_p = Path(__file__).resolve().parents[1] / "benchmarks" / "selection_rule.py"
_spec = importlib.util.spec_from_file_location("selection_rule", _p)
rule = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rule)


def _old(rows, guard):
    """Sessions 17-18: among worst >= W* - guard, the largest mean lift (then the larger worst)."""
    top = max(w for w, _ in rows)
    near = [i for i, (w, _) in enumerate(rows) if w >= top - guard]
    return max(near, key=lambda i: (rows[i][1], rows[i][0]))


def test_a_noise_sized_mean_no_longer_overrules_the_worst_family():
    # bge-small's session-19 grid, three of its rows (worst lift, mean lift)
    rows = [(0.0833, 0.1517), (0.0800, 0.1537), (0.0833, 0.1521)]
    assert _old(rows, 0.005) == 1
    i, tied, kept = rule.pick_by_worst(rows, 0.005)
    assert (i, tied, kept) == (2, [0, 1, 2], [0, 1, 2])


def test_the_mean_removes_a_tied_candidate_only_beyond_the_guard():
    rows = [(0.100, 0.100), (0.098, 0.200), (0.090, 0.300)]
    i, tied, kept = rule.pick_by_worst(rows, 0.005)
    assert (i, tied, kept) == (1, [0, 1], [1])
    assert rule.pick_by_worst([(0.100, 0.196), (0.098, 0.200)], 0.005)[0] == 0


def test_equal_rows_keep_the_earlier_one():
    assert rule.pick_by_worst([(0.1, 0.2), (0.1, 0.2)], 0.005)[0] == 0


@given(st.lists(st.tuples(st.integers(-300, 300), st.integers(-300, 300)), min_size=1, max_size=12),
       st.integers(0, 20))
def test_the_pick_is_within_the_guard_of_both_bests(ints, g):
    rows = [(w / 1e4, m / 1e4) for w, m in ints]
    guard = g / 1e3
    i, tied, kept = rule.pick_by_worst(rows, guard)
    top = max(w for w, _ in rows)
    assert rows[i][0] >= top - guard - 1e-9 and i in kept and set(kept) <= set(tied)
    assert rows[i][1] >= max(rows[j][1] for j in tied) - guard - 1e-9
    assert rows[i][0] == max(rows[j][0] for j in kept)


def test_codas_grid_case_picks_the_best_worst_cell():
    """Session 19's CODA grid: three points tied on the worst cell, means within the guard;
    the former rule took the largest mean (worst cell -0.14 points), this one the best worst."""
    rows = [(0.0022, 0.0241), (-0.0014, 0.0246), (0.0033, 0.0226)]
    assert _old(rows, 0.005) == 1
    assert rule.pick_by_worst(rows, 0.005) == (2, [0, 1, 2], [0, 1, 2])


def test_no_candidates_is_an_error():
    with pytest.raises(ValueError):
        rule.pick_by_worst([], 0.005)
