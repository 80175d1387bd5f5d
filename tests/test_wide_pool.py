"""HybridOptions.wide_chunks / wide_flat (candidate recall, issue 21; off in both presets):
``offpreset.wide_pool`` against a literal twin, and through the query path the second round's
candidates hold exactly the similarity ranks k_chunks..wide_chunks when the gate opens."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.config import TUNED, HybridOptions, QueryOptions
from hyperrag_fast.methods.offpreset import wide_pool

WORDS = ["rivers", "kings", "films", "songs", "ships", "birds", "wars", "ports", "hills", "lakes",
         "bells", "roads"]


@pytest.fixture(scope="module")
def retriever():
    from hyperrag_fast.chunking import Document
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.extract.offline import RegexExtractor
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.retriever import Retriever
    docs = [Document(f"d{i}", f"Page {i}", f"Page {i} tells of {w} and Town {i % 3}.")
            for i, w in enumerate(WORDS)]
    ix = HyperIndex.build(docs, RegexExtractor(), HashingEmbedder(), progress=False)
    return Retriever(ix, HashingEmbedder()), HashingEmbedder()


def _twin(sims: np.ndarray, prior: np.ndarray, k: int, wide: int, flat: float) -> list[int]:
    """The similarity ranks k..wide (exact search, ties by id) when max p / sum p <= flat."""
    if wide <= k or not len(prior) or max(prior) / sum(prior) > flat:
        return []
    order = sorted(range(len(sims)), key=lambda c: (-sims[c], c))
    return order[k:wide]


@settings(max_examples=100, deadline=None)
@given(prior=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=20), k=st.integers(0, 14),
       wide=st.integers(0, 14), flat=st.sampled_from([0.0, 0.1, 0.3, 1.0]), seed=st.integers(0, 99))
def test_wide_pool_matches_twin(retriever, prior, k, wide, flat, seed):
    r, emb = retriever
    prior = np.asarray(prior) + 1e-3  # a prior is positive somewhere (p sums to 1 in the kernel)
    q = emb.embed([f"Which of the {WORDS[seed % len(WORDS)]} near Town {seed % 3}?"])[0]
    sims = r.state.engine.chunk_vec.astype(np.float64) @ q.astype(np.float64)
    got = wide_pool(r.state, q, prior, k, wide, flat).tolist()
    want = _twin(sims, prior, k, wide, flat)
    assert len(got) == len(want)
    # the ANN's order among equal similarities may differ: compare similarities, then sets
    assert np.allclose(sims[got], sims[want], atol=1e-5)
    if len(set(np.round(sims, 5))) == len(sims):
        assert got == want


def test_query_path_adds_the_wide_ranks(retriever):
    r, emb = retriever
    text = "Which king sailed ships near Town 1?"
    h = replace(TUNED.hybrid, rank_weights=(), hop_chunks=0, hop_bridge=0.0, k_bm25=0, title_chunks=0.0,
                hop_titles=False)  # C0 = the dense top 3 alone
    base = QueryOptions(hybrid=h, k_chunks=3, stitch=TUNED.stitch.replace(top_k=3))
    off = r.retrieve(text, base, detail=True)
    on = r.retrieve(text, replace(base, hybrid=replace(h, wide_chunks=7)), detail=True)
    shut = r.retrieve(text, replace(base, hybrid=replace(h, wide_chunks=7, wide_flat=0.0)), detail=True)
    q = emb.embed([text])[0].astype(np.float64)
    ranks = np.argsort(-(r.state.engine.chunk_vec.astype(np.float64) @ q), kind="stable")
    added = set(on.detail["cand_chunks"].tolist()) - set(off.detail["cand_chunks"].tolist())
    assert set(off.detail["cand_chunks"].tolist()) == set(ranks[:3].tolist())
    assert added == set(ranks[3:7].tolist())
    assert set(ranks[3:7].tolist()) <= set(on.detail["cand_chunks"].tolist())
    assert shut.detail["cand_chunks"].tolist() == off.detail["cand_chunks"].tolist()
    assert [c.chunk_id for c in shut.chunks] == [c.chunk_id for c in off.chunks]


def test_wide_options_validated():
    for bad in ({"wide_chunks": -1}, {"wide_flat": -0.5}):
        with pytest.raises(ValueError):
            HybridOptions(**bad)
    assert HybridOptions().wide_chunks == 0  # off in the presets
