"""The ``hyperrag`` CLI end to end via ``main([...])`` with JSON output."""
from __future__ import annotations

import json

import pytest

from hyperrag_fast import checksums
from hyperrag_fast.cli import main
from hyperrag_fast.store import generation_dir


def run(capsys, *argv):
    code = main([*argv, "--json", "--quiet"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


@pytest.fixture
def corpus(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "ada.md").write_text("# Ada Lovelace\n\nAda Lovelace was the daughter of Lord Byron.")
    (d / "byron.md").write_text("# Lord Byron\n\nLord Byron died at Missolonghi in Greece.")
    (d / "empty.txt").write_text("")
    extra = tmp_path / "extra.md"
    extra.write_text("# Missolonghi\n\nMissolonghi is a town in Greece.")
    return d, extra


def test_index_query_add_delete_info(tmp_path, corpus, capsys):
    docs, extra = corpus
    ix = str(tmp_path / "ix")
    code, out, _ = run(capsys, "index", str(docs), ix, "--extractor", "regex",
                       "--embedder", "hashing", "--max-tokens", "64")
    assert code == 0 and out["counts"]["chunks"] == 2
    assert out["report"]["skipped"] == [["empty.txt", "empty text"]]

    code, out, _ = run(capsys, "query", ix, "Where did Ada's father die?", "--top-k", "2",
                       "--explain")
    assert code == 0 and len(out["chunks"]) == 2
    c = out["chunks"][0]
    assert {"chunk_id", "doc_id", "start", "end", "score", "text", "title"} <= set(c)
    assert "cq_chunk_ids" in out["explain"] and "node_a" in out["explain"]

    code, out, _ = run(capsys, "query", ix, "Lord Byron", "--method", "dense")
    assert code == 0 and out["chunks"][0]["doc_id"] == "byron.md"

    code, out, _ = run(capsys, "add", ix, str(extra))
    assert code == 0 and out["counts"]["chunks"] == 3
    code, out, _ = run(capsys, "delete", ix, "ada.md")
    assert code == 0 and out["removed_chunks"] == 1 and out["counts"]["documents"] == 2

    code, out, _ = run(capsys, "info", ix)
    assert code == 0 and out["manifest"]["counts"]["chunks"] == 2
    assert out["manifest"]["extractor"].startswith("regex")
    assert ["lord byron", 1] in out["biggest_groups"] or out["biggest_groups"]


def test_clear_errors(tmp_path, corpus, capsys):
    docs, _ = corpus
    code, _, err = run(capsys, "index", str(tmp_path / "missing"), str(tmp_path / "ix"),
                       "--extractor", "regex", "--embedder", "hashing")
    assert code == 2 and "no such file" in err and "Traceback" not in err
    code, _, err = run(capsys, "query", str(tmp_path / "nothing"), "q")
    assert code == 2 and "no index directory" in err

    ix = tmp_path / "ix"
    assert run(capsys, "index", str(docs), str(ix), "--extractor", "regex",
               "--embedder", "hashing")[0] == 0
    f = generation_dir(ix) / "arrays" / "node_chunk.npy"
    data = bytearray(f.read_bytes())
    data[-1] ^= 1
    f.write_bytes(bytes(data))
    code, _, err = run(capsys, "query", str(ix), "q")
    assert code == 2 and "node_chunk.npy" in err and "Traceback" not in err

    code, _, err = run(capsys, "delete", str(ix), "nope")
    assert code == 2


def test_embedder_mismatch_exit_code(tmp_path, corpus, capsys):
    docs, _ = corpus
    ix = tmp_path / "ix"
    assert run(capsys, "index", str(docs), str(ix), "--extractor", "regex",
               "--embedder", "hashing")[0] == 0
    from hyperrag_fast.embed.hashing import HashingEmbedder
    code = main(["query", str(ix), "q", "--json"], embedder=HashingEmbedder(dim=8))
    assert code == 2 and "embedder" in capsys.readouterr().err


def test_missing_optional_package_names_the_extra(tmp_path, corpus, capsys, monkeypatch):
    docs, _ = corpus
    import sys
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` fails
    code, _, err = run(capsys, "index", str(docs), str(tmp_path / "ix"), "--extractor", "regex")
    assert code == 2 and "hyperrag_fast[offline]" in err


@pytest.mark.slow
def test_demo_offline(tmp_path, capsys):
    code, out, _ = run(capsys, "demo", "--dir", str(tmp_path / "demo"))
    assert code == 0 and out["counts"]["chunks"] >= 8
    first = out["answers"][0]["top"]
    assert "Lord Byron" in [t["title"] for t in first["stitch"]]


def test_build_methods_then_query_the_prebuilt_methods(tmp_path, corpus, capsys):
    docs, _ = corpus
    ix = str(tmp_path / "ix")
    assert run(capsys, "index", str(docs), ix, "--extractor", "regex", "--embedder", "hashing")[0] == 0
    code, _, err = run(capsys, "query", ix, "Where did Ada's father die?", "--method", "merge_full")
    assert code == 2 and "hyperrag build-methods" in err
    cache = tmp_path / "cache"
    code, out, _ = run(capsys, "build-methods", ix, "merge_full", "stitch_consolidated",
                       "--cache-dir", str(cache))
    assert code == 0 and set(out["built"]) == {"merge_full", "coda", "consolidated"}
    assert (cache / "embeddings.sqlite").is_file()  # the entity names went through the cache
    for m in ("merge_full", "coda", "stitch_consolidated"):
        code, out, _ = run(capsys, "query", ix, "Where did Ada's father die?", "--method", m, "--top-k", "2")
        assert code == 0 and 1 <= len(out["chunks"]) <= 2, m
    code, _, err = run(capsys, "build-methods", ix, "no_such_method")
    assert code == 2 and "unknown method" in err


def test_upgrade_records_fast_checksums(tmp_path, corpus, capsys):
    """``hyperrag upgrade`` gives a sha256-only index (saved before issue 13) xxh3_128."""
    docs, _ = corpus
    ix = str(tmp_path / "ix")
    assert run(capsys, "index", str(docs), ix, "--extractor", "regex", "--embedder",
               "hashing")[0] == 0
    mf = generation_dir(ix) / "manifest.json"
    m = json.loads(mf.read_text())
    del m["xxh3_128"]
    checksums.write_manifest(mf.parent, m)  # a crafted manifest: sealed
    code, out, _ = run(capsys, "upgrade", ix)
    assert code == 0 and out["upgraded"] is True
    assert "xxh3_128" in json.loads((generation_dir(ix) / "manifest.json").read_text())
    code, out, _ = run(capsys, "upgrade", ix)
    assert code == 0 and out["upgraded"] is False
    assert run(capsys, "query", ix, "Lord Byron")[0] == 0
