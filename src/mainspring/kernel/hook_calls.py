"""Calling hook implementations under the run's guard: the base of the hook facade.

:class:`HookCaller` holds the relay, the run's :class:`~mainspring.kernel.guard.Guard` and
the per-call deadline, calls a plugin's plain ``def`` off the event loop where a hook is
called at most once per tool call or turn (:meth:`HookCaller.off_loop`), and decides what
an exception from an implementation means (:meth:`HookCaller._failure`); the helpers here
phrase the failures the kernel finds itself.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, final

from ..errors import HookError, HookTimeoutError, StopRun
from ..signal import RunAborted
from ..workers import in_daemon_thread
from .guard import Guard
from .relay import HookRelay, Implementation

__all__ = ["GateDecision", "HookCaller", "Report"]

Report = Callable[[HookError, str], Awaitable[None]]
"""``report(error, outcome)``: emit a ``hook_error`` saying what the kernel did."""


@final
@dataclass(frozen=True, slots=True)
class GateDecision:
    """The outcome of ``before_tool_call``: ``plugin`` is ``None`` when allowed.

    ``asked`` is ``(plugin, reason)`` when no gate blocked and some asked for approval
    (the first gate that asked; the reasons of all of them).
    """

    blocked: bool
    plugin: str | None = None
    reason: str | None = None
    asked: tuple[str, str] | None = None


def _as_tuple(value: Any, hook: str, plugin: str) -> tuple[Any, ...]:
    if isinstance(value, tuple):
        return value
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return tuple(value)
    raise HookError(hook, plugin, f"returned {type(value).__name__}, expected a sequence")


def _attributed(hook: str, impl: Implementation, error: BaseException) -> HookError:
    """``error`` as a :class:`HookError` of ``impl`` (one that already is passes as is)."""
    if isinstance(error, HookError):
        return error
    wrapped = HookError(hook, impl.plugin, error)
    wrapped.__cause__ = error
    return wrapped


def _timed_out(error: HookError) -> bool:
    return isinstance(error.__cause__, HookTimeoutError)


def _kernel_finding(error: HookError) -> bool:
    """Whether the kernel wrote ``error``'s text (not a plugin's exception message)."""
    return error.__cause__ is None or _timed_out(error)


def _text(reason: object) -> str:
    """A gate's reason as text; a reason that is not a string is named by its type."""
    return reason if isinstance(reason, str) else f"(a {type(reason).__name__} as the reason)"


@final
@dataclass(frozen=True, slots=True)
class _Raised:
    """What an implementation raised in a worker thread, carried back to be raised on the
    loop (as if it had been called there: ``GeneratorExit`` or ``SystemExit`` included)."""

    error: BaseException


def _call_in_thread(impl: Implementation, args: tuple[Any, ...]) -> Any:
    try:
        return impl.call(args)
    except BaseException as error:
        return _Raised(error)


def _stalled(hook: str, impl: Implementation) -> HookError:
    return HookError(
        hook,
        impl.plugin,
        "it timed out or ignored cancellation earlier in this run, so it is not called again",
    )


class HookCaller:
    """Calls every hook with its combining rule and failure semantics.

    During a run, awaitable results are awaited under the run's
    :class:`~mainspring.kernel.guard.Guard` with the ``hooks.timeout_s`` deadline (see
    :meth:`begin_run`). What passes through untouched, whatever the hook: ``StopRun``,
    ``KeyboardInterrupt``/``SystemExit``, the run's own cancellation and its abort. Every
    other exception, ``BaseException`` subclasses included, is the implementation's
    failure. An implementation that timed out or was detached is not called again in the
    run: where it would be, the kernel acts as if it had failed (a gate blocks, a filter
    withholds, a transform or observer is skipped).
    """

    __slots__ = ("guard", "relay", "timeout_s")

    def __init__(self, relay: HookRelay) -> None:
        self.relay = relay
        self.guard = Guard(0.0)
        self.timeout_s: float | None = None

    def begin_run(self, guard: Guard, timeout_s: float | None) -> None:
        """Use ``guard`` and the per-call deadline ``timeout_s`` for the run starting."""
        self.guard = guard
        self.timeout_s = timeout_s

    async def off_loop(
        self,
        impl: Implementation,
        args: tuple[Any, ...],
        timeout_s: float | None,
        *,
        awaitable: bool = True,
    ) -> Any:
        """Call ``impl`` (a plugin's plain ``def``) in a daemon thread and await it here.

        So a blocking implementation (a policy server that never answers, a busy loop)
        cannot freeze the event loop: the wait for it is cut by ``abort()`` and by its
        deadline (``timeout_s``, ``None`` for none) exactly as for an
        ``async def``, and the thread is left to finish on its own, its result dropped.
        An awaitable it returns is awaited here, under the guard too (unless
        ``awaitable`` is false: a synchronous hook, whose caller refuses one).
        What it raises is raised here, as if it had been called on the loop.
        """
        result = await self.guard.watch(
            in_daemon_thread(_call_in_thread, impl, args, name=f"mainspring-hook {impl.plugin}"),
            impl,
            timeout_s,
        )
        if isinstance(result, _Raised):
            raise result.error
        if awaitable and result is not None and inspect.isawaitable(result):
            result = await self.guard.watch(result, impl, timeout_s)
        return result

    def _failure(self, hook: str, impl: Implementation, raised: BaseException) -> HookError:
        """``raised`` as ``impl``'s failure; re-raises what must pass through."""
        if isinstance(raised, HookError):
            return raised
        if isinstance(raised, StopRun | KeyboardInterrupt | SystemExit):
            raise raised
        if isinstance(raised, RunAborted) and self.guard.aborted:
            raise raised
        if isinstance(raised, asyncio.CancelledError):
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise raised
        return _attributed(hook, impl, raised)
