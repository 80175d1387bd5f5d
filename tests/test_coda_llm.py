"""CODA's LLM steps against the loopback server: extraction, type discovery, merge
judge, keywords and interference elimination, incl. malformed and failing answers and
cache reuse (a rerun makes no new request)."""
from __future__ import annotations

import json
import re

import numpy as np

from hyperrag_fast.coda.consolidate import KEEP, MERGE, merge_entities
from hyperrag_fast.coda.graph import consolidate
from hyperrag_fast.coda.kg_vectors import raw_vectors
from hyperrag_fast.coda.raw_kg import ChunkKG, RawKG
from hyperrag_fast.coda.llm_extract import (JSONCaller, LLMKGExtractor, LLMMergeJudge,
                                            discover_types)
from hyperrag_fast.coda.llm_query import LLMInterferenceFilter, LLMKeywords
from hyperrag_fast.coda.retrieve import CodaOptions, CodaRetriever
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.llm.client import ChatClient, RetryPolicy
from hyperrag_fast.records import Chunk
from openai_server import Status, message_text

FAST = RetryPolicy(max_attempts=2, base_delay=0.001, max_delay=0.01)
EMB = HashingEmbedder(dim=64)


def caller(srv, tmp_path, **kw) -> JSONCaller:
    client = ChatClient(model="m", base_url=srv.base_url, api_key="k", retry=FAST, timeout=5)
    return JSONCaller(client, tmp_path / "coda.sqlite", max_concurrency=4, **kw)


def chunks(*texts):
    return [Chunk(f"c{i}", "d", "t", t, 0, len(t)) for i, t in enumerate(texts)]


def kg_answer(text: str) -> str:
    a, b = text.split()[:2]
    return json.dumps({"entities": [{"name": a, "type": "person", "description": f"{a} in {text}"},
                                    {"name": b, "type": "place", "description": f"{b} in {text}"}],
                       "relationships": [{"source": a, "target": b, "description": text,
                                          "keywords": ["lives", "in"], "strength": 7}]})


def user_text(messages) -> str:
    return [m["content"] for m in messages if m["role"] == "user"][0]


def test_extraction_repair_failure_and_cache(openai_server, tmp_path):
    def responder(messages):
        t = user_text(messages).removeprefix("Text:\n")
        if t.startswith("Bad"):
            return Status(400)
        if t.startswith("Junk"):
            return "no json here"
        if t.startswith("Fenced"):
            return "```json\n" + kg_answer(t)[:-1] + ",}\n```"  # fence + trailing comma
        return kg_answer(t)
    openai_server.chat.responder = responder
    c = caller(openai_server, tmp_path)
    ex = LLMKGExtractor(c, types=["person", "place"])
    cs = chunks("Ann Paris", "Fenced Rome", "Bad input", "Junk text")
    out = ex.extract(cs)
    assert out[0].entities == (("Ann", "person", "Ann in Ann Paris"), ("Paris", "place", "Paris in Ann Paris"))
    assert out[0].relations == (("Ann", "Paris", "Ann Paris", "lives, in", 7.0),)
    assert out[1].relations[0][:2] == ("Fenced", "Rome")
    assert out[2].error and "LLM call failed" in out[2].error
    assert out[3].error and "unusable output after 2 attempts" in out[3].error
    assert "person, place" in openai_server.chat.requests[0]["messages"][0]["content"]
    assert openai_server.chat.count_mentioning("could not be used") == 1  # one re-ask (Junk)
    assert len(c.failures) == 2
    n = openai_server.chat.count
    kg = RawKG.from_chunk_kgs(out)
    assert kg.errors == [(2, out[2].error), (3, out[3].error)] and kg.n_relations == 2
    # rerun: cached answers are reused; only the failed call (not cached) is retried
    again = LLMKGExtractor(caller(openai_server, tmp_path), types=["person", "place"]).extract(cs)
    assert again[:2] == out[:2] and again[3] == out[3]
    assert openai_server.chat.count == n + 1
    assert openai_server.chat.count_mentioning("Bad input") >= 2


def test_type_discovery_suggest_refine_and_fallback(openai_server, tmp_path):
    def responder(messages):
        if "Refine the candidate" in messages[0]["content"]:
            assert "person (suggested 2x)" in user_text(messages)
            return json.dumps({"types": [{"name": "Person"}, {"name": "Organization"}]})
        return json.dumps({"types": [{"name": "person", "description": "people"},
                                     {"name": "company", "description": "firms"}]})
    openai_server.chat.responder = responder
    c = caller(openai_server, tmp_path)
    assert discover_types(c, ["doc one", "doc two"], n_samples=5) == ["person", "organization"]
    n = openai_server.chat.count
    assert n == 3
    assert discover_types(c, ["doc one", "doc two"], n_samples=5) == ["person", "organization"]
    assert openai_server.chat.count == n  # all cached
    # refine fails -> suggestions by frequency
    openai_server.chat.responder = lambda m: (Status(500) if "Refine" in m[0]["content"]
                                              else json.dumps({"types": ["place", "person"]}))
    c2 = JSONCaller(c.client, tmp_path / "other.sqlite")
    assert set(discover_types(c2, ["x", "y"])) == {"place", "person"}
    assert c2.failures and c2.failures[0][0] == "refine_types"


def _kg():
    ck = [ChunkKG((("Google", "org", "Google the firm"), ("Google Inc.", "org", "Google Inc. firm"),
                   ("Paris", "place", "city")),
                  (("Google", "Paris", "office", "", 1.0), ("Google Inc.", "Paris", "office", "", 1.0)))]
    kg = RawKG.from_chunk_kgs(ck)
    ev, rv = raw_vectors(kg, EMB, {}, EMB.dim)
    return kg, ev, rv


def test_merge_judge_llm_malformed_and_cached(openai_server, tmp_path):
    def responder(messages):
        t = user_text(messages)
        if "Paris" in t and "Google Inc" in t:
            return '{"same_entity": "maybe"}'  # malformed twice -> failure -> keep
        if "Paris" in t:
            return json.dumps({"same_entity": False, "reason": "different things"})
        return "{'same_entity': True, 'reason': 'same company'}"  # python-ish, repaired
    openai_server.chat.responder = responder
    kg, ev, rv = _kg()
    judge = LLMMergeJudge(caller(openai_server, tmp_path))
    table = merge_entities(kg, ev, judge, gate=-1.0)
    d = {(r.a, r.b): r for r in table.rows}
    assert d[("google", "google inc")].decision == MERGE
    assert d[("google", "google inc")].source == "llm" and "same company" in d[("google", "google inc")].reason
    assert d[("google", "paris")].decision == KEEP
    assert d[("google inc", "paris")].decision == KEEP
    assert d[("google inc", "paris")].reason.startswith("judge failed")
    g = consolidate(kg, ev, rv, table.group_of())
    assert g.n_entities == 2 and g.n_relations == 1 and g.rel_strength[0] == 2.0
    n = openai_server.chat.count
    merge_entities(kg, ev, LLMMergeJudge(caller(openai_server, tmp_path)), gate=-1.0)
    assert openai_server.chat.count == n


def test_keywords_and_elimination_in_retrieval(openai_server, tmp_path):
    kg, ev, rv = _kg()
    g = consolidate(kg, ev, rv)

    def responder(messages):
        sys_ = messages[0]["content"]
        if "query-related cues" in sys_:
            return json.dumps({"high_level_keywords": ["office"], "low_level_keywords": ["Paris"]})
        body = user_text(messages)
        assert re.search(r"Entities:\n1\. ", body)
        return json.dumps({"keep_entities": [1, 99, "x"], "keep_relations": []})
    openai_server.chat.responder = responder
    c = caller(openai_server, tmp_path)
    r = CodaRetriever(g, EMB, LLMKeywords(c), LLMInterferenceFilter(c))
    q = EMB.embed(["where is the office"])[0]
    o = CodaOptions(align="count", k_entry=1, k_entry_relations=1, fill_dense=False)
    res = r.retrieve(q, "where is the office", 3, o, detail=True)
    assert res.detail["entry_mode"] == "llm keywords" and res.detail["low_keywords"] == ["Paris"]
    assert g.ent_key[int(res.detail["entry_entities"][0])] == "paris"
    assert res.detail["elimination"] == "llm"
    assert res.detail["kept_entities"].size == 1 and res.detail["kept_relations"].size == 0
    n = openai_server.chat.count
    r.retrieve(q, "where is the office", 3, o)
    assert openai_server.chat.count == n  # cached
    # failing LLM: no keywords -> query embedding entries; no filtering -> everything kept
    openai_server.chat.responder = lambda m: Status(500)
    c2 = JSONCaller(c.client, tmp_path / "fail.sqlite")
    r2 = CodaRetriever(g, EMB, LLMKeywords(c2), LLMInterferenceFilter(c2))
    res2 = r2.retrieve(q, "another query", 3, o, detail=True)
    assert res2.detail["low_keywords"] == [] and res2.detail["entry_entities"].size == 1
    assert res2.detail["kept_entities"].size == res2.detail["entities"].size
    assert {t for t, _ in c2.failures} == {"keywords", "eliminate"}
    assert np.all(res2.scores >= 1)
