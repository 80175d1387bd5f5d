"""LLMExtractor against the loopback server: validation, re-ask, failures, cache, resume."""
from __future__ import annotations

import json
import re

import pytest

from hyperrag_fast.extract.base import Extractor
from hyperrag_fast.extract.llm import LLMExtractor, parse_segments
from hyperrag_fast.llm.client import ChatClient, RetryPolicy
from hyperrag_fast.records import Chunk, Extraction, Segment
from openai_server import Status

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.01)


def chunk_text(messages) -> str:
    user = [m["content"] for m in messages if m["role"] == "user"][0]
    return re.search(r"Task text:\n(.*)\nOutput:", user, re.S).group(1)


def good_answer(text: str) -> str:
    return json.dumps([{"reference": text, "knowledge": f"K: {text}",
                        "entities": {f"E{text}": f"E{text} appears in {text}."}}])


def good_responder(messages):
    return good_answer(chunk_text(messages))


def chunks(n: int, prefix: str = "text") -> list[Chunk]:
    return [Chunk(f"c{i}", "d", "t", f"{prefix} {i}", 0, 1) for i in range(n)]


def extractor(srv, tmp_path, **kw) -> LLMExtractor:
    client = ChatClient(model="m", base_url=srv.base_url, api_key="k", retry=FAST, timeout=5)
    kw.setdefault("max_concurrency", 4)
    return LLMExtractor(client, tmp_path / "cache.sqlite", **kw)


def expected(text: str) -> Extraction:
    return Extraction((Segment(f"K: {text}", ((f"E{text}", f"E{text} appears in {text}."),)),))


def test_extracts_segments_in_order(openai_server, tmp_path):
    openai_server.chat.responder = good_responder
    ex = extractor(openai_server, tmp_path)
    assert isinstance(ex, Extractor) and ex.name == "llm:m:stitch-a1"
    seen = []
    out = ex.extract(chunks(5), progress=seen.append)
    assert out == [expected(f"text {i}") for i in range(5)]
    assert sum(seen) == 5 and ex.failures == [] and ex.stats["calls"] == 5
    body = openai_server.chat.requests[0]
    assert body["temperature"] == 0 and "JSON array" in body["messages"][0]["content"]


def test_malformed_json_is_repaired_without_reasking(openai_server, tmp_path):
    def responder(messages):
        t = chunk_text(messages)
        return ("Sure, here it is:\n```json\n"
                f"[{{'reference': '{t}', 'knowledge': 'K: {t}', "
                f"'entities': {{'E{t}': 'E{t} appears in {t}.',}},}},]\n```")

    openai_server.chat.responder = responder
    ex = extractor(openai_server, tmp_path)
    assert ex.extract(chunks(3)) == [expected(f"text {i}") for i in range(3)]
    assert openai_server.chat.count == 3 and ex.stats["repaired_outputs"] == 3


def test_validation_drops_bad_records_and_entities():
    raw = json.dumps([
        {"reference": "r", "knowledge": " Alice met Bob. ",
         "entities": {"Alice": "Alice met Bob.", " Bob ": "", "": "x", "N": None, "L": ["x"]}},
        {"reference": "r", "knowledge": "No entities here.", "entities": {}},
        {"reference": "r", "knowledge": "", "entities": {"A": "a"}},
        {"reference": "r", "knowledge": "k", "entities": ["A"]},
        {"knowledge": "k", "entities": {"A": "a"}},
        "not an object",
    ])
    segments, counts = parse_segments(raw)
    assert segments == (Segment("Alice met Bob.", (("Alice", "Alice met Bob."), ("Bob", ""))),
                        Segment("No entities here.", ()))
    assert counts["dropped_entities"] == 3 and counts["dropped_segments"] == 4
    assert counts["segments_without_entities"] == 1


@pytest.mark.parametrize("raw, reason", [
    ("[]", "empty JSON array"),
    ('[{"knowledge": "k"}]', "no valid segment"),
    ("I cannot help with that.", "no JSON array or object"),
])
def test_unusable_outputs(raw, reason):
    with pytest.raises(ValueError, match=reason):
        parse_segments(raw)


def test_reask_with_correction_then_success(openai_server, tmp_path):
    openai_server.chat.enqueue("Sorry, no JSON today.")
    openai_server.chat.responder = good_responder
    ex = extractor(openai_server, tmp_path)
    assert ex.extract(chunks(1)) == [expected("text 0")]
    second = openai_server.chat.requests[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": "Sorry, no JSON today."}
    assert "could not be used" in second[-1]["content"]
    assert ex.failures == [] and ex.stats["calls"] == 2


def test_unusable_output_is_a_recorded_failure_and_the_build_goes_on(openai_server, tmp_path):
    def responder(messages):
        t = chunk_text(messages)
        return "garbage" if t == "text 2" else good_answer(t)

    openai_server.chat.responder = responder
    ex = extractor(openai_server, tmp_path)
    out = ex.extract(chunks(4))
    assert out[2].segments == () and "unusable output after 2 attempts" in out[2].error
    assert [out[i] for i in (0, 1, 3)] == [expected(f"text {i}") for i in (0, 1, 3)]
    assert [cid for cid, _ in ex.failures] == ["c2"] and ex.stats["failures"] == 1
    assert openai_server.chat.count_mentioning("text 2") == 2

    # the failure is reproduced from the cache without a call ...
    again = extractor(openai_server, tmp_path)
    assert again.extract(chunks(4)) == out and openai_server.chat.count == 5
    # ... unless asked to retry failures
    openai_server.chat.responder = good_responder
    retry = extractor(openai_server, tmp_path, retry_failures=True)
    assert retry.extract(chunks(4))[2] == expected("text 2")
    assert openai_server.chat.count == 6 and retry.failures == []


def test_cache_reuse_makes_no_requests(openai_server, tmp_path):
    openai_server.chat.responder = good_responder
    first = extractor(openai_server, tmp_path).extract(chunks(6))
    n = openai_server.chat.count
    fresh = extractor(openai_server, tmp_path)
    assert fresh.extract(chunks(6)) == first
    assert openai_server.chat.count == n == 6 and fresh.stats["cache_hits"] == 6


def test_cache_key_includes_model_and_prompt_version(openai_server, tmp_path):
    openai_server.chat.responder = good_responder
    extractor(openai_server, tmp_path).extract(chunks(2))
    extractor(openai_server, tmp_path, prompt_version="v2").extract(chunks(2))
    assert openai_server.chat.count == 4


def test_interrupted_build_resumes_without_repeating_finished_calls(openai_server, tmp_path):
    cs = chunks(8)

    def failing_on_5(messages):  # a non-retryable error mid-run
        t = chunk_text(messages)
        return Status(400, "bad request") if t == "text 5" else good_answer(t)

    openai_server.chat.responder = failing_on_5
    out = extractor(openai_server, tmp_path).extract(cs[:6])  # and the run stops early
    assert "LLM call failed" in out[5].error and "HTTP 400" in out[5].error
    before = {c.text: openai_server.chat.count_mentioning(c.text + "\n") for c in cs}

    openai_server.chat.responder = good_responder
    ex = extractor(openai_server, tmp_path)
    assert ex.extract(cs) == [expected(c.text) for c in cs]
    grown = {c.text: openai_server.chat.count_mentioning(c.text + "\n") - before[c.text]
             for c in cs}
    assert grown == {"text 0": 0, "text 1": 0, "text 2": 0, "text 3": 0, "text 4": 0,
                     "text 5": 1, "text 6": 1, "text 7": 1}
    assert ex.stats["cache_hits"] == 5 and ex.stats["calls"] == 3


def test_concurrency_bound_is_respected(openai_server, tmp_path):
    openai_server.chat.responder = good_responder
    openai_server.chat.delay = 0.05
    ex = extractor(openai_server, tmp_path, max_concurrency=3)
    assert len(ex.extract(chunks(12))) == 12
    assert openai_server.chat.max_in_flight == 3


def test_equal_texts_share_one_call_and_blank_chunks_make_none(openai_server, tmp_path):
    openai_server.chat.responder = good_responder
    cs = [Chunk("a", "d", "t", "same", 0, 1), Chunk("b", "d", "t", "same", 5, 6),
          Chunk("c", "d", "t", "  \n", 7, 8)]
    seen = []
    out = extractor(openai_server, tmp_path).extract(cs, progress=seen.append)
    assert out == [expected("same"), expected("same"), Extraction(())]
    assert openai_server.chat.count == 1 and sum(seen) == 3


def test_constructor_validation(openai_server, tmp_path):
    with pytest.raises(ValueError):
        extractor(openai_server, tmp_path, max_concurrency=0)
    with pytest.raises(ValueError):
        extractor(openai_server, tmp_path, prompt_version="")


def test_parser_fixes_apply_to_cached_answers(openai_server, tmp_path, monkeypatch):
    import hyperrag_fast.extract.llm as mod

    openai_server.chat.responder = good_responder
    real = mod.parse_segments

    def broken(raw):
        raise ValueError("old parser bug")

    monkeypatch.setattr(mod, "parse_segments", broken)
    out = extractor(openai_server, tmp_path).extract(chunks(2))
    assert all("old parser bug" in e.error for e in out)
    n = openai_server.chat.count
    monkeypatch.setattr(mod, "parse_segments", real)
    fixed = extractor(openai_server, tmp_path)
    assert fixed.extract(chunks(2)) == [expected("text 0"), expected("text 1")]
    assert openai_server.chat.count == n and fixed.stats["calls"] == 0
