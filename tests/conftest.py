"""Shared pytest fixtures. Keep this file to fixtures; one clearly marked section each."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


# ------------------------------------------------------------------------------
# Loopback OpenAI-protocol server (tests/openai_server.py; API in its docstring).
# Test modules may `from openai_server import Status, Text, Slow, Drop, Raw, ...`:
# the module is registered under that name here, because pytest runs with
# --import-mode=importlib and tests/ is not on sys.path.
# ------------------------------------------------------------------------------
def _load_openai_server():
    name = "openai_server"
    if name not in sys.modules:
        path = Path(__file__).with_name("openai_server.py")
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


_openai_server_mod = _load_openai_server()


@pytest.fixture
def openai_server():
    """A started :class:`openai_server.OpenAIServer` on 127.0.0.1 (fresh per test).

    Fails the test at teardown if a scripted responder raised.
    """
    srv = _openai_server_mod.OpenAIServer().start()
    try:
        yield srv
    finally:
        srv.stop()
    if srv.errors:
        pytest.fail("openai_server responder errors: " + "; ".join(srv.errors))


# ------------------------------------------------------------------------------
# A two-document saved index built through the CLI with the regex extractor and the
# hashing embedder (fast; the tests copy it before damaging it). One per test module.
# ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory) -> Path:
    from hyperrag_fast.cli import main
    root = tmp_path_factory.mktemp("tiny_index")
    docs = root / "docs"
    docs.mkdir()
    (docs / "ada.md").write_text("# Ada Lovelace\n\nAda Lovelace was the daughter of Lord Byron.")
    (docs / "byron.md").write_text("# Lord Byron\n\nLord Byron died at Missolonghi in Greece.")
    assert main(["index", str(docs), str(root / "ix"), "--extractor", "regex", "--embedder",
                 "hashing", "--quiet"]) == 0
    return root / "ix"
