"""A chat client over any OpenAI-compatible endpoint, with our own retry policy.

The ``openai`` client's built-in retries are disabled (``max_retries=0``): retries
(exponential backoff with jitter, Retry-After honoured, bounded attempts) happen in
:func:`call_with_retry`, which the embedding client reuses.
"""
from __future__ import annotations

import email.utils
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

from ..config import LLM_CONCURRENCY, LLM_TIMEOUT_S

T = TypeVar("T")
R = TypeVar("R")

#: progress callback: called with the number of items just finished.
Progress = Callable[[int], None]

#: HTTP statuses worth retrying (as the openai client itself does).
RETRYABLE_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))


class LLMError(RuntimeError):
    """A call that failed for good: non-retryable, or out of attempts."""

    def __init__(self, message: str, *, attempts: int, status: int | None = None,
                 retryable: bool = False) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.status = status
        self.retryable = retryable


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries: delay_k = min(max_delay, base_delay * 2**k), jittered to
    [delay/2, delay]; a server's Retry-After (capped at ``max_retry_after``) wins
    when longer."""

    max_attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.base_delay < 0 or self.max_delay < 0 or self.max_retry_after < 0:
            raise ValueError("retry delays must be >= 0")

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """Jittered delay before retry number ``attempt`` (1-based)."""
        d = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return d * (0.5 + 0.5 * (rng or random).random())


@dataclass(frozen=True)
class ChatResult:
    """One completion: text, token usage (dict or None), finish reason."""

    text: str
    usage: dict[str, int] | None = None
    finish_reason: str | None = None


# ------------------------------------------------------------------ retrying
def _classify(exc: BaseException) -> tuple[bool, int | None, float | None]:
    """(retryable, HTTP status, Retry-After seconds) for an exception."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        return status in RETRYABLE_STATUS, status, _retry_after(exc.response.headers)
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True, None, None
    return False, None, None


def _retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if ra is None:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def call_with_retry(fn: Callable[[], T], policy: RetryPolicy, what: str = "request",
                    sleep: Callable[[float], None] = time.sleep) -> T:
    """Call ``fn`` until it succeeds, retrying retryable openai errors per ``policy``.

    Raises :class:`LLMError` (chained to the last error) when an error is not
    retryable or the attempts run out.
    """
    for attempt in range(1, policy.max_attempts + 1):
        try:
            return fn()
        except LLMError as exc:
            exc.attempts = attempt
            raise
        except Exception as exc:
            retryable, status, retry_after = _classify(exc)
            desc = f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "") + f": {exc}"
            if not retryable:
                raise LLMError(f"{what} failed with a non-retryable error: {desc}",
                               attempts=attempt, status=status) from exc
            if attempt == policy.max_attempts:
                raise LLMError(f"{what} failed after {attempt} attempts; last error: {desc}",
                               attempts=attempt, status=status, retryable=True) from exc
            delay = policy.backoff(attempt)
            if retry_after is not None:
                delay = max(delay, min(retry_after, policy.max_retry_after))
            sleep(delay)
    raise AssertionError("unreachable")


def run_bounded(fn: Callable[[T], R], items: Sequence[T], max_concurrency: int = LLM_CONCURRENCY,
                progress: Progress | None = None) -> list[R | Exception]:
    """``fn`` over ``items`` on at most ``max_concurrency`` threads, in input order.

    An item whose call raised holds the exception instead; finished results are
    never lost. ``progress(1)`` is called as each item finishes.
    """
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
    out: list[Any] = [None] * len(items)
    if not items:
        return out
    lock = threading.Lock()

    def one(i: int) -> None:
        try:
            out[i] = fn(items[i])
        except Exception as exc:  # per-item failure, reported in place
            out[i] = exc

    with ThreadPoolExecutor(max_workers=min(max_concurrency, len(items))) as pool:
        for fut in as_completed([pool.submit(one, i) for i in range(len(items))]):
            fut.result()
            if progress is not None:
                with lock:
                    progress(1)
    return out


# -------------------------------------------------------------------- client
def resolve_settings(base_url: str | None, api_key: str | None,
                     model: str | None) -> tuple[str | None, str, str]:
    """Arguments, else OPENAI_BASE_URL / OPENAI_API_KEY / OPENAI_MODEL.

    A local endpoint (a base URL) may need no key: the placeholder ``"no-key"``
    is sent then. No key and no base URL is an error, as is no model.
    """
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
    model = model or os.environ.get("OPENAI_MODEL") or None
    if api_key is None and base_url is None:
        raise ValueError(
            "no LLM endpoint configured: pass api_key= or base_url= "
            "(or set OPENAI_API_KEY / OPENAI_BASE_URL)")
    if not model:
        raise ValueError("no model configured: pass model= (or set OPENAI_MODEL)")
    return base_url, api_key or "no-key", model


def make_openai(base_url: str | None, api_key: str, timeout: float) -> Any:
    """An ``openai.OpenAI`` with its own retries off (our policy retries)."""
    import openai

    if timeout <= 0:
        raise ValueError(f"timeout must be > 0, got {timeout}")
    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)


class ChatClient:
    """Chat completions with retries, a per-request timeout and bounded concurrency.
    ``sleep`` waits between attempts (the clock: tests pass one that records the delays)."""

    def __init__(self, model: str | None = None, base_url: str | None = None,
                 api_key: str | None = None, timeout: float = LLM_TIMEOUT_S,
                 retry: RetryPolicy | None = None, sleep: Callable[[float], None] = time.sleep,
                 **default_params: Any) -> None:
        self.base_url, api_key, self.model = resolve_settings(base_url, api_key, model)
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.sleep = sleep
        self.default_params = default_params
        self._client = make_openai(self.base_url, api_key, timeout)

    def __repr__(self) -> str:
        return f"ChatClient(model={self.model!r}, base_url={self.base_url!r})"

    def complete(self, messages: Sequence[dict], **params: Any) -> ChatResult:
        """One completion (``stream=True`` is collected into one result)."""
        if not messages:
            raise ValueError("messages must be non-empty")
        kw = {**self.default_params, **params}
        stream = bool(kw.pop("stream", False))
        return call_with_retry(lambda: self._once(list(messages), stream, kw), self.retry,
                               what=f"chat completion ({self.model})", sleep=self.sleep)

    def complete_many(self, messages_list: Sequence[Sequence[dict]], max_concurrency: int = LLM_CONCURRENCY,
                      progress: Progress | None = None,
                      **params: Any) -> list[ChatResult | Exception]:
        """``complete`` for each message list, in order; a failed item holds its exception."""
        return run_bounded(lambda m: self.complete(m, **params), list(messages_list),
                           max_concurrency, progress)

    def _once(self, messages: list, stream: bool, kw: dict) -> ChatResult:
        create = self._client.chat.completions.create
        if stream:
            kw = {**kw, "stream_options": {"include_usage": True, **kw.get("stream_options", {})}}
            return _collect_stream(create(model=self.model, messages=messages, stream=True, **kw))
        resp = create(model=self.model, messages=messages, **kw)
        choices = getattr(resp, "choices", None)
        if not choices:
            raise LLMError(f"malformed chat response (no choices): {str(resp)[:200]!r}",
                           attempts=1)
        choice = choices[0]
        content = choice.message.content
        if content is None:
            raise LLMError(f"chat response has no text content "
                           f"(finish_reason={choice.finish_reason!r})", attempts=1)
        return ChatResult(content, _usage(resp), choice.finish_reason)


def _usage(obj: Any) -> dict[str, int] | None:
    u = getattr(obj, "usage", None)
    if u is None:
        return None
    return {k: int(getattr(u, k)) for k in ("prompt_tokens", "completion_tokens", "total_tokens")
            if isinstance(getattr(u, k, None), int)}


def _collect_stream(stream: Any) -> ChatResult:
    parts: list[str] = []
    finish = usage = None
    for chunk in stream:
        if getattr(chunk, "usage", None) is not None:
            usage = _usage(chunk)
        for ch in getattr(chunk, "choices", None) or []:
            if ch.delta is not None and ch.delta.content:
                parts.append(ch.delta.content)
            if ch.finish_reason:
                finish = ch.finish_reason
    return ChatResult("".join(parts), usage, finish)
