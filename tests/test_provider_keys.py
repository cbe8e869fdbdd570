"""A missing API key is reported as a missing key, before any connection is made.

A hosted API (``api.openai.com``, ``api.anthropic.com``, any public host) needs a key; a
server on this machine or the local network does not. Connection failures name the URL.
"""

from __future__ import annotations

import httpx
import pytest

from mainspring import Agent, Model, ModelRequest, ProviderError, UserMessage
from mainspring.providers.anthropic import AnthropicProvider
from mainspring.providers.keys import is_local_url
from mainspring.providers.openai import OpenAIProvider
from mainspring.signal import AbortSignal
from mainspring.testing import EventRecorder

REQUEST = ModelRequest(
    model=Model(provider="openai", id="m"), messages=(UserMessage(content="hi"),)
)


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:8080/v1",
        "http://127.0.0.1:11434/v1",
        "http://[::1]:8000",
        "http://192.168.1.20:8000/v1",
        "http://10.0.0.5/v1",
        "http://llm:8080/v1",
        "http://gpu-box.local/v1",
        "http://ollama.internal/v1",
        "http://llm.test/v1",
    ],
)
def test_local_servers_need_no_key(url: str) -> None:
    assert is_local_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://api.openai.com/v1",
        "https://api.anthropic.com",
        "https://openrouter.ai/api/v1",
        "http://8.8.8.8/v1",
        "not a url",
    ],
)
def test_public_servers_need_a_key(url: str) -> None:
    assert not is_local_url(url)


def refusing_transport(requests: list[httpx.Request]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(401)

    return httpx.MockTransport(handle)


async def failure(provider: object) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        async for _ in provider.stream(REQUEST, AbortSignal()):  # type: ignore[attr-defined]
            pass
    return info.value


@pytest.mark.parametrize(
    ("make", "variable", "table"),
    [
        (OpenAIProvider, "OPENAI_API_KEY", "[providers.openai]"),
        (AnthropicProvider, "ANTHROPIC_API_KEY", "[providers.anthropic]"),
    ],
)
async def test_a_missing_key_is_named_and_nothing_is_sent(
    monkeypatch: pytest.MonkeyPatch, make: type, variable: str, table: str
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    requests: list[httpx.Request] = []
    error = await failure(make(transport=refusing_transport(requests)))
    assert variable in error.message and table in error.message
    assert not error.retryable
    assert requests == []


async def test_a_local_server_is_asked_without_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    requests: list[httpx.Request] = []
    provider = OpenAIProvider("http://127.0.0.1:9/v1", transport=refusing_transport(requests))
    error = await failure(provider)
    assert len(requests) == 1 and "authorization" not in requests[0].headers
    assert "OPENAI_API_KEY" not in error.message


async def test_an_agent_run_reports_the_missing_key_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    agent = Agent(model="openai:gpt-4o-mini", autoload=False)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("hi")
    [end] = recorder.of_type("agent_end")
    assert end.reason == "error"
    assert end.detail is not None and "OPENAI_API_KEY is not set" in end.detail
    assert recorder.of_type("retry") == []


async def test_a_connection_failure_names_the_url() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    provider = OpenAIProvider(
        "http://127.0.0.1:9/v1", transport=httpx.MockTransport(refuse), timeout=1.0
    )
    error = await failure(provider)
    assert "http://127.0.0.1:9/v1/chat/completions" in error.message
