"""The offline default never touches the network (issue 24; docs/architecture.md §12):
``hyperrag demo`` (which indexes) and ``hyperrag query --questions`` with the default
extractor and embedder make no DNS query and open no IP connection (``strace -f``), and
they work in a network namespace with no network at all (``unshare -n``). Each check is
skipped, with the reason, where its tool is missing or not permitted."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime", reason="the offline extra is not installed")
pytest.importorskip("spacy", reason="the offline extra is not installed")

CLI = [sys.executable, "-m", "hyperrag_fast.cli"]
# a telemetry upload is attempted once a session has run a while: enough questions for it
QUESTIONS = "".join(f"Who was the father of Ada Lovelace? ({i})\n" for i in range(400))
# getaddrinfo talks to nscd or to a resolver; any IP connect/send is network traffic
# (urllib3, imported by spaCy, binds a socket to ::1 port 0 to probe IPv6 and sends nothing)
_TRAFFIC = re.compile(r"\b(connect|sendto|sendmsg|sendmmsg)\(.*sa_family=AF_INET|nscd")


def _tool_works(argv: list[str]) -> str | None:
    """None if ``argv`` runs, else why not (for the skip reason)."""
    if shutil.which(argv[0]) is None:
        return f"{argv[0]} is not installed"
    try:
        r = subprocess.run(argv + ["true"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{argv[0]} cannot run here ({e})"
    if r.returncode != 0:
        return f"{' '.join(argv)} is not permitted here ({r.stderr.strip()[:200]})"
    return None


def _run(prefix: list[str], argv: list[str], tmp: Path, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}  # ours sets it
    return subprocess.run(prefix + CLI + argv, capture_output=True, text=True, cwd=tmp,
                          env=env, timeout=900, **kw)


def test_offline_default_makes_no_dns_query_or_connection(tmp_path):
    why = _tool_works(["strace", "-f", "-qq", "-o", os.devnull])
    if why:
        pytest.skip(why)
    (tmp_path / "q.txt").write_text(QUESTIONS)
    traffic = []
    for name, argv in (("demo", ["demo", "--dir", "ix", "--quiet"]),
                       ("query", ["query", "ix", "--questions", "q.txt", "--quiet"])):
        log = tmp_path / f"{name}.strace"
        r = _run(["strace", "-f", "-qq", "-e", "trace=network", "-o", str(log)], argv, tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        traffic += [f"{name}: {line}" for line in log.read_text(errors="replace").splitlines()
                    if _TRAFFIC.search(line)]
    assert traffic == [], "\n".join(traffic[:20])


def test_offline_default_works_without_any_network(tmp_path):
    why = _tool_works(["unshare", "-n"])
    prefix = ["unshare", "-n"]
    if why:
        why2 = _tool_works(["unshare", "-rn"])  # a user namespace, where root is not needed
        if why2:
            pytest.skip(f"{why}; {why2}")
        prefix = ["unshare", "-rn"]
    r = _run(prefix, ["demo", "--dir", "ix", "--quiet", "--json"], tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    r = _run(prefix, ["query", "ix", "Who was the father of Ada Lovelace?", "--json"], tmp_path)
    assert r.returncode == 0 and '"chunks"' in r.stdout, r.stderr[-2000:]
