"""Question phrases matched by embedding (HybridOptions.phrase_sim) against a literal twin."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hyperrag_fast.chunking import Document
from hyperrag_fast.config import TUNED, HybridOptions
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.lexical import question_phrases
from hyperrag_fast.methods.base import OWN
from hyperrag_fast.methods.stitch import PHRASE_K, phrase_seeds
from hyperrag_fast.retriever import Retriever


def test_question_phrases():
    assert question_phrases("Were Scott Derrickson and Ed Wood of the same nationality?") == [
        "Scott Derrickson", "Ed Wood"]
    assert question_phrases("What is the University of Paris known for?") == ["University of Paris"]
    assert question_phrases("who directed it?") == []
    with pytest.raises(ValueError, match="phrase_sim"):
        HybridOptions(phrase_sim=1.5)


class PhraseEmbedder(HashingEmbedder):
    """Embeds a phrase as one chosen entity state's own vector (cosine 1 with it)."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.vectors = vectors

    def embed(self, texts):
        plain = super().embed(list(texts))
        return np.stack([self.vectors.get(t, v) for t, v in zip(texts, plain)])


@pytest.mark.parametrize("threshold", [0.5, 0.99])
def test_phrase_seeds_match_twin(threshold):
    docs = [Document(f"d{i}", f"Page {i}", f"Alpha Moor met Beta Lane in Gamma Town {i}.")
            for i in range(4)] + [Document("x", "Other", "Delta Ridge saw Omega Vale.")]
    ix = HyperIndex.build(docs, RegexExtractor(), HashingEmbedder(), progress=False)
    g = ix.graph
    target = [v for v in range(g.n_nodes) if g.node_name[v] == "Delta Ridge"][0]
    emb = PhraseEmbedder({"Karnak Hills": np.asarray(ix.node_vec[target], np.float32)})
    state = Retriever(ix, emb).state
    o = replace(TUNED.hybrid, phrase_sim=threshold)
    got = phrase_seeds(state, OWN, "Who lived near Karnak Hills?", o)
    # twin: exact cosine of the phrase vector with every state, PHRASE_K best over threshold
    p = emb.embed(["Karnak Hills"])[0]
    sims = np.asarray(ix.node_vec, np.float64) @ p
    best = np.argsort(-sims, kind="stable")[:PHRASE_K]
    groups = {int(g.node_group[v]) for v in best if sims[v] >= threshold - 1e-6}
    want = sorted(v for v in range(g.n_nodes) if int(g.node_group[v]) in groups
                  and g.group_chunks[g.node_group[v]] <= o.seed_max_group)
    assert sorted(got.tolist()) == want and target in want
    # a phrase that names a group exactly is left to the exact rule
    assert phrase_seeds(state, OWN, "Who saw Delta Ridge?", o).size == 0
    with pytest.raises(ValueError, match="embedder"):
        phrase_seeds(replace(state, embedder=None), OWN, "Who lived near Karnak Hills?", o)
