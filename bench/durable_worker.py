"""The worker process of ``bench.durable``: ``python -m bench.durable_worker DIR URL ID``.

Each run is ``TURNS`` turns (from the spec's options, default 1) of one tool call each on
a scripted model, then a text reply. With ``CRASH_AT=k`` the first worker stops at the
start of turn ``k``'s tool (writing ``DIR/crashed``) until it is killed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import mainspring
from mainspring import Agent, Settings
from mainspring.testing import FauxProvider, faux

DIR = Path(sys.argv[1]) if __name__ == "__main__" else Path(".")
CRASH_AT = int(os.environ.get("CRASH_AT", "-1"))


def _script(turns: int, reply_chars: int) -> Any:
    def reply(request: Any) -> Any:
        turn = sum(1 for m in request.messages if getattr(m, "role", None) == "assistant")
        if turn < turns:
            return faux.reply(faux.text(f"turn {turn}"), faux.tool_call("tick", {}, f"c{turn}"))
        return faux.reply(faux.text("done" if not reply_chars else "y" * reply_chars))

    return reply


async def _tick(args: Any, ctx: Any) -> str:
    if ctx.tool_call_id == f"c{CRASH_AT}" and not (DIR / "crashed").exists():
        (DIR / "crashed").write_text(str(os.getpid()))
        await asyncio.Event().wait()
    return "ok"


def factory(spec: dict[str, Any]) -> Agent:
    """A scripted agent with one tool."""
    options = spec.get("options", {})
    turns, reply_chars = int(options.get("turns", 1)), int(options.get("reply_chars", 0))
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    return Agent(
        model="faux:bench",
        provider=FauxProvider([_script(turns, reply_chars)] * (turns + 2), chunk_size=20),
        tools=[mainspring.Tool("tick", "tick", schema, _tick)],
        autoload=False,
        settings=Settings(),
    )


if __name__ == "__main__":
    from mainspring.durable import run_worker

    (DIR / f"ready-{os.getpid()}").write_text("")
    run_worker(url=sys.argv[2], executor_id=sys.argv[3], factory=factory, concurrency=8)
