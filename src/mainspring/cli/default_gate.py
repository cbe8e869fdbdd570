"""The command's default gate: the coding tools that change things ask first.

``mainspring run`` and ``chat`` add :class:`AskBeforeChanging` next to the terminal
approver. A call of a tool in :data:`ASK_FIRST` (``bash`` and ``write`` of the
``mainspring-coding-tools`` plugin, named by tool and plugin, so another plugin's tool of
that name is not caught) is answered with ``Ask``: at a terminal the person is asked;
without one (piped input) the terminal approver refuses it; ``--yes`` and ``--no`` answer
it. The gate stands aside when the session has an approver of its own configured: a plugin
other than the terminal approver implements ``request_approval``, or the settings turn
on ``approvals.api``; what to ask about is then that configuration's business.
"""

from __future__ import annotations

from typing import Any, Final

from ..contract.decisions import Ask
from ..contract.markers import hookimpl

__all__ = ["ASK_FIRST", "AskBeforeChanging"]

ASK_FIRST: Final = frozenset(
    {("mainspring-coding-tools", "bash"), ("mainspring-coding-tools", "write")}
)
"""``(plugin, tool)``: the calls that ask first (they run commands or write files)."""

_WHY = {
    "bash": "it runs a shell command",
    "write": "it writes a file",
}


class AskBeforeChanging:
    """A ``before_tool_call`` gate asking about :data:`ASK_FIRST` (see the module).

    ``terminal`` is the terminal approver the command added (its own ``request_approval``
    does not count as a configured approver).
    """

    PLUGIN_NAME = "mainspring-cli-ask-first"
    CAPABILITIES = ("gate",)

    def __init__(self, terminal: Any) -> None:
        self.terminal = terminal

    def _configured_approver(self, agent: Any) -> bool:
        if agent.settings.approvals.api:
            return True
        return any(
            "request_approval" in info.hooks and info.plugin is not self.terminal
            for info in agent.plugins
        )

    @hookimpl
    def before_tool_call(self, tool: Any, agent: Any) -> Any:
        """``Ask`` for a tool of :data:`ASK_FIRST` when no approver is configured."""
        if (agent.tool_owners.get(tool.name), tool.name) not in ASK_FIRST:
            return None
        if self._configured_approver(agent):
            return None
        return Ask(
            f"{_WHY.get(tool.name, 'it changes things')}; the command line asks before "
            "bash and write run when no approver is configured (--yes allows them)"
        )
