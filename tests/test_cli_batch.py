"""``hyperrag query INDEX --questions FILE|-``: many questions, one process, one JSON
line per question (issue #13 item 6)."""
from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from hyperrag_fast.cli import main

FAST = ("--extractor", "regex", "--embedder", "hashing")


@pytest.fixture(scope="module")
def ix(tmp_path_factory):
    d = tmp_path_factory.mktemp("batch")
    docs = d / "docs"
    docs.mkdir()
    (docs / "ada.md").write_text("# Ada Lovelace\n\nAda Lovelace was the daughter of Lord Byron.")
    (docs / "byron.md").write_text("# Lord Byron\n\nLord Byron died at Missolonghi in Greece.")
    (docs / "miss.md").write_text("# Missolonghi\n\nMissolonghi is a town in Greece.")
    assert main(["index", str(docs), str(d / "ix"), *FAST, "--quiet"]) == 0
    return d / "ix"


def single(capsys, ix, text, *extra):
    assert main(["query", str(ix), text, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def lines(capsys):
    out = capsys.readouterr().out
    return [json.loads(x) for x in out.splitlines()]


QUESTIONS = ('{"id": "q1", "question": "Where did Ada\'s father die?"}\n'
             "Lord Byron\n"
             "\n"
             '"Missolonghi town"\n'
             '{"question": "Greece"}\n')


def test_questions_file_one_json_line_each(ix, tmp_path, capsys, monkeypatch):
    f = tmp_path / "q.jsonl"
    f.write_text(QUESTIONS)
    from hyperrag_fast.reader import IndexReader  # what `hyperrag query` opens (read side)
    loads = []
    real = IndexReader.open.__func__
    monkeypatch.setattr(IndexReader, "open",
                        classmethod(lambda cls, *a, **k: loads.append(1) or real(cls, *a, **k)))
    assert main(["query", str(ix), "--questions", str(f), "--top-k", "2"]) == 0
    got = lines(capsys)
    assert len(loads) == 1
    assert [g["id"] for g in got] == ["q1", 2, 4, 5]
    assert [g["query"] for g in got] == ["Where did Ada's father die?", "Lord Byron",
                                         "Missolonghi town", "Greece"]
    monkeypatch.undo()
    for g in got:
        one = single(capsys, ix, g["query"], "--top-k", "2")
        assert [c["chunk_id"] for c in g["chunks"]] == [c["chunk_id"] for c in one["chunks"]]
        assert g["method"] == "stitch" and "timings" in g


def test_questions_from_stdin(ix, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("Lord Byron\nGreece\n"))
    assert main(["query", str(ix), "--questions", "-", "--method", "dense", "--json"]) == 0
    got = lines(capsys)
    assert [g["id"] for g in got] == [1, 2] and all(g["method"] == "dense" for g in got)


def test_questions_through_a_pipe(ix):
    r = subprocess.run([sys.executable, "-m", "hyperrag_fast.cli", "query", str(ix),
                        "--questions", "-"], input=QUESTIONS, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["id"] for x in r.stdout.splitlines()] == ["q1", 2, 4, 5]


@pytest.mark.parametrize("text,msg", [
    ('{"q": "no question field"}\n', "line 1"),
    ('Lord Byron\n{"question": "   "}\n', "line 2"),
    ('{"question": 7}\n', "line 1"),
    ("\n\n", "no questions"),
])
def test_bad_question_lines_are_refused_before_work(ix, tmp_path, capsys, text, msg):
    f = tmp_path / "q.jsonl"
    f.write_text(text)
    assert main(["query", str(ix), "--questions", str(f)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and msg in err


def test_text_or_questions_not_both(ix, tmp_path, capsys):
    f = tmp_path / "q.jsonl"
    f.write_text("Lord Byron\n")
    assert main(["query", str(ix), "Greece", "--questions", str(f)]) == 2
    assert main(["query", str(ix)]) == 2
    assert main(["query", str(ix), "--questions", str(tmp_path / "missing.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "not both" in err and "give a question" in err and "missing.jsonl" in err
