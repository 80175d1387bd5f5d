"""The ranker's within-question losses (benchmarks/train_ranker.py ``fit(loss=...)``, session 21;
docs/architecture.md §6): a known optimum, an order only a within-question loss recovers,
the prior's bounds, and the ``--ranker`` spec keys."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import expit

_p = Path(__file__).resolve().parents[1] / "benchmarks" / "train_ranker.py"
_spec = importlib.util.spec_from_file_location("train_ranker_loss", _p)
tr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tr)


@pytest.mark.parametrize("loss", ["listwise", "pairwise"])
@pytest.mark.parametrize("c", [0.3, 1.0, 4.0])
def test_two_chunks_one_question_known_optimum(loss, c):
    # x = [1, 0], gold first: z = [+1, -1] (sd .5); both losses are log(1 + exp(-2w)) with
    # question weight 2 (the rows): 2C log(1 + e^{-2w}) + w^2/2, stationary at w = 4C expit(-2w)
    w_std = brentq(lambda w: w - 4.0 * c * expit(-2.0 * w), 0.0, 100.0)
    b, w = tr.fit([(np.array([[1.0], [0.0]]), np.array([1.0, 0.0]), np.array([0, 0]))], c=c, loss=loss)
    assert w == pytest.approx(w_std / 0.5, abs=1e-4)
    assert b + 0.5 * w == pytest.approx(0.0, abs=1e-5)  # standardised intercept 0


def _level_shifted(seed=0, n_q=60, n=6):
    """Per question a level a (large spread): x0 = a + r, x1 = -a + e; the gold has r = 1,
    e = 0, the others r < .9, e in [.3, 1]. Within a question x0 - x1 orders perfectly; across
    questions a only cancels in x0 + x1 = r + e, which misorders."""
    rng = np.random.default_rng(seed)
    X, y, q = [], [], []
    for j in range(n_q):
        a = rng.uniform(-20, 20)
        r = np.r_[1.0, rng.uniform(0.0, 0.9, n - 1)]
        e = np.r_[0.0, rng.uniform(0.3, 1.0, n - 1)]
        X.append(np.column_stack([a + r, -a + e]))
        y.append(np.r_[1.0, np.zeros(n - 1)])
        q.append(np.full(n, j))
    return np.concatenate(X), np.concatenate(y), np.concatenate(q)


def _top1(part, w):
    X, y, q = part
    s = X @ np.asarray(w[1:]) + w[0]
    return np.mean([y[q == j][np.argmax(s[q == j])] for j in np.unique(q)])


@pytest.mark.parametrize("loss,top", [("listwise", 0), ("pairwise", 0), ("pairwise", 2)])
def test_within_question_loss_recovers_the_order_a_level_shift_hides(loss, top):
    parts = [_level_shifted(0), _level_shifted(1)]
    w_point = tr.fit(parts, c=1.0)
    w_within = tr.fit(parts, c=1.0, loss=loss, top=top)
    assert w_within[1] > 0 > w_within[2]  # x0 up, x1 down: the within-question order
    assert all(_top1(p, w_within) == 1.0 for p in parts)
    assert min(_top1(p, w_point) for p in parts) < 0.9  # the pointwise fit cancels a instead


def test_prior_bounds_and_centre_hold():
    parts = [_level_shifted(2)]
    prior = tr.Prior(("all",), 1.0, ("x0", "x1"))
    b, w0, w1 = tr.fit(parts, c=1.0, prior=prior, loss="listwise")
    assert w0 > 0 and w1 == pytest.approx(0.0, abs=1e-9)  # x1 held >= 0, its fit wants < 0


def test_spec_keys_and_bad_loss():
    prior, kw = tr.parse_fit("signed=all;center=1;loss=pairwise;top=5")
    assert prior == tr.Prior(("all",), 1.0) and kw == {"loss": "pairwise", "top": 5}
    assert tr.parse_fit("loss=listwise") == (None, {"loss": "listwise"})
    with pytest.raises(ValueError):
        tr.fit([_level_shifted(3)], loss="ranknet")
