"""Blocking tool functions run in daemon threads the event loop never has to join.

``asyncio.to_thread`` uses the loop's default executor, whose threads ``asyncio.run()``
joins at exit: one blocking tool that never returns would keep the program from ending.
:func:`in_daemon_thread` runs the function in a daemon thread of its own and hands the
outcome back to the loop; if nobody waits for it any more (the call was aborted or timed
out), the outcome is dropped and the thread ends with the function, or with the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["in_daemon_thread"]

_T = TypeVar("_T")


async def in_daemon_thread(
    function: Callable[..., _T], *args: Any, name: str = "mainspring-worker"
) -> _T:
    """``function(*args)`` in a new daemon thread, with the caller's context variables."""
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[_T] = loop.create_future()
    context = contextvars.copy_context()

    def work() -> None:
        try:
            result = context.run(function, *args)
        except BaseException as error:  # handed to the awaiting task, whatever it is
            _hand_back(loop, outcome, None, error)
        else:
            _hand_back(loop, outcome, result, None)

    threading.Thread(target=work, name=name, daemon=True).start()
    return await outcome


def _hand_back(
    loop: asyncio.AbstractEventLoop,
    outcome: asyncio.Future[Any],
    result: Any,
    error: BaseException | None,
) -> None:
    def settle() -> None:
        if outcome.done():
            return  # the caller stopped waiting (abort, timeout)
        if error is None:
            outcome.set_result(result)
        elif isinstance(error, KeyboardInterrupt | SystemExit):
            outcome.set_exception(RuntimeError(f"the tool raised {type(error).__name__}"))
        else:
            outcome.set_exception(error)

    with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
        loop.call_soon_threadsafe(settle)
