"""Answer quality: Contain-Acc, exact match, token F1, optional LLM judge (STITCH-RAG §4.1).

Reference answers are labels: :func:`load_answers` reads them from ``questions.json`` on
the label side only, keyed by question id; the retriever sees only question strings.
:func:`evaluate_answers` answers every question with every method plus ``zero_shot``
through an on-disk cache (a rerun repeats no finished call), records endpoint failures
as per-question skips, and writes ``answers_<dataset>_<split>.json`` / ``.md``.
"""
from __future__ import annotations

import collections
import datetime as _dt
import json
import os
import re
import string
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from ..config import EVAL_LLM_CONCURRENCY, TUNED
from ..answer import (DEFAULT_MAX_CONTEXT_CHARS, PROMPT_VERSION, Prepared, messages_fingerprint,
                      prepare, prepare_zero_shot, wants_detail)
from ..kvcache import KVCache, cache_key
from ..llm.client import ChatClient, ChatResult, run_bounded
from ..config import QueryOptions
from ..retriever import Retriever
from .data import _read_json, _split, load_dataset, resolve_data_dir

ZERO_SHOT = "zero_shot"
JUDGE_VERSION = "judge-v1"
JUDGE_PROMPT = (
    "You are grading an answer to a question against the reference answer(s).\n"
    "Question: {question}\n"
    "Reference answer(s): {references}\n"
    "Answer to grade: {answer}\n"
    "Does the answer to grade give the same answer as a reference (ignore wording, "
    "formatting and extra detail)? Reply with one word: yes or no.")


# ------------------------------------------------------------------ labels
def load_answers(name: str, split: str,
                 data_dir: str | os.PathLike | None = None) -> dict[str, tuple[str, ...]]:
    """Reference answers per question id (``answer`` first, then ``answer_aliases``),
    for the same questions and order as :func:`~hyperrag_fast.eval.data.load_dataset`."""
    sub = {"2wikimultihopqa": ("2wikimultihopqa", "id"), "hotpotqa_train": ("hotpotqa_train", "_id")}
    if name not in sub:
        raise ValueError(f"unknown dataset {name!r}; choose from {tuple(sub)}")
    folder, id_key = sub[name]
    path = resolve_data_dir(data_dir) / folder / "questions.json"
    recs = _read_json(path)
    out: dict[str, tuple[str, ...]] = {}
    for r in recs[_split(name, split, len(recs))]:
        refs = [r["answer"], *(r.get("answer_aliases") or [])]
        refs = tuple(dict.fromkeys(str(a) for a in refs if normalize_answer(str(a))))
        if not refs:
            raise ValueError(f"{path}: question {r[id_key]!r} has no usable reference answer")
        out[str(r[id_key])] = refs
    return out


# ------------------------------------------------------------------ metrics
_PUNCT = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation and articles, collapse whitespace."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def contain_match(prediction: str, reference: str) -> float:
    """1.0 when the normalised reference is a substring of the normalised prediction."""
    ref = normalize_answer(reference)
    return float(bool(ref) and ref in normalize_answer(prediction))


def exact_match(prediction: str, reference: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(reference))


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD token F1 over normalised tokens."""
    p, r = normalize_answer(prediction).split(), normalize_answer(reference).split()
    common = sum((collections.Counter(p) & collections.Counter(r)).values())
    if not p or not r:
        return float(p == r)
    if common == 0:
        return 0.0
    prec, rec = common / len(p), common / len(r)
    return 2 * prec * rec / (prec + rec)


def score_answer(prediction: str, references: Sequence[str]) -> dict[str, float]:
    """Contain-Acc, EM and F1, each the max over the references (answer + aliases)."""
    if not references:
        raise ValueError("no reference answers")
    return {"contain": max(contain_match(prediction, r) for r in references),
            "em": max(exact_match(prediction, r) for r in references),
            "f1": max(token_f1(prediction, r) for r in references)}


def parse_judgement(text: str) -> bool | None:
    """True for yes, False for no, None when the reply is neither."""
    words = re.findall(r"[a-z]+", text.lower())
    if not words or words[0] not in ("yes", "no"):
        return None
    return words[0] == "yes"


def judge_messages(question: str, references: Sequence[str], answer: str) -> list[dict]:
    return [{"role": "user", "content": JUDGE_PROMPT.format(
        question=question, references=" | ".join(references), answer=answer)}]


# ------------------------------------------------------------------ cached calls
def _result_to_bytes(r: ChatResult) -> bytes:
    return json.dumps({"text": r.text, "usage": r.usage, "finish_reason": r.finish_reason}).encode()


def _result_from_bytes(b: bytes) -> ChatResult:
    d = json.loads(b)
    return ChatResult(d["text"], d["usage"], d["finish_reason"])


def cached_complete(client: ChatClient, cache: KVCache, jobs: Sequence[tuple[str, list]],
                    max_concurrency: int, params: dict[str, Any],
                    progress: Callable[[int], None] | None = None,
                    ) -> tuple[list[ChatResult | Exception], list[bool]]:
    """Complete each (key, messages) job, reading and writing ``cache`` (each success is
    stored as soon as it arrives). Returns results (or exceptions) and "was cached" flags."""
    hits = cache.get_many(k for k, _ in jobs)
    todo = list({k: (k, m) for k, m in jobs if k not in hits}.values())  # one call per key

    def one(job: tuple[str, list]) -> ChatResult:
        r = client.complete(job[1], **params)
        cache.put(job[0], _result_to_bytes(r))
        return r

    fresh = dict(zip((k for k, _ in todo), run_bounded(one, todo, max_concurrency, progress)))
    out = [_result_from_bytes(hits[k]) if k in hits else fresh[k] for k, _ in jobs]
    return out, [k in hits for k, _ in jobs]


def _add_usage(total: dict[str, int], usage: dict[str, int] | None) -> None:
    for k, v in (usage or {}).items():
        total[k] = total.get(k, 0) + int(v)


# ------------------------------------------------------------------ entry
def evaluate_answers(dataset: str, split: str, methods: Sequence[str], client: ChatClient,
                     judge_client: ChatClient | None = None, *,
                     data_dir: str | os.PathLike | None = None,
                     index_dir: str | os.PathLike | None = None,
                     cache_dir: str | os.PathLike = "cache",
                     out_dir: str | os.PathLike | None = None,
                     top_k: int = TUNED.top_k, max_context_chars: int = DEFAULT_MAX_CONTEXT_CHARS,
                     max_concurrency: int = EVAL_LLM_CONCURRENCY, limit: int | None = None,
                     zero_shot: bool = True, temperature: float | None = 0.0,
                     extractor_factory: Callable | None = None,
                     embedder_factory: Callable | None = None,
                     progress: bool = True, command: str | None = None) -> dict[str, Any]:
    """Answer metrics per method (plus ``zero_shot``); see the module docstring.

    ``limit``: only the first ``limit`` questions of the split (recorded). ``temperature``
    None leaves it to the endpoint. Returns the results dict; writes files into
    ``out_dir`` when one is given."""
    from tqdm import tqdm

    from .harness import (_git, check_methods, prepare_methods, default_embedder, default_extractor,
                          load_or_build_index)

    methods = list(dict.fromkeys(methods))
    check_methods(methods)
    if top_k < 1 or max_concurrency < 1 or (limit is not None and limit < 1):
        raise ValueError("top_k, max_concurrency and limit must be >= 1")
    ds = load_dataset(dataset, split, data_dir)
    refs = load_answers(dataset, split, data_dir)
    questions = ds.questions[:limit] if limit else ds.questions
    missing = [q.qid for q in questions if q.qid not in refs]
    if missing:
        raise ValueError(f"no reference answers for question ids {missing[:5]}")
    extractor = (extractor_factory or default_extractor)()
    embedder = (embedder_factory or default_embedder)()
    ix, index_info = load_or_build_index(ds, extractor, embedder, index_dir, cache_dir, progress)
    retriever = Retriever(ix, embedder, prebuilt=prepare_methods(ix, index_dir, methods))
    texts = [q.question for q in questions]  # all a query may see

    prepared: dict[str, list[Prepared]] = {}
    for m in methods:
        o = QueryOptions(method=m).with_top_k(top_k)
        res = retriever.retrieve_batch(texts, o, detail=wants_detail(m))
        prepared[m] = [prepare(t, r, max_context_chars) for t, r in zip(texts, res)]
    if zero_shot:
        prepared[ZERO_SHOT] = [prepare_zero_shot(t) for t in texts]

    params = {} if temperature is None else {"temperature": temperature}
    pjson = json.dumps(params, sort_keys=True)
    rows = [(m, i, p) for m, ps in prepared.items() for i, p in enumerate(ps)]
    jobs = [(cache_key(client.model, PROMPT_VERSION, pjson, texts[i],
                       "\x1f".join(c.chunk_id for c in p.shown), messages_fingerprint(p.messages)),
             p.messages) for m, i, p in rows]
    cache = KVCache(Path(cache_dir) / "answers.sqlite", "answers")
    try:
        with tqdm(total=len(jobs), desc="answers", disable=not progress, file=sys.stderr) as bar:
            results, cached = cached_complete(client, cache, jobs, max_concurrency, params,
                                              bar.update)
        answers = [r if isinstance(r, Exception) else p.finish(r, client.model)
                   for (m, i, p), r in zip(rows, results)]
        judged = None
        if judge_client is not None:
            judged = _judge(judge_client, cache, rows, answers, texts, questions, refs,
                            max_concurrency, progress)
    finally:
        cache.close()

    out_methods = {m: _summarize(m, rows, answers, cached, judged, questions, refs)
                   for m in prepared}
    out = {"dataset": dataset, "split": split, "n_questions": len(questions),
           "limit": limit, "top_k": top_k, "max_context_chars": max_context_chars,
           "model": client.model, "base_url": client.base_url,
           "judge_model": judge_client.model if judge_client else None,
           "judge_prompt": JUDGE_PROMPT if judge_client else None,
           "judge_version": JUDGE_VERSION if judge_client else None,
           "prompt_version": PROMPT_VERSION, "generation_params": params,
           "extractor": extractor.name, "embedder": embedder.name, "index": index_info,
           "command": command, "git_commit": _git("rev-parse", "HEAD"),
           "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "methods": out_methods}
    if out_dir is not None:
        write_answer_results(out, Path(out_dir))
    return out


def _judge(judge: ChatClient, cache: KVCache, rows, answers, texts, questions, refs,
           max_concurrency: int, progress: bool) -> list[Any]:
    """Judge every answered row: True/False, None (unparsed reply), an exception, or
    absent (row not answered)."""
    from tqdm import tqdm

    idx = [j for j, a in enumerate(answers) if not isinstance(a, Exception)]
    jobs = []
    for j in idx:
        _, i, _ = rows[j]
        msgs = judge_messages(texts[i], refs[questions[i].qid], answers[j].short)
        jobs.append((cache_key("judge", judge.model, JUDGE_VERSION,
                               messages_fingerprint(msgs)), msgs))
    with tqdm(total=len(jobs), desc="judge", disable=not progress, file=sys.stderr) as bar:
        res, _ = cached_complete(judge, cache, jobs, max_concurrency, {"temperature": 0.0},
                                 bar.update)
    out: list[Any] = [None] * len(answers)
    for j, r in zip(idx, res):
        out[j] = r if isinstance(r, Exception) else {"ok": parse_judgement(r.text),
                                                      "reply": r.text, "usage": r.usage}
    return out


def _summarize(method: str, rows, answers, cached, judged, questions, refs) -> dict[str, Any]:
    per_q, skipped = [], []
    sums = {"contain": 0.0, "em": 0.0, "f1": 0.0}
    usage: dict[str, int] = {}
    usage_fresh: dict[str, int] = {}
    judge_usage: dict[str, int] = {}
    n_yes = n_judged = n_unparsed = n_judge_failed = n_explicit = 0
    for j, (m, i, _) in enumerate(rows):
        if m != method:
            continue
        q, a = questions[i], answers[j]
        if isinstance(a, Exception):
            skipped.append({"qid": q.qid, "error": f"{type(a).__name__}: {a}"[:500]})
            continue
        s = score_answer(a.short, refs[q.qid])
        for k in sums:
            sums[k] += s[k]
        _add_usage(usage, a.usage)
        if not cached[j]:
            _add_usage(usage_fresh, a.usage)
        n_explicit += a.cited_explicitly
        rec = {"qid": q.qid, "answer": a.text, "short": a.short, **s,
               "chunks_used": a.chunks_used, "cited_explicitly": a.cited_explicitly,
               "invalid_citations": a.invalid_citations, "cached": cached[j]}
        if judged is not None:
            v = judged[j]
            if isinstance(v, Exception):
                n_judge_failed += 1
                rec["judge"] = f"error: {type(v).__name__}: {v}"[:300]
            else:
                _add_usage(judge_usage, v["usage"])
                rec["judge"], rec["judge_reply"] = v["ok"], v["reply"]
                if v["ok"] is None:
                    n_unparsed += 1
                else:
                    n_judged += 1
                    n_yes += v["ok"]
        per_q.append(rec)
    n = len(per_q)
    row = {"n_answered": n, "n_skipped": len(skipped),
           **{k if k != "contain" else "contain_acc": (v / n if n else None)
              for k, v in sums.items()},
           "cited_explicitly_rate": n_explicit / n if n and method != ZERO_SHOT else None,
           "usage": usage, "usage_this_run": usage_fresh, "skipped": skipped,
           "questions": per_q}
    if judged is not None:
        row.update(judge_acc=n_yes / n_judged if n_judged else None, n_judged=n_judged,
                   n_judge_unparsed=n_unparsed, n_judge_failed=n_judge_failed,
                   judge_usage=judge_usage)
    return row


def write_answer_results(out: dict[str, Any], out_dir: Path) -> None:
    """``answers_<dataset>_<split>.json`` (everything) and ``.md`` (the table)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"answers_{out['dataset']}_{out['split']}"
    stem.with_suffix(".json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n",
                                         encoding="utf-8")
    judge = out["judge_model"] is not None

    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.3f}"

    lines = [f"# Answer quality: {out['dataset']} / {out['split']}", "",
             f"Generator `{out['model']}` (prompt {out['prompt_version']}, "
             f"params {out['generation_params']}), top-k {out['top_k']}, "
             f"{out['n_questions']} questions" + (f" (limit {out['limit']})" if out["limit"] else "")
             + f"; extractor `{out['extractor']}`, embedder `{out['embedder']}`."]
    if judge:
        lines.append(f"LLM judge `{out['judge_model']}` ({out['judge_version']}; prompt verbatim "
                     "in the JSON).")
    lines += ["", "Metrics are over answered questions; skipped = endpoint failures. "
              "Tokens: prompt/completion over all answers (this run's fresh calls in brackets).",
              "",
              "| method | Contain-Acc | EM | F1 |" + (" judge acc |" if judge else "")
              + " answered | skipped | tokens prompt/completion (this run) |",
              "|---|---|---|---|" + ("---|" if judge else "") + "---|---|---|"]
    for name, r in out["methods"].items():
        u, uf = r["usage"], r["usage_this_run"]
        tok = (f"{u.get('prompt_tokens', 0)}/{u.get('completion_tokens', 0)} "
               f"({uf.get('prompt_tokens', 0)}/{uf.get('completion_tokens', 0)})")
        lines.append(f"| {name} | {f(r['contain_acc'])} | {f(r['em'])} | {f(r['f1'])} |"
                     + (f" {f(r.get('judge_acc'))} |" if judge else "")
                     + f" {r['n_answered']} | {r['n_skipped']} | {tok} |")
    lines += ["", f"Command: `{out['command']}`  ", f"Commit: {out['git_commit']}, {out['timestamp']}"]
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
