"""The selection rule of every tuning grid (benchmarks/selection_rule.py; docs/architecture.md
§7) on literal tables."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "selection_rule", Path(__file__).resolve().parents[1] / "benchmarks" / "selection_rule.py")
rule = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(rule)


def test_a_noise_sized_mean_does_not_overrule_the_worst():
    """Session 19's CODA case: all three tied on the worst; the mean differs by less than
    the guard, so the largest worst wins (the former step 3, largest mean, picked 1)."""
    worst, mean = [0.0022, -0.0014, 0.0033], [0.0241, 0.0246, 0.0226]
    assert rule.tied_sets(worst, mean, 0.005) == ([0, 1, 2], [0, 1, 2])
    assert rule.pick_by_worst(worst, mean, 0.005) == 2
    assert max(range(3), key=lambda i: (mean[i], worst[i])) == 1  # the former rule


def test_the_mean_decides_only_past_the_guard():
    worst, mean = [0.010, 0.008, -0.020], [0.010, 0.030, 0.090]
    # 2 is not tied on the worst; within T the mean removes 0 (.02 below 1's mean)
    assert rule.tied_sets(worst, mean, 0.005) == ([0, 1], [1])
    assert rule.pick_by_worst(worst, mean, 0.005) == 1
    # with no guard only the best worst is tied
    assert rule.pick_by_worst(worst, mean, 0.0) == 0


def test_exact_ties_go_to_the_larger_mean_then_the_first():
    assert rule.pick_by_worst([0.01, 0.01, 0.01], [0.02, 0.03, 0.03], 0.005) == 1
    with pytest.raises(ValueError):
        rule.pick_by_worst([], [], 0.005)
    with pytest.raises(ValueError):
        rule.pick_by_worst([0.1], [0.1, 0.2], 0.005)
