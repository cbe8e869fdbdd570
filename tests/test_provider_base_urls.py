"""Base URLs are accepted with or without ``/v1``, and HTTP errors name the URL tried.

A server answers only on the path its API really has (``/v1/chat/completions`` for
OpenAI-compatible servers, ``/v1/messages`` for Anthropic) and 404 elsewhere, the way
llama.cpp and the hosted APIs do.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from mainspring import AbortSignal
from mainspring.messages import UserMessage
from mainspring.providers.anthropic import AnthropicProvider
from mainspring.providers.base import Model, ModelRequest, ProviderError, StreamEvent, TextDelta
from mainspring.providers.base_urls import with_api_version, without_api_version
from mainspring.providers.http import HTTPProvider
from mainspring.providers.openai import OpenAIProvider

OPENAI_REPLY = (
    b'data: {"id": "c1", "choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'
    b'data: {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
    b"data: [DONE]\n\n"
)
ANTHROPIC_REPLY = (
    b'event: message_start\ndata: {"type": "message_start", "message": {"id": "m1"}}\n\n'
    b'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, '
    b'"content_block": {"type": "text"}}\n\n'
    b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
    b'"delta": {"type": "text_delta", "text": "hi"}}\n\n'
    b'event: message_stop\ndata: {"type": "message_stop"}\n\n'
)
ROUTES = {
    "/v1/chat/completions": OPENAI_REPLY,
    "/api/v1/chat/completions": OPENAI_REPLY,
    "/v1/messages": ANTHROPIC_REPLY,
}


def server(seen: list[str]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        reply = ROUTES.get(request.url.path)
        if reply is None:
            return httpx.Response(404, text="File Not Found")
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=reply)

    return httpx.MockTransport(handle)


async def text_of(provider: HTTPProvider, model: str) -> str:
    request = ModelRequest(
        model=Model(provider=provider.name, id=model), messages=(UserMessage(content="hi"),)
    )
    async with asyncio.timeout(5):
        events: list[StreamEvent] = [e async for e in provider.stream(request, AbortSignal())]
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.mark.parametrize(
    "base_url",
    ["http://127.0.0.1:8080", "http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1"],
)
async def test_openai_accepts_a_base_url_with_or_without_v1(base_url: str) -> None:
    seen: list[str] = []
    provider = OpenAIProvider(base_url, api_key="k", transport=server(seen))
    assert await text_of(provider, "m") == "hi"
    assert seen == ["http://127.0.0.1:8080/v1/chat/completions"]


async def test_openai_keeps_a_service_s_own_api_path() -> None:
    seen: list[str] = []
    provider = OpenAIProvider("http://127.0.0.1:8080/api/v1", api_key="k", transport=server(seen))
    assert await text_of(provider, "m") == "hi"
    assert seen == ["http://127.0.0.1:8080/api/v1/chat/completions"]


@pytest.mark.parametrize(
    "base_url",
    ["http://127.0.0.1:8080", "http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1/"],
)
async def test_anthropic_accepts_a_base_url_with_or_without_v1(base_url: str) -> None:
    seen: list[str] = []
    provider = AnthropicProvider(base_url, api_key="k", transport=server(seen))
    assert await text_of(provider, "m") == "hi"
    assert seen == ["http://127.0.0.1:8080/v1/messages"]


@pytest.mark.parametrize(
    ("variable", "cls"),
    [("OPENAI_BASE_URL", OpenAIProvider), ("ANTHROPIC_BASE_URL", AnthropicProvider)],
)
@pytest.mark.parametrize("suffix", ["", "/v1"])
async def test_the_environment_s_base_url_is_forgiving_too(
    monkeypatch: pytest.MonkeyPatch, variable: str, cls: type[HTTPProvider], suffix: str
) -> None:
    monkeypatch.setenv(variable, f"http://127.0.0.1:8080{suffix}")
    seen: list[str] = []
    provider = cls(api_key="k", transport=server(seen))  # type: ignore[call-arg]
    assert await text_of(provider, "m") == "hi"
    assert len(seen) == 1


async def test_an_http_error_names_the_url_that_was_tried() -> None:
    seen: list[str] = []
    provider = OpenAIProvider("http://127.0.0.1:8080/wrong", api_key="k", transport=server(seen))
    with pytest.raises(ProviderError) as info:
        await text_of(provider, "m")
    assert info.value.status_code == 404
    assert "http://127.0.0.1:8080/wrong/chat/completions" in str(info.value)
    assert "File Not Found" in str(info.value)


async def test_the_url_in_an_http_error_has_no_secrets() -> None:
    provider = OpenAIProvider(
        "http://127.0.0.1:8080/sk-secret-key/x", api_key="sk-secret-key", transport=server([])
    )
    with pytest.raises(ProviderError) as info:
        await text_of(provider, "m")
    assert "sk-secret-key" not in str(info.value)
    assert "/***/x/chat/completions" in str(info.value)


def test_the_url_forms() -> None:
    assert with_api_version("https://api.openai.com") == "https://api.openai.com/v1"
    assert with_api_version("https://api.openai.com/v1/") == "https://api.openai.com/v1"
    assert with_api_version("https://host/v1beta/openai") == "https://host/v1beta/openai"
    assert without_api_version("https://api.anthropic.com/v1") == "https://api.anthropic.com"
    assert without_api_version("https://proxy/anthropic") == "https://proxy/anthropic"
