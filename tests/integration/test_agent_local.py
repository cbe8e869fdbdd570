"""A full agent run on the real local llama.cpp server: forced tool call, result, answer."""

from __future__ import annotations

import pytest

from mainspring import Agent, ToolResultMessage, tool
from mainspring.providers.local import LocalProvider, is_available
from mainspring.testing import EventRecorder, check_event_grammar

pytestmark = pytest.mark.skipif(
    not is_available(), reason="the local model is not installed: run `mainspring install-model`"
)


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: the city's name
    """
    return f"It is sunny and 21 degrees in {city}."


class RequestLog:
    """Records every request the provider is sent (the protocol under test)."""

    def __init__(self, provider: LocalProvider) -> None:
        self.provider = provider
        self.name = provider.name
        self.models = provider.models
        self.requests: list[object] = []

    def stream(self, request, signal):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        return self.provider.stream(request, signal)


async def test_forced_tool_call_is_executed_and_its_result_sent_back() -> None:
    provider = RequestLog(LocalProvider(tool_mode="force_first", max_output_tokens=64))
    agent = Agent(
        model="local:smollm2-135m", provider=provider, tools=[get_weather], autoload=False
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)

    await agent.prompt("What is the weather in Paris?")

    check_event_grammar(recorder.events)
    ends = recorder.of_type("tool_execution_end")
    assert ends, "the forced tool call was not executed"
    assert {end.tool_name for end in ends} == {"get_weather"}
    assert all(not end.is_error for end in ends), [end.result.text for end in ends]
    assert len(provider.requests) == 2
    sent_back = provider.requests[1].messages  # type: ignore[attr-defined]
    results = [m for m in sent_back if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == [end.tool_call_id for end in ends]
    assert "sunny" in results[0].text
    final = agent.state.messages[-1]
    assert final.role == "assistant"
    assert final.stop_reason == "stop"
    assert recorder.of_type("agent_end")[0].reason == "stop"
