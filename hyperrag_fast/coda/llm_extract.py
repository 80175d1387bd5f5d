"""CODA's LLM steps at index time (CodaRAG §3.2, App. H.1): entity type discovery
(suggest -> refine), type-guided entity-relation extraction (LightRAG-style, JSON
output) and the fragmented-entity merge judge.

All calls go through :class:`JSONCaller` (the loop itself: :func:`~hyperrag_fast.llm.json_call.cached_json_call`): a :class:`~hyperrag_fast.llm.client.ChatClient`,
raw answers cached in a :class:`~hyperrag_fast.kvcache.KVCache` under
``cache_key(model, prompt_version, task, input)`` (a rerun makes no new request, and
parser fixes apply to cached answers), parsing through ``json_repair``, one
correction re-ask, and failures recorded (``.failures``), never fatal.
"""
from __future__ import annotations

import os
import random
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

from ..config import LLM_CONCURRENCY
from ..kvcache import KVCache, cache_key
from ..llm.client import ChatClient, run_bounded
from ..llm.json_call import cached_json_call
from ..llm.json_repair import repair_json
from ..records import Chunk
from .consolidate import KEEP, MERGE
from .raw_kg import DEFAULT_TYPE, ChunkKG, RawKG

T = TypeVar("T")
PROMPT_VERSION = "coda-h1"
CORRECTION = ("Your previous output could not be used: {reason}. Answer again with only "
              "the JSON described above, nothing else.")


@dataclass(frozen=True)
class Failure:
    """A recorded LLM failure (call error or unusable output after re-asks)."""

    reason: str


class JSONCaller:
    """Cached, repaired, re-asked JSON calls over a ChatClient (see the module docstring)."""

    def __init__(self, client: ChatClient, cache_path: str | os.PathLike,
                 prompt_version: str = PROMPT_VERSION, max_concurrency: int = LLM_CONCURRENCY,
                 reasks: int = 1, request_params: dict | None = None) -> None:
        if max_concurrency < 1 or reasks < 0:
            raise ValueError("max_concurrency must be >= 1 and reasks >= 0")
        self.client = client
        self.cache_path = os.fspath(cache_path)
        self.prompt_version = prompt_version
        self.max_concurrency = max_concurrency
        self.reasks = reasks
        self.request_params = {"temperature": 0} if request_params is None else request_params
        self.failures: list[tuple[str, str]] = []  # (task, reason)
        self.stats: Counter = Counter()
        self._lock = threading.Lock()

    def run(self, task: str, items: Sequence[tuple[str, list[dict]]],
            parse: Callable[[str], T]) -> list[T | Failure]:
        """``items`` = (input text for the cache key, messages); one result per item."""
        keys = [cache_key(self.client.model, self.prompt_version, task, t) for t, _ in items]
        with KVCache(self.cache_path, namespace="coda_llm") as cache:
            out = run_bounded(lambda i: self._one(cache, keys[i], items[i][1], parse),
                              list(range(len(items))), self.max_concurrency)
        res: list[T | Failure] = []
        for x in out:
            if isinstance(x, Exception):
                raise x  # a bug, not an LLM failure (those are Failure values)
            if isinstance(x, Failure):
                with self._lock:
                    self.failures.append((task, x.reason))
            res.append(x)
        return res

    def _count(self, **kw: int) -> None:
        with self._lock:
            self.stats.update(kw)

    def _one(self, cache: KVCache, key: str, messages: list[dict], parse):
        got, why = cached_json_call(self.client, cache, key, messages, parse, reasks=self.reasks,
                                    request_params=self.request_params, correction=CORRECTION,
                                    count=lambda name: self._count(**{name: 1}))
        return Failure(why) if why is not None else got


def _obj(raw: str) -> dict:
    data, _ = repair_json(raw)
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    return data


# -------------------------------------------------------------- type discovery
SUGGEST_PROMPT = """---Goal---
Suggest entity types for knowledge-graph extraction from the document below.
1. Analyze document content, structural elements, and domain-specific patterns.
2. Identify recurring entity categories, their contextual roles, and relationships.
3. Propose non-overlapping and domain-appropriate entity types that improve extraction \
coverage with concise explanations.
Return only JSON: {"types": [{"name": "type name", "description": "short explanation"}]}"""

REFINE_PROMPT = """---Goal---
Refine the candidate entity types below into one shared inventory.
1. Identify duplicate or highly overlapping entity types based on semantic similarity.
2. Consolidate redundant types while preserving meaningful domain-specific distinctions.
3. Produce a concise and well-balanced schema that reduces redundancy while maintaining coverage.
Return only JSON: {"types": [{"name": "type name", "description": "short explanation"}]}"""


def parse_types(raw: str) -> list[str]:
    """Type names (lowercased, unique, in order) of a {"types": [...]} answer."""
    items = _obj(raw).get("types")
    if not isinstance(items, list):
        raise ValueError("'types' must be a list")
    out: list[str] = []
    for it in items:
        name = it.get("name") if isinstance(it, dict) else it
        if isinstance(name, str) and name.strip() and name.strip().lower() not in out:
            out.append(name.strip().lower())
    if not out:
        raise ValueError("no type names")
    return out


def discover_types(caller: JSONCaller, texts: Sequence[str], n_samples: int = 8,
                   seed: int = 0, max_chars: int = 4000) -> list[str]:
    """Suggest types on a document sample, then refine them into one inventory
    (CodaRAG §3.2, H.1.1). A failed refine falls back to the suggestions ranked by
    frequency; no usable suggestion gives ``[]`` (extraction is then unguided)."""
    idx = sorted(random.Random(seed).sample(range(len(texts)), min(n_samples, len(texts))))
    sugg = caller.run("suggest_types", [
        (texts[i][:max_chars], [{"role": "system", "content": SUGGEST_PROMPT},
                                {"role": "user", "content": texts[i][:max_chars]}]) for i in idx],
        parse_types)
    counts = Counter(t for s in sugg if not isinstance(s, Failure) for t in s)
    if not counts:
        return []
    listing = "\n".join(f"- {t} (suggested {n}x)" for t, n in sorted(counts.items()))
    (ref,) = caller.run("refine_types", [(listing, [{"role": "system", "content": REFINE_PROMPT},
                                                    {"role": "user", "content": listing}])],
                        parse_types)
    return [t for t, _ in counts.most_common()] if isinstance(ref, Failure) else ref


# ------------------------------------------------------------------ extraction
EXTRACT_PROMPT = """---Goal---
Given a text and a list of entity types, identify all entities of those types in the \
text and all relationships among the identified entities.
For each entity: name (complete name as in the text), type (one of: {types}), \
description (its attributes and activities as stated in the text).
For each relationship between two entities that are clearly related: source, target \
(entity names), description (why they are related), keywords (high-level words \
summarising the relationship), strength (a number from 1 to 10).
Return only JSON: {{"entities": [{{"name": "", "type": "", "description": ""}}], \
"relationships": [{{"source": "", "target": "", "description": "", "keywords": "", "strength": 1}}]}}"""


def parse_kg(raw: str) -> ChunkKG:
    """A ChunkKG from an extraction answer; invalid entries are dropped, an answer
    with neither valid entities nor relations is unusable (ValueError)."""
    d = _obj(raw)
    ents, rels = [], []
    for e in d.get("entities") or []:
        if isinstance(e, dict) and isinstance(e.get("name"), str) and e["name"].strip():
            typ = e.get("type") if isinstance(e.get("type"), str) and e["type"].strip() else DEFAULT_TYPE
            desc = e.get("description") if isinstance(e.get("description"), str) else ""
            ents.append((e["name"].strip(), typ.strip().lower(), desc.strip()))
    for r in d.get("relationships") or d.get("relations") or []:
        if not isinstance(r, dict):
            continue
        s, t = r.get("source"), r.get("target")
        if not (isinstance(s, str) and isinstance(t, str) and s.strip() and t.strip()):
            continue
        try:
            w = float(r.get("strength", 1.0))
        except (TypeError, ValueError):
            w = 1.0
        kw = r.get("keywords", "")
        kw = ", ".join(map(str, kw)) if isinstance(kw, list) else str(kw or "")
        desc = r.get("description") if isinstance(r.get("description"), str) else ""
        rels.append((s.strip(), t.strip(), desc.strip(), kw.strip(), w if w > 0 else 1.0))
    if not ents and not rels:
        raise ValueError("no valid entity or relationship")
    return ChunkKG(tuple(ents), tuple(rels))


class LLMKGExtractor:
    """Type-guided entity-relation extraction per chunk (CodaRAG §3.2, H.1.2)."""

    def __init__(self, caller: JSONCaller, types: Sequence[str] = ()) -> None:
        self.caller = caller
        self.types = list(types)
        self.name = f"coda-llm:{caller.client.model}:{caller.prompt_version}"

    def extract(self, chunks: Sequence[Chunk]) -> list[ChunkKG]:
        """One ChunkKG per chunk; failures carry ``error`` (recorded, not fatal)."""
        sys_msg = EXTRACT_PROMPT.format(types=", ".join(self.types) or "any suitable type")
        task = "extract:" + "|".join(self.types)
        got = self.caller.run(task, [(c.text, [{"role": "system", "content": sys_msg},
                                               {"role": "user", "content": f"Text:\n{c.text}"}])
                                     for c in chunks], parse_kg)
        return [ChunkKG(error=g.reason) if isinstance(g, Failure) else g for g in got]


# ---------------------------------------------------------------- merge judge
JUDGE_PROMPT = """---Goal---
Decide whether two entity records refer to the same real-world entity.
1. Compare names, types and descriptions.
2. Enforce strict matching criteria by prioritizing proper noun consistency and avoiding \
merges based on superficial similarity.
3. Perform merging only when there is high confidence they refer to the same real-world \
entity; otherwise keep them distinct.
Return only JSON: {"same_entity": true or false, "reason": "one sentence"}"""


def parse_judgement(raw: str) -> tuple[str, str]:
    d = _obj(raw)
    same = d.get("same_entity")
    if not isinstance(same, bool):
        raise ValueError("'same_entity' must be true or false")
    reason = d.get("reason") if isinstance(d.get("reason"), str) else ""
    return (MERGE if same else KEEP), ("llm: " + reason).strip()


class LLMMergeJudge:
    """The paper's LLM judge for gated candidate pairs (CodaRAG §3.2, H.1.3); a failed
    judgement keeps the pair apart, with the failure as its reason."""

    def __init__(self, caller: JSONCaller) -> None:
        self.caller = caller
        self.name = f"llm-judge:{caller.client.model}:{caller.prompt_version}"

    def judge(self, kg: RawKG, pairs: Sequence[tuple[int, int, float]]) -> list[tuple[str, str]]:
        items = []
        for i, j, _ in pairs:
            a, b = sorted((kg.entity_text(i), kg.entity_text(j)))
            text = f"Entity A: {a}\nEntity B: {b}"
            items.append((text, [{"role": "system", "content": JUDGE_PROMPT},
                                 {"role": "user", "content": text}]))
        got = self.caller.run("merge_judge", items, parse_judgement)
        return [(KEEP, f"judge failed: {g.reason}") if isinstance(g, Failure) else g for g in got]

