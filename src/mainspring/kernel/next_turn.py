"""``prepare_next_turn``: what the rest of a run sends, changed by plugins between turns.

The loop calls :func:`prepare_next_turn` before each follow-up model request, outside any
turn. The hook facade calls the implementations (its rule in the hook table: results
collected in order, a failure skipped); each :class:`~mainspring.NextTurn` is checked as
a whole here (a context that breaks the transcript's rules, an unknown model or provider,
a bad thinking level or system prompt refuse it, and nothing of it applies), then the
changes apply in order: a later implementation's field wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, final

from ..contract.decisions import NextTurn
from ..contract.errors import HookError
from ..invariants import transcript_problem
from ..providers.base import Model
from .arguments import checked_prompt, checked_thinking, resolve_model

if TYPE_CHECKING:
    from ..providers.base import Provider, ThinkingLevel
    from .run import Run

__all__ = ["prepare_next_turn"]

HOOK = "prepare_next_turn"


async def prepare_next_turn(run: Run) -> None:
    """Call the ``prepare_next_turn`` implementations and apply their changes to ``run``."""

    def check(plugin: str, value: Any) -> _Change:
        return _Change(run, plugin, value)

    changes = await run.hooks.prepare_next_turn(
        run.core.snapshot, run.agent, run.signal, run.report_hook_error, check
    )
    for change in changes:
        change.apply(run)


@final
class _Change:
    """A ``NextTurn`` checked as a whole before any of it applies."""

    __slots__ = ("messages", "model", "provider", "system_prompt", "thinking_level")

    def __init__(self, run: Run, plugin: str, value: Any) -> None:
        if not isinstance(value, NextTurn):
            raise HookError(HOOK, plugin, f"returned a {type(value).__name__}, not a NextTurn")
        self.messages: tuple[Any, ...] | None = None
        if value.messages is not None:
            if isinstance(value.messages, str) or not isinstance(value.messages, Sequence):
                raise HookError(HOOK, plugin, f"gave messages as a {type(value.messages).__name__}")
            messages = tuple(value.messages)
            problem = transcript_problem(messages, llm_only=False)
            if problem:
                raise HookError(HOOK, plugin, f"broke the transcript: {problem}")
            self.messages = messages
        try:
            self.system_prompt = (
                None if value.system_prompt is None else checked_prompt(value.system_prompt)
            )
            self.thinking_level: ThinkingLevel | None = (
                None if value.thinking_level is None else checked_thinking(value.thinking_level)
            )
            self.model: Model | None = None
            self.provider: Provider | None = None
            if value.model is not None:
                self.model = _model(run, value.model)
                self.provider = run.options.provider or run.agent.provider_for(self.model)
        except (TypeError, ValueError) as error:
            raise HookError(HOOK, plugin, str(error)) from None

    def apply(self, run: Run) -> None:
        """Make the change hold for the rest of ``run``."""
        if self.messages is not None:
            # what the rest of the run sends: these, then what the transcript gains from now
            run.context = (self.messages, len(run.core.messages))
        if self.system_prompt is not None:
            run.system_prompt = self.system_prompt
        if self.thinking_level is not None:
            run.thinking_level = self.thinking_level
        if self.model is not None and self.provider is not None:
            run.model, run.provider = self.model, self.provider


def _model(run: Run, model: Any) -> Model:
    if isinstance(model, Model):
        return model
    if not isinstance(model, str):
        raise TypeError(f"model must be a Model or 'provider:model-id', not {type(model).__name__}")
    return resolve_model(model, run.agent.providers, None, None)
