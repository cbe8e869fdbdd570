"""The public :class:`Agent`: configure once, then prompt, steer, abort, observe."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Self

from ..contract.agent_view import AgentView, Listener
from ..contract.errors import AgentBusyError
from ..contract.state import AgentState
from ..events import AgentEnd
from ..hooks.facade import Hooks
from ..hooks.plan import HookRelay
from ..invariants import transcript_problem
from ..kernel.approvals import approval_from_api
from ..kernel.arguments import as_messages, checked_prompt, checked_thinking, resolve_model
from ..kernel.loop import execute_run
from ..kernel.options import DEFAULT_OPTIONS, RunOptions
from ..kernel.run import Run
from ..kernel.state import Core
from ..kernel.tool_context import FileLocks
from ..kernel.transcript import Transcript
from ..loading.loader import PluginSet, load_plugins
from ..messages import AssistantMessage, ToolResultMessage, UserMessage
from ..providers.base import Model, Provider, ThinkingLevel
from ..settings import Settings, default_settings
from ..tools import Tool
from .assembly import collect_providers, collect_tools
from .parts import Closer, Closers, TranscriptEditor
from .view import view_factory

__all__ = ["Agent"]
"""``listener(event, signal)``; an awaitable result is awaited before the run goes on."""


async def _unreported(error: Any, outcome: str) -> None:
    """A converter failure outside a run: skipped as in a run, with no event to emit."""


class Agent:
    """An agent: a transcript, tools, a model, plugins, and the run loop over them.

    The constructor loads plugins, collects tools and resolves the model; configuration
    errors (a plugin that fails to load, two tools with one name, an unknown provider)
    raise here, before any run. An agent is not bound to an event loop: it can be built
    outside one and used from successive ``asyncio.run()`` calls.
    """

    # thousands of agents may live in one process: no per-instance dict
    __slots__ = (
        "__weakref__",
        "_closers",
        "_core",
        "_edits",
        "_hooks",
        "_plugin_set",
        "_provider_override",
        "_providers",
        "_run",
        "_tool_set",
        "_views",
        "session_id",
        "settings",
    )

    def __init__(
        self,
        model: str | Model | None = None,
        provider: Provider | None = None,
        system_prompt: str = "",
        tools: Iterable[Tool] = (),
        messages: Iterable[Any] = (),
        plugins: Sequence[Any] = (),
        autoload: bool = True,
        disable_plugins: Iterable[str] = (),
        settings: Settings | None = None,
        thinking_level: ThinkingLevel = "off",
        session_id: str | None = None,
    ) -> None:
        self.settings = settings or default_settings()
        self._closers = Closers()
        self._plugin_set: PluginSet = load_plugins(
            plugins=plugins,
            autoload=autoload,
            disable_plugins=disable_plugins,
            required=self.settings.required_plugins,
            grants={
                name: grant.capabilities for name, grant in self.settings.plugins.grants.items()
            },
            require_manifest=self.settings.plugins.require_manifest,
            allow_unregister=self.settings.plugins.allow_unregister,
        )
        self._views = view_factory(self)
        relay = HookRelay(
            self._plugin_set.manager,
            self._plugin_set.fallbacks,
            self._plugin_set.granted,
            self._plugin_set.builtins,
            self._views,
        )
        # registering or unregistering a plugin later rebuilds the compiled hook plans
        self._plugin_set.on_change(relay.invalidate)
        self._hooks = Hooks(relay, transcript_problem)
        self._provider_override = provider
        self._providers = collect_providers(self._hooks, self, self._plugin_set, provider)
        self._tool_set = collect_tools(self._hooks, self, self._plugin_set, tools)
        self.session_id = session_id or uuid.uuid4().hex
        """Identifies the conversation to providers (``ModelRequest.session_id``), which
        may use it as a prompt-caching key; kept across runs, new for each agent."""
        self._core = Core(
            messages=Transcript(messages),
            # the tool set's own dict: neither changes it (configure() replaces both)
            tools=self._tool_set.tools,
            system_prompt=checked_prompt(system_prompt),
            model=self._resolve_model(model),
            thinking_level=checked_thinking(thinking_level),
            file_locks=FileLocks(),
        )
        self._edits = TranscriptEditor(self._core)
        self._run: Run | None = None
        if self.settings.session_path is not None:
            # one session file, one conversation: SessionConflictError when the file holds
            # another one or another agent is writing it (see mainspring.session_files)
            from ..session_files import check_session_path

            check_session_path(self, self.settings.session_path, self.state.messages)

    # -- construction -------------------------------------------------------------------

    def _resolve_model(self, model: str | Model | None) -> Model:
        return resolve_model(
            model, self._providers, self._provider_override, self.settings.default_model
        )

    def _provider_for(self, model: Model) -> Provider:
        if self._provider_override is not None:
            return self._provider_override
        provider = self._providers.get(model.provider)
        if provider is None:
            raise ValueError(f'no provider named "{model.provider}" is registered')
        return provider

    # -- observation --------------------------------------------------------------------

    @property
    def state(self) -> AgentState:
        """An immutable snapshot of the agent's state."""
        return self._core.snapshot()

    @property
    def observed(self) -> bool:
        """Whether the agent's events reach anyone: a subscriber, or an ``on_event``
        observer not left out by its :func:`~mainspring.observes_when` predicate (a run's
        ``RunOptions.recorder`` is not counted). A recorder that must hold each event
        before anyone sees it may batch its writes while this is false."""
        if self._core.listeners:
            return True
        return any(
            impl.wanted is None or impl.wanted(self) for impl in self._hooks.relay.plan("on_event")
        )

    @property
    def is_running(self) -> bool:
        """Whether a run is active (cheaper than ``state.is_streaming``)."""
        return self._core.is_streaming

    @property
    def last_message(self) -> Any:
        """The newest transcript entry (``None`` when empty); cheaper than ``state``."""
        messages = self._core.messages
        return messages[-1] if messages else None

    @classmethod
    def from_session(cls, path: str | os.PathLike[str], **kwargs: Any) -> Agent:
        """An agent resuming the session file ``path``, recording to it from now on.

        The header's model and system prompt are used unless ``model=`` or
        ``system_prompt=`` are given; other keyword arguments go to the constructor. A
        torn last line (a crash mid-write) is logged and skipped; tool calls the file
        ends before answering get error results (see :mod:`mainspring.sessions`);
        anything else malformed raises :class:`~mainspring.sessions.SessionFormatError`.
        Only this way, or with ``messages=`` equal to what the file holds, can an agent
        record to a non-empty session file; a file another agent is writing raises
        :class:`~mainspring.sessions.SessionConflictError`.
        """
        from ..kernel.approvals import Remembered
        from ..sessions import read_session

        session = read_session(path)
        settings = kwargs.pop("settings", None) or default_settings()
        settings = settings.model_copy(update={"session_path": os.fspath(path)})
        kwargs.setdefault("system_prompt", session.system_prompt)
        if kwargs.get("model") is None and kwargs.get("provider") is None:
            kwargs["model"] = session.model
        agent = cls(messages=session.messages, settings=settings, **kwargs)
        agent._core.remembered_approvals.extend(
            Remembered(tool, arguments) for tool, arguments in session.approvals
        )
        return agent

    @property
    def plugins(self) -> PluginSet:
        """The loaded plugins, in load order (for introspection)."""
        return self._plugin_set

    def view_for(self, plugin: str) -> AgentView:
        """The :class:`~mainspring.AgentView` plugin ``plugin`` receives as ``agent``.

        mainspring's own built-in plugins receive the agent itself; every other plugin gets
        its view, the same object in each of its hooks for the agent's life.
        """
        return self._views(plugin)

    @property
    def tool_owners(self) -> dict[str, str]:
        """Which plugin (or ``tools=``) contributed each tool."""
        return dict(self._tool_set.owners)

    @property
    def provider(self) -> Provider:
        """The provider the next run uses (the ``provider=`` override, else by model)."""
        return self._provider_for(self._core.model)

    def provider_for(self, model: Model) -> Provider:
        """The provider that serves ``model`` for this agent."""
        return self._provider_for(model)

    @property
    def providers(self) -> dict[str, Provider]:
        """The registered providers by name."""
        return dict(self._providers)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event, signal)`` for every event; returns an unsubscribe function.

        Listeners are called in subscription order, one event at a time; an awaitable
        result is awaited before the run goes on. A listener that raises fails the run.
        """
        if not callable(listener):
            raise TypeError(f"listener must be callable, got {listener!r}")
        core = self._core
        # a new tuple on every change: a run iterates the one it started each event with
        core.listeners = (*core.listeners, listener)

        def unsubscribe() -> None:
            listeners = list(core.listeners)
            if listener in listeners:
                listeners.remove(listener)
                core.listeners = tuple(listeners)

        return unsubscribe

    # -- runs ---------------------------------------------------------------------------

    async def prompt(
        self, prompt: str | Any | Sequence[Any], *, options: RunOptions | None = None
    ) -> AgentEnd:
        """Start a run with ``prompt`` and return once it has settled (idle, logged).

        ``prompt`` is a string, a message, or a list of messages. Returns the run's
        ``agent_end`` event: its new ``messages``, ``reason`` and ``detail`` (``outcome.text``
        is the final reply's text). Raises :class:`AgentBusyError` while a run is active.
        ``options`` (:class:`~mainspring.RunOptions`) are for runners that replay a run.
        """
        if self._core.is_streaming:
            raise AgentBusyError("prompt")
        return await self._start(as_messages(prompt), None, _checked_options(options))

    async def resume(self, *, options: RunOptions | None = None) -> AgentEnd:
        """Run again from the current transcript.

        A user or tool-result tail is re-sent. An assistant tail delivers the steering
        queue if non-empty, else the follow-up queue; with both empty and a last message
        that ended in ``error``/``aborted``, the transcript is re-sent (the failed message
        stays in the transcript; the default ``convert_to_llm`` does not send it). Otherwise
        :class:`ValueError`: there is nothing to resume. ``options`` as for :meth:`prompt`.
        """
        if self._core.is_streaming:
            raise AgentBusyError("resume")
        checked = _checked_options(options)
        core = self._core
        tail = core.messages[-1] if core.messages else None
        queue: list[Any] | None = None
        if tail is None:
            raise ValueError("nothing to resume: the transcript is empty")
        if isinstance(tail, AssistantMessage):
            # the run takes the messages off their queue itself, inside its first turn,
            # so a failure before their delivery leaves them queued
            queue = core.steering if core.steering else core.follow_up
            if not queue and tail.stop_reason not in ("error", "aborted"):
                raise ValueError(
                    "nothing to resume: the last message is a complete assistant reply "
                    "and no steering or follow-up message is queued; use prompt()"
                )
        elif not isinstance(tail, UserMessage | ToolResultMessage):
            # a custom message: resumable if the converters turn the transcript into a
            # request that does not end on a reply
            converted = await self._hooks.convert_to_llm(
                core.messages.as_tuple(), self, _unreported
            )
            if not converted or isinstance(converted[-1], AssistantMessage):
                raise ValueError(
                    f"nothing to resume after a {getattr(tail, 'role', '?')!r} message: "
                    "convert_to_llm makes it a request that ends on an assistant reply"
                )
        return await self._start([], queue, checked)

    async def _start(
        self, inputs: list[Any], first_queue: list[Any] | None, options: RunOptions
    ) -> AgentEnd:
        core = self._core
        core.is_streaming = True
        core.error_message = None
        core.turns_completed = 0
        try:
            run = Run(
                agent=self,
                core=core,
                hooks=self._hooks,
                run_id=options.run_id or uuid.uuid4().hex[:12],
                provider=options.provider or self._provider_for(core.model),
                model=core.model,
                settings=self.settings,
                options=options,
            )
        except BaseException:
            core.is_streaming = False
            raise
        core.run_id = run.run_id
        self._run = run
        task = asyncio.ensure_future(self._drive(run, inputs, first_queue))
        run.task = task
        core.run_task = task
        # what asyncio.shield(task) does, with one future and no closures (every running
        # agent holds this while it waits): the caller waits for ``settled``, done with the
        # task, and its cancellation never reaches the run's task
        settled: asyncio.Future[Any] = task.get_loop().create_future()
        task.add_done_callback(settled.set_result)
        try:
            await settled
        except asyncio.CancelledError:
            # the caller gave up (wait_for, a task group, Ctrl-C): settle, then re-raise
            task.remove_done_callback(settled.set_result)
            self.abort("cancelled")
            await asyncio.wait([task])
            raise
        task.result()  # what the run's task raised, as awaiting it would
        if run.exit is not None:
            raise run.exit
        outcome = run.last_event
        assert isinstance(outcome, AgentEnd)  # _end_run emits it last, whatever happened
        return outcome

    async def _drive(self, run: Run, inputs: list[Any], first_queue: list[Any] | None) -> None:
        core = self._core
        try:
            await execute_run(run, inputs, first_queue)
        finally:
            # the finished task (its context, its coroutine) is not kept past the run
            core.run_task = None
            core.is_streaming = False
            core.streaming_message = None
            core.pending_tool_calls.clear()
            core.phase = "idle"
            core.turn = None
            core.run_id = None
            self._run = None

    def steer(self, message: str | Any) -> None:
        """Queue ``message`` for the start of the next turn (after the current tool batch)."""
        self._core.steering.extend(as_messages(message))

    def follow_up(self, message: str | Any) -> None:
        """Queue ``message`` for when the agent would otherwise stop."""
        self._core.follow_up.extend(as_messages(message))

    def clear_queues(self) -> tuple[list[Any], list[Any]]:
        """Empty both queues; returns what they held (steering, follow-up)."""
        steering, follow_up = list(self._core.steering), list(self._core.follow_up)
        self._core.steering.clear()
        self._core.follow_up.clear()
        return steering, follow_up

    def abort(self, reason: str = "aborted") -> None:
        """Abort the active run (synchronous; a no-op when idle).

        Sets the run's signal and cuts whatever the run is waiting for (a model stream, a
        retry backoff, a tool batch, a hook implementation or a subscriber) at once;
        running tools are cancelled, and every call still gets exactly one result. Plugin
        code that ignores the cancellation is detached after ``hooks.abort_grace_s``, so
        the run settles within about that time whatever its plugins do.

        Any thread may call it (a UI thread, a plugin's plain ``def`` run off the loop);
        from another thread than the run's event loop's, the abort is handed to the loop.
        """
        run = self._run
        if run is None or run.signal.aborted:
            return
        run.abort(reason)

    async def wait_for_idle(self) -> None:
        """Return once no run is active and every ``agent_end`` listener has finished."""
        task = self._core.run_task
        if task is not None and not task.done():
            if asyncio.current_task() is task:
                raise RuntimeError(
                    "wait_for_idle() was called from inside the run (a listener or a hook); "
                    "it would wait for itself"
                )
            await asyncio.wait([task])

    def configure(
        self,
        *,
        system_prompt: str | None = None,
        model: str | Model | None = None,
        tools: Iterable[Tool] | None = None,
        thinking_level: ThinkingLevel | None = None,
    ) -> None:
        """Change the agent for the next run (an active run keeps what it started with).

        ``tools`` is the complete tool list: to keep the tools plugins registered, pass
        them again (``[*agent.state.tools, extra]``); ``agent.tool_owners`` follows. Unlike
        the other settings, a new tool list reaches an active run at its next turn (so a
        plugin can refresh the tools it gives, between turns).
        """
        core = self._core
        if system_prompt is not None:
            core.system_prompt = checked_prompt(system_prompt)
        if thinking_level is not None:
            checked_thinking(thinking_level)
        if model is not None:
            resolved = self._resolve_model(model)
            self._provider_for(resolved)
            core.model = resolved
        if tools is not None:
            # exactly these tools from the next run on: a tool the agent had keeps its
            # owner (plugin tools stay only if passed again), any other is "tools="
            self._tool_set = self._tool_set.replaced(tools)
            core.tools = self._tool_set.tools
        if thinking_level is not None:
            core.thinking_level = thinking_level

    # -- the transcript -----------------------------------------------------------------

    def replace_messages(self, messages: Iterable[Any]) -> None:
        """Make ``messages`` the transcript (idle only; the list is copied, not the messages).

        Raises :class:`AgentBusyError` while a run is active, ``ValueError`` if the
        messages break the transcript invariants (a tool result without its call, a call
        answered twice, an entry without a ``role``).
        """
        self._edits.replace(messages)

    def append_message(self, message: Any) -> None:
        """Add ``message`` at the end of the transcript (idle only; see
        :meth:`replace_messages` for the checks)."""
        self._edits.append(message)

    def reset(self) -> None:
        """Clear the transcript, both queues and the error (idle only)."""
        self._edits.reset()

    # -- approvals ----------------------------------------------------------------------

    def approve(
        self,
        tool_call_id: str,
        allow: bool,
        *,
        remember: str | None = None,
        reason: str | None = None,
        content: Mapping[str, Any] | None = None,
    ) -> None:
        """Decide a tool call waiting for approval (a ``tool_approval_request`` event).

        Needs ``settings.approvals.api``. ``remember="tool"`` allows the tool, and
        ``remember="call"`` the tool with these exact arguments, for the rest of the
        session; ``reason`` is recorded in the ``tool_decision`` (and shown to the model
        when refused). The first answer for a call wins. Raises ``ValueError`` when no
        call with that id is waiting (idle, decided already, or never asked about).
        A running call's question (the event's ``question``) is answered with
        ``allow=True`` and ``content``: the form's values, or ``{}`` for a URL; they must
        fit the question (``ValueError`` otherwise).
        """
        run = self._run
        pending = run.approvals if run is not None else None
        asking = run.questions if run is not None else None
        if asking is not None and tool_call_id in asking.requests:
            pending = asking
        approval_from_api(pending, tool_call_id, allow, remember, reason, content)

    @property
    def remembered_approvals(self) -> tuple[Any, ...]:
        """The approvals kept for the rest of the session (``Remembered`` values)."""
        return tuple(self._core.remembered_approvals)

    # -- closing ------------------------------------------------------------------------

    def on_close(self, callback: Closer) -> None:
        """Call ``callback()`` (awaited if it returns an awaitable) when the agent is closed.

        For plugins that hold resources for the agent (a server process, a connection):
        register in ``register_tools`` or later; :meth:`aclose` calls the callbacks, the
        last registered first.
        """
        self._closers.add(callback)

    async def aclose(self) -> None:
        """Release what the agent holds: abort an active run, wait for it, run the closers.

        Every :meth:`on_close` callback is called, the last registered first, even when
        one raises; the first exception is re-raised once all have run. Idempotent: a
        second call does nothing. ``async with Agent(...) as agent:`` closes on exit.
        """
        closers = self._closers
        if closers.closed:
            return
        closers.closed = True
        self.abort("closed")
        await self.wait_for_idle()
        await closers.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "running" if self._core.is_streaming else "idle"
        return f"<Agent {self._core.model.ref} {state}, {len(self._core.messages)} messages>"


def _checked_options(options: Any) -> RunOptions:
    if options is None:
        return DEFAULT_OPTIONS
    if not isinstance(options, RunOptions):
        raise TypeError(f"options must be a RunOptions, not {type(options).__name__}")
    return options
