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
    # a new candidate's cosine: float32 dot products of unit 32-d vectors summed in another
    # order by the twin (one row vs a matrix product) differ by up to 32 x 2**-24 ~ 2e-6
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=2e-6)


def test_lexical_scope_validated():
    with pytest.raises(ValueError, match="lexical_scope"):
        CodaOptions(lexical_scope="some")
    assert CodaOptions().lexical_scope == "top"  # off by default (docs/architecture.md §7)


def _ranker(texts, q: str, k: int):
    """``top(options, method)``: the ordered (chunk, score) top ``k`` of ``q`` on a small
    CODA index over ``texts`` ((title, text) pairs), the setup's options ``options``."""
    from hyperrag_fast.coda.system import build_coda
    from hyperrag_fast.extract.offline import RegexExtractor
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.methods import CodaSetup
    from hyperrag_fast.prebuilt import build_prebuilt
    from hyperrag_fast.retriever import QueryOptions, Retriever
    docs = [{"doc_id": str(i), "title": t, "text": x} for i, (t, x) in enumerate(texts)]
    index = HyperIndex.build(docs, RegexExtractor(), EMB, progress=False)
    pre = build_prebuilt(index, ["coda"], coda=build_coda(index, gate=0.3))

    def top(o, m):
        r = Retriever(index, EMB, prebuilt=pre, coda=CodaSetup(o))
        res = r.retrieve(q, QueryOptions(method=m).with_top_k(k))
        return [(c.chunk_id, round(c.score, 9)) for c in res.chunks]
    return top


def test_coda_lexical_all_row_is_coda_with_the_option():
    """The method row runs ``coda``'s options with ``lexical_scope="all"``, whatever the
    setup says; ``coda`` itself follows the setup."""
    top = _ranker([
        ("Google", "Google was founded by Larry Page. Google Inc. is based in Mountain View."),
        ("Larry Page", "Larry Page was born in East Lansing. Larry Page studied at Stanford."),
        ("Stanford", "Stanford University is in California near Palo Alto."),
        ("Apple", "Apple was founded by Steve Jobs in Cupertino, California."),
        ("Cupertino", "Cupertino is a city in Santa Clara County, California."),
        ("Jobs", "Steve Jobs was born in San Francisco.")], "Who founded Google and where was he born?", 2)
    small = CodaOptions(dense_pool=1)  # BM25's best 2 of 6 chunks: "top" scores only those
    on = top(CodaOptions(dense_pool=1, lexical_scope="all"), "coda")
    assert top(small, "coda_lexical_all") == on
    assert top(CodaOptions(dense_pool=1, lexical_scope="all"), "coda_lexical_all") == on
    assert top(small, "coda") != on  # the option moves this query's scores


# ------------------------------------------------- window_weight (coda/windows.py)
SENTS = ["Alpha met beta.", "Gamma left; delta stayed!", "Eps and zeta?", "Eta.", "Theta, alpha, gamma."]


def _win_twin(texts, q, c, width=3):
    """Brute force: split the passage at . ! ? ; : and line breaks, every run of ``width``
    sentences (the whole passage when shorter), the idf shares of the question terms it holds."""
    import math
    import re
    docs = [set(re.findall(r"\w+", t.lower())) for t in texts]
    qt = sorted(set(re.findall(r"\w+", q.lower())) & set().union(*docs))
    if not qt:
        return 0.0
    n = len(texts)
    idf = {t: math.log1p((n - sum(t in d for d in docs) + 0.5) / (sum(t in d for d in docs) + 0.5))
           for t in qt}
    tot = sum(idf.values())
    sents = [set(re.findall(r"\w+", s.lower())) for s in re.split(r"(?<=[.!?;:])\s+|\n+", texts[c])
             if s.strip()]
    runs = [sents[i:i + width] for i in range(max(1, len(sents) - width + 1))]
    return max(sum(idf[t] for t in qt if any(t in s for s in run)) for run in runs) / tot


@settings(max_examples=80, deadline=None)
@given(docs=st.lists(st.lists(st.sampled_from(SENTS), min_size=1, max_size=6), min_size=1, max_size=8),
       q=st.sets(st.sampled_from(WORDS + ["unknown"]), min_size=1, max_size=4),
       width=st.integers(1, 4))
def test_window_scores_match_twin(docs, q, width):
    from hyperrag_fast.coda.windows import Windows, question_weights
    texts = [" ".join(d) for d in docs]
    bm25 = BM25(fit_bm25(texts, stop_words=False))
    text = " ".join(sorted(q))
    terms, w = question_weights(bm25, text)
    win = Windows(lambda c: texts[c], bm25._vocab, width)
    ids = np.arange(len(texts))
    got = win.best(ids, terms, w) if terms.size else np.zeros(len(texts))
    want = [_win_twin(texts, text, c, width) for c in range(len(texts))]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(win.best(ids, terms, w) if terms.size else got, got)  # cached rows


def test_coda_window_row_is_coda_with_the_option():
    from hyperrag_fast.settings import CODA_WINDOW_ROW
    top = _ranker([(f"T{i}", x) for i, x in enumerate([
        "Larry Page founded Google. Many years passed. Weather was mild. Rivers ran. "
        "Mountain View hosts it.",
        "Google and Mountain View appear together here in one sentence about Larry Page.",
        "Stanford University is in California.", "Apple was founded by Steve Jobs."])],
        "How is Larry Page linked to Google in Mountain View?", 3)
    on = top(CodaOptions(window_weight=CODA_WINDOW_ROW), "coda")
    assert top(CodaOptions(), "coda_window") == on
    assert top(CodaOptions(), "coda") != on  # the option moves this query's scores
    with pytest.raises(ValueError, match="window_weight"):
        CodaOptions(window_weight=-1.0)
