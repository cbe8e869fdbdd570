"""How a plugin marks its hook implementations, and what a plugin object implements.

:data:`hookimpl` marks a function as the implementation of the hook of its name;
:func:`redactor`, :func:`nonblocking` and :func:`observes_when`, stacked under it, refine
how the kernel calls it. :func:`implemented_hooks` reads the marks off a plugin without
registering it anywhere.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import pluggy

from .table import HOOKS

__all__ = [
    "PROJECT",
    "hookimpl",
    "implemented_hooks",
    "is_nonblocking",
    "is_redactor",
    "nonblocking",
    "observes_when",
    "redactor",
    "wanted_predicate",
]

PROJECT = "mainspring"
"""The pluggy project name: the marks' prefix and the entry-point group."""

hookimpl = pluggy.HookimplMarker(PROJECT)
"""Marks a plugin function as a hook implementation (``tryfirst``/``trylast`` accepted)."""

_F = TypeVar("_F", bound=Callable[..., Any])
_MARK = f"{PROJECT}_impl"


_REDACTOR = "mainspring_redactor"
_NONBLOCKING = "mainspring_nonblocking"
_WANTED = "mainspring_observes_when"


def redactor(function: _F) -> _F:
    """Mark an ``after_tool_result`` or ``filter_tool_update`` implementation a redactor.

    Stack it under ``@mainspring.hookimpl``. A redactor is called after every
    implementation of the same hook that is not one, whatever their ``tryfirst`` or
    ``trylast`` (among redactors, pluggy's order holds), so it sees, and can clean, what
    every other filter produced.
    """
    setattr(function, _REDACTOR, True)
    return function


def is_redactor(function: Callable[..., Any]) -> bool:
    """Whether ``function`` was marked with :func:`redactor`."""
    return getattr(function, _REDACTOR, False) is True


def nonblocking(function: _F) -> _F:
    """Mark a plain ``def`` hook implementation as one that returns at once.

    Stack it under ``@mainspring.hookimpl``. A plugin's plain ``def`` of a hook called
    once per tool call or turn (a gate, a result filter, a transform, ...) is otherwise
    called in a worker thread, so that one that blocks cannot freeze the event loop.
    Marked, it is called on the loop, as ``on_event`` implementations are: the mark is a
    promise that it only computes (no I/O, no lock, no waiting). One that blocks anyway
    blocks the loop, and ``abort()`` and ``hooks.timeout_s`` with it.
    """
    setattr(function, _NONBLOCKING, True)
    return function


def is_nonblocking(function: Callable[..., Any]) -> bool:
    """Whether ``function`` was marked with :func:`nonblocking`."""
    return getattr(function, _NONBLOCKING, False) is True


def observes_when(predicate: Callable[[Any], bool]) -> Callable[[_F], _F]:
    """Mark an ``on_event`` implementation as needed only when ``predicate(agent)`` holds.

    Stack it under ``@mainspring.hookimpl``. The kernel asks ``predicate(agent)`` when it
    prepares a run's event delivery (at the run's start, and again if plugins or
    subscribers change during the run); while it is false the implementation is not
    called for that run's events at all, so an observer that is switched off (a log
    below its level, tracing not configured, no session file) costs nothing per event.
    A predicate that raises counts as true: the observer is called, and decides itself.
    """

    def mark(function: _F) -> _F:
        setattr(function, _WANTED, predicate)
        return function

    return mark


def wanted_predicate(function: Callable[..., Any]) -> Callable[[Any], bool] | None:
    """The predicate ``function`` was marked with by :func:`observes_when` (one that raises
    counts as true), or ``None``."""
    predicate = getattr(function, _WANTED, None)
    if predicate is None:
        return None

    def wanted(agent: Any) -> bool:
        try:
            return bool(predicate(agent))
        except Exception:
            return True

    return wanted


def implemented_hooks(plugin: Any) -> tuple[str, ...]:
    """The names of the hooks ``plugin`` implements, sorted.

    A hook counts when the plugin has an attribute of that hook's name marked with
    ``@mainspring.hookimpl``. A plugin with none contributes nothing: loading it is almost
    always a mistake (a missing decorator, the wrong module named).
    """
    found = []
    for name in sorted(HOOKS):
        try:
            value = inspect.getattr_static(plugin, name)
        except AttributeError:
            continue
        function = getattr(value, "__func__", value)  # staticmethod/classmethod
        if getattr(function, _MARK, None) is not None:
            found.append(name)
    return tuple(found)
