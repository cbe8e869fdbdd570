"""The policy file's shape: pydantic models that validate a parsed TOML policy file.

Every key is optional (a file only says what it changes) and every model forbids unknown
keys, so a typo is an error rather than a silently ignored setting. The meaning of each
key, and how a file is laid over the default, are documented in ``default_policy.toml``;
:mod:`.config` turns a validated file into the effective :class:`~.config.Policy`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FileModel", "OptionsModel"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _RuleEntry(_Strict):
    """A ``[[shell.deny]]`` or ``[[shell.ask]]`` entry."""

    name: str = Field(min_length=1)
    pattern: str = Field(min_length=1)
    reason: str = Field(min_length=1)


class _PathAskEntry(_RuleEntry):
    """A ``[[sandbox.ask]]`` entry."""

    tools: list[str] | None = None
    when: Literal["matches", "does-not-match"] = "matches"


class _PatternEntry(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    kind: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+$")
    pattern: str = Field(min_length=1)
    check: Literal["assignment", "random"] | None = None


class _Sandbox(_Strict):
    enabled: bool | None = None
    workspace: str | None = None
    ask: list[_PathAskEntry] = Field(default_factory=list)


class _Shell(_Strict):
    enabled: bool | None = None
    use_defaults: bool = True
    disable: list[str] = Field(default_factory=list)
    deny: list[_RuleEntry] = Field(default_factory=list)
    ask: list[_RuleEntry] = Field(default_factory=list)


class _Redaction(_Strict):
    results: bool | None = None
    context: bool | None = None
    use_defaults: bool = True
    disable: list[str] = Field(default_factory=list)
    patterns: list[_PatternEntry] = Field(default_factory=list)


class _ResultLabels(_Strict):
    """``results = {...}`` of a ``[policy.tools.NAME]`` table."""

    integrity: Literal["trusted", "untrusted"] = "trusted"
    confidentiality: Literal["public", "internal", "confidential", "secret"] = "public"
    sources: list[str] = Field(default_factory=list)


class _ToolEntry(_Strict):
    """A ``[policy.tools.NAME]`` table: what a tool this pack does not own does."""

    effects: list[str] | None = None
    args: dict[str, str] = Field(default_factory=dict)
    results: _ResultLabels | None = None


_Action = Literal["allow", "ask", "block"]


class _Policy(_Strict):
    unknown_effect: _Action | None = None
    untrusted_flow: _Action | None = None
    confidential_flow: _Action | None = None
    unlabelled_results: Literal["trusted", "untrusted"] | None = None
    flow_effects: list[str] | None = None
    flow_roles: list[str] | None = None
    tools: dict[str, _ToolEntry] = Field(default_factory=dict)


class FileModel(_Strict):
    """A whole policy file: ``[policy]``, ``[sandbox]``, ``[shell]`` and ``[redaction]``."""

    policy: _Policy = Field(default_factory=_Policy)
    sandbox: _Sandbox = Field(default_factory=_Sandbox)
    shell: _Shell = Field(default_factory=_Shell)
    redaction: _Redaction = Field(default_factory=_Redaction)


class OptionsModel(_Strict):
    """``plugin_options["mainspring-policy-pack"]``."""

    config: str | None = None
    workspace: str | None = None
