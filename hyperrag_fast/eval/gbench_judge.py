"""GraphRAG-Bench's LLM-judged metrics through any OpenAI-compatible endpoint
(docs/architecture.md §9, docs/real_endpoint.md): evidence recall, context relevance and
answer accuracy. The prompts are this project's, written from the metrics' published
definitions (GraphRAG-Bench, arXiv 2506.05690, §4; the RAGAS definitions it builds on):

* **evidence recall**: each evidence statement is judged attributable (1) or not (0) to
  the retrieved context cut at :data:`MAX_CONTEXT_CHARS` characters; a question's score
  is the mean of its verdicts, the metric the mean over questions;
* **context relevance**: the judge rates how relevant the context is to the question,
  0 / 1 / 2, scaled to [0, 1];
* **answer accuracy**: statement-level F1 of a generated answer against the reference
  (the judge splits both into statements and sorts them into TP / FP / FN;
  F1 = TP / (TP + (FP + FN) / 2)) and the cosine similarity of the two answers'
  embeddings; ``answer_correctness`` = 0.75 F1 + 0.25 similarity (the RAGAS weights).

Every call goes through an on-disk cache keyed by model, prompt version and messages, so
a rerun repeats no finished call (resumable); endpoint failures and unparsable replies
are counted per question and left out of the means, never scored as 0 or 1.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..config import EVAL_LLM_CONCURRENCY
from ..kvcache import KVCache, cache_key
from ..llm.client import ChatClient
from ..llm.json_repair import loads_lenient
from .answers import cached_complete

MAX_CONTEXT_CHARS = 20_000
JUDGE_VERSION = "gbench-judge-v1"

EVIDENCE_PROMPT = (
    "You check whether statements are supported by a retrieved context.\n\n"
    "Context:\n<<<\n{context}\n>>>\n\n"
    "Statements:\n{statements}\n\n"
    "For each statement decide whether it can be attributed to the context: the context "
    "states it, or it follows directly from what the context states. Background knowledge "
    "does not count. Reply with a JSON array with one object per statement, "
    '{{"n": <statement number>, "attributed": 1 or 0}}, and nothing else.')
RELEVANCE_PROMPT = (
    "Question: {question}\n\nRetrieved context:\n<<<\n{context}\n>>>\n\n"
    "How relevant is the retrieved context to answering the question? 0 = not relevant, "
    "1 = partly relevant (some of what the answer needs), 2 = fully relevant (what the "
    "answer needs is there). Reply with the single digit 0, 1 or 2.")
ANSWER_PROMPT = (
    "Answer the question using the context below.\n\nContext:\n<<<\n{context}\n>>>\n\n"
    "Question: {question}\nAnswer:")
F1_PROMPT = (
    "Question: {question}\nReference answer: {reference}\nAnswer to grade: {answer}\n\n"
    "Split the answer to grade and the reference answer into short factual statements. "
    "TP: statements of the answer to grade that the reference supports; FP: statements of "
    "the answer to grade that the reference does not support; FN: statements of the "
    "reference that the answer to grade lacks. Reply with a JSON object "
    '{{"TP": [...], "FP": [...], "FN": [...]}} of statement strings, and nothing else.')


def cut_context(passages: Sequence[str], limit: int = MAX_CONTEXT_CHARS) -> str:
    """The retrieved passages joined by blank lines, cut at ``limit`` characters."""
    return "\n\n".join(passages)[:limit]


def evidence_messages(statements: Sequence[str], passages: Sequence[str]) -> list[dict]:
    st = "\n".join(f"{i + 1}. {s}" for i, s in enumerate(statements))
    return [{"role": "user", "content": EVIDENCE_PROMPT.format(context=cut_context(passages),
                                                                statements=st)}]


def relevance_messages(question: str, passages: Sequence[str]) -> list[dict]:
    return [{"role": "user", "content": RELEVANCE_PROMPT.format(
        question=question, context=cut_context(passages))}]


def parse_verdicts(text: str, n: int) -> list[int] | None:
    """0/1 verdicts of ``n`` statements from a JSON array reply; None unless every
    statement got exactly one 0/1 verdict."""
    try:
        arr = loads_lenient(text, expect_array=True)
    except (ValueError, TypeError):
        return None
    if not isinstance(arr, list):
        return None
    got: dict[int, int] = {}
    for i, x in enumerate(arr):
        if isinstance(x, dict):
            k, v = x.get("n", i + 1), x.get("attributed")
        else:
            k, v = i + 1, x
        if isinstance(v, bool):
            v = int(v)
        if not isinstance(k, int) or v not in (0, 1) or k in got:
            return None
        got[k] = int(v)
    if sorted(got) != list(range(1, n + 1)):
        return None
    return [got[i] for i in range(1, n + 1)]


def parse_relevance(text: str) -> float | None:
    m = re.search(r"[012]", text)
    return None if m is None else int(m.group()) / 2.0


def parse_f1(text: str) -> float | None:
    """Statement F1 from a {TP, FP, FN} reply (1.0 when all three are empty lists? no:
    None, nothing was graded)."""
    try:
        d = loads_lenient(text)
    except (ValueError, TypeError):
        return None
    if not isinstance(d, dict) or not all(isinstance(d.get(k), list) for k in ("TP", "FP", "FN")):
        return None
    tp, fp, fn = (len(d[k]) for k in ("TP", "FP", "FN"))
    if tp + fp + fn == 0:
        return None
    return tp / (tp + 0.5 * (fp + fn))


def _by_type(qtypes: Sequence[str], vals: Sequence[float | None]) -> dict[str, Any]:
    by: dict[str, list[float]] = defaultdict(list)
    for t, v in zip(qtypes, vals):
        if v is not None:
            by[t].append(v)
    ok = [v for v in vals if v is not None]
    out: dict[str, Any] = {t: float(np.mean(v)) for t, v in sorted(by.items())}
    out["all"] = float(np.mean(ok)) if ok else None
    out["n_scored"] = len(ok)
    out["n_failed"] = len(vals) - len(ok)
    return out


class GBenchJudge:
    """The LLM-judged retrieval columns of one method's contexts (cached, resumable)."""

    def __init__(self, client: ChatClient, cache_dir: str | Path, max_concurrency: int = EVAL_LLM_CONCURRENCY) -> None:
        self.client = client
        self.cache_path = Path(cache_dir) / "gbench_judge.sqlite"
        self.max_concurrency = max_concurrency

    def _run(self, cache: KVCache, msgs: list[list[dict]]):
        jobs = [(cache_key("gbench", self.client.model, JUDGE_VERSION, json.dumps(m)), m)
                for m in msgs]
        return cached_complete(self.client, cache, jobs, self.max_concurrency,
                               {"temperature": 0.0})

    def score(self, questions: Sequence, contexts: Sequence[Sequence[str]]) -> dict[str, Any]:
        """``evidence_recall_llm`` and ``context_relevance_llm`` per type and overall."""
        cache = KVCache(self.cache_path, "gbench")
        try:
            ev, cached_ev = self._run(cache, [evidence_messages(q.evidence, c)
                                              for q, c in zip(questions, contexts)])
            rel, _ = self._run(cache, [relevance_messages(q.question, c)
                                       for q, c in zip(questions, contexts)])
        finally:
            cache.close()
        recall = []
        for q, r in zip(questions, ev):
            v = None if isinstance(r, Exception) else parse_verdicts(r.text, len(q.evidence))
            recall.append(None if v is None else float(np.mean(v)))
        relev = [None if isinstance(r, Exception) else parse_relevance(r.text) for r in rel]
        qt = [q.qtype for q in questions]
        meta = {"judge_model": self.client.model, "judge_version": JUDGE_VERSION,
                "max_context_chars": MAX_CONTEXT_CHARS}
        return {"evidence_recall_llm": {**_by_type(qt, recall), **meta,
                                        "n_cached": int(sum(cached_ev))},
                "context_relevance_llm": {**_by_type(qt, relev), **meta}}


def answer_accuracy(client: ChatClient, judge: ChatClient, embedder, questions: Sequence,
                    contexts: Sequence[Sequence[str]], cache_dir: str | Path,
                    max_concurrency: int = EVAL_LLM_CONCURRENCY) -> dict[str, Any]:
    """Generate an answer per question from its context, then statement F1 (``judge``)
    and answer-embedding similarity (``embedder``) against the reference answer."""
    cache = KVCache(Path(cache_dir) / "gbench_judge.sqlite", "gbench")
    try:
        gen_msgs = [[{"role": "user", "content": ANSWER_PROMPT.format(
            context=cut_context(c), question=q.question)}] for q, c in zip(questions, contexts)]
        jobs = [(cache_key("gbench-answer", client.model, JUDGE_VERSION, json.dumps(m)), m)
                for m in gen_msgs]
        answers, _ = cached_complete(client, cache, jobs, max_concurrency, {"temperature": 0.0})
        ok = [i for i, a in enumerate(answers) if not isinstance(a, Exception)]
        f1_msgs = [[{"role": "user", "content": F1_PROMPT.format(
            question=questions[i].question, reference=questions[i].answer,
            answer=answers[i].text)}] for i in ok]
        fj = [(cache_key("gbench-f1", judge.model, JUDGE_VERSION, json.dumps(m)), m) for m in f1_msgs]
        f1s, _ = cached_complete(judge, cache, fj, max_concurrency, {"temperature": 0.0})
    finally:
        cache.close()
    f1: list[float | None] = [None] * len(questions)
    sim: list[float | None] = [None] * len(questions)
    for i, r in zip(ok, f1s):
        f1[i] = None if isinstance(r, Exception) else parse_f1(r.text)
    if ok:
        a = np.asarray(embedder.embed([answers[i].text for i in ok]), np.float64)
        b = np.asarray(embedder.embed([questions[i].answer for i in ok]), np.float64)
        cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
        for i, c in zip(ok, cos):
            sim[i] = float(c)
    corr = [None if f is None or s is None else 0.75 * f + 0.25 * s for f, s in zip(f1, sim)]
    qt = [q.qtype for q in questions]
    return {"statement_f1": _by_type(qt, f1), "answer_similarity": _by_type(qt, sim),
            "answer_correctness": _by_type(qt, corr), "model": client.model,
            "judge_model": judge.model, "embedder": getattr(embedder, "name", "?"),
            "n_unanswered": len(questions) - len(ok), "judge_version": JUDGE_VERSION}
