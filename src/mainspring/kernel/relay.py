"""The async hook relay: calls pluggy hook implementations the way the kernel needs.

pluggy has no async hooks. The relay takes each hook's implementations in pluggy's call
order (most recently registered first, ``tryfirst``/``trylast`` honoured; the kernel's
essential fallbacks after everything else), calls them one
at a time, awaits awaitable results, and applies the combining rule *after* awaiting, so a
decisive result stops the calls: no later implementation is called and no coroutine is
created for it. A failure is wrapped in :class:`~mainspring.HookError` naming the plugin;
:class:`~mainspring.StopRun` passes through untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, final

import pluggy

from ..errors import HookError, StopRun

__all__ = ["HookRelay", "Implementation"]


@final
@dataclass(frozen=True, slots=True)
class Implementation:
    """One plugin's implementation of one hook."""

    plugin: str
    function: Callable[..., Any]
    argnames: tuple[str, ...]
    trusted: bool = False
    """The kernel's own fallback: its outputs need no invariant check."""

    async def finish(self, hook: str, pending: Any) -> Any:
        """Await what :meth:`call_sync` returned for an async implementation; wrap failures."""
        try:
            return await pending
        except (StopRun, HookError):
            raise
        except Exception as error:
            raise HookError(hook, self.plugin, error) from error

    def call_sync(self, hook: str, kwargs: dict[str, Any]) -> Any:
        """Call with the arguments it asks for; wrap failures.

        An ``async def`` implementation returns its coroutine here: pass it to
        :meth:`finish`. Plain functions thus cost no coroutine per call.
        """
        try:
            return self.function(*[kwargs[name] for name in self.argnames])
        except StopRun:
            raise
        except Exception as error:
            raise HookError(hook, self.plugin, error) from error


@final
class HookRelay:
    """Ordered access to a plugin manager's implementations, cached until it changes."""

    __slots__ = ("_cache", "_fallbacks", "_pm")

    def __init__(self, pm: pluggy.PluginManager, fallbacks: frozenset[str] = frozenset()) -> None:
        self._pm = pm
        self._fallbacks = fallbacks
        self._cache: dict[str, tuple[Implementation, ...]] = {}

    def invalidate(self) -> None:
        """Forget the cached order (call after registering or unregistering a plugin)."""
        self._cache.clear()

    def implementations(self, hook: str) -> tuple[Implementation, ...]:
        """The implementations of ``hook`` in call order."""
        cached = self._cache.get(hook)
        if cached is not None:
            return cached
        caller = getattr(self._pm.hook, hook, None)
        found: list[Implementation] = []
        if caller is not None:
            for impl in reversed(caller.get_hookimpls()):
                if impl.hookwrapper or impl.wrapper:
                    continue
                found.append(
                    Implementation(
                        impl.plugin_name,
                        impl.function,
                        tuple(impl.argnames),
                        impl.plugin_name in self._fallbacks,
                    )
                )
        # the kernel's own fallbacks (the default converter, the token estimate, the
        # fallback compaction) answer only after every plugin, trylast ones included
        found.sort(key=lambda impl: impl.plugin in self._fallbacks)
        result = tuple(found)
        self._cache[hook] = result
        return result

    def has(self, hook: str) -> bool:
        """Whether any plugin implements ``hook``."""
        return bool(self.implementations(hook))
