"""mainspring-policy-pack: a security policy pack configured from a TOML file.

Installed, it guards every agent by what its tools declare (their effects and the roles
of their arguments, :mod:`mainspring.effects`; ``[policy.tools.NAME]`` in the policy file
describes tools it does not own), never by a tool's or an argument's name:

1. **A workspace sandbox** for every ``path``/``paths`` argument of any tool: a path that
   climbs out with ``..``, an absolute path elsewhere, a path through a symlink that points
   out, and a ``~`` path are refused. (``before_tool_call``)
2. **Shell deny rules**, RE2 regular expressions (linear time in the command's length)
   matched against the ``command`` arguments of every tool whose effect is ``execute``:
   ``rm -rf /`` (also ``//``, ``/./``, ``/tmp/../``), ``cd / && rm -rf *``,
   ``curl ... | sh``, ``sudo``, writes under ``/etc``, disk wipes, fork bombs of any
   function name... (``before_tool_call``)
3. **Ask rules** next to the deny rules: a shell command an ask rule matches (by default
   ``git push``, forced or not), or a path argument a path ask rule matches (or, with
   ``when = "does-not-match"``, fails to), is put to an approver: the gate returns
   ``Ask(reason)``, the reason naming the rule and what it matched, and the call runs only
   if a ``request_approval`` implementation or ``agent.approve()`` allows it. With no
   approver configured the kernel blocks it at once (``decided_by="no_approver"``). A
   deny rule or the sandbox always wins over an ask rule. (``before_tool_call``)
4. **Secret redaction**: token shapes (``sk-...``, ``AKIA...``, ``ghp_...``, ``hf_...``,
   JWTs...), private keys (also key lines without their BEGIN line), credentials in URLs
   and ``Authorization`` headers, ``.env``/config assignments (``DB_PASSWORD=...``,
   ``GITHUB_TOKEN=...``) and the like become ``[REDACTED:<kind>]`` in tool results
   (``after_tool_result``, so the transcript, events and session files never hold them),
   in a running tool's progress reports (``filter_tool_update``, so
   ``tool_execution_update`` events don't either) and in what the model is sent
   (``transform_context``). ``details`` and progress reports are walked field by field,
   the way they are serialised (see :mod:`.redact`).

5. **Information-flow rules** (:mod:`.flows`), on the provenance the kernel computes: an
   ``egress``/``send``/``write`` call whose recipient or URL the user did not name and
   that came from untrusted content (or was written by the model while untrusted content
   was in its context), or that carries confidential-labelled data to such a recipient,
   is asked about (or blocked, per the policy). A tool that declares no effect is asked
   about. Tool results are labelled from the policy (``label_tool_result``).

A refused call is blocked with a reason; the model sees it as an error tool result and the
event stream records a ``tool_decision`` of ``block`` naming ``mainspring-policy-pack``.
Allowed calls get a ``tool_decision`` of ``allow`` (from the kernel, with no plugin). An
asked call gets a ``tool_approval_request`` naming ``mainspring-policy-pack``, then a
``tool_decision`` saying who decided.

**Switched off, it says so.** A policy that turns off a part the default has on (the
sandbox, the shell rules, result or context redaction) or drops default rules (deny or ask)
or patterns is logged when the agent is built: a WARNING from the
``mainspring.policy_pack`` logger naming each (:meth:`Policy.weakened`). To make sure the
pack is loaded at all, list it in the kernel's ``required_plugins`` setting.

**Configuration.** The policy file is ``plugin_options["mainspring-policy-pack"]
["config"]``, else ``$MAINSPRING_POLICY_FILE``; without one the documented default policy
(``default_policy.toml``, :data:`DEFAULT_POLICY_TOML`) applies. The workspace is the file's
``sandbox.workspace``, else the ``workspace`` plugin option, else ``$MAINSPRING_WORKSPACE``,
else the current directory when the agent is built.

**Failure semantics (decided here, and tested).**

- A broken policy (unreadable file, bad TOML, an unknown key, a bad regex, a missing
  workspace...) is found when the agent is built: ``register_tools`` loads and validates
  this agent's policy and raises, and the kernel turns that into ``PluginLoadError``, so
  the agent never starts with a policy other than the one written. It cannot be checked at
  import time, because the file is chosen per agent (its settings). The shipped default is
  checked at import.
- If a hook ever ran without a loaded policy (it cannot through ``Agent``), it loads it
  then; a failure raises, and the kernel fails closed: the gate blocks the call and the
  result filter withholds the result.
- ``transform_context`` is a fail-soft hook in mainspring (a raising implementation is
  skipped and its input passed on), which for a redactor would mean sending the secrets.
  So this pack catches its own failures there and raises ``StopRun`` instead: the run
  stops rather than leaking.

Hook order: the gate is ``tryfirst`` (the policy decides before other gates are asked;
approvers are asked only after every gate, and only if none blocked); the redactors are
``trylast`` (they see, and clean, what every other plugin produced).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import mainspring
from mainspring import Ask, Block, StopRun, ToolResult, hookimpl, nonblocking, redactor
from mainspring.effects import Labels
from mainspring.logs import get_logger
from mainspring.provenance import Provenance

from .config import (
    CONFIG_ENV,
    DEFAULT_POLICY_TOML,
    WORKSPACE_ENV,
    AskRule,
    DenyRule,
    PathAskRule,
    Policy,
    PolicyError,
    ToolMeaning,
    load_policy,
)
from .flows import flow_rules
from .redact import Redactor
from .rules import command_rules, path_problem, path_question, path_violation

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_POLICY_TOML",
    "PLUGIN_NAME",
    "WORKSPACE_ENV",
    "AskRule",
    "DenyRule",
    "PathAskRule",
    "Policy",
    "PolicyError",
    "Redactor",
    "ToolMeaning",
    "after_tool_result",
    "before_tool_call",
    "filter_tool_update",
    "flow_rules",
    "label_tool_result",
    "load_policy",
    "name",
    "path_problem",
    "policy_for",
    "register_tools",
    "transform_context",
]

CAPABILITIES = ("tools", "gate", "redact", "context")
"""What this plugin does (its manifest; see ``docs/capabilities.md``)."""

PLUGIN_NAME = "mainspring-policy-pack"
"""The distribution and entry point name; also the key of this plugin's options."""

name = PLUGIN_NAME
"""The plugin's name when passed in-process (``Agent(plugins=[module])``): the kernel names
an in-process plugin by its ``name`` attribute, so ``tool_decision.plugin`` and errors say
``mainspring-policy-pack`` whether the pack was installed or passed in."""

log = get_logger("mainspring.policy_pack")
"""This pack's logger (under ``mainspring``, so the CLI's log settings apply to it)."""

_policies: weakref.WeakKeyDictionary[Any, tuple[Policy, Redactor]] = weakref.WeakKeyDictionary()


def _load(agent: mainspring.Agent) -> tuple[Policy, Redactor]:
    policy = load_policy(agent.settings.plugin_options.get(PLUGIN_NAME, {}))
    loaded = (policy, Redactor(policy.redaction_rules))
    _policies[agent] = loaded
    weakened = policy.weakened()
    if weakened:
        log.warning(
            f"{PLUGIN_NAME}: {policy.source} turns off " + "; ".join(weakened),
            plugin=PLUGIN_NAME,
            policy=policy.source,
            off=weakened,
        )
    return loaded


def _policy(agent: mainspring.Agent) -> tuple[Policy, Redactor]:
    return _policies.get(agent) or _load(agent)


def policy_for(agent: mainspring.Agent) -> Policy:
    """The effective policy of ``agent`` (loaded when the agent was built)."""
    return _policy(agent)[0]


@hookimpl
def register_tools(agent: mainspring.Agent) -> Sequence[mainspring.Tool]:
    """Load and validate this agent's policy now, so a broken one stops the agent from
    starting (the kernel raises ``PluginLoadError``). Contributes no tools."""
    _load(agent)
    return ()


@hookimpl(tryfirst=True)
def before_tool_call(
    call: mainspring.ToolCall,
    args: Any,
    tool: mainspring.Tool,
    agent: mainspring.Agent,
    provenance: Provenance | None = None,
) -> Block | Ask | None:
    """Decide a call by what its tool declares (effects and argument roles, with the
    policy's ``[policy.tools.NAME]`` laid over), never by names.

    ``Block``: a ``path``/``paths`` argument that leaves the workspace; a command of an
    ``execute`` tool that a deny rule matches; an unknown effect or a broken flow rule set
    to ``"block"``. Else ``Ask``: a path or shell ask rule that matches (the reason names
    the rule and what it matched), an unknown effect (by default), an information flow
    the user did not name (by default; see :mod:`.flows`). Every deny check runs before
    any ask rule, so a deny always wins; a ``Block`` from another gate wins over this
    ``Ask`` too (the kernel's rule)."""
    policy, _ = _policy(agent)
    effects, roles = policy.meaning(tool)
    if policy.sandbox:
        reason = path_violation(policy, roles, args)
        if reason:
            return Block(reason)
    denied, asked = command_rules(policy, effects, roles, args) if policy.shell else (None, None)
    if denied:
        return Block(denied)
    questions: list[str] = []
    if "unknown" in effects and policy.unknown_effect != "allow":
        reason = (
            f"tool {call.name!r} declares no effect, so what it does cannot be checked "
            "(declare its effects, or describe it under [policy.tools])"
        )
        if policy.unknown_effect == "block":
            return Block(reason)
        questions.append(reason)
    for action, reason in flow_rules(policy, effects, roles, provenance):
        if action == "block":
            return Block(reason)
        questions.append(reason)
    if policy.sandbox:
        reason = path_question(policy, call.name, roles, args)
        if reason:
            questions.insert(0, reason)
    if asked:
        questions.insert(0, asked)
    return Ask("; ".join(questions)) if questions else None


@hookimpl
@nonblocking
def label_tool_result(call: mainspring.ToolCall, agent: mainspring.Agent) -> Labels | None:
    """The labels ``[policy.tools.NAME] results = {...}`` gives the tool's results."""
    policy, _ = _policy(agent)
    said = policy.tools.get(call.name)
    return None if said is None else said.results


@hookimpl(trylast=True)
@redactor
def after_tool_result(result: ToolResult, agent: mainspring.Agent) -> ToolResult | None:
    """A copy of the result with its secrets redacted, or ``None`` when it holds none."""
    policy, redactor = _policy(agent)
    if not policy.redact_results:
        return None
    return redactor.result(result)


@hookimpl(trylast=True)
@redactor
def filter_tool_update(partial_result: Any, agent: mainspring.Agent) -> Any | None:
    """A running tool's progress report with its secrets redacted (``None`` if none), so
    ``tool_execution_update`` events never carry what the final result would hide."""
    policy, redactor = _policy(agent)
    if not policy.redact_results:
        return None
    redacted = redactor.value(partial_result)
    return None if redacted is partial_result else redacted


@hookimpl(trylast=True)
def transform_context(messages: tuple[Any, ...], agent: mainspring.Agent) -> Sequence[Any] | None:
    """The messages with secrets redacted from their text (copies; ``None`` if none
    changed). A failure stops the run (``StopRun``) instead of sending secrets."""
    try:
        policy, redactor = _policy(agent)
        if not policy.redact_context:
            return None
        return redactor.messages(messages)
    except Exception as error:
        raise StopRun(
            f"{PLUGIN_NAME} could not redact the context ({type(error).__name__}: {error}); "
            "the run was stopped so that nothing unredacted is sent to the model"
        ) from error
