"""What a plugin object implements, read off it without registering it anywhere."""

from __future__ import annotations

import inspect
from typing import Any

from .hookspecs import ASYNC_HOOKS, PROJECT, SYNC_HOOKS

__all__ = ["implemented_hooks"]

_MARK = f"{PROJECT}_impl"


def implemented_hooks(plugin: Any) -> tuple[str, ...]:
    """The names of the hooks ``plugin`` implements, sorted.

    A hook counts when the plugin has an attribute of that hook's name marked with
    ``@mainspring.hookimpl``. A plugin with none contributes nothing: loading it is almost
    always a mistake (a missing decorator, the wrong module named).
    """
    found = []
    for name in sorted(SYNC_HOOKS | ASYNC_HOOKS):
        try:
            value = inspect.getattr_static(plugin, name)
        except AttributeError:
            continue
        function = getattr(value, "__func__", value)  # staticmethod/classmethod
        if getattr(function, _MARK, None) is not None:
            found.append(name)
    return tuple(found)
