"""``scripted_run``: one prompt on a scripted model, grammar-checked, in one call."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ..agent import Agent
from .faux import FauxProvider
from .grammar import check_event_grammar
from .recorder import EventRecorder

__all__ = ["ScriptedRun", "scripted_run"]


class ScriptedRun(NamedTuple):
    """What :func:`scripted_run` returns: unpack as ``agent, recorder, provider``."""

    agent: Agent
    recorder: EventRecorder
    provider: FauxProvider


async def scripted_run(
    steps: Sequence[Any],
    prompt: Any = "go",
    *,
    plugins: Sequence[Any] = (),
    recorder: EventRecorder | None = None,
    before: Callable[[Agent], None] | None = None,
    **agent_options: Any,
) -> ScriptedRun:
    """Prompt a fresh agent whose model plays ``steps``; check the event grammar.

    The agent runs on a :class:`FauxProvider` (``model="faux:test"``) with ``plugins``
    registered in-process and installed plugins not autoloaded; other keyword arguments
    go to :class:`~mainspring.Agent` (``tools=``, ``settings=``, ``messages=``…).
    ``before(agent)`` runs after subscribing the recorder and before the prompt (queue
    steering, subscribe more listeners). Raises
    :class:`~mainspring.testing.EventGrammarError` if the stream breaks a rule.
    """
    provider = FauxProvider(steps)
    agent_options.setdefault("model", "faux:test")
    agent_options.setdefault("autoload", False)
    agent = Agent(provider=provider, plugins=plugins, **agent_options)
    recorder = recorder if recorder is not None else EventRecorder()
    agent.subscribe(recorder)
    if before is not None:
        before(agent)
    await agent.prompt(prompt)
    check_event_grammar(recorder.events)
    return ScriptedRun(agent, recorder, provider)
