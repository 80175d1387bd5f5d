"""Index directory persistence: round trip, mmap, corruption, mismatch, atomic save.

More on concurrent writers, crashes and readers: tests/test_store_concurrency.py."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hyperrag_fast import checksums, publish, publish_linked, store
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.hypergraph import ARRAY_FIELDS
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.store import IndexCorruptedError, IndexMismatchError

DOCS = [
    {"id": "ada", "title": "Ada Lovelace", "text": "Ada Lovelace was the daughter of Lord Byron. "
     "She worked with Charles Babbage on the Analytical Engine."},
    {"id": "byron", "title": "Lord Byron", "text": "Lord Byron was an English poet. "
     "He died at Missolonghi in Greece."},
    {"id": "babbage", "title": "Charles Babbage", "text": "Charles Babbage was born in London. "
     "He designed the Analytical Engine."},
]


@pytest.fixture(scope="module")
def index():
    return HyperIndex.build(DOCS, RegexExtractor(), HashingEmbedder(), progress=False)


def _same(a: HyperIndex, b: HyperIndex) -> None:
    for k in ARRAY_FIELDS:
        np.testing.assert_array_equal(getattr(a.graph, k), getattr(b.graph, k), err_msg=k)
    for k, v in a.vectors().items():
        np.testing.assert_array_equal(v, b.vectors()[k], err_msg=k)
    assert a.chunks == b.chunks and a.extractions == b.extractions
    assert a.graph.node_desc == b.graph.node_desc and a.graph.edge_text == b.graph.edge_text
    assert a.graph.group_key == b.graph.group_key


@pytest.mark.parametrize("mmap", [True, False])
def test_round_trip(tmp_path, index, mmap):
    index.save(tmp_path / "ix")
    got = HyperIndex.load(tmp_path / "ix", HashingEmbedder(), mmap=mmap)
    _same(index, got)
    assert isinstance(got.node_vec, np.memmap) == mmap
    assert got.chunks[0].metadata == index.chunks[0].metadata
    m = json.loads((store.generation_dir(tmp_path / "ix") / "manifest.json").read_text())
    assert m["format_version"] == store.FORMAT_VERSION
    assert m["counts"]["chunks"] == 3 and m["embedder"]["dim"] == 64
    assert all(len(d) == 64 for d in m["files"].values())


def test_flipped_byte_is_reported(tmp_path, index):
    index.save(tmp_path / "ix")
    f = store.generation_dir(tmp_path / "ix") / "vectors" / "node_vec.npy"
    data = bytearray(f.read_bytes())
    data[-3] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(IndexCorruptedError, match="node_vec.npy"):
        HyperIndex.load(tmp_path / "ix")
    HyperIndex.load(tmp_path / "ix", verify=False)  # unverified load still reads it


def test_truncated_manifest(tmp_path, index):
    index.save(tmp_path / "ix")
    mf = store.generation_dir(tmp_path / "ix") / "manifest.json"
    mf.write_text(mf.read_text()[:40])
    with pytest.raises(IndexCorruptedError, match="manifest"):
        HyperIndex.load(tmp_path / "ix")


def test_missing_file(tmp_path, index):
    index.save(tmp_path / "ix")
    (store.generation_dir(tmp_path / "ix") / "arrays" / "edge_ptr.npy").unlink()
    with pytest.raises(IndexCorruptedError, match="edge_ptr.npy"):
        HyperIndex.load(tmp_path / "ix")


def test_format_version_mismatch(tmp_path, index):
    index.save(tmp_path / "ix")
    mf = store.generation_dir(tmp_path / "ix") / "manifest.json"
    m = json.loads(mf.read_text())
    m["format_version"] = 999
    checksums.write_manifest(mf.parent, m)  # a crafted manifest: sealed
    with pytest.raises(IndexMismatchError, match="format version 999"):
        HyperIndex.load(tmp_path / "ix")


def test_embedder_mismatch(tmp_path, index):
    index.save(tmp_path / "ix")
    with pytest.raises(IndexMismatchError, match="dim 32"):
        HyperIndex.load(tmp_path / "ix", embedder=HashingEmbedder(dim=32))
    with pytest.raises(IndexMismatchError, match="seed=1"):
        HyperIndex.load(tmp_path / "ix", embedder=HashingEmbedder(seed=1))


def test_not_an_index(tmp_path):
    with pytest.raises(FileNotFoundError):
        HyperIndex.load(tmp_path / "nope")
    (tmp_path / "dir").mkdir()
    with pytest.raises(IndexCorruptedError, match="not a saved index"):
        HyperIndex.load(tmp_path / "dir")


def test_atomic_save_keeps_old_index(tmp_path, index, monkeypatch):
    index.save(tmp_path / "ix")
    bigger = HyperIndex.build(DOCS + [{"id": "x", "title": "X", "text": "Another Thing here."}],
                              RegexExtractor(), HashingEmbedder(), progress=False)

    def crash(step):  # a failure while the new generation is half written
        if step == "generation_partial":
            raise RuntimeError("simulated crash")

    publish.set_step_hook(crash)
    try:
        with pytest.raises(RuntimeError, match="simulated crash"):
            bigger.save(tmp_path / "ix")
    finally:
        publish.set_step_hook(None)
    _same(index, HyperIndex.load(tmp_path / "ix"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ix"]  # temp dir cleaned up
    bigger.save(tmp_path / "ix")  # a later save replaces it
    assert HyperIndex.load(tmp_path / "ix").n_chunks == 4


def test_refuses_to_replace_non_index(tmp_path, index):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError):
        index.save(tmp_path / "data")
    assert (tmp_path / "data" / "keep.txt").exists()


def test_fast_checksums_recorded_and_checked(tmp_path, index):
    """Saves record xxh3_128 beside sha256; a verified load checks xxh3_128."""
    index.save(tmp_path / "ix")
    gen = store.generation_dir(tmp_path / "ix")
    m = json.loads((gen / "manifest.json").read_text())
    assert m["xxh3_128"].keys() == m["files"].keys()
    assert all(len(d) == 32 for d in m["xxh3_128"].values())
    assert checksums.verify_files(gen, m)[0] == "xxh3_128"
    f = gen / "arrays" / "edge_ptr.npy"
    data = bytearray(f.read_bytes())
    data[-1] ^= 0x01
    f.write_bytes(bytes(data))
    with pytest.raises(IndexCorruptedError, match="edge_ptr.npy: xxh3_128 does not match"):
        HyperIndex.load(tmp_path / "ix")


def _drop_fast_checksums(ix_dir) -> None:
    mf = store.generation_dir(ix_dir) / "manifest.json"
    m = json.loads(mf.read_text())
    del m["xxh3_128"]
    checksums.write_manifest(mf.parent, m)  # a crafted manifest: sealed


def test_index_without_fast_checksums_is_verified_with_sha256(tmp_path, index):
    """A format-4 index saved before issue 13 (sha256 only) loads, verified with sha256."""
    index.save(tmp_path / "ix")
    _drop_fast_checksums(tmp_path / "ix")
    gen = store.generation_dir(tmp_path / "ix")
    assert checksums.verify_files(gen, json.loads((gen / "manifest.json").read_text()))[0] == "sha256"
    _same(index, HyperIndex.load(tmp_path / "ix", HashingEmbedder()))
    f = gen / "vectors" / "chunk_vec.npy"
    data = bytearray(f.read_bytes())
    data[-2] ^= 0x10
    f.write_bytes(bytes(data))
    with pytest.raises(IndexCorruptedError, match="chunk_vec.npy: sha256 does not match"):
        HyperIndex.load(tmp_path / "ix")


def test_fast_checksums_must_cover_the_same_files(tmp_path, index):
    index.save(tmp_path / "ix")
    mf = store.generation_dir(tmp_path / "ix") / "manifest.json"
    m = json.loads(mf.read_text())
    m["xxh3_128"].pop("texts.sqlite")
    checksums.write_manifest(mf.parent, m)  # a crafted manifest: sealed
    with pytest.raises(IndexCorruptedError, match="same files"):
        HyperIndex.load(tmp_path / "ix")


def test_upgrade_adds_fast_checksums(tmp_path, index):
    index.save(tmp_path / "ix")
    _drop_fast_checksums(tmp_path / "ix")
    old = store.generation_dir(tmp_path / "ix")
    assert publish_linked.upgrade_checksums(tmp_path / "ix") is True
    new = store.generation_dir(tmp_path / "ix")
    assert new != old
    m = json.loads((new / "manifest.json").read_text())
    assert m["xxh3_128"].keys() == m["files"].keys()
    assert m["files"] == json.loads((old / "manifest.json").read_text())["files"]
    _same(index, HyperIndex.load(tmp_path / "ix", HashingEmbedder()))
    assert publish_linked.upgrade_checksums(tmp_path / "ix") is False  # nothing left to do


def test_upgrade_refuses_a_corrupted_index(tmp_path, index):
    index.save(tmp_path / "ix")
    _drop_fast_checksums(tmp_path / "ix")
    gen = store.generation_dir(tmp_path / "ix")
    f = gen / "arrays" / "node_ptr.npy"
    data = bytearray(f.read_bytes())
    data[-1] ^= 0x01
    f.write_bytes(bytes(data))
    with pytest.raises(IndexCorruptedError, match="node_ptr.npy: sha256"):
        publish_linked.upgrade_checksums(tmp_path / "ix")
    assert store.generation_dir(tmp_path / "ix") == gen  # nothing published


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("verify", [True, False])
def test_nan_vector_with_matching_checksums_is_refused(tmp_path, index, fast, verify):
    """A verified load scans the vectors for NaN / inf while hashing them (either
    checksum), an unverified one in the structural checks: the same error."""
    index.save(tmp_path / "ix")
    gen = store.generation_dir(tmp_path / "ix")
    f = gen / "vectors" / "edge_vec.npy"
    a = np.load(f)
    a[-1, -1] = np.nan
    f.unlink()
    np.save(f, a)
    mf = gen / "manifest.json"
    m = json.loads(mf.read_text())
    m.update(checksums.manifest_checksums(gen, [gen / r for r in m["files"]]))
    if not fast:
        del m["xxh3_128"]
    checksums.write_manifest(mf.parent, m)  # a crafted manifest: sealed
    with pytest.raises(IndexCorruptedError, match="edge_vec.npy: holds NaN or inf"):
        HyperIndex.load(tmp_path / "ix", verify=verify)


def test_finite_scan_while_hashing_matches_numpy(tmp_path):
    """The block-wise scan sees every value, across block boundaries and .npy headers."""
    from hyperrag_fast import checksums
    rng = np.random.default_rng(0)
    n = (checksums._BLOCK // 4) * 2 + 37  # values straddle two block boundaries
    for where in (None, 0, n // 2, n - 1, checksums._BLOCK // 4 - 20):
        a = rng.standard_normal(n).astype(np.float32)
        if where is not None:
            a[where] = np.inf
        np.save(tmp_path / "v.npy", a)
        _, ok = checksums.scan_file(tmp_path / "v.npy", "xxh3_128", True)
        assert ok is (where is None), where
    (tmp_path / "x.bin").write_bytes(b"not an npy file")
    assert checksums.scan_file(tmp_path / "x.bin", "xxh3_128", True)[1] is None


def test_chunks_are_read_row_by_row_until_all_are_needed(tmp_path, index):
    index.save(tmp_path / "ix")
    got = HyperIndex.load(tmp_path / "ix", HashingEmbedder())
    chunks = got.chunks
    assert len(chunks) == 3 and "loaded" not in repr(chunks)
    one, last = chunks[1], chunks[-1]
    assert one == index.chunks[1] and last == index.chunks[2]
    assert "loaded" not in repr(chunks)  # single rows did not read the table
    with pytest.raises(IndexError):
        chunks[3]
    assert list(chunks) == index.chunks and chunks[1] is one  # same objects once loaded
    assert got.chunk_index(index.chunks[2].chunk_id) == 2
    assert [] + chunks == index.chunks and chunks + [] == index.chunks


def test_ann_storage_recorded_and_old_indexes_read_as_f32(tmp_path, index):
    """The manifest records the HNSW storage; an index saved before the key existed was
    built with float32 graphs and loads as such (``add`` extends them in kind)."""
    index.save(tmp_path / "ix")
    mf = store.generation_dir(tmp_path / "ix") / "manifest.json"
    m = json.loads(mf.read_text())
    assert m["ann"]["storage"] == index.ann_params.storage == "f16"
    del m["ann"]["storage"]
    checksums.write_manifest(mf.parent, m)  # a crafted manifest: sealed
    assert HyperIndex.load(tmp_path / "ix").ann_params.storage == "f32"


def test_chunk_titles_read_one_column(tmp_path, index):
    """A query's title lookup reads the title column, not the chunk texts."""
    from hyperrag_fast.texts import chunk_titles

    index.save(tmp_path / "ix")
    ix = HyperIndex.load(tmp_path / "ix")
    assert chunk_titles(ix.chunks) == [c.title for c in index.chunks] == chunk_titles(index.chunks)
    assert "loaded" not in repr(ix.chunks)
