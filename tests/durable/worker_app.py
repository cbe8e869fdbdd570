"""A durable worker process for the tests: a scripted model, tools that append to a file.

Run as ``python worker_app.py DIR URL EXECUTOR_ID [CRASH]`` (``EXECUTOR_ID`` ``""``: the
default). Once it serves, ``DIR/ready-PID`` holds its executor id. Every run follows the same
script (a function of the request, so a recovered worker continues it): ``TURNS`` turns
with one tool call each, then a text reply. ``CRASH`` names where the *first* worker
stops until the test kills it (a marker file ``DIR/crashed`` says it got there):

- ``stream``: in the middle of the second reply's stream (the request is in flight):
  the model stops after three deltas, and the marker is written once a listener has seen
  the third (the request step streams ahead of the kernel, so a marker written by the
  model could let the test kill the worker between journaling an event and delivering it,
  which loses that event to this process's listeners, as documented);
- ``tool``: inside call ``c2``, of the idempotent tool ``note``;
- ``tool_once``: inside call ``c1``, of the non-idempotent tool ``append``;
- ``between``: in a listener of the second ``turn_end``;
- ``compaction``: inside the compaction before the third request;
- ``at:TYPE:TURN``: in a listener of the first event of type ``TYPE`` in turn ``TURN``
  (a step boundary: the step before it is checkpointed, the next one not started).

With ``MODEL=fresh`` the model never repeats itself: every reply has new text and new
call ids, and after ``StreamDone`` the provider goes on working (as an HTTP provider
drains its response) until the stream is closed. Each request it answers is logged to
``DIR/requests.log`` with the reply's id.

Tools write one line per execution to ``DIR/tools.log``: ``RUN CALL start`` and
``RUN CALL done``. A listener writes each event it sees to ``DIR/events-<pid>.jsonl``
(with ``LISTEN=0`` there is none: nobody but the journal sees a run's events). With
``FACTORY_LISTENER=1`` the factory subscribes one more listener, which looks each event
up in the journal as it sees it and writes ``seq type journaled|missing`` to
``DIR/factory-<pid>.log``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mainspring
from mainspring import Agent, CompactionResult, Settings, UserMessage
from mainspring.events import event_to_dict
from mainspring.testing import FauxProvider, faux

TURNS = 3
DIR = Path(sys.argv[1]) if __name__ == "__main__" else Path(".")
CRASH = sys.argv[4] if __name__ == "__main__" and len(sys.argv) > 4 else ""
MARKER = DIR / "crashed"


def _crash_here(point: str) -> bool:
    """Whether this process stops here (the first time only: the marker says it did)."""
    if point != CRASH or MARKER.exists():
        return False
    MARKER.write_text(str(os.getpid()))
    return True


async def _forever() -> None:
    await asyncio.Event().wait()


def _log(line: str, name: str = "tools.log") -> None:
    with open(DIR / name, "a") as file:
        file.write(line + "\n")


def _replies(messages: Any) -> int:
    """The replies so far, counting those a compaction summarised."""
    count = 0
    for message in messages:
        if getattr(message, "role", None) == "assistant":
            count += 1
        elif isinstance(message, UserMessage) and str(message.content).startswith("Summary"):
            count += int(str(message.content).split()[1])
    return count


def _reply(request: Any) -> Any:
    """The scripted model: turn ``k`` calls a tool, the last turn answers."""
    first = request.messages[0] if request.messages else None
    if isinstance(first, UserMessage) and str(first.content).startswith("Long reply"):
        return faux.reply(faux.text("z" * LONG_REPLY))
    turn = _replies(request.messages)
    if turn < TURNS:
        tool = "append" if turn % 2 else "note"
        args = {"text": f"step {turn} " + "x" * 40}
        return faux.reply(
            faux.text(f"Turn {turn}: calling {tool}."), faux.tool_call(tool, args, f"c{turn}")
        )
    return faux.reply(faux.text("All done: " + "y" * 60))


LONG_REPLY = 8000
"""A run whose prompt starts with "Long reply" gets one text reply this long."""

STREAM_STOP = 3
"""With ``CRASH=stream``, the second reply stops after this many deltas."""


class CrashingProvider:
    """The faux model, stopping mid-stream of the second reply when told to."""

    def __init__(self) -> None:
        self.inner = FauxProvider([_reply] * 50, chunk_size=8)
        self.name = self.inner.name

    async def stream(self, request: Any, signal: Any) -> AsyncIterator[Any]:
        turn = _replies(request.messages)
        count = 0
        async for delta in self.inner.stream(request, signal):
            yield delta
            count += 1
            if turn == 1 and count == STREAM_STOP and CRASH == "stream" and not MARKER.exists():
                await _forever()  # the listener writes the marker once it saw this delta


class FreshProvider:
    """A model that never says the same thing twice and works after ``StreamDone``."""

    name = "fresh"

    async def stream(self, request: Any, signal: Any) -> AsyncIterator[Any]:
        from mainspring.providers.base import (
            StreamDone,
            TextDelta,
            ToolCallDelta,
            ToolCallEnd,
            ToolCallStart,
        )

        turn = _replies(request.messages)
        reply = uuid.uuid4().hex
        _log(f"{turn} {reply}", "requests.log")
        for part in (f"Reply {reply} ", f"to turn {turn}."):
            yield TextDelta(part)
        if turn < TURNS:
            tool = "append" if turn % 2 else "note"
            call = f"call_{reply[:12]}"
            yield ToolCallStart(call, tool)
            yield ToolCallDelta(call, json.dumps({"text": f"step {turn} {reply}"}))
            yield ToolCallEnd(call)
            yield StreamDone("tool_use")
        else:
            yield StreamDone("stop")
        await _forever()  # the rest of the response, until the stream is closed


def _tool(name: str, idempotent: bool, point: str, stop_in: str) -> mainspring.Tool:
    async def execute(args: dict[str, Any], ctx: Any) -> str:
        from dbos import DBOS

        run = f"{DBOS.workflow_id} {os.getpid()}" if os.environ.get("LOG_RUNS") else ""
        _log(f"{ctx.tool_call_id} {name} start {run}".strip())
        if ctx.tool_call_id == stop_in and _crash_here(point):
            await _forever()
        if os.environ.get("HOLD") == ctx.tool_call_id:
            # the test says when, writing to the FIFO DIR/go (it stops the database first)
            await asyncio.to_thread((DIR / "go").read_text)
        ctx.update({"progress": args["text"][:6]})
        _log(f"{ctx.tool_call_id} {name} done {run}".strip())
        return f"{name} ok: {args['text'][:7]}"

    schema = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }
    return mainspring.Tool(name, f"{name} a line", schema, execute, idempotent=idempotent)


class Compactor:
    """Compacts once, before the third request; stops there when told to."""

    PLUGIN_NAME = "test-compactor"
    CAPABILITIES = ("compaction", "context")

    @mainspring.hookimpl
    def count_tokens(self, messages: Any, model: Any) -> int | None:
        summarised = any(
            isinstance(m, UserMessage) and str(m.content).startswith("Summary") for m in messages
        )
        replies = sum(1 for m in messages if getattr(m, "role", None) == "assistant")
        return 10**9 if replies >= 2 and not summarised else 10

    @mainspring.hookimpl
    async def compact(self, messages: Any, model: Any, reason: str) -> CompactionResult:
        if _crash_here("compaction"):
            await _forever()
        replies = sum(1 for m in messages[:-2] if getattr(m, "role", None) == "assistant")
        summary = UserMessage(content=f"Summary: {replies} earlier replies")
        return CompactionResult(messages=(summary, *messages[-2:]))


NOTE = _tool("note", True, "tool", "c2")
APPEND = _tool("append", False, "tool_once", "c1")
"""The tools of every run: one object each, as a plugin registers its tools."""


class BlockAppend:
    """With ``GATE=1``: blocks the calls of the ``APPEND`` object (an identity check)."""

    PLUGIN_NAME = "test-identity-gate"
    CAPABILITIES = ("gate",)

    @mainspring.hookimpl
    def before_tool_call(self, tool: mainspring.Tool) -> Any:
        return mainspring.Block("not this tool object") if tool is APPEND else None


class Redactor:
    """With ``REDACT=1``: every tool result's " ok: " becomes " [REDACTED]: "."""

    PLUGIN_NAME = "test-redactor"
    CAPABILITIES = ("redact",)

    @mainspring.hookimpl
    @mainspring.redactor
    def after_tool_result(self, result: mainspring.ToolResult) -> mainspring.ToolResult:
        content = tuple(
            block.model_copy(update={"text": block.text.replace(" ok: ", " [REDACTED]: ")})
            if getattr(block, "text", None)
            else block
            for block in result.content
        )
        return result.model_copy(update={"content": content})


class AskForAppend:
    """A gate that asks a person about every ``append`` call (with ``ASK=1``)."""

    PLUGIN_NAME = "test-asker"
    CAPABILITIES = ("gate",)

    @mainspring.hookimpl
    def before_tool_call(self, call: Any) -> Any:
        return mainspring.Ask("appending needs a person") if call.name == "append" else None


def _journal_checker(url: str) -> Any:
    """A listener that looks each event it sees up in the journal (``FACTORY_LISTENER``)."""
    from mainspring.durable.journal import Journal

    journal = Journal(url)
    path = DIR / f"factory-{os.getpid()}.log"

    def check(event: Any, signal: Any) -> None:
        rows = journal.read_events(event.run_id, after_seq=event.seq - 1, limit=1)
        found = bool(rows) and rows[0]["seq"] == event.seq
        with open(path, "a") as file:
            file.write(f"{event.seq} {event.type} {'journaled' if found else 'missing'}\n")

    return check


def factory(spec: dict[str, Any]) -> Agent:
    """Each run's agent: the crashing faux model, two tools, the compactor."""
    agent = _agent()
    if os.environ.get("FACTORY_LISTENER") == "1":
        agent.subscribe(_journal_checker(sys.argv[2]))
    return agent


def _agent() -> Agent:
    return Agent(
        model="faux:scripted",
        provider=FreshProvider() if os.environ.get("MODEL") == "fresh" else CrashingProvider(),
        tools=[NOTE, APPEND],
        plugins=[
            Compactor(),
            *([AskForAppend()] if os.environ.get("ASK") == "1" else []),
            *([Redactor()] if os.environ.get("REDACT") == "1" else []),
            *([BlockAppend()] if os.environ.get("GATE") == "1" else []),
        ],
        autoload=False,
        settings=Settings.model_validate({"approvals": {"timeout_s": 3600}}),
    )


def listen(agent: Agent, run_id: str) -> None:
    """Keep every event this process delivers; stop between turns when told to."""
    path = DIR / f"events-{os.getpid()}.jsonl"
    turn = {"number": -1, "updates": 0}

    def write(event: Any) -> None:
        with open(path, "a") as file:
            file.write(json.dumps(event_to_dict(event)) + "\n")

    async def keep(event: Any, signal: Any) -> None:
        write(event)
        if event.type == "turn_start":
            turn.update(number=event.turn, updates=0)
        elif event.type == "message_update":
            turn["updates"] += 1
            if turn["number"] == 1 and turn["updates"] == STREAM_STOP:
                _crash_here("stream")
        if event.type == "turn_end" and event.turn == 1 and _crash_here("between"):
            await _forever()
        if f"at:{event.type}:{event.turn}" == CRASH and _crash_here(CRASH):
            await _forever()

    agent.subscribe(keep)


if __name__ == "__main__":
    import threading

    from dbos import DBOS

    from mainspring.durable import start_worker

    url, executor = sys.argv[2], sys.argv[3]
    concurrency = int(os.environ.get("WORKER_CONCURRENCY", "4"))
    start_worker(
        url=url,
        executor_id=executor or None,  # "": the default, the first free HOST-N
        factory=factory,
        listen=None if os.environ.get("LISTEN") == "0" else listen,
        concurrency=concurrency,
    )
    (DIR / f"ready-{os.getpid()}").write_text(DBOS.executor_id)
    threading.Event().wait()  # until the test kills this process
