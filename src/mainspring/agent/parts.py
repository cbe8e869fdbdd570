"""The parts an :class:`~mainspring.Agent` is composed of that stand on their own.

:class:`TranscriptEditor` replaces or extends an idle agent's transcript (``agent.
replace_messages()``, ``append_message()``, ``reset()``); :class:`Closers` holds what
plugins registered to release when the agent is closed (``agent.on_close()``,
``aclose()``). The agent owns one of each and hands its public methods to them.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, final

from ..contract.errors import AgentBusyError
from ..invariants import transcript_problem

if TYPE_CHECKING:
    from ..kernel.state import Core

__all__ = ["Closers", "TranscriptEditor"]

Closer = Callable[[], Awaitable[None] | None]


@final
class TranscriptEditor:
    """Edits of an idle agent's transcript, each checked against the transcript's rules.

    Every edit raises :class:`~mainspring.AgentBusyError` while a run is active (named
    after ``action``, the agent method called) and ``ValueError`` when the result would
    break the transcript invariants; nothing is changed then.
    """

    __slots__ = ("_core",)

    def __init__(self, core: Core) -> None:
        self._core = core

    def _idle(self, action: str) -> Core:
        core = self._core
        if core.is_streaming:
            raise AgentBusyError(action)
        return core

    def replace(self, messages: Iterable[Any]) -> None:
        """Make ``messages`` the transcript (the list is copied, not the messages)."""
        core = self._idle("replace_messages")
        candidate = tuple(messages)
        problem = transcript_problem(candidate)
        if problem:
            raise ValueError(f"these messages do not make a valid transcript: {problem}")
        core.messages.replace(candidate)

    def append(self, message: Any) -> None:
        """Add ``message`` at the end of the transcript."""
        core = self._idle("append_message")
        candidate = (*core.messages.as_tuple(), message)
        problem = transcript_problem(candidate)
        if problem:
            raise ValueError(f"appending this message breaks the transcript: {problem}")
        core.messages.append(message)

    def reset(self) -> None:
        """Clear the transcript, both queues and the error."""
        core = self._idle("reset")
        core.messages.clear()
        core.steering.clear()
        core.follow_up.clear()
        core.error_message = None


@final
class Closers:
    """The callbacks to call when the agent is closed, and whether it was."""

    __slots__ = ("_callbacks", "closed")

    def __init__(self) -> None:
        self._callbacks: list[Closer] = []
        self.closed = False

    def add(self, callback: Closer) -> None:
        """Call ``callback()`` at :meth:`close`; ``TypeError`` if it is not callable."""
        if not callable(callback):
            raise TypeError(f"on_close takes a callable, got {callback!r}")
        self._callbacks.append(callback)

    async def close(self) -> None:
        """Call every callback, the last added first, awaiting what they return.

        Every callback is called even when one raises; the first exception is re-raised
        once all have run.
        """
        failure: BaseException | None = None
        while self._callbacks:
            callback = self._callbacks.pop()
            try:
                result = callback()
                if inspect.isawaitable(result):
                    await result
            except Exception as error:
                failure = failure or error
        if failure is not None:
            raise failure
