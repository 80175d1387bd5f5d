"""Grounded answers: prompt, citation parsing, ``hyperrag ask`` against the loopback server."""
from __future__ import annotations

import json
import re

import pytest
from openai_server import Drop, Status, message_text

from hyperrag_fast.answer import (Answer, answer, build_answer, graph_facts, parse_citations,
                                  prepare, select_context, strip_citations, zero_shot)
from hyperrag_fast.cli import main
from hyperrag_fast.llm.client import ChatClient, ChatResult, LLMError, RetryPolicy
from hyperrag_fast.retriever import RetrievalResult, RetrievedChunk

FAST = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0)


def _chunk(i, title="T", text="some text"):
    return RetrievedChunk(f"c{i}", f"d{i}", f"{title}{i}", text, 1.0 / (i + 1), 10 * i, 10 * i + 9)


def _passage_numbers(messages):
    """{title: number} from the numbered passages of a prompt."""
    return {m.group(2): int(m.group(1))
            for m in re.finditer(r"^\[(\d+)\] (.+)$", message_text(messages), re.M)}


# ----------------------------------------------------------------------- units
def test_parse_citations_forms():
    assert parse_citations("Paris [2].", 3) == ([2], [])
    assert parse_citations("A [1][3] and [1, 2]", 3) == ([1, 3, 2], [])
    assert parse_citations("x [2-3] [Passage 1]", 3) == ([2, 3, 1], [])
    assert parse_citations("x [7] [0] [2]", 3) == ([2], [7, 0])
    assert parse_citations("no citations, 1990", 3) == ([], [])
    assert strip_citations("Answer: Missolonghi [1][2] .") == "Missolonghi."


def test_build_answer_cited_and_fallback():
    shown = [_chunk(0), _chunk(1), _chunk(2)]
    a = build_answer(ChatResult("Rome [2] [9]", {"total_tokens": 5}, "stop"), "m", shown, None)
    assert a.cited_explicitly and [c.chunk_id for c in a.citations] == ["c1"]
    assert a.citations[0].passage == 2 and a.chunks_used == ["c1"] and a.invalid_citations == [9]
    assert a.short == "Rome"
    b = build_answer(ChatResult("Rome", None, "stop"), "m", shown, None)
    assert not b.cited_explicitly and b.citations == [] and b.chunks_used == ["c0", "c1", "c2"]


def test_context_budget_and_errors():
    chunks = [_chunk(i, text="x" * 100) for i in range(3)]
    picked, cut = select_context(chunks, 10_000)
    assert len(picked) == 3 and not cut and picked[0][1] == "T0\n" + "x" * 100
    picked, cut = select_context(chunks, 250)  # two whole (103 each), the third cut to 44: left out
    assert len(picked) == 2 and cut
    with pytest.raises(ValueError, match="max_context_chars"):
        select_context(chunks, 10)
    with pytest.raises(ValueError, match="no chunks"):
        prepare("q?", RetrievalResult("q?", [], {}))


def test_graph_facts_from_coda_detail():
    d = {"entities": ["Ada", "Byron", "Greece"], "kept_entities": [True, False, True],
         "relations": ["Ada daughter of Byron"]}
    assert graph_facts(d) == (["Ada", "Greece"], ["Ada daughter of Byron"], None)
    ents, rels, problem = graph_facts({"entities": [3, 4], "kept_entities": [True, True]})
    assert ents == [] and "not text" in problem
    res = RetrievalResult("q", [_chunk(0)], {}, d)
    p = prepare("q", res)
    text = message_text(p.messages)
    assert "Relevant entities:\n- Ada\n- Greece" in text and "- Ada daughter of Byron" in text
    assert "Byron\n" not in text.split("Relevant entities:")[1].split("Relevant relations")[0]
    assert p.graph == {"entities": 2, "relations": 1, "problem": None}


# ----------------------------------------------------------------------- end to end
@pytest.fixture
def index_dir(tmp_path, capsys):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "ada.md").write_text("# Ada Lovelace\n\nAda Lovelace was the daughter of Lord Byron.")
    (d / "byron.md").write_text("# Lord Byron\n\nLord Byron died at Missolonghi in Greece.")
    (d / "curie.md").write_text("# Marie Curie\n\nMarie Curie was born in Warsaw.")
    ix = str(tmp_path / "ix")
    assert main(["index", str(d), ix, "--extractor", "regex", "--embedder", "hashing",
                 "--quiet", "--json"]) == 0
    capsys.readouterr()
    return ix


def _ask(capsys, srv, ix, *extra):
    code = main(["ask", ix, "Where did Ada Lovelace's father die?", "--base-url", srv.base_url,
                 "--model", "gen-model", "--api-key", "k", "--top-k", "3", "--json", *extra])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


@pytest.mark.parametrize("stream", [False, True])
def test_ask_end_to_end_citations(index_dir, openai_server, capsys, stream):
    def reply(messages):
        nums = _passage_numbers(messages)
        ada = next(n for t, n in nums.items() if t == "Ada Lovelace")
        byron = next(n for t, n in nums.items() if t == "Lord Byron")
        return f"Missolonghi [{byron}][{ada}]"

    openai_server.chat.responder = reply
    code, out, err = _ask(capsys, openai_server, index_dir, *(["--stream"] if stream else []))
    assert code == 0, err
    assert out["short"] == "Missolonghi" and out["cited_explicitly"] is True
    assert [c["doc_id"] for c in out["citations"]] == ["byron.md", "ada.md"]
    from hyperrag_fast.reader import IndexReader
    chunks = {c.chunk_id: c for c in IndexReader.open(index_dir).chunks}
    for c in out["citations"]:
        k = chunks[c["chunk_id"]]
        assert (c["doc_id"], c["title"], c["start"], c["end"]) == (k.doc_id, k.title, k.start, k.end)
    assert out["chunks_used"] == [c["chunk_id"] for c in out["citations"]]
    assert out["usage"]["total_tokens"] > 0 and out["model"] == "gen-model"
    body = openai_server.chat.requests[-1]
    assert body["model"] == "gen-model" and body["temperature"] == 0.0
    assert bool(body.get("stream")) is stream
    assert "[1] " in message_text(body["messages"]) and "cite" in message_text(body["messages"])


def test_ask_no_citation_is_flagged_and_human_output(index_dir, openai_server, capsys):
    openai_server.chat.enqueue("Missolonghi")
    code, out, _ = _ask(capsys, openai_server, index_dir)
    assert code == 0 and out["cited_explicitly"] is False and out["citations"] == []
    assert out["chunks_used"] == [c["chunk_id"] for c in out["retrieval"]["chunks"]]
    openai_server.chat.enqueue("Missolonghi [1]")
    code = main(["ask", index_dir, "q?", "--base-url", openai_server.base_url, "--model", "m"])
    text = capsys.readouterr().out
    assert code == 0 and text.startswith("Missolonghi [1]") and "cited:" in text


def test_ask_errors_exit_2(index_dir, openai_server, capsys, monkeypatch):
    for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        monkeypatch.delenv(k, raising=False)
    code = main(["ask", index_dir, "q?", "--json"])
    assert code == 2 and "no LLM endpoint" in capsys.readouterr().err
    openai_server.chat.enqueue(*[Status(400, "bad request")])
    code, _, err = _ask(capsys, openai_server, index_dir)
    assert code == 2 and "non-retryable" in err and len(err.strip().splitlines()) == 1
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    openai_server.chat.enqueue("Greece [1]")
    assert main(["ask", index_dir, "q?", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "env-model"


def test_python_api_retry_and_zero_shot(tmp_path, openai_server, index_dir):
    from hyperrag_fast.cli_components import open_reader
    from hyperrag_fast.retriever import QueryOptions, Retriever
    client = ChatClient(model="m", base_url=openai_server.base_url, retry=FAST)
    r = Retriever(open_reader(index_dir))
    openai_server.chat.enqueue(Status(429, retry_after=0), Drop(), "Warsaw [1]")
    a = answer(r, "Where was Marie Curie born?", client, QueryOptions(method="dense"), top_k=2)
    assert isinstance(a, Answer) and a.short == "Warsaw" and len(a.retrieval.chunks) == 2
    assert openai_server.chat.count == 3
    z = zero_shot("Where was Marie Curie born?", client)
    assert z.retrieval is None and z.chunks_used == [] and not z.cited_explicitly
    assert "Passages" not in message_text(openai_server.chat.requests[-1]["messages"])
    openai_server.chat.enqueue(*[Status(500)] * 3)
    with pytest.raises(LLMError, match="after 3 attempts"):
        answer(r, "q?", client)
