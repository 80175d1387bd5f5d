"""Pooled chunk vectors (``BuildOptions.chunk_vectors="pooled"``, docs/architecture.md
§10): each chunk vector is the normalised mean of its sentences' and title's normalised
vectors, passages are never embedded, and add / delete / the CLI keep the option."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hyperrag_fast.chunking import chunk_passage
from hyperrag_fast.config import BuildOptions
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.records import Extraction
from hyperrag_fast.store import IndexMismatchError

from test_index import A, B, C, CountingEmbedder, assert_same

POOLED = BuildOptions(chunk_vectors="pooled")


def _build(docs, emb=None, merge="semi", **opts):
    return HyperIndex.build(docs, RegexExtractor(), emb or HashingEmbedder(), merge=merge,
                            progress=False, options=BuildOptions(chunk_vectors="pooled", **opts))


def _unit(v):
    v = np.asarray(v, np.float64)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def test_pooled_vector_is_the_normalised_mean_of_sentence_and_title_vectors():
    emb = CountingEmbedder()
    ix = _build(A + B + C, emb)
    g = ix.graph
    assert ix.chunk_vectors == ix.manifest()["chunk_vectors"] == "pooled"
    assert ix.chunk_vec.shape == (len(ix.chunks), emb.dim)
    for i, c in enumerate(ix.chunks):
        sentences = [g.edge_text[e] for e in np.flatnonzero(g.edge_chunk == i)]
        assert len(sentences) >= 2
        rows = np.vstack([HashingEmbedder().embed(sentences), HashingEmbedder().embed([c.title])])
        want = _unit(_unit(rows).mean(axis=0))
        np.testing.assert_allclose(ix.chunk_vec[i], want, atol=1e-6)
    passages = {chunk_passage(c) for c in ix.chunks}
    assert not passages & set(emb.seen)  # the passages themselves are never embedded
    assert len(emb.seen) == len(set(emb.seen))
    text = HyperIndex.build(A + B + C, RegexExtractor(), CountingEmbedder(), progress=False)
    assert text.chunk_vectors == "text"
    for k in ("node_vec", "edge_vec"):  # only chunk vectors change
        np.testing.assert_array_equal(getattr(text, k), getattr(ix, k))


@pytest.mark.parametrize("merge", ["semi", "none", "full"])
def test_pooled_vectors_do_not_depend_on_partitions_or_merge(merge):
    want = _build(A + B + C)
    got = _build(A + B + C, merge=merge, partition_docs=1)
    np.testing.assert_array_equal(got.chunk_vec, want.chunk_vec)
    if merge == "semi":
        assert_same(want, got)


def test_a_chunk_without_sentences_falls_back_to_its_passage_vector():
    class FailsOnLoom(RegexExtractor):
        def extract(self, chunks, progress=None):
            out = super().extract(chunks, progress)
            return [Extraction((), error="x") if c.doc_id == "loom" else e
                    for c, e in zip(chunks, out)]

    ix = HyperIndex.build(A + C, FailsOnLoom(), HashingEmbedder(), progress=False, options=POOLED)
    i = [c.doc_id for c in ix.chunks].index("loom")
    np.testing.assert_allclose(ix.chunk_vec[i], _unit(HashingEmbedder().embed(
        [chunk_passage(ix.chunks[i])])[0]), atol=1e-6)


def test_add_and_delete_keep_the_representation(tmp_path):
    ix = _build(A)
    ix.save(tmp_path / "ix")
    ix = HyperIndex.load(tmp_path / "ix", HashingEmbedder(), extractor=RegexExtractor())
    assert ix.chunk_vectors == "pooled"
    with pytest.raises(IndexMismatchError, match="chunk_vectors"):
        ix.add(B, progress=False, options=BuildOptions(chunk_vectors="text"))
    ix.add(B + C, progress=False, options=BuildOptions(partition_docs=1))
    assert_same(_build(A + B + C), ix)
    ix.save(tmp_path / "ix")
    ix = HyperIndex.load(tmp_path / "ix")  # no embedder: delete must embed nothing
    assert ix.chunk_vectors == "pooled"
    ix.delete(["engine"])
    assert ix.chunk_vectors == "pooled"
    ix.embedder = HashingEmbedder()  # for the queries of assert_same
    assert_same(_build([d for d in A + B + C if d["id"] != "engine"]), ix)


def test_cli_and_api_build_the_same_pooled_index(tmp_path):
    from hyperrag_fast.cli import main
    src, more = tmp_path / "a.jsonl", tmp_path / "bc.jsonl"
    src.write_text("\n".join(json.dumps(d) for d in A))
    more.write_text("\n".join(json.dumps(d) for d in B + C))
    quiet = ["--quiet", "--json"]
    ix = str(tmp_path / "ix")
    assert main(["index", str(src), ix, "--chunk-vectors", "pooled", "--extractor", "regex",
                 "--embedder", "hashing", *quiet]) == 0
    assert main(["add", ix, str(more), "--chunk-vectors", "text", *quiet]) == 2
    assert main(["add", ix, str(more), *quiet]) == 0
    got = HyperIndex.load(ix, HashingEmbedder())
    assert got.chunk_vectors == "pooled"
    assert_same(_build(A + B + C), got)
