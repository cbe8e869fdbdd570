"""The checked arguments of an agent and of a run: prompt, system prompt, thinking level, model.

Called when an :class:`~mainspring.Agent` is built or reconfigured and when a
``prepare_next_turn`` hook changes the rest of a run; a malformed argument raises
``TypeError``/``ValueError`` with a sentence naming what was expected.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, cast, get_args

from ..messages import UserMessage
from ..providers.base import DEFAULT_CONTEXT_WINDOW, Model, Provider, ThinkingLevel

__all__ = [
    "DEFAULT_MODEL",
    "as_messages",
    "checked_prompt",
    "checked_thinking",
    "resolve_model",
]

DEFAULT_MODEL = "local:smollm2-135m"


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
    name = provider.name
    if not isinstance(name, str):  # refused by the model's validation, not cached
        return Model(provider=name, id=model_id, context_window=DEFAULT_CONTEXT_WINDOW)
    return _passed_through(name, model_id)


@functools.lru_cache(maxsize=256)
def _passed_through(provider: str, model_id: str) -> Model:
    """A model no catalogue knows, with default limits: one object per name (it is frozen)."""
    return Model(provider=provider, id=model_id, context_window=DEFAULT_CONTEXT_WINDOW)
