"""Honest intake (issue #13 item 4): undecodable bytes, binary files, unsupported types,
symlinks, existing or unwritable targets, all-failed builds, empty queries and a top-k
the method cannot honour are reported or refused, never silent."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hyperrag_fast.chunking import load_documents
from hyperrag_fast.cli import main
from hyperrag_fast.records import Extraction

FAST = ("--extractor", "regex", "--embedder", "hashing")


def run(capsys, *argv):
    code = main([*argv, "--json", "--quiet"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


@pytest.fixture
def docs(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "ada.md").write_text("# Ada Lovelace\n\nAda Lovelace was the daughter of Lord Byron.")
    return d


def _index(capsys, src, ix, *extra):
    return run(capsys, "index", str(src), str(ix), *FAST, *extra)


# ------------------------------------------------------------------------ decoding
def test_latin1_is_a_counted_reported_warning(tmp_path, docs, capsys):
    (docs / "cafe.txt").write_bytes("Café Müller is in Berlin.".encode("latin-1"))
    code, out, _ = _index(capsys, docs, tmp_path / "ix")
    assert code == 0
    (w,) = out["report"]["warnings"]
    assert w[0] == "cafe.txt" and "2 undecodable bytes" in w[1] and "--encoding" in w[1]
    assert "1 warning" in out["report"]["summary"]
    # the human summary says so too
    assert main(["index", str(docs), str(tmp_path / "ix2"), *FAST, "--quiet"]) == 0
    assert "cafe.txt: 2 undecodable bytes" in capsys.readouterr().out
    # the API reports the same
    res = load_documents(docs)
    assert [d for d, _ in res.warnings] == ["cafe.txt"]


def test_explicit_encoding_decodes_latin1(tmp_path, docs, capsys):
    (docs / "cafe.txt").write_bytes("Café Müller is in Berlin.".encode("latin-1"))
    code, out, _ = _index(capsys, docs, tmp_path / "ix", "--encoding", "cp1252")
    assert code == 0 and out["report"]["warnings"] == []
    code, out, _ = run(capsys, "query", str(tmp_path / "ix"), "Café Müller", "--method", "dense")
    assert any("Café Müller" in c["text"] for c in out["chunks"])
    code, _, err = _index(capsys, docs, tmp_path / "ix3", "--encoding", "nope-codec")
    assert code == 2 and "encoding" in err


# ------------------------------------------------------------------- what is read
def test_binary_file_is_skipped_with_reason(tmp_path, docs, capsys):
    (docs / "junk.txt").write_bytes(np.random.default_rng(0).bytes(4000))
    code, out, _ = _index(capsys, docs, tmp_path / "ix")
    assert code == 0 and out["counts"]["documents"] == 1
    assert [d for d, r in out["report"]["skipped"] if "binary" in r] == ["junk.txt"]


def test_unsupported_types_are_listed(tmp_path, docs, capsys):
    (docs / "paper.pdf").write_bytes(b"%PDF-1.4 ...")
    code, out, _ = _index(capsys, docs, tmp_path / "ix")
    assert code == 0
    assert [[d, r] for d, r in out["report"]["skipped"] if d == "paper.pdf"] == [
        ["paper.pdf", "unsupported file type '.pdf'"]]
    only = tmp_path / "office"
    only.mkdir()
    (only / "a.pdf").write_bytes(b"%PDF")
    (only / "b.docx").write_bytes(b"PK\x03\x04")
    code, _, err = _index(capsys, only, tmp_path / "ix2")
    assert code == 2 and "a.pdf" in err and "b.docx" in err and "unsupported" in err


def test_symlinks_leaving_the_source_are_not_followed(tmp_path, docs, capsys):
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\n\nThe Secret Plan is stored elsewhere.")
    (docs / "link.md").symlink_to(outside)
    (docs / "inside.md").symlink_to(docs / "ada.md")
    code, out, _ = _index(capsys, docs, tmp_path / "ix")
    assert code == 0 and out["counts"]["documents"] == 2  # ada.md and inside.md
    assert [d for d, r in out["report"]["skipped"] if "symlink" in r] == ["link.md"]
    assert "--follow-symlinks" in dict(out["report"]["skipped"])["link.md"]
    code, out, _ = _index(capsys, docs, tmp_path / "ix2", "--follow-symlinks")
    assert code == 0 and out["counts"]["documents"] == 3


# ----------------------------------------------------------------------- targets
@pytest.fixture
def no_build(monkeypatch):
    from hyperrag_fast.index import HyperIndex

    def fail(*a, **k):
        raise AssertionError("the build started before the target was checked")
    monkeypatch.setattr(HyperIndex, "build", fail)


def test_existing_index_needs_force(tmp_path, docs, capsys, monkeypatch):
    ix = tmp_path / "ix"
    assert _index(capsys, docs, ix)[0] == 0
    (docs / "more.md").write_text("# More\n\nCharles Babbage met Ada Lovelace.")
    with monkeypatch.context() as m:
        from hyperrag_fast.index import HyperIndex
        m.setattr(HyperIndex, "build", lambda *a, **k: pytest.fail("build before the check"))
        code, _, err = _index(capsys, docs, ix)
    assert code == 2 and "--force" in err and "Traceback" not in err
    code, out, _ = _index(capsys, docs, ix, "--force")
    assert code == 0 and out["counts"]["documents"] == 2


def test_existing_non_index_folder_is_refused_before_work(tmp_path, docs, capsys, no_build):
    target = tmp_path / "notes"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    code, _, err = _index(capsys, docs, target)
    assert code == 2 and "not an index" in err
    code, _, err = _index(capsys, docs, target, "--force")
    assert code == 2 and "not an index" in err and (target / "keep.txt").exists()


def test_target_under_a_file_is_refused_before_work(tmp_path, docs, capsys, no_build):
    f = tmp_path / "file.txt"
    f.write_text("x")
    code, _, err = _index(capsys, docs, f / "ix")
    assert code == 2 and "not a folder" in err


def _without_root_powers() -> list[str]:
    """Command prefix under which permissions apply: root keeps them only without
    CAP_DAC_OVERRIDE (dropped from the bounding set by setpriv before exec)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permissions cannot be tested")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def test_read_only_parent_is_a_one_line_error(tmp_path, docs):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    try:
        r = subprocess.run([*_without_root_powers(), sys.executable, "-m", "hyperrag_fast.cli",
                            "index", str(docs), str(ro / "ix"), *FAST, "--quiet"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=300)
    finally:
        os.chmod(ro, 0o755)
    assert r.returncode == 2, r.stderr
    assert "permission" in r.stderr.lower() and str(ro) in r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1


def test_unreadable_file_is_a_one_line_error(tmp_path, docs):
    secret = docs / "secret.md"
    secret.write_text("# Secret\n\nThe Secret Plan.")
    os.chmod(secret, 0o000)
    try:
        r = subprocess.run([*_without_root_powers(), sys.executable, "-m", "hyperrag_fast.cli",
                            "index", str(docs), str(tmp_path / "ix"), *FAST, "--quiet"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=300)
    finally:
        os.chmod(secret, 0o644)
    assert r.returncode == 2, r.stderr
    assert "permission denied" in r.stderr and "secret.md" in r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1


# ------------------------------------------------------------------ failed builds
class FailingExtractor:
    name = "regex-v1:title=1"

    def extract(self, chunks, progress=None):
        return [Extraction((), error="LLM call failed: boom") for _ in chunks]


def test_build_where_every_chunk_failed_exits_nonzero(tmp_path, docs, capsys):
    code = main(["index", str(docs), str(tmp_path / "ix"), *FAST, "--json", "--quiet"],
                extractor=FailingExtractor())  # the CLI's seam for a component object
    err = capsys.readouterr().err
    assert code == 2 and "every chunk" in err and "boom" in err
    assert not (tmp_path / "ix").exists()


# ----------------------------------------------------------------------- queries
@pytest.fixture
def built(tmp_path, docs, capsys):
    (docs / "byron.md").write_text("# Lord Byron\n\nLord Byron died at Missolonghi in Greece.")
    ix = tmp_path / "ix"
    assert _index(capsys, docs, ix)[0] == 0
    return ix


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_query_is_an_error(built, capsys, text):
    code, _, err = run(capsys, "query", str(built), text)
    assert code == 2 and "empty" in err
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.retriever import Retriever
    r = Retriever(HyperIndex.load(built, HashingEmbedder()))
    with pytest.raises(ValueError, match="empty"):
        r.retrieve(text)
    with pytest.raises(ValueError, match="empty"):
        r.retrieve_batch(["Lord Byron", text])


def test_top_k_above_k_chunks_is_refused(built, capsys):
    code, _, err = run(capsys, "query", str(built), "Lord Byron", "--top-k", "20",
                       "--k-chunks", "10")
    assert code == 2 and "k_chunks" in err and "top_k" in err
    code, out, _ = run(capsys, "query", str(built), "Lord Byron", "--top-k", "20",
                       "--k-chunks", "20")
    assert code == 0
    code, out, _ = run(capsys, "query", str(built), "Lord Byron", "--top-k", "20",
                       "--k-chunks", "10", "--method", "dense")
    assert code == 0  # dense ranks every chunk
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.retriever import QueryOptions, Retriever
    r = Retriever(HyperIndex.load(built, HashingEmbedder()))
    with pytest.raises(ValueError, match="k_chunks"):
        r.retrieve("Lord Byron", QueryOptions(k_chunks=10).with_top_k(20))
