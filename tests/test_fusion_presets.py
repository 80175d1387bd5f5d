"""The calibrated final ranking (HybridOptions.rank_weights) against its reading as
"rank by one feature", and the preset per embedder (config.preset_for) on every path."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hyperrag_fast import config
from hyperrag_fast.config import TUNED, HybridOptions, QueryOptions, preset_for
from hyperrag_fast.methods.stitch import FEATURES, fused_top, gated_top, graph_weight, rank_features


def _weights(feature: str) -> tuple[float, ...]:
    """Weight 1 on one base feature, 0 on the rest and on the preset's rank_links columns."""
    return (0.0, *[1.0 if f == feature else 0.0 for f in FEATURES], *[0.0] * len(TUNED.hybrid.rank_links))


@pytest.fixture(scope="module")
def small():
    from hyperrag_fast.chunking import Document
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.extract.offline import RegexExtractor
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.retriever import Retriever
    people = ["Olga Brenn", "Piet Marlow", "Ann Moor", "Ivo Stark", "Lena Dahl", "Tom Reyes"]
    docs = [Document(f"p{i}", p, f"{p} was born in Town{i % 3}. {p} married "
                                 f"{people[(i + 1) % len(people)]}. {p} directed Film {i}.")
            for i, p in enumerate(people)]
    docs += [Document(f"f{i}", f"Film {i}", f"Film {i} is a film directed by {people[i]}.")
             for i in range(len(people))]
    ix = HyperIndex.build(docs, RegexExtractor(), HashingEmbedder(), progress=False)
    return ix, Retriever(ix, HashingEmbedder())


QUESTIONS = ["Who directed Film 2?", "Where was the spouse of Olga Brenn born?",
             "Which film did the husband of Ann Moor direct?", "Where was Tom Reyes born?"]


def test_ppr_share_weights_reproduce_the_ppr_ranking(small):
    """Weights on the PPR share alone rank as the kernel does (by pi), on a real index
    (graph_mix "off": the presets' "prior_only" replaces that column by the prior's)."""
    ix, r = small
    base = replace(TUNED, k_chunks=12, stitch=TUNED.stitch.replace(top_k=6),
                   hybrid=replace(TUNED.hybrid, rank_weights=(), graph_mix="off"))  # the kernel's order
    fused = replace(base, hybrid=replace(base.hybrid, rank_weights=_weights("ppr")))
    for q in QUESTIONS:
        a = r.retrieve(q, base, detail=True)
        b = r.retrieve(q, fused)
        pi = {int(c): p for c, p in zip(a.detail["cq"], a.detail["cq_pi"])}
        # same chunks, in order, up to ties in pi
        got = [ix.chunks.index(next(c for c in ix.chunks if c.chunk_id == x.chunk_id)) for x in b.chunks]
        want = [ix.chunks.index(next(c for c in ix.chunks if c.chunk_id == x.chunk_id)) for x in a.chunks]
        assert [round(pi[i], 12) for i in got] == [round(pi[i], 12) for i in want]


def test_prior_share_weights_rank_as_no_ppr(small):
    ix, r = small
    base = replace(TUNED, k_chunks=12, stitch=TUNED.stitch.replace(top_k=6))
    fused = replace(base, hybrid=replace(base.hybrid, rank_weights=_weights("prior")))
    for q in QUESTIONS:
        prior = r.retrieve(q, fused, detail=True)
        p = {int(c): x for c, x in zip(prior.detail["cq"], prior.detail["cq_prior"])}
        scores = [p[next(i for i, c in enumerate(ix.chunks) if c.chunk_id == x.chunk_id)]
                  for x in prior.chunks]
        assert scores == sorted(scores, reverse=True)
        top = sorted(p.values(), reverse=True)[:len(scores)]
        assert scores == pytest.approx(top)


def test_features_literal():
    cq = np.array([7, 3, 9])
    sim = np.array([0.2, 0.5, 0.1])
    score = np.array([0.0, 1.0, np.e - 1])
    prior = np.array([0.2, 0.5, 0.3])
    pi = np.array([0.1, 0.3, 0.6])
    X = rank_features(cq, sim, score, prior, pi, dense=np.array([3, 5, 7]),
                      bm25=(np.array([9, 3]), np.array([2.0, 4.0])),
                      title=(np.array([7, 7]), np.array([0.25, 0.75])))
    col = {f: X[:, i].tolist() for i, f in enumerate(FEATURES)}
    assert col["prior"] == pytest.approx([0.4, 1.0, 0.6])
    assert col["ppr"] == pytest.approx([1 / 6, 0.5, 1.0])
    assert col["ppr_rank"] == pytest.approx([1 / 3, 1 / 2, 1.0])
    assert col["prior_rank"] == pytest.approx([1 / 3, 1.0, 1 / 2])
    assert col["dense_rank"] == pytest.approx([1 / 3, 1.0, 0.0])
    assert col["sim_gap"] == pytest.approx([-0.3, 0.0, -0.4])
    assert col["stibp"] == pytest.approx([0.0, np.log(2.0), 1.0])
    assert col["bm25"] == pytest.approx([0.0, 1.0, 0.5])
    assert col["title"] == pytest.approx([0.75, 0.0, 0.0])
    ids, s = fused_top(cq, X, (1.0, *[0.0] * (len(FEATURES) - 1), 2.0), 2)
    assert ids.tolist() == [7, 3] and s.tolist() == pytest.approx([2.5, 1.0])


def test_graph_gate_literal():
    """g = 1 - max/sum of the prior; score (1 - g) prior share + g PPR share."""
    cq = np.array([4, 8, 6])
    prior = np.array([0.4, 0.35, 0.25])
    pi = np.array([0.2, 0.5, 0.3])
    assert graph_weight(prior) == pytest.approx(0.6)
    ids, s = gated_top(cq, prior, pi, 3)
    want = {4: 0.4 * 1.0 + 0.6 * 0.4, 8: 0.4 * 0.875 + 0.6 * 1.0, 6: 0.4 * 0.625 + 0.6 * 0.6}
    assert ids.tolist() == [8, 4, 6] and s.tolist() == pytest.approx([want[8], want[4], want[6]])
    one = np.array([1.0, 0.0, 0.0])  # the prior on one chunk: the graph does not reorder
    assert graph_weight(one) == 0.0 and gated_top(cq, one, pi, 3)[0].tolist() == [4, 8, 6]
    assert gated_top(cq, prior, prior, 3)[0].tolist() == [4, 8, 6]  # no graph: the prior's order


def test_graph_gate_on_an_index(small):
    """graph_gate on a real index: the top-k is C_q ordered by the gated score of its own
    detail (prior, pi); off, the ranking is the kernel's (by pi)."""
    ix, r = small
    base = replace(TUNED, k_chunks=12, stitch=TUNED.stitch.replace(top_k=6),
                   hybrid=replace(TUNED.hybrid, rank_weights=()))
    gated = replace(base, hybrid=replace(base.hybrid, graph_gate=True))
    row = {c.chunk_id: i for i, c in enumerate(ix.chunks)}
    for q in QUESTIONS:
        a = r.retrieve(q, gated, detail=True)
        want, _ = gated_top(np.asarray(a.detail["cq"]), a.detail["cq_prior"], a.detail["cq_pi"], 6)
        assert [row[x.chunk_id] for x in a.chunks] == want.tolist()
    assert replace(config.PAPER_HYBRID).graph_gate is False and TUNED.hybrid.graph_gate is False


def test_rank_weights_validated():
    with pytest.raises(ValueError, match="rank_weights"):
        HybridOptions(rank_weights=(0.0, float("nan")))


def test_preset_per_embedder(monkeypatch):
    assert preset_for("all-MiniLM-L6-v2-onnx-int8") is config.PRESETS["minilm"] is TUNED
    assert preset_for("all-MiniLM-L6-v2-torch") is TUNED
    assert preset_for("bge-small-en-v1.5-onnx-int8:max_length=256") is config.PRESETS["bge-small"]
    assert preset_for("hashing-v1:dim=64:seed=0") is TUNED and preset_for(None) is TUNED


def test_index_embedder_picks_the_preset_explicit_options_win(small, monkeypatch):
    """The Retriever, ``hyperrag query`` and eval take the preset of the index's embedder;
    options given explicitly still win."""
    from hyperrag_fast.cli import build_parser, query_options
    from hyperrag_fast.eval.harness import method_options
    from hyperrag_fast.retriever import Retriever
    ix, _ = small
    other = replace(TUNED, k_nodes=7, stitch=TUNED.stitch.replace(delta=0.9))
    monkeypatch.setattr(config, "PRESET_NAMES", (("hashing-v1", "bge-small"),))
    monkeypatch.setitem(config.PRESETS, "bge-small", other)
    assert Retriever(ix).options == other
    given = QueryOptions(k_nodes=3)
    assert Retriever(ix, options=given).options == given
    a = build_parser().parse_args(["query", "ix", "q"])
    assert query_options(a, ix.embedder_name) == other
    a = build_parser().parse_args(["query", "ix", "q", "--k-nodes", "4", "--top-k", "3"])
    o = query_options(a, ix.embedder_name)
    assert (o.k_nodes, o.top_k, o.stitch.delta) == (4, 3, 0.9)
    assert method_options("stitch", None, 8, other) == other
    assert method_options("stitch", given, 8, other) == given
