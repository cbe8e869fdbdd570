"""What an exception from a hook implementation means: the one classifier.

Whatever the hook, some exceptions are not the implementation's failure and pass through
untouched: :class:`~mainspring.StopRun` (a deliberate end of the run),
``KeyboardInterrupt``/``SystemExit``, the run's own abort (``RunAborted`` once the run's
guard is aborted) and the cancellation of the task running the hook. Every other
exception, ``BaseException`` subclasses included, is the implementation's failure, turned
into a :class:`~mainspring.HookError` naming the plugin; what that failure then means is the
hook's rule in :mod:`mainspring.contract.table`.
"""

from __future__ import annotations

import asyncio

from ..contract.errors import HookError, HookTimeoutError, StopRun
from ..contract.table import HOOKS
from ..signal import RunAborted
from .guard import Guard

__all__ = ["failure_of", "kernel_finding", "passes_through", "stalled", "timed_out"]


def passes_through(raised: BaseException, guard: Guard) -> bool:
    """Whether ``raised`` is not an implementation's failure (see the module)."""
    if isinstance(raised, StopRun | KeyboardInterrupt | SystemExit):
        return True
    if isinstance(raised, RunAborted):
        return guard.aborted
    if isinstance(raised, asyncio.CancelledError):
        task = asyncio.current_task()
        return task is not None and task.cancelling() > 0
    return False


def failure_of(hook: str, plugin: str, raised: BaseException) -> HookError:
    """``raised`` as the failure of ``plugin``'s implementation of ``hook``.

    A :class:`HookError` passes as is. For a *discreet* hook (its inputs are tool content)
    the exception's message is left out: it could quote what a redactor was about to
    remove, and it would reach events, logs and traces.
    """
    if isinstance(raised, HookError):
        return raised
    rules = HOOKS.get(hook)
    if rules is not None and rules.discreet and not isinstance(raised, HookTimeoutError):
        error = HookError(hook, plugin, f"{type(raised).__name__} (its message is not shown)")
    else:
        error = HookError(hook, plugin, raised)
    error.__cause__ = raised
    return error


def stalled(hook: str, plugin: str) -> HookError:
    """The failure of an implementation not called again in this run."""
    return HookError(
        hook,
        plugin,
        "it timed out or ignored cancellation earlier in this run, so it is not called again",
    )


def timed_out(error: HookError) -> bool:
    """Whether ``error`` is a deadline the implementation missed."""
    return isinstance(error.__cause__, HookTimeoutError)


def kernel_finding(error: HookError) -> bool:
    """Whether the kernel wrote ``error``'s text (not a plugin's exception message)."""
    return error.__cause__ is None or timed_out(error)
