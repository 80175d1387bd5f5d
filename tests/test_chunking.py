"""Loaders and the token-budget chunker (docs/architecture.md §2)."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from hyperrag_fast.chunking import (Document, LoadResult, chunk_documents, chunk_id,
                                    chunk_passage, load_documents, word_spans)

TEXT = ("Alpha beta gamma. Delta epsilon zeta eta.\n\n"
        "Theta iota kappa lambda. Mu nu xi omicron pi rho.")

words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Zs", "Cc")),
                min_size=1, max_size=8)
seps = st.sampled_from([" ", "  ", "\n", "\n\n", ". ", "! ", ".\n\n", "\t"])


@st.composite
def documents(draw):
    parts = draw(st.lists(st.tuples(words, seps), min_size=1, max_size=60))
    lead = draw(st.sampled_from(["", " ", "\n"]))
    return lead + "".join(w + s for w, s in parts)


@settings(max_examples=150, deadline=None)
@given(text=documents(), max_tokens=st.integers(1, 20), data=st.data())
def test_chunks_are_substrings_within_budget_and_cover_all_tokens(text, max_tokens, data):
    overlap = data.draw(st.integers(0, max_tokens - 1))
    doc = Document("d", "T", text)
    chunks = chunk_documents([doc], max_tokens=max_tokens, overlap=overlap)
    covered = set()
    for c in chunks:
        assert c.text == text[c.start:c.end]
        assert c.text == c.text.strip()
        n = len(word_spans(c.text))
        assert 1 <= n <= max_tokens
        assert c.chunk_id == chunk_id("d", c.start, c.end, c.text)
        covered |= {s for s, _ in word_spans(text) if c.start <= s < c.end}
    assert covered == {s for s, _ in word_spans(text)}
    starts = [c.start for c in chunks]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    if overlap == 0:
        assert all(a.end <= b.start for a, b in zip(chunks, chunks[1:]))
    assert chunk_documents([doc], max_tokens=max_tokens, overlap=overlap) == chunks


def test_fitting_document_is_one_chunk_with_metadata_and_passage():
    doc = Document("a.md", "Title", "  One two three.\n", {"k": 1})
    (c,) = chunk_documents([doc], max_tokens=3)
    assert (c.text, c.start, c.end, c.doc_id, c.title) == ("One two three.", 2, 16, "a.md", "Title")
    assert c.metadata == {"k": 1} and c.metadata is not doc.metadata
    assert chunk_passage(c) == "Title\nOne two three."
    assert chunk_passage(chunk_documents([Document("x", "", "hi")])[0]) == "hi"


def test_prefers_sentence_and_paragraph_boundaries():
    texts = [c.text for c in chunk_documents([Document("d", "", TEXT)], max_tokens=8)]
    assert texts == ["Alpha beta gamma. Delta epsilon zeta eta.",
                     "Theta iota kappa lambda.", "Mu nu xi omicron pi rho."]
    texts = [c.text for c in chunk_documents([Document("d", "", TEXT)], max_tokens=6)]
    assert texts[0] == "Alpha beta gamma."


def test_overlap_repeats_tokens():
    doc = Document("d", "", " ".join(f"w{i}" for i in range(10)))
    texts = [c.text for c in chunk_documents([doc], max_tokens=4, overlap=2)]
    assert texts == ["w0 w1 w2 w3", "w2 w3 w4 w5", "w4 w5 w6 w7", "w6 w7 w8 w9"]


def test_ids_stable_and_distinct():
    a = chunk_documents([Document("d1", "", TEXT), Document("d2", "", TEXT)], max_tokens=5)
    b = chunk_documents([Document("d1", "", TEXT), Document("d2", "", TEXT)], max_tokens=5)
    assert [c.chunk_id for c in a] == [c.chunk_id for c in b]
    assert len({c.chunk_id for c in a}) == len(a)
    assert all(len(c.chunk_id) == 16 for c in a)
    assert [c.doc_id for c in a] == sorted(c.doc_id for c in a)


@pytest.mark.parametrize("kw", [dict(max_tokens=0), dict(max_tokens=4, overlap=4),
                                dict(max_tokens=4, overlap=-1), dict(max_tokens=2.5)])
def test_bad_arguments(kw):
    with pytest.raises(ValueError, match="max_tokens|overlap"):
        chunk_documents([Document("d", "", TEXT)], **kw)


def test_folder_sorted_titles_non_utf8_and_empty(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "b.md").write_text("intro\n# The B Title\nbody b", encoding="utf-8")
    (tmp_path / "a.txt").write_text("body a", encoding="utf-8")
    (tmp_path / "sub" / "c.txt").write_bytes(b"caf\xe9 latin-1 \xff text")
    (tmp_path / "sub" / "empty.md").write_text("  \n\n", encoding="utf-8")
    (tmp_path / "ignored.csv").write_text("x,y", encoding="utf-8")
    res = load_documents(tmp_path)
    assert isinstance(res, LoadResult)
    assert [d.doc_id for d in res.documents] == ["a.txt", "b.md", "sub/c.txt"]
    assert [d.title for d in res.documents] == ["a", "The B Title", "c"]
    c = res.documents[2]
    assert "\ufffd" in c.text and "non-UTF-8" in c.metadata["warnings"][0]
    assert "warnings" not in res.documents[0].metadata
    assert [(s.doc_id, s.reason) for s in res.skipped] == [
        ("ignored.csv", "unsupported file type '.csv'"), ("sub/empty.md", "empty text")]
    assert res.warnings == [("sub/c.txt", c.metadata["warnings"][0])]
    single = load_documents(tmp_path / "b.md")
    assert single.documents[0].doc_id == "b.md"


def test_json_list_dict_and_jsonl(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps([{"id": 7, "title": "T", "text": "x y", "lang": "en"},
                             {"title": "U", "text": ["s1.", "s2."]},
                             {"text": "no title"}, {"title": "E", "text": ""}]))
    res = load_documents(p)
    assert [(d.doc_id, d.title, d.text) for d in res.documents] == [
        ("7", "T", "x y"), ("U", "U", "s1. s2."), ("2", "", "no title")]
    assert res.documents[0].metadata["lang"] == "en"
    assert [s.doc_id for s in res.skipped] == ["E"]
    p = tmp_path / "d.json"
    p.write_text(json.dumps({"Paris": ["Paris is a city.", "It is big."], "Rome": "Rome too."}))
    assert [(d.doc_id, d.text) for d in load_documents(p).documents] == [
        ("Paris", "Paris is a city. It is big."), ("Rome", "Rome too.")]
    p = tmp_path / "e.jsonl"
    p.write_text('{"id": "a", "text": "one"}\n\n{"id": "b", "title": "B", "text": "two"}\n')
    assert [d.doc_id for d in load_documents(p).documents] == ["a", "b"]
    p.write_text('{"id": "a", "text": "one"}\n{oops\n')
    with pytest.raises(ValueError, match=r"e\.jsonl:2"):
        load_documents(p)


def test_iterable_inputs_and_duplicates():
    res = load_documents(["first text", {"id": "r", "title": "R", "text": "rec"},
                          Document("doc", "D", "obj"), ""])
    assert [d.doc_id for d in res.documents] == ["0", "r", "doc"]
    assert res.skipped[0].doc_id == "3"
    same_text = load_documents([{"id": "a", "text": "t"}, {"id": "b", "text": "t"}])
    assert len(same_text.documents) == 2
    with pytest.raises(ValueError, match="'a'"):
        load_documents([{"id": "a", "text": "t"}, {"id": "a", "text": "u"}])
    with pytest.raises(ValueError, match="duplicate"):
        chunk_documents([Document("a", "", "x"), Document("a", "", "y")])
    with pytest.raises(TypeError):
        load_documents([3])


def test_missing_and_unsupported_paths(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_documents(tmp_path / "nope.txt")
    (tmp_path / "x.csv").write_text("a")
    with pytest.raises(ValueError, match="unsupported"):
        load_documents(tmp_path / "x.csv")
