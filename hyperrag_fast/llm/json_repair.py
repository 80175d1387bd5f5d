"""Strict JSON parsing with repair of the usual LLM output defects.

:func:`repair_json` first tries ``json.loads``; if that fails it repairs, and says
which repairs it made: markdown code fences, leading/trailing prose, trailing
commas, single-quoted strings (only where unambiguous: an apostrophe inside one
is an error), Python literals ``True``/``False``/``None``, ``\\'`` escapes, raw
control characters in strings, and a top-level array cut off mid-element (the
incomplete final element is dropped). With ``expect_array=True`` a top-level
object is wrapped in a list. Anything else raises ``ValueError`` with the reason.
"""
from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["repair_json", "loads_lenient"]

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_]+")
_LITERALS = {"true": True, "false": False, "null": None, "NaN": float("nan"),
             "Infinity": float("inf")}
_PYTHON = {"True": True, "False": False, "None": None}
_FENCE_TAG = re.compile(r"[A-Za-z0-9_+-]*[ \t]*\r?\n")
_MAX_STARTS = 64
_NOTHING = object()
_CONTROL = re.compile(r"[\x00-\x1f]")


class _Truncated(Exception):
    """The input ended inside a value."""


def loads_lenient(text: str, *, expect_array: bool = False) -> Any:
    """The parsed value of ``text`` (see :func:`repair_json`)."""
    return repair_json(text, expect_array=expect_array)[0]


def repair_json(text: str, *, expect_array: bool = False) -> tuple[Any, tuple[str, ...]]:
    """``(value, repairs)``: ``repairs`` names each repair made (empty if none)."""
    if not isinstance(text, str):
        raise TypeError(f"expected str, got {type(text).__name__}")
    s = text.strip()
    if not s:
        raise ValueError("empty output")
    value, notes = _parse(s)
    if expect_array:
        if isinstance(value, dict):
            value, notes = [value], notes + ("wrapped top-level object in an array",)
        elif not isinstance(value, list):
            raise ValueError(f"expected a JSON array, got {type(value).__name__}")
    return value, notes


def _parse(s: str) -> tuple[Any, tuple[str, ...]]:
    try:
        return json.loads(s), ()
    except ValueError:
        pass
    fenced = _fenced_strict(s)
    if fenced is not _NOTHING:
        return fenced, ("code fence",)
    best = (-1, "")  # the error of the candidate that parsed furthest
    starts = [i for i, c in enumerate(s) if c in "[{"][:_MAX_STARTS]
    for start in starts:
        p = _Parser(s, start)
        try:
            value = p.top()
        except ValueError as e:
            if p.i > best[0]:
                best = (p.i, str(e))
            continue
        except RecursionError:
            raise ValueError("JSON nested too deeply") from None
        notes = set(p.notes)
        if s.startswith("```"):
            notes.add("code fence")
        before, after = s[:start].strip(), s[p.i:].strip()
        if before.startswith("```") and _FENCE_TAG.fullmatch(before[3:] + "\n"):
            before = ""
        if before:
            notes.add("leading prose")
        if after.strip("`").strip():
            notes.add("trailing prose")
        return value, tuple(sorted(notes))
    if not starts:
        raise ValueError("no JSON array or object found in output")
    raise ValueError(f"unparseable JSON: {best[1]}")


def _fenced_strict(s: str) -> Any:
    """The strictly parsed body of a leading ``` fence, or ``_NOTHING``."""
    if not s.startswith("```"):
        return _NOTHING
    body = s[3:]
    tag = _FENCE_TAG.match(body)
    if tag:
        body = body[tag.end():]
    for m in re.finditer("```", body):
        try:
            return json.loads(body[: m.start()].strip())
        except ValueError:
            continue
    return _NOTHING


class _Parser:
    """A tolerant recursive-descent JSON parser starting at ``[`` or ``{``."""

    def __init__(self, s: str, i: int) -> None:
        self.s, self.i, self.n = s, i, len(s)
        self.notes: set[str] = set()

    def top(self) -> Any:
        if self.s[self.i] == "[":
            return self._array(top=True)
        try:
            return self._object()
        except _Truncated:
            raise ValueError("output ends inside the top-level object") from None

    def _ws(self) -> None:
        while self.i < self.n and self.s[self.i] in " \t\r\n":
            self.i += 1

    def _peek(self) -> str:
        self._ws()
        if self.i >= self.n:
            raise _Truncated
        return self.s[self.i]

    def _value(self) -> Any:
        c = self._peek()
        if c == "{":
            return self._object()
        if c == "[":
            return self._array(top=False)
        if c == '"':
            return self._dstring()
        if c == "'":
            return self._sstring()
        if c == "-" or c.isdigit():
            return self._number()
        if c.isalpha():
            return self._ident()
        raise ValueError(f"unexpected {c!r} at offset {self.i}")

    def _array(self, top: bool) -> list:
        self.i += 1
        items: list = []
        while True:
            try:
                if self._peek() == "]":
                    self.i += 1
                    return items
                items.append(self._value())
            except _Truncated:
                if not top:
                    raise
                return self._truncated(items, dropped=True)
            try:
                c = self._peek()
            except _Truncated:
                if not top:
                    raise
                return self._truncated(items, dropped=False)
            self.i += 1
            if c == "]":
                return items
            if c != ",":
                raise ValueError(f"expected ',' or ']' at offset {self.i - 1}, got {c!r}")
            self._trailing_comma("]")

    def _truncated(self, items: list, dropped: bool) -> list:
        self.i = self.n
        if not items:
            raise ValueError("output truncated before the first complete array element")
        self.notes.add("truncated: dropped the incomplete final element" if dropped
                       else "truncated: missing closing bracket")
        return items

    def _trailing_comma(self, close: str) -> None:
        self._ws()
        if self.i < self.n and self.s[self.i] == close:
            self.notes.add("trailing comma")

    def _object(self) -> dict:
        self.i += 1
        out: dict = {}
        while True:
            c = self._peek()
            if c == "}":
                self.i += 1
                return out
            if c == '"':
                key = self._dstring()
            elif c == "'":
                key = self._sstring()
            else:
                raise ValueError(f"expected a string key at offset {self.i}, got {c!r}")
            if self._peek() != ":":
                raise ValueError(f"expected ':' at offset {self.i}")
            self.i += 1
            out[key] = self._value()
            c = self._peek()
            if c == "}":
                self.i += 1
                return out
            if c != ",":
                raise ValueError(f"expected ',' or '}}' at offset {self.i}, got {c!r}")
            self.i += 1
            self._trailing_comma("}")

    def _end_of_string(self, quote: str) -> int:
        j = self.i + 1
        while j < self.n:
            c = self.s[j]
            if c == "\\":
                j += 2
            elif c == quote:
                return j
            else:
                j += 1
        raise _Truncated

    def _dstring(self) -> str:
        j = self._end_of_string('"')
        raw = self.s[self.i : j + 1]
        self.i = j + 1
        try:
            out = json.loads(raw, strict=False)
            if _CONTROL.search(raw):
                self.notes.add("raw control character in string")
            return out
        except ValueError:
            pass
        if "\\'" in raw:
            try:
                out = json.loads(raw.replace("\\'", "'"), strict=False)
                self.notes.add("invalid \\' escape")
                return out
            except ValueError:
                pass
        raise ValueError(f"invalid string literal at offset {self.i - len(raw)}")

    def _sstring(self) -> str:
        j = self._end_of_string("'")
        raw = self.s[self.i + 1 : j]
        self.i = j + 1
        conv = re.sub(r"\\(.)|\"", lambda m: ("\\\"" if m.group(0) == '"' else
                                               "'" if m.group(1) == "'" else m.group(0)),
                      raw, flags=re.S)
        try:
            out = json.loads(f'"{conv}"', strict=False)
        except ValueError:
            raise ValueError(f"invalid single-quoted string at offset {self.i}") from None
        self.notes.add("single quotes")
        return out

    def _number(self) -> Any:
        if self.s.startswith("-Infinity", self.i):
            self.i += 9
            return float("-inf")
        m = _NUMBER.match(self.s, self.i)
        if not m:
            if self.i + 1 >= self.n:
                raise _Truncated
            raise ValueError(f"invalid number at offset {self.i}")
        self.i = m.end()
        if self.i >= self.n:
            raise _Truncated  # a number at the very end may be cut off
        return json.loads(m.group(0))

    def _ident(self) -> Any:
        m = _IDENT.match(self.s, self.i)
        word = m.group(0)
        self.i = m.end()
        if word in _LITERALS:
            return _LITERALS[word]
        if word in _PYTHON:
            self.notes.add("python literal")
            return _PYTHON[word]
        if self.i >= self.n and any(k.startswith(word) for k in (*_LITERALS, *_PYTHON)):
            raise _Truncated
        raise ValueError(f"unexpected word {word!r} at offset {m.start()}")
