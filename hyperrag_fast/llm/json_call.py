"""One cached ask -> parse -> re-ask loop for LLM calls whose answer must parse.

The raw answers of one request are cached under its key (a rerun makes no new request,
and parser fixes apply to cached answers); an answer that does not parse is sent back
with a correction message, up to ``reasks`` times. Failures are returned, never raised.
"""
from __future__ import annotations

import json
from typing import Callable, TypeVar

from .client import ChatClient, LLMError

T = TypeVar("T")

CORRECTION = ("Your previous output could not be used: {reason}. Answer again with only "
              "the JSON described above, nothing else.")


def cached_json_call(client: ChatClient, cache, key: str, messages: list[dict],
                     parse: Callable[[str], T], *, reasks: int = 1,
                     request_params: dict | None = None, correction: str = CORRECTION,
                     count: Callable[[str], None] = lambda name: None,
                     errors: tuple[type[Exception], ...] = (ValueError, TypeError, KeyError),
                     retry_failures: bool = False) -> tuple[T | None, str | None]:
    """(parsed answer, None) or (None, why it failed). ``cache``: a
    :class:`~hyperrag_fast.kvcache.KVCache` (``get``/``put`` of bytes); ``count`` is
    told "cache_hits" and "calls"; ``retry_failures`` re-asks when the cached answers
    were all unusable (else that failure is reproduced from the cache)."""
    cached = cache.get(key)
    raws: list[str] = json.loads(cached)["raw"] if cached else []
    if cached:
        count("cache_hits")
    if retry_failures and len(raws) > reasks:
        raws = []
    reason = ""
    for attempt in range(reasks + 1):
        if attempt >= len(raws):
            try:
                r = client.complete(messages, **(request_params or {}))
            except LLMError as e:
                return None, f"LLM call failed: {e}"
            count("calls")
            raws = raws[:attempt] + [r.text]
            cache.put(key, json.dumps({"raw": raws}).encode("utf-8"))
        try:
            return parse(raws[attempt]), None
        except errors as e:
            reason = str(e) or type(e).__name__
            messages = messages + [{"role": "assistant", "content": raws[attempt]},
                                   {"role": "user", "content": correction.format(reason=reason)}]
    return None, f"unusable output after {reasks + 1} attempts: {reason}"
