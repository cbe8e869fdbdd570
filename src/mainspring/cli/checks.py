"""Checks of what the command line was given, each failing with one sentence that names
the option, variable or config key at fault and what it accepts.

- :func:`model_source` and :func:`usable_default`: the model a command runs comes from
  ``--model``, ``$MAINSPRING_MODEL`` or ``default_model`` in the config file; a malformed
  one is named by its source. Commands that only list things do not need a model: for
  them a malformed default is a warning and is set aside.
- :func:`check_model`: a provider that serves only the models of its catalogue (the
  ``closed_catalogue`` attribute, as the embedded ``local`` provider) refuses another id,
  listing the ones it serves; for a provider with a catalogue that is not closed (an HTTP
  API may serve models it does not list), an unknown id is a warning naming the known ones.
- :func:`unknown_plugin_names`: ``--no-plugin NAME`` naming no plugin.
- :func:`check_settings`: provider options the settings model cannot check (the local
  provider's), named with the config file they come from.
- :func:`with_provider_options`: ``-o KEY VALUE`` sets an option of the model's provider;
  :func:`with_options_carried` also of every other provider that takes it (``chat``'s
  ``/model`` may switch to one).
- :func:`check_credentials`: the model's provider needs a key that is not set (an
  OpenAI- or Anthropic-compatible API that is not local): a ``ValueError`` before the run.
- :func:`unused_tools_note`: the agent has tools its model will not see (a provider's
  optional ``tool_support(model)`` says why, as the local provider does in its default
  ``tool_mode``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from ..agent import DEFAULT_MODEL
from ..loading import normalise
from ..settings import ProviderSettings, Settings, config_path

__all__ = [
    "check_credentials",
    "check_model",
    "check_names",
    "check_settings",
    "model_source",
    "plugin_names",
    "unknown_plugin_names",
    "unused_tools_note",
    "usable_default",
    "with_options_carried",
    "with_provider_options",
]

_FORM = '"provider:model-id", e.g. local:smollm2-135m (mainspring models lists them)'


def model_source(given: str | None) -> str:
    """Where the model of a command comes from, as a person would name it."""
    if given is not None:
        return "--model"
    if os.environ.get("MAINSPRING_MODEL"):
        return "$MAINSPRING_MODEL"
    path, exists = config_path()
    return f"default_model in {path}" if exists else "the default model"


def check_settings(settings: Settings) -> None:
    """Raise ``ValueError`` naming the config file when an option of the local provider
    is unknown or has a value it does not allow."""
    from ..plugins.providers import local_options

    try:
        local_options(settings)
    except ValueError as error:
        path, exists = config_path()
        raise ValueError(f"{path}: {error}" if exists else str(error)) from None


def with_provider_options(
    settings: Settings, model: str | None, options: Sequence[Sequence[str]]
) -> Settings:
    """``settings`` with each ``(KEY, VALUE)`` of ``options`` (``-o KEY VALUE``) set in
    ``[providers.NAME] options``, ``NAME`` being the provider of ``model`` (else of the
    default model). ``VALUE`` is read as JSON (``0.2``, ``true``, ``[1, 2]``), else as text.
    """
    if not options:
        return settings
    provider = (model or settings.default_model or DEFAULT_MODEL).partition(":")[0].strip()
    given: dict[str, Any] = {}
    for key, value in options:
        try:
            given[key] = json.loads(value)
        except ValueError:
            given[key] = value
    current = settings.providers.get(provider) or ProviderSettings()
    updated = current.model_copy(update={"options": {**current.options, **given}})
    return settings.model_copy(update={"providers": {**settings.providers, provider: updated}})


def with_options_carried(settings: Settings, options: Sequence[Sequence[str]]) -> Settings:
    """``settings`` with ``options`` (``-o KEY VALUE``) also set for every provider named
    in the settings or bundled with mainspring that takes them (:func:`check_settings`
    passes), so a model of another provider chosen later (``chat``'s ``/model``) gets
    them too. A provider that does not take them (the local provider has a fixed set of
    options) is left as it is."""
    if not options:
        return settings
    from ..plugins.providers import CONFIGURABLE_PROVIDERS

    for name in dict.fromkeys([*CONFIGURABLE_PROVIDERS, *settings.providers]):
        carried = with_provider_options(settings, f"{name}:", options)
        try:
            check_settings(carried)
        except ValueError:
            continue
        settings = carried
    return settings


def check_credentials(agent: Any, source: str) -> None:
    """Raise ``ValueError`` when the agent's provider says a credential it needs is missing
    (its optional ``credentials_problem()``, as the OpenAI and Anthropic providers have)."""
    try:
        provider = agent.provider_for(agent.state.model)
        problem = getattr(provider, "credentials_problem", None)
        text = problem() if problem is not None else None
    except Exception:  # a provider that cannot be built says so when it is used
        return
    if text:
        model = agent.state.model
        raise ValueError(f"{model.provider}:{model.id} ({source}): {text}")


def _malformed(model: str) -> bool:
    provider, sep, model_id = model.partition(":")
    return not (sep and provider.strip() and model_id.strip())


def usable_default(settings: Settings, listing: bool) -> tuple[Settings, str | None]:
    """``settings`` with a usable ``default_model``, and a warning to print (or ``None``).

    A malformed default model raises ``ValueError`` naming its source, unless the command
    is ``listing`` (it needs no model): then it is set aside with a warning.
    """
    model = settings.default_model
    if model is None or not _malformed(model):
        return settings, None
    problem = f"{model_source(None)} is {model!r}; give {_FORM}"
    if not listing:
        raise ValueError(problem)
    return settings.model_copy(update={"default_model": None}), f"{problem} (ignored here)"


def check_model(agent: Any, source: str) -> str | None:
    """Check the agent's model against its provider's catalogue: raise ``ValueError`` for
    an id a closed catalogue lacks; return a warning for one an open catalogue lacks."""
    model = agent.state.model
    try:
        provider = agent.provider_for(model)
        catalogue = dict(getattr(provider, "models", None) or {})
        closed = bool(getattr(provider, "closed_catalogue", False))
    except Exception:  # a provider that cannot be built says so when it is used
        return None
    if not catalogue or model.id in catalogue:
        return None
    known = ", ".join(f"{model.provider}:{name}" for name in catalogue)
    if closed:
        raise ValueError(
            f"{source}: the {model.provider} provider does not serve {model.id!r}; "
            f"it serves {known}"
        )
    return (
        f"{model.provider}:{model.id} ({source}) is not among the models the "
        f"{model.provider} provider knows ({known}); trying it anyway"
    )


def unknown_plugin_names(agent: Any, names: Iterable[str]) -> list[str]:
    """The names in ``names`` (``--no-plugin``) that name no plugin, loaded or turned off."""
    known = {normalise(info.name) for info in agent.plugins.infos}
    known |= {normalise(item.name) for item in agent.plugins.disabled}
    return [name for name in names if normalise(name) not in known]


def plugin_names(agent: Any) -> str:
    """Every plugin's name, loaded or turned off, for a message."""
    names = {info.name for info in agent.plugins.infos}
    names |= {item.name for item in agent.plugins.disabled}
    return ", ".join(sorted(names))


def check_names(agent: Any, model: str | None, disabled: Sequence[str], running: bool) -> None:
    """What the command line named must exist: the model (when ``running``, given as
    ``model`` or by default) and each ``--no-plugin`` name in ``disabled``. A problem is a
    ``ValueError`` for ``run`` and ``chat`` (``running``), a warning on stderr for the
    listing commands; a model outside an open catalogue is always a warning."""
    problems: list[str] = []
    warning = check_model(agent, model_source(model)) if running else None
    unknown = unknown_plugin_names(agent, disabled)
    if unknown:
        problems.append(
            f"--no-plugin {', '.join(unknown)}: no plugin of that name "
            f"(the plugins: {plugin_names(agent)})"
        )
    if running and problems:
        raise ValueError("; ".join(problems))
    for text in [*([warning] if warning else []), *problems]:
        print(f"mainspring: warning: {text}", file=sys.stderr, flush=True)


def unused_tools_note(agent: Any, brief: bool = False) -> str | None:
    """A note when the agent has tools and its provider says the model will not see them
    (the provider's optional ``tool_support(model)``); ``None`` otherwise. ``brief``: one
    short line, the reason without what to do about it (its text up to the first ``; ``),
    pointing at ``mainspring tools``, which gives it whole."""
    count = len(agent.state.tools)
    if not count:
        return None
    try:
        support = getattr(agent.provider, "tool_support", None)
        reason = support(agent.state.model) if support is not None else None
    except Exception:  # a provider that cannot be built: the run will say so
        return None
    if not reason:
        return None
    tools = f"{count} tool{'' if count == 1 else 's'} installed"
    if brief:
        return f"{tools}, but {reason.split('; ')[0]} (how to change it: mainspring tools)"
    return f"{tools}, but {reason}"
