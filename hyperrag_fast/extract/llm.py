"""LLM extraction of topic segments with entity descriptions (STITCH-RAG §3.2, App. A).

The LLM returns a JSON array of ``{"reference", "knowledge", "entities"}`` records.
Validation, per record: ``knowledge`` (the topic sentence) and ``reference`` must be
non-empty strings and ``entities`` an object, else the record is dropped (counted).
Per entity: the name must be a non-empty string and the description a string, else
the entity is dropped (counted). An empty description is valid: the paper's prompt
asks for ``""`` when the text gives none. A segment with no (valid) entities is
kept: in the paper every segment is a hyperedge and each entity entry a node, and
the contract does not require entities. An output is unusable when it does not
parse (after :mod:`json_repair`) or has no valid record; the LLM is then re-asked
with a correction message, and after that the chunk is a recorded failure.

Raw LLM texts are cached on disk (one commit per answer) under
``cache_key(model, prompt_version, chunk text)``, so a rerun repeats no finished
call and parser fixes apply to cached answers. Bump ``prompt_version`` whenever
the prompt changes.
"""
from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from typing import Any, Sequence

from ..config import LLM_CONCURRENCY
from ..kvcache import KVCache, cache_key
from ..llm.client import ChatClient, run_bounded
from ..llm.json_call import cached_json_call
from ..llm.json_repair import repair_json
from ..records import Chunk, Extraction, Segment
from .base import Progress

__all__ = ["LLMExtractor", "PROMPT_VERSION", "build_messages", "parse_segments"]

log = logging.getLogger(__name__)

PROMPT_VERSION = "stitch-a1"

SYSTEM_PROMPT = """---Goal---
Extract the knowledge expressed in the task text. Divide the text into self-contained \
knowledge segments; each segment covers one coherent claim or narrative thread. \
For each segment, return:
- reference: the supporting text span, copied from the task text.
- knowledge: one self-contained sentence describing the segment.
- entities: an object mapping each entity's complete name to its context-specific description.
Notes:
- Do not omit information stated in the task text.
- Each knowledge sentence must be understandable without additional context.
- Entity names are maximal noun phrases (New York City is one entity).
- Ground every description in the task text; the same entity in another segment \
gets a description of its role there.
- Use the complete entity name as the key and include that complete name in its \
non-empty description. If a description is absent or only repeats the name, use "".
- Return only valid JSON that can be parsed by JSON.parse(): no prose, no code fences.

---Output JSON format---
Return one or more objects in a JSON array following this structure:
[
  {
    "reference": "Original supporting text",
    "knowledge": "A self-contained knowledge statement.",
    "entities": {
      "Entity 1": "Entity 1 is described in the task text.",
      "Entity 2": "Entity 2 is described in the task text."
    }
  }
]"""

CORRECTION = ("Your previous output could not be used: {reason}. Answer again with only "
              "the JSON array described above, nothing else.")


def build_messages(text: str) -> list[dict]:
    """The extraction conversation for one chunk text."""
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"######################\nTask text:\n{text}\nOutput:"}]


def parse_segments(raw: str) -> tuple[tuple[Segment, ...], Counter]:
    """Valid segments of one raw LLM answer, and counts of what was repaired/dropped.

    Raises ``ValueError`` (with the reason) when the answer is unusable.
    """
    data, repairs = repair_json(raw, expect_array=True)
    counts: Counter = Counter()
    if repairs:
        counts["repaired_outputs"] += 1
    if not data:
        raise ValueError("empty JSON array (one or more segments are required)")
    segments, reasons = [], []
    for k, item in enumerate(data):
        reason = _record_problem(item)
        if reason:
            counts["dropped_segments"] += 1
            reasons.append(f"record {k}: {reason}")
            continue
        pairs: dict[str, str] = {}
        for name, desc in item["entities"].items():
            name = name.strip()
            if not name or not isinstance(desc, str) or name in pairs:
                counts["dropped_entities"] += 1
                continue
            pairs[name] = desc.strip()
        if not pairs:
            counts["segments_without_entities"] += 1
        segments.append(Segment(item["knowledge"].strip(), tuple(pairs.items())))
    if not segments:
        raise ValueError("no valid segment (" + "; ".join(reasons[:3]) + ")")
    return tuple(segments), counts


def _record_problem(item: Any) -> str | None:
    if not isinstance(item, dict):
        return f"expected an object, got {type(item).__name__}"
    for field in ("knowledge", "reference"):
        v = item.get(field)
        if not isinstance(v, str) or not v.strip():
            return f"'{field}' must be a non-empty string"
    if not isinstance(item.get("entities"), dict):
        return "'entities' must be an object of name -> description"
    return None


class LLMExtractor:
    """Extractor over a :class:`ChatClient` with an on-disk answer cache.

    ``reasks``: correction rounds after an unusable answer. ``retry_failures``:
    re-ask chunks whose cached answers were all unusable (else the failure is
    reproduced from the cache without a call). After :meth:`extract`,
    ``failures`` lists ``(chunk_id, reason)`` and ``stats`` counts calls, cache
    hits, repairs and dropped records of that call.
    """

    def __init__(self, client: ChatClient, cache_path: str | os.PathLike,
                 prompt_version: str = PROMPT_VERSION, max_concurrency: int = LLM_CONCURRENCY,
                 reasks: int = 1, retry_failures: bool = False,
                 request_params: dict | None = None) -> None:
        if max_concurrency < 1 or reasks < 0:
            raise ValueError("max_concurrency must be >= 1 and reasks >= 0")
        if not prompt_version:
            raise ValueError("prompt_version must be non-empty")
        self.client = client
        self.cache_path = os.fspath(cache_path)
        self.prompt_version = prompt_version
        self.max_concurrency = max_concurrency
        self.reasks = reasks
        self.retry_failures = retry_failures
        self.request_params = {"temperature": 0} if request_params is None else request_params
        self.name = f"llm:{client.model}:{prompt_version}"
        self.failures: list[tuple[str, str]] = []
        self.stats: Counter = Counter()
        self._lock = threading.Lock()

    def extract(self, chunks: Sequence[Chunk], progress: Progress | None = None
                ) -> list[Extraction]:
        """One Extraction per chunk, in order; unusable chunks carry ``error``.

        ``progress(n)`` is called (serialised, from worker threads) as chunks finish.
        Raises only for bugs (not LLM failures); finished answers stay cached.
        """
        self.failures, self.stats = [], Counter()
        keys = [cache_key(self.client.model, self.prompt_version, c.text) for c in chunks]
        groups: dict[str, list[Chunk]] = {}
        for k, c in zip(keys, chunks):
            groups.setdefault(k, []).append(c)  # equal texts: one call
        done: dict[str, Extraction] = {}

        with KVCache(self.cache_path, namespace="llm_extract") as cache:
            def one(key: str) -> Extraction:
                ex = self._one(cache, key, groups[key][0].text)
                with self._lock:
                    done[key] = ex
                    if progress is not None:
                        progress(len(groups[key]))
                return ex

            results = run_bounded(one, list(groups), self.max_concurrency)
        crash = next((r for r in results if isinstance(r, Exception)), None)
        if crash is not None:
            raise crash  # a bug, not an LLM failure; finished answers are cached

        out = []
        for k, c in zip(keys, chunks):
            ex = done[k]
            if ex.error is not None:
                self.failures.append((c.chunk_id, ex.error))
            out.append(ex)
        self.stats["failures"] = len(self.failures)
        if self.failures:
            log.warning("%s: %d of %d chunks failed extraction (see .failures); first: %s: %s",
                        self.name, len(self.failures), len(chunks), *self.failures[0])
        return out

    def _one(self, cache: KVCache, key: str, text: str) -> Extraction:
        if not text.strip():
            self._count(Counter(empty_chunks=1))
            return Extraction(())
        got, why = cached_json_call(
            self.client, cache, key, build_messages(text), parse_segments, reasks=self.reasks,
            request_params=self.request_params, correction=CORRECTION, errors=(ValueError,),
            count=lambda name: self._count(Counter({name: 1})),
            retry_failures=self.retry_failures)
        if got is None:
            return Extraction((), error=why)
        segments, counts = got
        self._count(counts)
        return Extraction(segments)

    def _count(self, counts: Counter) -> None:
        with self._lock:
            self.stats.update(counts)
