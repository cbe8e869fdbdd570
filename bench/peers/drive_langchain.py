"""W1 and W3 through LangChain's ``create_agent`` (LangGraph) streaming loop (own venv).

The scripted model is a ``BaseChatModel`` whose ``_astream`` yields pre-built
``AIMessageChunk``s (``bind_tools`` returns it unchanged); the one listener consumes
``agent.astream(..., stream_mode="messages")``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from importlib.metadata import version
from typing import Any

from _peer import PIECES, TURNS, measure
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.tools import tool
from pydantic import PrivateAttr

USAGE = {"input_tokens": 120, "output_tokens": 12, "total_tokens": 132}


def _tool_reply(i: int) -> list[ChatGenerationChunk]:
    chunk = AIMessageChunk(
        content="",
        tool_call_chunks=[
            {"name": "noop", "args": "{}", "id": f"call_{i}", "index": 0, "type": "tool_call_chunk"}
        ],
        usage_metadata=USAGE,
    )
    return [ChatGenerationChunk(message=chunk)]


def _text_reply(pieces: list[str]) -> list[ChatGenerationChunk]:
    chunks = [ChatGenerationChunk(message=AIMessageChunk(content=piece)) for piece in pieces]
    chunks.append(ChatGenerationChunk(message=AIMessageChunk(content="", usage_metadata=USAGE)))
    return chunks


W1_SCRIPT = [_tool_reply(i) for i in range(TURNS - 1)] + [_text_reply(["done"])]
W3_SCRIPT = [_text_reply(PIECES)]


class ScriptChat(BaseChatModel):
    _script: Any = PrivateAttr()
    _marks: Any = PrivateAttr()
    _clock: Any = PrivateAttr()

    def setup(self, script: list[Any], marks: list[float], clock: Any) -> ScriptChat:
        self._script, self._marks, self._clock = iter(script), marks, clock
        return self

    @property
    def _llm_type(self) -> str:
        return "script"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("streaming only")

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        self._marks.append(self._clock())
        for chunk in next(self._script):
            yield chunk


@tool
async def noop() -> str:
    """Do nothing and say so."""
    return "ok"


async def run_once(workload: str, marks: list[float], clock: Any) -> int:
    script = W1_SCRIPT if workload == "W1" else W3_SCRIPT
    model = ScriptChat().setup(script, marks, clock)
    agent = create_agent(model, tools=[noop])
    seen = 0
    config = {"recursion_limit": 2 * TURNS + 10}
    async for _ in agent.astream(
        {"messages": [("user", "go")]}, config=config, stream_mode="messages"
    ):
        seen += 1
    return seen


if __name__ == "__main__":
    out = asyncio.run(measure(run_once, int(sys.argv[1]) if len(sys.argv) > 1 else 5))
    print(json.dumps({"framework": "langchain", "version": version("langchain"), **out}))
