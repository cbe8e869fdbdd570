"""W1 and W3 through Strands Agents' streaming loop (own venv; prints JSON).

The scripted model is a ``Model`` whose ``stream`` yields pre-built Converse-style stream
events; the one listener consumes ``Agent.stream_async()`` (the printing callback
handler is off).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from importlib.metadata import version
from typing import Any

from _peer import PIECES, TURNS, measure
from strands import Agent, tool
from strands.models.model import Model

END = {"metadata": {"usage": {"inputTokens": 120, "outputTokens": 12, "totalTokens": 132},
                    "metrics": {"latencyMs": 0}}}  # fmt: skip


def _tool_reply(i: int) -> list[dict[str, Any]]:
    return [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"start": {"toolUse": {"toolUseId": f"call_{i}", "name": "noop"}}}},
        {"contentBlockDelta": {"delta": {"toolUse": {"input": "{}"}}}},
        {"contentBlockStop": {}},
        {"messageStop": {"stopReason": "tool_use"}},
        END,
    ]


def _text_reply(pieces: list[str]) -> list[dict[str, Any]]:
    return [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"start": {}}},
        *({"contentBlockDelta": {"delta": {"text": piece}}} for piece in pieces),
        {"contentBlockStop": {}},
        {"messageStop": {"stopReason": "end_turn"}},
        END,
    ]


W1_SCRIPT = [_tool_reply(i) for i in range(TURNS - 1)] + [_text_reply(["done"])]
W3_SCRIPT = [_text_reply(PIECES)]


class ScriptModel(Model):
    def __init__(self, script: list[Any], marks: list[float], clock: Any) -> None:
        self._replies = iter(script)
        self._marks = marks
        self._clock = clock

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        self._marks.append(self._clock())
        for event in next(self._replies):
            yield event


@tool
async def noop() -> str:
    """Do nothing and say so."""
    return "ok"


async def run_once(workload: str, marks: list[float], clock: Any) -> int:
    script = W1_SCRIPT if workload == "W1" else W3_SCRIPT
    agent = Agent(model=ScriptModel(script, marks, clock), tools=[noop], callback_handler=None)
    seen = 0
    async for _ in agent.stream_async("go"):
        seen += 1
    return seen


if __name__ == "__main__":
    out = asyncio.run(measure(run_once, int(sys.argv[1]) if len(sys.argv) > 1 else 5))
    print(json.dumps({"framework": "strands", "version": version("strands-agents"), **out}))
