"""Nothing the store reads or removes leaves the index folder (issue 24 item 4): symlinked
generation folders, pointers and locks are refused (or, when a writer prunes, the link
itself is removed), manifest file lists are checked (``ann_files`` included) and error
messages never quote a file."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from hyperrag_fast import checksums, store
from hyperrag_fast.ann import AnnParams
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.store import IndexCorruptedError, generation_dir, load_index

DOCS = [{"id": "ada", "title": "Ada Lovelace", "text": "Ada Lovelace was the daughter of Lord "
         "Byron. She worked with Charles Babbage."},
        {"id": "byron", "title": "Lord Byron", "text": "Lord Byron was an English poet. He "
         "died at Missolonghi in Greece."}]
SECRET = "root:x:0:0:secret-line-of-another-file"


@pytest.fixture(scope="module")
def index():
    return HyperIndex.build(DOCS, RegexExtractor(), HashingEmbedder(), progress=False,
                            ann_params=AnnParams(backend="usearch"))


def _manifest(ix):
    gen = generation_dir(ix)
    return gen, json.loads((gen / "manifest.json").read_text())


def _write_manifest(gen, m, resum=True):
    if resum:
        m.update(checksums.manifest_checksums(gen, [gen / r for r in m["files"]]))
    if hasattr(checksums, "write_manifest"):  # sealed: a crafted manifest
        checksums.write_manifest(gen, m)
    else:  # a main before the seal (this test then shows the failure it was written for)
        (gen / "manifest.json").write_text(json.dumps(m))


def test_pruning_a_symlinked_generation_removes_the_link_only(tmp_path, index):
    ix = tmp_path / "ix"
    index.save(ix)
    index.save(ix)
    old = sorted(p for p in ix.iterdir() if p.name.startswith("gen-"))[0]
    outside = tmp_path / "outside"
    shutil.copytree(old, outside)
    shutil.rmtree(old)
    old.symlink_to(outside, target_is_directory=True)
    for _ in range(2):  # the link is pruned as the older generation
        index.save(ix)
    assert (outside / "manifest.json").is_file() and (outside / "texts.sqlite").is_file()
    assert not os.path.lexists(old)
    assert HyperIndex.load(ix).n_chunks == 2


def test_live_generation_that_is_a_symlink_is_refused(tmp_path, index):
    ix = tmp_path / "ix"
    index.save(ix)
    gen = generation_dir(ix)
    outside = tmp_path / "outside"
    shutil.move(gen, outside)
    gen.symlink_to(outside, target_is_directory=True)
    with pytest.raises(IndexCorruptedError, match="symbolic link"):
        HyperIndex.load(ix)
    with pytest.raises(IndexCorruptedError, match="symbolic link"):
        store.read_manifest(ix)


@pytest.mark.parametrize("entry", ["../../other/{gen}/ann/chunk_vec.usearch", "/abs/chunk.usearch",
                                   "ann/../../x.usearch", "ann/missing.usearch"])
def test_ann_files_entry_outside_the_files_list_is_refused(tmp_path, index, entry):
    other = tmp_path / "other"
    index.save(other)
    ix = tmp_path / "a" / "ix"
    index.save(ix)
    gen, m = _manifest(ix)
    m["ann_files"]["chunk_vec"] = entry.format(gen=generation_dir(other).name)
    _write_manifest(gen, m)
    for verify in (True, False):
        with pytest.raises(IndexCorruptedError, match="ann_files entry|outside its generation"):
            HyperIndex.load(ix, verify=verify)


@pytest.mark.parametrize("entry", ["../outside.npy", "arrays/../../outside.npy", "/etc/hostname"])
def test_files_entry_outside_the_generation_is_refused(tmp_path, index, entry):
    ix = tmp_path / "ix"
    index.save(ix)
    (tmp_path / "outside.npy").write_bytes(b"x")
    gen, m = _manifest(ix)
    m["files"][entry] = "0" * 64
    m.pop("xxh3_128")
    _write_manifest(gen, m, resum=False)
    for verify in (True, False):
        with pytest.raises(IndexCorruptedError, match="outside its generation") as e:
            load_index(ix, verify=verify)
        assert entry not in str(e.value)


def test_a_listed_file_that_is_a_symlink_is_refused(tmp_path, index):
    ix = tmp_path / "ix"
    index.save(ix)
    gen, _ = _manifest(ix)
    f = gen / "lexical.json"
    shutil.move(f, tmp_path / "lexical.json")
    f.symlink_to(tmp_path / "lexical.json")
    with pytest.raises(IndexCorruptedError, match="symbolic link"):
        load_index(ix, verify=False)


def test_required_files_must_be_checksummed(tmp_path, index):
    ix = tmp_path / "ix"
    index.save(ix)
    gen, m = _manifest(ix)
    for key in ("files", "xxh3_128"):
        del m[key]["texts.sqlite"]
    _write_manifest(gen, m, resum=False)
    with pytest.raises(IndexCorruptedError, match="does not list texts.sqlite"):
        load_index(ix)


@pytest.mark.parametrize("how", ["symlink", "content"])
def test_pointer_errors_never_quote_the_file(tmp_path, index, how):
    ix = tmp_path / "ix"
    index.save(ix)
    secret = tmp_path / "passwd"
    secret.write_text(SECRET + "\n")
    (ix / "CURRENT").unlink()
    if how == "symlink":
        (ix / "CURRENT").symlink_to(secret)
    else:
        (ix / "CURRENT").write_text(SECRET + "\n")
    for call in (HyperIndex.load, store.read_manifest, store.current_generation):
        with pytest.raises(IndexCorruptedError) as e:
            call(ix)
        assert "secret" not in str(e.value) and "root:x" not in str(e.value)
    if how == "symlink":  # a writer replaces the link, not the file it points at
        index.save(ix)
        assert secret.read_text() == SECRET + "\n"
        assert HyperIndex.load(ix).n_chunks == 2


def test_bad_npy_header_message_does_not_quote_it(tmp_path, index):
    ix = tmp_path / "ix"
    index.save(ix)
    gen, _ = _manifest(ix)
    f = gen / "arrays" / "node_chunk.npy"
    data = bytearray(f.read_bytes())
    data[10:40] = b"{'descr': SECRETHEADERxxxxxxx"
    f.write_bytes(bytes(data))
    with pytest.raises(IndexCorruptedError, match="not a valid .npy") as e:
        load_index(ix, verify=False)
    assert "SECRET" not in str(e.value)


def test_lock_that_is_a_symlink_is_refused(tmp_path, index):
    ix = tmp_path / "ix"
    index.save(ix)
    (ix / ".lock").unlink()
    (ix / ".lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(IndexCorruptedError, match="symbolic link"):
        index.save(ix)
    assert not (tmp_path / "elsewhere").exists()


def test_texts_are_read_from_the_checksummed_file_alone(tmp_path, index):
    """texts.sqlite is opened immutable: a journal or WAL file beside it is never read,
    and an index path with URI characters opens."""
    ix = tmp_path / "a?b#c%d" / "ix"
    index.save(ix)
    gen = generation_dir(ix)
    (gen / "texts.sqlite-journal").write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + bytes(600))
    (gen / "texts.sqlite-wal").write_bytes(b"\x37\x7f\x06\x82" + bytes(600))
    got = HyperIndex.load(ix)
    assert [c.text for c in got.chunks] == [c.text for c in index.chunks]
