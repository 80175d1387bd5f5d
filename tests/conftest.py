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
