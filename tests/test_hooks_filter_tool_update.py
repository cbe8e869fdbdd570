"""filter_tool_update: chained, fail-closed filtering of a running tool's progress reports.

The partial counterpart of ``after_tool_result``: each ``ctx.update(partial)`` passes
through the implementations before its ``tool_execution_update`` is emitted; a
replacement chains, ``None`` keeps, and a failing filter withholds the update (fail
closed) with a ``hook_error``, while the call itself goes on.
"""

from __future__ import annotations

from typing import Any

import pytest

from mainspring import StopRun, ToolContext, hookimpl, tool
from mainspring.testing import faux, scripted_run


@tool
def progress(count: int, ctx: ToolContext) -> str:
    """Report ``count`` steps of progress, then finish."""
    for step in range(count):
        ctx.update(f"step {step} of secret-{step}")
    return "finished"


STEPS = [faux.tool_call("progress", {"count": 3}), faux.text("done")]


def updates(run: Any) -> list[Any]:
    return [e.partial_result for e in run.recorder.of_type("tool_execution_update")]


async def test_without_an_implementation_updates_pass_as_reported() -> None:
    run = await scripted_run(STEPS, tools=[progress])
    assert updates(run) == ["step 0 of secret-0", "step 1 of secret-1", "step 2 of secret-2"]


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_replacements_chain_and_none_keeps(kind: str) -> None:
    seen: list[Any] = []

    class Mask:
        @hookimpl
        def filter_tool_update(self, partial: str) -> str | None:
            return partial.replace("secret", "[masked]") if "secret" in partial else None

    class Upper:
        if kind == "sync":

            @hookimpl
            def filter_tool_update(self, call: Any, partial: str) -> str:
                seen.append((call.name, partial))
                return partial.upper()

        else:

            @hookimpl
            async def filter_tool_update(self, call: Any, partial: str) -> str:
                seen.append((call.name, partial))
                return partial.upper()

    class Keep:
        @hookimpl
        def filter_tool_update(self, partial: str) -> None:
            return None

    # pluggy calls the most recently registered first: Keep, then Mask, then Upper
    run = await scripted_run(STEPS, tools=[progress], plugins=[Upper(), Mask(), Keep()])
    assert updates(run) == ["STEP 0 OF [MASKED]-0", "STEP 1 OF [MASKED]-1", "STEP 2 OF [MASKED]-2"]
    assert seen[0] == ("progress", "step 0 of [masked]-0")
    # the final result is after_tool_result's business, not this hook's
    (end,) = run.recorder.of_type("tool_execution_end")
    assert end.result.content[0].text == "finished"


async def test_a_failing_filter_withholds_the_update_and_the_call_goes_on() -> None:
    class Broken:
        name = "broken-filter"

        @hookimpl
        def filter_tool_update(self, partial: str) -> str:
            if partial.startswith("step 1"):
                raise RuntimeError("cannot parse")
            return partial

    run = await scripted_run(STEPS, tools=[progress], plugins=[Broken()])
    assert updates(run) == ["step 0 of secret-0", "step 2 of secret-2"]
    (error,) = run.recorder.of_type("hook_error")
    assert (error.hook, error.plugin) == ("filter_tool_update", "broken-filter")
    # the exception's type is named; its message, which could quote the update, is not
    assert "RuntimeError" in error.error and "cannot parse" not in error.error
    assert error.outcome == "update withheld (fail closed)"
    results = [m for m in run.agent.state.messages if m.role == "tool_result"]
    assert [r.is_error for r in results] == [False]
    assert run.recorder.of_type("agent_end")[0].reason == "stop"


async def test_stop_run_from_a_filter_ends_the_run_deliberately() -> None:
    class Stopper:
        @hookimpl
        def filter_tool_update(self, partial: str) -> None:
            raise StopRun("saw enough")

    run = await scripted_run(STEPS, tools=[progress], plugins=[Stopper()])
    end = run.recorder.of_type("agent_end")[0]
    assert (end.reason, end.detail) == ("stopped_by_hook", "saw enough")
    assert updates(run) == []


async def test_partial_result_is_the_name_and_partial_still_works() -> None:
    """The hook's parameter is named like the event's field; the older name is the same."""
    seen: list[tuple[Any, Any]] = []

    class Both:
        @hookimpl
        def filter_tool_update(self, partial_result: str, partial: str) -> str:
            seen.append((partial_result, partial))
            return partial_result.upper()

    run = await scripted_run(STEPS, tools=[progress], plugins=[Both()])
    assert seen[0] == ("step 0 of secret-0", "step 0 of secret-0")
    assert updates(run)[0] == "STEP 0 OF SECRET-0"
