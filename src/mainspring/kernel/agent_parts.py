"""Parts of :class:`~mainspring.Agent` that stand on their own.

:class:`Editing` replaces or extends an idle agent's transcript; :class:`Approving`
answers tool calls waiting for approval (``agent.approve()``) and keeps the approvals
remembered for the session; :class:`Closing` releases what plugins hold for the agent
(``on_close``, ``aclose``, ``async with``). ``Agent`` inherits all three.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Self

from ..errors import AgentBusyError
from .invariants import transcript_problem

if TYPE_CHECKING:
    from .run import Run
    from .state import Core

__all__ = ["Approving", "Closing", "Editing"]


class Editing:
    """``agent.replace_messages()``, ``agent.append_message()`` and ``agent.reset()``."""

    _core: Core

    def replace_messages(self, messages: Iterable[Any]) -> None:
        """Make ``messages`` the transcript (idle only; the list is copied, not the messages).

        Raises :class:`AgentBusyError` while a run is active, ``ValueError`` if the
        messages break the transcript invariants (a tool result without its call, a call
        answered twice, an entry without a ``role``).
        """
        if self._core.is_streaming:
            raise AgentBusyError("replace_messages")
        candidate = tuple(messages)
        problem = transcript_problem(candidate)
        if problem:
            raise ValueError(f"these messages do not make a valid transcript: {problem}")
        self._core.messages.replace(candidate)

    def append_message(self, message: Any) -> None:
        """Add ``message`` at the end of the transcript (idle only; see
        :meth:`replace_messages` for the checks)."""
        if self._core.is_streaming:
            raise AgentBusyError("append_message")
        candidate = (*self._core.messages.as_tuple(), message)
        problem = transcript_problem(candidate)
        if problem:
            raise ValueError(f"appending this message breaks the transcript: {problem}")
        self._core.messages.append(message)

    def reset(self) -> None:
        """Clear the transcript, both queues and the error (idle only)."""
        if self._core.is_streaming:
            raise AgentBusyError("reset")
        core = self._core
        core.messages.clear()
        core.steering.clear()
        core.follow_up.clear()
        core.error_message = None


class Approving:
    """``agent.approve()`` and ``agent.remembered_approvals``."""

    _run: Run | None
    _core: Core

    def approve(
        self,
        tool_call_id: str,
        allow: bool,
        *,
        remember: str | None = None,
        reason: str | None = None,
        content: Mapping[str, Any] | None = None,
    ) -> None:
        """Decide a tool call waiting for approval (a ``tool_approval_request`` event).

        Needs ``settings.approvals.api``. ``remember="tool"`` allows the tool, and
        ``remember="call"`` the tool with these exact arguments, for the rest of the
        session; ``reason`` is recorded in the ``tool_decision`` (and shown to the model
        when refused). The first answer for a call wins. Raises ``ValueError`` when no
        call with that id is waiting (idle, decided already, or never asked about).
        A running call's question (the event's ``question``) is answered with
        ``allow=True`` and ``content``: the form's values, or ``{}`` for a URL; they must
        fit the question (``ValueError`` otherwise).
        """
        from .approvals import approval_from_api

        run = self._run
        pending = run.approvals if run is not None else None
        asking = run.questions if run is not None else None
        if asking is not None and tool_call_id in asking.requests:
            pending = asking
        approval_from_api(pending, tool_call_id, allow, remember, reason, content)

    @property
    def remembered_approvals(self) -> tuple[Any, ...]:
        """The approvals kept for the rest of the session (``Remembered`` values)."""
        return tuple(self._core.remembered_approvals)


class Closing:
    """``agent.on_close()``, ``agent.aclose()`` and ``async with agent``."""

    _closers: list[Callable[[], Awaitable[None] | None]]
    _closed: bool

    def abort(self, reason: str = "aborted") -> None:
        raise NotImplementedError  # the Agent's

    async def wait_for_idle(self) -> None:
        raise NotImplementedError  # the Agent's

    def on_close(self, callback: Callable[[], Awaitable[None] | None]) -> None:
        """Call ``callback()`` (awaited if it returns an awaitable) when the agent is closed.

        For plugins that hold resources for the agent (a server process, a connection):
        register in ``register_tools`` or later; :meth:`aclose` calls the callbacks, the
        last registered first.
        """
        if not callable(callback):
            raise TypeError(f"on_close takes a callable, got {callback!r}")
        self._closers.append(callback)

    async def aclose(self) -> None:
        """Release what the agent holds: abort an active run, wait for it, run the closers.

        Every :meth:`on_close` callback is called, the last registered first, even when
        one raises; the first exception is re-raised once all have run. Idempotent: a
        second call does nothing. ``async with Agent(...) as agent:`` closes on exit.
        """
        if self._closed:
            return
        self._closed = True
        self.abort("closed")
        await self.wait_for_idle()
        failure: BaseException | None = None
        while self._closers:
            callback = self._closers.pop()
            try:
                result = callback()
                if inspect.isawaitable(result):
                    await result
            except Exception as error:
                failure = failure or error
        if failure is not None:
            raise failure

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
