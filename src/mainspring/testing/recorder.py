"""``EventRecorder``: a subscriber that keeps every event it sees, for assertions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar, overload

from ..events import Event, MessageEnd
from ..signal import AbortSignal
from .grammar import check_event_grammar

__all__ = ["EventRecorder"]

_E = TypeVar("_E")


class EventRecorder:
    """Records events in the order delivered; use it as ``agent.subscribe(recorder)``.

    Calling ``recorder(event, signal)`` appends ``event`` to :attr:`events` and returns
    ``None`` (it never blocks the run and never raises). The recorder keeps the event
    objects themselves, which are frozen, so nothing recorded can change later.
    """

    __slots__ = ("events",)

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event, signal: AbortSignal | None = None) -> None:
        """Record ``event``; ``signal`` is accepted for the listener signature and ignored."""
        self.events.append(event)

    def types(self) -> list[str]:
        """The ``type`` of every recorded event, in order."""
        return [event.type for event in self.events]

    @overload
    def of_type(self, kind: str) -> list[Event]: ...

    @overload
    def of_type(self, kind: type[_E]) -> list[_E]: ...

    def of_type(self, kind: str | type[Any]) -> list[Any]:
        """The recorded events of one kind, in order.

        ``kind`` is a type string (``"tool_execution_end"``) or an event class
        (``ToolExecutionEnd``, which also gives the list a precise static type).
        """
        if isinstance(kind, str):
            return [event for event in self.events if event.type == kind]
        return [event for event in self.events if isinstance(event, kind)]

    def messages(self, role: str | None = None) -> list[Any]:
        """The ``message`` of every ``message_end`` event, in order (of ``role`` if given)."""
        found = [event.message for event in self.events if isinstance(event, MessageEnd)]
        if role is None:
            return found
        return [message for message in found if getattr(message, "role", None) == role]

    def clear(self) -> None:
        """Forget every recorded event."""
        self.events.clear()

    def check_grammar(self) -> None:
        """Run :func:`~mainspring.testing.check_event_grammar` on the recorded events."""
        check_event_grammar(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __repr__(self) -> str:
        return f"EventRecorder({len(self.events)} events)"
