"""GraphRAG-Bench harness: loader, offline coverage, per-source indexes, LLM-judged
columns and answer accuracy against the loopback OpenAI server."""
from __future__ import annotations

import json

import pytest

from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.eval import coverage as C
from hyperrag_fast.eval import gbench as G
from hyperrag_fast.eval import gbench_judge as J
from hyperrag_fast.eval.gbench_answers import evaluate_gbench_answers
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.llm.client import ChatClient, RetryPolicy

TOWNS = ["Arden", "Belmont", "Carver", "Dunmore", "Elston", "Fenwick"]


def _novel(i: int) -> str:
    paras = []
    for j, t in enumerate(TOWNS):
        paras.append(f"Captain Roe{i} sailed to {t} in spring. The harbour of {t} held "
                     f"{j + 3} ships. Roe{i} met the mayor of {t} there.\n\n"
                     + " ".join(f"Filler word{k} sentence number {k}." for k in range(40)))
    return "\n\n".join(paras)


def write_gb(root):
    for sub, srcs in (("medical", ["Medical"]), ("novel", ["Novel-1", "Novel-2"])):
        d = root / "graphrag_bench" / sub
        d.mkdir(parents=True)
        corpus = [{"source": s, "text": _novel(i)} for i, s in enumerate(srcs)]
        qs = []
        for i, s in enumerate(srcs):
            for j, t in enumerate(TOWNS):
                rec = {"id": f"{s}-{j}", "source": s, "question": f"Where did Roe{i} sail?",
                       "answer": f"SECRET {t}", "question_type": G.QTYPES[j % 4],
                       "evidence": [f"Captain Roe{i} sailed to {t}.",
                                    f"The harbour of {t} held {j + 3} ships."]}
                if sub == "novel":
                    rec["evidence_triple"] = [f"(Roe{i}, sailed to, {t})"]
                else:
                    rec["evidence_relations"] = f"Roe{i} sailed to {t}"
                qs.append(rec)
        (d / "corpus.json").write_text(json.dumps(corpus))
        (d / "questions.json").write_text(json.dumps(qs))
    return root


@pytest.fixture
def gb_dir(tmp_path):
    return write_gb(tmp_path / "data")


# ------------------------------------------------------------------ coverage metric
def test_content_words_and_sentences():
    assert C.content_words("The tumors were characterized by cells.") == ["tumor", "chara", "cells"]
    assert C.sentences("A b. C d!\nE f") == ["A b.", "C d!", "E f"]


def test_coverage_window_and_threshold():
    ctx = ["Roe met the mayor. Roe sailed far. The harbour held ships. Unrelated text here.",
           "Nothing about it."]
    got = C.evidence_coverage(["Roe sailed to the harbour with ships.", "Mayor of Paris spoke"],
                              ctx, threshold=0.7, window=2, names=False)
    assert got[0].covered and got[0].share == 1.0
    assert not got[1].covered and got[1].share == pytest.approx(1 / 3)
    # window 1: no single sentence holds 'sailed' and 'harbour'
    one = C.evidence_coverage(["Roe sailed to the harbour with ships."], ctx, window=1)[0]
    assert not one.covered and one.share == pytest.approx(2 / 4)
    assert not C.evidence_coverage(["Roe sailed"], [])[0].covered


def test_coverage_names_rule_and_version_1():
    ctx = ["Housel Bay lies near the Lizard. The cove is small."]
    # 'cove', 'near', 'lizard' present; the name 'Housel' is not in the statement's window
    st = "The Kynance Cove is near the Lizard."  # the first token is never a name
    v2 = C.evidence_coverage([st], ctx)[0]
    assert not v2.covered and v2.share == 0.0  # no window holds the name 'Kynance'
    v1 = C.evidence_coverage([st], ctx, threshold=C.THRESHOLD_V1, names=False)[0]
    assert v1.share == pytest.approx(3 / 4) and v1.covered
    assert C.name_words("The MSI-H tumour met Roe in 1850 and roe") == {"msi", "roe", "1850"}
    # a paraphrase verb missing: 3 of 5 content words = 0.6, covered by v2, not by v1
    st2 = "Tintagel castle is located within Cornwall."
    ctx2 = ["Tintagel castle stands in Cornwall."]
    assert C.evidence_coverage([st2], ctx2)[0].covered
    assert not C.evidence_coverage([st2], ctx2, threshold=C.THRESHOLD_V1, names=False)[0].covered


def test_cohen_kappa_known_values():
    a = [1, 1, 0, 0, 1, 0, 1, 0]
    assert C.cohen_kappa(a, a) == 1.0
    assert C.cohen_kappa(a, [1 - x for x in a]) == -1.0
    # po = 0.75, pa = pb = 0.5 -> pe = 0.5, kappa = 0.5
    assert C.cohen_kappa(a, [1, 1, 0, 0, 1, 0, 0, 1]) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        C.cohen_kappa([], [])


# ------------------------------------------------------------------ loader + harness
def test_loader_labels_kept_apart(gb_dir):
    docs, qs = G.load_graphrag_bench("novel", gb_dir)
    assert sorted(docs) == ["Novel-1", "Novel-2"] and len(qs) == 12
    assert qs[0].evidence == ("Captain Roe0 sailed to Arden.", "The harbour of Arden held 3 ships.")
    assert qs[0].relations == ("(Roe0, sailed to, Arden)",)
    with pytest.raises(ValueError):
        G.load_graphrag_bench("law", gb_dir)
    assert G._as_list("['a', 'b']") == ["a", "b"] and G._as_list("plain") == ["plain"]


def _run(gb_dir, tmp_path, methods=("dense", "bm25"), **kw):
    return G.evaluate_gbench(["graphrag_bench_novel"], list(methods), tmp_path / "ix",
                             tmp_path / "cache", data_dir=gb_dir, out_dir=tmp_path / "out",
                             progress=False, extractor_factory=RegexExtractor,
                             embedder_factory=lambda: HashingEmbedder(dim=64), **kw)


def test_one_index_per_source_and_contract(gb_dir, tmp_path):
    out = _run(gb_dir, tmp_path)
    got = json.loads((tmp_path / "out" / G.RESULTS_FILE).read_text())
    for k in ("machine", "command", "embedder", "chunking", "subsets", "metric_validation"):
        assert k in got
    row = got["subsets"]["novel"]["bm25"]
    assert set(row) >= {"coverage", "evidence_recall_llm", "context_relevance_llm"}
    assert row["evidence_recall_llm"] is None and row["context_relevance_llm"] is None
    assert set(row["coverage"]) >= set(G.QTYPES) | {"all"}
    # every question names its town: BM25 finds the town's paragraph chunk
    assert row["coverage"]["all"] > 0.5
    srcs = out["indexes"]["novel"]["sources"]
    assert sorted(srcs) == ["Novel-1", "Novel-2"] and not any(s["reused"] for s in srcs.values())
    assert (tmp_path / "ix" / "novel" / "Novel-1").is_dir()
    assert all(s["chunks"] > 1 for s in srcs.values())  # chunked, ~1,200 characters
    again = _run(gb_dir, tmp_path, methods=("dense",))
    assert all(s["reused"] for s in again["indexes"]["novel"]["sources"].values())
    merged = json.loads((tmp_path / "out" / G.RESULTS_FILE).read_text())
    assert set(merged["subsets"]["novel"]) == {"dense", "bm25"}  # earlier rows kept


def test_methods_run_at_the_embedders_preset(gb_dir, tmp_path, monkeypatch):
    """Without given options a method runs at the preset of the index's embedder
    (config.preset_for), as in the multi-hop harness, not at the MiniLM default."""
    from hyperrag_fast.config import PRESETS
    names, presets, real = [], [], G.method_options
    monkeypatch.setattr(G, "preset_for", lambda name: names.append(name) or PRESETS["bge-small"])
    monkeypatch.setattr(G, "method_options", lambda n, g, k, preset=None: presets.append(preset) or real(n, g, k, preset))
    _run(gb_dir, tmp_path, methods=("stitch",))
    assert names and all(n == HashingEmbedder(dim=64).name for n in names)
    assert presets and all(p is PRESETS["bge-small"] for p in presets)


def test_cli_gbench(gb_dir, tmp_path, capsys):
    from hyperrag_fast.eval.__main__ import main
    rc = main(["--dataset", "graphrag_bench_medical", "--methods", "bm25", "--embedder",
               "hashing", "--data-dir", str(gb_dir), "--index-dir", str(tmp_path / "ix"),
               "--cache-dir", str(tmp_path / "c"), "--out-dir", str(tmp_path / "o"), "--quiet"])
    assert rc == 0 and "coverage all" in capsys.readouterr().out
    got = json.loads((tmp_path / "o" / G.RESULTS_FILE).read_text())
    assert "medical" in got["subsets"] and got["embedder"].startswith("hashing")


# ------------------------------------------------------------------ LLM judge
def test_parsers():
    assert J.parse_verdicts('[{"n": 1, "attributed": 1}, {"n": 2, "attributed": 0}]', 2) == [1, 0]
    assert J.parse_verdicts("```json\n[1, 0]\n```", 2) == [1, 0]
    assert J.parse_verdicts('[{"n": 1, "attributed": 1}]', 2) is None
    assert J.parse_verdicts("not json", 1) is None
    assert J.parse_relevance("2") == 1.0 and J.parse_relevance("Score: 1") == 0.5
    assert J.parse_relevance("none") is None
    assert J.parse_f1('{"TP": ["a"], "FP": ["b"], "FN": []}') == pytest.approx(1 / 1.5)
    assert J.parse_f1('{"TP": []}') is None


def _client(srv, model):
    return ChatClient(model, srv.base_url, "k", timeout=10, retry=RetryPolicy(max_attempts=1))


def _judge_reply(messages):
    text = messages[-1]["content"]
    if "Statements:" in text:
        ctx = text.split("<<<", 1)[1].split(">>>", 1)[0]
        sts = [ln.split(". ", 1)[1] for ln in text.split("Statements:\n", 1)[1].split("\n\n")[0]
               .splitlines()]
        towns = [t for t in TOWNS if t in ctx]
        return json.dumps([{"n": i + 1, "attributed": int(any(t in s for t in towns))}
                           for i, s in enumerate(sts)])
    if "How relevant" in text:
        return "2"
    return "?"


def test_judge_columns_cached_and_resumable(gb_dir, tmp_path, openai_server):
    openai_server.chat.responder = _judge_reply
    judge = J.GBenchJudge(_client(openai_server, "judge-m"), tmp_path / "jc", max_concurrency=2)
    out = _run(gb_dir, tmp_path, methods=("bm25",), judge=judge)
    er = out["subsets"]["novel"]["bm25"]["evidence_recall_llm"]
    cr = out["subsets"]["novel"]["bm25"]["context_relevance_llm"]
    assert er["n_scored"] == 12 and er["n_failed"] == 0 and 0.5 < er["all"] <= 1.0
    assert cr["all"] == 1.0 and set(G.QTYPES) <= set(er)
    first = openai_server.chat.count
    ctx_sent = [b["messages"][-1]["content"] for b in openai_server.chat.requests]
    # one evidence call per question (statements differ); relevance calls of identical
    # (question, context) pairs are made once
    assert sum("Statements:" in c for c in ctx_sent) == 12
    assert len(set(ctx_sent)) == len(ctx_sent) == first
    assert all("SECRET" not in c for c in ctx_sent)  # the answer never reaches the judge
    again = _run(gb_dir, tmp_path, methods=("bm25",), judge=judge)
    assert openai_server.chat.count == first  # all cached
    assert again["subsets"]["novel"]["bm25"]["evidence_recall_llm"]["all"] == er["all"]


def test_judge_failures_are_counted_not_scored(gb_dir, tmp_path, openai_server):
    from openai_server import Status
    openai_server.chat.responder = lambda messages: Status(500) if "Statements:" in messages[
        -1]["content"] else "1"
    judge = J.GBenchJudge(_client(openai_server, "judge-m"), tmp_path / "jc2")
    out = _run(gb_dir, tmp_path, methods=("dense",), judge=judge)
    er = out["subsets"]["novel"]["dense"]["evidence_recall_llm"]
    assert er["all"] is None and er["n_failed"] == 12 and er["n_scored"] == 0
    assert out["subsets"]["novel"]["dense"]["context_relevance_llm"]["all"] == 0.5


def test_answer_accuracy_loopback(gb_dir, tmp_path, openai_server):
    def reply(messages):
        text = messages[-1]["content"]
        if text.startswith("Answer the question"):
            assert "SECRET" not in text
            return "Roe sailed to Arden."
        assert "Reference answer: SECRET" in text
        return json.dumps({"TP": ["sailed"], "FP": [], "FN": ["x"]})
    openai_server.chat.responder = reply
    out = evaluate_gbench_answers(
        "graphrag_bench_novel", ["bm25"], _client(openai_server, "gen-m"),
        _client(openai_server, "judge-m"), index_dir=tmp_path / "ix", cache_dir=tmp_path / "c",
        data_dir=gb_dir, out_dir=tmp_path / "o", progress=False, limit=4,
        extractor_factory=RegexExtractor, embedder_factory=lambda: HashingEmbedder(dim=64))
    r = out["methods"]["bm25"]
    assert r["statement_f1"]["all"] == pytest.approx(1 / 1.5) and r["statement_f1"]["n_scored"] == 4
    assert -1.0 <= r["answer_similarity"]["all"] <= 1.0
    assert r["answer_correctness"]["all"] == pytest.approx(
        0.75 * r["statement_f1"]["all"] + 0.25 * r["answer_similarity"]["all"])
    assert openai_server.chat.count == 1 + 4  # one distinct prompt (same question+context), 4 gradings
    assert (tmp_path / "o" / "answers_graphrag_bench_novel.json").is_file()


def test_gbench_recipe_runs_against_loopback(gb_dir, tmp_path, openai_server, monkeypatch, capsys):
    """The documented GraphRAG-Bench commands (docs/real_endpoint.md, recipe:gbench),
    unchanged but for the endpoint (loopback) and the data (the fake subsets above)."""
    import os
    import shlex
    from pathlib import Path

    from hyperrag_fast.cli import main as cli_main
    from hyperrag_fast.eval.__main__ import main as eval_main
    text = (Path(__file__).resolve().parents[1] / "docs" / "real_endpoint.md").read_text()
    block = text.split("<!-- recipe:gbench -->", 1)[1].split("```", 2)[1]
    lines = [x.strip() for x in block.replace("\\\n", " ").splitlines()[1:] if x.strip()]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HYPERRAG_DATA_DIR", str(gb_dir))
    for x in lines:
        if x.startswith("export "):
            k, v = x[len("export "):].split("=", 1)
            monkeypatch.setenv(k, shlex.split(v)[0])
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)  # the only change
    openai_server.chat.responder = _judge_reply
    cmds = [x for x in lines if not x.startswith("export ")]
    assert len(cmds) == 2
    for cmd in cmds:
        argv = [os.path.expandvars(a) for a in shlex.split(cmd)]
        main, args = ((eval_main, argv[3:]) if argv[:3] == ["python", "-m", "hyperrag_fast.eval"]
                      else (cli_main, argv[1:]))
        assert main(args) == 0, capsys.readouterr().err
    got = json.loads((tmp_path / "results" / "gbench" / G.RESULTS_FILE).read_text())
    for m in ("dense", "bm25", "stitch", "coda"):
        assert got["subsets"]["medical"][m]["evidence_recall_llm"]["n_scored"] == 6
    ans = json.loads((tmp_path / "results" / "gbench"
                      / "answers_graphrag_bench_medical.json").read_text())
    assert set(ans["methods"]) == {"dense", "coda"}
