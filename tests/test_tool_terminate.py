"""``ToolResult.terminate``: a batch whose every result sets it ends the run.

The follow-up model request is skipped and ``agent_end.reason`` is ``terminated``; a
batch in which any result does not set it goes on as usual. Tools and
``after_tool_result`` filters can both set it.
"""

from __future__ import annotations

from typing import Any

import pytest

from mainspring import ToolResult, hookimpl, tool
from mainspring.events import AgentEnd
from mainspring.testing import EventGrammarError, check_event_grammar, faux, scripted_run


@tool
async def hand_over(answer: str) -> ToolResult:
    """Give the final answer to the user."""
    return ToolResult(answer, terminate=True)


@tool
async def look(path: str) -> str:
    """Look at a file."""
    return f"contents of {path}"


TOOLS = [hand_over, look]


def batch(*calls: tuple[str, dict[str, Any]]) -> Any:
    return faux.reply(
        *(faux.tool_call(name, args, id=f"c{i}") for i, (name, args) in enumerate(calls))
    )


async def test_a_batch_that_all_terminates_skips_the_follow_up_request() -> None:
    steps = [
        batch(("hand_over", {"answer": "42"}), ("hand_over", {"answer": "43"})),
        faux.text("never asked"),
    ]
    agent, recorder, provider = await scripted_run(steps, tools=TOOLS)
    assert len(provider.requests) == 1
    (end,) = recorder.of_type("agent_end")
    assert end.reason == "terminated"
    assert [r.terminate for r in (e.result for e in recorder.of_type("tool_execution_end"))] == [
        True,
        True,
    ]
    # the transcript ends with the results: the model is asked again by the next prompt
    assert agent.state.messages[-1].role == "tool_result"
    assert end.text == ""


async def test_a_batch_with_one_result_that_does_not_terminate_goes_on() -> None:
    steps = [batch(("hand_over", {"answer": "42"}), ("look", {"path": "a"})), faux.text("ok")]
    _, recorder, provider = await scripted_run(steps, tools=TOOLS)
    assert len(provider.requests) == 2
    assert recorder.of_type("agent_end")[0].reason == "stop"


async def test_a_call_that_failed_preparation_keeps_the_run_going() -> None:
    # the unknown tool's error result does not terminate, so neither does the batch
    steps = [batch(("hand_over", {"answer": "42"}), ("missing", {})), faux.text("ok")]
    _, recorder, provider = await scripted_run(steps, tools=TOOLS)
    assert len(provider.requests) == 2
    assert recorder.of_type("agent_end")[0].reason == "stop"


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_result_filter_can_terminate(kind: str) -> None:
    def finish(result: ToolResult) -> ToolResult:
        return result.model_copy(update={"terminate": True})

    if kind == "sync":

        class Done:
            @hookimpl
            def after_tool_result(self, result):
                return finish(result)

    else:

        class Done:  # type: ignore[no-redef]
            @hookimpl
            async def after_tool_result(self, result):
                return finish(result)

    steps = [batch(("look", {"path": "a"})), faux.text("never asked")]
    _, recorder, provider = await scripted_run(steps, tools=TOOLS, plugins=[Done()])
    assert len(provider.requests) == 1
    assert recorder.of_type("agent_end")[0].reason == "terminated"


async def test_queued_messages_stay_queued_for_the_next_run() -> None:
    @tool
    async def steer_then_finish(note: str) -> ToolResult:
        """Queue a note, then finish."""
        holder[0].steer(note)
        return ToolResult("finished", terminate=True)

    holder: list[Any] = []
    steps = [batch(("steer_then_finish", {"note": "also this"})), faux.text("never asked")]
    agent, recorder, provider = await scripted_run(
        steps, tools=[steer_then_finish], before=holder.append
    )
    assert recorder.of_type("agent_end")[0].reason == "terminated"
    assert len(provider.requests) == 1
    assert [m.text for m in agent.state.steering_queue] == ["also this"]


def test_the_grammar_accepts_terminated_only_after_a_terminating_batch() -> None:
    bare = [
        {"type": "agent_start", "seq": 0, "run_id": "r", "turn": None},
        {"type": "agent_end", "seq": 1, "run_id": "r", "turn": None, "reason": "terminated"},
    ]
    with pytest.raises(EventGrammarError, match="did not all set terminate") as caught:
        check_event_grammar(bare)
    assert caught.value.rule == "end-reason"
    bare[1]["reason"] = "done"
    with pytest.raises(EventGrammarError, match="not a known reason"):
        check_event_grammar(bare)
    assert AgentEnd.__dataclass_fields__["reason"]  # the event class carries the reason
