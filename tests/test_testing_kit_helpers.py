"""The testing kit's approvers and its view of what the model saw.

Contract (``docs/testing.md``): ``scripted_approver`` answers calls in the order asked and
refuses, saying so, once its script ran out; ``what_the_model_saw`` reads a request of a
scripted provider as text and says how many there were when asked for one too many. (The
page's own examples, run by ``tests/test_docs.py``, cover ``approve_all`` and ``deny_all``.)
"""

from __future__ import annotations

import pytest

from mainspring import Approval, Ask, hookimpl, tool
from mainspring.testing import (
    EXHAUSTED,
    FauxProvider,
    faux,
    scripted_approver,
    scripted_run,
    what_the_model_saw,
)


@tool
def push(branch: str) -> str:
    """Push a branch."""
    return f"pushed {branch}"


class AskAlways:
    PLUGIN_NAME = "ask-always"

    @hookimpl
    def register_tools(self):  # type: ignore[no-untyped-def]
        return [push]

    @hookimpl
    def before_tool_call(self):  # type: ignore[no-untyped-def]
        return Ask("every call is asked about")


async def test_a_scripted_approver_refuses_once_its_script_ran_out() -> None:
    steps = [
        faux.tool_call("push", {"branch": "a"}),
        faux.tool_call("push", {"branch": "b"}),
        faux.text("done"),
    ]
    approver = scripted_approver(Approval(True, "fine"))

    _, recorder, provider = await scripted_run(steps, plugins=[AskAlways(), approver])

    first, second = recorder.of_type("tool_decision")
    assert (first.decision, first.reason) == ("allow", "fine")
    assert (second.decision, second.reason) == ("block", EXHAUSTED)
    assert [request.arguments["branch"] for request in approver.requests] == ["a", "b"]
    assert EXHAUSTED in what_the_model_saw(provider).tool_results[-1]


async def test_what_the_model_saw_reads_each_request() -> None:
    _, _, provider = await scripted_run(
        [faux.tool_call("push", {"branch": "a"}), faux.text("done")],
        "push a",
        plugins=[AskAlways(), scripted_approver(True)],
    )

    first = what_the_model_saw(provider, 0)
    assert first.text == "user: push a"
    assert what_the_model_saw(provider).lines[1:] == [
        'assistant calls push {"branch": "a"}',
        "tool_result push: pushed a",
    ]
    with pytest.raises(AssertionError, match="sent 2 request"):
        what_the_model_saw(provider, 2)
    with pytest.raises(AssertionError, match="sent 0 request"):
        what_the_model_saw(FauxProvider())
