"""``hyperrag index --extractor llm`` and ``add`` on an LLM-built index, against the
loopback OpenAI-protocol server (issue #13 item 5): cache, resume, failures."""
from __future__ import annotations

import json
import re

import pytest

from hyperrag_fast.cli import main
from hyperrag_fast.store import read_manifest


def chunk_text(messages) -> str:
    user = [m["content"] for m in messages if m["role"] == "user"][0]
    return re.search(r"Task text:\n(.*)\nOutput:", user, re.S).group(1)


def good(messages):
    text = chunk_text(messages)
    names = re.findall(r"[A-Z][a-z]+(?: [A-Z][a-z]+)*", text)
    return json.dumps([{"reference": text, "knowledge": text,
                        "entities": {n: f"{n} appears in: {text}" for n in names}}])


@pytest.fixture(autouse=True)
def no_openai_env(monkeypatch):
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(k, raising=False)


@pytest.fixture
def docs(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "ada.md").write_text("# Ada Lovelace\n\nAda Lovelace was the daughter of Lord Byron.")
    (d / "byron.md").write_text("# Lord Byron\n\nLord Byron died at Missolonghi in Greece.")
    return d


def run(capsys, *argv):
    code = main([*argv, "--json", "--quiet"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def llm_index(capsys, srv, src, ix, *extra):
    return run(capsys, "index", str(src), str(ix), "--extractor", "llm", "--model", "m",
               "--base-url", srv.base_url, "--embedder", "hashing", *extra)


def test_llm_build_uses_the_cache_and_resumes(openai_server, tmp_path, docs, capsys):
    openai_server.chat.responder = good
    code, out, err = llm_index(capsys, openai_server, docs, tmp_path / "ix")
    assert code == 0, err
    assert out["counts"]["chunks"] == 2 and out["counts"]["nodes"] >= 4
    assert out["report"]["extraction_errors"] == 0
    assert openai_server.chat.count == 2
    m = read_manifest(tmp_path / "ix")
    assert m["extractor"] == "llm:m:stitch-a1"
    # the answers are cached beside the index: a rebuild makes no call
    assert (tmp_path / "ix.cache" / "llm_extract.sqlite").is_file()
    code, out, _ = llm_index(capsys, openai_server, docs, tmp_path / "ix", "--force")
    assert code == 0 and openai_server.chat.count == 2


def test_llm_build_where_every_chunk_fails_exits_nonzero(openai_server, tmp_path, docs,
                                                         capsys):
    openai_server.chat.responder = lambda messages: "I cannot help with that."
    code, _, err = llm_index(capsys, openai_server, docs, tmp_path / "ix")
    assert code == 2 and "every chunk (2)" in err and not (tmp_path / "ix").exists()
    calls = openai_server.chat.count
    # the failures are cached: fixed model, --retry-failures re-asks them
    openai_server.chat.responder = good
    code, _, err = llm_index(capsys, openai_server, docs, tmp_path / "ix")
    assert code == 2 and openai_server.chat.count == calls
    code, out, err = llm_index(capsys, openai_server, docs, tmp_path / "ix", "--retry-failures")
    assert code == 0, err
    assert out["report"]["extraction_errors"] == 0 and openai_server.chat.count == calls + 2


def test_add_rebuilds_the_llm_extractor_from_the_manifest(openai_server, tmp_path, docs,
                                                         capsys, monkeypatch):
    openai_server.chat.responder = good
    ix = tmp_path / "ix"
    assert llm_index(capsys, openai_server, docs, ix)[0] == 0
    extra = tmp_path / "extra.md"
    extra.write_text("# Missolonghi\n\nMissolonghi is a town in Greece.")
    code, _, err = run(capsys, "add", str(ix), str(extra))
    assert code == 2 and "no LLM endpoint" in err
    code, _, err = run(capsys, "add", str(ix), str(extra), "--base-url", openai_server.base_url,
                       "--model", "other")
    assert code == 2 and "llm:m:stitch-a1" in err
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    code, out, err = run(capsys, "add", str(ix), str(extra))
    assert code == 0, err
    assert out["counts"]["chunks"] == 3 and openai_server.chat.count == 3


def test_llm_build_needs_a_model_before_work(openai_server, tmp_path, docs, capsys):
    code, _, err = run(capsys, "index", str(docs), str(tmp_path / "ix"), "--extractor", "llm",
                       "--base-url", openai_server.base_url, "--embedder", "hashing")
    assert code == 2 and "model" in err and openai_server.chat.count == 0
