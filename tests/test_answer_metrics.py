"""Answer metrics, reference-answer loading, and evaluate_answers against the loopback server."""
from __future__ import annotations

import json
import os
import re
import shlex
import threading
from pathlib import Path

import numpy as np
import pytest
from openai_server import Raw, Status, message_text

from hyperrag_fast.cli import main as cli_main
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.eval.answers import (JUDGE_PROMPT, ZERO_SHOT, contain_match, evaluate_answers,
                                        exact_match, load_answers, normalize_answer,
                                        parse_judgement, score_answer, token_f1)
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.llm.client import ChatClient, RetryPolicy
from hyperrag_fast.retriever import METHODS, MethodOutput, register_method

FAST = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0)
REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------- metrics
def test_normalisation_squad():
    assert normalize_answer("The  Eiffel Tower!") == "eiffel tower"
    assert normalize_answer("An apple, a day") == "apple day"
    assert normalize_answer("Theatre") == "theatre"  # articles only as words
    assert normalize_answer("U.S.A.") == "usa"


def test_em_f1_contain_exact_values():
    assert exact_match("the Beatles.", "Beatles") == 1.0
    assert exact_match("Beatles band", "Beatles") == 0.0
    assert token_f1("Barack Obama", "Obama") == pytest.approx(2 / 3)
    assert token_f1("New York", "New York City") == pytest.approx(0.8)
    assert token_f1("Paris", "London") == 0.0
    assert token_f1("the", "a") == 1.0  # both empty after normalisation
    assert contain_match("It was the Eiffel Tower, in Paris.", "Eiffel Tower") == 1.0
    assert contain_match("New York", "New York City") == 0.0
    assert contain_match("anything", "the") == 0.0  # empty reference never matches


def test_score_answer_max_over_aliases():
    s = score_answer("Big Apple", ["New York City", "Big Apple"])
    assert s == {"contain": 1.0, "em": 1.0, "f1": 1.0}
    s = score_answer("New York", ["New York City", "NYC"])
    assert s == pytest.approx({"contain": 0.0, "em": 0.0, "f1": 0.8})
    with pytest.raises(ValueError):
        score_answer("x", [])


def test_parse_judgement():
    assert parse_judgement("Yes.") is True
    assert parse_judgement("no, because it differs") is False
    assert parse_judgement("**YES**") is True
    assert parse_judgement("The answer is yes") is None
    assert parse_judgement("") is None


# ----------------------------------------------------------------------- fake data
# qid -> (question marker, reference answer, aliases, scripted reply)
CASES = {
    "q0": ("Q0", "Answer0", [], "Answer0 [1]"),
    "q1": ("Q1", "The Beatles", ["Beatles"], "the beatles. [2]"),
    "q2": ("Q2", "Answer2", [], "Answer2"),                   # first request: 429
    "q3": ("Q3", "Answer3", [], None),                        # 500 for good: skipped
    "q4": ("Q4", "Answer4", [], None),                        # malformed body: skipped
    "q5": ("Q5", "Answer5", ["A5"], "Somewhere near Answer5 in the north"),
    "q6": ("Q6", "Answer6", [], "Paris"),
}
N_PASSAGES = 8


def _title(i):
    return f"Person {chr(65 + i)}"


def write_data(root, n_extra=0):
    """A 2Wiki-format dataset (CASES, then ``n_extra`` filler questions) and a HotpotQA one."""
    w = root / "2wikimultihopqa"
    w.mkdir(parents=True)
    corpus = [{"title": _title(i), "text": f"{_title(i)} was born in Town{i}. "
                                           f"{_title(i)} married {_title((i + 1) % N_PASSAGES)}."}
              for i in range(N_PASSAGES)]
    qs = [{"id": qid, "question": f"{m}: where was the spouse of {_title(i)} born?",
           "answer": ans, "answer_aliases": al, "supporting_facts": [_title(i), _title(i + 1)],
           "question_entities": [], "supporting_entities": []}
          for i, (qid, (m, ans, al, _)) in enumerate(CASES.items())]
    qs += [{"id": f"x{j}", "question": f"X{j}: who married {_title(j % N_PASSAGES)}?",
            "answer": f"Filler{j}", "answer_aliases": [], "supporting_facts": [_title(0)],
            "question_entities": [], "supporting_entities": []} for j in range(n_extra)]
    (w / "corpus.json").write_text(json.dumps(corpus))
    (w / "questions.json").write_text(json.dumps(qs))
    h = root / "hotpotqa_train"
    h.mkdir()
    hc = {"Alpha": ["Alpha is a town.", " It lies on a river."], "Beta": ["Beta is a river."]}
    hq = [{"_id": "h0", "question": "Which river flows by Alpha?", "answer": "Beta",
           "supporting_facts": [["Alpha", 1], ["Beta", 0]], "type": "bridge", "level": "easy",
           "context": [[t, s] for t, s in hc.items()]}]
    (h / "corpus.json").write_text(json.dumps(hc))
    (h / "questions.json").write_text(json.dumps(hq))
    return root


@pytest.fixture
def data_dir(tmp_path):
    return write_data(tmp_path / "data")


def test_load_answers_label_side(data_dir):
    refs = load_answers("2wikimultihopqa", "all", data_dir)
    assert list(refs) == list(CASES) and refs["q1"] == ("The Beatles", "Beatles")
    assert refs["q5"] == ("Answer5", "A5")
    assert load_answers("hotpotqa_train", "test", data_dir) == {"h0": ("Beta",)}
    with pytest.raises(ValueError, match="split"):
        load_answers("hotpotqa_train", "dev", data_dir)
    with pytest.raises(ValueError, match="dataset"):
        load_answers("nq", "all", data_dir)


# ----------------------------------------------------------------------- server script
class Script:
    """Chat replies by question marker; judge replies (model "judge-model") by reference."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen_q2 = False

    def __call__(self, messages):
        return lambda body: self.reply(body)

    def reply(self, body):
        text = message_text(body["messages"])
        if body["model"] == "judge-model":
            got = re.search(r"Answer to grade: (.*)", text).group(1)
            refs = re.search(r"Reference answer\(s\): (.*)", text).group(1)
            if "Answer5" in refs:
                return "Maybe."
            return "Yes." if any(contain_match(got, r) for r in refs.split(" | ")) else "No"
        marker = re.search(r"Question: (Q\d|X\d+):", text).group(1)
        qid = "q" + marker[1:]
        if qid == "q2":
            with self.lock:
                first, self.seen_q2 = not self.seen_q2, True
            if first:
                return Status(429, retry_after=0)
        if qid == "q3":
            return Status(500, "scripted outage")
        if qid == "q4":
            return Raw(json.dumps({"id": "x", "object": "chat.completion"}))
        return CASES[qid][3]


@pytest.fixture
def spy_method():
    """A method "spy_dense" that records what it is given, then ranks rows 0..k-1."""
    calls = []

    def spy(state, q, text, o, detail):
        calls.append((text, repr(o), detail))
        ids = np.arange(min(o.top_k, state.index.n_chunks))
        return MethodOutput(ids, -ids.astype(np.float32))

    register_method("spy_dense", spy)
    yield calls
    METHODS.pop("spy_dense", None)


def _eval(data_dir, tmp_path, srv, judge=False, **kw):
    gen = ChatClient(model="gen-model", base_url=srv.base_url, retry=FAST)
    jc = ChatClient(model="judge-model", base_url=srv.base_url, retry=FAST) if judge else None
    return evaluate_answers("2wikimultihopqa", "all", kw.pop("methods", ["spy_dense"]), gen, jc,
                            data_dir=data_dir, cache_dir=tmp_path / "cache",
                            out_dir=tmp_path / "out", top_k=3, max_concurrency=3,
                            progress=False, extractor_factory=RegexExtractor,
                            embedder_factory=HashingEmbedder, **kw)


def test_evaluate_answers_scores_skips_cache_and_judge(data_dir, tmp_path, openai_server,
                                                       spy_method):
    openai_server.chat.responder = Script()
    out = _eval(data_dir, tmp_path, openai_server, judge=True)
    assert set(out["methods"]) == {"spy_dense", ZERO_SHOT}
    for name in ("spy_dense", ZERO_SHOT):
        r = out["methods"][name]
        assert (r["n_answered"], r["n_skipped"]) == (5, 2)
        assert sorted(s["qid"] for s in r["skipped"]) == ["q3", "q4"]
        assert "500" in next(s["error"] for s in r["skipped"] if s["qid"] == "q3")
        assert "malformed" in next(s["error"] for s in r["skipped"] if s["qid"] == "q4")
        # q0, q1, q2 right; q5 contained (F1 1/3: 5 tokens, 1 shared); q6 wrong
        assert r["contain_acc"] == pytest.approx(4 / 5)
        assert r["em"] == pytest.approx(3 / 5)
        assert r["f1"] == pytest.approx((3 + 1 / 3) / 5)
        assert r["judge_acc"] == pytest.approx(3 / 4)
        assert (r["n_judged"], r["n_judge_unparsed"], r["n_judge_failed"]) == (4, 1, 0)
        assert r["usage"]["prompt_tokens"] > 0 and r["usage"] == r["usage_this_run"]
    assert out["methods"]["spy_dense"]["cited_explicitly_rate"] == pytest.approx(2 / 5)
    assert out["judge_prompt"] == JUDGE_PROMPT and out["judge_model"] == "judge-model"
    assert out["model"] == "gen-model"
    assert openai_server.chat.max_in_flight <= 3
    # the retriever saw question strings only; prompts carry no reference answer
    assert [c[0] for c in spy_method] == [f"{m}: where was the spouse of {_title(i)} born?"
                                          for i, (m, *_) in enumerate(CASES.values())]
    gen_reqs = [b for b in openai_server.chat.requests if b["model"] == "gen-model"]
    for b in gen_reqs:
        assert not any(f"Answer{k}" in message_text(b["messages"]) for k in range(7))
    def asked(rag):
        return sorted({re.search(r"Question: (Q\d)", message_text(b["messages"])).group(1)
                       for b in gen_reqs if ("Passages:" in message_text(b["messages"])) == rag})
    assert asked(True) == asked(False) == [m for m, *_ in CASES.values()]  # RAG + zero-shot
    # files
    saved = json.loads((tmp_path / "out" / "answers_2wikimultihopqa_all.json").read_text())
    assert saved["methods"]["spy_dense"]["n_skipped"] == 2 and saved["judge_prompt"] == JUDGE_PROMPT
    md = (tmp_path / "out" / "answers_2wikimultihopqa_all.md").read_text()
    assert "| spy_dense | 0.800 | 0.600 |" in md and "| zero_shot |" in md and "gen-model" in md

    # rerun: every finished answer and judgement comes from the cache; only the failed
    # questions are asked again (3 attempts each for q3, 1 for q4, in both rows)
    before = openai_server.chat.count
    again = _eval(data_dir, tmp_path, openai_server, judge=True)
    new = openai_server.chat.requests[before:]
    assert len(new) == 2 * (3 + 1)
    assert all(re.search(r"Question: Q[34]:", message_text(b["messages"])) for b in new)
    for name in ("spy_dense", ZERO_SHOT):
        r, r0 = again["methods"][name], out["methods"][name]
        assert {k: r[k] for k in ("contain_acc", "em", "f1", "judge_acc", "n_answered")} == \
               {k: r0[k] for k in ("contain_acc", "em", "f1", "judge_acc", "n_answered")}
        assert r["usage_this_run"] == {} and r["usage"] == r0["usage"]
        assert all(q["cached"] for q in r["questions"])


def test_evaluate_answers_clear_errors(data_dir, tmp_path, openai_server):
    with pytest.raises(ValueError, match="unknown method"):
        _eval(data_dir, tmp_path, openai_server, methods=["nope"])
    with pytest.raises(ValueError, match=">= 1"):
        _eval(data_dir, tmp_path, openai_server, methods=["dense"], limit=0)


def test_limit_and_no_zero_shot(data_dir, tmp_path, openai_server):
    openai_server.chat.responder = Script()
    out = _eval(data_dir, tmp_path, openai_server, methods=["dense"], limit=2, zero_shot=False)
    assert set(out["methods"]) == {"dense"} and out["n_questions"] == 2 and out["limit"] == 2
    assert out["methods"]["dense"]["n_answered"] == 2 and openai_server.chat.count == 2


# ----------------------------------------------------------------------- the recipe
def recipe_lines():
    """The shell lines of the block marked ``<!-- recipe:test -->`` in docs/real_endpoint.md."""
    text = (REPO / "docs" / "real_endpoint.md").read_text()
    block = text.split("<!-- recipe:test -->", 1)[1].split("```", 2)[1]
    lines = [x.strip() for x in block.replace("\\\n", " ").splitlines()[1:]]
    return [x for x in lines if x and not x.startswith("#")]


def test_recipe_runs_against_loopback(tmp_path, openai_server, monkeypatch, capsys):
    """The documented command line, unchanged but for the endpoint (loopback) and the data
    (a fake dataset in the same format, with a dev/test split)."""
    data = write_data(tmp_path / "data", n_extra=200 - len(CASES) + 2)  # test = 2 questions
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HYPERRAG_DATA_DIR", str(data))
    lines = recipe_lines()
    cmds = [x for x in lines if x.startswith("hyperrag ")]
    assert cmds and all(x.startswith("export ") for x in lines if x not in cmds)
    for x in lines:
        if x.startswith("export "):
            k, v = x[len("export "):].split("=", 1)
            monkeypatch.setenv(k, shlex.split(v)[0] if v else "")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)  # the only change
    openai_server.chat.responder = lambda messages: "Town1 [1]"
    for cmd in cmds:
        argv = [os.path.expandvars(a) for a in shlex.split(cmd)][1:]
        assert cli_main(argv) == 0, capsys.readouterr().err
    out = json.loads((tmp_path / "results" / "answers" / "answers_2wikimultihopqa_test.json")
                     .read_text())
    assert out["n_questions"] == 2 and ZERO_SHOT in out["methods"]
    for r in out["methods"].values():
        assert r["n_answered"] == 2 and r["n_skipped"] == 0 and r["usage"]["total_tokens"] > 0
    assert out["model"] == os.environ["OPENAI_MODEL"]
    assert openai_server.chat.count > 0


def test_cli_eval_forwards(data_dir, tmp_path, capsys):
    base = ["--dataset", "2wikimultihopqa", "--split", "all", "--methods", "nope",
            "--data-dir", str(data_dir), "--out-dir", str(tmp_path / "o")]
    assert cli_main(["eval", *base]) == 2  # retrieval harness (python -m hyperrag_fast.eval)
    assert "unknown method" in capsys.readouterr().err
    assert cli_main(["eval", "--answers", *base, "--base-url", "http://127.0.0.1:9/v1",
                     "--model", "m"]) == 2
    assert "unknown method" in capsys.readouterr().err
