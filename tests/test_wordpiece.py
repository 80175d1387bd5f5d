"""The cold process's query tokenizer (hyperrag_fast.embed.wordpiece): the ids of the
``tokenizers`` library for both offline models' tokenizer files, on random ASCII text and
the 2Wiki questions; everything it does not reproduce goes to the library."""
from __future__ import annotations

import json
import string
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("tokenizers")
from tokenizers import Tokenizer  # noqa: E402

from hyperrag_fast.embed import onnx_bge, onnx_minilm  # noqa: E402
from hyperrag_fast.embed.wordpiece import Encoding, QueryTokenizer  # noqa: E402

FILES = {"minilm": (onnx_minilm.TOKENIZER_PATH, 256),
         "bge": (onnx_bge.MODEL_DIR / "tokenizer.json", 512)}
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "2wikimultihopqa"
# ASCII text with the characters the rules treat apart: punctuation, controls, spaces,
# digits, the special tokens' brackets, and words long enough for [UNK]
ASCII = st.text(st.sampled_from(string.printable + "\x00\x01\x0b\x0c\x1c\x1f\x7f"), max_size=80)
WORDS = st.lists(st.sampled_from(["the", "film", "born", "[SEP]", "[sep]", "[MASK]", "##s",
                                  "x" * 101, "qwzxv", "unaffable", "3.14", "U.S.", "\t", "  "]),
                 max_size=12).map(" ".join)


def pair(name: str, max_length: int | None = None):
    path, default = FILES[name]
    ml = default if max_length is None else max_length
    lib = Tokenizer.from_file(str(path))
    lib.no_padding()
    lib.enable_truncation(ml)
    return QueryTokenizer(str(path), path.read_bytes(), ml), lib


@pytest.fixture(scope="module", params=sorted(FILES))
def tokenizers(request):
    return pair(request.param)


def python_ids(q: QueryTokenizer, text: str) -> list[int]:
    enc, = q.encode_batch([text])
    assert isinstance(enc, Encoding) and not q.library_loaded  # answered in Python
    return enc.ids


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(ASCII, WORDS))
def test_ascii_text_gets_the_library_ids(tokenizers, text):
    q, lib = tokenizers
    if any(s in text for s in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")):
        return  # the library's (test_what_python_does_not_reproduce_goes_to_the_library)
    assert python_ids(q, text) == lib.encode(text).ids


@pytest.mark.parametrize("max_length", [2, 5, 256])
def test_truncation_keeps_the_first_tokens_and_the_closing_sep(max_length):
    q, lib = pair("minilm", max_length)
    text = "where was the director of the film the last voyage born " * 30
    assert python_ids(q, text) == lib.encode(text).ids
    assert len(lib.encode(text).ids) == max_length


def test_python_answers_after_the_library_is_built(tokenizers):
    """A non-ASCII question builds the library; a later ASCII one is still answered in
    Python (a service's queries), with the library's ids either way."""
    q, lib = tokenizers
    (enc,) = q.encode_batch(["Where was Zoë born?"])
    assert q.library_loaded and enc.ids == lib.encode("Where was Zoë born?").ids
    (enc,) = q.encode_batch(["Who directed the film Titanic?"])
    assert isinstance(enc, Encoding) and enc.ids == lib.encode("Who directed the film Titanic?").ids


def test_the_2wiki_questions_get_the_library_ids():
    if not DATA.is_dir():
        pytest.skip(f"no evaluation data at {DATA}")
    questions = [q["question"] for q in json.loads((DATA / "questions.json").read_text())]
    for name in FILES:
        q, lib = pair(name)
        want = [e.ids for e in lib.encode_batch(questions)]
        got = [QueryTokenizer(str(FILES[name][0]), FILES[name][0].read_bytes(),
                              FILES[name][1]).encode_batch([x])[0].ids for x in questions]
        assert got == want and sum(x.isascii() for x in questions) == 891  # the rest: the library


def test_what_python_does_not_reproduce_goes_to_the_library(tmp_path):
    q, lib = pair("minilm")
    for texts in (["Ångström was born in Lödöse"], ["two", "texts"], ["a [SEP] b"]):
        assert [e.ids for e in q.encode_batch(texts)] == [e.ids for e in lib.encode_batch(texts)]
    assert q.library_loaded
    # a tokenizer file of another setup (cased): the library from the start
    spec = json.loads(FILES["minilm"][0].read_text())
    spec["normalizer"]["lowercase"] = False
    other = tmp_path / "cased.json"
    other.write_text(json.dumps(spec))
    cased, cased_lib = QueryTokenizer(str(other), other.read_bytes(), 256), Tokenizer.from_file(str(other))
    cased_lib.no_padding()
    cased_lib.enable_truncation(256)
    assert cased.encode_batch(["Where Was"])[0].ids == cased_lib.encode("Where Was").ids
    assert cased.library_loaded
    spec = json.loads(FILES["minilm"][0].read_text())  # a special token matched normalised
    spec["added_tokens"][3]["normalized"] = True
    other.write_text(json.dumps(spec))
    normed = QueryTokenizer(str(other), other.read_bytes(), 256)
    normed.encode_batch(["a [sep] b"])
    assert normed.library_loaded


def test_an_embedder_answers_one_question_without_the_library_tokenizer():
    """One question (a cold ``hyperrag query``) is tokenized in Python: the same vector
    as through the library's tokenizer."""
    from hyperrag_fast.embed.onnx_minilm import OnnxMiniLM
    pytest.importorskip("onnxruntime")
    fast, slow = OnnxMiniLM(intra_op_threads=1), OnnxMiniLM(intra_op_threads=1)
    slow.tokenizer.library()  # built: every text goes through it
    q = "Where was the director of the film The Last Voyage born?"
    assert np.array_equal(fast.embed([q]), slow.embed([q]))
    assert not fast.tokenizer.library_loaded
