"""W1 and W3 through pydantic-ai's streaming loop (run in its own venv; prints JSON).

A ``FunctionModel`` with a ``stream_function`` is the scripted model; the one listener
is an ``event_stream_handler`` that consumes every event of the run.
"""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import version
from typing import Any

from _peer import DELTAS, PIECES, TURNS, measure
from pydantic_ai import Agent, Tool
from pydantic_ai.models.function import DeltaToolCall, FunctionModel
from pydantic_ai.usage import UsageLimits


async def noop() -> str:
    """Do nothing and say so."""
    return "ok"


def _agent(script: list[Any], marks: list[float], clock: Any) -> Agent[None, str]:
    replies = iter(script)

    async def stream(messages: Any, info: Any) -> Any:
        marks.append(clock())
        for delta in next(replies):
            yield delta

    return Agent(FunctionModel(stream_function=stream), tools=[Tool(noop, takes_ctx=False)])


def _w1_script() -> list[Any]:
    calls = [
        [{0: DeltaToolCall(name="noop", json_args="{}", tool_call_id=f"call_{i}")}]
        for i in range(TURNS - 1)
    ]
    return [*calls, ["done"]]


async def run_once(workload: str, marks: list[float], clock: Any) -> int:
    script = _w1_script() if workload == "W1" else [PIECES]
    agent = _agent(script, marks, clock)
    seen = 0

    async def handler(ctx: Any, events: Any) -> None:
        nonlocal seen
        async for _ in events:
            seen += 1

    result = await agent.run(
        "go", usage_limits=UsageLimits(request_limit=None), event_stream_handler=handler
    )
    assert result.output.startswith("done" if workload == "W1" else "w0"), result.output
    return seen


if __name__ == "__main__":
    out = asyncio.run(measure(run_once, int(sys.argv[1]) if len(sys.argv) > 1 else 5))
    print(json.dumps({"framework": "pydantic-ai", "version": version("pydantic-ai-slim"), **out}))
    assert DELTAS
