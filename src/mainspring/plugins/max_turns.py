"""Built-in: a safety cap on the turns of one run (``settings.max_turns``, default 200).

Long coding runs are normal; the cap only stops a run that loops. It ends the run with
``agent_end.reason="stopped_by_hook"`` and a detail that names the limit. Disable it
with ``disable_plugins=["max_turns"]``.
"""

from __future__ import annotations

from typing import Any

from ..contract.errors import StopRun
from ..contract.markers import hookimpl

__all__ = ["should_stop_after_turn"]

CAPABILITIES = ("observe",)
"""What this plugin does (its manifest; see ``docs/capabilities.md``)."""


@hookimpl(trylast=True)
def should_stop_after_turn(state: Any, agent: Any) -> bool:
    """Stop once the run has completed ``settings.max_turns`` turns."""
    limit = agent.settings.max_turns
    if state.turns_completed >= limit:
        raise StopRun(f"turn limit reached: the run completed {limit} turns (settings.max_turns)")
    return False
