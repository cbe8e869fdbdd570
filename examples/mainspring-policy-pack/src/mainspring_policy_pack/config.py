"""Loading the policy: the shipped default, a TOML file laid over it, and validation.

Where the file comes from, for one agent: ``plugin_options["mainspring-policy-pack"]
["config"]``, else ``$MAINSPRING_POLICY_FILE``, else none (the default policy alone). The
merge rules are in ``default_policy.toml`` (:data:`DEFAULT_POLICY_TOML`), which is also the
reference for every key.

Every problem is a :class:`PolicyError` naming the file and the key: an unreadable file,
invalid TOML, an unknown table or key, a wrong type, a duplicate or unknown rule name (deny
and ask rules of a section share one namespace), an invalid regular expression (or one
RE2 cannot run: see :mod:`.regex`), a workspace that is not a directory. The plugin raises it from
``register_tools``, so the agent refuses to start (``PluginLoadError``) rather than run with
a policy other than the one its author wrote.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from mainspring.effects import EFFECTS, ROLES, Labels, check_effects, check_roles

from .regex import Pattern, PatternError, compile_pattern
from .schema import FileModel, OptionsModel

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_POLICY_TOML",
    "WORKSPACE_ENV",
    "AskRule",
    "DenyRule",
    "PathAskRule",
    "Policy",
    "PolicyError",
    "RedactionRule",
    "ToolMeaning",
    "load_policy",
]

CONFIG_ENV = "MAINSPRING_POLICY_FILE"
"""The environment variable naming the policy file when no ``config`` option is set."""

WORKSPACE_ENV = "MAINSPRING_WORKSPACE"
"""The environment variable naming the workspace when neither the file nor the options do."""

DEFAULT_POLICY_TOML: str = (
    resources.files(__package__).joinpath("default_policy.toml").read_text(encoding="utf-8")
)
"""The text of the default policy (``default_policy.toml`` in this package)."""


class PolicyError(ValueError):
    """The policy (file or plugin options) is invalid; the message says where and why."""


# -- the effective policy -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DenyRule:
    """A shell-command deny rule: ``regex`` found in a command blocks the call."""

    name: str
    regex: Pattern
    reason: str


@dataclass(frozen=True, slots=True)
class AskRule:
    """A shell-command ask rule: ``regex`` found in a command makes the call wait for an
    approver (``Ask``), unless a deny rule blocks it."""

    name: str
    regex: Pattern
    reason: str


@dataclass(frozen=True, slots=True)
class PathAskRule:
    """A path ask rule: the call waits for an approver when ``regex`` finds a path
    argument (``when="matches"``) or fails to (``when="does-not-match"``), the path taken
    relative to the workspace. ``tools``: the tools it applies to (``None``: every tool)."""

    name: str
    regex: Pattern
    reason: str
    tools: frozenset[str] | None
    when: Literal["matches", "does-not-match"]


@dataclass(frozen=True, slots=True)
class RedactionRule:
    """A secret shape: matches of ``regex`` (or of its ``secret`` group) become
    ``[REDACTED:<kind>]``, if they pass ``check`` (see :mod:`.secrets`)."""

    name: str
    kind: str
    regex: Pattern
    check: str | None = None


@dataclass(frozen=True, slots=True)
class ToolMeaning:
    """What the policy file says about one tool (``[policy.tools.NAME]``): its effects
    (``None``: as the tool declares), the roles of its arguments (laid over the tool's
    own), and the labels of its results (``None``: none added)."""

    effects: frozenset[str] | None
    roles: Mapping[str, str]
    results: Labels | None


@dataclass(frozen=True, slots=True)
class Policy:
    """The effective policy of one agent (defaults merged with its file)."""

    source: str
    workspace: Path
    unknown_effect: Literal["allow", "ask", "block"]
    untrusted_flow: Literal["allow", "ask", "block"]
    confidential_flow: Literal["allow", "ask", "block"]
    unlabelled_results: Literal["trusted", "untrusted"]
    flow_effects: frozenset[str]
    flow_roles: frozenset[str]
    tools: Mapping[str, ToolMeaning]
    sandbox: bool
    shell: bool
    deny_rules: tuple[DenyRule, ...]
    ask_rules: tuple[AskRule, ...]
    path_ask_rules: tuple[PathAskRule, ...]
    redact_results: bool
    redact_context: bool
    redaction_rules: tuple[RedactionRule, ...]

    def meaning(self, tool: Any) -> tuple[frozenset[str], Mapping[str, str]]:
        """``(effects, roles)`` of ``tool`` (a :class:`mainspring.Tool`) as this policy
        sees it: the tool's own, with what ``[policy.tools.NAME]`` declares laid over."""
        effects = getattr(tool, "effects", None) or frozenset({"unknown"})
        roles: Mapping[str, str] = getattr(tool, "roles", None) or {}
        said = self.tools.get(getattr(tool, "name", ""))
        if said is None:
            return effects, roles
        return said.effects or effects, {**roles, **said.roles}

    def weakened(self) -> list[str]:
        """What this policy turns off that the default policy has on, one phrase each
        (empty for a policy at least as strict as the default): a part switched off, or
        default rules or patterns dropped (ask rules included: a call a default rule would
        have put to an approver runs without one)."""
        off = []
        for key, default in (
            ("unknown_effect", _DEFAULTS.policy.unknown_effect),
            ("untrusted_flow", _DEFAULTS.policy.untrusted_flow),
            ("confidential_flow", _DEFAULTS.policy.confidential_flow),
        ):
            if getattr(self, key) == "allow" and default != "allow":
                off.append(f'the {key.replace("_", " ")} rule (policy.{key} = "allow")')
        if not self.sandbox:
            off.append("the workspace sandbox (sandbox.enabled = false)")
        if not self.shell:
            off.append("the shell deny rules and ask rules (shell.enabled = false)")
        else:
            for kind, rules, defaults in (
                ("deny", self.deny_rules, _DEFAULTS.shell.deny),
                ("ask", self.ask_rules, _DEFAULTS.shell.ask),
            ):
                names = {rule.name for rule in rules}
                dropped = [entry.name for entry in defaults if entry.name not in names]
                if dropped:
                    off.append(f"the default shell {kind} rules {', '.join(dropped)}")
        if not self.redact_results:
            off.append("secret redaction in tool results (redaction.results = false)")
        if not self.redact_context:
            off.append("secret redaction in the model's context (redaction.context = false)")
        if self.redact_results or self.redact_context:
            names = {rule.name for rule in self.redaction_rules}
            dropped = [p.name for p in _DEFAULTS.redaction.patterns if p.name not in names]
            if dropped:
                off.append(f"the default redaction patterns {', '.join(dropped)}")
        return off


def _problems(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in item['loc']) or '(top level)'}: {item['msg']}"
        for item in error.errors(include_url=False)
    )


_REPLACED = {
    ("sandbox", "path_arguments"): 'declare roles: [policy.tools.NAME] args = {ARG = "path"}',
    ("shell", "tools"): 'declare effects: [policy.tools.NAME] effects = ["execute"]',
    ("shell", "command_arguments"): ('declare roles: [policy.tools.NAME] args = {ARG = "command"}'),
}
"""Keys of earlier versions, which guessed by name, and what replaces them."""


def _parse(text: str, where: str) -> FileModel:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise PolicyError(f"{where} is not valid TOML: {error}") from None
    for (section, key), instead in _REPLACED.items():
        if isinstance(data.get(section), dict) and key in data[section]:
            raise PolicyError(
                f"{where}: {section}.{key} is no longer read: rules follow what tools declare, "
                f"never argument or tool names; {instead}"
            )
    try:
        return FileModel.model_validate(data)
    except ValidationError as error:
        raise PolicyError(f"{where} is invalid: {_problems(error)}") from None


def _compile(pattern: str, what: str, where: str) -> Pattern:
    try:
        return compile_pattern(pattern)
    except PatternError as error:
        raise PolicyError(f"{where}: {what} has an invalid regular expression: {error}") from None


def _merge_named(
    groups: list[tuple[list[Any], list[Any]]],
    use_defaults: bool,
    disable: list[str],
    section: str,
    where: str,
) -> list[list[Any]]:
    """For each ``(defaults, own)`` group of a section (its deny and ask rules, or its
    patterns): the default entries (less those disabled) followed by the file's own.
    Names are one namespace across the groups, so ``disable`` and a reason naming a
    rule are never ambiguous."""
    known = {entry.name for defaults, _ in groups for entry in defaults}
    unknown = sorted(set(disable) - known)
    if unknown:
        raise PolicyError(
            f"{where}: {section}.disable names no default entry: {', '.join(unknown)} "
            f"(defaults: {', '.join(sorted(known))})"
        )
    merged = [
        [
            *([entry for entry in defaults if entry.name not in disable] if use_defaults else []),
            *own,
        ]
        for defaults, own in groups
    ]
    names = [entry.name for group in merged for entry in group]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise PolicyError(f"{where}: {section} has two entries named {', '.join(duplicates)}")
    return merged


_DEFAULTS = _parse(DEFAULT_POLICY_TOML, "the default policy")
for _rule in _DEFAULTS.shell.deny:  # a broken default fails the import
    _compile(_rule.pattern, f"deny rule {_rule.name!r}", "the default policy")
for _rule in [*_DEFAULTS.shell.ask, *_DEFAULTS.sandbox.ask]:
    _compile(_rule.pattern, f"ask rule {_rule.name!r}", "the default policy")
for _pattern in _DEFAULTS.redaction.patterns:
    _compile(_pattern.pattern, f"redaction pattern {_pattern.name!r}", "the default policy")


def _read(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8")
    except OSError as error:
        raise PolicyError(
            f"cannot read the policy file {path}: {error.strerror or error}"
        ) from None
    except UnicodeDecodeError as error:
        raise PolicyError(f"the policy file {path} is not UTF-8: {error.reason}") from None


def _workspace(
    file: FileModel, options: OptionsModel, base: Path | None, env: Mapping[str, str], where: str
) -> Path:
    if file.sandbox.workspace is not None:
        root = Path(file.sandbox.workspace).expanduser()
        if not root.is_absolute() and base is not None:
            root = base / root
        what = "sandbox.workspace"
    elif options.workspace is not None:
        root, what = Path(options.workspace), "the plugin option workspace"
    elif env.get(WORKSPACE_ENV):
        root, what = Path(env[WORKSPACE_ENV]), f"${WORKSPACE_ENV}"
    else:
        root, what = Path.cwd(), "the current directory"
    real = Path(os.path.realpath(root))
    if not real.is_dir():
        raise PolicyError(f"{where}: the workspace ({what}: {root}) is not an existing directory")
    return real


def _words(words: list[str], known: frozenset[str], key: str, where: str) -> frozenset[str]:
    unknown = sorted(set(words) - known)
    if unknown:
        raise PolicyError(
            f"{where}: {key} has unknown words {', '.join(unknown)} "
            f"(known: {', '.join(sorted(known))})"
        )
    return frozenset(words)


def _tool_meaning(name: str, entry: Any, where: str) -> ToolMeaning:
    """A ``[policy.tools.NAME]`` table, its words checked (an unknown one names the tool
    and the word)."""
    try:
        effects = None if entry.effects is None else check_effects(name, entry.effects)
        roles = check_roles(name, entry.args)
    except ValueError as error:
        raise PolicyError(f"{where}: policy.tools: {error}") from None
    results = entry.results
    labels = (
        None
        if results is None
        else Labels(
            integrity=results.integrity,
            confidentiality=results.confidentiality,
            sources=tuple(results.sources),
        )
    )
    return ToolMeaning(effects, roles, labels)


def load_policy(
    options: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Policy:
    """The effective policy for plugin ``options`` (``config``, ``workspace``).

    Raises :class:`PolicyError` on any problem (see the module docs).
    """
    env = os.environ if environ is None else environ
    try:
        opts = OptionsModel.model_validate(dict(options or {}))
    except ValidationError as error:
        raise PolicyError(
            f"invalid mainspring-policy-pack plugin options: {_problems(error)}"
        ) from None
    path = opts.config or env.get(CONFIG_ENV) or None
    if path is None:
        file, where, base = FileModel(), "the default policy", None
    else:
        where = f"the policy file {path}"
        file = _parse(_read(path), where)
        base = Path(path).resolve().parent
    defaults = _DEFAULTS
    deny, ask = _merge_named(
        [(defaults.shell.deny, file.shell.deny), (defaults.shell.ask, file.shell.ask)],
        file.shell.use_defaults,
        file.shell.disable,
        "shell",
        where,
    )
    (path_ask,) = _merge_named(
        [(defaults.sandbox.ask, file.sandbox.ask)], True, [], "sandbox.ask", where
    )
    (patterns,) = _merge_named(
        [(defaults.redaction.patterns, file.redaction.patterns)],
        file.redaction.use_defaults,
        file.redaction.disable,
        "redaction.patterns",
        where,
    )

    def pick(own: Any, default: Any) -> Any:
        return default if own is None else own

    mine, theirs = file.policy, defaults.policy
    return Policy(
        source=where,
        workspace=_workspace(file, opts, base, env, where),
        unknown_effect=pick(mine.unknown_effect, theirs.unknown_effect),
        untrusted_flow=pick(mine.untrusted_flow, theirs.untrusted_flow),
        confidential_flow=pick(mine.confidential_flow, theirs.confidential_flow),
        unlabelled_results=pick(mine.unlabelled_results, theirs.unlabelled_results),
        flow_effects=_words(
            pick(mine.flow_effects, theirs.flow_effects), EFFECTS, "policy.flow_effects", where
        ),
        flow_roles=_words(
            pick(mine.flow_roles, theirs.flow_roles), ROLES, "policy.flow_roles", where
        ),
        tools={name: _tool_meaning(name, entry, where) for name, entry in mine.tools.items()},
        sandbox=pick(file.sandbox.enabled, defaults.sandbox.enabled),
        shell=pick(file.shell.enabled, defaults.shell.enabled),
        deny_rules=tuple(
            DenyRule(
                entry.name,
                _compile(entry.pattern, f"deny rule {entry.name!r}", where),
                entry.reason,
            )
            for entry in deny
        ),
        ask_rules=tuple(
            AskRule(
                entry.name, _compile(entry.pattern, f"ask rule {entry.name!r}", where), entry.reason
            )
            for entry in ask
        ),
        path_ask_rules=tuple(
            PathAskRule(
                entry.name,
                _compile(entry.pattern, f"path ask rule {entry.name!r}", where),
                entry.reason,
                None if entry.tools is None else frozenset(entry.tools),
                entry.when,
            )
            for entry in path_ask
        ),
        redact_results=pick(file.redaction.results, defaults.redaction.results),
        redact_context=pick(file.redaction.context, defaults.redaction.context),
        redaction_rules=tuple(
            RedactionRule(
                entry.name,
                entry.kind or entry.name,
                _compile(entry.pattern, f"redaction pattern {entry.name!r}", where),
                entry.check,
            )
            for entry in patterns
        ),
    )
