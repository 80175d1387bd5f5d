"""CODA's LLM steps at query time (CodaRAG §3.3 entry finding, §3.4 interference
elimination; App. H.2.1, H.2.3), through the cached :class:`~.llm_extract.JSONCaller`.
A failed call degrades gracefully: no keywords (entry finding falls back to the query
embedding) or no filtering (everything kept); the failure is recorded on the caller.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .llm_extract import Failure, JSONCaller, _obj

KEYWORDS_PROMPT = """---Goal---
Extract query-related cues from the user query for retrieval.
1. Identify high-level keywords covering overarching concepts or themes.
2. Identify low-level keywords corresponding to specific entities, terms, or detailed aspects.
3. Produce concise and meaningful keyword sets derived strictly from the query for retrieval guidance.
Return only JSON: {"high_level_keywords": [], "low_level_keywords": []}"""

FILTER_PROMPT = """---Goal---
Refine retrieved evidence for the query: suppress irrelevant or ambiguous items while \
preserving potentially useful supporting information.
Return only JSON with the numbers of the items to keep: \
{"keep_entities": [numbers], "keep_relations": [numbers]}"""


def _strings(x) -> list[str]:
    if not isinstance(x, list):
        raise ValueError("keyword lists must be arrays")
    return [s.strip() for s in x if isinstance(s, str) and s.strip()]


def parse_keywords(raw: str) -> tuple[list[str], list[str]]:
    d = _obj(raw)
    return _strings(d.get("low_level_keywords", [])), _strings(d.get("high_level_keywords", []))


class LLMKeywords:
    """LightRAG low/high-level keyword extraction: ``keywords(query) -> (low, high)``."""

    def __init__(self, caller: JSONCaller) -> None:
        self.caller = caller

    def keywords(self, query: str) -> tuple[list[str], list[str]]:
        (got,) = self.caller.run("keywords", [(query, [
            {"role": "system", "content": KEYWORDS_PROMPT},
            {"role": "user", "content": f"Query: {query}"}])], parse_keywords)
        return ([], []) if isinstance(got, Failure) else got


def _ids(x, n: int) -> np.ndarray:
    if not isinstance(x, list):
        raise ValueError("keep lists must be arrays of item numbers")
    keep = np.zeros(n, bool)
    for v in x:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 1 <= int(v) <= n:
            keep[int(v) - 1] = True
    return keep


class LLMInterferenceFilter:
    """The interference-elimination filter: items are numbered from 1 in the prompt;
    the answer lists the numbers to keep. A failed call keeps everything."""

    def __init__(self, caller: JSONCaller) -> None:
        self.caller = caller

    def filter(self, query: str, entities: Sequence[str], relations: Sequence[str]
               ) -> tuple[np.ndarray, np.ndarray]:
        ne, nr = len(entities), len(relations)
        body = (f"Query: {query}\n\nEntities:\n"
                + "\n".join(f"{i + 1}. {t}" for i, t in enumerate(entities))
                + "\n\nRelations:\n" + "\n".join(f"{i + 1}. {t}" for i, t in enumerate(relations)))

        def parse(raw: str):
            d = _obj(raw)
            return _ids(d.get("keep_entities", []), ne), _ids(d.get("keep_relations", []), nr)

        (got,) = self.caller.run("eliminate", [(body, [
            {"role": "system", "content": FILTER_PROMPT},
            {"role": "user", "content": body}])], parse)
        if isinstance(got, Failure):
            return np.ones(ne, bool), np.ones(nr, bool)
        return got
