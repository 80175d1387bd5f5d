"""Grounded answers: retrieve top-k chunks, prompt an LLM with numbered passages, parse citations.

:func:`answer` is retrieval-augmented generation over a :class:`~hyperrag_fast.retriever.Retriever`;
:func:`zero_shot` is the no-retrieval baseline row. The prompt asks for a concise answer
citing passage numbers like ``[1]``; cited numbers become :class:`Citation` records. When the
model cites nothing, every shown chunk counts as used and ``cited_explicitly`` is False.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from .llm.client import ChatClient, ChatResult
from .records import chunk_passage
from .retriever import QueryOptions, RetrievalResult, RetrievedChunk, Retriever

#: bump when the prompts change: answer caches are keyed by it.
PROMPT_VERSION = "answer-v1"
DEFAULT_MAX_CONTEXT_CHARS = 12_000
MIN_PASSAGE_CHARS = 80  # a passage cut shorter than this is left out instead

SYSTEM_RAG = (
    "You answer questions using only the numbered passages provided. "
    "Answer concisely: give the answer itself in a few words, with no explanation. "
    "Cite the passage numbers you used in square brackets after the answer, like [1] or [1][3]. "
    "If the passages do not contain the answer, give your best short answer anyway.")
SYSTEM_ZERO_SHOT = (
    "You answer questions from your own knowledge. Answer concisely: give the answer "
    "itself in a few words, with no explanation.")

_CITE = re.compile(r"\[\s*(?:passages?\s*)?(\d+(?:\s*(?:,|;|-|–|and)\s*\d+)*)\s*\]", re.I)


@dataclass(frozen=True)
class Citation:
    """A cited chunk and the passage number it had in the prompt (1-based)."""

    chunk_id: str
    doc_id: str
    title: str
    start: int
    end: int
    passage: int


@dataclass
class Answer:
    """A generated answer. ``text`` is the model's reply; ``short`` is it without citation
    markers (what metrics score). ``chunks_used`` are the cited chunk ids, or every shown
    chunk when the reply cites none (``cited_explicitly`` False). ``invalid_citations``
    holds cited numbers that name no shown passage."""

    text: str
    short: str
    citations: list[Citation]
    cited_explicitly: bool
    chunks_used: list[str]
    usage: dict[str, int] | None
    retrieval: RetrievalResult | None
    model: str
    finish_reason: str | None = None
    invalid_citations: list[int] = field(default_factory=list)
    n_passages_shown: int = 0
    context_truncated: bool = False
    graph_context: dict[str, Any] | None = None
    prompt_version: str = PROMPT_VERSION

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (retrieval as chunk metadata and timings, no texts)."""
        r = self.retrieval
        return {
            "answer": self.text, "short": self.short, "model": self.model,
            "citations": [vars(c) for c in self.citations],
            "cited_explicitly": self.cited_explicitly, "chunks_used": self.chunks_used,
            "invalid_citations": self.invalid_citations, "usage": self.usage,
            "finish_reason": self.finish_reason, "n_passages_shown": self.n_passages_shown,
            "context_truncated": self.context_truncated, "graph_context": self.graph_context,
            "prompt_version": self.prompt_version,
            "retrieval": None if r is None else {
                "timings": r.timings,
                "chunks": [{k: v for k, v in vars(c).items() if k != "text"} for c in r.chunks]},
        }


# ------------------------------------------------------------------ prompt
def select_context(chunks: Sequence[RetrievedChunk],
                   max_context_chars: int) -> tuple[list[tuple[RetrievedChunk, str]], bool]:
    """Passages in rank order within ``max_context_chars`` (title + text). A passage that
    does not fit is cut to the remaining budget, or left out when under MIN_PASSAGE_CHARS.
    Returns ([(chunk, passage text)], whether anything was cut or left out)."""
    if max_context_chars < MIN_PASSAGE_CHARS:
        raise ValueError(f"max_context_chars must be >= {MIN_PASSAGE_CHARS}, "
                         f"got {max_context_chars}")
    out: list[tuple[RetrievedChunk, str]] = []
    left = max_context_chars
    for c in chunks:
        body = chunk_passage(c)
        if len(body) > left:
            if left >= MIN_PASSAGE_CHARS:
                out.append((c, body[:left].rstrip() + " ..."))
            return out, True
        out.append((c, body))
        left -= len(body)
    return out, False


def graph_facts(detail: dict[str, Any] | None) -> tuple[list[str], list[str], str | None]:
    """Kept entities/relations as text from a method's ``detail`` (CODA), and why none
    were used when the detail has them in a form we cannot render (e.g. bare ids)."""
    if not detail:
        return [], [], None
    found: dict[str, list[str]] = {}
    problem = None
    for key in ("entities", "relations"):
        items = detail.get(f"{key[:-1]}_texts", detail.get(key))
        if items is None:
            found[key] = []
            continue
        items = list(items)
        mask = detail.get(f"kept_{key}")
        if mask is not None and len(mask) == len(items):
            items = [x for x, keep in zip(items, mask) if bool(keep)]
        if all(isinstance(x, str) for x in items):
            found[key] = items
        else:
            found[key] = []
            problem = (f"detail[{key!r}] holds {type(items[0]).__name__} items, not text: "
                       f"left out of the prompt")
    return found["entities"], found["relations"], problem


def rag_messages(question: str, passages: Sequence[str], entities: Sequence[str] = (),
                 relations: Sequence[str] = ()) -> list[dict[str, str]]:
    """System + user messages: numbered passages, optional graph facts, the question."""
    if not passages:
        raise ValueError("no passages to answer from")
    parts = ["Passages:"] + [f"[{i}] {p}" for i, p in enumerate(passages, 1)]
    if entities:
        parts += ["", "Relevant entities:"] + [f"- {e}" for e in entities]
    if relations:
        parts += ["", "Relevant relations:"] + [f"- {r}" for r in relations]
    parts += ["", f"Question: {question}", "Answer (cite passages like [1]):"]
    return [{"role": "system", "content": SYSTEM_RAG},
            {"role": "user", "content": "\n".join(parts)}]


def zero_shot_messages(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_ZERO_SHOT},
            {"role": "user", "content": f"Question: {question}\nAnswer:"}]


# ------------------------------------------------------------------ parsing
def parse_citations(text: str, n_passages: int) -> tuple[list[int], list[int]]:
    """Cited passage numbers in first-cited order (valid ones, 1..n) and invalid ones.
    Understands [1], [1, 3], [1-3], [Passage 2]."""
    valid: list[int] = []
    invalid: list[int] = []
    for m in _CITE.finditer(text):
        nums: list[int] = []
        for part in re.split(r"\s*(?:,|;|and)\s*", m.group(1)):
            ends = [int(x) for x in re.split(r"\s*[-–]\s*", part) if x]
            if len(ends) == 2 and 0 < ends[1] - ends[0] <= n_passages:
                nums.extend(range(ends[0], ends[1] + 1))
            else:
                nums.extend(ends)
        for k in nums:
            bucket = valid if 1 <= k <= n_passages else invalid
            if k not in bucket:
                bucket.append(k)
    return valid, invalid


def strip_citations(text: str) -> str:
    """The reply without citation markers and without a leading "Answer:"."""
    s = _CITE.sub("", text)
    s = re.sub(r"^\s*answer\s*:\s*", "", s, flags=re.I)
    s = re.sub(r"\s+([.,;:!?])", r"\1", s)
    return re.sub(r"\s+", " ", s).strip()


def build_answer(result: ChatResult, model: str, shown: Sequence[RetrievedChunk],
                 retrieval: RetrievalResult | None, truncated: bool = False,
                 graph: dict[str, Any] | None = None) -> Answer:
    """An :class:`Answer` from a completion and the chunks shown as passages 1..n."""
    valid, invalid = parse_citations(result.text, len(shown))
    cites = [Citation(c.chunk_id, c.doc_id, c.title, c.start, c.end, k)
             for k in valid for c in (shown[k - 1],)]
    used = [c.chunk_id for c in cites] if cites else [c.chunk_id for c in shown]
    return Answer(result.text, strip_citations(result.text), cites, bool(cites), used,
                  result.usage, retrieval, model, result.finish_reason, invalid, len(shown),
                  truncated, graph)


# ------------------------------------------------------------------ entry points
@dataclass
class Prepared:
    """A RAG prompt ready to send, with what is needed to turn the reply into an Answer."""

    messages: list[dict[str, str]]
    shown: list[RetrievedChunk]
    retrieval: RetrievalResult | None
    truncated: bool = False
    graph: dict[str, Any] | None = None

    def finish(self, result: ChatResult, model: str) -> Answer:
        return build_answer(result, model, self.shown, self.retrieval, self.truncated,
                            self.graph)


def prepare(question: str, retrieval: RetrievalResult,
            max_context_chars: int = DEFAULT_MAX_CONTEXT_CHARS) -> Prepared:
    """The grounded prompt for ``question`` from a retrieval result."""
    if not retrieval.chunks:
        raise ValueError(f"retrieval returned no chunks for {question!r}")
    picked, truncated = select_context(retrieval.chunks, max_context_chars)
    ents, rels, problem = graph_facts(retrieval.detail)
    graph = None
    if ents or rels or problem:
        graph = {"entities": len(ents), "relations": len(rels), "problem": problem}
    msgs = rag_messages(question, [p for _, p in picked], ents, rels)
    return Prepared(msgs, [c for c, _ in picked], retrieval, truncated, graph)


def prepare_zero_shot(question: str) -> Prepared:
    return Prepared(zero_shot_messages(question), [], None)


def wants_detail(method: str) -> bool:
    """Methods whose detail may carry kept entities/relations for the prompt (CODA)."""
    return method.startswith("coda")


def answer(retriever: Retriever, question: str, client: ChatClient,
           options: QueryOptions | None = None, top_k: int | None = None,
           stream: bool = False, max_context_chars: int = DEFAULT_MAX_CONTEXT_CHARS,
           **params: Any) -> Answer:
    """Retrieve, prompt with numbered passages, answer with citations.

    ``top_k`` overrides ``options.top_k``; ``stream`` uses the streaming protocol (the
    reply is collected); ``params`` (e.g. ``temperature=0``) go to the chat call.
    Raises :class:`~hyperrag_fast.llm.client.LLMError` when the endpoint fails for good.
    """
    o = options or retriever.options
    if top_k is not None:
        o = o.with_top_k(top_k)
    res = retriever.retrieve(question, o, detail=wants_detail(o.method))
    p = prepare(question, res, max_context_chars)
    return p.finish(client.complete(p.messages, stream=stream, **params), client.model)


def zero_shot(question: str, client: ChatClient, stream: bool = False,
              **params: Any) -> Answer:
    """The no-retrieval baseline: the model answers from its own knowledge."""
    p = prepare_zero_shot(question)
    return p.finish(client.complete(p.messages, stream=stream, **params), client.model)


def messages_fingerprint(messages: Sequence[dict[str, str]]) -> str:
    """A stable text form of a message list (for cache keys)."""
    return json.dumps(list(messages), ensure_ascii=False, sort_keys=True)
