"""The tool boundary holds whatever the model sends and whatever a tool returns.

- Arguments of any shape get a result, never a crash: nesting past
  ``tools.max_argument_depth`` or text past ``tools.max_argument_bytes`` is a
  validation-error result naming the limit (the kernel never recurses on their depth).
- A tool's ``timeout_s`` holds even if the tool swallows the cancellation.
- A blocking plain-function tool does not hold up ``asyncio.run()`` at exit.
- ``details`` and progress reports of any kind become JSON-able: every event serialises.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest
from pydantic import BaseModel

from mainspring import Agent, Settings, Tool, ToolContext, ToolResult, tool
from mainspring.events import AgentEnd, ToolExecutionEnd, ToolExecutionUpdate, event_to_json
from mainspring.settings import ToolSettings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


def schema_tool(name: str = "take") -> Tool:
    async def execute(args: Any, ctx: Any) -> str:
        return "ran"

    return Tool(name, "takes anything", {"type": "object"}, execute)


async def run(
    steps: list[Any], tools: list[Tool], settings: Settings | None = None, chunk_size: int = 4
) -> tuple[Agent, EventRecorder]:
    agent = Agent(
        model="faux:test",
        provider=FauxProvider(steps, chunk_size=chunk_size),
        autoload=False,
        tools=tools,
        settings=settings,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await asyncio.wait_for(agent.prompt("go"), 30)
    check_event_grammar(recorder.events)
    for event in recorder.events:
        json.loads(event_to_json(event))
    return agent, recorder


def nested(depth: int) -> str:
    return '{"a": ' + "[" * depth + "1" + "]" * depth + "}"


@pytest.mark.parametrize("depth", [100, 600, 100_000])
async def test_arguments_nested_past_the_limit_get_a_validation_error(depth: int) -> None:
    steps = [faux.tool_call("take", nested(depth), id="c1"), faux.text("ok")]
    # the arguments arrive in fragments of 4 KiB, as from a real server, not 50,000 deltas
    _, recorder = await run(steps, [schema_tool()], chunk_size=4096)

    end = recorder.of_type(ToolExecutionEnd)[0]
    assert end.is_error
    assert "nested deeper than the limit of 64" in end.result.text
    assert "max_argument_depth" in end.result.text
    assert recorder.of_type(AgentEnd)[0].reason == "stop"


async def test_arguments_within_the_depth_limit_run() -> None:
    steps = [faux.tool_call("take", nested(40), id="c1"), faux.text("ok")]
    _, recorder = await run(steps, [schema_tool()])

    assert not recorder.of_type(ToolExecutionEnd)[0].is_error


async def test_arguments_past_the_size_limit_get_a_validation_error() -> None:
    big = json.dumps({"text": "x" * 5_000})
    steps = [faux.tool_call("echo", big, id="c1"), faux.text("ok")]
    settings = Settings(tools=ToolSettings(max_argument_bytes=1_000))
    agent, recorder = await run(steps, [echo], settings)

    end = recorder.of_type(ToolExecutionEnd)[0]
    assert end.is_error and "longer than the limit of 1000 characters" in end.result.text
    call = agent.state.messages[1].tool_calls[0]
    assert dict(call.arguments) == {}  # what was refused is not kept


async def test_a_tool_that_swallows_cancellation_still_times_out() -> None:
    finished: list[str] = []

    async def stubborn(args: Any, ctx: ToolContext) -> str:
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                continue
        finished.append("never")  # pragma: no cover

    slow = Tool("slow", "never ends", {"type": "object"}, stubborn, timeout_s=0.05)
    settings = Settings(tools=ToolSettings(abort_grace_s=0.05))
    steps = [faux.tool_call("slow", {}, id="c1"), faux.text("moved on")]
    agent, recorder = await run(steps, [slow], settings)

    end = recorder.of_type(ToolExecutionEnd)[0]
    assert end.is_error and 'Tool "slow" timed out after 0.05 s' in end.result.text
    assert agent.state.messages[-1].text == "moved on"
    leftover = {task for task in asyncio.all_tasks() if task is not asyncio.current_task()}
    assert leftover == set()


def test_a_blocking_tool_does_not_hold_up_asyncio_run_at_exit() -> None:
    script = textwrap.dedent(
        """
        import asyncio, threading
        from mainspring import Agent, Settings, Tool
        from mainspring.settings import ToolSettings
        from mainspring.testing import FauxProvider, faux

        def block(args, ctx):
            threading.Event().wait()

        async def main():
            slow = Tool("block", "blocks", {"type": "object"}, block, timeout_s=0.1)
            agent = Agent(
                model="faux:test", autoload=False, tools=[slow],
                provider=FauxProvider([faux.tool_call("block", {}), faux.text("done")]),
                settings=Settings(tools=ToolSettings(abort_grace_s=0.05)),
            )
            await agent.prompt("go")
            print(agent.state.messages[-1].text)

        asyncio.run(main())
        print("exited")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["done", "exited"]


class Secretive(BaseModel):
    name: str


def odd_values() -> dict[str, Any]:
    circular: dict[str, Any] = {"name": "loop"}
    circular["self"] = circular

    def endless() -> Any:
        while True:
            yield 1

    return {
        "object": object(),
        "lock": threading.Lock(),
        "bytes": b"\xff\xfe",
        "circular": circular,
        "generator": endless(),
    }


@pytest.mark.parametrize("kind", sorted(odd_values()))
async def test_any_details_value_becomes_serialisable(kind: str) -> None:
    value = odd_values()[kind]

    async def odd(args: Any, ctx: ToolContext) -> ToolResult:
        ctx.update(value)
        return ToolResult("done", details={"value": value, "model": Secretive(name="kept")})

    tool_ = Tool("odd", "odd details", {"type": "object"}, odd)
    steps = [faux.tool_call("odd", {}, id="c1"), faux.text("ok")]
    _, recorder = await run(steps, [tool_])

    end = recorder.of_type(ToolExecutionEnd)[0]
    assert not end.is_error
    details = end.result.details
    json.dumps(details)
    assert details["model"] == {"name": "kept"}
    update = recorder.of_type(ToolExecutionUpdate)[0]
    json.dumps(update.partial_result)
    assert recorder.of_type(AgentEnd)[0].reason == "stop"


async def test_plain_details_pass_unchanged() -> None:
    model = Secretive(name="kept")

    async def plain(args: Any, ctx: ToolContext) -> ToolResult:
        return ToolResult("done", details={"rows": [1, 2], "model": model})

    tool_ = Tool("plain", "plain details", {"type": "object"}, plain)
    _, recorder = await run([faux.tool_call("plain", {}), faux.text("ok")], [tool_])

    details = recorder.of_type(ToolExecutionEnd)[0].result.details
    assert details["model"] is model and details["rows"] == [1, 2]


async def test_a_plain_function_tool_reports_progress_from_its_thread() -> None:
    def slow(args: Any, ctx: ToolContext) -> str:
        for step in range(50):
            ctx.update({"step": step})
        return "done"

    tool_ = Tool("slow", "reports progress", {"type": "object"}, slow)
    _, recorder = await run([faux.tool_call("slow", {}), faux.text("ok")], [tool_])

    steps = [u.partial_result["step"] for u in recorder.of_type(ToolExecutionUpdate)]
    assert steps == list(range(50))
