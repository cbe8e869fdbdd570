"""The abort signal a run hands to providers, tools and hooks."""

from __future__ import annotations

import asyncio
from typing import final

__all__ = ["AbortSignal", "RunAborted"]


class RunAborted(Exception):
    """Raised by :meth:`AbortSignal.raise_if_aborted` once the run was aborted."""


@final
class AbortSignal:
    """A one-way flag set when the run is aborted.

    ``aborted`` and ``reason`` can be read at any time; ``await wait()`` returns once the
    signal is set; ``raise_if_aborted()`` raises :class:`RunAborted`. The signal is not
    bound to an event loop until :meth:`wait` is first awaited, so it can be created
    anywhere. Setting it twice keeps the first reason.
    """

    __slots__ = ("_aborted", "_event", "_reason")

    def __init__(self) -> None:
        self._aborted = False
        self._reason: str | None = None
        self._event: asyncio.Event | None = None

    @property
    def aborted(self) -> bool:
        """Whether the run was aborted."""
        return self._aborted

    @property
    def reason(self) -> str | None:
        """Why the run was aborted, or ``None`` while it was not."""
        return self._reason

    def set(self, reason: str = "aborted") -> None:
        """Abort: later calls do nothing."""
        if self._aborted:
            return
        self._aborted = True
        self._reason = reason
        if self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        """Return once the signal is set (at once if it already is)."""
        if self._aborted:
            return
        if self._event is None:
            self._event = asyncio.Event()
        await self._event.wait()

    def raise_if_aborted(self) -> None:
        """Raise :class:`RunAborted` if the run was aborted."""
        if self._aborted:
            raise RunAborted(self._reason or "aborted")

    def __repr__(self) -> str:
        state = f"aborted, reason={self._reason!r}" if self._aborted else "active"
        return f"AbortSignal({state})"
