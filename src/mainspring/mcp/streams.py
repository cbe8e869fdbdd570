"""A transport's two streams with a tap on each: what is sent, what is received, the end.

:func:`tapped` wraps the (read, write) pair an SDK transport yields, in place: no task
and no queue of its own, so a message costs a function call more. The connection uses it
to sieve tool listings (:mod:`~mainspring.mcp.listing`) and to learn that a server went
away while nobody was calling it (the read stream ends when a stdio server exits).
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

import anyio
from mcp.shared.message import SessionMessage

__all__ = ["tapped"]

Received = SessionMessage | Exception


def tapped(
    read: Any,
    write: Any,
    on_send: Callable[[SessionMessage], None],
    on_receive: Callable[[Received], Received],
    on_end: Callable[[], None],
) -> tuple[Any, Any]:
    """``(read, write)``, each message passed to the taps; ``on_end()`` once reading ends."""
    return _TappedReads(read, on_receive, on_end), _TappedWrites(write, on_send)


class _Wrapped:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc_val, exc_tb)
        return result


class _TappedReads(_Wrapped):
    def __init__(
        self, inner: Any, on_receive: Callable[[Received], Received], on_end: Callable[[], None]
    ) -> None:
        super().__init__(inner)
        self._on_receive = on_receive
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Received:
        try:
            item: Received = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_end()
            raise
        return self._on_receive(item)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Received:
        try:
            item: Received = await self._inner.__anext__()
        except StopAsyncIteration:
            self._on_end()
            raise
        return self._on_receive(item)


class _TappedWrites(_Wrapped):
    def __init__(self, inner: Any, on_send: Callable[[SessionMessage], None]) -> None:
        super().__init__(inner)
        self._on_send = on_send

    async def send(self, item: SessionMessage, /) -> None:
        self._on_send(item)
        await self._inner.send(item)
