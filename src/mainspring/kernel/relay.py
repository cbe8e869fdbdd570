"""The async hook relay: calls pluggy hook implementations the way the kernel needs.

pluggy has no async hooks. The relay takes each hook's implementations in pluggy's call
order (most recently registered first, ``tryfirst``/``trylast`` honoured; the kernel's
essential fallbacks after everything else), calls them one at a time, awaits awaitable
results, and applies the combining rule *after* awaiting, so a decisive result stops the
calls: no later implementation is called and no coroutine is created for it. A failure is
wrapped in :class:`~mainspring.HookError` naming the plugin; :class:`~mainspring.StopRun`
passes through untouched.

Each hook's implementations are compiled once into a *call plan* (cached until a plugin
is registered or unregistered): the kernel passes a hook's arguments positionally, in the
order of its hookspec, and each :class:`Implementation` records how it takes them. An
implementation that asks for a leading run of the spec's arguments (``def on_event(event)``
or ``def on_event(event, agent, signal)``, the usual case) is called directly with those;
any other selection goes through a slower, general path. So a no-op implementation costs
one plain Python call, and an ``async def`` one a coroutine that is awaited at once.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar, final

import pluggy

from ..errors import HookError, StopRun
from .capabilities import CAPABILITY_OF

__all__ = [
    "GENERAL",
    "HookRelay",
    "Implementation",
    "PlanStep",
    "call_plain",
    "is_nonblocking",
    "is_redactor",
    "nonblocking",
    "redactor",
]

_F = TypeVar("_F", bound=Callable[..., Any])

GENERAL = -1
"""``Implementation.arity`` of one that does not take a leading run of the spec's arguments."""


@final
@dataclass(frozen=True, slots=True)
class Implementation:
    """One plugin's implementation of one hook, with how to pass it its arguments.

    ``arity`` is how many leading spec arguments it takes, or :data:`GENERAL`, in which
    case ``select`` picks its positional arguments from the spec-ordered tuple and
    ``keywords`` names the ``(name, index)`` of the defaulted ones it also gets.
    ``is_async`` says it is an ``async def`` (its result is a coroutine to await).
    ``single`` lets a hot loop call one that takes a single argument directly.
    """

    plugin: str
    function: Callable[..., Any]
    argnames: tuple[str, ...]
    trusted: bool = False
    """The kernel's own fallback: its outputs need no invariant check."""
    arity: int = 0
    is_async: bool = False
    select: tuple[int, ...] = ()
    keywords: tuple[tuple[str, int], ...] = field(default=())
    single: int = -1
    """The spec index of its only argument when it takes exactly one, else -1."""
    off_loop: bool = False
    """A plugin's plain ``def`` (not one of mainspring's built-ins, not marked
    :func:`nonblocking`): the hooks called at most once per tool call or turn call it in
    a daemon thread (see :meth:`~mainspring.kernel.hook_calls.HookCaller.off_loop`)."""

    def general_call(self, args: tuple[Any, ...]) -> Any:
        """Call through the general path (any selection and order of arguments)."""
        positional = [args[index] for index in self.select]
        if self.keywords:
            return self.function(*positional, **{name: args[i] for name, i in self.keywords})
        return self.function(*positional)

    def call(self, args: tuple[Any, ...]) -> Any:
        """Call with the spec-ordered ``args``; the raw result (a coroutine if async)."""
        if self.arity == GENERAL:
            return self.general_call(args)
        return self.function(*args[: self.arity])


class PlanStep(NamedTuple):
    """One step of :meth:`HookRelay.plan`; hot loops unpack it like a plain tuple."""

    function: Callable[..., Any]
    arity: int
    is_async: bool
    position: int
    impl: Implementation


def call_plain(hook: str, impl: Implementation, args: tuple[Any, ...]) -> Any:
    """Call a synchronous hook's ``impl`` (``register_tools``, ``count_tokens``); wrap a failure.

    Any exception but ``StopRun``, ``KeyboardInterrupt`` and ``SystemExit`` (those pass
    through) is ``impl``'s failure, ``BaseException`` subclasses included.
    """
    try:
        return impl.call(args)
    except (StopRun, HookError, KeyboardInterrupt, SystemExit):
        raise
    except BaseException as error:
        raise HookError(hook, impl.plugin, error) from error


_REDACTOR = "mainspring_redactor"


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


_NONBLOCKING = "mainspring_nonblocking"


def nonblocking(function: _F) -> _F:
    """Mark a plain ``def`` hook implementation as one that returns at once.

    Stack it under ``@mainspring.hookimpl``. A plugin's plain ``def`` of a hook called
    once per tool call or turn (a gate, a result filter, a transform, ...) is otherwise
    called in a worker thread, so that one that blocks cannot freeze the event loop (about
    60 µs a call). Marked, it is called on the loop, as ``on_event`` implementations are:
    the mark is a promise that it only computes (no I/O, no lock, no waiting). One that
    blocks anyway blocks the loop, and ``abort()`` and ``hooks.timeout_s`` with it.
    """
    setattr(function, _NONBLOCKING, True)
    return function


def is_nonblocking(function: Callable[..., Any]) -> bool:
    """Whether ``function`` was marked with :func:`nonblocking`."""
    return getattr(function, _NONBLOCKING, False) is True


def _compile(
    hookimpl: Any, spec_argnames: tuple[str, ...], trusted: bool, builtin: bool
) -> Implementation:
    argnames = tuple(hookimpl.argnames)
    kwargnames = tuple(name for name in hookimpl.kwargnames if name in spec_argnames)
    positions = tuple(spec_argnames.index(name) for name in argnames)
    select: tuple[int, ...] = ()
    keywords: tuple[tuple[str, int], ...] = ()
    if not kwargnames and positions == tuple(range(len(positions))):
        arity = len(positions)
    else:
        arity = GENERAL
        select = positions
        keywords = tuple((name, spec_argnames.index(name)) for name in kwargnames)
    is_async = inspect.iscoroutinefunction(hookimpl.function)
    return Implementation(
        plugin=hookimpl.plugin_name,
        function=hookimpl.function,
        argnames=argnames,
        trusted=trusted,
        arity=arity,
        is_async=is_async,
        select=select,
        keywords=keywords,
        single=positions[0] if len(positions) == 1 and not kwargnames else -1,
        off_loop=not (is_async or trusted or builtin or is_nonblocking(hookimpl.function)),
    )


@final
class HookRelay:
    """Ordered, compiled access to a plugin manager's implementations.

    The plan of each hook is cached until :meth:`invalidate` (the kernel calls it after
    registering or unregistering a plugin). ``fallbacks`` are the essential built-ins
    (answering after every plugin), ``builtins`` every built-in plugin (its plain ``def``
    implementations are called on the event loop: they do not block).
    """

    __slots__ = ("_builtins", "_cache", "_fallbacks", "_granted", "_plans", "_pm", "version")

    def __init__(
        self,
        pm: pluggy.PluginManager,
        fallbacks: frozenset[str] = frozenset(),
        granted: Mapping[str, frozenset[str] | None] | None = None,
        builtins: frozenset[str] = frozenset(),
    ) -> None:
        self._pm = pm
        self._fallbacks = fallbacks
        self._builtins = builtins | fallbacks
        self._granted: Mapping[str, frozenset[str] | None] = granted if granted is not None else {}
        """Each plugin's granted capabilities (absent or ``None``: all of them), read when
        a hook's implementations are listed (a live mapping follows later registrations)."""
        self._cache: dict[str, tuple[Implementation, ...]] = {}
        self.version = 0
        """Increases at every :meth:`invalidate`: a plan built from an older one is stale."""
        self._plans: dict[str, tuple[PlanStep, ...]] = {}

    def invalidate(self) -> None:
        """Forget the compiled plans (``version`` changes, so users of a plan rebuild)."""
        self._cache.clear()
        self._plans.clear()
        self.version += 1

    def plan(self, hook: str) -> tuple[PlanStep, ...]:
        """:meth:`implementations` as ``(function, arity, is_async, position, impl)`` tuples.

        For the hottest loops: unpacking a tuple into locals is cheaper than reading the
        same fields off an object, per implementation and call.
        """
        cached = self._plans.get(hook)
        if cached is None:
            cached = self._plans[hook] = tuple(
                PlanStep(impl.function, impl.arity, impl.is_async, position, impl)
                for position, impl in enumerate(self.implementations(hook))
            )
        return cached

    def implementations(self, hook: str) -> tuple[Implementation, ...]:
        """The implementations of ``hook`` in call order."""
        cached = self._cache.get(hook)
        if cached is not None:
            return cached
        caller = getattr(self._pm.hook, hook, None)
        found: list[Implementation] = []
        if caller is not None:
            spec = caller.spec
            spec_argnames = tuple(spec.argnames) if spec is not None else ()
            needed = CAPABILITY_OF.get(hook)
            for impl in reversed(caller.get_hookimpls()):
                if impl.hookwrapper or impl.wrapper:
                    continue
                granted = self._granted.get(impl.plugin_name)
                if granted is not None and needed is not None and needed not in granted:
                    continue  # narrowed by the operator: never called
                names = spec_argnames or tuple(impl.argnames)
                name = impl.plugin_name
                found.append(_compile(impl, names, name in self._fallbacks, name in self._builtins))
        # redactors run after every other implementation, and the kernel's own fallbacks
        # (the default converter, the token estimate, the fallback compaction) answer only
        # after every plugin, trylast ones included; the sort keeps pluggy's order otherwise
        found.sort(key=lambda impl: (impl.plugin in self._fallbacks, is_redactor(impl.function)))
        result = tuple(found)
        self._cache[hook] = result
        return result

    def has(self, hook: str) -> bool:
        """Whether any plugin implements ``hook``."""
        return bool(self.implementations(hook))
