"""HyperIndex: incremental add/delete equals a fresh build; skips and failures are reported."""
from __future__ import annotations

import numpy as np
import pytest

from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.hypergraph import ARRAY_FIELDS
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.records import Extraction
from hyperrag_fast.retriever import Retriever

A = [{"id": "ada", "title": "Ada Lovelace", "text": "Ada Lovelace was the daughter of Lord Byron. "
      "She worked with Charles Babbage."},
     {"id": "byron", "title": "Lord Byron", "text": "Lord Byron was an English poet. He died at "
      "Missolonghi in Greece."}]
B = [{"id": "babbage", "title": "Charles Babbage", "text": "Charles Babbage was born in London. "
      "He designed the Analytical Engine."},
     {"id": "engine", "title": "Analytical Engine", "text": "The Analytical Engine used punched "
      "cards. The idea came from the Jacquard Loom."}]
C = [{"id": "loom", "title": "Jacquard Loom", "text": "Joseph Marie Jacquard demonstrated the "
      "Jacquard Loom in Lyon. Lord Byron never saw it."}]
QUERIES = ["Where did the father of Ada Lovelace die?", "Who designed the Analytical Engine?",
           "Where was the Jacquard Loom shown?"]


class CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed(self, texts):
        self.seen.extend(texts)
        return super().embed(texts)


def build(docs, merge="semi", embedder=None):
    return HyperIndex.build(docs, RegexExtractor(), embedder or HashingEmbedder(), merge=merge,
                            progress=False)


def assert_same(a: HyperIndex, b: HyperIndex) -> None:
    for k in ARRAY_FIELDS:
        np.testing.assert_array_equal(getattr(a.graph, k), getattr(b.graph, k), err_msg=k)
    for k, v in a.vectors().items():
        np.testing.assert_array_equal(v, b.vectors()[k], err_msg=k)
    assert [c.chunk_id for c in a.chunks] == [c.chunk_id for c in b.chunks]
    ra, rb = Retriever(a), Retriever(b)
    for q in QUERIES:
        x, y = ra.retrieve(q), rb.retrieve(q)
        assert [c.chunk_id for c in x.chunks] == [c.chunk_id for c in y.chunks]
        assert [c.score for c in x.chunks] == [c.score for c in y.chunks]


@pytest.mark.parametrize("merge", ["semi", "full", "none"])
def test_add_equals_fresh_build(merge):
    emb = CountingEmbedder()
    ix = build(A, merge, emb)
    n_first = len(emb.seen)
    rep = ix.add(B, progress=False)
    assert rep.new_chunks == 2
    new_texts = emb.seen[n_first:]
    assert not set(new_texts) & set(emb.seen[:n_first])  # nothing embedded twice
    assert_same(build(A + B, merge), ix)


@pytest.mark.parametrize("merge", ["semi", "full"])
def test_delete_equals_fresh_build(merge):
    ix = build(A + B + C, merge)
    assert ix.delete(["loom"]) == 1
    assert_same(build(A + B, merge), ix)


def test_delete_after_save_load_does_not_embed(tmp_path):
    build(A + B + C).save(tmp_path / "ix")
    ix = HyperIndex.load(tmp_path / "ix", CountingEmbedder())
    ix.delete(["engine"])
    assert ix.embedder.seen == []
    assert_same(build(A + [B[0]] + C), ix)


def test_add_after_load_needs_matching_extractor(tmp_path):
    build(A).save(tmp_path / "ix")
    ix = HyperIndex.load(tmp_path / "ix", HashingEmbedder())
    with pytest.raises(ValueError, match="without an extractor"):
        ix.add(B, progress=False)
    ix.add(B, extractor=RegexExtractor(), progress=False)
    assert_same(build(A + B), ix)
    with pytest.raises(Exception, match="differs"):
        ix.add(C, extractor=RegexExtractor(include_title=False), progress=False)


def test_duplicate_and_unknown_documents():
    ix = build(A)
    with pytest.raises(ValueError, match="already in the index"):
        ix.add([A[0]], progress=False)
    with pytest.raises(ValueError, match="duplicate document id"):
        build(A + [A[0]])
    with pytest.raises(KeyError, match="nope"):
        ix.delete(["nope"])
    with pytest.raises(ValueError, match="empty"):
        ix.delete(["ada", "byron"])
    # the same text under two ids is two documents
    same = build([A[0], {**A[0], "id": "ada-copy"}])
    assert same.n_chunks == 2 and same.chunks[0].chunk_id != same.chunks[1].chunk_id


def test_empty_and_non_utf8_documents(tmp_path):
    (tmp_path / "empty.txt").write_text("   \n")
    (tmp_path / "latin1.txt").write_bytes("Café Müller lives in Zürich.".encode("latin-1"))
    (tmp_path / "ok.md").write_text("# Lord Byron\n\nLord Byron died at Missolonghi.")
    ix = build(tmp_path)
    assert ix.report.skipped == [("empty.txt", "empty text")]
    assert "empty.txt" in ix.report.summary()
    latin = next(c for c in ix.chunks if c.doc_id == "latin1.txt")
    assert "\ufffd" in latin.text and "non-UTF-8" in latin.metadata["warnings"][0]
    with pytest.raises(ValueError, match="nothing to index"):
        build([{"id": "e", "text": ""}])


class FlakyExtractor(RegexExtractor):
    """Raises on any batch holding a chunk that mentions 'BOOM'."""

    def extract(self, chunks, progress=None):
        if any("BOOM" in c.text for c in chunks):
            raise RuntimeError("model fell over")
        return super().extract(chunks, progress)


def test_extraction_failures_are_recorded_not_fatal():
    docs = A + [{"id": "bad", "title": "Bad", "text": "This one goes BOOM here."}]
    ix = HyperIndex.build(docs, FlakyExtractor(), HashingEmbedder(), progress=False)
    assert ix.n_chunks == 3
    assert ix.report.extraction_errors == [(ix.chunks[2].chunk_id, "RuntimeError: model fell over")]
    assert ix.report.error_reasons() == {"RuntimeError: model fell over": 1}
    assert ix.extractions[2] == Extraction((), "RuntimeError: model fell over")
    assert ix.manifest()["counts"]["extraction_errors"] == 1
    assert Retriever(ix).retrieve("Lord Byron").chunks
