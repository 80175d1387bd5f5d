"""Offline evidence coverage for GraphRAG-Bench (docs/architecture.md §9, "Offline
evidence coverage"): no LLM, a stand-in for the benchmark's LLM-judged evidence recall,
validated against hand labels (``benchmarks/graphrag_bench_labels/``) and reported as
what it is.

An evidence statement is *covered* by a retrieved context when some window of
:data:`WINDOW` consecutive sentences of one retrieved passage holds at least
:data:`THRESHOLD` of the statement's content words **and every one of its names**
(tokens capitalised after the first, acronyms, numbers: :func:`name_words`). Content words: lower-cased
alphanumeric tokens of 3+ characters (or digits) outside a stop list, compared by
their first :data:`STEM` characters (a crude stemmer: ``characterized`` ~
``characteristic``, ``tumors`` ~ ``tumor``). A statement with no content word counts as
covered when its text occurs in the context. Window and stem were fixed before any
label was made; version 1 (threshold 0.7, no name rule: ``names=False,
threshold=THRESHOLD_V1``) was validated on 155 labels, and the threshold 0.6 and the
name rule (version 2, the default) were chosen on those labels' disagreements
(paraphrase verbs such as "located", "indicate" missing while the fact is stated; a
missing name such as "Housel" or "Lyonesse" while the other words are there) and then
validated on labels made afterwards (benchmarks/graphrag_bench_labels/README.md).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

WINDOW = 3
THRESHOLD = 0.6
THRESHOLD_V1 = 0.7
STEM = 5
NAMES = True

_TOKEN = re.compile(r"[a-z0-9]+")
_RAW = re.compile(r"[A-Za-z0-9]+")
_SENT = re.compile(r"(?<=[.!?;:])[\"'\u201d\u2019)\]]*\s+|\n+")
STOPWORDS = frozenset("""
a an the and or but nor of to in on at by for with from into onto upon over under about
above below between among through during before after as than then that this these those
there here which who whom whose what when where why how is are was were be been being am
has have had having do does did doing can could may might must shall should will would
it its it's he him his she her hers they them their theirs we us our you your i me my mine
not no yes also very such some any each every all both either neither other another more
most much many few several one ones own same so too just only even still yet again ever
if while because since although though whether upon out up down off said says say like
described describes describe referred refers refer known mentioned mentions mention called
including include includes included often typically usually may can associated
""".split())


def content_words(text: str) -> list[str]:
    """Stemmed content words of ``text`` in order, without repeats."""
    out: dict[str, None] = {}
    for t in _TOKEN.findall(text.lower()):
        if t in STOPWORDS or (len(t) < 3 and not t.isdigit()):
            continue
        out[t[:STEM]] = None
    return list(out)


def name_words(text: str) -> set[str]:
    """Stemmed content words of the names in ``text``: tokens capitalised after the first
    token, tokens with two or more capitals (acronyms), and numbers."""
    out: set[str] = set()
    for i, t in enumerate(_RAW.findall(text)):
        if (i > 0 and t[0].isupper()) or t.isdigit() or sum(c.isupper() for c in t) >= 2:
            out.update(content_words(t))
    return out


def sentences(passage: str) -> list[str]:
    """Sentences of a passage (split after . ! ? ; : and at line breaks)."""
    return [s for s in (x.strip() for x in _SENT.split(passage)) if s]


@dataclass(frozen=True)
class Coverage:
    """Per-statement verdict and the best window's share of the statement's content words."""

    covered: bool
    share: float


def windows(passages: Sequence[str], window: int = WINDOW) -> list[set[str]]:
    """Stemmed content-word sets of every ``window``-sentence window of every passage."""
    out = []
    for p in passages:
        sw = [set(content_words(s)) for s in sentences(p)]
        if not sw:
            continue
        for i in range(max(1, len(sw) - window + 1)):
            out.append(set().union(*sw[i:i + window]))
    return out


def statement_coverage(statement: str, wins: Sequence[set[str]], context: str = "",
                       threshold: float = THRESHOLD, names: bool = NAMES) -> Coverage:
    """Coverage of one statement by precomputed windows (:func:`windows`); ``share`` is
    the best window's share of content words (over windows holding every name when
    ``names``; 0 when none does)."""
    words = content_words(statement)
    if not words:
        hit = statement.strip().lower() in context.lower()
        return Coverage(hit, float(hit))
    need = name_words(statement) if names else set()
    best = max((sum(w in win for w in words) / len(words) for win in wins if need <= win),
               default=0.0)
    return Coverage(best >= threshold, best)


def evidence_coverage(statements: Sequence[str], passages: Sequence[str],
                      threshold: float = THRESHOLD, window: int = WINDOW,
                      names: bool = NAMES) -> list[Coverage]:
    """Coverage of each evidence statement by the retrieved ``passages``."""
    wins = windows(passages, window)
    ctx = "\n".join(passages)
    return [statement_coverage(s, wins, ctx, threshold, names) for s in statements]


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float:
    """Cohen's kappa of two binary raters (1.0 when both are constant and equal)."""
    n = len(a)
    if n == 0 or n != len(b):
        raise ValueError("kappa needs two equally long, non-empty label lists")
    po = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(map(bool, a)) / n, sum(map(bool, b)) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    return 1.0 if pe == 1.0 else (po - pe) / (1 - pe)
