"""A killed first build never blocks its path (issue 24 item 1): the folder a first
``hyperrag index`` leaves when it dies at any publish step (the kill hook), or is killed
with SIGKILL / SIGTERM / SIGINT while building, is taken up by the same command again,
without --force, under the writer lock; it ends with one clean index."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hyperrag_fast.index import HyperIndex

EXAMPLES = Path(__file__).resolve().parents[1] / "hyperrag_fast" / "data" / "examples"
STEPS = ["cleaned", "generation_partial", "generation_written", "pointer_temp",
         "pointer_replaced"]


#: ``hyperrag`` with the publish step hook (``publish.set_step_hook``) killing the process at
#: the step named by argv[1]
KILL_AT = """
import os, signal, sys
from hyperrag_fast import cli, publish
step = sys.argv.pop(1)
def kill(s):
    if s == step:
        os.kill(os.getpid(), signal.SIGKILL)
publish.set_step_hook(kill)
sys.exit(cli.main(sys.argv[1:]))
"""


def _default_sigint() -> None:
    """A child started from a non-interactive background job inherits SIGINT ignored (and
    Python then never raises KeyboardInterrupt): give it the default disposition."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _index(ix: Path, source: Path = EXAMPLES, env: dict | None = None,
           wait: bool = True, kill_at: str | None = None):
    run = [sys.executable, "-m", "hyperrag_fast.cli"] if kill_at is None else [
        sys.executable, "-c", KILL_AT, kill_at]
    cmd = [*run, "index", str(source), str(ix),
           "--extractor", "regex", "--embedder", "hashing", "--max-tokens", "64", "--quiet"]
    p = subprocess.Popen(cmd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=ix.parent,
                         preexec_fn=_default_sigint)
    if not wait:
        return p
    out, err = p.communicate(timeout=300)
    return p.returncode, out, err


def _assert_one_clean_index(ix: Path) -> None:
    names = {p.name for p in ix.iterdir()}
    gens = [n for n in names if n.startswith("gen-")]
    assert names - set(gens) == {"CURRENT", ".lock"}, names  # no scratch, no marker
    assert (ix / "CURRENT").read_text().strip() in gens and len(gens) <= 2
    assert HyperIndex.load(ix).n_chunks > 0


@pytest.mark.parametrize("step", STEPS)
def test_first_build_killed_at_each_publish_step_is_rerun(tmp_path, step):
    ix = tmp_path / "ix"
    code, _, err = _index(ix, kill_at=step)
    assert code == -signal.SIGKILL, f"kill point {step!r} not reached: {err[-500:]}"
    assert ix.is_dir()
    code, _, err = _index(ix)  # the same command, no --force
    assert code == 0, err
    _assert_one_clean_index(ix)
    code, _, err = _index(ix)  # a finished index is not replaced without --force
    assert code == 2 and "--force" in err


def _docs(tmp_path: Path, n: int = 400) -> Path:
    """Enough documents that the build runs a while after its scratch folder appears."""
    d = tmp_path / "docs.jsonl"
    d.write_text("".join(json.dumps({"id": f"d{i}", "title": f"Person {i}", "text":
                                     f"Person {i} was born in Town {i % 37}. Person {i} "
                                     f"married Person {(i * 7) % 400} in Year {1800 + i}."})
                         + "\n" for i in range(n)))
    return d


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_first_build_killed_while_building_is_rerun(tmp_path, sig):
    ix = tmp_path / "ix"
    docs = _docs(tmp_path)
    p = _index(ix, docs, wait=False)
    t = time.time()
    while not (ix.is_dir() and any(n.name.startswith(".hyperrag-build-") for n in ix.iterdir())):
        assert p.poll() is None, p.communicate()
        assert time.time() - t < 120
        time.sleep(0.01)
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert p.returncode != 0, "the build finished before the signal"
    assert "Traceback" not in err or sig == signal.SIGINT, err[-800:]
    code, _, err = _index(ix, docs)
    assert code == 0, err
    _assert_one_clean_index(ix)
    assert HyperIndex.load(ix).n_chunks >= 400


def test_a_running_first_build_is_not_joined(tmp_path):
    """A folder whose build still runs (its lock is held) is refused, not taken over."""
    from hyperrag_fast import publish
    ix = tmp_path / "ix"
    with publish.writer_lock(ix) as root, publish.first_build(root):
        code, _, err = _index(ix)
        assert code == 2 and "being written" in err, err
    code, _, err = _index(ix)
    assert code == 0, err
    _assert_one_clean_index(ix)


def test_a_foreign_folder_is_still_refused(tmp_path):
    ix = tmp_path / "ix"
    ix.mkdir()
    (ix / ".lock").touch()
    (ix / "notes.txt").write_text("mine")
    code, _, err = _index(ix)
    assert code == 2 and "not an index" in err
    assert (ix / "notes.txt").read_text() == "mine"
