"""HybridOptions.rank_split (session 20; docs/architecture.md §5, "Question style split"):
``engine.style_split`` against a literal twin, its names, validation, off in both presets,
and on a real index the query path's copy is the link columns times u (u = the question
names no page title)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.config import PRESETS, RANK_SPLITS, HybridOptions
from hyperrag_fast.engine import split_names, style_split
from hyperrag_fast.methods.stitch import FEATURES
from test_rank_links import ada_index


def _twin(rows, unnamed, n_links, mode):
    """Row by row from the definition: the row, then (all / its last n_links) values x u."""
    u = 1.0 if unnamed else 0.0
    out = []
    for r in rows:
        extra = [] if mode == "off" else (r if mode == "all" else r[len(r) - n_links:])
        out.append(list(r) + [x * u for x in extra])
    return out


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.integers(0, 5), st.booleans(), st.sampled_from(RANK_SPLITS), st.data())
def test_style_split_matches_twin(n_cols, n_rows, unnamed, mode, data):
    n_links = data.draw(st.integers(0, n_cols))
    rows = data.draw(st.lists(st.lists(st.floats(-5, 5, allow_nan=False), min_size=n_cols, max_size=n_cols),
                              min_size=n_rows, max_size=n_rows))
    X = np.asarray(rows, np.float64).reshape(n_rows, n_cols)
    got = style_split(X, unnamed, n_links, mode)
    width = n_cols + {"off": 0, "all": n_cols, "links": n_links}[mode]
    want = np.asarray(_twin(rows, unnamed, n_links, mode), np.float64).reshape(n_rows, width)
    np.testing.assert_array_equal(got, want)
    names = tuple(f"c{j}" for j in range(n_cols))
    assert len(split_names(names, n_links, mode)) == got.shape[1]


def test_split_names_literal_and_validation():
    assert split_names(("a", "b", "c"), 1, "links") == ("a", "b", "c", "unnamed:c")
    assert split_names(("a", "b"), 1, "all") == ("a", "b", "unnamed:a", "unnamed:b")
    assert split_names(("a",), 1, "off") == ("a",)
    with pytest.raises(ValueError, match="rank_split"):
        HybridOptions(rank_split="per_family")
    # the presets' splits are the selection grids' picks (docs/architecture.md §6, session 20)
    assert PRESETS["minilm"].hybrid.rank_split == "off"
    assert PRESETS["bge-small"].hybrid.rank_split == "all"


def test_split_on_the_query_path():
    """The detail's features gain one copy of the link columns, equal to them when the
    question names no page and 0 when it names one; the first columns are unchanged."""
    _, r = ada_index()
    base = PRESETS["bge-small"]
    split = replace(base, hybrid=replace(base.hybrid, rank_weights=(), rank_split="links"))
    plain = replace(split, hybrid=replace(split.hybrid, rank_split="off"))
    n = len(FEATURES) + len(base.hybrid.rank_links)
    for text, u in (("Where did the father of Ada Lovelace die?", 0.0), ("Which town did the poet die in?", 1.0)):
        a = r.retrieve(text, split, detail=True).detail
        b = r.retrieve(text, plain, detail=True).detail
        np.testing.assert_array_equal(a["cq"], b["cq"])
        assert a["features"].shape[1] == n + len(base.hybrid.rank_links)
        np.testing.assert_array_equal(a["features"][:, :n], b["features"])
        np.testing.assert_array_equal(a["features"][:, n:], b["features"][:, len(FEATURES):] * u)
