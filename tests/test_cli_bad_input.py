"""Bad input never crashes the ``hyperrag`` process (issue 24, failures 5 and 6): each case
is replayed in a real subprocess and must end with exit status 2 and exactly one line on
stderr (no traceback); SIGINT exits 130 with one line, a closed pipe exits quietly
(docs/architecture.md §12). The regex extractor and the hashing embedder keep it fast."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hyperrag_fast import checksums
from hyperrag_fast.cli import main
from hyperrag_fast.store import generation_dir

FAST = ("--extractor", "regex", "--embedder", "hashing", "--quiet")


def hyperrag(*argv, cwd: Path | None = None, env: dict | None = None, timeout: float = 300,
             **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hyperrag_fast.cli", *map(str, argv)],
                          capture_output=True, encoding="utf-8", errors="backslashreplace",
                          cwd=cwd, env={**os.environ, **(env or {})}, timeout=timeout, **kw)


def one_line_error(r: subprocess.CompletedProcess, *needles: str) -> str:
    """The single stderr line of a run that failed as a known error (exit 2)."""
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and len(lines) == 1, (r.returncode, r.stderr[-2000:])
    assert lines[0].startswith("hyperrag: error: ") and "Traceback" not in r.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def ix(tiny_index):
    """A small saved index (conftest.py; built in this process: the tests copy it before
    damaging it)."""
    return tiny_index


def copy_of(ix: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "ix"
    shutil.copytree(ix, dst, symlinks=True)
    return dst


# ------------------------------------------------------------------ index files
def test_damaged_npy_header_without_verification_is_one_line(ix, tmp_path):
    """numpy's header parser raises tokenize.TokenError on a '(' that never closes."""
    d = copy_of(ix, tmp_path)
    f = generation_dir(d) / "arrays" / "node_chunk.npy"
    data = bytearray(f.read_bytes())
    data[data.index(b"'descr'")] = ord("(")
    f.write_bytes(bytes(data))
    one_line_error(hyperrag("query", d, "Lord Byron", "--no-verify"), "node_chunk.npy")


def test_every_npy_header_damage_is_a_clean_error(ix, tmp_path, capsys):
    """The same damage in each .npy file of a generation: a one-line error every time."""
    d = copy_of(ix, tmp_path)
    files = sorted((generation_dir(d)).glob("*/*.npy"))
    assert len(files) >= 20
    for f in files:
        orig = f.read_bytes()
        data = bytearray(orig)
        data[data.index(b"'descr'")] = ord("(")
        f.write_bytes(bytes(data))
        assert main(["query", str(d), "Lord Byron", "--no-verify", "--json"]) == 2, f
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f.name in err, (f, err)
        f.write_bytes(orig)


@pytest.mark.parametrize("edit,needle", [
    (lambda m: m.pop("chunking"), "'chunking'"),
    (lambda m: m.update(chunking={"max_tokens": "x", "overlap": 0}), "chunking.max_tokens"),
    (lambda m: m.update(embedder=["hashing"]), "'embedder'"),
    (lambda m: m["ann"].update(bogus=1), "bogus"),
])
def test_damaged_manifest_is_one_line(ix, tmp_path, edit, needle):
    d = copy_of(ix, tmp_path)
    mf = generation_dir(d) / "manifest.json"
    m = json.loads(mf.read_text())
    edit(m)
    if hasattr(checksums, "write_manifest"):  # a crafted manifest: sealed
        checksums.write_manifest(mf.parent, m)
    else:  # a main before the seal
        mf.write_text(json.dumps(m))
    for verify in ([], ["--no-verify"]):
        one_line_error(hyperrag("query", d, "Lord Byron", *verify), "manifest", needle)


def test_manifest_nested_too_deeply_is_one_line(ix, tmp_path):
    d = copy_of(ix, tmp_path)
    gen = generation_dir(d)
    (gen / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    one_line_error(hyperrag("info", d), "manifest.json", "manifest.xxh3")  # the seal sees it
    (gen / checksums.SEAL).write_text(checksums.seal_text((gen / "manifest.json").read_bytes()))
    one_line_error(hyperrag("info", d), "manifest.json", "nested too deeply")  # sealed: crafted


def test_lock_file_symlink_is_one_line(ix, tmp_path):
    d = copy_of(ix, tmp_path)
    (d / ".lock").unlink()
    (d / ".lock").symlink_to(d / ".lock")  # a loop: os.open(O_NOFOLLOW) gives ELOOP
    one_line_error(hyperrag("delete", d, "ada.md"), ".lock", "symbolic link")
    (d / ".lock").unlink()
    (d / ".lock").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "x.md").write_text("# X\n\nX is a letter.")
    one_line_error(hyperrag("add", d, tmp_path / "x.md", "--quiet"), ".lock", "symbolic link")
    assert not (tmp_path / "elsewhere").exists()


def test_build_methods_prints_without_json(ix, tmp_path):
    d = copy_of(ix, tmp_path)
    r = hyperrag("build-methods", d, "merge_full")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "built merge_full" in r.stdout


# ---------------------------------------------------------------------- sources
@pytest.mark.parametrize("metadata", [[1, 2], "abc", 7])
def test_metadata_that_is_not_an_object_names_the_record(tmp_path, metadata):
    src = tmp_path / "docs.jsonl"
    src.write_text(json.dumps({"title": "A", "text": "Ada was here."}) + "\n"
                   + json.dumps({"title": "B", "text": "Bo was here.", "metadata": metadata}) + "\n")
    one_line_error(hyperrag("index", src, tmp_path / "ix", *FAST), "docs.jsonl:2", "'metadata'",
                   type(metadata).__name__)
    assert not (tmp_path / "ix").exists()


def test_json_nested_too_deeply_is_one_line(tmp_path):
    src = tmp_path / "deep.json"
    src.write_text("[" * 100_000 + "]" * 100_000)
    one_line_error(hyperrag("index", src, tmp_path / "ix", *FAST), "deep.json", "nested too deeply")
    line = tmp_path / "deep.jsonl"
    line.write_text('{"text": "x", "metadata": ' + '{"a": ' * 150 + "1" + "}" * 151 + "\n")
    one_line_error(hyperrag("index", line, tmp_path / "ix", *FAST), "deep.jsonl:1",
                   "nested deeper than")


def test_a_990_level_source_tree_is_read(tmp_path):
    """The folder walk is iterative: a tree deeper than the recursion limit indexes."""
    src = tmp_path / "tree"
    levels = [str(src.joinpath(*["d"] * i)) for i in range(991)]
    for d in levels:  # no recursion here either (pathlib's and shutil's would hit the limit)
        os.mkdir(d)
    Path(levels[-1], "a.txt").write_text("Ada Lovelace was the daughter of Lord Byron.")
    (src / "b.txt").write_text("Lord Byron died at Missolonghi.")
    try:
        r = hyperrag("index", src, tmp_path / "ix", *FAST, "--json")
    finally:
        os.unlink(Path(levels[-1], "a.txt"))
        for d in reversed(levels[1:]):
            os.rmdir(d)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert json.loads(r.stdout)["counts"]["documents"] == 2


def test_undecodable_file_name_names_the_file_and_byte(tmp_path):
    src = tmp_path / "docs"
    src.mkdir()
    (src / "ada.md").write_text("# Ada\n\nAda Lovelace was here.")
    try:
        (Path(os.fsdecode(os.fsencode(src) + b"/caf\xe9.txt"))).write_text("Cafe text.")
    except (OSError, UnicodeError):
        pytest.skip("this file system refuses names that are not UTF-8")
    line = one_line_error(hyperrag("index", src, tmp_path / "ix", *FAST), "caf\\xe9.txt",
                          "not valid UTF-8", "byte 0xe9")
    assert f"at byte {len(str(src)) + 4}" in line  # ".../docs/caf" + the byte
    assert not (tmp_path / "ix").exists()  # refused before any extraction or embedding


def test_skipped_files_with_undecodable_names_are_listed_escaped(tmp_path):
    src = tmp_path / "docs"
    src.mkdir()
    (src / "ada.md").write_text("# Ada\n\nAda Lovelace was here.")
    try:
        Path(os.fsdecode(os.fsencode(src) + b"/x\xff.bin")).write_bytes(b"zz")
    except (OSError, UnicodeError):
        pytest.skip("this file system refuses names that are not UTF-8")
    r = hyperrag("index", src, tmp_path / "ix", *FAST)  # printing the skip list must not fail
    assert r.returncode == 0 and r.stderr == "" and "x\\xff.bin" in r.stdout, r.stderr[-2000:]
    r = hyperrag("index", src, tmp_path / "ix2", *FAST, "--json")
    assert r.returncode == 0 and r.stderr == "", r.stderr[-2000:]
    assert ["x\\xff.bin", "unsupported file type '.bin'"] in json.loads(r.stdout)["report"]["skipped"]


def test_lone_surrogate_in_jsonl_text_names_file_line_and_byte(tmp_path):
    src = tmp_path / "docs.jsonl"
    good = json.dumps({"title": "A", "text": "Ada wäs here."}, ensure_ascii=False) + "\n"
    bad = '{"title": "B", "text": "Bo \\ud800 was here."}\n'
    src.write_text(good + bad, encoding="utf-8")
    offset = len(good.encode("utf-8")) + bad.index("\\ud800")
    one_line_error(hyperrag("index", src, tmp_path / "ix", *FAST), "docs.jsonl:2",
                   "U+D800", f"byte {offset} of the file")
    paired = tmp_path / "paired.jsonl"  # an escaped pair is one character: fine
    paired.write_text('{"title": "C", "text": "Smile \\ud83d\\ude00 here."}\n')
    r = hyperrag("index", paired, tmp_path / "ix2", *FAST)
    assert r.returncode == 0, r.stderr


def test_lone_surrogate_in_metadata_or_title_is_refused(tmp_path):
    src = tmp_path / "docs.json"
    src.write_text('[{"title": "T\\udc00", "text": "x y z"}]')
    one_line_error(hyperrag("index", src, tmp_path / "ix", *FAST), "docs.json[0]", "title",
                   "U+DC00", "byte 13 of the file")
    src.write_text('[{"text": "x y z", "metadata": {"k": ["\\ud801"]}}]')
    one_line_error(hyperrag("index", src, tmp_path / "ix", *FAST), "metadata", "U+D801")


def test_utf16_with_a_bom_is_read_and_without_gets_the_hint(tmp_path):
    src = tmp_path / "docs"
    src.mkdir()
    (src / "bom.txt").write_bytes("Ada Lovelace was the daughter of Lord Byron.".encode("utf-16"))
    (src / "nobom.txt").write_bytes("Lord Byron died at Missolonghi.".encode("utf-16-le"))
    (src / "bom.jsonl").write_bytes((json.dumps({"id": "j", "text": "Missolonghi is in Greece."})
                                     + "\n").encode("utf-16"))
    r = hyperrag("index", src, tmp_path / "ix", *FAST, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["counts"]["documents"] == 1  # bom.txt (.jsonl in a folder is not read)
    (skip,) = [s for s in out["report"]["skipped"] if s[0] == "nobom.txt"]
    assert "--encoding utf-16-le" in skip[1]
    r = hyperrag("index", src / "bom.jsonl", tmp_path / "ix2", *FAST, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["counts"]["documents"] == 1, r.stderr


def test_latin1_questions_file_names_the_file(ix, tmp_path):
    q = tmp_path / "questions.txt"
    q.write_bytes("Where did Björn die?\n".encode("latin-1"))
    one_line_error(hyperrag("query", ix, "--questions", q), "questions.txt", "not UTF-8",
                   "byte 0xf6 at byte 12")
    r = subprocess.run([sys.executable, "-m", "hyperrag_fast.cli", "query", str(ix),
                        "--questions", "-"], input="Björn?\n".encode("latin-1"),
                       capture_output=True, timeout=300)
    err = r.stderr.decode("utf-8", "backslashreplace")
    assert r.returncode == 2 and err.count("\n") == 1 and "<stdin>: not UTF-8" in err, err


# ------------------------------------------------------------- signals, pipes
def _corpus(path: Path, n: int) -> Path:
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": str(i), "title": f"Person {i}",
                                "text": f"Person {i} was born in City {i % 97}. City {i % 97} "
                                        f"lies on River {i % 13}."}) + "\n")
    return path


def _default_sigint() -> None:
    """A child started from a non-interactive background job inherits SIGINT ignored, and
    Python then never raises KeyboardInterrupt: give the child the default disposition."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_exits_130_with_one_line(tmp_path):
    src = _corpus(tmp_path / "big.jsonl", 30_000)
    target = tmp_path / "ix"
    p = subprocess.Popen([sys.executable, "-m", "hyperrag_fast.cli", "index", str(src),
                          str(target), *FAST], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=_default_sigint)
    deadline = time.monotonic() + 240
    while not any(target.glob(".hyperrag-build-*")):  # inside the build
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    err = err.decode("utf-8", "backslashreplace")
    if p.returncode == 0:
        pytest.skip("the build finished before the signal arrived")
    assert p.returncode == 130 and err.splitlines() == ["hyperrag: interrupted"], err[-2000:]
    assert not target.exists()  # the interrupted first build left nothing behind


@pytest.mark.parametrize("entry", ["hyperrag_fast.cli", "hyperrag_fast.console"])
def test_closed_pipe_exits_quietly(ix, tmp_path, entry):
    """Both entries: ``python -m hyperrag_fast.cli`` and the ``hyperrag`` console script's
    module (which ends a query process itself, hyperrag_fast.console)."""
    q = tmp_path / "q.txt"
    q.write_text("Lord Byron\n" * 3000)
    p = subprocess.Popen([sys.executable, "-m", entry, "query", str(ix),
                          "--questions", str(q), "--method", "dense"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline().startswith(b'{"id": 1')
    p.stdout.close()  # what `| head -1` does
    _, err = p.communicate(timeout=120)
    assert p.returncode == 141 and err == b"", (p.returncode, err[-2000:])


# --------------------------------------------------------------- internal errors
def test_an_internal_error_is_one_line_with_the_debug_hint(capsys, monkeypatch):
    from hyperrag_fast.cli_errors import DEBUG_ENV, run_cli

    def broken() -> int:
        raise RuntimeError("an invariant broke\nsecond line")

    monkeypatch.delenv(DEBUG_ENV, raising=False)
    assert run_cli(broken) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("hyperrag: internal error: RuntimeError: an invariant broke second")
    assert f"{DEBUG_ENV}=1" in line
    monkeypatch.setenv(DEBUG_ENV, "1")
    with pytest.raises(RuntimeError):
        run_cli(broken)


def test_debug_env_shows_the_traceback_of_a_known_error(tmp_path):
    r = hyperrag("query", tmp_path / "nothing", "q", env={"HYPERRAG_DEBUG": "1"})
    assert r.returncode == 1 and "Traceback" in r.stderr and "no index directory" in r.stderr
