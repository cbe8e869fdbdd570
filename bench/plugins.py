"""In-process plugins implementing every run-time hook with a no-op answer (for W1h).

Each hook returns its "no opinion" value (``None``, or ``False`` for
``should_stop_after_turn``), so the run is unchanged and what is measured is the cost of
calling 20 plugins at every hook point. The floor gets the same plugins as plain objects
whose methods its loop calls directly.
"""

from __future__ import annotations

from typing import Any

from mainspring import hookimpl, nonblocking

__all__ = [
    "AsyncHookPlugin",
    "FloorHookPlugin",
    "NonblockingHookPlugin",
    "SyncHookPlugin",
    "hook_plugins",
]


class SyncHookPlugin:
    """Every run-time hook as a plain ``def`` (the once-per-call-or-turn ones are called in
    a worker thread)."""

    def __init__(self, index: int) -> None:
        self.name = f"bench-hooks-{index}"

    @hookimpl
    def transform_context(self, messages: Any) -> None:
        return None

    @hookimpl
    def convert_to_llm(self, messages: Any) -> None:
        return None

    @hookimpl
    def count_tokens(self, messages: Any) -> None:
        return None

    @hookimpl
    def before_tool_call(self, call: Any) -> None:
        return None

    @hookimpl
    def after_tool_result(self, result: Any) -> None:
        return None

    @hookimpl
    def should_stop_after_turn(self, state: Any) -> bool:
        return False

    @hookimpl
    def on_event(self, event: Any) -> None:
        return None


class NonblockingHookPlugin:
    """Every run-time hook as a plain ``def`` marked ``@nonblocking`` (called on the loop)."""

    def __init__(self, index: int) -> None:
        self.name = f"bench-hooks-{index}"

    @hookimpl
    @nonblocking
    def transform_context(self, messages: Any) -> None:
        return None

    @hookimpl
    @nonblocking
    def convert_to_llm(self, messages: Any) -> None:
        return None

    @hookimpl
    @nonblocking
    def count_tokens(self, messages: Any) -> None:
        return None

    @hookimpl
    @nonblocking
    def before_tool_call(self, call: Any) -> None:
        return None

    @hookimpl
    @nonblocking
    def after_tool_result(self, result: Any) -> None:
        return None

    @hookimpl
    @nonblocking
    def should_stop_after_turn(self, state: Any) -> bool:
        return False

    @hookimpl
    def on_event(self, event: Any) -> None:
        return None


class AsyncHookPlugin:
    """Every run-time hook as an ``async def`` (``count_tokens`` is synchronous)."""

    def __init__(self, index: int) -> None:
        self.name = f"bench-async-hooks-{index}"

    @hookimpl
    async def transform_context(self, messages: Any) -> None:
        return None

    @hookimpl
    async def convert_to_llm(self, messages: Any) -> None:
        return None

    @hookimpl
    @nonblocking  # a synchronous hook: what is measured here is the async ones
    def count_tokens(self, messages: Any) -> None:
        return None

    @hookimpl
    async def before_tool_call(self, call: Any) -> None:
        return None

    @hookimpl
    async def after_tool_result(self, result: Any) -> None:
        return None

    @hookimpl
    async def should_stop_after_turn(self, state: Any) -> bool:
        return False

    @hookimpl
    async def on_event(self, event: Any) -> None:
        return None


class FloorHookPlugin:
    """The floor's plugin: the same no-op answers, called directly."""

    def transform_context(self, messages: Any) -> None:
        return None

    def convert_to_llm(self, messages: Any) -> None:
        return None

    def count_tokens(self, messages: Any) -> None:
        return None

    def before_tool_call(self, call: Any) -> None:
        return None

    def after_tool_result(self, result: Any) -> None:
        return None

    def should_stop_after_turn(self, agent: Any) -> bool:
        return False

    def on_event(self, event: Any) -> None:
        return None


def hook_plugins(kind: type[Any], count: int = 20) -> list[Any]:
    """``count`` plugin instances of ``kind``."""
    if kind is FloorHookPlugin:
        return [FloorHookPlugin() for _ in range(count)]
    return [kind(index) for index in range(count)]
