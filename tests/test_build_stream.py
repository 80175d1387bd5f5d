"""The streaming build: partitions, the flat assembler and the vector table give the
same index as one pass, every distinct text is embedded once, stage figures are reported."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import extractions

from hyperrag_fast.indexing.flat import FlatAssembler, partition_texts
from hyperrag_fast.config import BuildOptions
from hyperrag_fast.indexing.vectors import TextVectors
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.hypergraph import ARRAY_FIELDS
from hyperrag_fast.indexing.hypergraph import build_hypergraph, hypergraph_from_flat
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.records import Chunk

from test_index import A, B, C, CountingEmbedder, assert_same


def _chunks(n):
    return [Chunk(f"c{i}", f"d{i}", f"T{i}", f"text {i}", 0, 6) for i in range(n)]


@settings(max_examples=150, deadline=None)
@given(extractions(max_chunks=9), st.sampled_from(["semi", "none"]), st.data())
def test_flat_assembler_in_partitions_equals_the_one_pass_build(ex, merge, data):
    want = build_hypergraph(ex, merge=merge)
    asm = FlatAssembler(merge)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(ex)), max_size=4))) | {0, len(ex)})
    chunks = _chunks(len(ex))
    texts = {"node_name": [], "node_desc": [], "edge_text": []}
    needed = set()
    for a, b in zip(cuts, cuts[1:]):
        rec = asm.add(chunks[a:b], ex[a:b])
        for k in texts:
            texts[k] += getattr(rec, k)
        needed |= set(partition_texts(chunks[a:b], ex[a:b]))
        assert set(rec.node_desc + rec.edge_text + rec.passages) == set(partition_texts(chunks[a:b], ex[a:b]))
    got = hypergraph_from_flat(**asm.finish(), **texts, group_key=asm.group_key)
    for k in ARRAY_FIELDS:
        np.testing.assert_array_equal(getattr(got, k), getattr(want, k), err_msg=k)
    for k in ("node_name", "node_desc", "edge_text", "group_key"):
        assert getattr(got, k) == getattr(want, k), k


@settings(max_examples=60, deadline=None)
@given(extractions(max_chunks=9), st.sampled_from(["semi", "none"]), st.integers(0, 9))
def test_seeded_assembler_appends_like_one_pass(ex, merge, cut):
    cut = min(cut, len(ex))
    first = build_hypergraph(ex[:cut], merge=merge)
    asm = FlatAssembler(merge, groups=first.group_key)
    inc_edge = np.repeat(np.arange(first.n_edges, dtype=np.int32), np.diff(first.edge_ptr))
    asm.seed(first.node_chunk, first.node_group, first.edge_chunk, inc_edge, first.edge_nodes, cut)
    rec = asm.add(_chunks(len(ex))[cut:], ex[cut:])
    got = hypergraph_from_flat(**asm.finish(), node_name=first.node_name + rec.node_name,
                               node_desc=first.node_desc + rec.node_desc,
                               edge_text=first.edge_text + rec.edge_text, group_key=asm.group_key)
    want = build_hypergraph(ex, merge=merge)
    for k in ARRAY_FIELDS:
        np.testing.assert_array_equal(getattr(got, k), getattr(want, k), err_msg=k)


def test_text_table_embeds_each_text_once_and_gathers_sources(tmp_path):
    t = TextVectors(tmp_path, 3)
    src = t.add_source(np.eye(3, dtype=np.float32))
    t.know(["x", "y", "z"], src)
    codes, new = t.reserve(["a", "y", "a", "b"])
    assert new == [0, 3]
    t.append(np.array([[1, 2, 3], [4, 5, 6]], np.float32))
    np.testing.assert_array_equal(t.gather(codes), [[1, 2, 3], [0, 1, 0], [1, 2, 3], [4, 5, 6]])
    t.write_npy(tmp_path / "m.npy", codes[::-1])
    np.testing.assert_array_equal(np.load(tmp_path / "m.npy"), t.gather(codes[::-1]))
    with pytest.raises(ValueError, match="NaN"):
        t.reserve(["c"])
        t.append(np.full((1, 3), np.nan, np.float32))


@pytest.mark.parametrize("merge", ["semi", "none", "full"])
@pytest.mark.parametrize("part", [1, 2, 512])
def test_partitioning_does_not_change_the_index(merge, part):
    emb = CountingEmbedder()
    got = HyperIndex.build(A + B + C, RegexExtractor(), emb, merge=merge, progress=False,
                           options=BuildOptions(partition_docs=part))
    assert len(emb.seen) == len(set(emb.seen))  # every distinct text embedded once
    st_ = got.report.stages
    assert set(st_["stages"]) >= {"chunk", "extract", "embed", "assemble", "ann"}
    assert st_["counts"]["texts_embedded"] == got.report.embedded_texts == len(emb.seen)
    assert st_["peak_rss_mb"] > 0
    want = HyperIndex.build(A + B + C, RegexExtractor(), HashingEmbedder(), merge=merge,
                            progress=False, options=BuildOptions())
    assert_same(want, got)


def test_embedder_failure_in_the_pipeline_is_raised():
    class Broken(HashingEmbedder):
        def embed(self, texts):
            raise RuntimeError("model fell over")

    with pytest.raises(RuntimeError, match="model fell over"):
        HyperIndex.build(A, RegexExtractor(), Broken(), progress=False,
                         options=BuildOptions(partition_docs=1))


def test_add_in_partitions_equals_fresh_build():
    ix = HyperIndex.build(A, RegexExtractor(), HashingEmbedder(), progress=False)
    ix.add(B + C, progress=False, options=BuildOptions(partition_docs=1))
    assert_same(HyperIndex.build(A + B + C, RegexExtractor(), HashingEmbedder(), progress=False), ix)


def test_add_extends_the_hnsw_graph_instead_of_rebuilding(tmp_path):
    from hyperrag_fast.ann import AnnParams
    p = AnnParams(backend="usearch")
    ix = HyperIndex.build(A, RegexExtractor(), HashingEmbedder(), progress=False, ann_params=p)
    ix.save(tmp_path / "ix")
    ix = HyperIndex.load(tmp_path / "ix", HashingEmbedder(), extractor=RegexExtractor())
    old = {k: len(v.hnsw) for k, v in ix.ann.items()}
    ix.add(B + C, progress=False)
    fresh = HyperIndex.build(A + B + C, RegexExtractor(), HashingEmbedder(), progress=False,
                             ann_params=p)
    for k, v in ix.ann.items():
        assert v.backend == "usearch" and len(v.hnsw) == len(fresh.ann[k].hnsw) > old[k]
        for a, b in zip(v.distinct(), fresh.ann[k].distinct()):
            np.testing.assert_array_equal(a, b)
    ix.save(tmp_path / "ix")
    again = HyperIndex.load(tmp_path / "ix", HashingEmbedder())
    q = fresh.node_vec[3]
    np.testing.assert_array_equal(again.ann["node_vec"].search(q, 5)[0], fresh.ann["node_vec"].search(q, 5)[0])


def test_prebuilt_structures_of_an_earlier_generation_count_as_absent(tmp_path):
    from hyperrag_fast.prebuilt import build_prebuilt, load_prebuilt
    ix = HyperIndex.build(A + B, RegexExtractor(), HashingEmbedder(), progress=False)
    ix.save(tmp_path / "ix")
    build_prebuilt(ix, ["merge_full"]).save(tmp_path / "ix")
    assert load_prebuilt(tmp_path / "ix").has("merge_full")
    ix = HyperIndex.load(tmp_path / "ix", HashingEmbedder(), extractor=RegexExtractor())
    ix.add(C, progress=False)
    ix.save(tmp_path / "ix")
    assert not load_prebuilt(tmp_path / "ix").has("merge_full")
    build_prebuilt(ix, ["merge_full"]).save(tmp_path / "ix")
    assert load_prebuilt(tmp_path / "ix").has("merge_full")


def test_query_process_does_not_import_scikit_learn_or_fit_bm25(tmp_path):
    import subprocess
    import sys
    ix = HyperIndex.build(A + B + C, RegexExtractor(), HashingEmbedder(), progress=False)
    ix.save(tmp_path / "ix")
    code = (
        "import sys\n"
        "from hyperrag_fast.embed.hashing import HashingEmbedder\n"
        "from hyperrag_fast.index import HyperIndex\n"
        "from hyperrag_fast.retriever import Retriever\n"
        f"ix = HyperIndex.load({str(tmp_path / 'ix')!r}, HashingEmbedder())\n"
        "r = Retriever(ix)\n"
        "print([c.doc_id for c in r.retrieve('Who designed the Analytical Engine?').chunks][:1])\n"
        "assert 'sklearn' not in sys.modules, 'scikit-learn imported on the query path'\n"
        "assert 'hyperrag_fast.publish' not in sys.modules, 'the writing side imported by a query'\n"
        "assert ix.extractions._rows is None, 'extractions parsed at load'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "babbage" in out.stdout or "engine" in out.stdout


def test_scratch_of_a_killed_build_is_removed_by_the_next_writer(tmp_path):
    import os
    import subprocess
    import sys
    from hyperrag_fast.store import SCRATCH_PREFIX
    ix = HyperIndex.build(A, RegexExtractor(), HashingEmbedder(), progress=False)
    ix.save(tmp_path / "ix")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a process id that no longer runs
    left = tmp_path / "ix" / f"{SCRATCH_PREFIX}{dead.pid}-abcd"
    mine = tmp_path / "ix" / f"{SCRATCH_PREFIX}{os.getpid()}-abcd"
    left.mkdir()
    mine.mkdir()
    ix.save(tmp_path / "ix")
    assert not left.exists() and mine.exists()


def test_cli_build_scratch_lives_in_the_index_and_is_gone_after(tmp_path):
    import json
    from hyperrag_fast.cli import main
    from hyperrag_fast.store import SCRATCH_PREFIX
    src = tmp_path / "docs.jsonl"
    src.write_text("\n".join(json.dumps(d) for d in A + B))
    assert main(["index", str(src), str(tmp_path / "ix"), "--extractor", "regex",
                 "--embedder", "hashing", "--quiet"]) == 0
    import gc
    gc.collect()
    assert not [p for p in (tmp_path / "ix").iterdir() if p.name.startswith(SCRATCH_PREFIX)]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(SCRATCH_PREFIX)]


def test_shared_names_interns_equal_names_and_keeps_records_equal():
    from hyperrag_fast.indexing.partition import shared_names
    from hyperrag_fast.records import Extraction, Segment

    a, b = "".join(["Ada ", "Lovelace"]), "".join(["Ada Love", "lace"])
    assert a == b and a is not b
    exts = [Extraction((Segment("s1", ((a, "s1"),)),)), Extraction((), error="boom"),
            Extraction((Segment("s2", ((b, "s2"), ("x", "s2"))),))]
    out = shared_names(exts)
    assert out == exts and out[1] is exts[1]
    assert out[0].segments[0].entities[0][0] is out[2].segments[0].entities[0][0]
