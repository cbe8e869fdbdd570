"""Call plans: each hook's implementations, compiled once into how to call them.

pluggy has no async hooks, so the kernel calls implementations itself. For each hook it
takes the implementations in pluggy's call order (most recently registered first,
``tryfirst``/``trylast`` honoured; redactors after every other implementation, the
kernel's essential fallbacks after everything), and compiles each into an
:class:`Implementation` whose ``call(args)`` takes the hook's arguments as one tuple in
the order of its hookspec and passes the implementation the ones it asked for. The
specialisation is chosen here, from the implementation's signature and the hook's rules
(:mod:`mainspring.contract.table`), once per plan:

- a leading run of the spec's arguments (``def on_event(event)``, the usual case) is a
  direct call with those;
- any other selection (``def gate(tool, call)``, keyword-only arguments) goes through a
  general selector;
- a plugin's plain ``def`` of a *threaded* hook is marked ``threaded``: the hook facade
  calls it in a worker thread (see :mod:`mainspring.workers`).

Beside each plan, :meth:`HookRelay.calls` keeps it as :class:`Calls`: its implementations
as :class:`~mainspring.hooks.scan.Steps` (the hot path calls a run of them with generated
code that stops only at the first answer, failure or awaitable) and, for each position,
where the run of implementations called on the loop from there ends.

Plans are cached until a plugin is registered or unregistered (:meth:`HookRelay.invalidate`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, final

import pluggy

from ..contract.markers import is_nonblocking, is_redactor, wanted_predicate
from ..contract.table import HOOKS
from .scan import Steps

__all__ = [
    "Calls",
    "HookRelay",
    "Implementation",
    "calls_of",
]

_F = TypeVar("_F", bound=Callable[..., Any])
Call = Callable[[tuple[Any, ...]], Any]


@final
@dataclass(frozen=True, slots=True, eq=False)
class Implementation:
    """One plugin's implementation of one hook, compiled for calling.

    ``call(args)`` calls it with the hook's spec-ordered arguments and returns its raw
    result: a value, or an awaitable to await under the run's guard; ``awaits`` says the
    result is always awaitable (an ``async def``). A ``threaded`` one is called in a
    worker thread by the hook facade (with the other threaded implementations next to it
    in the plan, in one hand-over).
    """

    plugin: str
    function: Callable[..., Any]
    argnames: tuple[str, ...]
    call: Call
    kwargnames: tuple[str, ...] = ()
    """The spec arguments it takes as parameters with a default (passed by keyword)."""
    positions: tuple[int, ...] | None = None
    """The spec arguments ``function`` takes, by position, when it can be called with
    them as they are (``None``: keywords, or an agent view in place of one): a hot path
    may call ``function`` itself with ``args[p] for p in positions``."""
    awaits: bool = False
    threaded: bool = False
    """Called in a worker thread: a plugin's plain ``def`` of a threaded hook."""
    trusted: bool = False
    """The kernel's own fallback: its outputs need no invariant check."""
    redactor: bool = False
    wanted: Callable[[Any], bool] | None = None
    """For an ``on_event`` observer marked :func:`observes_when`: its predicate."""

    @property
    def step(self) -> tuple[Callable[..., Any], tuple[int, ...] | None]:
        """This implementation as a :class:`~mainspring.hooks.scan.Steps` entry."""
        if self.positions is None:
            return self.call, None
        return self.function, self.positions


@final
@dataclass(frozen=True, slots=True, eq=False)
class Calls:
    """A plan as the hot path calls it (:mod:`mainspring.hooks.scan`).

    ``steps[i]`` calls ``plan[i]`` with the hook's spec-ordered argument tuple;
    ``loop_until[i]`` is the end (exclusive) of the run of plain implementations from
    ``i`` called on the loop (it is ``i`` where ``plan[i]`` is threaded or an ``async
    def``: those are called one at a time, the first in a worker thread, the second
    always answering with a coroutine); ``plugins``
    is how many implementations come before the kernel's own fallbacks (which sort last).
    """

    plan: tuple[Implementation, ...]
    steps: Steps
    loop_until: tuple[int, ...]
    plugins: int
    taken: frozenset[str]
    """Every spec argument some implementation takes."""

    @classmethod
    def of(cls, plan: tuple[Implementation, ...]) -> Calls:
        until = [0] * len(plan)
        end = len(plan)
        for position in range(len(plan) - 1, -1, -1):
            if plan[position].threaded or plan[position].awaits:
                end = position
            until[position] = end
        steps = Steps.of([impl.step for impl in plan])
        plugins = sum(not impl.trusted for impl in plan)
        taken = frozenset(name for impl in plan for name in (*impl.argnames, *impl.kwargnames))
        return cls(plan, steps, tuple(until), plugins, taken)


# -- the specialisations ------------------------------------------------------------------


def _leading(function: Callable[..., Any], count: int) -> Call:
    """A call passing the first ``count`` spec arguments positionally."""
    if count == 0:
        return lambda args: function()
    if count == 1:
        return lambda args: function(args[0])
    if count == 2:
        return lambda args: function(args[0], args[1])
    if count == 3:
        return lambda args: function(args[0], args[1], args[2])
    return lambda args: function(*args[:count])


def _selected(
    function: Callable[..., Any],
    positions: tuple[int, ...],
    keywords: tuple[tuple[str, int], ...],
) -> Call:
    """A call passing any selection of spec arguments (positionally, then by keyword)."""
    if not keywords and len(positions) == 1:
        (only,) = positions
        return lambda args: function(args[only])

    def call(args: tuple[Any, ...]) -> Any:
        positional = [args[index] for index in positions]
        if keywords:
            return function(*positional, **{name: args[index] for name, index in keywords})
        return function(*positional)

    return call


def _viewing(call: Call, position: int, view: Any) -> Call:
    """``call`` with the spec argument at ``position`` (the agent) replaced by ``view``."""
    if position == 0:
        return lambda args: call((view, *args[1:]))
    if position == 1:
        return lambda args: call((args[0], view, *args[2:]))
    return lambda args: call((*args[:position], view, *args[position + 1 :]))


def compile_implementation(
    hookimpl: Any,
    hook: str,
    spec_argnames: tuple[str, ...],
    *,
    trusted: bool,
    builtin: bool,
    view: Any = None,
) -> Implementation:
    """``hookimpl`` (a pluggy ``HookImpl``) compiled for calling (see the module).

    ``view``, when given, is what the implementation receives as its ``agent`` argument
    (the plugin's :class:`~mainspring.AgentView`) instead of the kernel's agent.
    """
    function = hookimpl.function
    argnames = tuple(hookimpl.argnames)
    kwargnames = tuple(name for name in hookimpl.kwargnames if name in spec_argnames)
    positions = tuple(spec_argnames.index(name) for name in argnames)
    direct_positions: tuple[int, ...] | None = None
    if not kwargnames and positions == tuple(range(len(positions))):
        direct = _leading(function, len(positions))
    else:
        keywords = tuple((name, spec_argnames.index(name)) for name in kwargnames)
        direct = _selected(function, positions, keywords)
    if not kwargnames:
        direct_positions = positions
    if view is not None and "agent" in argnames + kwargnames:
        direct = _viewing(direct, spec_argnames.index("agent"), view)
        direct_positions = None
    is_async = inspect.iscoroutinefunction(function)
    rules = HOOKS.get(hook)
    threaded = (
        rules is not None
        and rules.threaded
        and not (is_async or trusted or builtin or is_nonblocking(function))
    )
    return Implementation(
        plugin=hookimpl.plugin_name,
        function=function,
        argnames=argnames,
        call=direct,
        kwargnames=kwargnames,
        positions=direct_positions,
        awaits=is_async,
        threaded=threaded,
        trusted=trusted,
        redactor=is_redactor(function),
        wanted=wanted_predicate(function) if hook == "on_event" else None,
    )


_shared: dict[tuple[Any, ...], Implementation] = {}
"""Built-in implementations compiled once per process (see :func:`_builtin_implementation`)."""

_shared_plans: dict[tuple[Implementation, ...], Calls] = {}
"""The :class:`Calls` of plans made of shared built-in implementations only: one object
per distinct plan in the process (agents with the built-ins alone share them)."""


def calls_of(plan: tuple[Implementation, ...]) -> Calls:
    """``plan`` (any tuple of implementations) as :class:`Calls`, one object shared
    process-wide when every implementation in it is a shared built-in one (a bounded set
    of plans): agents with the built-ins alone keep no plan of their own."""
    known = _shared_plans.get(plan)
    if known is not None:
        return known
    made = Calls.of(plan)
    shared = set(map(id, _shared.values()))
    if all(id(impl) in shared for impl in plan):
        _shared_plans[plan] = made
    return made


def _builtin_implementation(
    hookimpl: Any, hook: str, spec_argnames: tuple[str, ...], trusted: bool
) -> Implementation:
    """A built-in's implementation, compiled once and shared by every agent's plan.

    A built-in receives the kernel's agent (no view), so what it compiles to depends only
    on its function, its plugin name, the hook and the spec: thousands of agents share one
    compiled object per built-in hook instead of each holding its own. Only plain module
    functions are shared (a bounded set); anything else is compiled per plan.
    """
    function = hookimpl.function
    if not inspect.isfunction(function):
        return compile_implementation(hookimpl, hook, spec_argnames, trusted=trusted, builtin=True)
    key = (function, hookimpl.plugin_name, hook, spec_argnames, trusted)
    known = _shared.get(key)
    if known is None:
        known = _shared[key] = compile_implementation(
            hookimpl, hook, spec_argnames, trusted=trusted, builtin=True
        )
    return known


@final
class HookRelay:
    """Ordered, compiled access to a plugin manager's implementations.

    The plan of each hook is cached until :meth:`invalidate` (the kernel calls it after
    registering or unregistering a plugin). ``fallbacks`` are the essential built-ins
    (answering after every plugin), ``builtins`` every built-in plugin (its plain ``def``
    implementations are called on the event loop: they do not block). ``granted`` maps a
    plugin to its granted capabilities (absent or ``None``: all of them); it is read when a
    plan is compiled, so a live mapping follows later registrations. ``view_of(plugin)``,
    when given, is what a plugin that is not a built-in receives as its ``agent``.
    """

    __slots__ = (
        "_builtins",
        "_fallbacks",
        "_granted",
        "_plans",
        "_pm",
        "_view_of",
        "version",
    )

    def __init__(
        self,
        pm: Callable[[], pluggy.PluginManager],
        fallbacks: frozenset[str] = frozenset(),
        granted: Mapping[str, frozenset[str] | None] | None = None,
        builtins: frozenset[str] = frozenset(),
        view_of: Callable[[str], Any] | None = None,
    ) -> None:
        # pm() is the manager to read, asked at each compile: an agent's manager is a
        # shared one until the agent changes its plugins and gets a copy of its own
        self._pm = pm
        self._view_of = view_of
        self._fallbacks = fallbacks
        self._builtins = builtins if fallbacks <= builtins else builtins | fallbacks
        self._granted: Mapping[str, frozenset[str] | None] = granted if granted is not None else {}
        self._plans: dict[str, Calls] = {}
        self.version = 0
        """Increases at every :meth:`invalidate`: a plan built from an older one is stale."""

    def invalidate(self) -> None:
        """Forget the compiled plans (``version`` changes, so users of a plan rebuild)."""
        self._plans.clear()
        self.version += 1

    def plan(self, hook: str) -> tuple[Implementation, ...]:
        """The implementations of ``hook`` in call order, compiled (cached)."""
        return self.calls(hook).plan

    def calls(self, hook: str) -> Calls:
        """``hook``'s plan as :class:`Calls` (compiled once, cached)."""
        known = self._plans.get(hook)
        if known is None:
            known = self._plans[hook] = calls_of(self._compile(hook))
        return known

    def takes(self, hook: str, argument: str) -> bool:
        """Whether some implementation of ``hook`` takes the spec argument ``argument``
        (so the kernel computes an optional argument only when it is asked for)."""
        return argument in self.calls(hook).taken

    def has(self, hook: str) -> bool:
        """Whether any plugin implements ``hook``."""
        return bool(self.plan(hook))

    def _compile(self, hook: str) -> tuple[Implementation, ...]:
        caller = getattr(self._pm().hook, hook, None)
        if caller is None:
            return ()
        spec = caller.spec
        spec_argnames = tuple(spec.argnames) if spec is not None else ()
        rules = HOOKS.get(hook)
        needed = rules.capability if rules is not None else None
        found: list[Implementation] = []
        for impl in reversed(caller.get_hookimpls()):
            name = impl.plugin_name
            granted = self._granted.get(name)
            if granted is not None and needed is not None and needed not in granted:
                continue  # narrowed by the operator: never called
            builtin = name in self._builtins
            argnames = spec_argnames or tuple(impl.argnames)
            trusted = name in self._fallbacks
            if builtin:
                found.append(_builtin_implementation(impl, hook, argnames, trusted))
                continue
            view_of = self._view_of
            found.append(
                compile_implementation(
                    impl,
                    hook,
                    argnames,
                    trusted=trusted,
                    builtin=False,
                    view=None if view_of is None else view_of(name),
                )
            )
        # redactors run after every other implementation, and the kernel's own fallbacks
        # (the default converter, the token estimate, the fallback compaction) answer only
        # after every plugin, trylast ones included; the sort keeps pluggy's order otherwise
        found.sort(key=lambda impl: (impl.plugin in self._fallbacks, impl.redactor))
        return tuple(found)
