"""``review_reply``: a reply is reviewed before its ``message_end``; a failing reviewer
withholds it (fail closed), as a failing gate blocks a call."""

from __future__ import annotations

from typing import Any

from mainspring import Block, hookimpl, tool
from mainspring.testing import check_event_grammar, faux, scripted_run


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return "the number is 42"


class Counting:
    name = "counting"

    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl
    def review_reply(self, message: Any) -> None:
        self.seen.append(message.text)


async def test_only_replies_are_reviewed_not_messages_that_call_tools() -> None:
    reviewer = Counting()
    steps = [faux.tool_call("lookup", {"query": "x"}), faux.text("It is 42.")]
    run = await scripted_run(steps, tools=[lookup], plugins=[reviewer])

    assert reviewer.seen == ["It is 42."]
    check_event_grammar(run.recorder.events)


async def test_a_failing_reviewer_withholds_the_reply_and_is_reported() -> None:
    class Broken:
        name = "broken-reviewer"

        @hookimpl
        def review_reply(self, message: Any) -> None:
            raise RuntimeError("classifier down")

    run = await scripted_run([faux.text("secret plans")], plugins=[Broken()])

    (end,) = run.recorder.messages("assistant")
    assert "secret plans" not in end.text and "broken-reviewer" in end.text
    (error,) = run.recorder.of_type("hook_error")
    assert error.hook == "review_reply" and error.outcome == "reply withheld (fail closed)"
    assert run.agent.state.messages[-1].text == end.text
    check_event_grammar(run.recorder.events)


async def test_the_first_decision_wins() -> None:
    later = Counting()

    class Blocks:
        name = "blocks"

        @hookimpl(tryfirst=True)
        def review_reply(self) -> Block:
            return Block("not today")

    run = await scripted_run([faux.text("hello")], plugins=[later, Blocks()])

    assert later.seen == []
    assert run.recorder.messages("assistant")[0].text == (
        "[The reply was withheld by blocks: not today]"
    )


async def test_garbage_from_a_reviewer_withholds_the_reply() -> None:
    class Garbage:
        name = "garbage"

        @hookimpl
        def review_reply(self) -> int:
            return 7

    run = await scripted_run([faux.text("hello")], plugins=[Garbage()])

    assert "withheld by garbage" in run.recorder.messages("assistant")[0].text
    (error,) = run.recorder.of_type("hook_error")
    assert "not a Block or a str" in error.error


async def test_a_reviewer_raising_a_base_exception_withholds_the_reply() -> None:
    class Odd(BaseException):
        pass

    class Hostile:
        name = "hostile-reviewer"

        @hookimpl
        def review_reply(self) -> None:
            raise Odd("not an Exception")

    class Exits:
        name = "exits-reviewer"

        @hookimpl
        async def review_reply(self) -> None:
            raise GeneratorExit

    for plugin in (Hostile(), Exits()):
        run = await scripted_run([faux.text("the secret")], plugins=[plugin])
        (end,) = run.recorder.messages("assistant")
        assert "the secret" not in end.text and plugin.name in end.text
        check_event_grammar(run.recorder.events)


async def test_a_huge_nested_edit_is_validated_and_refused() -> None:
    from mainspring import Edit

    nested: Any = "x"
    for _ in range(500):
        nested = {"a": nested}

    class Rewrites:
        name = "rewrites"

        @hookimpl
        def before_tool_call(self) -> Edit:
            return Edit({"query": nested})

    run = await scripted_run(
        [faux.tool_call("lookup", {"query": "x"}), faux.text("done")],
        tools=[lookup],
        plugins=[Rewrites()],
    )
    (decision,) = run.recorder.of_type("tool_decision")
    assert decision.decision == "block" and decision.plugin == "rewrites"
    check_event_grammar(run.recorder.events)
