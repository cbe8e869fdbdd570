"""W1 and W3 through the OpenAI Agents SDK's streaming loop (own venv; prints JSON).

The scripted model is a ``Model`` whose ``stream_response`` yields pre-built Responses
API stream events; the one listener consumes ``RunResultStreaming.stream_events()``.
Tracing is disabled (it would try to export spans).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from importlib.metadata import version
from typing import Any

from _peer import PIECES, TURNS, measure
from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.models.interface import Model
from agents.testing import assistant_message, function_call
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

set_tracing_disabled(True)


def _response(output: list[Any], status: str = "completed") -> Response:
    usage = ResponseUsage(
        input_tokens=120,
        output_tokens=12,
        total_tokens=132,
        input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
    )
    return Response(
        id="resp",
        created_at=0,
        model="scripted",
        object="response",
        output=output,
        tool_choice="auto",
        tools=[],
        top_p=None,
        parallel_tool_calls=True,
        status=status,  # type: ignore[arg-type]
        usage=usage,
    )


def _reply(output: list[Any], texts: list[str] = ()) -> list[Any]:  # type: ignore[assignment]
    created = ResponseCreatedEvent(
        type="response.created", response=_response([], "in_progress"), sequence_number=0
    )
    deltas = [
        ResponseTextDeltaEvent(
            type="response.output_text.delta",
            content_index=0,
            delta=text,
            item_id="msg",
            logprobs=[],
            output_index=0,
            sequence_number=i + 1,
        )
        for i, text in enumerate(texts)
    ]
    done = ResponseCompletedEvent(
        type="response.completed", response=_response(output), sequence_number=len(texts) + 1
    )
    return [created, *deltas, done]


W1_SCRIPT = [_reply([function_call("noop", "{}", call_id=f"call_{i}")]) for i in range(TURNS - 1)]
W1_SCRIPT.append(_reply([assistant_message("done", item_id="msg")], ["done"]))
W3_SCRIPT = [_reply([assistant_message("".join(PIECES), item_id="msg")], PIECES)]


class ScriptModel(Model):
    def __init__(self, script: list[list[Any]], marks: list[float], clock: Any) -> None:
        self._replies = iter(script)
        self._marks = marks
        self._clock = clock

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("streaming only")

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        self._marks.append(self._clock())
        for event in next(self._replies):
            yield event


@function_tool
async def noop() -> str:
    """Do nothing and say so."""
    return "ok"


async def run_once(workload: str, marks: list[float], clock: Any) -> int:
    script = W1_SCRIPT if workload == "W1" else W3_SCRIPT
    agent = Agent(name="bench", model=ScriptModel(script, marks, clock), tools=[noop])
    result = Runner.run_streamed(
        agent, "go", max_turns=TURNS + 5, run_config=RunConfig(tracing_disabled=True)
    )
    seen = 0
    async for _ in result.stream_events():
        seen += 1
    assert str(result.final_output).startswith("done" if workload == "W1" else "w0")
    return seen


if __name__ == "__main__":
    out = asyncio.run(measure(run_once, int(sys.argv[1]) if len(sys.argv) > 1 else 5))
    print(json.dumps({"framework": "openai-agents", "version": version("openai-agents"), **out}))
