"""One index directory, many processes (issue #13): the single-writer lock, the crash-safe
publish (kill -9 at every step) and lock-free readers while generations are published.

Every process here is a real one (``subprocess`` with ``sys.executable``) on the regex
extractor + hashing embedder, so each test takes a few seconds at most.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hyperrag_fast import publish, store
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.index import HyperIndex

A = [{"id": "ada", "title": "Ada Lovelace", "text": "Ada Lovelace was the daughter of Lord Byron. "
      "She worked with Charles Babbage."},
     {"id": "byron", "title": "Lord Byron", "text": "Lord Byron was an English poet. He died at "
      "Missolonghi in Greece."},
     {"id": "babbage", "title": "Charles Babbage", "text": "Charles Babbage was born in London. "
      "He designed the Analytical Engine."}]
B1 = [{"id": "engine", "title": "Analytical Engine", "text": "The Analytical Engine used punched "
       "cards. The idea came from the Jacquard Loom."}]
B2 = [{"id": "loom", "title": "Jacquard Loom", "text": "Joseph Marie Jacquard demonstrated the "
       "Jacquard Loom in Lyon."}]

# An `hyperrag` run whose `add` stops after loading the index until the file `go` exists.
PAUSED = """
import os, sys, time
from pathlib import Path
from hyperrag_fast import cli
from hyperrag_fast.index import HyperIndex
sig = Path(os.environ["SIG"])
orig = HyperIndex.add
def add(self, *a, **k):
    (sig / "a-loaded").touch()
    t = time.time()
    while not (sig / "go").exists() and time.time() - t < 60:
        time.sleep(0.02)
    return orig(self, *a, **k)
HyperIndex.add = add
sys.exit(cli.main(sys.argv[1:]))
"""
# An `hyperrag` run that marks when it asks for the writer lock and when it has loaded.
MARKED = """
import os, sys
from pathlib import Path
from hyperrag_fast import cli
sig = Path(os.environ["SIG"])
try:
    import filelock
    orig_acquire = filelock.FileLock.acquire
    def acquire(self, *a, **k):
        (sig / "b-locking").touch()
        return orig_acquire(self, *a, **k)
    filelock.FileLock.acquire = acquire
except ImportError:
    pass
from hyperrag_fast.index import HyperIndex
orig_load = HyperIndex.load.__func__
def load(cls, *a, **k):  # the public load every writing command calls
    r = orig_load(cls, *a, **k)
    (sig / "b-loaded").touch()
    return r
HyperIndex.load = classmethod(load)
sys.exit(cli.main(sys.argv[1:]))
"""
# Build DOCS (argv[2], JSON) and save to argv[1].
SAVE = """
import json, sys
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.index import HyperIndex
HyperIndex.build(json.loads(sys.argv[2]), RegexExtractor(), HashingEmbedder(),
                 progress=False).save(sys.argv[1])
"""
# SAVE, but SIGKILL at the publish step named argv[3] (the hook publish.set_step_hook installs).
KILL_AT_STEP = """
import os, signal, sys
from hyperrag_fast import publish
step = sys.argv[3]
def kill(s):
    if s == step:
        os.kill(os.getpid(), signal.SIGKILL)
publish.set_step_hook(kill)
""" + SAVE
# SAVE, but SIGKILL right before the n-th os.rename/os.replace call (argv[3]).
KILL_AT_RENAME = """
import os, signal, sys
n = int(sys.argv[3]); calls = [0]
def wrap(f):
    def g(*a, **k):
        calls[0] += 1
        if calls[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return f(*a, **k)
    return g
os.rename, os.replace = wrap(os.rename), wrap(os.replace)
""" + SAVE


def py(code: str, *argv: str, env: dict | None = None, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *map(str, argv)],
                            env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def finish(p: subprocess.Popen, timeout: float = 120) -> tuple[int, str, str]:
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def cli(*argv: str, sig: Path | None = None, code: str | None = None) -> subprocess.Popen:
    argv = (*map(str, argv), "--quiet")
    if code is None:
        return subprocess.Popen([sys.executable, "-m", "hyperrag_fast.cli", *argv],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return py(code, *argv, env={"SIG": str(sig)})


def wait_for(cond, timeout: float = 60) -> None:
    t = time.time()
    while not cond():
        if time.time() - t > timeout:
            raise TimeoutError
        time.sleep(0.02)


def jsonl(path: Path, docs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def build(docs: list[dict]) -> HyperIndex:
    return HyperIndex.build(docs, RegexExtractor(), HashingEmbedder(), progress=False)


def doc_ids(path: Path) -> set[str]:
    return set(HyperIndex.load(path).doc_ids)


@pytest.fixture
def ix(tmp_path) -> Path:
    build(A).save(tmp_path / "ix")
    (tmp_path / "sig").mkdir()
    return tmp_path / "ix"


# ------------------------------------------------------------------ writer lock
def _paused_add(ix: Path, docs: list[dict]) -> subprocess.Popen:
    sig = ix.parent / "sig"
    p = cli("add", ix, jsonl(ix.parent / "b1.jsonl", docs), sig=sig, code=PAUSED)
    wait_for(lambda: (sig / "a-loaded").exists() or p.poll() is not None)
    assert p.poll() is None, p.communicate()
    return p


def _second_writer(ix: Path, *argv: str) -> subprocess.Popen:
    """Start a CLI writer while the paused add holds the index; return once it is waiting
    for the lock (or, without a lock, has finished)."""
    sig = ix.parent / "sig"
    p = cli(*argv, "--lock-timeout", "60", sig=sig, code=MARKED)
    wait_for(lambda: (sig / "b-locking").exists() or p.poll() is not None)
    if p.poll() is None:
        time.sleep(0.3)  # it is blocked on the lock, not loading
    return p


def test_second_add_is_refused_while_an_add_runs(ix):
    p1 = _paused_add(ix, B1)
    code, _, err = finish(cli("add", ix, jsonl(ix.parent / "b2.jsonl", B2)))
    assert code == 2, "a second writer must be refused, not silently lose an update"
    assert "hyperrag: error:" in err and "being written" in err and "--lock-timeout" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    (ix.parent / "sig" / "go").touch()
    assert finish(p1)[0] == 0
    assert doc_ids(ix) == {"ada", "byron", "babbage", "engine"}


def test_concurrent_adds_both_land(ix):
    p1 = _paused_add(ix, B1)
    p2 = _second_writer(ix, "add", ix, jsonl(ix.parent / "b2.jsonl", B2))
    (ix.parent / "sig" / "go").touch()
    r1, r2 = finish(p1), finish(p2)
    assert r1[0] == 0 and r2[0] == 0, (r1, r2)
    assert doc_ids(ix) == {"ada", "byron", "babbage", "engine", "loom"}


def test_delete_concurrent_with_add_is_not_lost(ix):
    p1 = _paused_add(ix, B1)
    p2 = _second_writer(ix, "delete", ix, "byron")
    (ix.parent / "sig" / "go").touch()
    r1, r2 = finish(p1), finish(p2)
    assert r1[0] == 0 and r2[0] == 0, (r1, r2)
    assert doc_ids(ix) == {"ada", "babbage", "engine"}


def test_writer_lock_api(ix):
    with publish.writer_lock(ix):
        with publish.writer_lock(ix):  # re-entrant in one thread; save takes it too
            build(A[:2]).save(ix)
        got: list[BaseException] = []

        def other():
            try:
                with publish.writer_lock(ix, timeout=0.1):
                    pass
            except BaseException as e:  # noqa: BLE001
                got.append(e)

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert len(got) == 1 and isinstance(got[0], store.IndexLockedError)
        assert "being written" in str(got[0])
        assert HyperIndex.load(ix).n_chunks == 2  # readers never wait for the lock
        # a bare save from another thread is refused while the lock is held
        t = threading.Thread(target=lambda: got.append(_save_error(ix)))
        t.start()
        t.join()
        assert isinstance(got[-1], store.IndexLockedError)
    build(A).save(ix)
    assert HyperIndex.load(ix).n_chunks == 3


def _save_error(ix: Path) -> BaseException | None:
    try:
        build(A).save(ix)
    except BaseException as e:  # noqa: BLE001
        return e
    return None


def test_lock_file_does_not_disturb_the_index(ix):
    with publish.writer_lock(ix):
        pass
    m = store.read_manifest(ix)
    assert not any(".lock" in f for f in m["files"])
    HyperIndex.load(ix)


# ------------------------------------------------------------ crash-safe publish
def _entries(ix: Path) -> set[str]:
    return {p.name for p in ix.iterdir()}


def _assert_clean(ix: Path, n_chunks: int) -> None:
    """Only the pointer, the lock, the live and the previous generation remain."""
    assert HyperIndex.load(ix).n_chunks == n_chunks
    names = _entries(ix)
    gens = sorted(n for n in names if n.startswith("gen-"))
    assert names - set(gens) <= {"CURRENT", ".lock"} and "CURRENT" in names, names
    assert len(gens) == 2 and (ix / "CURRENT").read_text().strip() == gens[-1], names
    assert sorted(p.name for p in ix.parent.iterdir() if p.name.startswith(".ix")) == []


@pytest.mark.parametrize("n", [1, 2, 3])
def test_kill_before_each_rename_keeps_an_index_at_the_path(ix, n):
    """Implementation-agnostic: SIGKILL right before the n-th rename of a save."""
    code, _, err = finish(py(KILL_AT_RENAME, ix, json.dumps(A + B1), n))
    assert code in (0, -9), err
    assert HyperIndex.load(ix).n_chunks in (3, 4)
    assert doc_ids(ix) in ({"ada", "byron", "babbage"}, {"ada", "byron", "babbage", "engine"})
    build(A[:2]).save(ix)  # the next writer cleans up
    assert doc_ids(ix) == {"ada", "byron"}
    assert [p.name for p in ix.parent.iterdir() if p.name.startswith(".ix.")] == []


STEPS_OLD = ["cleaned", "generation_partial", "generation_written", "pointer_temp"]
STEPS_NEW = ["pointer_replaced", "pruning"]


@pytest.mark.parametrize("step", STEPS_OLD + STEPS_NEW)
def test_kill_at_each_publish_step(ix, step):
    build(A[:2]).save(ix)
    build(A).save(ix)  # three publishes so far: the next one prunes a generation
    code, _, err = finish(py(KILL_AT_STEP, ix, json.dumps(A + B1), step))
    assert code == -9, f"the kill point {step!r} was not reached: {err}"
    want = 3 if step in STEPS_OLD else 4
    for _ in range(2):  # readers see a complete generation and remove nothing
        assert HyperIndex.load(ix).n_chunks == want
        assert store.read_manifest(ix)["counts"]["chunks"] == want
    left = _entries(ix)
    with publish.writer_lock(ix):
        pass  # taking the lock alone does not clean either
    assert _entries(ix) == left
    build(A + B2).save(ix)  # the next writer removes the crashed writer's leftovers
    _assert_clean(ix, 4)
    assert "loom" in doc_ids(ix)


def test_no_step_hook_unless_a_test_installs_one(tmp_path):
    """The kill points are a callback (``publish.set_step_hook``): no environment variable
    or other outside switch reaches them in a normal run."""
    assert publish.set_step_hook(None) is None
    env = {"HYPERRAG_TEST_KILL_AT": "generation_written"}  # the former switch: inert now
    code, _, err = finish(py(SAVE, tmp_path / "ix", json.dumps(A), env=env))
    assert code == 0, err
    assert HyperIndex.load(tmp_path / "ix").n_chunks == 3


def test_kill_during_first_build_leaves_no_published_index(tmp_path):
    ix = tmp_path / "ix"
    code, _, _ = finish(py(KILL_AT_STEP, ix, json.dumps(A), "generation_written"))
    assert code == -9
    with pytest.raises(store.IndexCorruptedError, match="not a saved index"):
        HyperIndex.load(ix)
    build(A).save(ix)
    assert HyperIndex.load(ix).n_chunks == 3
    assert len([n for n in _entries(ix) if n.startswith("gen-")]) == 1


def test_leftovers_are_removed_by_writers_only(ix):
    crashed = ix / "gen-999999-deadbeef"
    (crashed / "arrays").mkdir(parents=True)
    (crashed / "arrays" / "x.npy").write_bytes(b"partial")
    (ix / ".CURRENT.tmp-deadbeef").write_text("gen-999999-deadbeef\n")
    old_aside = ix.parent / ".ix.old-0123abcd"  # what the pre-generation save left behind
    old_aside.mkdir()
    HyperIndex.load(ix)
    store.read_manifest(ix)
    assert crashed.exists() and (ix / ".CURRENT.tmp-deadbeef").exists()  # readers leave them
    build(A + B1).save(ix)
    assert not crashed.exists() and not (ix / ".CURRENT.tmp-deadbeef").exists()
    assert not old_aside.exists()
    assert HyperIndex.load(ix).n_chunks == 4


def test_old_format_asks_for_a_rebuild_and_is_replaced(tmp_path):
    old = tmp_path / "old"
    (old / "arrays").mkdir(parents=True)
    (old / "manifest.json").write_text(json.dumps({"format_version": 3, "files": {}}))
    (old / "texts.sqlite").write_bytes(b"")
    for load in (HyperIndex.load, store.read_manifest):
        with pytest.raises(store.IndexMismatchError, match="rebuild the index"):
            load(old)
    build(A).save(old)  # rebuilding over it works and leaves only the new layout
    assert HyperIndex.load(old).n_chunks == 3
    assert {n for n in _entries(old) if not n.startswith("gen-")} <= {"CURRENT", ".lock"}


# ------------------------------------------------------------------ readers
READER = """
import json, os, sys, time
from hyperrag_fast import store
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.retriever import Retriever
ix, stop = sys.argv[1], sys.argv[2]
loads, errors, sizes = 0, [], set()
while not os.path.exists(stop) or loads < 3:
    try:
        idx = HyperIndex.load(ix, HashingEmbedder())
        Retriever(idx).retrieve("Where did Lord Byron die?")
        sizes.add(idx.n_chunks)
        store.read_manifest(ix)
        loads += 1
    except Exception as e:
        errors.append(f"{type(e).__name__}: {e}")
print(json.dumps({"loads": loads, "errors": errors[:5], "sizes": sorted(sizes)}))
"""
WRITER = """
import json, sys
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.index import HyperIndex
small, big = (HyperIndex.build(json.loads(d), RegexExtractor(), HashingEmbedder(),
                               progress=False) for d in sys.argv[2:4])
for i in range(int(sys.argv[4])):
    (big if i % 2 == 0 else small).save(sys.argv[1])
"""


def test_readers_never_see_an_error_while_generations_are_published(ix):
    stop = ix.parent / "stop"
    readers = [py(READER, ix, stop) for _ in range(2)]
    time.sleep(1.0)
    w = finish(py(WRITER, ix, json.dumps(A), json.dumps(A + B1), 8))
    stop.touch()
    assert w[0] == 0, w[2]
    for r in readers:
        code, out, err = finish(r)
        assert code == 0, err
        got = json.loads(out)
        assert got["errors"] == [] and got["loads"] >= 3, got
        assert set(got["sizes"]) <= {3, 4}


@pytest.mark.parametrize("publishes", [1, 2])
def test_reader_mid_load_while_a_writer_publishes(ix, monkeypatch, publishes):
    """A writer publishes (once: the reader's generation stays as the previous one; twice:
    it is pruned under the reader) right after the reader read the manifest."""
    bigger = build(A + B1)
    fired = []

    def publish(gen):
        if not fired:
            fired.append(gen)
            for _ in range(publishes):
                bigger.save(ix)

    previous = store.set_load_hook(publish)
    try:
        got = HyperIndex.load(ix)
    finally:
        store.set_load_hook(previous)
    assert fired and got.n_chunks == (3 if publishes == 1 else 4)
