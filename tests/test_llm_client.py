"""ChatClient: retries, Retry-After, timeouts, errors, streaming, bounded concurrency."""
from __future__ import annotations

import pytest

from hyperrag_fast.llm.client import ChatClient, ChatResult, LLMError, RetryPolicy, run_bounded
from openai_server import Drop, Raw, Slow, Status, Text

FAST = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01)
MSG = [{"role": "user", "content": "hello"}]


def client(srv, **kw) -> ChatClient:
    kw.setdefault("retry", FAST)
    kw.setdefault("timeout", 5.0)
    return ChatClient(model="m", base_url=srv.base_url, api_key="k", **kw)


def test_plain_completion_and_usage(openai_server):
    r = client(openai_server).complete(MSG)
    assert r == ChatResult("echo: hello", r.usage, "stop")
    assert r.usage["total_tokens"] == r.usage["prompt_tokens"] + r.usage["completion_tokens"]
    body = openai_server.chat.requests[0]
    assert body["model"] == "m" and body["messages"] == MSG


def test_default_params_and_overrides_are_sent(openai_server):
    c = client(openai_server, temperature=0.5)
    c.complete(MSG, max_tokens=7)
    body = openai_server.chat.requests[0]
    assert body["temperature"] == 0.5 and body["max_tokens"] == 7


@pytest.mark.parametrize("failure", [Status(429), Status(500), Status(503), Drop(),
                                     Status(408)])
def test_retries_transient_errors_then_succeeds(openai_server, failure):
    openai_server.chat.enqueue(failure, failure, "fine")
    assert client(openai_server).complete(MSG).text == "fine"
    assert openai_server.chat.count == 3


def test_retry_after_is_honoured(openai_server):
    """The wait between attempts goes through the client's injected clock (no wall time)."""
    openai_server.chat.enqueue(Status(429, retry_after=30), "ok")
    waits = []
    assert client(openai_server, sleep=waits.append,
                  retry=RetryPolicy(max_attempts=2, base_delay=0.001, max_retry_after=60)
                  ).complete(MSG).text == "ok"
    assert waits == [30.0]


def test_retry_after_is_capped(openai_server):
    openai_server.chat.enqueue(Status(429, retry_after=100), "ok")
    pol = RetryPolicy(max_attempts=2, base_delay=0.001, max_retry_after=0.05)
    waits = []
    assert client(openai_server, retry=pol, sleep=waits.append).complete(MSG).text == "ok"
    assert waits == [0.05]


def test_gives_up_after_max_attempts_with_clear_error(openai_server):
    openai_server.chat.responder = lambda m: Status(500, "boom")
    with pytest.raises(LLMError, match=r"after 4 attempts.*HTTP 500.*boom") as ei:
        client(openai_server).complete(MSG)
    assert ei.value.attempts == 4 and ei.value.status == 500 and ei.value.retryable
    assert openai_server.chat.count == 4


@pytest.mark.parametrize("code", [400, 401, 404])
def test_non_retryable_status_fails_at_once(openai_server, code):
    openai_server.chat.enqueue(Status(code, "nope"))
    with pytest.raises(LLMError, match=f"non-retryable.*HTTP {code}"):
        client(openai_server).complete(MSG)
    assert openai_server.chat.count == 1


def test_timeout_on_slow_response(openai_server):
    """A reply that never comes (the server holds it until it stops) times out each
    attempt; the retry waits go through the injected clock."""
    openai_server.chat.responder = lambda m: Slow(600, "late")
    pol = RetryPolicy(max_attempts=2, base_delay=0.001)
    waits = []
    with pytest.raises(LLMError, match="after 2 attempts.*Timeout"):
        client(openai_server, timeout=1.0, retry=pol, sleep=waits.append).complete(MSG)
    assert openai_server.chat.count == 2 and len(waits) == 1


def test_slow_then_fast_recovers(openai_server):
    openai_server.chat.enqueue(Slow(600, "late"), "quick")
    waits = []
    assert client(openai_server, timeout=1.0, sleep=waits.append).complete(MSG).text == "quick"
    assert len(waits) == 1


def test_malformed_protocol_body_is_a_clear_error(openai_server):
    openai_server.chat.enqueue(Raw("{not json"))
    with pytest.raises(LLMError, match="non-retryable"):
        client(openai_server).complete(MSG)
    openai_server.chat.enqueue(Raw("<html>oops</html>", content_type="text/html"))
    with pytest.raises(LLMError, match="malformed chat response"):
        client(openai_server).complete(MSG)


def test_stream_is_collected(openai_server):
    openai_server.chat.enqueue(Text("a longer streamed answer", finish_reason="length"))
    r = client(openai_server).complete(MSG, stream=True)
    assert r.text == "a longer streamed answer" and r.finish_reason == "length"
    assert r.usage and r.usage["completion_tokens"] == 4
    assert openai_server.chat.requests[0]["stream"] is True


def test_config_from_env_and_clear_errors(openai_server, monkeypatch):
    for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(ValueError, match="no LLM endpoint configured"):
        ChatClient(model="m")
    with pytest.raises(ValueError, match="no model configured"):
        ChatClient(base_url=openai_server.base_url)
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    c = ChatClient(retry=FAST)  # a local endpoint needs no key
    assert c.model == "env-model" and c.complete(MSG).text == "echo: hello"
    assert openai_server.chat.requests[0]["model"] == "env-model"


def test_complete_many_keeps_order_results_and_errors(openai_server):
    def responder(messages):
        text = messages[-1]["content"]
        return Status(400, "bad item") if text == "q3" else f"a-{text}"

    openai_server.chat.responder = responder
    seen = []
    out = client(openai_server).complete_many(
        [[{"role": "user", "content": f"q{i}"}] for i in range(8)], max_concurrency=3,
        progress=seen.append)
    assert isinstance(out[3], LLMError)
    assert [r.text for i, r in enumerate(out) if i != 3] == [f"a-q{i}" for i in range(8) if i != 3]
    assert sum(seen) == 8


def test_complete_many_respects_concurrency_bound(openai_server):
    """Each reply waits until three requests are in flight (a barrier, not a delay), so
    the bound is reached every round and never passed, however slow the machine."""
    import threading

    barrier = threading.Barrier(3, timeout=60)

    def responder(messages):
        barrier.wait()
        return "echo: hello"

    openai_server.chat.responder = responder
    out = client(openai_server, timeout=120).complete_many([MSG] * 12, max_concurrency=3)
    assert all(r.text == "echo: hello" for r in out)
    assert openai_server.chat.max_in_flight == 3


def test_run_bounded_validates_and_handles_empty():
    assert run_bounded(lambda x: x, [], 2) == []
    with pytest.raises(ValueError):
        run_bounded(lambda x: x, [1], 0)


def test_retry_policy_backoff_bounds():
    pol = RetryPolicy(base_delay=1.0, max_delay=4.0)
    for attempt, hi in [(1, 1.0), (2, 2.0), (3, 4.0), (6, 4.0)]:
        for _ in range(20):
            assert hi / 2 <= pol.backoff(attempt) <= hi
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)


def test_server_records_errors_models_and_mentions():
    import urllib.request

    from openai_server import OpenAIServer

    with OpenAIServer() as srv:
        with urllib.request.urlopen(srv.base_url + "/models", timeout=5) as r:
            assert b"test-model" in r.read()
        srv.chat.responder = lambda m: 1 / 0
        with pytest.raises(LLMError, match="non-retryable.*HTTP 500|after 4 attempts"):
            client(srv).complete(MSG)
        assert srv.errors and "ZeroDivisionError" in srv.errors[0]
        from hyperrag_fast.embed.openai_embed import OpenAIEmbedder

        OpenAIEmbedder(srv.base_url, "e", "k").embed(["alpha", "beta"])
        assert srv.embeddings.count_mentioning("beta") == 1
        srv.chat.reset()
        assert srv.chat.count == 0 and srv.chat.max_in_flight == 0
