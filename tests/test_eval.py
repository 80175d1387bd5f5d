"""Evaluation harness: metrics, data loaders and splits, label isolation, end to end."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hyperrag_fast.chunking import chunk_passage
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.eval import data as D
from hyperrag_fast.eval.__main__ import main as eval_main
from hyperrag_fast.eval.harness import evaluate
from hyperrag_fast.eval.metrics import (mean_recall, percentiles, recall_at_k, recall_by,
                                        summarize)
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.retriever import METHODS, MethodOutput, register_method

N_PASSAGES, N_QUESTIONS = 24, 205


# ----------------------------------------------------------------------- fake data
def _title(i):
    return f"Person {chr(65 + i % 26)}{i}"


def write_fake_data(root):
    """2Wiki (list corpus, 205 questions) and HotpotQA (dict corpus, 3 questions) in tmp."""
    w = root / "2wikimultihopqa"
    w.mkdir(parents=True)
    corpus = [{"title": _title(i), "text": f"{_title(i)} was born in Town{i % 5}. "
                                           f"{_title(i)} married {_title((i + 1) % N_PASSAGES)}."}
              for i in range(N_PASSAGES)]
    qs = []
    for j in range(N_QUESTIONS):
        sf = [_title(j % N_PASSAGES), _title((j + 1) % N_PASSAGES)]
        if j % 4 == 3:
            sf += [_title((j + 2) % N_PASSAGES), _title((j + 3) % N_PASSAGES)]
        qs.append({"id": f"q{j}", "question": f"Where was the spouse of {sf[0]} born?",
                   "answer": "SECRET-ANSWER", "answer_aliases": ["SECRET-ALIAS"],
                   "supporting_facts": sf, "question_entities": ["SECRET-QE"],
                   "supporting_entities": ["SECRET-SE"]})
    (w / "corpus.json").write_text(json.dumps(corpus))
    (w / "questions.json").write_text(json.dumps(qs))
    h = root / "hotpotqa_train"
    h.mkdir()
    hc = {"Alpha": ["Alpha is a town.", " It lies on a river."],
          "Beta": ["Beta is a river.", " It is long. "],  # trailing space kept
          "Gamma": ["Gamma is a mountain."]}
    hq = [{"_id": "h0", "question": "Which river flows by Alpha?", "answer": "Beta",
           "supporting_facts": [["Alpha", 1], ["Beta", 0], ["Beta", 1]], "type": "bridge",
           "level": "easy", "context": [[t, s] for t, s in hc.items()]},
          {"_id": "h1", "question": "Is Gamma or Alpha higher?", "answer": "Gamma",
           "supporting_facts": [["Gamma", 0], ["Alpha", 0]], "type": "comparison",
           "level": "hard", "context": [["Gamma", hc["Gamma"]], ["Alpha", hc["Alpha"]]]}]
    (h / "corpus.json").write_text(json.dumps(hc))
    (h / "questions.json").write_text(json.dumps(hq))
    m = root / "musique_dev"
    m.mkdir()
    mc = [{"title": "Page", "text": "Page has a first paragraph."},
          {"title": "Page", "text": "Page has a second paragraph."},  # a title repeats
          {"title": "Other", "text": "Other is a place."}]
    mq = [{"id": "2hop__1_2", "question": "Where is the page?", "answer": "SECRET-ANSWER",
           "answer_aliases": [], "n_hops": 2, "gold_ids": [1, 2]},
          {"id": "3hop__1_2_3", "question": "What else?", "answer": "SECRET-ANSWER",
           "answer_aliases": [], "n_hops": 3, "gold_ids": [0, 1, 2]}]
    (m / "corpus.json").write_text(json.dumps(mc))
    (m / "questions.json").write_text(json.dumps(mq))
    return root


@pytest.fixture
def data_dir(tmp_path):
    return write_fake_data(tmp_path / "data")


@pytest.fixture
def fake_method():
    """Registers methods "fixed" (rows 0..top_k-1) and "spy" (records its inputs)."""
    calls = []

    def fixed(state, q, text, o, detail):
        ids = np.arange(min(o.top_k, state.index.n_chunks))
        return MethodOutput(ids, -ids.astype(np.float32), None, 1.0, 2.0)

    def spy(state, q, text, o, detail):
        calls.append((np.array(q), text, o, detail))
        return fixed(state, q, text, o, detail)

    register_method("fixed", fixed)
    register_method("spy", spy)
    yield calls
    METHODS.pop("fixed", None)
    METHODS.pop("spy", None)


def _run(data_dir, tmp_path, methods, split="dev", dataset="2wikimultihopqa", **kw):
    return evaluate(dataset, split, methods, data_dir=data_dir, progress=False,
                    cache_dir=tmp_path / "cache", out_dir=tmp_path / "out",
                    extractor_factory=RegexExtractor, embedder_factory=HashingEmbedder, **kw)


# ----------------------------------------------------------------------- metrics
def test_recall_at_k_exact():
    assert recall_at_k(["a", "b", "c"], {"a", "c"}, 2) == 0.5
    assert recall_at_k(["a", "b", "c"], {"a", "c"}, 3) == 1.0
    assert recall_at_k(["x"], {"a", "b", "c", "d"}, 8) == 0.0
    assert recall_at_k(["a", "a", "b"], {"a", "b", "c", "d"}, 2) == 0.25  # duplicates count once
    with pytest.raises(ValueError):
        recall_at_k(["a"], set(), 2)
    with pytest.raises(ValueError):
        recall_at_k(["a"], {"a"}, 0)


def test_mean_recall_and_breakdowns():
    ranked = [["a", "b", "x", "y", "z"], ["x", "c", "y", "d", "e"], ["p", "q", "r", "s", "t"]]
    golds = [frozenset("ab"), frozenset("cdef"), frozenset("pz")]
    r = mean_recall(ranked, golds, ks=(2, 5))
    assert r == pytest.approx({"recall@2": (1 + 0.25 + 0.5) / 3, "recall@5": (1 + 0.75 + 0.5) / 3})
    by = recall_by(ranked, golds, [2, 4, 2], ks=(2,))
    assert by == {"2": {"recall@2": 0.75, "n": 2}, "4": {"recall@2": 0.25, "n": 1}}
    assert recall_by(ranked, golds, ["", "", ""], ks=(2,)) == {}
    with pytest.raises(ValueError):
        mean_recall(ranked, golds[:2])


def test_percentiles_and_summary():
    p = percentiles(list(range(1, 101)))
    assert p == pytest.approx({"p50": 50.5, "p90": 90.1, "p99": 99.01})
    s = summarize([["a", "b"], ["c", "d"]], [frozenset("a"), frozenset("ce")], ["bridge", "comparison"],
                  [1.0, 3.0], [5.0, 7.0], ks=(2,))
    assert s["recall@2"] == 0.75 and s["n_questions"] == 2
    assert s["latency_ms"]["p50"] == 2.0 and s["embed_ms_p50"] == 6.0
    assert s["by_type"] == {"bridge": {"recall@2": 1.0, "n": 1},
                            "comparison": {"recall@2": 0.5, "n": 1}}
    assert set(s["by_n_gold"]) == {"1", "2"}


# ----------------------------------------------------------------------- data
def test_2wiki_loader_passages_and_gold(data_dir):
    ds = D.load_dataset("2wikimultihopqa", "all", data_dir)
    corpus = json.loads((data_dir / "2wikimultihopqa" / "corpus.json").read_text())
    assert len(ds.chunks) == len(ds.documents) == N_PASSAGES
    assert ds.passages == [p["title"] + "\n" + p["text"] for p in corpus]
    qs = json.loads((data_dir / "2wikimultihopqa" / "questions.json").read_text())
    by_title = {p["title"]: p["title"] + "\n" + p["text"] for p in corpus}
    for q, rec, lab in zip(ds.questions, qs, ds.labels):
        assert q.question == rec["question"] and q.qid == rec["id"]
        assert lab.gold == {by_title[t] for t in rec["supporting_facts"]}
    assert {lab.n_gold for lab in ds.labels} == {2, 4}
    assert set(vars(ds.questions[0])) == {"qid", "question"}  # nothing else reaches a query


def test_hotpot_loader_keeps_whitespace_and_types(data_dir):
    ds = D.load_dataset("hotpotqa_train", "test", data_dir)
    assert ds.passages[1] == "Beta\nBeta is a river. It is long. "
    assert [chunk_passage(c) for c in ds.chunks] == ds.passages  # one chunk, unaltered
    assert ds.labels[0].gold == {"Alpha\nAlpha is a town. It lies on a river.",
                                 "Beta\nBeta is a river. It is long. "}
    assert [lab.qtype for lab in ds.labels] == ["bridge", "comparison"]


def test_musique_loader_repeated_titles_and_hops(data_dir, tmp_path, fake_method):
    ds = D.load_dataset("musique_dev", "all", data_dir)
    assert ds.passages == ["Page\nPage has a first paragraph.", "Page\nPage has a second paragraph.",
                           "Other\nOther is a place."]
    assert [c.title for c in ds.chunks] == ["Page", "Page", "Other"]  # the page title, repeated
    assert len({c.chunk_id for c in ds.chunks}) == 3
    assert ds.labels[0].gold == {ds.passages[1], ds.passages[2]}
    assert [lab.qtype for lab in ds.labels] == ["2hop", "3hop"]
    assert D.load_dataset("musique_dev", "dev", data_dir).questions == ds.questions
    with pytest.raises(ValueError, match="split"):
        D.load_dataset("musique_dev", "test", data_dir)
    out = _run(data_dir, tmp_path, ["fixed"], split="all", dataset="musique_dev")
    row = out["methods"]["fixed"]  # rows 0..2 = all three passages
    assert row["recall@2"] == pytest.approx((0.5 + 2 / 3) / 2) and set(row["by_type"]) == {"2hop", "3hop"}
    contract = json.loads((tmp_path / "out" / "quality-musique_dev.json").read_text())
    assert contract["dataset"] == "musique_dev" and contract["embedder"] == HashingEmbedder().name


def test_splits(data_dir):
    all_ = D.load_dataset("2wikimultihopqa", "all", data_dir)
    dev = D.load_dataset("2wikimultihopqa", "dev", data_dir)
    test = D.load_dataset("2wikimultihopqa", "test", data_dir)
    assert len(dev.questions) == 200 and len(test.questions) == N_QUESTIONS - 200
    assert dev.questions + test.questions == all_.questions  # file order, disjoint
    assert dev.labels + test.labels == all_.labels
    assert len(D.load_dataset("hotpotqa_train", "all", data_dir).questions) == 2
    with pytest.raises(ValueError, match="split"):
        D.load_dataset("hotpotqa_train", "dev", data_dir)
    with pytest.raises(ValueError, match="dataset"):
        D.load_dataset("nq", "dev", data_dir)


def test_data_dir_resolution(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(D.ENV_VAR, str(data_dir))
    assert D.resolve_data_dir() == data_dir
    assert D.resolve_data_dir(tmp_path) == tmp_path  # explicit wins
    monkeypatch.setenv(D.ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="HYPERRAG_DATA_DIR"):
        D.resolve_data_dir()


def test_missing_gold_is_an_error(data_dir):
    p = data_dir / "2wikimultihopqa" / "questions.json"
    qs = json.loads(p.read_text())
    qs[0]["supporting_facts"] = ["No Such Title"]
    p.write_text(json.dumps(qs))
    with pytest.raises(ValueError, match="not in corpus"):
        D.load_dataset("2wikimultihopqa", "dev", data_dir)


# ----------------------------------------------------------------------- harness
def test_query_sees_only_the_question(data_dir, tmp_path, fake_method):
    _run(data_dir, tmp_path, ["spy"])
    ds = D.load_dataset("2wikimultihopqa", "dev", data_dir)
    texts = [c[1] for c in fake_method]
    assert texts[1:] == [q.question for q in ds.questions]  # [0] is the warm-up query
    emb = HashingEmbedder()
    for (q, text, o, detail) in fake_method[1:4]:
        np.testing.assert_allclose(q, emb.embed([text])[0])
        assert detail is False
    secrets = {g for lab in ds.labels for g in lab.gold} | {"SECRET-ANSWER", "SECRET-ALIAS"}
    for _, _, o, _ in fake_method:
        assert not any(s in repr(o) for s in secrets)


def test_evaluate_end_to_end(data_dir, tmp_path, fake_method):
    out = _run(data_dir, tmp_path, ["fixed", "dense"], index_dir=tmp_path / "ix", dump=True)
    ds = D.load_dataset("2wikimultihopqa", "dev", data_dir)
    expected = mean_recall([ds.passages[:8]] * len(ds.labels), [lab.gold for lab in ds.labels])
    row = out["methods"]["fixed"]
    assert {k: row[k] for k in expected} == pytest.approx(expected)
    assert row["latency_ms"] == {"p50": 3.0, "p90": 3.0, "p99": 3.0}
    assert row["n_questions"] == 200 and set(row["by_n_gold"]) == {"2", "4"}
    assert 0 <= out["methods"]["dense"]["recall@8"] <= 1
    assert out["index"]["reused"] is False and out["embedder"] == HashingEmbedder().name
    saved = json.loads((tmp_path / "out" / "quality_2wikimultihopqa_dev.json").read_text())
    assert set(saved["methods"]) == {"fixed", "dense"} and saved["git_commit"]
    md = (tmp_path / "out" / "quality_2wikimultihopqa_dev.md").read_text()
    assert "| fixed |" in md and "| dense |" in md
    dump = (tmp_path / "out" / "quality_2wikimultihopqa_dev_fixed_topk.jsonl").read_text()
    first = json.loads(dump.splitlines()[0])
    assert first["top"] == [c.doc_id for c in ds.chunks[:8]] and first["qid"] == "q0"
    # a second run reuses the index and keeps the other method's row
    again = _run(data_dir, tmp_path, ["dense"], index_dir=tmp_path / "ix")
    assert again["index"]["reused"] is True and set(again["methods"]) == {"fixed", "dense"}
    assert again["methods"]["dense"]["recall@5"] == out["methods"]["dense"]["recall@5"]
    # another embedder does not reuse it
    other = evaluate("2wikimultihopqa", "dev", ["dense"], data_dir=data_dir, progress=False,
                     index_dir=tmp_path / "ix", cache_dir=tmp_path / "cache", out_dir=None,
                     extractor_factory=RegexExtractor,
                     embedder_factory=lambda: HashingEmbedder(dim=32))
    assert other["index"]["reused"] is False


def test_hotpot_by_type(data_dir, tmp_path, fake_method):
    out = _run(data_dir, tmp_path, ["fixed"], split="test", dataset="hotpotqa_train")
    row = out["methods"]["fixed"]
    assert set(row["by_type"]) == {"bridge", "comparison"}
    assert row["recall@2"] == pytest.approx((1.0 + 0.5) / 2)  # rows 0, 1 = Alpha, Beta
    # the issue-5 results contract: quality-<dataset>.json for the test split
    contract = json.loads((tmp_path / "out" / "quality-hotpotqa_train.json").read_text())
    assert contract["split"] == "test" and contract["dataset"] == "hotpotqa_train"
    for key in ("extractor", "embedder", "n_questions"):
        assert key in contract
    for k in ("recall@2", "recall@5", "recall@8", "latency_ms_p50", "latency_ms_p99"):
        assert 0 <= contract["methods"]["fixed"][k]
    assert not (tmp_path / "out" / "quality-2wikimultihopqa.json").exists()
    assert not (tmp_path / "out" / "quality_hotpotqa_train_test.json").exists()  # one copy


def test_unknown_method_and_cli_error(data_dir, tmp_path, capsys):
    with pytest.raises(ValueError, match="unknown method"):
        _run(data_dir, tmp_path, ["no-such-method"])
    rc = eval_main(["--dataset", "2wikimultihopqa", "--split", "dev", "--methods", "nope",
                    "--data-dir", str(data_dir), "--out-dir", str(tmp_path / "o")])
    assert rc == 2 and "unknown method" in capsys.readouterr().err


def test_the_harness_writes_only_where_told(data_dir, tmp_path, monkeypatch, capsys):
    """No default output folder: without --out-dir the CLI refuses, and the library
    function writes nothing (the committed benchmarks/results are never touched by default)."""
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(SystemExit) as e:
        eval_main(["--dataset", "2wikimultihopqa", "--split", "dev", "--data-dir", str(data_dir)])
    assert e.value.code == 2 and "--out-dir" in capsys.readouterr().err
    evaluate("2wikimultihopqa", "dev", ["dense"], data_dir=data_dir, progress=False,
             cache_dir=tmp_path / "cache", extractor_factory=RegexExtractor,
             embedder_factory=HashingEmbedder)
    assert list(work.iterdir()) == []


def test_twowiki_types_from_templates():
    from hyperrag_fast.eval.data import twowiki_type
    assert twowiki_type("Who died later, Charles Fechter or Félix De Blochausen?") == "comparison"
    assert twowiki_type("Are Wiqu (Lima) and Qillqa (Melgar) both located in the same country?") == "comparison"
    assert twowiki_type("Which film has the director who is older than the other, "
                        "Airheads or Return To Cabin By The Lake? ") == "bridge_comparison"
    assert twowiki_type("Are both The Pledge (Film) and Mother Of George from the same country?") == "comparison"
    assert twowiki_type("Who is the stepmother of Sara Ali Khan?") == "inference"
    assert twowiki_type("Who is the father of the director of film Power Of Women (Film)?") == "compositional"
