"""Titles named in the question (HybridOptions.title_chunks): the lookup against a literal
twin, the shares, and the option's effect on a real query."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.config import TUNED, HybridOptions
from hyperrag_fast.lexical import TitleLookup, normalize_name
from hyperrag_fast.methods.stitch import title_shares

WORDS = ["the", "trail", "pine", "song", "film", "of", "a"]


def _twin(titles, text, min_words):
    """Every word span of the question equal to a title key, minus spans strictly
    inside another such span; the chunks of each kept title."""
    words = normalize_name(text).split()
    keys = {normalize_name(t) for t in titles if normalize_name(t)}
    spans = [(i, j) for i in range(len(words)) for j in range(i + 1, len(words) + 1)
             if j - i >= min_words and " ".join(words[i:j]) in keys]
    kept = {" ".join(words[i:j]) for i, j in spans
            if not any(a <= i and j <= b and (a, b) != (i, j) for a, b in spans)}
    return {k: sorted(c for c, t in enumerate(titles) if normalize_name(t) == k) for k in kept}


phrase = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(phrase, st.just("")), min_size=1, max_size=8),
       st.lists(st.sampled_from(WORDS + ["(Song)", "?"]), max_size=10).map(" ".join),
       st.integers(1, 3))
def test_chunks_named_in_matches_twin(titles, text, min_words):
    got = TitleLookup(lambda: titles).chunks_named_in(text, min_words)
    want = _twin(titles, text, min_words)
    assert sorted(tuple(x.tolist()) for x in got) == sorted(tuple(v) for v in want.values())


def test_longest_title_wins_and_titles_read_once():
    reads = []
    titles = ["The Trail of the Lonesome Pine", "The Trail of the Lonesome Pine (song)",
              "The Trail of the Lonesome Pine (1916 film)", "Harry Carroll", "Pine"]
    tl = TitleLookup(lambda: reads.append(1) or titles)
    assert not reads
    got = tl.chunks_named_in("Where was the composer of song The Trail Of The Lonesome Pine (Song) born?", 2)
    assert [x.tolist() for x in got] == [[1]] and reads == [1]
    got = tl.chunks_named_in("Who wrote The Trail of the Lonesome Pine?", 2)
    assert [x.tolist() for x in got] == [[0]]
    assert tl.chunks_named_in("A pine tree", 2) == [] and [x.tolist() for x in tl.chunks_named_in("A pine", 1)] == [[4]]
    assert reads == [1]
    assert tl.keys() >= {"pine", "harry carroll"}


def test_title_shares_split_by_similarity():
    class Eng:
        chunk_vec = np.array([[1, 0], [0.6, 0.8], [-1, 0], [0, 1]], np.float32)
    q = np.array([1, 0], np.float32)
    ids, share = title_shares(Eng, q, [np.array([0, 1]), np.array([2]), np.array([3])])
    assert ids.tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(share, [1 / 1.6, 0.6 / 1.6, 1.0, 1.0], rtol=1e-6)
    assert title_shares(Eng, q, [])[0].size == 0
    # title_top: a page of several chunks keeps its most similar ones; one-chunk titles stay
    ids, share = title_shares(Eng, q, [np.array([3, 1, 0]), np.array([2])], top=1)
    assert ids.tolist() == [0, 2] and share.tolist() == pytest.approx([1.0, 1.0])
    ids, share = title_shares(Eng, q, [np.array([3, 1, 0])], top=2)
    assert ids.tolist() == [1, 0]
    np.testing.assert_allclose(share, [0.6 / 1.6, 1 / 1.6], rtol=1e-6)


def test_title_chunks_option_validated():
    with pytest.raises(ValueError, match="title_chunks"):
        HybridOptions(title_chunks=-1)
    with pytest.raises(ValueError, match="title_chunks"):
        HybridOptions(title_chunks=float("nan"))


def test_named_title_is_lifted_in_a_real_query():
    """On a built index the named title's chunk joins the candidates and rises to the top
    with the prior term; off, the other pages that quote the title outrank it."""
    from hyperrag_fast.chunking import Document
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.extract.offline import RegexExtractor
    from hyperrag_fast.retriever import Retriever

    docs = [Document(f"d{i}", f"Quiet Harbour Lights ({kind})",
                     f"Who painted Quiet Harbour Lights (painting)? This {kind} tells who painted it.")
            for i, kind in enumerate(["film", "song", "novel", "opera", "album", "poem"])]
    docs += [Document(f"f{i}", f"Filler Page {i}", f"Alpha beta gamma delta story number {i}.")
             for i in range(20)]
    docs.append(Document("t", "Quiet Harbour Lights (painting)", "Made in 1901 by Ann Moor."))
    ix = HyperIndex.build(docs, RegexExtractor(), HashingEmbedder(), progress=False)
    r = Retriever(ix, HashingEmbedder())
    q = "Who painted Quiet Harbour Lights (painting)?"
    # the prior term's own effect: no calibrated ranker on top (its weights move with the preset)
    off = replace(TUNED, hybrid=replace(TUNED.hybrid, title_chunks=0.0, rank_weights=()), k_chunks=8,
                  stitch=TUNED.stitch.replace(top_k=3))
    on = replace(off, hybrid=replace(off.hybrid, title_chunks=3.0))
    target = [c.chunk_id for c in ix.chunks if c.title == "Quiet Harbour Lights (painting)"][0]
    ranked_off = [c.chunk_id for c in r.retrieve(q, off).chunks]
    ranked_on = [c.chunk_id for c in r.retrieve(q, on).chunks]
    assert target not in ranked_off
    assert ranked_on[0] == target


def test_hop_titles_start_the_second_round_from_named_pages():
    """With ``hop_titles`` the names in a page the question names seed the second round
    even when that page is not the first round's best chunk."""
    from hyperrag_fast.chunking import Document
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.extract.offline import RegexExtractor
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.methods.stitch import run_stitch

    docs = [Document("a", "Night Train", "Night Train is a film directed by Olga Brenn."),
            Document("b", "Blue Harbour", "Blue Harbour is a film directed by Piet Marlow."),
            Document("c", "Olga Brenn", "Olga Brenn was born in Riga."),
            Document("d", "Piet Marlow", "Piet Marlow was born in Ghent.")]
    docs += [Document(f"f{i}", f"Filler {i}", f"Which film has the director born earlier {i}.")
             for i in range(10)]
    ix = HyperIndex.build(docs, RegexExtractor(), HashingEmbedder(), progress=False)
    from hyperrag_fast.retriever import Retriever
    r = Retriever(ix, HashingEmbedder())
    q = "Which film has the director born earlier, Night Train or Blue Harbour?"
    qv = HashingEmbedder().embed([q])[0]
    base = replace(TUNED, k_chunks=8, stitch=TUNED.stitch.replace(top_k=8))
    hops = []
    for on in (False, True):
        o = replace(base, hybrid=replace(base.hybrid, hop_titles=on, hop_chunks=1))
        out = run_stitch(r.state, qv, q, o.stitch, o.hybrid, o, True)
        hops.append({ix.graph.node_name[v] for v in out.detail["seed_nodes"].tolist()})
    assert hops[0] < hops[1]
    assert {"Olga Brenn", "Piet Marlow"} <= hops[1]
