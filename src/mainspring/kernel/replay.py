"""The seam for runners that replay a run from checkpoints (``mainspring.durable``).

A durable runner executes a run again after a crash: the kernel drives it from the start,
the provider and the tools answer from their checkpoints, and the run reaches the point
where the process died with the same events in the same order. Two things make that
replay invisible to the agent's listeners:

- the run keeps the id it had (``run_id``), so its events carry the same ``run_id``;
- events up to ``delivered_through`` (their ``seq``) were delivered before the crash and
  are not delivered again, to subscribers or ``on_event`` observers; numbering goes on
  from there.

The runner may also put a provider in front of the one the model resolves to (a wrapper
that checkpoints replies), and a *recorder* in front of every subscriber (a journal that
must hold an event before anyone sees it). Nothing here changes what a run does, only
what is seen of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..providers.base import Provider
    from .agent import Agent, Listener

__all__ = ["prepare_replay", "reaches_others"]


def prepare_replay(
    agent: Agent,
    run_id: str,
    delivered_through: int = 0,
    provider: Provider | None = None,
    recorder: Listener | None = None,
) -> None:
    """Make the agent's next run have ``run_id`` and skip delivering ``seq <= delivered_through``.

    Applies to the next ``prompt()``/``resume()`` only. ``provider``, when given, serves
    every later request of the agent (as ``Agent(provider=...)`` would). ``recorder``,
    when given, is subscribed ahead of every subscriber, those the agent already has
    included. Call it while the agent is idle.
    """
    if delivered_through < 0:
        raise ValueError(f"delivered_through must be >= 0, got {delivered_through}")
    agent._core.next_run = (run_id, delivered_through)
    if provider is not None:
        agent._provider_override = provider
    if recorder is not None:
        agent._core.listeners = (recorder, *agent._core.listeners)


def reaches_others(agent: Agent) -> bool:
    """Whether the agent's events reach anyone besides its first subscriber (the recorder):
    another subscriber, or an ``on_event`` observer that may want them."""
    if len(agent._core.listeners) > 1:
        return True
    plan = agent._hooks.relay.plan("on_event")
    return any(impl.wanted is None or impl.wanted(agent) for impl in plan)
