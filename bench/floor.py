"""The floor: the least a hand-written asyncio agent loop does for the same work.

Plain dicts, no validation, no immutability, no phases, retries, compaction, gates or
error containment: a list of listeners called per event (awaited when they return an
awaitable), tool calls run with ``asyncio.gather``, and optional "plugins" whose hook
methods are called directly at the same points as mainspring's hooks. It emits the same
events as mainspring in the same places, so a listener sees the same count of events.
Whatever mainspring costs beyond this is the price of its guarantees.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

__all__ = ["FloorAgent", "FloorModel", "FloorTool"]

Event = dict[str, Any]
Listener = Callable[[Event], "Awaitable[None] | None"]
FloorModel = Callable[[dict[str, Any]], AsyncIterator[dict[str, Any]]]
FloorTool = Callable[[dict[str, Any]], Awaitable[str]]


class FloorAgent:
    """A transcript, tools, listeners and a model; ``prompt()`` runs to the end."""

    __slots__ = ("listeners", "messages", "model", "plugins", "seq", "specs", "tools")

    def __init__(
        self,
        model: FloorModel,
        tools: dict[str, FloorTool] | None = None,
        messages: Sequence[dict[str, Any]] = (),
        plugins: Sequence[Any] = (),
    ) -> None:
        self.model = model
        self.tools = tools or {}
        self.specs = [{"name": name, "parameters": {}} for name in self.tools]
        self.messages: list[dict[str, Any]] = list(messages)
        self.listeners: list[Listener] = []
        self.plugins = list(plugins)
        self.seq = 0

    async def emit(self, event: Event) -> None:
        self.seq += 1
        event["seq"] = self.seq
        for listener in self.listeners:
            result = listener(event)
            if result is not None:
                await result
        for plugin in self.plugins:
            plugin.on_event(event)

    async def _add(self, message: dict[str, Any]) -> None:
        await self.emit({"type": "message_start", "message": message})
        self.messages.append(message)
        await self.emit({"type": "message_end", "message": message})

    async def prompt(self, text: str) -> None:
        await self.emit({"type": "agent_start"})
        inputs = [{"role": "user", "content": text}]
        while True:
            await self.emit({"type": "turn_start"})
            for message in inputs:
                await self._add(message)
            reply = await self._request()
            results = await self._run_tools(reply["tool_calls"]) if reply["tool_calls"] else []
            await self.emit({"type": "turn_end", "message": reply, "tool_results": results})
            if any(plugin.should_stop_after_turn(self) for plugin in self.plugins):
                break
            if not reply["tool_calls"]:
                break
            inputs = []
        await self.emit({"type": "agent_end"})

    async def _request(self) -> dict[str, Any]:
        context = list(self.messages)
        for plugin in self.plugins:
            context = plugin.transform_context(context) or context
        for plugin in self.plugins:
            context = plugin.convert_to_llm(context) or context
        for plugin in self.plugins:
            plugin.count_tokens(context)
        message: dict[str, Any] = {"role": "assistant", "parts": [], "tool_calls": []}
        calls: dict[str, dict[str, Any]] = {}
        started = False
        async for delta in self.model({"messages": context, "tools": self.specs}):
            kind = delta["type"]
            if kind == "text":
                message["parts"].append(delta["text"])
            elif kind == "tool_call_start":
                calls[delta["id"]] = {"id": delta["id"], "name": delta["name"], "json": []}
            elif kind == "tool_call_delta":
                calls[delta["id"]]["json"].append(delta["fragment"])
            elif kind == "tool_call_end":
                call = calls[delta["id"]]
                call["args"] = json.loads("".join(call["json"]) or "{}")
                message["tool_calls"].append(call)
            elif kind == "usage":
                message["usage"] = delta
            elif kind == "done":
                message["stop_reason"] = delta["stop_reason"]
                break
            if not started:
                started = True
                await self.emit({"type": "message_start", "message": message})
            await self.emit({"type": "message_update", "message": message, "delta": delta})
        message["text"] = "".join(message.pop("parts"))
        self.messages.append(message)
        await self.emit({"type": "message_end", "message": message})
        return message

    async def _run_tools(self, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for call in calls:
            await self.emit(
                {"type": "tool_execution_start", "id": call["id"], "args": call["args"]}
            )
            for plugin in self.plugins:
                plugin.before_tool_call(call)
            await self.emit({"type": "tool_decision", "id": call["id"], "decision": "allow"})
        outputs = await asyncio.gather(*(self._run_tool(call) for call in calls))
        results = []
        for call, output in zip(calls, outputs, strict=True):
            await self.emit({"type": "tool_execution_end", "id": call["id"], "result": output})
            result = {"role": "tool_result", "tool_call_id": call["id"], "content": output}
            await self._add(result)
            results.append(result)
        return results

    async def _run_tool(self, call: dict[str, Any]) -> str:
        tool = self.tools.get(call["name"])
        if tool is None:
            return f"Tool {call['name']} not found"
        try:
            output = await tool(call["args"])
        except Exception as error:
            output = f"failed: {error}"
        for plugin in self.plugins:
            output = plugin.after_tool_result(output) or output
        return output


def script(
    replies: Sequence[tuple[dict[str, Any], ...]], called_at: list[float] | None = None
) -> FloorModel:
    """A floor model yielding the pre-built ``replies``, one per request.

    ``called_at`` collects the CPU time at each call (as :class:`~bench.common.ScriptProvider`).
    """
    remaining = iter(replies)

    def model(request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        if called_at is not None:
            called_at.append(time.process_time())
        return _deltas(next(remaining))

    return model


async def _deltas(reply: tuple[dict[str, Any], ...]) -> AsyncIterator[dict[str, Any]]:
    for delta in reply:
        yield delta


async def noop(args: dict[str, Any]) -> str:
    """The floor's trivial tool."""
    return "ok"
