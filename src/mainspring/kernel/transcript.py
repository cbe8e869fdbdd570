"""The agent's transcript: the message list the kernel appends to, with cached views.

A run reads the whole transcript several times per turn (the request, the state
snapshot, the default converter's check); the transcript only grows between those reads.
So :class:`Transcript` keeps its tuple form until the next change, and knows whether all
its messages are *sendable* (user and tool-result messages, and assistant replies that
completed: what the default ``convert_to_llm`` passes on unchanged) by counting the ones
that are not as they come in, and keeps the built-in token estimate current (a
:class:`~mainspring.estimate.RunningEstimate`): each message is looked at once.
Every change goes through :meth:`append`, :meth:`replace` or :meth:`clear`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, final, overload

from ..estimate import RunningEstimate
from ..invariants import is_sendable
from ..messages import share_field_sets

__all__ = ["Transcript"]


@final
class Transcript:
    """A list of messages with a cached tuple and a count of the unsendable ones."""

    __slots__ = ("_items", "_tuple", "_unsendable", "estimate")

    def __init__(self, messages: Iterable[Any] = ()) -> None:
        self._items: list[Any] = []
        self._tuple: tuple[Any, ...] | None = None
        self._unsendable = 0
        self.estimate = RunningEstimate()
        """The built-in estimate of the whole transcript."""
        self.replace(messages)

    # -- changes ------------------------------------------------------------------------

    def append(self, message: Any) -> None:
        """Add ``message`` at the end."""
        share_field_sets(message)
        self._items.append(message)
        self._tuple = None
        if not is_sendable(message):
            self._unsendable += 1
        self.estimate.add(message)

    def replace(self, messages: Iterable[Any]) -> None:
        """Make ``messages`` the whole transcript (compaction)."""
        items = list(messages)
        for message in items:
            share_field_sets(message)
        self._items = items
        self._tuple = None
        self._unsendable = len(items) - sum(map(is_sendable, items))
        self.estimate.reset(items)

    def clear(self) -> None:
        """Remove every message."""
        self.replace(())

    # -- views --------------------------------------------------------------------------

    def as_tuple(self) -> tuple[Any, ...]:
        """The messages as a tuple (the same object until the next change)."""
        cached = self._tuple
        if cached is None:
            cached = self._tuple = tuple(self._items)
        return cached

    def sendable(self) -> bool:
        """Whether every message is sendable as it is (see the module docstring)."""
        return self._unsendable == 0

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        return self._items[index]

    def __repr__(self) -> str:
        return f"<Transcript of {len(self._items)} messages>"
