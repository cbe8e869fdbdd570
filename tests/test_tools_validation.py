"""What the model sees when a call cannot run: always an error tool result, never a crash,
and the run goes on to the next model turn (DESIGN §7)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import BaseModel

from mainspring import Agent, Tool, ToolContext, ToolResultMessage, tool
from mainspring.events import AgentEnd, ToolExecutionEnd
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


def make_agent(
    steps: list[Any], *, tools: list[Tool] | tuple[Tool, ...] = ()
) -> tuple[Agent, EventRecorder, FauxProvider]:
    provider = FauxProvider(steps)
    agent = Agent(model="faux:test", provider=provider, autoload=False, tools=tools)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    return agent, recorder, provider


class ReadArgs(BaseModel):
    path: str
    limit: int = 10


executed: list[Any] = []


async def _read(args: ReadArgs, ctx: ToolContext) -> str:
    executed.append(args)
    return f"read {args.path}"


READ = Tool("read", "Read a file.", ReadArgs, _read)


async def run_one_bad_call(step: Any, tools: list[Tool]) -> tuple[ToolResultMessage, Any]:
    """Script one tool call then a closing text; check the run went on; return the result."""
    agent, recorder, provider = make_agent([step, faux.text("recovered")], tools=tools)
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    (result,) = recorder.messages("tool_result")
    assert result.is_error is True
    (end,) = recorder.of_type(ToolExecutionEnd)
    assert end.is_error is True and end.result.text == result.text
    # the run continued: a second request that carried the error result, then a stop
    assert len(provider.requests) == 2
    sent = provider.requests[1].messages[-1]
    assert sent.role == "tool_result" and sent.is_error and sent.text == result.text
    assert recorder.messages("assistant")[-1].text == "recovered"
    assert recorder.of_type(AgentEnd)[0].reason == "stop"
    assert agent.state.error_message is None
    return result, recorder


async def test_unknown_tool_is_an_error_result() -> None:
    executed.clear()
    result, recorder = await run_one_bad_call(faux.tool_call("nope", {"x": 1}), [READ])
    assert 'Tool "nope" not found' in result.text
    assert result.tool_name == "nope"
    assert executed == []
    # preparation failed before the gates: no tool_decision
    tool_types = [e.type for e in recorder.events if e.type.startswith("tool_")]
    assert tool_types == ["tool_execution_start", "tool_execution_end"]


async def test_invalid_arguments_name_the_fields_and_the_received_arguments() -> None:
    executed.clear()
    result, recorder = await run_one_bad_call(faux.tool_call("read", {"limit": "many"}), [READ])
    assert executed == []
    assert "read" in result.text
    assert "- path:" in result.text  # missing
    assert "- limit:" in result.text  # not an int
    assert "'limit': 'many'" in result.text  # the arguments received
    tool_types = [e.type for e in recorder.events if e.type.startswith("tool_")]
    assert tool_types == ["tool_execution_start", "tool_execution_end"]


async def test_json_schema_tool_invalid_arguments() -> None:
    schema = {
        "type": "object",
        "properties": {"count": {"type": "integer"}},
        "required": ["count"],
    }
    seen: list[Any] = []

    async def count(args: dict[str, Any], ctx: ToolContext) -> str:
        seen.append(args)
        return "counted"

    result, _ = await run_one_bad_call(
        faux.tool_call("count", {"count": "three"}), [Tool("count", "count", schema, count)]
    )
    assert seen == []
    assert "count" in result.text
    assert "three" in result.text


async def test_tool_exception_is_an_error_result_with_its_message() -> None:
    class Args(BaseModel):
        pass

    async def explode(args: Args, ctx: ToolContext) -> str:
        raise PermissionError("access denied to /etc/shadow")

    result, _ = await run_one_bad_call(
        faux.tool_call("explode", {}), [Tool("explode", "fails", Args, explode)]
    )
    assert "access denied to /etc/shadow" in result.text
    assert "PermissionError" in result.text


async def test_sync_tool_exception_is_an_error_result() -> None:
    class Args(BaseModel):
        pass

    def explode(args: Args, ctx: ToolContext) -> str:
        raise ValueError("bad input in thread")

    result, _ = await run_one_bad_call(
        faux.tool_call("explode", {}), [Tool("explode", "fails", Args, explode)]
    )
    assert "bad input in thread" in result.text


async def test_timeout_is_an_error_result() -> None:
    class Args(BaseModel):
        pass

    async def hang(args: Args, ctx: ToolContext) -> str:
        await asyncio.sleep(10)
        return "never"

    began = time.monotonic()
    result, _ = await run_one_bad_call(
        faux.tool_call("hang", {}), [Tool("hang", "hangs", Args, hang, timeout_s=0.05)]
    )
    assert time.monotonic() - began < 1.0
    assert "timed out" in result.text
    assert "0.05" in result.text


async def test_timeout_of_one_call_leaves_its_siblings_alone() -> None:
    class Args(BaseModel):
        seconds: float

    async def nap(args: Args, ctx: ToolContext) -> str:
        await asyncio.sleep(args.seconds)
        return "rested"

    agent, recorder, _ = make_agent(
        [
            [faux.tool_call("nap", {"seconds": 10}), faux.tool_call("nap", {"seconds": 0.01})],
            "ok",
        ],
        tools=[Tool("nap", "nap", Args, nap, timeout_s=0.1)],
    )
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    slow, fast = recorder.messages("tool_result")
    assert slow.is_error and "timed out" in slow.text
    assert not fast.is_error and fast.text == "rested"


async def test_malformed_json_arguments_are_an_error_result_not_a_crash() -> None:
    seen: list[Any] = []

    class Args(BaseModel):
        a: int = 0

    async def x(args: Args, ctx: ToolContext) -> str:
        seen.append(args)
        return "ran"

    result, recorder = await run_one_bad_call(
        faux.tool_call("x", '{"a": '), [Tool("x", "x", Args, x)]
    )
    assert seen == []
    assert "JSON" in result.text
    assert '{"a": ' in result.text  # what was received
    (call,) = recorder.messages("assistant")[0].tool_calls
    assert call.name == "x"


async def test_non_object_json_arguments_are_an_error_result() -> None:
    class Args(BaseModel):
        pass

    async def x(args: Args, ctx: ToolContext) -> str:
        return "ran"

    result, _ = await run_one_bad_call(faux.tool_call("x", "[1, 2]"), [Tool("x", "x", Args, x)])
    assert "object" in result.text
    assert "[1, 2]" in result.text


async def test_bad_calls_and_good_calls_in_one_batch_each_get_their_own_result() -> None:
    executed.clear()
    agent, recorder, _ = make_agent(
        [
            [
                faux.tool_call("read", {"path": "ok.txt"}, id="good"),
                faux.tool_call("missing", {}, id="unknown"),
                faux.tool_call("read", {"path": 5, "extra": 1}, id="invalid"),
                faux.tool_call("read", '{"path": "x"', id="broken"),
            ],
            "done",
        ],
        tools=[READ],
    )
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    results = recorder.messages("tool_result")
    assert [r.tool_call_id for r in results] == ["good", "unknown", "invalid", "broken"]
    assert [r.is_error for r in results] == [False, True, True, True]
    assert results[0].text == "read ok.txt"
    assert len(executed) == 1


# ------------------------------------------------------------------ @tool functions


@tool
async def add(a: int, b: int) -> str:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    assert isinstance(a, int) and isinstance(b, int)
    return str(a + b)


async def test_tool_decorator_coerces_arguments_with_pydantic() -> None:
    agent, recorder, provider = make_agent(
        [faux.tool_call("add", {"a": "5", "b": 2}), "seven"], tools=[add]
    )
    await agent.prompt("add")
    check_event_grammar(recorder.events)
    (result,) = recorder.messages("tool_result")
    assert result.is_error is False
    assert result.text == "7"
    (spec,) = provider.requests[0].tools
    assert spec.name == "add"
    assert spec.description.startswith("Add two integers.")
    assert set(spec.parameters["properties"]) == {"a", "b"}


async def test_tool_decorator_rejects_unknown_arguments() -> None:
    result, _ = await run_one_bad_call(faux.tool_call("add", {"a": 1, "b": 2, "c": 3}), [add])
    assert "- c:" in result.text  # the offending field
    assert "'c': 3" in result.text


async def test_tool_decorator_injects_the_context() -> None:
    seen: list[str] = []

    @tool
    async def whoami(ctx: ToolContext) -> str:
        """Say the call id."""
        seen.append(ctx.tool_call_id)
        ctx.update("thinking")
        return ctx.tool_call_id

    agent, recorder, provider = make_agent(
        [faux.tool_call("whoami", {}, id="me-1"), "ok"], tools=[whoami]
    )
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    assert seen == ["me-1"]
    assert recorder.messages("tool_result")[0].text == "me-1"
    assert "ctx" not in provider.requests[0].tools[0].parameters.get("properties", {})
    assert [e.partial_result for e in recorder.of_type("tool_execution_update")] == ["thinking"]


async def test_sync_tool_decorator_function_is_coerced_and_runs() -> None:
    @tool
    def multiply(a: int, b: int = 3) -> int:
        """Multiply."""
        return a * b

    agent, recorder, _ = make_agent(
        [faux.tool_call("multiply", {"a": "4"}), "twelve"], tools=[multiply]
    )
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    (result,) = recorder.messages("tool_result")
    assert result.is_error is False
    assert result.text == "12"


async def test_sync_tool_timeout_returns_without_waiting_for_the_thread() -> None:
    class Args(BaseModel):
        pass

    def stuck(args: Args, ctx: ToolContext) -> str:
        time.sleep(0.5)
        return "late"

    began = time.monotonic()
    result, _ = await run_one_bad_call(
        faux.tool_call("stuck", {}), [Tool("stuck", "blocks", Args, stuck, timeout_s=0.05)]
    )
    assert time.monotonic() - began < 0.45
    assert "timed out" in result.text


async def test_tool_raising_cancelled_error_by_itself_is_an_error_result() -> None:
    """A tool whose own await was cancelled (not by abort) must not hang the batch."""

    class Args(BaseModel):
        pass

    async def cancelled_inside(args: Args, ctx: ToolContext) -> str:
        raise asyncio.CancelledError()

    agent, recorder, provider = make_agent(
        [faux.tool_call("cancelled_inside", {}), "recovered"],
        tools=[Tool("cancelled_inside", "cancels", Args, cancelled_inside)],
    )
    hung = False
    began = time.monotonic()
    try:
        async with asyncio.timeout(2):  # bounds a hang; prompt() then aborts the run
            await agent.prompt("go")
    except TimeoutError:
        hung = True
    elapsed = time.monotonic() - began
    check_event_grammar(recorder.events)
    (result,) = recorder.messages("tool_result")
    assert result.is_error
    assert not hung, "the tool batch hung on a tool that raised CancelledError"
    assert elapsed < 1.0, f"the batch waited {elapsed:.1f} s for a tool that was cancelled"
    assert recorder.of_type(AgentEnd)[0].reason == "stop"
    assert len(provider.requests) == 2
