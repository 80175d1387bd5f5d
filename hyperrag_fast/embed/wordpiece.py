"""The query's tokenizer in a cold process (docs/architecture.md §3, "Cold start").

Building the ``tokenizers`` library's tokenizer from its JSON file costs ~25 ms of CPU
(its 30,522-entry WordPiece vocabulary), more than a one-question process tokenizes in
all. :class:`QueryTokenizer` answers ``encode_batch`` for a single ASCII text in Python,
from the vocabulary of the same file, with the same ids as the library for the BERT
uncased setup both offline models use (``BertNormalizer`` lower-casing with clean text,
``BertPreTokenizer``, greedy longest-match WordPiece with ``##`` pieces, ``[CLS] .. [SEP]``
around the text, right truncation). Anything else (several texts, a non-ASCII text, a text
naming a special token such as ``[SEP]``, a file of another setup) goes to the library's
tokenizer, built on first need. ``tests/test_wordpiece.py`` checks the two agree.
"""
from __future__ import annotations

import json
import re
from typing import Any, Sequence

#: ASCII control characters ``BertNormalizer(clean_text=True)`` drops (it keeps \t \n \r
#: and turns them into spaces)
_DROPPED = "".join(map(chr, (*range(0, 9), 11, 12, *range(14, 32), 127)))
_CLEAN = str.maketrans({**dict.fromkeys(_DROPPED), "\t": " ", "\n": " ", "\r": " "})
#: ``BertPreTokenizer`` on ASCII: runs of other characters between spaces, each ASCII
#: punctuation character (``char::is_ascii_punctuation``) a word of its own
_WORDS = re.compile(r"""[^ !-/:-@\[-`{-~]+|[!-/:-@\[-`{-~]""")
MAX_WORD_CHARS = 100  # WordPiece's max_input_chars_per_word in the setup reproduced here
_SETUP = {
    "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                   "strip_accents": None, "lowercase": True},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
}


class Encoding:
    """The token ids of one text (what the embedder reads of a library ``Encoding``)."""

    __slots__ = ("ids",)

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids


def _python_setup(spec: dict[str, Any]) -> tuple[dict[str, int], int, int, int, list[str]] | None:
    """(vocab, [UNK], [CLS], [SEP] ids, special token texts) when the tokenizer file
    ``spec`` is the BERT uncased setup this module reproduces, else None."""
    if any(spec.get(k) != v for k, v in _SETUP.items()):
        return None
    model, post = spec.get("model") or {}, spec.get("post_processor") or {}
    if (model.get("type") != "WordPiece" or model.get("continuing_subword_prefix") != "##"
            or model.get("max_input_chars_per_word") != MAX_WORD_CHARS
            or post.get("type") != "TemplateProcessing"):
        return None
    vocab, unk = model.get("vocab"), model.get("unk_token")
    single = post.get("single")
    want = [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
            {"SpecialToken": {"id": "[SEP]", "type_id": 0}}]
    added = spec.get("added_tokens") or []
    if (not isinstance(vocab, dict) or single != want or unk not in vocab
            or not {"[CLS]", "[SEP]"} <= vocab.keys()
            or post.get("special_tokens", {}).get("[CLS]", {}).get("ids") != [vocab["[CLS]"]]
            or post.get("special_tokens", {}).get("[SEP]", {}).get("ids") != [vocab["[SEP]"]]
            or any(vocab.get(t.get("content")) != t.get("id") or t.get("normalized")
                   or t.get("single_word") or t.get("lstrip") or t.get("rstrip")
                   for t in added)):  # matched as written, anywhere in the raw text
        return None
    return vocab, vocab[unk], vocab["[CLS]"], vocab["[SEP]"], [t["content"] for t in added]


class QueryTokenizer:
    """``encode_batch`` of the library tokenizer of ``path`` (its raw bytes ``raw``, read
    once for the checksum), truncating to ``max_length`` tokens, without padding."""

    def __init__(self, path: str, raw: bytes, max_length: int) -> None:
        self._path, self._max_length = path, max_length
        self._library = None
        self._setup = _python_setup(json.loads(raw))
        if self._setup is not None:
            self._vocab, self._unk, self._cls, self._sep, self._special = self._setup

    @property
    def library_loaded(self) -> bool:
        """Whether the library's tokenizer was built (by a text Python does not answer)."""
        return self._library is not None

    def library(self):
        """The ``tokenizers`` tokenizer (built on first call)."""
        if self._library is None:
            from tokenizers import Tokenizer
            tok = Tokenizer.from_file(self._path)
            tok.no_padding()
            tok.enable_truncation(self._max_length)
            self._library = tok
        return self._library

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = True) -> list:
        if (self._setup is not None and add_special_tokens and len(texts) == 1
                and texts[0].isascii() and not any(s in texts[0] for s in self._special)):
            return [Encoding(self.ids(texts[0]))]  # also once the library is built: faster
        if len(texts) == 1:  # the same Encoding; encode_batch wakes the library's thread pool
            return [self.library().encode(texts[0], add_special_tokens=add_special_tokens)]
        return self.library().encode_batch(list(texts), add_special_tokens=add_special_tokens)

    def ids(self, text: str) -> list[int]:
        """The ids of an ASCII ``text`` naming no special token (the module's setup)."""
        vocab, unk = self._vocab, self._unk
        out = [self._cls]
        for word in _WORDS.findall(text.translate(_CLEAN).lower()):
            out += _pieces(word, vocab, unk)
        del out[self._max_length - 1:]
        out.append(self._sep)
        return out


def _pieces(word: str, vocab: dict[str, int], unk: int) -> list[int]:
    """Greedy longest-match-first WordPiece of one word ([UNK] when a part matches no
    piece, or the word is longer than ``MAX_WORD_CHARS``)."""
    if len(word) > MAX_WORD_CHARS:
        return [unk]
    out, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                out.append(vocab[piece])
                break
            end -= 1
        else:
            return [unk]
        start = end
    return out
