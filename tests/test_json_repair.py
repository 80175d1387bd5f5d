"""json_repair: strict JSON first, then named repairs of common LLM defects."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.llm.json_repair import loads_lenient, repair_json

SCALARS = (st.none() | st.booleans() | st.integers()
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20))
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)
CONTAINERS = st.one_of(st.lists(VALUES, max_size=4),
                       st.dictionaries(st.text(max_size=8), VALUES, max_size=4))
# prose that cannot itself start a JSON container
PROSE = st.text(st.characters(blacklist_characters="[]{}", blacklist_categories=("Cs",)),
                max_size=40)


@settings(max_examples=150, deadline=None)
@given(VALUES, st.sampled_from(["", "json", "JSON"]), st.sampled_from([None, 2]))
def test_fenced_value_round_trips(value, tag, indent):
    text = f"```{tag}\n{json.dumps(value, indent=indent)}\n```"
    assert loads_lenient(text) == value


@settings(max_examples=150, deadline=None)
@given(CONTAINERS, PROSE, PROSE, st.booleans(), st.sampled_from([None, 2]))
def test_container_in_prose_and_fences_round_trips(value, before, after, fence, indent):
    body = json.dumps(value, indent=indent, ensure_ascii=False)
    if fence:
        body = f"```json\n{body}\n```"
    assert loads_lenient(f"{before}\n{body}\n{after}") == value


@pytest.mark.parametrize("text, expected, note", [
    ('[{"a": 1},]', [{"a": 1}], "trailing comma"),
    ('{"a": [1, 2,],}', {"a": [1, 2]}, "trailing comma"),
    ("[{'a': 'x', \"b\": \"it's\"}]", [{"a": "x", "b": "it's"}], "single quotes"),
    ("['say \"hi\"']", ['say "hi"'], "single quotes"),
    ('[{"a": True, "b": False, "c": None}]', [{"a": True, "b": False, "c": None}],
     "python literal"),
    ('[{"a": "it\\\'s"}]', [{"a": "it's"}], "invalid \\' escape"),
    ('[{"a": "line\nbreak"}]', [{"a": "line\nbreak"}], "raw control character in string"),
    ('[{"a": 1}, {"b": "cut', [{"a": 1}], "truncated: dropped the incomplete final element"),
    ('[{"a": 1}, {"b": {"c": [1, 2', [{"a": 1}], "truncated: dropped the incomplete final element"),
    ('[1, 2', [1], "truncated: dropped the incomplete final element"),
    ('[{"a": 1}, {"b": 2}', [{"a": 1}, {"b": 2}], "truncated: missing closing bracket"),
    ('Here you go:\n[1]\nThanks!', [1], "leading prose"),
    ('Output\n[1]', [1], "leading prose"),
    ('[1] and more', [1], "trailing prose"),
    ('I found {3} items: [{"k": "v"}]', [{"k": "v"}], "leading prose"),
    ("```json\n[1, 2,]\n```", [1, 2], "code fence"),
])
def test_named_repairs(text, expected, note):
    value, notes = repair_json(text)
    assert value == expected
    assert note in notes


def test_strict_json_needs_no_repair():
    assert repair_json('[{"a": 1}]') == ([{"a": 1}], ())


def test_object_wrapped_when_array_expected():
    value, notes = repair_json('{"a": 1}', expect_array=True)
    assert value == [{"a": 1}] and "wrapped top-level object in an array" in notes
    assert repair_json('{"a": 1}') == ({"a": 1}, ())


@pytest.mark.parametrize("text, reason", [
    ("", "empty output"),
    ("no json here", "no JSON array or object found"),
    ("[{'a': 'Bob's car'}]", "expected ','"),  # ambiguous single quotes
    ('[{"a":', "truncated before the first complete"),
    ('{"a": 1, "b": [', "ends inside the top-level object"),
    ("[1 2]", "expected ','"),
    ("[{a: 1}]", "expected a string key"),
    ("[undefined]", "unexpected word"),
])
def test_unusable_text_raises_with_reason(text, reason):
    with pytest.raises(ValueError, match=reason):
        repair_json(text)


def test_non_array_rejected_when_array_expected():
    with pytest.raises(ValueError, match="expected a JSON array, got str"):
        repair_json('"just a string"', expect_array=True)
    with pytest.raises(TypeError):
        repair_json(None)  # type: ignore[arg-type]


def test_deep_nesting_is_a_value_error():
    with pytest.raises(ValueError):
        repair_json("x " + "[" * 100000)
