"""CODA ``cover_weight`` (question-term coverage of the chosen set, coda/select.py
``_cover``; docs/architecture.md §7) against a brute-force twin."""
from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.coda.graph import consolidate
from hyperrag_fast.coda.kg_vectors import raw_vectors
from hyperrag_fast.coda.raw_kg import RawKG, chunk_kgs_from_extractions
from hyperrag_fast.coda.retrieve import CodaOptions, CodaRetriever
from hyperrag_fast.coda.select import _cover
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.indexing.lexical import fit_bm25
from hyperrag_fast.lexical import BM25
from hyperrag_fast.records import Extraction, Segment

EMB = HashingEmbedder(dim=64)
WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]


def _twin(vec, ids, score, k, lam, limit, docs_terms, q_terms, n_docs):
    """Each step: the best score + lam * idf share of the question terms the chunk holds
    that no chosen chunk holds (ties by chunk id); a candidate above ``limit`` cosine with
    a chosen one is skipped for good."""
    df = {t: sum(t in docs_terms[d] for d in range(n_docs)) for t in q_terms}
    idf = {t: math.log(1 + (n_docs - df[t] + 0.5) / (df[t] + 0.5)) for t in q_terms if df[t]}
    tot = sum(idf.values())
    covered: set[str] = set()
    chosen, skipped = [], set()
    while len(chosen) < min(k, len(ids)):
        left = [j for j in range(len(ids)) if j not in chosen and j not in skipped]
        if not left:
            break

        def val(j):
            new = (docs_terms[ids[j]] & set(idf)) - covered
            return score[j] + (lam * sum(idf[t] for t in new) / tot if tot else 0.0)
        for j in sorted(left, key=lambda j: (-val(j), ids[j])):
            if limit > 0 and any(float(vec[ids[j]] @ vec[ids[c]]) > limit for c in chosen):
                skipped.add(j)
                continue
            chosen.append(j)
            covered |= docs_terms[ids[j]]
            break
    return chosen


def _case(docs, q, seed):
    """(rng, BM25, question text, chunk vectors) of a generated corpus."""
    texts = [" ".join(sorted(d)) for d in docs]
    return (np.random.default_rng(seed), BM25(fit_bm25(texts, stop_words=False)),
            " ".join(sorted(q)), EMB.embed(texts).astype(np.float32))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sets(st.sampled_from(WORDS), min_size=1, max_size=4), min_size=2, max_size=8),
       st.sets(st.sampled_from(WORDS), min_size=1, max_size=4), st.integers(1, 6),
       st.sampled_from([0.0, 0.1, 0.5, 2.0]), st.sampled_from([0.0, 0.9]), st.integers(0, 999))
def test_cover_matches_twin(docs, q, k, lam, limit, seed):
    rng, bm, q_text, vec = _case(docs, q, seed)
    ids = rng.permutation(len(docs))[:max(1, len(docs) - 1)].astype(np.int64)
    score = np.round(rng.random(ids.size), 2)  # ties happen
    got = _cover(vec, ids, score, k, lam, limit, bm.postings(q_text), bm.n_docs).tolist()
    assert got == _twin(vec, ids.tolist(), score, k, lam, limit, [set(d) for d in docs], q,
                        len(docs))


def _graph():
    ex = [Extraction((Segment(t, ((t.split()[0].title(), t),)),)) for t in
          ("alpha beta", "alpha beta again", "gamma delta", "alpha gamma")]
    kg = RawKG.from_chunk_kgs(chunk_kgs_from_extractions(ex))
    ev, rv = raw_vectors(kg, EMB, {}, EMB.dim)
    return consolidate(kg, ev, rv)


def _small(texts, q_text):
    """(chunk vectors, question vector, BM25, options without the other signals, retriever)
    over :func:`_graph` and ``texts``."""
    cv = EMB.embed(texts).astype(np.float32)
    o = CodaOptions(k_entry=1, k_entry_relations=0, dense_pool=4, graph_weight=0.0,
                    lexical_weight=0.0, fact_weight=0.0, dedup_sim=0.0, cover_pairs=0.0)
    return (cv, EMB.embed([q_text])[0], BM25(fit_bm25(texts, stop_words=False)), o,
            CodaRetriever(_graph(), chunk_vec=cv))


def test_cover_weight_brings_the_other_half_of_the_question():
    """Two near-equal passages on "alpha beta" lead by cosine; with ``cover_weight`` the
    passage holding the question's other term ("delta") takes the second place."""
    q_text = "alpha beta delta"
    cv, q, bm, o, r = _small(["alpha beta", "alpha beta again", "gamma delta", "alpha gamma"],
                             q_text)
    plain = r.retrieve(q, q_text, 2, o, bm25=bm).chunk_ids.tolist()
    cover = r.retrieve(q, q_text, 2, replace(o, cover_weight=1.0), bm25=bm).chunk_ids.tolist()
    rel = cv @ q
    assert plain == sorted(range(4), key=lambda c: (-rel[c], c))[:2]
    assert 2 in cover and 2 not in plain
    # without BM25 (no question terms) the option cannot act
    assert r.retrieve(q, q_text, 2, replace(o, cover_weight=1.0)).chunk_ids.tolist() == plain
    with pytest.raises(ValueError):
        CodaOptions(cover_weight=-0.5)


def _pair_twin(vec, ids, score, k, lam, ratio, docs_terms, q_terms, n_docs):
    """As ``_twin`` (no skip) with ``cover_pairs`` = ``ratio`` x ``lam``: each step also
    gains lam x ratio x the idf_a idf_b share of the question-term pairs the chunk holds
    both terms of that no chosen chunk holds both of."""
    df = {t: sum(t in docs_terms[d] for d in range(n_docs)) for t in q_terms}
    idf = {t: math.log(1 + (n_docs - df[t] + 0.5) / (df[t] + 0.5)) for t in q_terms if df[t]}
    tot = sum(idf.values())
    terms = sorted(idf)
    pairs = {(a, b): idf[a] * idf[b] for i, a in enumerate(terms) for b in terms[i + 1:]}
    ptot = sum(pairs.values())
    covered: set = set()
    chosen: list[int] = []
    while len(chosen) < min(k, len(ids)):
        def val(j):
            d = docs_terms[ids[j]]
            new = [t for t in idf if t in d and t not in covered]
            newp = [p for p in pairs if p[0] in d and p[1] in d and p not in covered]
            g = sum(idf[t] for t in new) / tot if tot else 0.0
            if ptot:
                g += ratio * sum(pairs[p] for p in newp) / ptot
            return score[j] + lam * g
        j = min((j for j in range(len(ids)) if j not in chosen), key=lambda j: (-val(j), ids[j]))
        chosen.append(j)
        d = docs_terms[ids[j]]
        covered |= d | {p for p in pairs if p[0] in d and p[1] in d}
    return chosen


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sets(st.sampled_from(WORDS), min_size=1, max_size=4), min_size=2, max_size=8),
       st.sets(st.sampled_from(WORDS), min_size=1, max_size=5), st.integers(1, 6),
       st.sampled_from([0.1, 0.5, 2.0]), st.sampled_from([0.0, 0.5, 3.0]), st.integers(0, 999))
def test_cover_pairs_matches_twin(docs, q, k, lam, ratio, seed):
    """``cover_pairs`` (coda/select.py ``_pairs``) against a brute-force twin."""
    rng, bm, q_text, vec = _case(docs, q, seed)
    ids = rng.permutation(len(docs)).astype(np.int64)
    score = np.round(rng.random(ids.size), 1)  # ties happen
    got = _cover(vec, ids, score, k, lam, 0.0, bm.postings(q_text), bm.n_docs,
                 pairs=ratio).tolist()
    assert got == _pair_twin(vec, ids.tolist(), score, k, lam, ratio, [set(d) for d in docs],
                             q, len(docs))


def test_cover_pairs_off_and_validated():
    """``cover_pairs`` 0 or without ``cover_weight`` leaves ``coda`` as it is; negative
    values are refused."""
    q_text = "alpha delta gamma"
    cv, q, bm, o, r = _small(["alpha beta", "gamma delta", "alpha gamma", "beta delta"], q_text)
    o = replace(o, cover_weight=1.0)
    base = r.retrieve(q, q_text, 3, o, bm25=bm).chunk_ids.tolist()
    assert r.retrieve(q, q_text, 3, replace(o, cover_pairs=0.0), bm25=bm).chunk_ids.tolist() == base
    off = replace(o, cover_weight=0.0)
    assert (r.retrieve(q, q_text, 3, replace(off, cover_pairs=5.0), bm25=bm).chunk_ids.tolist()
            == r.retrieve(q, q_text, 3, off, bm25=bm).chunk_ids.tolist())
    with pytest.raises(ValueError):
        CodaOptions(cover_pairs=-0.1)


def test_defaults_are_the_selection_grids_pick():
    """Every knob benchmarks/coda_select_grid.py replays is at the committed grid's pick
    (the selection rule, docs/architecture.md §7): a moved default needs a new grid."""
    grid = json.loads((Path(__file__).resolve().parents[1] / "benchmarks" / "results"
                       / "coda_select_grid.json").read_text(encoding="utf-8"))
    o = CodaOptions()
    assert {k: getattr(o, k) for k in grid["selected_options"]} == grid["selected_options"]
