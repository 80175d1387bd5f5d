"""CODA ``lexical_scope`` (coda/select.py ``add_lexical``; docs/architecture.md §7) against a
brute-force twin, and its method row ``coda_lexical_all``."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.coda.retrieve import CodaOptions
from hyperrag_fast.coda.select import add_lexical
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.indexing.lexical import fit_bm25
from hyperrag_fast.lexical import BM25

EMB = HashingEmbedder(dim=32)
WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]


def _twin(texts, q, ids, score, k, o, vec, qv):
    """Every BM25 score from the texts' postings (no kernel); the best ``k`` with score > 0
    (ties by id) join the candidates; "top": only those gain lexical_weight x score / best,
    "all": every candidate does."""
    bm = BM25(fit_bm25(texts, stop_words=False)).scores(q)
    best = sorted((i for i in range(len(texts)) if bm[i] > 0), key=lambda i: (-bm[i], i))[:k]
    ids, score = list(ids), list(score)
    for i in best:
        if i not in ids:
            ids.append(i)
            score.append(o.dense_weight * float(vec[i] @ qv))
    if not best:
        return ids, score
    top = bm[best[0]]
    for j, i in enumerate(ids):
        if o.lexical_scope == "all" or i in best:
            score[j] += o.lexical_weight * bm[i] / top
    return ids, score


@settings(max_examples=80, deadline=None)
@given(docs=st.lists(st.sets(st.sampled_from(WORDS), min_size=1, max_size=5), min_size=2, max_size=12),
       q=st.sets(st.sampled_from(WORDS), min_size=1, max_size=4), pool=st.integers(0, 6),
       n_cand=st.integers(0, 8), scope=st.sampled_from(["top", "all"]), seed=st.integers(0, 99))
def test_add_lexical_matches_twin(docs, q, pool, n_cand, scope, seed):
    texts = [" ".join(sorted(d)) for d in docs]
    bm25 = BM25(fit_bm25(texts, stop_words=False))
    rng = np.random.default_rng(seed)
    vec = EMB.embed(texts).astype(np.float32)
    qv = EMB.embed([" ".join(sorted(q))])[0].astype(np.float32)
    ids = np.unique(rng.integers(0, len(texts), n_cand)).astype(np.int64)  # ascending: n0 = all
    score = rng.random(ids.size)
    o = CodaOptions(dense_pool=pool, lexical_scope=scope)
    text = " ".join(sorted(q))
    got_ids, got = add_lexical(bm25, text, ids, score.copy(), ids.size, 2, o, vec, qv)
    want_ids, want = _twin(texts, text, ids.tolist(), score.tolist(), max(pool, 2), o, vec, qv)
    assert got_ids.tolist() == want_ids
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_lexical_scope_validated():
    with pytest.raises(ValueError, match="lexical_scope"):
        CodaOptions(lexical_scope="some")
    assert CodaOptions().lexical_scope == "top"  # off by default (docs/architecture.md §7)


def test_coda_lexical_all_row_is_coda_with_the_option():
    """The method row runs ``coda``'s options with ``lexical_scope="all"``, whatever the
    setup says; ``coda`` itself follows the setup."""
    from hyperrag_fast.coda.system import build_coda
    from hyperrag_fast.extract.offline import RegexExtractor
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.methods import CodaSetup
    from hyperrag_fast.prebuilt import build_prebuilt
    from hyperrag_fast.retriever import QueryOptions, Retriever
    docs = [{"doc_id": str(i), "title": t, "text": x} for i, (t, x) in enumerate([
        ("Google", "Google was founded by Larry Page. Google Inc. is based in Mountain View."),
        ("Larry Page", "Larry Page was born in East Lansing. Larry Page studied at Stanford."),
        ("Stanford", "Stanford University is in California near Palo Alto."),
        ("Apple", "Apple was founded by Steve Jobs in Cupertino, California."),
        ("Cupertino", "Cupertino is a city in Santa Clara County, California."),
        ("Jobs", "Steve Jobs was born in San Francisco.")])]
    index = HyperIndex.build(docs, RegexExtractor(), EMB, progress=False)
    pre = build_prebuilt(index, ["coda"], coda=build_coda(index, gate=0.3))
    q = "Who founded Google and where was he born?"

    def top(o, m):
        r = Retriever(index, EMB, prebuilt=pre, coda=CodaSetup(o))
        res = r.retrieve(q, QueryOptions(method=m).with_top_k(2))
        return [(c.chunk_id, round(c.score, 9)) for c in res.chunks]
    small = CodaOptions(dense_pool=1)  # BM25's best 2 of 6 chunks: "top" scores only those
    on = top(CodaOptions(dense_pool=1, lexical_scope="all"), "coda")
    assert top(small, "coda_lexical_all") == on
    assert top(CodaOptions(dense_pool=1, lexical_scope="all"), "coda_lexical_all") == on
    assert top(small, "coda") != on  # the option moves this query's scores
