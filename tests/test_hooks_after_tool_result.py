"""after_tool_result: chained result filters; a failing filter fails closed (no leaks).

Hook table (DESIGN §6, §15): per executed call, as it completes, also after a tool error
or timeout; not for calls that failed preparation or were blocked; chained (may return a
replacement ``ToolResult``); an implementation that raises turns the result into an error
result naming the plugin. ``tool_execution_end.result`` is the final result.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mainspring import Agent, Block, StopRun, ToolResult, hookimpl, tool
from mainspring.testing import EventRecorder, FauxProvider, faux, scripted_run

SECRET = "sk-live-0123456789"


@tool
async def read_env(key: str) -> str:
    """Read an environment value (pretend)."""
    return f"{key}={SECRET}"


@tool
async def explode(why: str) -> str:
    """Always fails."""
    raise OSError(why)


@tool(timeout_s=0.01)
async def slow(seconds: float) -> str:
    """Sleeps too long."""
    await asyncio.sleep(seconds)
    return "woke"


TOOLS = [read_env, explode, slow]


async def run_agent(
    plugins: list[Any], steps: list[Any], **kwargs: Any
) -> tuple[Agent, EventRecorder, FauxProvider]:
    kwargs.setdefault("tools", TOOLS)
    return await scripted_run(steps, plugins=plugins, **kwargs)


@contextmanager
def no_unawaited_coroutines() -> Iterator[None]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    leaked = [w for w in caught if "never awaited" in str(w.message)]
    assert not leaked, [str(w.message) for w in leaked]


def everything_seen(recorder: EventRecorder, provider: FauxProvider) -> str:
    """Every text that reached the model, the transcript and the event stream."""
    parts = [repr(e) for e in recorder.events]
    parts += [repr(r.messages) for r in provider.requests]
    return "\n".join(parts)


READ = [faux.tool_call("read_env", {"key": "API_KEY"}, id="c1"), faux.text("done")]


def redact(result: ToolResult) -> ToolResult:
    return ToolResult(result.text.replace(SECRET, "[redacted]"), details=result.details)


# -- chaining ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_replacement_is_what_the_model_and_the_events_see(kind: str) -> None:
    if kind == "sync":

        class Redactor:
            @hookimpl
            def after_tool_result(self, result):
                return redact(result)

    else:

        class Redactor:  # type: ignore[no-redef]
            @hookimpl
            async def after_tool_result(self, result):
                return redact(result)

    agent, recorder, provider = await run_agent([Redactor()], READ)

    (end,) = recorder.of_type("tool_execution_end")
    assert end.result.text == "API_KEY=[redacted]"
    (message,) = recorder.messages("tool_result")
    assert message.text == "API_KEY=[redacted]"
    assert provider.requests[1].messages[-1].text == "API_KEY=[redacted]"
    assert SECRET not in everything_seen(recorder, provider)
    assert SECRET not in repr(agent.state.messages)


async def test_filters_chain_each_seeing_the_previous_replacement() -> None:
    seen: list[tuple[str, str]] = []

    class Upper:
        name = "upper"

        @hookimpl
        def after_tool_result(self, result):
            seen.append(("upper", result.text))
            return ToolResult(result.text.upper())

    class Redactor:
        name = "redactor"

        @hookimpl
        async def after_tool_result(self, result):
            seen.append(("redactor", result.text))
            return redact(result)

    class Keep:
        name = "keep"

        @hookimpl
        def after_tool_result(self, result):
            seen.append(("keep", result.text))
            return None  # keep it

    _, recorder, _ = await run_agent([Keep(), Upper(), Redactor()], READ)

    assert seen == [
        ("redactor", f"API_KEY={SECRET}"),
        ("upper", "API_KEY=[redacted]"),
        ("keep", "API_KEY=[REDACTED]"),
    ]
    assert recorder.of_type("tool_execution_end")[0].result.text == "API_KEY=[REDACTED]"


async def test_tryfirst_and_trylast_are_honoured() -> None:
    order: list[str] = []

    def plugin(label: str, **marks: bool) -> Any:
        class P:
            name = label

            @hookimpl(**marks)
            def after_tool_result(self):
                order.append(label)

        return P()

    plugins = [plugin("last", trylast=True), plugin("first", tryfirst=True), plugin("mid")]
    await run_agent(plugins, READ)

    assert order == ["first", "mid", "last"]


async def test_it_gets_the_call_agent_and_signal() -> None:
    seen: dict[str, Any] = {}

    class Spy:
        @hookimpl
        def after_tool_result(self, call, result, agent, signal):
            seen.update(call=call, result=result, agent=agent, signal=signal)

    agent, _, _ = await run_agent([Spy()], READ)

    assert seen["call"].id == "c1" and seen["call"].name == "read_env"
    assert isinstance(seen["result"], ToolResult)
    # a plugin sees the agent through its own view
    assert seen["agent"] is agent.view_for("Spy")
    assert seen["signal"].aborted is False


async def test_it_runs_after_a_tool_error_and_a_timeout() -> None:
    seen: list[tuple[str, bool, str]] = []

    class Audit:
        @hookimpl
        def after_tool_result(self, call, result):
            seen.append((call.name, result.is_error, result.text))

    steps = [
        [
            faux.tool_call("explode", {"why": "disk on fire"}, id="c1"),
            faux.tool_call("slow", {"seconds": 5}, id="c2"),
        ],
        faux.text("done"),
    ]
    await run_agent([Audit()], steps)

    by_name = {name: (is_error, text) for name, is_error, text in seen}
    assert set(by_name) == {"explode", "slow"}
    assert by_name["explode"][0] and "disk on fire" in by_name["explode"][1]
    assert by_name["slow"][0] and "timed out" in by_name["slow"][1]


async def test_it_does_not_run_for_blocked_or_unprepared_calls() -> None:
    seen: list[str] = []

    class Gate:
        @hookimpl
        def before_tool_call(self, call):
            return Block("no") if call.id == "blocked" else None

    class Audit:
        @hookimpl
        def after_tool_result(self, call):
            seen.append(call.id)

    steps = [
        [
            faux.tool_call("nope", {}, id="unknown"),
            faux.tool_call("read_env", {"wrong": 1}, id="invalid"),
            faux.tool_call("read_env", {"key": "A"}, id="blocked"),
            faux.tool_call("read_env", {"key": "B"}, id="ran"),
        ],
        faux.text("done"),
    ]
    _, recorder, _ = await run_agent([Audit(), Gate()], steps)

    assert seen == ["ran"]
    assert len(recorder.messages("tool_result")) == 4


# -- failure: fail closed ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_raising_filter_withholds_the_result(kind: str) -> None:
    if kind == "sync":

        class Broken:
            name = "redactor"

            @hookimpl
            def after_tool_result(self, result):
                raise ValueError("regex compile failed")

    else:

        class Broken:  # type: ignore[no-redef]
            name = "redactor"

            @hookimpl
            async def after_tool_result(self, result):
                raise ValueError("regex compile failed")

    with no_unawaited_coroutines():
        agent, recorder, provider = await run_agent([Broken()], READ)

    (error,) = recorder.of_type("hook_error")
    assert error.hook == "after_tool_result"
    assert error.plugin == "redactor"
    # the exception's type is named; its message, which could quote the result, is not
    assert "ValueError" in error.error
    assert "regex compile failed" not in error.error
    assert error.outcome  # says what the kernel did
    (end,) = recorder.of_type("tool_execution_end")
    assert end.is_error and end.result.is_error
    assert "redactor" in end.result.text
    (message,) = recorder.messages("tool_result")
    assert message.is_error and "redactor" in message.text
    # a failed redactor must not leak, anywhere
    assert SECRET not in everything_seen(recorder, provider)
    assert SECRET not in repr(agent.state.messages)
    assert recorder.of_type("agent_end")[0].reason == "stop"


async def test_a_failure_after_an_earlier_replacement_still_withholds() -> None:
    class Tag:
        name = "tag"

        @hookimpl(tryfirst=True)
        def after_tool_result(self, result):
            return ToolResult(result.text + " [tagged]")

    class Broken:
        name = "broken"

        @hookimpl
        def after_tool_result(self):
            raise RuntimeError("oops")

    _, recorder, provider = await run_agent([Broken(), Tag()], READ)

    (end,) = recorder.of_type("tool_execution_end")
    assert end.result.is_error and "broken" in end.result.text
    assert SECRET not in everything_seen(recorder, provider)


@pytest.mark.parametrize("wrong", ["a string", 42, {"content": "x"}])
async def test_a_filter_returning_a_non_result_fails_closed(wrong: Any) -> None:
    class Confused:
        name = "confused"

        @hookimpl
        def after_tool_result(self):
            return wrong

    _, recorder, provider = await run_agent([Confused()], READ)

    (error,) = recorder.of_type("hook_error")
    assert (error.hook, error.plugin) == ("after_tool_result", "confused")
    assert recorder.of_type("tool_execution_end")[0].result.is_error
    assert SECRET not in everything_seen(recorder, provider)


# -- StopRun ----------------------------------------------------------------------------


async def test_stop_run_from_a_filter_ends_the_run_without_leaking() -> None:
    class Tripwire:
        @hookimpl
        async def after_tool_result(self, result):
            if SECRET in result.text:
                raise StopRun("secret detected in tool output")

    agent, recorder, provider = await run_agent([Tripwire()], READ)

    end = recorder.of_type("agent_end")[0]
    assert (end.reason, end.detail) == ("stopped_by_hook", "secret detected in tool output")
    (message,) = recorder.messages("tool_result")
    assert message.tool_call_id == "c1" and message.is_error
    assert len(provider.requests) == 1
    assert SECRET not in everything_seen(recorder, provider)
    assert agent.state.pending_tool_calls == frozenset()
