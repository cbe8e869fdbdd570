"""Every hook a mainspring plugin can implement: the plugin author's reference.

Implement a hook with a function (or method) of the same name decorated with
:data:`mainspring.hookimpl`; accept only the parameters you need. Run-time hooks are
declared ``async def`` here; implementations may be plain ``def`` or ``async def``, and the
kernel awaits what they return. Implementations are called in pluggy's order: the most
recently registered first, ``tryfirst``/``trylast`` honoured. pluggy hook wrappers are
rejected on run-time hooks.

Where a hook takes ``agent``, a plugin receives its :class:`~mainspring.AgentView`: what
any plugin may read of the agent, and the actions its granted capabilities allow
(mainspring's own built-in plugins receive the agent itself).

Each docstring says *when* the hook is called, its parameters, what it returns and how the
results of several plugins combine, and what the kernel does if an implementation raises.
Any run-time hook may raise :class:`mainspring.StopRun` to end the run deliberately.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

from .markers import PROJECT
from .table import HOOKS

if TYPE_CHECKING:
    from ..effects import Labels
    from ..events import Event
    from ..messages import AssistantMessage, ToolCall
    from ..provenance import Provenance
    from ..providers.base import Model, Provider
    from ..signal import AbortSignal
    from ..tools import Tool, ToolResult
    from .agent_view import AgentView
    from .decisions import Approval, ApprovalRequest, Ask, Block, CompactionResult, Edit, NextTurn
    from .state import AgentState

__all__ = ["ASYNC_HOOKS", "SYNC_HOOKS", "hookspec"]

hookspec = pluggy.HookspecMarker(PROJECT)


# -- context -----------------------------------------------------------------------------


@hookspec
async def transform_context(
    messages: tuple[Any, ...], agent: AgentView, signal: AbortSignal
) -> Sequence[Any] | None:
    """Project the transcript before a model request (pruning, injection, redaction).

    **When:** before every model request, on the messages that are about to be sent. The
    transcript itself is never changed: the result is a projection for this request only.

    **Parameters:**
    - ``messages``: the transcript (or the previous implementation's output), a tuple.
    - ``agent``: the plugin's :class:`~mainspring.AgentView`; read ``agent.state``,
      ``agent.settings``.
    - ``signal``: the run's :class:`~mainspring.AbortSignal`.

    **Returns:** a sequence of messages, or ``None`` for "unchanged". Results chain: each
    implementation receives the previous one's output.

    **If it raises:** fail soft. The implementation is skipped (its input passes on
    unchanged), a ``hook_error`` event names the plugin, and the run goes on. An output
    that breaks the transcript invariants (a tool result without its call, a call without
    exactly one result, an unknown role) is treated the same way.
    """


@hookspec
async def convert_to_llm(messages: tuple[Any, ...], agent: AgentView) -> Sequence[Any] | None:
    """Map the projected transcript to the messages a provider understands.

    **When:** after ``transform_context``, before every model request.

    **Parameters:**
    - ``messages``: the projected messages (or the previous implementation's output).
    - ``agent``: the plugin's :class:`~mainspring.AgentView`.

    **Returns:** a sequence of messages or ``None`` for "unchanged"; results chain. A
    built-in ``trylast`` implementation runs last and drops every message whose role is
    not ``user``, ``assistant`` or ``tool_result``, and assistant messages that ended in
    ``error`` or ``aborted``; so a plugin that renders a custom message must run before it
    (the default order does that).

    **If it raises:** fail soft, as for ``transform_context``: skipped, ``hook_error``,
    the run goes on. A broken invariant is treated the same way.
    """


@hookspec
def count_tokens(messages: tuple[Any, ...], model: Model) -> int | None:
    """Count the tokens of a request, to decide on compaction.

    **When:** before each model request, on the messages about to be sent (after
    ``transform_context`` and ``convert_to_llm``). This hook is synchronous.

    **Parameters:**
    - ``messages``: the LLM messages of the request.
    - ``model``: the :class:`~mainspring.Model` the request goes to.

    **Returns:** an ``int`` or ``None`` to pass. The first non-``None`` result wins; a
    built-in ``trylast`` estimate (characters / 4, a fixed cost per image, or the last
    reported usage) answers when no plugin does.

    **If it raises:** a ``hook_error`` is emitted and the built-in estimate is used.
    """


@hookspec
async def compact(
    messages: tuple[Any, ...], model: Model, reason: str, agent: AgentView, signal: AbortSignal
) -> CompactionResult | None:
    """Shrink the transcript when it no longer fits the context window.

    **When:** in the ``compaction`` phase, before a model request whose estimated size is
    above ``context_window - reserve_tokens`` (``reason="threshold"``), or after the
    provider reported a context overflow (``reason="overflow"``). At most once per request.

    **Parameters:**
    - ``messages``: the whole transcript, a tuple.
    - ``model``: the :class:`~mainspring.Model` of the run.
    - ``reason``: ``"threshold"`` or ``"overflow"``.
    - ``agent``, ``signal``: the plugin's :class:`~mainspring.AgentView` and the run's
      abort signal.

    **Returns:** a :class:`~mainspring.CompactionResult` whose ``messages`` become the
    transcript (a summary plus the kept tail; a tool call and its result are never split),
    or ``None`` to pass. The first non-``None`` result wins; later implementations are not
    called. A built-in ``trylast`` fallback drops the oldest whole turns.

    **Which plugin wins:** implementations are asked in pluggy's order, the most recently
    registered first (among installed plugins, the reverse of their load order). A
    compactor that must win whatever else is installed declares
    ``@hookimpl(tryfirst=True)``; one meant as a fallback declares ``trylast=True``.
    ``compaction_end.plugin`` names the plugin whose result was used.

    **If it raises:** ``hook_error`` and ``compaction_end`` with ``error``; the run
    continues with the transcript uncompacted. A result that breaks the transcript
    invariants is treated the same way.
    """


# -- tools -------------------------------------------------------------------------------


@hookspec
async def before_tool_call(
    call: ToolCall,
    args: Any,
    tool: Tool,
    agent: AgentView,
    signal: AbortSignal,
    provenance: Provenance,
    labels: Labels | None,
) -> Block | Ask | Edit | None:
    """Gate a tool call: allow it, refuse it with a reason the model will see, or edit it.

    **When:** for each tool call of a turn, serially in call order, after the tool was
    found and its arguments validated, before any call of the batch executes.

    **Parameters:**
    - ``call``: the :class:`~mainspring.ToolCall` as the model made it.
    - ``args``: the validated arguments that will run, as a :class:`~mainspring.ToolArgs`
      for every tool: a read-only mapping of the argument names of the tool's schema to
      their values, read as ``args["command"]``, ``args.get("command")`` or
      ``args.command`` (nested objects alike). The tool itself still gets its own form
      (an instance of its parameters model, or the dict of a JSON-Schema tool).
    - ``tool``: the :class:`~mainspring.Tool` that will run; ``tool.effects`` and
      ``tool.roles`` say what it does and what its arguments are (see
      :mod:`mainspring.effects`).
    - ``agent``, ``signal``: the plugin's :class:`~mainspring.AgentView` and the run's
      abort signal.
    - ``provenance``: a :class:`~mainspring.provenance.Provenance`: for each argument,
      where its value was seen in the run's context (the user's prompt, the system
      prompt, a tool result with its labels, or nowhere: model-generated). Computed on
      first use, so a gate that does not take it costs nothing (see ``docs/policy.md``).
    - ``labels``: the join of the labels of every labelled message of that context
      (``None`` when none is labelled): ``untrusted`` once any untrusted content was read.

    **Returns:** :class:`~mainspring.Block` to refuse, :class:`~mainspring.Ask` to let an
    approver decide, :class:`~mainspring.Edit` to run the call with other arguments (they
    are validated against the tool's schema; the gates after this one see the edited call
    and arguments), ``None`` to allow. The first ``Block`` wins and later implementations
    are not called; an ``Ask`` or an ``Edit`` does not stop the others (a later ``Block``
    still wins). ``Block``, ``Ask`` and ``Edit`` may name the ``rule`` that decided; the
    ``tool_decision`` event records it, and the gates that edited (``edited_by``).
    A call that no gate blocked and one asked about is decided by the approvers (see
    ``request_approval``). Every decision is recorded as a ``tool_decision`` event.

    **If it raises:** fail closed. The call is blocked with an error result naming the
    plugin, and a ``hook_error`` event is emitted.
    """


@hookspec
async def label_tool_result(
    call: ToolCall, result: ToolResult, tool: Tool, agent: AgentView
) -> Labels | None:
    """Label the result of a tool the plugin does not own (inbound mail: ``untrusted``).

    **When:** for each executed call, after the ``after_tool_result`` filters, before the
    result enters the transcript.

    **Parameters:**
    - ``call``: the :class:`~mainspring.ToolCall`.
    - ``result``: the (filtered) :class:`~mainspring.ToolResult`; its ``labels`` are the
      tool's own, joined with those of any result a filter replaced.
    - ``tool``: the :class:`~mainspring.Tool` that ran.
    - ``agent``: the plugin's :class:`~mainspring.AgentView`.

    **Returns:** a :class:`~mainspring.effects.Labels`, or ``None`` to add nothing. Every
    implementation is called; the result's labels become the join of the tool's and all
    returned (so a hook can raise a label, never lower one).

    **If it raises:** fail closed. The result is labelled ``untrusted``, a ``hook_error``
    event names the plugin, and the other implementations are still called.
    """


@hookspec
async def request_approval(
    requests: tuple[ApprovalRequest, ...], agent: AgentView, signal: AbortSignal
) -> Mapping[str, Approval] | None:
    """Decide tool calls a gate asked about (a person at a terminal, a UI, a policy).

    **When:** once per turn, after every call of the batch went through the gates, if any
    gate returned :class:`~mainspring.Ask` for a call no gate blocked. Calls allowed by a
    remembered approval are not asked again.

    **Parameters:**
    - ``requests``: the :class:`~mainspring.ApprovalRequest` of every call still
      undecided, in call order (parallel calls are asked together).
    - ``agent``, ``signal``: the plugin's :class:`~mainspring.AgentView` and the run's
      abort signal.

    **Returns:** a mapping from ``tool_call_id`` to :class:`~mainspring.Approval` for the
    calls it decides, or ``None``. The first answer for a call wins: later implementations
    are asked only about the calls still undecided. ``agent.approve()`` may answer at any
    time while calls wait, when ``settings.approvals.api`` is on. Calls nobody answered
    within ``settings.approvals.timeout_s`` (default 300 s) are blocked; with no
    implementation and the API off, they are blocked at once. An answer for a call that
    was not asked about is ignored. A request whose ``question`` is set is a running
    call's question to the person (:mod:`mainspring.questions`): it is accepted only by
    ``Approval(True, content=...)`` with content that fits it.

    **If it raises:** fail closed. The calls it was asked about and did not answer are
    blocked, and a ``hook_error`` event is emitted.
    """


@hookspec
async def after_tool_result(
    call: ToolCall, result: ToolResult, agent: AgentView, signal: AbortSignal
) -> ToolResult | None:
    """Inspect or replace a tool's result before the model sees it (redaction, audit).

    **When:** for each executed call, as it completes, also when the tool raised or timed
    out; not for calls that failed preparation or were blocked.

    **Parameters:**
    - ``call``: the :class:`~mainspring.ToolCall`.
    - ``result``: the :class:`~mainspring.ToolResult` (or the previous implementation's
      replacement).
    - ``agent``, ``signal``: the plugin's :class:`~mainspring.AgentView` and the run's
      abort signal.

    **Returns:** a replacement :class:`~mainspring.ToolResult`, or ``None`` to keep it.
    Results chain: each implementation sees the previous one's output.

    **If it raises:** fail closed. The result becomes an error result naming the plugin
    (a failed redactor must not leak), and a ``hook_error`` event is emitted.
    """


@hookspec
async def filter_tool_update(
    call: ToolCall, partial_result: Any, agent: AgentView, signal: AbortSignal, partial: Any
) -> Any | None:
    """Inspect or replace a running tool's progress report before anyone sees it.

    The partial counterpart of ``after_tool_result``: a policy pack that redacts results
    redacts the progress a tool reports through ``ctx.update(partial_result)`` here,
    before the ``tool_execution_update`` event carries it (as its ``partial_result``) to
    subscribers, observers and logs.

    **When:** for each ``ctx.update(partial_result)`` of an executing call that arrives
    before the call finished, in the order the updates were made.

    **Parameters:**
    - ``call``: the :class:`~mainspring.ToolCall`.
    - ``partial_result``: what the tool reported (or the previous implementation's
      replacement).
    - ``agent``, ``signal``: the plugin's :class:`~mainspring.AgentView` and the run's
      abort signal.
    - ``partial``: the same value as ``partial_result``, under the name it had before;
      existing implementations that take it keep working.

    **Returns:** a replacement for ``partial_result``, or ``None`` to keep it.
    Replacements chain: each implementation sees the previous one's output.

    **If it raises:** fail closed. The update is withheld (no ``tool_execution_update``
    is emitted for it), a ``hook_error`` event is emitted, and the call goes on.
    """


@hookspec
def register_tools(agent: AgentView) -> Sequence[Tool] | None:
    """Contribute tools to an agent.

    **When:** once per agent, in the constructor, after all plugins are registered.
    This hook is synchronous.

    **Parameters:**
    - ``agent``: the plugin's :class:`~mainspring.AgentView` of the agent being built
      (``agent.settings`` is ready).

    **Returns:** a sequence of :class:`~mainspring.Tool` (or ``None``). All results are
    collected; two tools with one name are an error naming both plugins.

    **If it raises:** :class:`~mainspring.PluginLoadError`: the agent does not start.
    """


@hookspec
def register_providers(agent: AgentView) -> Sequence[Provider] | None:
    """Contribute model providers, so ``"name:model-id"`` strings resolve to them.

    **When:** once per agent, in the constructor, before its model is resolved. This hook
    is synchronous.

    **Parameters:**
    - ``agent``: the plugin's :class:`~mainspring.AgentView` of the agent being built
      (``agent.settings`` is ready; ``agent.settings.providers`` holds per-provider
      settings).

    **Returns:** a sequence of :class:`~mainspring.Provider` (or ``None``). All results are
    collected; a later plugin's provider replaces an earlier one of the same name.

    **If it raises:** :class:`~mainspring.PluginLoadError`: the agent does not start.
    """


@hookspec
async def review_reply(
    message: AssistantMessage, agent: AgentView, signal: AbortSignal
) -> Block | str | None:
    """Review a reply before it is delivered: let it through, withhold it, or replace it.

    **When:** for each assistant message that ends without a tool call (a reply to the
    user), once the model finished it and before its ``message_end``: the transcript,
    ``message_end``, ``agent_end`` and the session file carry the reviewed reply. Its
    ``message_update`` events have already streamed the model's text: a user interface
    that must show reviewed replies only renders ``message_end`` (deltas are progress).

    **Parameters:**
    - ``message``: the :class:`~mainspring.AssistantMessage` as the model wrote it.
    - ``agent``, ``signal``: the plugin's :class:`~mainspring.AgentView` and the run's
      abort signal.

    **Returns:** :class:`~mainspring.Block` to withhold the reply (its text becomes a
    notice naming the plugin and the reason), a ``str`` to put in its place, or ``None``
    to let it through. The first decision wins; later implementations are not called.
    Either way the reply's other blocks (thinking) are dropped with its text.

    **If it raises:** fail closed, as for a gate. The reply is withheld, and a
    ``hook_error`` event names the plugin.
    """


# -- run control and observation ---------------------------------------------------------


@hookspec
async def should_stop_after_turn(state: AgentState, agent: AgentView, signal: AbortSignal) -> bool:
    """Decide whether the run ends after the turn that just completed.

    **When:** after each completed turn (after ``turn_end``), before tool-call follow-on,
    steering or follow-up turns.

    **Parameters:**
    - ``state``: the :class:`~mainspring.AgentState` after the turn.
    - ``agent``, ``signal``: the plugin's :class:`~mainspring.AgentView` and the run's
      abort signal.

    **Returns:** ``True`` to stop. Any ``True`` stops the run with
    ``agent_end.reason="stopped_by_hook"`` (later implementations are not called); queues
    are kept. Raise :class:`~mainspring.StopRun` to give a reason.

    **If it raises:** the run fails: an assistant message with ``stop_reason="error"``
    naming the plugin ends it.
    """
    raise NotImplementedError


@hookspec
async def prepare_next_turn(
    state: AgentState, agent: AgentView, signal: AbortSignal
) -> NextTurn | None:
    """Change the context, model or thinking level of the run's next model request.

    **When:** before each follow-up model request of a run: after a turn that ended with
    tool results, or before a turn that delivers steering or follow-up messages; after
    ``should_stop_after_turn`` (a run that stops or terminates does not call it), outside
    any turn. Never before the run's first request.

    **Parameters:**
    - ``state``: the :class:`~mainspring.AgentState` after the turn (its ``messages`` are
      the whole transcript).
    - ``agent``, ``signal``: the plugin's :class:`~mainspring.AgentView` and the run's
      abort signal.

    **Returns:** a :class:`~mainspring.NextTurn` or ``None`` (no change). Its ``messages``
    replace what the rest of the run sends in place of the transcript (later turns' messages
    are added after them; the transcript and the session file keep every message; a
    compaction later in the run works on the transcript and ends the replacement); its
    ``system_prompt``, ``model`` and ``thinking_level`` hold for the rest of the run; the
    agent's configuration is unchanged. Every implementation is called, with the same
    ``state``; their changes apply in order (a later one's field wins).

    **If it raises:** skipped: its change is not applied (nor is one that returns
    something else than a ``NextTurn``, a context that breaks the transcript's rules, or an
    unknown model), a ``hook_error`` event is emitted, and the next implementation is
    called.
    """


@hookspec
async def on_event(event: Event, agent: AgentView, signal: AbortSignal) -> None:
    """Observe every lifecycle event (logging, metrics, persistence).

    **When:** for every event, right after the agent's subscribers, one event at a time,
    in the run's total order. The kernel awaits the implementation before going on.

    **Parameters:**
    - ``event``: the frozen event.
    - ``agent``, ``signal``: the plugin's :class:`~mainspring.AgentView` and the run's
      abort signal.

    **Returns:** nothing; every implementation is called, in order, and awaited.

    **If it raises:** the run fails, as for a raising subscriber (an assistant message
    with ``stop_reason="error"`` naming the plugin), except while the run is already
    ending, where the error is logged.
    """


SYNC_HOOKS: frozenset[str] = frozenset(name for name, rules in HOOKS.items() if rules.sync)
"""Hooks whose implementations must be plain functions (from the hook table)."""

ASYNC_HOOKS: frozenset[str] = frozenset(name for name, rules in HOOKS.items() if not rules.sync)
"""Run-time hooks: implementations may be sync or async (from the hook table)."""
