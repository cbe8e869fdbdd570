"""Putting an agent together: its providers, its tools, its model, its checked arguments.

Everything here runs when an :class:`~mainspring.Agent` is built or reconfigured, never
during a run. Configuration errors raise here, before any run: a plugin whose
``register_tools``/``register_providers`` fails (:class:`~mainspring.PluginLoadError`),
two tools with one name, an unknown provider, a malformed argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast, get_args

from ..errors import HookError, PluginLoadError
from ..hooks.facade import Hooks
from ..messages import UserMessage
from ..providers.base import DEFAULT_CONTEXT_WINDOW, Model, Provider, ThinkingLevel
from ..tools import Tool
from .plugins import PluginSet

__all__ = [
    "DEFAULT_MODEL",
    "ToolSet",
    "as_messages",
    "checked_prompt",
    "checked_thinking",
    "collect_providers",
    "collect_tools",
    "resolve_model",
]

DEFAULT_MODEL = "local:smollm2-135m"

GIVEN = "tools="
"""The owner name of the tools an embedder passes as ``tools=``."""


def checked_prompt(system_prompt: Any) -> str:
    """``system_prompt`` if it is a string; ``TypeError`` otherwise."""
    if not isinstance(system_prompt, str):
        raise TypeError(f"system_prompt must be a str, not {type(system_prompt).__name__}")
    return system_prompt


def checked_thinking(level: Any) -> ThinkingLevel:
    """``level`` if it is a thinking level; ``ValueError`` naming the allowed ones otherwise."""
    allowed = get_args(ThinkingLevel)
    if level not in allowed:
        raise ValueError(f"thinking_level must be one of {', '.join(allowed)}; got {level!r}")
    return cast(ThinkingLevel, level)


def as_messages(value: str | Any | Sequence[Any]) -> list[Any]:
    """A prompt (a string, a message, or messages) as a non-empty list of messages."""
    if isinstance(value, str):
        return [UserMessage(content=value)]
    messages = list(value) if isinstance(value, Sequence) else [value]
    for message in messages:
        if not isinstance(getattr(message, "role", None), str):
            raise TypeError(f"not a message: {message!r} (expected a str or message objects)")
    if not messages:
        raise ValueError("prompt() needs a non-empty prompt")
    return messages


def load_error(plugin_set: PluginSet, error: HookError) -> PluginLoadError:
    """``error`` from a registration hook as the load error of the plugin that raised it."""
    info = plugin_set.info(error.plugin)
    if info is None or info.source != "entrypoint":
        return PluginLoadError(str(error), plugin=error.plugin)
    return PluginLoadError(
        f"{error} (installed plugin {info.name!r}, distribution {info.distribution} "
        f"{info.version}). {plugin_set.fix_hint(info.name)}",
        plugin=info.name,
        distribution=info.distribution,
        version=info.version,
    )


def collect_providers(
    hooks: Hooks, agent: Any, plugin_set: PluginSet, override: Provider | None
) -> dict[str, Provider]:
    """Every registered provider by name (later ones win), ``override`` last."""
    try:
        registered = hooks.register_providers(agent)
    except HookError as error:
        raise load_error(plugin_set, error) from error
    providers = {provider.name: provider for _, provider in registered}
    if override is not None:
        providers[override.name] = override
    return providers


class ToolSet:
    """The agent's tools by name, and where each came from (a plugin, or ``"tools="``)."""

    __slots__ = ("owners", "tools")

    def __init__(self, owned: Iterable[tuple[str, Any]]) -> None:
        self.tools: dict[str, Tool] = {}
        self.owners: dict[str, str] = {}
        for owner, tool in owned:
            if not isinstance(tool, Tool):
                raise TypeError(f"tools= takes Tool objects, got {tool!r}")
            if tool.name in self.tools:
                first = self.owners[tool.name]
                plugin = first if owner == GIVEN else owner
                # a tool may say how to rename it (an MCP server's: its tool_prefix)
                hints = (getattr(t, "rename_hint", None) for t in (tool, self.tools[tool.name]))
                fix = next((hint for hint in hints if isinstance(hint, str)), None) or (
                    f"disable a plugin (disable_plugins=[{plugin!r}]; on the "
                    f"command line --no-plugin {plugin}) or rename a tool"
                )
                raise PluginLoadError(
                    f'two tools are named "{tool.name}": one from {first!r} and one from '
                    f"{owner!r}; {fix}",
                    plugin=owner,
                )
            self.owners[tool.name] = owner
            self.tools[tool.name] = tool

    def _owner_of(self, tool: Any) -> str:
        name = getattr(tool, "name", None)
        known = self.tools.get(name) if isinstance(name, str) else None
        if known is tool and isinstance(name, str):
            return self.owners[name]
        claimed = getattr(tool, "owner", None)
        return claimed if isinstance(claimed, str) and claimed in self.owners.values() else GIVEN

    def replaced(self, tools: Iterable[Any]) -> ToolSet:
        """Exactly ``tools``: a tool already here keeps its owner, any other is ``tools=``
        unless it names (``tool.owner``) a plugin that already owns tools here (a plugin
        refreshing the tools it gives: MCP servers whose tool list changed).

        Two tools with one name raise ``ValueError``, anything but a ``Tool`` ``TypeError``.
        """
        owned = [(self._owner_of(tool), tool) for tool in tools]
        try:
            return ToolSet(owned)
        except PluginLoadError as error:
            raise ValueError(str(error)) from None


def collect_tools(hooks: Hooks, agent: Any, plugin_set: PluginSet, given: Iterable[Any]) -> ToolSet:
    """Every plugin's tools and the ``given`` ones; recorded in each plugin's info."""
    try:
        contributed = hooks.register_tools(agent)
    except HookError as error:
        raise load_error(plugin_set, error) from error
    tool_set = ToolSet([*contributed, *((GIVEN, tool) for tool in given)])
    by_owner: dict[str, list[str]] = {}
    for owner, tool in contributed:
        by_owner.setdefault(owner, []).append(tool.name)
    for owner, names in by_owner.items():
        plugin_set.with_tools(owner, tuple(names))
    return tool_set


def _builtin_default(providers: dict[str, Provider]) -> str:
    """:data:`DEFAULT_MODEL`, or the model the ``local`` provider was configured to serve
    instead (its ``default_model``)."""
    local = providers.get("local")
    served = getattr(local, "default_model", None) if local is not None else None
    return served.ref if isinstance(served, Model) else DEFAULT_MODEL


def resolve_model(
    model: str | Model | None,
    providers: dict[str, Provider],
    override: Provider | None,
    default_model: str | None,
) -> Model:
    """The :class:`Model` for ``"provider:model-id"`` (or the default when ``None``).

    With ``override`` (``provider=``), the id is not looked up among the providers; an
    id a provider's catalogue does not know is passed through with default limits.
    """
    if isinstance(model, Model):
        return model
    if model is None:
        if override is not None:
            catalogue = getattr(override, "models", None) or {}
            first = next(iter(catalogue.values()), None)
            if isinstance(first, Model):
                return first
            return Model(provider=override.name, id="default")
        model = default_model or _builtin_default(providers)
    provider_name, sep, model_id = model.partition(":")
    if not sep or not provider_name or not model_id:
        raise ValueError(f'model must look like "provider:model-id", got {model!r}')
    provider = override if override is not None else providers.get(provider_name)
    if provider is None:
        known = ", ".join(sorted(providers)) or "none"
        raise ValueError(
            f'unknown provider "{provider_name}" in model {model!r}; registered providers: {known}'
        )
    entry = (getattr(provider, "models", None) or {}).get(model_id)
    if isinstance(entry, Model):
        return entry
    return Model(provider=provider.name, id=model_id, context_window=DEFAULT_CONTEXT_WINDOW)
