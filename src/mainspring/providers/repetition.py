"""A repetition guard: stop a reply that has started to repeat itself.

Small models fall into loops (``/Moose-2023-02-22/Moose-2023-02-22/...`` until the
output-token cap, minutes on a CPU). :class:`RepetitionGuard` watches the generated text
and says when its tail has become periodic; :func:`stop_repetition` wraps a provider's
event stream with one and ends the reply there with ``stop_reason="repetition"``.

What counts as repeating. The text is first normalised: every run of digits becomes
``0`` and every run of whitespace one space, so ``1. a.txt 2. a.txt 3. a.txt`` and
re-flowed lines repeat too. The reply is repeating when the last ``min_span``
normalised characters (at least ``min_repeats`` periods) consist of one unit of at most
``max_period`` characters over and over. With the defaults a unit must recur for 240
characters and at least 4 times: a sentence said twice, a short table rule or a line of
``=`` does not trigger it; a path, a phrase or a list item looping does.

The text checked is the reply's text and its tool calls' argument JSON (one stream, in
order). The check runs on the last few hundred characters every 16 new characters, so
its cost does not grow with the reply.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from .base import StreamDone, StreamEvent, TextDelta, ToolCallDelta

__all__ = ["RepetitionGuard", "stop_repetition"]

_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")
_CHECK_EVERY = 16


class RepetitionGuard:
    """Says when the text fed to it has become one unit repeated (see the module docs).

    ``min_span`` is how many normalised characters the repetition must cover,
    ``min_repeats`` how many times the unit must occur at least, ``max_period`` the
    longest unit looked for. Raises ``ValueError`` for values below 1 (``min_repeats``
    below 2).
    """

    def __init__(self, *, min_span: int = 240, min_repeats: int = 4, max_period: int = 120) -> None:
        if min_span < 1 or max_period < 1 or min_repeats < 2:
            raise ValueError(
                "RepetitionGuard needs min_span >= 1, max_period >= 1 and min_repeats >= 2"
            )
        self.min_span = min_span
        self.min_repeats = min_repeats
        self.max_period = max_period
        self._keep = 2 * max(min_span, max_period * min_repeats)
        self._raw = ""  # the tail of the text, not yet normalised
        self._unchecked = 0
        self.period: int | None = None
        """The length of the repeating unit once :meth:`feed` returned ``True``."""

    def feed(self, text: str) -> bool:
        """Add ``text``; ``True`` once the tail is a repetition (and from then on)."""
        if self.period is not None:
            return True
        self._raw = (self._raw + text)[-self._keep :]
        self._unchecked += len(text)
        if self._unchecked < _CHECK_EVERY:
            return False
        self._unchecked = 0
        self.period = self._repeating_period()
        return self.period is not None

    def _repeating_period(self) -> int | None:
        tail = _SPACE.sub(" ", _DIGITS.sub("0", self._raw))
        for period in range(1, self.max_period + 1):
            span = max(self.min_span, period * self.min_repeats)
            if span > len(tail):
                return None
            window = tail[-span:]
            # a string has period p exactly when it equals itself shifted by p
            if window[period:] == window[:-period]:
                return period
        return None


async def stop_repetition(
    events: AsyncIterator[StreamEvent], guard: RepetitionGuard
) -> AsyncIterator[StreamEvent]:
    """Pass ``events`` through until ``guard`` sees a repetition, then end the reply.

    The delta that completed the repetition is passed on, followed by
    ``StreamDone("repetition")``; nothing more is read from ``events`` (the caller
    closes it, which ends the request).
    """
    async for event in events:
        if isinstance(event, TextDelta):
            repeating = guard.feed(event.text)
        elif isinstance(event, ToolCallDelta):
            repeating = guard.feed(event.arguments_json_fragment)
        else:
            repeating = False
        yield event
        if repeating:
            yield StreamDone("repetition")
            return
