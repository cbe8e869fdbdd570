"""The agent's transcript: the message list the kernel appends to, with cached views.

A run reads the whole transcript several times per turn (the request, the state
snapshot, the default converter's check); the transcript only grows between those reads.
So :class:`Transcript` keeps its tuple form until the next change, and knows how long its
leading run of *sendable* messages is (user and tool-result messages, and assistant
replies that completed: what the default ``convert_to_llm`` passes on unchanged),
extending that knowledge only over messages appended since it last looked. Every change
goes through :meth:`append`, :meth:`replace` or :meth:`clear`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, final, overload

from ..plugins.convert import is_sendable

__all__ = ["Transcript"]


@final
class Transcript:
    """A list of messages with a cached tuple and a known sendable prefix."""

    __slots__ = ("_checked", "_items", "_tuple")

    def __init__(self, messages: Iterable[Any] = ()) -> None:
        self._items: list[Any] = list(messages)
        self._tuple: tuple[Any, ...] | None = None
        self._checked = 0  # leading messages known to be sendable

    # -- changes ------------------------------------------------------------------------

    def append(self, message: Any) -> None:
        """Add ``message`` at the end."""
        self._items.append(message)
        self._tuple = None

    def replace(self, messages: Iterable[Any]) -> None:
        """Make ``messages`` the whole transcript (compaction)."""
        self._items = list(messages)
        self._tuple = None
        self._checked = 0

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
        items = self._items
        checked = self._checked
        while checked < len(items) and is_sendable(items[checked]):
            checked += 1
        self._checked = checked
        return checked == len(items)

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
