"""Which plugin compacts: the first non-``None`` ``compact`` result wins, in pluggy's order.

The most recently registered implementation is asked first; ``@hookimpl(tryfirst=True)``
puts one ahead of the others whatever the registration order, and the built-in fallback
is ``trylast``. ``compaction_end.plugin`` names the plugin whose result was used.
"""

from __future__ import annotations

from typing import Any

from mainspring import CompactionResult, CompactionSummary, UserMessage, hookimpl
from mainspring.testing import faux, scripted_run

asked: list[str] = []


class Huge:
    """Says the context is too big until a summary is in it."""

    name = "huge-counter"

    @hookimpl(tryfirst=True)
    def count_tokens(self, messages: tuple[Any, ...]) -> int:
        compacted = any(isinstance(m, CompactionSummary) for m in messages)
        return 10 if compacted else 10_000_000


def keep_last_prompt(messages: tuple[Any, ...], summary: str) -> CompactionResult:
    cut = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    return CompactionResult((CompactionSummary(summary=summary, removed=cut), *messages[cut:]))


class Compactor:
    def __init__(self, name: str) -> None:
        self.name = name

    @hookimpl
    def compact(self, messages: tuple[Any, ...]) -> CompactionResult:
        asked.append(self.name)
        return keep_last_prompt(messages, self.name)


class EagerCompactor(Compactor):
    @hookimpl(tryfirst=True)
    def compact(self, messages: tuple[Any, ...]) -> CompactionResult:
        asked.append(self.name)
        return keep_last_prompt(messages, self.name)


async def compacted_by(*plugins: Any) -> tuple[str, str | None]:
    asked.clear()
    history = [UserMessage(content="earlier question")]
    run = await scripted_run([faux.text("hi")], "now", plugins=[Huge(), *plugins], messages=history)
    [end] = run.recorder.of_type("compaction_end")
    [summary] = [m for m in run.agent.state.messages if isinstance(m, CompactionSummary)]
    return summary.summary, end.plugin


async def test_the_most_recently_registered_compactor_wins_and_the_event_names_it() -> None:
    assert await compacted_by(Compactor("first"), Compactor("second")) == ("second", "second")
    assert asked == ["second"]  # the later one is never asked


async def test_tryfirst_makes_a_compactor_win_whatever_the_registration_order() -> None:
    eager = EagerCompactor("eager")
    assert await compacted_by(eager, Compactor("late")) == ("eager", "eager")
    assert asked == ["eager"]


async def test_the_builtin_fallback_is_named_when_no_plugin_compacts() -> None:
    _, plugin = await compacted_by()
    assert plugin == "fallback_compaction"
